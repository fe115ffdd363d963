"""Training on inputs of different lengths on different ranks, as
``torch.distributed.algorithms.join``.

Inside ``with Join([model, optimizer]):`` a rank that runs out of inputs leaves its loop
and, at the end of the block, keeps *shadowing* the collectives the other ranks still
run (each :class:`Joinable` says how, through its :class:`JoinHook`) until every rank has
run out. Each iteration of the ranks still training begins with
:meth:`Join.notify_join_context`, an all-reduce that the joined ranks answer with 0; when
its sum is 0 every rank is done, and each hook's :meth:`JoinHook.post_hook` runs (DDP
copies the parameters of the last rank to finish).
"""

from __future__ import annotations

import abc

import torcia
from torcia.distributed import collectives as C
from torcia.distributed.group import ReduceOp

__all__ = ["Join", "JoinHook", "Joinable"]


class JoinHook:
    """What a :class:`Joinable` does on a rank that ran out of inputs:
    :meth:`main_hook` once per iteration the other ranks still run, :meth:`post_hook`
    once all are done.

    Examples
    --------
    >>> from torcia.distributed.algorithms.join import JoinHook
    >>> JoinHook().main_hook() is None
    True
    """

    def main_hook(self) -> None:
        """Shadow one iteration's collectives (the default does nothing)."""

    def post_hook(self, is_last_joiner: bool) -> None:
        """Run once every rank has joined; ``is_last_joiner`` tells whether this rank
        was the last to run out."""


class Joinable(abc.ABC):
    """A class whose collectives :class:`Join` can shadow: it gives a
    :meth:`join_hook`, the device and the process group of its collectives, and calls
    :meth:`Join.notify_join_context` at the start of each iteration.

    Examples
    --------
    >>> from torcia.distributed.algorithms.join import Joinable
    >>> issubclass(__import__("torcia").distributed.DistributedDataParallel, Joinable)
    True
    """

    @abc.abstractmethod
    def join_hook(self, **kwargs) -> JoinHook:
        """The hook to run on a rank that ran out of inputs."""

    @property
    @abc.abstractmethod
    def join_device(self):
        """The device of the join's all-reduces."""

    @property
    @abc.abstractmethod
    def join_process_group(self):
        """The process group of the join's all-reduces (None: the default group)."""


class _JoinConfig:
    def __init__(self, enable, throw_on_early_termination, is_first_joinable):
        self.enable = enable
        self.throw_on_early_termination = throw_on_early_termination
        self.is_first_joinable = is_first_joinable


class Join:
    """The context manager of uneven inputs; see the module's documentation.

    Parameters
    ----------
    joinables : list of Joinable
        What takes part (a DistributedDataParallel, a ZeroRedundancyOptimizer...).
    enable : bool
        False makes the context do nothing.
    throw_on_early_termination : bool
        Raise on every rank as soon as one runs out, instead of shadowing.
    **kwargs
        Passed to each joinable's ``join_hook``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.algorithms.join import Join
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = dist.DistributedDataParallel(torcia.nn.Linear(2, 1))
    >>> with Join([model]):
    ...     for _ in range(2):
    ...         model(torcia.ones(1, 2)).sum().backward()
    >>> dist.destroy_process_group()
    """

    def __init__(self, joinables, enable: bool = True,
                 throw_on_early_termination: bool = False, **kwargs):
        if not joinables:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable = enable
        self._throw = throw_on_early_termination
        for i, joinable in enumerate(self._joinables):
            joinable._join_config = _JoinConfig(enable, throw_on_early_termination, i == 0)
        groups = {id(j.join_process_group) for j in self._joinables}
        if len(groups) > 1:
            raise ValueError("Using join context manager with multiple process groups")
        self._group = self._joinables[0].join_process_group
        self._rank = C.get_rank(self._group)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if not self._enable or exc_type is not None:
                return False
            is_last_joiner = True
            while True:
                flag = torcia.zeros(1, dtype=torcia.int64)
                C.all_reduce(flag, ReduceOp.SUM, self._group)
                if flag.item() == 0:
                    break
                if self._throw:
                    raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")
                for hook in self._hooks:
                    hook.main_hook()
                is_last_joiner = False
            for hook in self._hooks:
                hook.post_hook(is_last_joiner)
            return False
        finally:
            for joinable in self._joinables:
                joinable._join_config = None

    @staticmethod
    def notify_join_context(joinable: Joinable) -> int | None:
        """Called by a joinable at the start of each iteration on a rank still training:
        the first joinable of the context all-reduces a 1 (the joined ranks add 0), and
        gets the number of ranks still training; None for the others, or outside a
        context. With ``throw_on_early_termination``, raises once a rank has run out."""
        config = getattr(joinable, "_join_config", None)
        if config is None or not config.enable or not config.is_first_joinable:
            return None
        flag = torcia.ones(1, dtype=torcia.int64)
        C.all_reduce(flag, ReduceOp.SUM, joinable.join_process_group)
        active = int(flag.item())
        if config.throw_on_early_termination and active < C.get_world_size(
                joinable.join_process_group):
            raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing "
                               "across all ranks.")
        return active
