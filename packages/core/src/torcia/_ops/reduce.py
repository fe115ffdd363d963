"""The reductions and scans, each declared once: schema, reference kernel, meta shape,
decomposition, autocast policy, the dtypes it refuses. :data:`torcia.ops.REDUCE` reduces
over ``dim`` (a tuple of non-negative ints, or None for all) with ``keepdim``;
``REDUCE_INDEX`` reduces along one dim to (values, int64 indices), or to the indices
alone (``argmax``); ``SCAN`` accumulates along one dim (``cumsum``, and ``cummax`` with
the indices).

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy): reductions call the array's method, whose cost on small tensors is below
``xp.sum``'s Python wrapper. float16 and bfloat16 accumulate in float32 (PyTorch's
accumulate type) and are rounded once. A decomposition is written with Tensor methods
(it runs on any device, and this module is below the Tensor class); where it must run an
op itself rather than its public function (which refuses what PyTorch's argument parser
refuses: argmax of a bool mask, an empty dim), through :func:`torcia._ops._common.op`.
Their public functions are in :mod:`torcia._oplib.reduce`, but for those at the end of
this module (``any``, ``cummax``...), next to their declarations; their derivatives are
torcia-autograd's.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import np_floating as _floating
from torcia._grad_mode import STATE as _GRAD
from torcia._opdef import define
from torcia._ops._common import (
    COMPLEX,
    HALF,
    along_dim,
    dim_tuple,
    floating_dtype,
    low_precision,
    no_kernel,
    op,
    opmath,
    real_dtype,
    reduced,
    refuse,
    return_type,
    scan_with_indices,
    size_at,
    to_float,
    values_and_indices,
    wrap_dim,
)
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels of the reductions and scans (see the module's doc)."""

    def sum(self, a, dim=None, keepdim=False, dtype=None):
        if dtype is None and low_precision(a):
            return a.sum(axis=dim, keepdims=keepdim, dtype=np.float32).astype(a.dtype)
        return a.sum(axis=dim, keepdims=keepdim, dtype=dtype)

    def nansum(self, a, dim=None, keepdim=False, dtype=None):
        if dtype is None and low_precision(a):
            return self.xp.nansum(a.astype(np.float32), axis=dim, keepdims=keepdim).astype(
                a.dtype)
        return self.xp.nansum(a, axis=dim, keepdims=keepdim, dtype=dtype)

    def mean(self, a, dim=None, keepdim=False, dtype=None):
        if dtype is None and low_precision(a):
            return a.mean(axis=dim, keepdims=keepdim, dtype=np.float32).astype(a.dtype)
        return a.mean(axis=dim, keepdims=keepdim, dtype=dtype)

    def prod(self, a, dim=None, keepdim=False, dtype=None):
        if dtype is None and low_precision(a):
            return a.prod(axis=dim, keepdims=keepdim, dtype=np.float32).astype(a.dtype)
        return a.prod(axis=dim, keepdims=keepdim, dtype=dtype)

    def amax(self, a, dim=None, keepdim=False):
        return a.max(axis=dim, keepdims=keepdim)

    def amin(self, a, dim=None, keepdim=False):
        return a.min(axis=dim, keepdims=keepdim)

    def var(self, a, dim=None, correction=1, keepdim=False):
        x = a.astype(np.float32) if low_precision(a) else a
        return self.xp.var(x, axis=dim, ddof=correction, keepdims=keepdim).astype(
            a.real.dtype, copy=False)

    def std(self, a, dim=None, correction=1, keepdim=False):
        x = a.astype(np.float32) if low_precision(a) else a
        return self.xp.std(x, axis=dim, ddof=correction, keepdims=keepdim).astype(
            a.real.dtype, copy=False)

    def norm(self, a, p=2.0, dim=None, keepdim=False):
        xp = self.xp
        x = xp.abs(a)
        if p == math.inf:
            return xp.amax(x, axis=dim, keepdims=keepdim)
        if p == -math.inf:
            return xp.amin(x, axis=dim, keepdims=keepdim)
        if p == 0:
            # a count, in the real dtype of a norm (a complex input's too)
            return xp.sum(x != 0, axis=dim, keepdims=keepdim).astype(x.dtype)
        if p == 1:
            return xp.sum(x, axis=dim, keepdims=keepdim)
        if p == 2:
            return xp.sqrt(xp.sum(x * x, axis=dim, keepdims=keepdim))
        return xp.sum(x ** p, axis=dim, keepdims=keepdim) ** (1.0 / p)

    def logsumexp(self, a, dim=None, keepdim=False):
        xp = self.xp
        # a complex input is shifted by its greatest real part (what sets the magnitude)
        m = xp.amax(a.real, axis=dim, keepdims=True) if a.size else xp.zeros(
            (1,) * a.ndim, a.real.dtype)
        m = xp.where(xp.isfinite(m), m, 0)
        with np.errstate(divide="ignore"):  # all -inf: log(0) is the right answer
            out = xp.log(xp.sum(xp.exp(a - m), axis=dim, keepdims=True)) + m
        return out if keepdim else xp.squeeze(out, axis=dim)

    def all(self, a, dim=None, keepdim=False):
        return a.all(axis=dim, keepdims=keepdim)

    def any(self, a, dim=None, keepdim=False):
        return a.any(axis=dim, keepdims=keepdim)

    def count_nonzero(self, a, dim=None):
        return self.xp.asarray(self.xp.count_nonzero(a, axis=dim), dtype=np.int64)

    def max_dim(self, a, dim, keepdim=False):
        xp = self.xp
        idx = xp.argmax(a, axis=dim, keepdims=True)
        val = xp.take_along_axis(a, idx, axis=dim)
        if not keepdim:
            val, idx = xp.squeeze(val, axis=dim), xp.squeeze(idx, axis=dim)
        return val, idx.astype(np.int64)

    def min_dim(self, a, dim, keepdim=False):
        xp = self.xp
        idx = xp.argmin(a, axis=dim, keepdims=True)
        val = xp.take_along_axis(a, idx, axis=dim)
        if not keepdim:
            val, idx = xp.squeeze(val, axis=dim), xp.squeeze(idx, axis=dim)
        return val, idx.astype(np.int64)

    def argmax(self, a, dim=None, keepdim=False):
        xp = self.xp
        if dim is None:
            out = xp.argmax(a)
            return xp.asarray(out, dtype=np.int64).reshape((1,) * a.ndim if keepdim else ())
        return xp.argmax(a, axis=dim, keepdims=keepdim).astype(np.int64)

    def argmin(self, a, dim=None, keepdim=False):
        xp = self.xp
        if dim is None:
            out = xp.argmin(a)
            return xp.asarray(out, dtype=np.int64).reshape((1,) * a.ndim if keepdim else ())
        return xp.argmin(a, axis=dim, keepdims=keepdim).astype(np.int64)

    def cumsum(self, a, dim, dtype=None):
        if dtype is None and low_precision(a):
            return self.xp.cumsum(a, axis=dim, dtype=np.float32).astype(a.dtype)
        return self.xp.cumsum(a, axis=dim, dtype=dtype)

    def cumprod(self, a, dim, dtype=None):
        if dtype is None and low_precision(a):
            return self.xp.cumprod(a, axis=dim, dtype=np.float32).astype(a.dtype)
        return self.xp.cumprod(a, axis=dim, dtype=dtype)

    def median_dim(self, a, dim=-1, keepdim=False):
        xp = self.xp
        n = a.shape[dim] if a.ndim else 1
        vals, idx = self.sort(a, dim=dim)
        v, i = pick(xp, vals, idx, (n - 1) // 2, dim, True)
        if _floating(a.dtype):
            # NaN sorts last; a row holding one has median NaN at its first NaN
            nan = xp.isnan(a)
            has_nan = xp.any(nan, axis=dim, keepdims=True)
            first_nan = xp.argmax(nan, axis=dim, keepdims=True)
            v = xp.where(has_nan, xp.asarray(np.nan, dtype=a.dtype), v)
            i = xp.where(has_nan, first_nan, i)
        if not keepdim:
            v, i = xp.squeeze(v, axis=dim), xp.squeeze(i, axis=dim)
        return v, i.astype(np.int64)

    def mode_dim(self, a, dim=-1, keepdim=False):
        xp = self.xp
        moved = xp.moveaxis(a, dim, -1)
        rows = moved.reshape(-1, moved.shape[-1])
        vals = xp.empty(rows.shape[0], dtype=a.dtype)
        idx = xp.empty(rows.shape[0], dtype=np.int64)
        for r in range(rows.shape[0]):
            uniq, counts = xp.unique(rows[r], return_counts=True)
            # the most frequent value; the smallest among ties, at its last occurrence
            best = uniq[int(xp.argmax(counts))]
            idx[r] = int(xp.nonzero(rows[r] == best)[0][-1])
            # the element at the index: unique's representative of 0.0 and -0.0 may be the
            # other one
            vals[r] = rows[r][idx[r]]
        shape = moved.shape[:-1]
        vals, idx = vals.reshape(shape), idx.reshape(shape)
        if keepdim:
            vals, idx = xp.expand_dims(vals, dim), xp.expand_dims(idx, dim)
        return vals, idx

    def cummax(self, a, dim):
        return _cum_extreme(self.xp, a, dim, self.xp.maximum)

    def cummin(self, a, dim):
        return _cum_extreme(self.xp, a, dim, self.xp.minimum)

    def logcumsumexp(self, a, dim):
        xp = self.xp
        if a.dtype.kind != "c":
            return xp.logaddexp.accumulate(a, axis=dim)
        # logaddexp has no complex loop: accumulate along dim, each step shifted by the
        # greater real part of the two terms
        out = xp.moveaxis(a.copy(), dim, 0)
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(1, out.shape[0]):
                x, y = out[i - 1], out[i]
                big = xp.where(x.real >= y.real, x, y)
                small = xp.where(x.real >= y.real, y, x)
                out[i] = big + xp.log1p(xp.exp(small - big))
        return xp.moveaxis(out, 0, dim)


def pick(xp, vals, idx, k, dim, keepdim):
    """Element ``k`` along ``dim`` of sorted values and their indices (``median_dim``, and
    ``kthvalue``'s kernel)."""
    key = [slice(None)] * vals.ndim
    key[dim] = slice(k, k + 1)
    v, i = vals[tuple(key)], idx[tuple(key)]
    if not keepdim:
        v, i = xp.squeeze(v, axis=dim), xp.squeeze(i, axis=dim)
    return v.copy(), i.astype(np.int64)


def _cum_extreme(xp, a, dim, ufunc):
    vals = ufunc.accumulate(a, axis=dim)
    shape = [1] * a.ndim
    shape[dim] = a.shape[dim]
    pos = xp.broadcast_to(xp.arange(a.shape[dim]).reshape(shape), a.shape)
    # the running index moves to the latest element equal to the running extreme (or NaN)
    hit = a == vals
    if _floating(a.dtype):
        hit = hit | xp.isnan(a)
    idx = xp.maximum.accumulate(xp.where(hit, pos, 0), axis=dim).astype(np.int64)
    # the value is the element at the index, as PyTorch's: of 0.0 and -0.0 the latest
    # (maximum's choice between them varies with the dtype's loop)
    return xp.take_along_axis(a, idx, axis=dim), idx


# ----- the dtypes PyTorch has no kernel for ----------------------------------------------
# NumPy would order complex numbers lexicographically; the decompositions raise the same
# errors (a message's {} is PyTorch's name of the dtype)


def _no_complex(op):
    return {COMPLEX: (RuntimeError, f"{op}(): does not support complex input")}


_AMIN = {COMPLEX: no_kernel("min_values_cpu")}
_MAX_DIM, _MIN_DIM = _no_complex("max"), _no_complex("min")
_ARGMAX, _ARGMIN = _no_complex("argmax"), _no_complex("argmin")
_MEDIAN, _MODE = {COMPLEX: no_kernel("median_out")}, {COMPLEX: no_kernel("mode_cpu")}
_CUMMAX, _CUMMIN = {COMPLEX: no_kernel("cummax_cpu")}, {COMPLEX: no_kernel("cummin_cpu")}


def _empty(a):
    """A scan of an empty tensor: PyTorch answers it before it looks for the dtype's
    kernel."""
    return a.size == 0


def _empty_over_a_dim(a):
    """The extreme over a dim of an empty tensor: answered before the dtype's kernel too."""
    return a.size == 0 and a.ndim > 0


# ----- decompositions (tensors; half precision computes in float32, see opmath) ---------


def _dims(a, dim):
    """``dim`` (None: all, an int or a sequence) as a tuple of non-negative dims."""
    if dim is None:
        return tuple(range(a.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(d % a.ndim if a.ndim else 0 for d in dims)


def nonzero_count(a, dim=None):
    return (a != 0).sum() if dim is None else (a != 0).sum(dim)


def nan_zero_sum(a, dim=None, keepdim=False, dtype=None):
    clean = _where(a.isnan(), a.new_zeros(()), a)
    if dim is None and not keepdim:
        return clean.sum(dtype=dtype)
    dims = tuple(range(a.ndim)) if dim is None else dim
    return clean.sum(dims, keepdim=keepdim, dtype=dtype)


def mean(a, dim=None, keepdim=False, dtype=None):
    if dtype is None and a.dtype in HALF:
        return mean(a.float(), dim, keepdim).to(a.dtype)
    dims = _dims(a, dim)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    return a.sum(dims, keepdim=keepdim, dtype=dtype) / count


def var(a, dim=None, correction=1, keepdim=False):
    if a.dtype in HALF:
        return var(a.float(), dim, correction, keepdim).to(a.dtype)
    dims = _dims(a, dim)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    centred = a - a.mean(dims, keepdim=True)
    squares = (centred * centred.conj()).real if a.is_complex() else centred * centred
    # NumPy's and PyTorch's divisor: never below 0 (a zero gives inf or NaN)
    return squares.sum(dims, keepdim=keepdim) / builtins.max(count - correction, 0)


@opmath
def std(a, dim=None, correction=1, keepdim=False):
    return op("var", a, dim=dim, correction=correction, keepdim=keepdim).sqrt()


def sqrt_of_sum(s):
    """sqrt(s) for sums of squares, whose gradient is 0 (not NaN) where the sum is 0 (the
    norms, :mod:`torcia.linalg`'s too)."""
    zero = s == 0
    return _where(zero, s.new_zeros(()), _where(zero, s.new_ones(()), s).sqrt())


def norm(a, p=2.0, dim=None, keepdim=False):
    x = a.abs()
    dims = _dims(x, dim)
    if p == math.inf:
        return x.amax(dims, keepdim=keepdim)
    if p == -math.inf:
        return x.amin(dims, keepdim=keepdim)
    if p == 0:  # a count, in the real dtype of a norm
        return (x != 0).to(x.dtype).sum(dims, keepdim=keepdim)
    if p == 1:
        return x.sum(dims, keepdim=keepdim)
    if p == 2:
        return sqrt_of_sum((x * x).sum(dims, keepdim=keepdim))
    return (x ** p).sum(dims, keepdim=keepdim) ** (1.0 / p)


@opmath
def logsumexp(a, dim=None, keepdim=False):
    dims = _dims(a, dim)
    # shifted by the greatest real part (it sets the magnitude), 0 where that is infinite
    if a.numel():
        m = a.real.amax(dims, keepdim=True)
        m = _where(m.isinf(), m.new_zeros(()), m)
    else:
        m = a.new_zeros((1,) * a.ndim, dtype=a.real.dtype)
    out = (a - m).exp().sum(dims, keepdim=True).log() + m
    return out if keepdim else out.squeeze(dims)


def _reduce_count(mask, dim, keepdim):
    if dim is None and not keepdim:
        return mask.sum()
    return mask.sum(_dims(mask, dim), keepdim=keepdim)


def all_true(a, dim=None, keepdim=False):
    return _reduce_count(a == 0, dim, keepdim) == 0


def any_true(a, dim=None, keepdim=False):
    return _reduce_count(a != 0, dim, keepdim) > 0


def _order_reversed(a):
    """``a`` mapped onto values of reversed order, ties and NaN kept: the first minimum of
    ``a`` is the first maximum of it (~ for integers and bools, where - would wrap)."""
    return -a if a.is_floating_point() else ~a


def amin(a, dim=None, keepdim=False):
    # through the mirror op: the same values, the kernel's own refusal
    refuse(_AMIN, a)
    if a.is_floating_point():
        return -(-a).amax(dim, keepdim=keepdim)
    return ~(~a).amax(dim, keepdim=keepdim)


def argmax(a, dim=None, keepdim=False):
    refuse(_ARGMAX, a)
    if dim is None:
        flat = op("argmax", a.reshape(-1), dim=0)
        return flat.reshape((1,) * a.ndim) if keepdim else flat
    # the first position holding the maximum (the first NaN, which the maximum then is):
    # the largest of n - position over those that hold it
    top = a.amax(dim, keepdim=True)
    hit = a == top
    if a.is_floating_point():
        hit = hit.bitwise_or(a.isnan().bitwise_and(top.isnan()))
    n = a.shape[dim]
    shape = [1] * a.ndim
    shape[dim] = n
    countdown = _opdef.PUBLIC.arange(n, 0, -1, device=a.device).reshape(shape)
    score = _where(hit, countdown, countdown.new_zeros(()))
    return n - score.amax(dim, keepdim=keepdim)


def argmin(a, dim=None, keepdim=False):
    refuse(_ARGMIN, a)
    return op("argmax", _order_reversed(a), dim=dim, keepdim=keepdim)


def _at_index(a, index, dim, keepdim):
    """(values of ``a`` at ``index`` along ``dim``, the index), ``dim`` kept or not."""
    values = a.gather(dim, index)
    if keepdim:
        return values, index
    return values.squeeze(dim), index.squeeze(dim)


def max_dim(a, dim, keepdim=False):
    refuse(_MAX_DIM, a)
    return _at_index(a, op("argmax", a, dim=dim, keepdim=True), dim, keepdim)


def min_dim(a, dim, keepdim=False):
    refuse(_MIN_DIM, a)
    return _at_index(a, op("argmax", _order_reversed(a), dim=dim, keepdim=True), dim,
                     keepdim)


def sorted_at(a, k, dim, keepdim, descending=False):
    """Element ``k`` of ``a`` sorted along ``dim`` (stably), and its index (``median_dim``,
    and ``kthvalue``'s decomposition)."""
    values, index = op("sort", a, dim=dim, descending=descending)
    values, index = values.narrow(dim, k, 1), index.narrow(dim, k, 1)
    if keepdim:
        return values, index
    return values.squeeze(dim), index.squeeze(dim)


def median_dim(a, dim=-1, keepdim=False):
    refuse(_MEDIAN, a)
    n = a.shape[dim] if a.ndim else 1
    values, index = sorted_at(a, (n - 1) // 2, dim, True)
    if a.is_floating_point():
        # NaN sorts last; a row holding one has median NaN at its first NaN
        nan = a.isnan()
        has_nan = nan.any(dim, keepdim=True)
        values = _where(has_nan, a.new_full((), math.nan), values)
        index = _where(has_nan, op("argmax", nan, dim=dim, keepdim=True), index)
    if keepdim:
        return values, index
    return values.squeeze(dim), index.squeeze(dim)


def mode_dim(a, dim=-1, keepdim=False):
    # the most frequent value (NaN counting as one value), the smallest among ties, at its
    # last occurrence; n^2 comparisons along the dim
    refuse(_MODE, a)
    moved = a.movedim(dim, -1)
    ordered = op("sort", moved, dim=-1)[0]

    def same(x, y):
        eq = x == y
        return eq.bitwise_or(x.isnan().bitwise_and(y.isnan())) if a.is_floating_point() \
            else eq

    counts = same(ordered.unsqueeze(-1), ordered.unsqueeze(-2)).sum(-1)
    best = ordered.gather(-1, op("argmax", counts, dim=-1, keepdim=True))
    pos = _opdef.PUBLIC.arange(moved.shape[-1], device=a.device)
    index = _where(same(moved, best), pos, pos.new_full((), -1)).amax(-1)
    # the element at the index (of 0.0 and -0.0, sort's may be the other one)
    values = moved.gather(-1, index.unsqueeze(-1)).squeeze(-1)
    if keepdim:
        return values.unsqueeze(dim), index.unsqueeze(dim)
    return values, index


# scans: each position reduces the elements up to it (n^2 work along the dim)


def _up_to(a, dim, fill):
    """(moved, masked): ``a`` with ``dim`` moved last (..., n), and (..., n, n) whose row i
    holds the elements 0..i, ``fill`` after them."""
    moved = a.movedim(dim, -1)
    n = moved.shape[-1]
    arange = _opdef.PUBLIC.arange
    upto = arange(n, device=a.device).unsqueeze(0) <= arange(n, device=a.device).unsqueeze(1)
    return moved, _where(upto, moved.unsqueeze(-2), fill)


def running_logsumexp(a, dim):
    if not a.numel():
        return a.clone()
    _, rows = _up_to(a, dim, a.new_full((), -math.inf))
    return logsumexp(rows, (-1,)).movedim(-1, dim)


def cumprod(a, dim, dtype=None):
    if dtype is not None:  # a NumPy dtype, as kernels are given
        a = op("cast", a, dtype=np.dtype(dtype))
    elif a.dtype in HALF:  # in float32, rounded once, as the reference kernel
        return cumprod(a.float(), dim).to(a.dtype)
    if not a.numel():
        return a.clone()
    _, rows = _up_to(a, dim, a.new_ones(()))
    return rows.prod(-1).movedim(-1, dim)


def _running_extreme(a, dim, largest):
    """cummax (``largest``) or cummin: the running extreme (NaN once one is met) and the
    latest index of an element equal to it."""
    if not a.numel():  # answered before the dtype's kernel is looked for (answers_early)
        return a.clone(), a.new_zeros(a.shape, dtype=D.int64)
    refuse(_CUMMAX if largest else _CUMMIN, a)
    n = a.shape[dim]
    if a.is_floating_point():
        fill = a.new_full((), -math.inf if largest else math.inf)
    elif a.dtype == D.bool_:
        fill = a.new_full((), not largest)
    else:
        info = np.iinfo(a.dtype.to_numpy())
        fill = a.new_full((), int(info.min if largest else info.max))
    moved, rows = _up_to(a, dim, fill)
    values = rows.amax(-1) if largest else rows.amin(-1)
    hit = moved.unsqueeze(-2) == values.unsqueeze(-1)  # [i, j]: a_j is the extreme up to i
    if a.is_floating_point():
        hit = hit.bitwise_or(moved.isnan().unsqueeze(-2))
    pos = _opdef.PUBLIC.arange(n, device=a.device)
    upto = pos.unsqueeze(0) <= pos.unsqueeze(1)
    index = _where(hit.bitwise_and(upto), pos, pos.new_zeros(())).amax(-1)
    index = index.movedim(-1, dim)
    # the value is the element at the index, as PyTorch's: of 0.0 and -0.0 the latest
    return a.gather(dim, index), index


def running_max(a, dim):
    return _running_extreme(a, dim, largest=True)


def running_min(a, dim):
    return _running_extreme(a, dim, largest=False)


# ----- shapes ----------------------------------------------------------------------------


def reduction(kind):
    """A reduction's shape function; ``kind`` picks its dtype: "acc" (``dtype`` or the
    input's), "float" (NumPy's float result), "real" (a norm), "bool", "index" (int64)."""
    def shape_fn(x, dim=None, keepdim=False, dtype=None, **params):
        d = x.dtype
        if kind == "acc":
            d = np.dtype(dtype) if dtype is not None else (
                np.dtype(np.int64) if d.kind in "biu" else d)
        elif kind == "float":
            d = np.dtype(dtype) if dtype is not None else floating_dtype(d)
        elif kind == "real":
            d = real_dtype(floating_dtype(d))
        elif kind == "bool":
            d = np.dtype(bool)
        elif kind == "index":
            d = np.dtype(np.int64)
        return reduced(x.shape, dim, keepdim), d

    shape_fn.__name__ = f"{kind}_reduction"
    return shape_fn


def scan(x, dim=0, dtype=None, **params):
    if dtype is not None:
        return x.shape, np.dtype(dtype)
    return x.shape, np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype


# ----- the declarations ------------------------------------------------------------------


def _reduce(schema, kernel, shape, **fields):
    """An op of ``REDUCE``: ``name(Tensor x, *, dim=None, keepdim=False...)``."""
    return define(schema, kernel, shape=shape, group="reduce", **fields)


def _along(schema, kernel, **fields):
    """An op of ``REDUCE_INDEX``: (values, indices) along one dim, or the indices."""
    return define(schema, kernel, shape=fields.pop("shape", values_and_indices),
                  group="reduce_index", **fields)


def _scan(schema, kernel, **fields):
    """An op of ``SCAN``: the running reduction along ``dim``."""
    return define(schema, kernel, shape=fields.pop("shape", scan), group="scan", **fields)


#: PyTorch runs these in float32 under CUDA autocast
_CUDA_FLOAT32 = {"cuda": "float32"}
_ACC, _FLOAT, _REAL = reduction("acc"), reduction("float"), reduction("real")
_SAME = reduction("same")
_BOOL, _INDEX = reduction("bool"), reduction("index")
_DIMS = "int[]? dim=None, bool keepdim=False"
_CORRECTION = "int[]? dim=None, int correction=1, bool keepdim=False"
_ACCUMULATE = f"{_DIMS}, ScalarType? dtype=None"

#: in the order of :data:`torcia.ops.REDUCE`, ``REDUCE_INDEX`` and ``SCAN``
DECLARED = (
    _reduce(f"sum(Tensor x, *, {_ACCUMULATE}) -> Tensor", Kernels.sum, _ACC,
            autocast=_CUDA_FLOAT32),
    _reduce(f"mean(Tensor x, *, {_ACCUMULATE}) -> Tensor", Kernels.mean, _FLOAT,
            decomposition=mean, floating_inputs=True),
    # PyTorch runs prod in float32 under autocast on the CPU too
    _reduce(f"prod(Tensor x, *, {_ACCUMULATE}) -> Tensor", Kernels.prod, _ACC,
            autocast={"cpu": "float32", "cuda": "float32"}),
    _reduce(f"amax(Tensor x, *, {_DIMS}) -> Tensor", Kernels.amax, _SAME,
            refuses={COMPLEX: no_kernel("max_values_cpu")}, answers_early=_empty_over_a_dim),
    _reduce(f"amin(Tensor x, *, {_DIMS}) -> Tensor", Kernels.amin, _SAME,
            decomposition=amin, refuses=_AMIN, answers_early=_empty_over_a_dim),
    _reduce(f"var(Tensor x, *, {_CORRECTION}) -> Tensor", Kernels.var, _REAL,
            decomposition=var, floating_inputs=True),
    _reduce(f"std(Tensor x, *, {_CORRECTION}) -> Tensor", Kernels.std, _REAL,
            decomposition=std, floating_inputs=True),
    _reduce(f"norm(Tensor x, *, float p=2.0, {_DIMS}) -> Tensor", Kernels.norm, _REAL,
            decomposition=norm, floating_inputs=True, autocast=_CUDA_FLOAT32),
    _reduce(f"logsumexp(Tensor x, *, {_DIMS}) -> Tensor", Kernels.logsumexp, _FLOAT,
            decomposition=logsumexp, floating_inputs=True, autocast=_CUDA_FLOAT32,
            tags=("special",)),
    # bool and integer results: no gradient
    _reduce(f"all(Tensor a, *, {_DIMS}) -> Tensor", Kernels.all, _BOOL,
            decomposition=all_true, differentiable=False),
    _reduce(f"any(Tensor a, *, {_DIMS}) -> Tensor", Kernels.any, _BOOL,
            decomposition=any_true, differentiable=False),
    _reduce("count_nonzero(Tensor a, *, int[]? dim=None) -> Tensor", Kernels.count_nonzero,
            _INDEX, decomposition=nonzero_count, differentiable=False),
    _reduce(f"nansum(Tensor x, *, {_ACCUMULATE}) -> Tensor", Kernels.nansum, _ACC,
            decomposition=nan_zero_sum),
    # dim=None as the records have always read it: the kernels take dim without a default,
    # and the public functions always pass one
    _along("max_dim(Tensor x, *, int? dim=None, bool keepdim=False) -> (Tensor, Tensor)",
           Kernels.max_dim, decomposition=max_dim, refuses=_MAX_DIM),
    _along("min_dim(Tensor x, *, int? dim=None, bool keepdim=False) -> (Tensor, Tensor)",
           Kernels.min_dim, decomposition=min_dim, refuses=_MIN_DIM),
    # indices: no gradient
    _along("argmax(Tensor a, *, int? dim=None, bool keepdim=False) -> Tensor", Kernels.argmax,
           shape=_INDEX, decomposition=argmax, differentiable=False, refuses=_ARGMAX),
    _along("argmin(Tensor a, *, int? dim=None, bool keepdim=False) -> Tensor", Kernels.argmin,
           shape=_INDEX, decomposition=argmin, differentiable=False, refuses=_ARGMIN),
    _along("median_dim(Tensor x, *, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)",
           Kernels.median_dim, decomposition=median_dim, refuses=_MEDIAN),
    _along("mode_dim(Tensor x, *, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)",
           Kernels.mode_dim, decomposition=mode_dim, refuses=_MODE),
    _scan("cumsum(Tensor x, *, int? dim=None, ScalarType? dtype=None) -> Tensor",
          Kernels.cumsum, autocast=_CUDA_FLOAT32),
    _scan("cumprod(Tensor x, *, int? dim=None, ScalarType? dtype=None) -> Tensor",
          Kernels.cumprod, decomposition=cumprod, autocast=_CUDA_FLOAT32),
    _scan("cummax(Tensor x, *, int? dim=None) -> (Tensor, Tensor)", Kernels.cummax,
          shape=scan_with_indices, decomposition=running_max,
          refuses=_CUMMAX, answers_early=_empty),
    _scan("cummin(Tensor x, *, int? dim=None) -> (Tensor, Tensor)", Kernels.cummin,
          shape=scan_with_indices, decomposition=running_min,
          refuses=_CUMMIN, answers_early=_empty),
    _scan("logcumsumexp(Tensor x, *, int? dim=None) -> Tensor", Kernels.logcumsumexp,
          decomposition=running_logsumexp),
)


# ----- public functions (torcia.any, torcia.cummax...): the ops' calls by name ------------


def acc_dtype(input, dtype):
    """The NumPy dtype ``sum`` and its kin accumulate ``input`` in: ``dtype`` when given,
    int64 for bool and integer inputs, else None (the input's)."""
    if dtype is not None:
        return dtype.to_numpy()
    if input._data.dtype.kind in "biu":
        return np.int64
    return None


def itself_at_zero(input):
    """A 0-dim input's running extreme or mode: PyTorch answers it (the value, at index 0)
    before it looks for the dtype's kernel, so complex has one."""
    return input.clone(), _opdef.PUBLIC.zeros((), dtype=D.int64, device=input.device)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (all dims when None), counting NaN as zero.

    Examples
    --------
    >>> import torcia
    >>> torcia.nansum(torcia.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    return _opdef.CALL("nansum", (input,), {"dim": dim_tuple(dim, input.ndim),
                                            "keepdim": bool(keepdim),
                                            "dtype": acc_dtype(input, dtype)})


def all(input, dim=None, keepdim=False):
    """Whether all elements (along ``dim``) are nonzero.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[True, False], [True, True]])
    >>> torcia.all(x)
    tensor(False)
    >>> torcia.all(x, dim=1)
    tensor([False,  True])
    """
    return _logical_reduction("all", input, dim, keepdim)


def any(input, dim=None, keepdim=False):
    """Whether any element (along ``dim``) is nonzero.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[0, 0], [0, 3]])
    >>> torcia.any(x)
    tensor(True)
    >>> torcia.any(x, dim=1)
    tensor([False,  True])
    """
    return _logical_reduction("any", input, dim, keepdim)


def _logical_reduction(name, input, dim, keepdim):
    out = _opdef.CALL(name, (input,), {"dim": dim_tuple(dim, input.ndim),
                                       "keepdim": bool(keepdim)})
    # PyTorch keeps uint8 for uint8 inputs (its masks of old), bool for every other dtype
    return _opdef.PUBLIC.to_dtype(out, D.uint8) if input.dtype is D.uint8 else out


def count_nonzero(input, dim=None):
    """The number of nonzero elements (along ``dim``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[0, 1, 2], [0, 0, 3]])
    >>> torcia.count_nonzero(x)
    tensor(3)
    >>> torcia.count_nonzero(x, dim=0)
    tensor([0, 1, 2])
    """
    return _opdef.CALL("count_nonzero", (input,), {"dim": dim_tuple(dim, input.ndim)})


_Cummax = return_type("cummax", ("values", "indices"))


_Cummin = return_type("cummin", ("values", "indices"))


def cummax(input, dim):
    """Running maximum along ``dim`` and the index where it was reached.

    Examples
    --------
    >>> import torcia
    >>> torcia.cummax(torcia.tensor([1, 3, 2, 5]), dim=0)
    torcia.return_types.cummax(
    values=tensor([1, 3, 3, 5]),
    indices=tensor([0, 1, 1, 3]))
    """
    d = wrap_dim(dim, input.ndim)
    if not input.ndim and input.is_complex():
        return _Cummax(*itself_at_zero(input))
    return _Cummax(*along_dim("cummax", (input,), {"dim": d}))


def cummin(input, dim):
    """Running minimum along ``dim`` and the index where it was reached.

    Examples
    --------
    >>> import torcia
    >>> torcia.cummin(torcia.tensor([4, 2, 3, 1]), dim=0)
    torcia.return_types.cummin(
    values=tensor([4, 2, 2, 1]),
    indices=tensor([0, 1, 1, 3]))
    """
    d = wrap_dim(dim, input.ndim)
    if not input.ndim and input.is_complex():
        return _Cummin(*itself_at_zero(input))
    return _Cummin(*along_dim("cummin", (input,), {"dim": d}))


def logcumsumexp(input, dim):
    """``log(cumsum(exp(input)))`` along ``dim``, without overflow.

    Examples
    --------
    >>> import torcia
    >>> torcia.logcumsumexp(torcia.tensor([0.0, 0.0, 1000.0]), dim=0)
    tensor([0.0000e+00, 6.9315e-01, 1.0000e+03])
    """
    input = to_float(input)
    d = wrap_dim(dim, input.ndim)
    return along_dim("logcumsumexp", (input,), {"dim": d})


class _AllDims:
    """``dim`` not given: PyTorch's overload over every element, which takes no ``keepdim``
    (and, except for ``sum``/``mean``, no ``dim=None`` either)."""

    def __repr__(self):
        return "<all dims>"


ALL_DIMS = _AllDims()


def over_all(name, dim, keepdim, none_ok=False):
    """Whether ``dim`` asks to reduce every element; refuses what PyTorch's argument parser
    refuses: ``keepdim`` without ``dim``, and ``dim=None`` unless ``none_ok``."""
    if dim is ALL_DIMS:
        if keepdim is None:
            return True
        if name in ("median", "nanmedian"):
            raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, "
                        f"keepdim=bool), but expected (Tensor input, int dim, bool keepdim)")
    if dim is None and not none_ok:
        raise TypeError(f"{name}(): argument 'dim' must be int, not NoneType")
    return dim is None


def check_nonempty(input, dim, name):
    """PyTorch's refusal of a reduction with no identity (max, argmax...) over nothing:
    of an empty tensor without a dim, or along a dim of size 0."""
    if input.numel():
        return
    if dim is None or dim == ():
        raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                         "== 0. Specify the reduction dim with the 'dim' argument.")
    for d in (dim,) if isinstance(dim, (int, np.integer)) else dim:
        d = wrap_dim(d, input.ndim)
        if size_at(input, d) == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


_Max = return_type("max", ("values", "indices"))


_Min = return_type("min", ("values", "indices"))


def max(input, dim=ALL_DIMS, keepdim=None, *, other=None):
    """The maximum of all elements; with ``dim``, (values, indices) along it; with a tensor
    as second argument, the elementwise maximum.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [7, 2]])
    >>> torcia.max(x)
    tensor(7)
    >>> torcia.max(x, dim=1)
    torcia.return_types.max(
    values=tensor([5, 7]),
    indices=tensor([1, 0]))
    """
    if isinstance(dim, _opdef.PUBLIC.Tensor):
        return _opdef.PUBLIC.maximum(input, dim)
    if over_all("max", dim, keepdim):
        check_nonempty(input, None, "max")
        return _opdef.PUBLIC.amax(input)
    d = wrap_dim(dim, input.ndim)
    check_nonempty(input, d, "max")
    v, i = along_dim("max_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Max(v, i)


def min(input, dim=ALL_DIMS, keepdim=None):
    """As :func:`max`, for the minimum.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[4, 1], [2, 3]])
    >>> torcia.min(x)
    tensor(1)
    >>> torcia.min(x, dim=1)
    torcia.return_types.min(
    values=tensor([1, 2]),
    indices=tensor([1, 0]))
    """
    if isinstance(dim, _opdef.PUBLIC.Tensor):
        return _opdef.PUBLIC.minimum(input, dim)
    if over_all("min", dim, keepdim):
        check_nonempty(input, None, "min")
        return _opdef.PUBLIC.amin(input)
    d = wrap_dim(dim, input.ndim)
    check_nonempty(input, d, "min")
    v, i = along_dim("min_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Min(v, i)


_Median = return_type("median", ("values", "indices"))


_Mode = return_type("mode", ("values", "indices"))


def _nonempty_dim(input, d, name):
    if input.numel() == 0 and size_at(input, d) == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def median(input, dim=ALL_DIMS, keepdim=None):
    """The lower median of all elements, or ``(values, indices)`` along ``dim``.

    NaN propagates: a row holding NaN has median NaN.

    Examples
    --------
    >>> import torcia
    >>> torcia.median(torcia.tensor([4.0, 1.0, 3.0, 2.0]))
    tensor(2.)
    """
    if over_all("median", dim, keepdim):
        if input.numel() == 0:
            return _opdef.PUBLIC.full((), float("nan"), dtype=input.dtype, device=input.device)
        flat = _opdef.PUBLIC.reshape(input, (-1,))
        value = _opdef.CALL("median_dim", (flat,), {"dim": 0, "keepdim": False})[0]
        if not (input._requires_grad and _GRAD.enabled):
            return value
        # PyTorch spreads the gradient evenly over the elements equal to the median (NaN
        # ones, when it is NaN): value + sum((x - value) * tied) / count is value exactly,
        # as x - value is 0 where tied, and its derivative is tied / count
        value = value.detach()
        tied = _opdef.PUBLIC.isnan(flat) if bool(_opdef.PUBLIC.isnan(value)) else flat == value
        return value + _opdef.PUBLIC.where(tied, flat - value, 0).sum() / tied.sum()
    d = wrap_dim(dim, input.ndim)
    _nonempty_dim(input, d, "median")
    v, i = along_dim("median_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Median(v, i)


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest among ties) and its last index.

    Examples
    --------
    >>> import torcia
    >>> torcia.mode(torcia.tensor([1, 3, 3, 1, 2])).values
    tensor(1)
    """
    d = wrap_dim(dim, input.ndim)
    _nonempty_dim(input, d, "mode")
    if not input.ndim and input.is_complex():
        return _Mode(*itself_at_zero(input))
    if input.is_complex() and not input.numel():
        # an empty result: PyTorch gives it before it looks for the dtype's kernel
        v, i = along_dim("mode_dim", (input.real,), {"dim": d, "keepdim": bool(keepdim)})
        return _Mode(v.to(input.dtype), i)
    v, i = along_dim("mode_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Mode(v, i)


#: the public functions above, which torcia exports and Tensor has as methods
PUBLIC = (nansum, all, any, count_nonzero, max, min, median, mode, cummax, cummin,
          logcumsumexp)
