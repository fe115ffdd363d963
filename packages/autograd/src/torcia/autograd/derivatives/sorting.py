"""Backward formulas of sorting and selection (declared in ``_ops/sorting.py``): ``sort``,
``topk``, and the scans that pick an element (``cummax``, ``cummin``)."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import _INDICES, derivative


def _scatter_values_grad(grads, x, dim, indices):
    """sort/topk: each value's gradient goes back to where it was taken from."""
    g = grads[0]
    if g is None:
        return None
    if x.ndim == 0:
        return g
    return torcia.zeros(x.shape, dtype=g.dtype, device=g.device).scatter_add(dim, indices, g)


def _gathered_row(grads, _x, *, dim, result):
    return _scatter_values_grad(grads, _x, dim, result[1])


# values taken from positions along ``dim``, the positions the second output
for _op in ("sort", "topk", "cummax", "cummin"):
    derivative(_op, names=_INDICES)(_gathered_row)
