"""Backward formulas of reductions and scans (declared in ``_ops/reduce.py``): ``sum``,
``max``, ``var``, ``norm``, ``logsumexp``, ``cumsum``."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import (
    _INDICES,
    _c,
    _count,
    _expand_to,
    _extreme_grad,
    _norm_backward,
    _restore_dims,
    derivative,
)
from torcia.library import dtype_from_numpy


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


def _read_as(x, dtype):
    """``x`` as a kernel with ``dtype=`` reads it: cast first (a complex input cast to a real
    dtype loses its imaginary part, whose gradient is then zero, as torch's)."""
    return x if dtype is None else x.to(dtype_from_numpy(dtype))


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


@derivative("cumsum")
def _(grad, _x, *, dim, dtype=None):
    return grad.flip((dim,)).cumsum(dim).flip((dim,))


@derivative("cumprod")
def _(grad, x, *, dim, result, dtype=None):
    # d out_j / d x_i = prod_{k<=j, k!=i} x_k, summed over j >= i
    x = _read_as(x, dtype)
    n = x.shape[dim]
    out = []
    for i in range(n):
        xi = x.narrow(dim, i, 1)
        others = torcia.cat([x.narrow(dim, 0, i), torcia.ones_like(xi),
                             x.narrow(dim, i + 1, n - i - 1)], dim).cumprod(dim)
        out.append((grad.narrow(dim, i, n - i) * _c(others.narrow(dim, i, n - i))).sum(
            dim, keepdim=True))
    return torcia.cat(out, dim)


@derivative("logcumsumexp")
def _(grad, x, *, dim, result):
    # d r_j / d x_i = exp(x_i - r_j) for i <= j; shifted by the total so exp stays small
    n = x.shape[dim]
    total = result.narrow(dim, n - 1, 1)
    tail = (grad * _c((total - result).exp())).flip((dim,)).cumsum(dim).flip((dim,))
    return tail * _c((x - total).exp())
