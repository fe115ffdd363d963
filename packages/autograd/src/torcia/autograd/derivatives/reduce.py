"""Backward formulas of the reductions (declared in ``_ops/reduce.py``): ``sum``, ``max``,
``var``, ``norm``, ``logsumexp``..."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import (
    _INDICES,
    _c,
    _count,
    _expand_to,
    _extreme_grad,
    _norm_backward,
    _read_as,
    _restore_dims,
    derivative,
)


@derivative("sum")
def _(grad, _x, *, dim, keepdim):
    return _expand_to(_restore_dims(grad, dim, keepdim, len(_x[0])), _x[0])


@derivative("nansum")
def _(grad, x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, x.ndim).expand(x.shape)
    return g.masked_fill(x.isnan(), 0)


@derivative("mean")
def _(grad, _x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, len(_x[0]))
    return _expand_to(g, _x[0]) / _count(_x.shape, dim)


@derivative("prod")
def _(grad, x, *, dim, keepdim, dtype=None):
    x = _read_as(x, dtype)
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    if dim is None:
        return g * _c(_prod_others(x.reshape(-1), 0).reshape(x.shape))
    (d,) = dim
    return g * _c(_prod_others(x, d))


def _prod_others(x, d):
    """For each position along ``d``: the product of every other element. Computed from
    prefix and suffix products rather than by division, so zeros in ``x`` are exact."""
    ones = torcia.ones_like(x.narrow(d, 0, 1))
    n = x.shape[d]
    before = torcia.cat([ones, x.narrow(d, 0, n - 1)], d).cumprod(d)
    after = torcia.cat([x.narrow(d, 1, n - 1), ones], d).flip((d,)).cumprod(d).flip((d,))
    return before * after


@derivative("amax")
def _(grad, x, *, dim, keepdim, result):
    return _extreme_grad(grad, x, dim, keepdim, result)


@derivative("amin")
def _(grad, x, *, dim, keepdim, result):
    return _extreme_grad(grad, x, dim, keepdim, result)


def _index_grad(grads, x, dim, keepdim, indices):
    """max/min/median/mode along a dim: the gradient goes to the chosen element."""
    g = grads[0]
    if g is None:
        return None
    if not keepdim:
        g = g.unsqueeze(dim)
        indices = indices.unsqueeze(dim)
    return torcia.zeros_like(x).scatter(dim, indices, g)


def _picked_row(grads, x, *, dim, keepdim, result):
    return _index_grad(grads, x, dim, keepdim, result[1])


# one element chosen along ``dim``, its index the second output
for _op in ("max_dim", "min_dim", "median_dim", "mode_dim", "kthvalue"):
    derivative(_op, names=_INDICES)(_picked_row)


@derivative("var")
def _(grad, x, *, dim, correction, keepdim):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    n = _count(x.shape, dim)
    return g * 2 * (x - x.mean(dim, keepdim=True)) / max(n - correction, 0)


@derivative("std")
def _(grad, x, *, dim, correction, keepdim, result):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    n = _count(x.shape, dim)
    # where all values are equal (std 0) PyTorch's gradient is 0, not 0 / 0
    return torcia.where(r == 0, 0.0, g / r) * (x - x.mean(dim, keepdim=True)) / max(
        n - correction, 0)


@derivative("norm", names={"p": "ord"})
def _(grad, x, *, p, dim, keepdim, result):
    return _norm_backward(grad, x, p, dim, keepdim, result)


@derivative("logsumexp")
def _(grad, x, *, dim, keepdim, result):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    return g * _c((x - r).exp())
