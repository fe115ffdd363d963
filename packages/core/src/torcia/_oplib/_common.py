"""Helpers the op families share: argument normalisation (dims, shapes, operands), the
cast to a dtype (``to_dtype``, exported by ``elementwise``) and named-tuple results. It
imports no family: every family may import it.
"""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia._ops._common import (
    check_tensor,
    dim_tuple,
    functional,
    readable_value,
    return_type,
    size_at,
    to_float,
)
from torcia._ops.sorting import nonzero_tuple
from torcia._tensor import Tensor, _torch_name, call

# the families' names of helpers written in torcia._ops, below them
_dims = dim_tuple
_return_type = return_type
_to_float = to_float
_size_at = size_at
_check_tensor = check_tensor
_F = functional
_readable_value = readable_value
_nonzero_tuple = nonzero_tuple


def to_dtype(input, dtype) -> Tensor:
    """A copy of ``input`` in ``dtype`` (or ``input`` itself when already so).

    Examples
    --------
    >>> import torcia
    >>> torcia.to_dtype(torcia.tensor([1.7, -1.7]), torcia.int64)
    tensor([ 1, -1])
    """
    if input.dtype is dtype:
        return input
    return call("cast", (input,), {"dtype": dtype.to_numpy()})


def _operand_as(x, dt):
    """A tensor or Python-number operand of an op computing in ``dt``, converted to it: a
    number as PyTorch's scalars, so -1 bounds a uint8 tensor at 255."""
    if isinstance(x, Tensor):
        return x if x.dtype is dt else to_dtype(x, dt)
    if x is None or dt.category == 3 or x.__class__ is complex:
        return x
    return np.array(x).astype(dt.to_numpy())[()]


def _tname(d):
    return _torch_name(d)


def _same_dtype(tensors, op):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{op}(): expected a non-empty list of Tensors")
    first = None
    same = True
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected a sequence of Tensors, got {type(t).__name__}")
        if first is None:
            first = t._data.dtype
        elif t._data.dtype is not first:
            same = False
    if same:
        return tensors
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = D.promote_types(dt, t.dtype)
    return [t if t.dtype is dt else to_dtype(t, dt) for t in tensors]
