"""Datasets: map-style (``Dataset``) and iterable (``IterableDataset``), and the ways to
combine and split them."""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Generic, TypeVar

import numpy as np

import torcia
from torcia.random import default_generator

__all__ = [
    "ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "StackDataset", "Subset",
    "TensorDataset", "random_split",
]

_T_co = TypeVar("_T_co", covariant=True)


class Dataset(Generic[_T_co]):
    """A map-style dataset: ``dataset[i]`` returns sample ``i``.

    Subclasses implement ``__getitem__`` and, for the default samplers, ``__len__``. They may
    also implement ``__getitems__(indices)`` to fetch a whole batch at once; the DataLoader
    then calls it instead of ``__getitem__`` once per index.

    Examples
    --------
    >>> from torcia.data import Dataset
    >>> class Squares(Dataset):
    ...     def __len__(self):
    ...         return 4
    ...     def __getitem__(self, i):
    ...         return i * i
    >>> [Squares()[i] for i in range(4)]
    [0, 1, 4, 9]
    >>> len(Squares() + Squares())
    8
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[_T_co]):
    """A dataset that is a stream: subclasses implement ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy of the dataset; to split the
    stream rather than repeat it, ``__iter__`` reads :func:`torcia.data.get_worker_info` and
    yields only its worker's share.

    Examples
    --------
    >>> from torcia.data import IterableDataset, get_worker_info
    >>> class Range(IterableDataset):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         info = get_worker_info()
    ...         if info is None:          # main process: the whole stream
    ...             return iter(range(self.n))
    ...         return iter(range(info.id, self.n, info.num_workers))
    >>> list(Range(5))
    [0, 1, 2, 3, 4]
    """

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows of tensors that share their first dimension.

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import TensorDataset
    >>> ds = TensorDataset(torcia.arange(6).reshape(3, 2), torcia.tensor([0, 1, 0]))
    >>> len(ds), ds[1]
    (3, (tensor([2, 3]), tensor(1)))
    """

    def __init__(self, *tensors):
        # no tensors is allowed, as in PyTorch: an empty dataset has no length to ask for
        n = tensors[0].size(0) if tensors else 0
        for t in tensors:
            if t.size(0) != n:
                raise ValueError(
                    f"Size mismatch between tensors: first dimensions are "
                    f"{[t.size(0) for t in tensors]}"
                )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices: list) -> list:
        # One numpy gather per tensor, its rows wrapped as tensors, instead of a tensor
        # indexing op per sample and tensor: several times faster for a batch. Tensors that
        # record gradients or live on another device take the general path.
        if any(t.requires_grad or t.device.type != "cpu" for t in self.tensors):
            return [self[i] for i in indices]
        index = np.asarray(indices, dtype=np.int64)
        columns = []
        for t in self.tensors:
            rows = t.numpy()[index]
            columns.append([torcia.from_numpy(rows[k, ...]) for k in range(len(rows))])
        return list(zip(*columns))

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Zip datasets of equal length: sample ``i`` is a tuple (positional datasets) or a dict
    (keyword datasets) of each dataset's sample ``i``.

    Examples
    --------
    >>> from torcia.data import StackDataset
    >>> StackDataset([1, 2], ["a", "b"])[1]
    (2, 'b')
    >>> StackDataset(x=[1, 2], y=["a", "b"])[0]
    {'x': 1, 'y': 'a'}
    """

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or ``dict``- (via ``kwargs``) like "
                "input/output, but both types are given."
            )
        parts = list(args) or list(kwargs.values())
        if not parts:
            raise ValueError("At least one dataset should be passed")
        self._length = len(parts[0])
        if any(len(p) != self._length for p in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: ds[index] for k, ds in self.datasets.items()}
        return tuple(ds[index] for ds in self.datasets)

    def __getitems__(self, indices: list) -> list:
        if isinstance(self.datasets, dict):
            columns = {k: _fetch_many(ds, indices) for k, ds in self.datasets.items()}
            return [{k: col[i] for k, col in columns.items()} for i in range(len(indices))]
        columns = [_fetch_many(ds, indices) for ds in self.datasets]
        return list(zip(*columns))

    def __len__(self):
        return self._length


def _fetch_many(dataset, indices: list) -> list:
    """``[dataset[i] for i in indices]``, through ``__getitems__`` where the dataset has it."""
    getitems = getattr(dataset, "__getitems__", None)
    if getitems is not None:
        return getitems(indices)
    return [dataset[i] for i in indices]


class ConcatDataset(Dataset[_T_co]):
    """Map-style datasets one after another.

    Examples
    --------
    >>> from torcia.data import ConcatDataset
    >>> ds = ConcatDataset([[0, 1, 2], [10, 11]])
    >>> len(ds), ds[3], ds[-1]
    (5, 10, 11)
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        if which == len(self.datasets):
            raise IndexError(f"index {idx} is out of range for ConcatDataset of length "
                             f"{len(self)}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another, chained lazily.

    Examples
    --------
    >>> from torcia.data import ChainDataset, IterableDataset
    >>> class Letters(IterableDataset):
    ...     def __init__(self, s):
    ...         self.s = s
    ...     def __iter__(self):
    ...         return iter(self.s)
    >>> list(ChainDataset([Letters("ab"), Letters("c")]))
    ['a', 'b', 'c']
    """

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset[_T_co]):
    """The samples of ``dataset`` at ``indices``, in that order.

    Examples
    --------
    >>> from torcia.data import Subset
    >>> s = Subset(["a", "b", "c", "d"], [3, 0])
    >>> len(s), s[0], s[1]
    (2, 'd', 'a')
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        return _fetch_many(self.dataset, [self.indices[i] for i in indices])

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=default_generator) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths.

    ``lengths`` are counts that sum to ``len(dataset)``, or fractions that sum to 1; with
    fractions, each part gets ``floor(fraction * len)`` samples and the remainder is dealt
    one by one to the parts in order.

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import random_split
    >>> a, b = random_split(range(10), [0.7, 0.3], generator=torcia.Generator().manual_seed(0))
    >>> len(a), len(b), sorted(list(a) + list(b)) == list(range(10))
    (7, 3, True)
    """
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = torcia.randperm(sum(lengths), generator=generator).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, order[end - length:end]) for end, length in zip(ends, lengths)]
