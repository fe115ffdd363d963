"""Helpers the op families share: argument normalisation (dims, shapes, operands), the
cast to a dtype (``to_dtype``, exported by ``elementwise``) and named-tuple results. It
imports no family: every family may import it.
"""

from __future__ import annotations

from torcia._ops._common import (
    check_tensor,
    dim_tuple,
    functional,
    operand_as,
    promoted,
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
_operand_as = operand_as
_same_dtype = promoted


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


def _tname(d):
    return _torch_name(d)
