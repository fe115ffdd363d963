"""The reductions, each declared once: schema, reference kernel, meta shape,
decomposition, autocast policy, the dtypes it refuses. :data:`torcia.ops.REDUCE` reduces
over ``dim`` (a tuple of non-negative ints, or None for all) with ``keepdim``;
``REDUCE_INDEX`` reduces along one dim to (values, int64 indices), or to the indices
alone (``argmax``). The scans (``cumsum``, ``cummax``...) are :mod:`torcia._ops.scan`'s.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy): reductions call the array's method, whose cost on small tensors is below
``xp.sum``'s Python wrapper. float16 and bfloat16 accumulate in float32 (PyTorch's
accumulate type) and are rounded once. A decomposition is written with Tensor methods
(it runs on any device, and this module is below the Tensor class); where it must run an
op itself rather than its public function (which refuses what PyTorch's argument parser
refuses: argmax of a bool mask, an empty dim), through :func:`torcia._ops._common.op`.
Their public functions (``sum``, ``max``, ``var``, ``median``, ``quantile``...) are
written below their declarations; their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import np_floating as _floating
from torcia._dtype import torch_type_name as _torch_name
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
    readable_value,
    real_dtype,
    reduced,
    refuse,
    return_type,
    size_at,
    to_float,
    values_and_indices,
    wrap_dim,
)
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels of the reductions (see the module's doc)."""

    def sum(self, a, dim=None, keepdim=False, dtype=None):
        if dtype is None and low_precision(a):
            return a.sum(axis=dim, keepdims=keepdim, dtype=np.float32).astype(a.dtype)
        return a.sum(axis=dim, keepdims=keepdim, dtype=dtype)

    def nansum(self, a, dim=None, keepdim=False, dtype=None):
        # the inf - inf warns from NumPy's Python code, outside the modules that
        # torcia's warning filter covers (torcia/__init__.py)
        with np.errstate(all="ignore"):
            if dtype is None and low_precision(a):
                return self.xp.nansum(a.astype(np.float32), axis=dim,
                                      keepdims=keepdim).astype(a.dtype)
            return self.xp.nansum(a, axis=dim, keepdims=keepdim, dtype=dtype)

    def mean(self, a, dim=None, keepdim=False, dtype=None):
        if dtype is None and low_precision(a):
            return a.mean(axis=dim, keepdims=keepdim, dtype=np.float32).astype(a.dtype)
        return a.mean(axis=dim, keepdims=keepdim, dtype=dtype)

    def prod(self, a, dim=None, keepdim=False, dtype=None):
        # overflow warns from NumPy's Python code, outside the modules that
        # torcia's warning filter covers (torcia/__init__.py)
        with np.errstate(all="ignore"):
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
        if low_precision(a):
            # in float32, rounded once, as PyTorch's: half sums of squares overflowed
            # float16 (inf) and lost half of bfloat16's value over 19,200 elements
            return self.norm(a.astype(np.float32), p, dim, keepdim).astype(a.dtype)
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
            e = xp.exp(a - m)
            # half floats rounded at each step, as PyTorch's composite, but for the sum,
            # which it adds in float32 (in the dtype: 95% of bfloat16 results were off)
            total = e.sum(axis=dim, keepdims=True, dtype=np.float32).astype(a.dtype) \
                if low_precision(a) else xp.sum(e, axis=dim, keepdims=True)
            out = xp.log(total) + m
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

def pick(xp, vals, idx, k, dim, keepdim):
    """Element ``k`` along ``dim`` of sorted values and their indices (``median_dim``, and
    ``kthvalue``'s kernel)."""
    key = [slice(None)] * vals.ndim
    key[dim] = slice(k, k + 1)
    v, i = vals[tuple(key)], idx[tuple(key)]
    if not keepdim:
        v, i = xp.squeeze(v, axis=dim), xp.squeeze(i, axis=dim)
    return v.copy(), i.astype(np.int64)


# ----- the dtypes PyTorch has no kernel for ----------------------------------------------
# NumPy would order complex numbers lexicographically; the decompositions raise the same
# errors (a message's {} is PyTorch's name of the dtype)


def _no_complex(op):
    return {COMPLEX: (RuntimeError, f"{op}(): does not support complex input")}


_AMIN = {COMPLEX: no_kernel("min_values_cpu")}
_MAX_DIM, _MIN_DIM = _no_complex("max"), _no_complex("min")
_ARGMAX, _ARGMIN = _no_complex("argmax"), _no_complex("argmin")
_MEDIAN, _MODE = {COMPLEX: no_kernel("median_out")}, {COMPLEX: no_kernel("mode_cpu")}


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


def sum_over_count(a, dim=None, keepdim=False, dtype=None):
    if dtype is None and a.dtype in HALF:
        return sum_over_count(a.float(), dim, keepdim).to(a.dtype)
    dims = _dims(a, dim)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    return a.sum(dims, keepdim=keepdim, dtype=dtype) / count


def mean_squared_deviation(a, dim=None, correction=1, keepdim=False):
    if a.dtype in HALF:
        return mean_squared_deviation(a.float(), dim, correction, keepdim).to(a.dtype)
    dims = _dims(a, dim)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    centred = a - a.mean(dims, keepdim=True)
    squares = (centred * centred.conj()).real if a.is_complex() else centred * centred
    # NumPy's and PyTorch's divisor: never below 0 (a zero gives inf or NaN)
    return squares.sum(dims, keepdim=keepdim) / builtins.max(count - correction, 0)


@opmath
def root_of_variance(a, dim=None, correction=1, keepdim=False):
    return op("var", a, dim=dim, correction=correction, keepdim=keepdim).sqrt()


def sqrt_of_sum(s):
    """sqrt(s) for sums of squares, whose gradient is 0 (not NaN) where the sum is 0 (the
    norms, :mod:`torcia.linalg`'s too)."""
    zero = s == 0
    return _where(zero, s.new_zeros(()), _where(zero, s.new_ones(()), s).sqrt())


def p_norm(a, p=2.0, dim=None, keepdim=False):
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
def shifted_log_sum_exp(a, dim=None, keepdim=False):
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


def mirrored_amax(a, dim=None, keepdim=False):
    # through the mirror op: the same values, the kernel's own refusal
    refuse(_AMIN, a)
    if a.is_floating_point():
        return -(-a).amax(dim, keepdim=keepdim)
    return ~(~a).amax(dim, keepdim=keepdim)


def first_max_index(a, dim=None, keepdim=False):
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


def first_min_index(a, dim=None, keepdim=False):
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


# ----- the declarations ------------------------------------------------------------------


def _reduce(schema, kernel, shape, **fields):
    """An op of ``REDUCE``: ``name(Tensor x, *, dim=None, keepdim=False...)``."""
    return define(schema, kernel, shape=shape, group="reduce", **fields)


def _along(schema, kernel, **fields):
    """An op of ``REDUCE_INDEX``: (values, indices) along one dim, or the indices."""
    return define(schema, kernel, shape=fields.pop("shape", values_and_indices),
                  group="reduce_index", **fields)


#: PyTorch runs these in float32 under CUDA autocast
_CUDA_FLOAT32 = {"cuda": "float32"}
_ACC, _FLOAT, _REAL = reduction("acc"), reduction("float"), reduction("real")
_SAME = reduction("same")
_BOOL, _INDEX = reduction("bool"), reduction("index")
_DIMS = "int[]? dim=None, bool keepdim=False"
_CORRECTION = "int[]? dim=None, int correction=1, bool keepdim=False"
_ACCUMULATE = f"{_DIMS}, ScalarType? dtype=None"

#: in the order of :data:`torcia.ops.REDUCE` and ``REDUCE_INDEX``
DECLARED = (
    _reduce(f"sum(Tensor x, *, {_ACCUMULATE}) -> Tensor", Kernels.sum, _ACC,
            autocast=_CUDA_FLOAT32),
    _reduce(f"mean(Tensor x, *, {_ACCUMULATE}) -> Tensor", Kernels.mean, _FLOAT,
            decomposition=sum_over_count, floating_inputs=True),
    # PyTorch runs prod in float32 under autocast on the CPU too
    _reduce(f"prod(Tensor x, *, {_ACCUMULATE}) -> Tensor", Kernels.prod, _ACC,
            autocast={"cpu": "float32", "cuda": "float32"}),
    _reduce(f"amax(Tensor x, *, {_DIMS}) -> Tensor", Kernels.amax, _SAME,
            refuses={COMPLEX: no_kernel("max_values_cpu")}, answers_early=_empty_over_a_dim),
    _reduce(f"amin(Tensor x, *, {_DIMS}) -> Tensor", Kernels.amin, _SAME,
            decomposition=mirrored_amax, refuses=_AMIN, answers_early=_empty_over_a_dim),
    _reduce(f"var(Tensor x, *, {_CORRECTION}) -> Tensor", Kernels.var, _REAL,
            decomposition=mean_squared_deviation, floating_inputs=True),
    _reduce(f"std(Tensor x, *, {_CORRECTION}) -> Tensor", Kernels.std, _REAL,
            decomposition=root_of_variance, floating_inputs=True),
    _reduce(f"norm(Tensor x, *, float p=2.0, {_DIMS}) -> Tensor", Kernels.norm, _REAL,
            decomposition=p_norm, floating_inputs=True, autocast=_CUDA_FLOAT32),
    _reduce(f"logsumexp(Tensor x, *, {_DIMS}) -> Tensor", Kernels.logsumexp, _FLOAT,
            decomposition=shifted_log_sum_exp, floating_inputs=True, autocast=_CUDA_FLOAT32,
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
           shape=_INDEX, decomposition=first_max_index, differentiable=False, refuses=_ARGMAX),
    _along("argmin(Tensor a, *, int? dim=None, bool keepdim=False) -> Tensor", Kernels.argmin,
           shape=_INDEX, decomposition=first_min_index, differentiable=False, refuses=_ARGMIN),
    _along("median_dim(Tensor x, *, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)",
           Kernels.median_dim, decomposition=median_dim, refuses=_MEDIAN),
    _along("mode_dim(Tensor x, *, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)",
           Kernels.mode_dim, decomposition=mode_dim, refuses=_MODE),
)


# ----- public functions (torcia.sum, torcia.max...): checks, then the ops' calls by name --


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


def sum(input, dim=ALL_DIMS, keepdim=None, *, dtype=None):
    """Sum over ``dim`` (int, tuple, or all); integer and bool inputs sum in int64.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.sum(x), torcia.sum(x, dim=0), x.sum(1, keepdim=True).shape
    (tensor(10), tensor([4, 6]), torcia.Size([2, 1]))
    """
    if dim is ALL_DIMS and keepdim is None:
        dim = None  # x.sum(): _over_all's first case, without the call
    elif over_all("sum", dim, keepdim, none_ok=True):
        dim = None
    if dim is None and dtype is None and input._data.dtype.kind in "fc":
        return _opdef.CALL("sum", (input,), {"dim": None, "keepdim": bool(keepdim),
                                             "dtype": None})
    return _opdef.CALL("sum", (input,), {"dim": dim_tuple(dim, input.ndim),
                                         "keepdim": bool(keepdim),
                                         "dtype": acc_dtype(input, dtype)})


def mean(input, dim=ALL_DIMS, keepdim=None, *, dtype=None):
    """Mean over ``dim``; the input must be floating point (or ``dtype`` given).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.mean(x)
    tensor(2.5000)
    >>> torcia.mean(x, dim=0, keepdim=True)
    tensor([[2., 3.]])
    """
    if over_all("mean", dim, keepdim, none_ok=True):
        dim = None
    if dtype is None and input.dtype.category < 2:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {_torch_name(input.dtype)}"
        )
    if dtype is not None:
        input = _opdef.PUBLIC.to_dtype(input, dtype)
    return _opdef.CALL("mean", (input,), {"dim": dim_tuple(dim, input.ndim),
                                          "keepdim": bool(keepdim)})


def prod(input, dim=ALL_DIMS, keepdim=None, *, dtype=None):
    """Product over one ``dim`` (or all).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.prod(x)
    tensor(24)
    >>> torcia.prod(x, dim=0)
    tensor([3, 8])
    """
    if over_all("prod", dim, keepdim):
        dim = None
    return _opdef.CALL("prod", (input,), {"dim": dim_tuple(dim, input.ndim),
                                          "keepdim": bool(keepdim),
                                          "dtype": acc_dtype(input, dtype)})


def amax(input, dim=(), keepdim=False):
    """Maximum over ``dim`` (all dims when empty).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.amax(x)
    tensor(5)
    >>> torcia.amax(x, dim=0)
    tensor([4, 5])
    """
    check_nonempty(input, dim, "amax")
    dims = dim_tuple(dim, input.ndim) if dim != () else None
    return _opdef.CALL("amax", (input,), {"dim": dims, "keepdim": bool(keepdim)})


def amin(input, dim=(), keepdim=False):
    """Minimum over ``dim`` (all dims when empty).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.amin(x, dim=1)
    tensor([1, 2])
    """
    check_nonempty(input, dim, "amin")
    dims = dim_tuple(dim, input.ndim) if dim != () else None
    return _opdef.CALL("amin", (input,), {"dim": dims, "keepdim": bool(keepdim)})


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.argmax(x)
    tensor(1)
    >>> torcia.argmax(x, dim=1)
    tensor([1, 0])
    """
    return _arg_extreme("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.argmin(x, dim=0)
    tensor([0, 1])
    """
    return _arg_extreme("argmin", input, dim, keepdim)


def _arg_extreme(op, input, dim, keepdim):
    # refused by dtype before the dim is looked at, as PyTorch
    if input.dtype is D.bool_ or input.is_complex():
        kind = "bool" if input.dtype is D.bool_ else "complex"
        raise RuntimeError(f"{op}(): does not support {kind} input")
    check_nonempty(input, dim, op)
    return along_dim(op, (input,), {
        "dim": None if dim is None else wrap_dim(dim, input.ndim), "keepdim": bool(keepdim)})


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased in (None, True) else 0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1).

    Examples
    --------
    >>> import torcia
    >>> torcia.var(torcia.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor(1.6667)
    """
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return _opdef.CALL("var", (_float_input(input, "var"),),
                       {"dim": dim_tuple(dim, input.ndim),
                        "correction": _correction(unbiased, correction),
                        "keepdim": bool(keepdim)})


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over ``dim`` with Bessel's ``correction`` (default 1).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0, 3.0, 4.0])
    >>> torcia.std(x)
    tensor(1.2910)
    >>> torcia.std(x, correction=0)
    tensor(1.1180)
    """
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return _opdef.CALL("std", (_float_input(input, "std"),),
                       {"dim": dim_tuple(dim, input.ndim),
                        "correction": _correction(unbiased, correction),
                        "keepdim": bool(keepdim)})


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The variance and the mean over ``dim``, as :func:`var` and :func:`mean`.

    Examples
    --------
    >>> import torcia
    >>> torcia.var_mean(torcia.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return (var(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation and the mean over ``dim``, as :func:`std` and :func:`mean`.

    Examples
    --------
    >>> import torcia
    >>> torcia.std_mean(torcia.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return (std(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim, keepdim))


def _float_input(input, name):
    if input.dtype.category < 2:
        raise RuntimeError(f"{name}(): input dtype should be floating point, got "
                           f"{input.dtype.name}")
    return input


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over ``dim`` (``"fro"`` is the 2-norm of all elements).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[3.0, 4.0], [0.0, 0.0]])
    >>> torcia.norm(x)
    tensor(5.)
    >>> torcia.norm(x, p=1, dim=1)
    tensor([7., 0.])
    """
    if p in ("fro", None):
        p = 2.0
    if p == "nuc":
        return _opdef.PUBLIC.linalg.matrix_norm(
            input, "nuc", dim=(-2, -1) if dim is None else dim, keepdim=keepdim)
    if dtype is not None:
        input = _opdef.PUBLIC.to_dtype(input, dtype)
    return _opdef.CALL("norm", (_float_input(input, "norm"),),
                       {"p": float(p), "dim": dim_tuple(dim, input.ndim),
                        "keepdim": bool(keepdim)})


def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(input)))`` over ``dim``, computed stably.

    Examples
    --------
    >>> import torcia
    >>> torcia.logsumexp(torcia.tensor([[0.0, 0.0], [1000.0, 1000.0]]), dim=1)
    tensor([6.9315e-01, 1.0007e+03])
    """
    input = to_float(input)
    return _opdef.CALL("logsumexp", (input,), {"dim": dim_tuple(dim, input.ndim),
                                               "keepdim": bool(keepdim)})


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over the non-NaN elements.

    Examples
    --------
    >>> import torcia
    >>> torcia.nanmean(torcia.tensor([1.0, float("nan"), 3.0]))
    tensor(2.)
    """
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                           f"dtype but got {_torch_name(input.dtype)}")
    # the count first, as PyTorch: a dim out of range is an IndexError before nansum
    # refuses a complex input
    keep = ~_opdef.PUBLIC.isnan(input)
    count = keep.sum(dim=dim, keepdim=keepdim) if dim is not None else keep.sum()
    total = nansum(input, dim=dim, keepdim=keepdim)
    out = total / count
    return out if dtype is None else out.to(dtype)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles (``q`` a number or 1-D tensor in [0, 1]) along ``dim`` (of
    the flattened input by default), interpolated as ``interpolation`` says.

    Examples
    --------
    >>> import torcia
    >>> torcia.quantile(torcia.tensor([0.0, 1.0, 2.0, 3.0]), 0.5)
    tensor(1.5000)
    """
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """:func:`quantile` ignoring NaNs.

    Examples
    --------
    >>> import torcia
    >>> torcia.nanquantile(torcia.tensor([1.0, float("nan"), 3.0]), 0.5)
    tensor(2.)
    """
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, "
                         f"midpoint or nearest. Got {interpolation}")
    if not input.is_floating_point():
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, _opdef.PUBLIC.Tensor):
        if q.dtype is not input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        # in the graph: the interpolation's weights move with q, as torch's; a 0-dim q
        # gives a result without the q dim, as a number does
        qs = q.to(D.float64)
        scalar_q = qs.ndim == 0
        qs = qs.reshape(-1) if scalar_q else qs
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        scalar_q = True
        qs = _opdef.PUBLIC.tensor([float(q)], dtype=D.float64)
    if qs.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    # a q without values to read (meta, batched by vmap) is not checked, as torch's
    if readable_value(((qs >= 0) & (qs <= 1)).all()) is False:
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if dim is not None:
        dim = wrap_dim(dim, input.ndim)
    x = input.reshape(-1) if dim is None or not input.ndim else input.movedim(dim, -1)
    srt = x.sort(dim=-1).values  # NaNs sort last
    n = x.shape[-1]
    if ignore_nan:
        valid = (~_opdef.PUBLIC.isnan(x)).sum(-1, keepdim=True).to(D.float64)
    else:
        valid = _opdef.PUBLIC.full((*x.shape[:-1], 1), float(n), dtype=D.float64, device=x.device)
    pos = (valid - 1).clamp(min=0) * qs.to(x.device)  # (..., len(q))
    if interpolation == "lower":
        pos = pos.floor()
    elif interpolation == "higher":
        pos = pos.ceil()
    elif interpolation == "nearest":
        pos = pos.round()
    lo = pos.floor().long().clamp(0, builtins.max(n - 1, 0))
    hi = pos.ceil().long().clamp(0, builtins.max(n - 1, 0))
    a = srt.gather(-1, lo)
    b = srt.gather(-1, hi)
    if interpolation == "midpoint":
        frac = (hi != lo).to(x.dtype) * 0.5
    else:
        frac = (pos - lo.to(D.float64)).to(x.dtype)
    out = a + (b - a) * frac
    if not ignore_nan:
        has_nan = _opdef.PUBLIC.isnan(x).any(-1, keepdim=True)
        out = _opdef.PUBLIC.where(has_nan, _opdef.PUBLIC.full_like(out, math.nan), out)
    else:
        out = _opdef.PUBLIC.where(valid == 0, _opdef.PUBLIC.full_like(out, math.nan), out)
    out = out.movedim(-1, 0)  # q first, as PyTorch
    if keepdim:
        if dim is None:
            out = out.reshape(out.shape[0], *([1] * input.ndim))
        elif input.ndim:
            out = out.unsqueeze(dim + 1)
    elif dim is not None and not input.ndim:
        out = out.reshape(out.shape[0])  # a 0-dim tensor's dim 0 leaves no dim
    return out[0] if scalar_q else out


_NanMedian = return_type("nanmedian", ("values", "indices"))


_AMinMax = return_type("aminmax", ("min", "max"))


def nanmedian(input, dim=ALL_DIMS, keepdim=None):
    """The median ignoring NaNs (the lower of the two middle values, as ``median``).

    Examples
    --------
    >>> import torcia
    >>> torcia.nanmedian(torcia.tensor([1.0, float("nan"), 3.0, 2.0]))
    tensor(2.)
    """
    everything = over_all("nanmedian", dim, keepdim)
    keepdim = bool(keepdim)
    if not input.is_floating_point():
        # no NaN to ignore: the median, as PyTorch computes it for integers
        return median(input) if everything else _NanMedian(
            *median(input, dim, keepdim))
    if everything:
        flat = input.reshape(-1)
        return _quantile(flat, 0.5, None, False, "lower", ignore_nan=True)
    if not input.ndim:
        wrap_dim(dim, 0)
        return _NanMedian(input.clone(),
                          _opdef.PUBLIC.zeros((), dtype=D.int64, device=input.device))
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:
        raise IndexError(f"median(): Expected reduction dim {dim} to have non-zero size.")
    vals = _quantile(input, 0.5, dim, keepdim, "lower", ignore_nan=True)
    target = vals.unsqueeze(dim) if not keepdim else vals
    hit = (input == target) & ~_opdef.PUBLIC.isnan(input)
    positions = _opdef.PUBLIC.arange(input.shape[dim], device=input.device).reshape(
        [-1 if k == dim else 1 for k in range(input.ndim)]).expand(*input.shape)
    past_the_end = _opdef.PUBLIC.full(input.shape, input.shape[dim], dtype=D.int64,
                                      device=input.device)
    idx = _opdef.PUBLIC.where(hit, positions, past_the_end)
    indices = idx.amin(dim, keepdim=keepdim)
    return _NanMedian(vals, indices)


def aminmax(input, *, dim=None, keepdim=False):
    """``(amin, amax)`` in one call.

    Examples
    --------
    >>> import torcia
    >>> torcia.aminmax(torcia.tensor([3, 1, 2]))
    torcia.return_types.aminmax(
    min=tensor(1),
    max=tensor(3))
    """
    if dim is None:
        lo, hi = input.amin(), input.amax()
        if keepdim:
            lo, hi = lo.reshape([1] * input.ndim), hi.reshape([1] * input.ndim)
    else:
        lo, hi = input.amin(dim, keepdim=keepdim), input.amax(dim, keepdim=keepdim)
    return _AMinMax(lo, hi)


def sum_to_size(input, *size):
    """Sum ``input`` down to ``size`` (which it must broadcast to).

    Examples
    --------
    >>> import torcia
    >>> torcia.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else size
    lead = input.ndim - len(size)
    out = input.sum(dim=tuple(range(lead))) if lead > 0 else input
    dims = tuple(k for k, s in enumerate(size) if s == 1 and out.shape[k] != 1)
    return out.sum(dim=dims, keepdim=True) if dims else out


#: the functions here that are also Tensor methods, under the same name
METHODS = ("nansum", "all", "any", "count_nonzero", "max", "min", "median", "mode", "sum",
           "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "std", "norm",
           "logsumexp", "var_mean", "std_mean")

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = ("nanmean", "quantile", "nanquantile", "nanmedian", "aminmax",
                    "sum_to_size")

#: the names ``torcia`` exports from here
__all__ = ["all", "amax", "amin", "aminmax", "any", "argmax", "argmin", "count_nonzero",
           "logsumexp", "max", "mean", "median", "min", "mode", "nanmean", "nanmedian",
           "nanquantile", "nansum", "norm", "prod", "quantile", "std", "std_mean", "sum",
           "sum_to_size", "var", "var_mean"]
