"""Samplers: the order in which a DataLoader visits a map-style dataset.

A sampler runs in the main process only, so the order it gives depends on its generator and
never on the number of workers.
"""

from __future__ import annotations

import itertools
from typing import Generic, TypeVar

import torcia
from torcia.random import default_generator

__all__ = [
    "BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
    "WeightedRandomSampler",
]


_T_co = TypeVar("_T_co", covariant=True)


class Sampler(Generic[_T_co]):
    """Base class: subclasses implement ``__iter__`` (indices or batches of indices) and,
    where the count is known, ``__len__``. Generic in what it yields, as PyTorch's
    (``Sampler[int]``, ``Sampler[list[int]]``).

    Examples
    --------
    >>> from torcia.data import Sampler
    >>> class EvenFirst(Sampler):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter([*range(0, self.n, 2), *range(1, self.n, 2)])
    ...     def __len__(self):
    ...         return self.n
    >>> list(EvenFirst(5))
    [0, 2, 4, 1, 3]
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError("Subclasses of Sampler should implement __iter__.")


def _check_positive_int(value, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")


def _check_bool(value, name: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} should be a boolean value, but got {name}={value!r}")


def _generator_for_epoch(generator) -> torcia.Generator:
    """The generator to draw one pass with: ``generator`` itself, or, when None, a fresh one
    seeded from the default generator (so ``torcia.manual_seed`` fixes the order)."""
    if generator is not None:
        return generator
    return torcia.Generator().manual_seed(default_generator.spawn_seed())


class SequentialSampler(Sampler):
    """Indices ``0, 1, ..., len(data_source) - 1`` in order.

    Examples
    --------
    >>> from torcia.data import SequentialSampler
    >>> list(SequentialSampler("abc"))
    [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order: a permutation per pass over the data, or, with
    ``replacement=True``, independent uniform draws.

    Parameters
    ----------
    data_source : sized
        The dataset.
    replacement : bool
        Draw with replacement.
    num_samples : int, optional
        How many indices one iteration yields (default ``len(data_source)``); without
        replacement, more than ``len(data_source)`` chains several permutations.
    generator : torcia.Generator, optional
        The source of randomness; by default each iteration seeds a fresh generator from
        the default one.

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import RandomSampler
    >>> s = RandomSampler(range(5), generator=torcia.Generator().manual_seed(0))
    >>> sorted(s)
    [0, 1, 2, 3, 4]
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        _check_bool(replacement, "replacement")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _check_positive_int(self.num_samples, "num_samples")

    @property
    def num_samples(self) -> int:
        # read the length each time: the data source may change size between epochs
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = _generator_for_epoch(self.generator)
        if self.replacement:
            # in blocks of 32 as PyTorch draws them: num_samples may be far beyond memory
            for _ in range(self.num_samples // 32):
                yield from torcia.randint(n, (32,), generator=g).tolist()
            yield from torcia.randint(n, (self.num_samples % 32,), generator=g).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from torcia.randperm(n, generator=g).tolist()
        yield from torcia.randperm(n, generator=g)[: self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order.

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import SubsetRandomSampler
    >>> s = SubsetRandomSampler([10, 20, 30], generator=torcia.Generator().manual_seed(0))
    >>> sorted(s)
    [10, 20, 30]
    """

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        g = _generator_for_epoch(self.generator)
        for i in torcia.randperm(len(self.indices), generator=g).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """Indices ``0 .. len(weights) - 1`` drawn with probability proportional to ``weights``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import WeightedRandomSampler
    >>> s = WeightedRandomSampler([0.0, 1.0, 0.0], 4, generator=torcia.Generator().manual_seed(0))
    >>> list(s)
    [1, 1, 1, 1]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_positive_int(num_samples, "num_samples")
        _check_bool(replacement, "replacement")
        weights = torcia.as_tensor(weights, dtype=torcia.float64)
        if weights.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape "
                f"{tuple(weights.shape)}"
            )
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        g = _generator_for_epoch(self.generator)
        drawn = torcia.multinomial(self.weights, self.num_samples, self.replacement, generator=g)
        return iter(drawn.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Group the indices of ``sampler`` into lists of ``batch_size``.

    Examples
    --------
    >>> from torcia.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False))
    [[0, 1, 2], [3, 4, 5], [6]]
    >>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=True))
    [[0, 1, 2], [3, 4, 5]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive_int(batch_size, "batch_size")
        _check_bool(drop_last, "drop_last")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        while batch := list(itertools.islice(it, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)
