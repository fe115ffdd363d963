"""Turning a list of samples into a batch (``default_collate``) and converting a single
sample's arrays to tensors (``default_convert``, used when batching is off)."""

from __future__ import annotations

import collections.abc

import numpy as np

import torcia

__all__ = ["default_collate", "default_convert"]

_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
          "found {}")


def _is_namedtuple(obj) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _rebuild_like(elem, items):
    """A container of ``elem``'s type holding ``items``, or a plain list/dict when the type
    cannot be built from one (as a custom Sequence subclass may not)."""
    try:
        return type(elem)(items)
    except TypeError:
        return dict(items) if isinstance(items, dict) else list(items)


def default_collate(batch):
    """Stack a list of samples into a batch, following the samples' structure.

    - tensors and numpy arrays are stacked into one tensor with a new first dimension;
    - Python floats become a float64 tensor, ints an int64 tensor, bools a bool tensor,
      numpy scalars a tensor of their dtype;
    - strings and bytes are kept as a list;
    - dicts, namedtuples, tuples and lists are collated field by field (a tuple comes back
      as a list, a namedtuple as the same namedtuple).

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import default_collate
    >>> default_collate([1, 2, 3])
    tensor([1, 2, 3])
    >>> b = default_collate([{"x": torcia.zeros(2), "y": 0}, {"x": torcia.ones(2), "y": 1}])
    >>> b["x"].shape, b["y"]
    (torcia.Size([2, 2]), tensor([0, 1]))
    >>> default_collate([("a", 1.5), ("b", 2.5)])
    [['a', 'b'], tensor([1.5000, 2.5000], dtype=torcia.float64)]
    """
    elem = batch[0]
    if isinstance(elem, torcia.Tensor):
        return torcia.stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUV":
            raise TypeError(_ERROR.format(elem.dtype))
        return torcia.from_numpy(np.stack(batch))
    if isinstance(elem, np.generic):
        if elem.dtype.kind in "OSUV":
            raise TypeError(_ERROR.format(elem.dtype))
        return torcia.from_numpy(np.array(batch))
    if isinstance(elem, float):
        return torcia.tensor(batch, dtype=torcia.float64)
    if isinstance(elem, int):  # bool included: a bool sample gives a bool tensor
        return torcia.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_like(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(field)) for field in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        return _rebuild_like(elem, fields)
    raise TypeError(_ERROR.format(type(elem)))


def default_convert(data):
    """Convert the numpy arrays in a sample to tensors, keeping everything else.

    The DataLoader applies it to each sample when automatic batching is off
    (``batch_size=None``).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.data import default_convert
    >>> default_convert({"x": np.arange(3), "name": "a"})
    {'x': tensor([0, 1, 2]), 'name': 'a'}
    """
    if isinstance(data, np.ndarray):
        return data if data.dtype.kind in "OSUV" else torcia.from_numpy(data)
    if isinstance(data, np.generic):
        return data if data.dtype.kind in "OSUV" else torcia.from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_like(data, {key: default_convert(v) for key, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(v) for v in data))
    if isinstance(data, tuple):
        return [default_convert(v) for v in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_like(data, [default_convert(v) for v in data])
    return data
