"""Backward formulas of indexing (declared in ``_ops/indexing.py``, ``masked_fill`` in
``_ops/pointwise.py``): ``tensor[key]``, gathers and scatters, ``index_*``, masked ops."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import _scatter_back, derivative
from torcia.library import Tensor, call


@derivative("masked_fill")
def _(grad, _x, mask):
    return grad.masked_fill(mask, 0), None


@derivative("getitem")
def _(grad, _x, *, key):
    return _scatter_back(grad, _x, key)


@derivative("index_put")
def _(grad, _x, _values, *, key, accumulate):
    gx = grad if accumulate else call(
        "index_put", (grad, torcia.zeros((), dtype=grad.dtype, device=grad.device)),
        {"key": key, "accumulate": False})
    gv = call("getitem", (grad,), {"key": key})
    return gx, gv


@derivative("gather")
def _(grad, _x, index, *, dim):
    return torcia.zeros(_x.shape, dtype=grad.dtype, device=grad.device).scatter_add(
        dim, index, grad), None


@derivative("scatter")
def _(grad, _x, index, src, *, dim):
    gsrc = _embed(grad.gather(dim, index), src.shape) if isinstance(src, Tensor) else None
    return grad.scatter(dim, index, 0.0), None, gsrc


@derivative("scatter_add")
def _(grad, _x, index, _src, *, dim):
    return grad, None, _embed(grad.gather(dim, index), _src.shape)


@derivative("index_select")
def _(grad, _x, index, *, dim):
    return torcia.zeros(_x.shape, dtype=grad.dtype, device=grad.device).index_add(
        dim, index, grad), None


@derivative("index_add")
def _(grad, _x, index, _source, *, dim, alpha):
    return grad, None, grad.index_select(dim, index) * alpha


@derivative("index_copy")
def _(grad, _x, index, _source, *, dim):
    cleared = grad.index_copy(dim, index, torcia.zeros(_source.shape, dtype=grad.dtype,
                                                       device=grad.device))
    return cleared, None, grad.index_select(dim, index)


@derivative("take_along_dim")
def _(grad, _x, indices, *, dim):
    zeros = torcia.zeros(_x.shape, dtype=grad.dtype, device=grad.device)
    if dim is None:
        return zeros.reshape(-1).scatter_add(0, indices.reshape(-1), grad.reshape(-1)).reshape(
            _x.shape), None
    return zeros.scatter_add(dim, indices, grad), None


def _embed(g, shape):
    """``g`` placed at the start of a zero tensor of ``shape`` (a ``src`` larger than its
    index gets no gradient past the index's extent)."""
    if tuple(g.shape) == tuple(shape):
        return g
    key = tuple(slice(0, s) for s in g.shape)
    zeros = torcia.zeros(shape, dtype=g.dtype, device=g.device)
    return call("index_put", (zeros, g), {"key": key, "accumulate": True})


@derivative("masked_select")
def _(grad, _x, mask):
    shape = torcia.broadcast_shapes(_x.shape, mask.shape)
    zeros = torcia.zeros(shape, dtype=grad.dtype, device=grad.device)
    key = (mask.expand(shape).__torcia_data__,)
    return call("index_put", (zeros, grad), {"key": key, "accumulate": True}), None


@derivative("scatter_reduce")
def _(grad, x, index, src, *, dim, reduce, include_self, result):
    idx_src = src[tuple(slice(0, s) for s in index.shape)]
    hit = torcia.zeros(x.shape, dtype=torcia.bool, device=x.device).scatter(dim, index, True)
    if reduce == "sum":
        gx = grad if include_self else grad.masked_fill(hit, 0)
        gsrc = grad.gather(dim, index)
    elif reduce == "mean":
        count = torcia.zeros(x.shape, dtype=grad.dtype, device=grad.device).scatter_add(
            dim, index, torcia.ones_like(idx_src)) + int(include_self)
        share = grad / count.clamp(min=1)
        gx = share if include_self else share.masked_fill(hit, 0)
        gsrc = share.gather(dim, index)
    elif reduce in ("amax", "amin"):
        # ties share the gradient evenly, as in PyTorch
        x_wins = x == result if include_self else torcia.zeros_like(hit)
        src_wins = idx_src == result.gather(dim, index)
        count = x_wins.to(grad.dtype).scatter_add(dim, index, src_wins.to(grad.dtype))
        share = grad / count.clamp(min=1)
        gx = torcia.where(hit, share * x_wins, grad) if include_self else grad.masked_fill(
            hit, 0)
        gsrc = share.gather(dim, index) * src_wins
    else:  # prod
        gx, gsrc = _scatter_prod_grad(grad, x, index, idx_src, dim, include_self, hit, result)
    return gx, None, _embed(gsrc, src.shape)


def _scatter_prod_grad(grad, x, index, src, dim, include_self, hit, result):
    """Gradient of a scatter product, exact where factors are zero and differentiable
    again: a factor's gradient is the product of the other factors. With ``n`` zero
    factors at a place, a nonzero factor gets ``result / f`` (n = 0) or the product of the
    nonzero ones, divided by f, times the zero one (n = 1); a zero factor gets the product
    of the nonzero ones (n = 1) times the other zero (n = 2). The zero values are kept as
    factors so that the second derivative sees them."""
    x_zero = x == 0 if include_self else torcia.zeros_like(hit)
    src_zero = src == 0
    base = x.masked_fill(x_zero, 1) if include_self else torcia.ones_like(x)
    nonzero_prod = base.scatter_reduce(dim, index, src.masked_fill(src_zero, 1), "prod")
    n_zero = x_zero.to(grad.dtype).scatter_add(dim, index, src_zero.to(grad.dtype))
    zero_sum = (x * x_zero).scatter_add(dim, index, src * src_zero)

    def others(value, is_zero, n, prod_nz, zsum, res):
        none = torcia.zeros_like(res)
        safe = value.masked_fill(is_zero, 1)
        if_nonzero = torcia.where(n == 0, res / safe,
                                  torcia.where(n == 1, prod_nz / safe * zsum, none))
        if_zero = torcia.where(n == 1, prod_nz,
                               torcia.where(n == 2, prod_nz * (zsum - value), none))
        return torcia.where(is_zero, if_zero, if_nonzero)

    def at_src(t):
        return t.gather(dim, index)

    gsrc = at_src(grad) * others(src, src_zero, at_src(n_zero), at_src(nonzero_prod),
                                 at_src(zero_sum), at_src(result))
    if include_self:
        gx = torcia.where(hit, grad * others(x, x_zero, n_zero, nonzero_prod, zero_sum, result),
                          grad)
    else:
        gx = grad.masked_fill(hit, 0)
    return gx, gsrc
