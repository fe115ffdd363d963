"""``DistributedSampler``: each of ``num_replicas`` processes sees its own share of a dataset.

torcia-data does not depend on torcia-distributed: the world size and rank are arguments.
When they are left out they are read from the ``WORLD_SIZE`` and ``RANK`` environment
variables that launchers set.
"""

from __future__ import annotations

import math
import os

import torcia
from torcia.data.sampler import Sampler

__all__ = ["DistributedSampler"]


def _from_env(value, var: str, what: str) -> int:
    if value is not None:
        return value
    if var not in os.environ:
        raise ValueError(
            f"DistributedSampler needs {what}: pass it (e.g. from torcia.distributed) or set "
            f"the {var} environment variable"
        )
    return int(os.environ[var])


class DistributedSampler(Sampler):
    """The indices of one replica: every ``num_replicas``-th index of a (shuffled) order,
    starting at ``rank``.

    Without ``drop_last`` the order is padded by repeating its start so that every replica
    gets the same count; with it, the tail that does not divide evenly is dropped. With
    ``shuffle`` the order is a permutation seeded by ``seed + epoch``, the same on every
    replica: call :meth:`set_epoch` before each epoch to change it.

    Examples
    --------
    >>> from torcia.data import DistributedSampler
    >>> [list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False))
    ...  for r in (0, 1)]
    [[0, 2, 4], [1, 3, 0]]
    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False,
    ...                         drop_last=True))
    [1, 3]
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        num_replicas = _from_env(num_replicas, "WORLD_SIZE", "num_replicas")
        rank = _from_env(rank, "RANK", "rank")
        if num_replicas < 1:
            raise ValueError(f"num_replicas should be a positive integer, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = torcia.Generator().manual_seed(self.seed + self.epoch)
            order = torcia.randperm(n, generator=g).tolist()
        else:
            order = list(range(n))
        if self.drop_last:
            order = order[: self.total_size]
        else:
            missing = self.total_size - len(order)
            order += (order * math.ceil(missing / max(len(order), 1)))[:missing]
        return iter(order[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch, which seeds the shuffle (same value on every replica)."""
        self.epoch = epoch
