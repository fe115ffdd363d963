"""Sorting, selection and counting, each declared once: schema, reference kernel, meta
shape, decomposition, the dtypes it refuses. :data:`torcia.ops.SORTING`: ``sort`` (stable,
(values, int64 indices) along one dim), ``topk`` and ``kthvalue`` (selection in sort's
order), ``unique`` (values, inverse, counts), ``nonzero``, ``searchsorted``, ``bincount``
and ``histc``.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy; ``self.sort`` its sort). ``unique``, ``nonzero`` and ``bincount`` have no meta shape:
their output's size depends on the values (:data:`torcia._meta.DATA_DEPENDENT`). A
decomposition is written with Tensor methods, running ``sort`` through
:func:`torcia._ops._common.op` (this module is below the Tensor class). The integer
results carry no gradient. Their public functions are in :mod:`torcia._oplib.sorting`,
the derivatives of sort, topk and kthvalue are torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import BOOL, COMPLEX, op, refuse, scan_with_indices, values_and_indices
from torcia._ops._common import with_size as _with
from torcia._ops.reduce import pick, sorted_at

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels of sorting, selection and counting (see the module's doc)."""

    def sort(self, a, dim=-1, descending=False, stable=False):
        xp = self.xp
        if a.ndim == 0:
            return a.copy(), xp.zeros((), dtype=np.int64)
        if descending:
            # a stable ascending sort of the reversed array, reversed again, keeps equal
            # elements in their original order (as PyTorch's stable descending sort)
            n = a.shape[dim]
            rev = xp.flip(a, axis=dim)
            idx = xp.flip(xp.argsort(rev, axis=dim, kind="stable"), axis=dim)
            idx = (n - 1) - idx
        else:
            idx = xp.argsort(a, axis=dim, kind="stable")
        return xp.take_along_axis(a, idx, axis=dim), idx.astype(np.int64)

    def topk(self, a, k, dim=-1, largest=True, sorted=True):
        vals, idx = self.sort(a, dim=dim, descending=largest)
        key = [slice(None)] * a.ndim
        key[dim] = slice(0, k)
        key = tuple(key)
        return vals[key].copy(), idx[key].copy()

    def kthvalue(self, a, k, dim=-1, keepdim=False):
        vals, idx = self.sort(a, dim=dim)
        return pick(self.xp, vals, idx, k - 1, dim, keepdim)

    def unique(self, a, dim=None):
        """Sorted unique values (or slices along ``dim``), the inverse and the counts."""
        xp = self.xp
        vals, inverse, counts = xp.unique(a, return_inverse=True, return_counts=True, axis=dim)
        inverse = inverse.reshape(a.shape) if dim is None else inverse.reshape(-1)
        return vals, inverse.astype(np.int64), counts.astype(np.int64)

    def nonzero(self, a):
        return self.xp.argwhere(a).astype(np.int64)

    def searchsorted(self, seq, values, right=False, out_int32=False):
        xp = self.xp
        side = "right" if right else "left"
        dtype = np.int32 if out_int32 else np.int64
        if seq.ndim == 1:
            return xp.asarray(xp.searchsorted(seq, values, side=side), dtype=dtype)
        # the rows counted, not inferred: a sequence of length 0 has as many (-1 is ambiguous)
        n = math.prod(seq.shape[:-1])
        if not n:
            return xp.zeros(values.shape, dtype)
        rows = seq.reshape(n, seq.shape[-1])
        vrows = values.reshape(n, values.shape[-1])
        out = xp.stack([xp.searchsorted(s, v, side=side) for s, v in zip(rows, vrows)])
        return out.reshape(values.shape).astype(dtype)

    def bincount(self, a, weights=None, minlength=0):
        xp = self.xp
        out = xp.bincount(a, weights=weights, minlength=minlength)
        if weights is None:
            return out.astype(np.int64)
        return out.astype(weights.dtype if weights.dtype == np.float32 else np.float64)

    def histc(self, a, bins=100, min=0.0, max=0.0):  # noqa: A002 - PyTorch's names
        xp = self.xp
        lo, hi = float(min), float(max)
        if lo == hi and a.size:
            lo, hi = float(a.min()), float(a.max())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        counts, _ = xp.histogram(a, bins=bins, range=(lo, hi))
        return counts.astype(a.dtype)


# ----- the dtypes PyTorch has no kernel for ----------------------------------------------
# NumPy would order complex numbers lexicographically (a message's {} is PyTorch's name of
# the dtype)

_SORT = {COMPLEX: (RuntimeError, "Sort does not support complex dtypes on CPU")}
_TOPK = {COMPLEX: (RuntimeError, "topk does not support complex dtypes on CPU")}
_KTHVALUE = {COMPLEX: (NotImplementedError, '"kthvalue_cpu" not implemented for \'{}\'')}
_SEARCHSORTED = {kind: (NotImplementedError, '"searchsorted_out_cpu" not implemented for \'{}\'')
                 for kind in (BOOL, COMPLEX)}


# ----- decompositions --------------------------------------------------------------------
# k=None as the records read it: the public functions always pass k


def kthvalue(a, k=None, dim=-1, keepdim=False):
    refuse(_KTHVALUE, a)
    return sorted_at(a, k - 1, dim, keepdim)


def topk(a, k=None, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's name
    refuse(_TOPK, a)
    values, index = op("sort", a, dim=dim, descending=largest)
    return values.narrow(dim, 0, k).clone(), index.narrow(dim, 0, k).clone()


def searchsorted(seq, values, right=False, out_int32=False):
    refuse(_SEARCHSORTED, seq)
    # exact for a sorted sequence: the insertion point is the number of its elements before
    # the value (left) or not after it (right), in NumPy's order, which puts NaN last
    s = seq if seq.ndim == 1 else seq.unsqueeze(-2)  # (..., 1, n) against (..., m, 1)
    v = values.unsqueeze(-1)
    if right:
        before = v < s
        if s.is_floating_point():
            before = before.bitwise_or((s != s).bitwise_and(v == v))
        before = before.logical_not()
    else:
        before = s < v
        if s.is_floating_point():
            before = before.bitwise_or((v != v).bitwise_and(s == s))
    return before.sum(-1).to(D.int32 if out_int32 else D.int64)


def bincount(a, weights=None, minlength=0):
    size = max(int(a.amax()) + 1 if a.numel() else 0, minlength)
    if weights is None:
        dtype, src = D.int64, a.new_ones(a.shape, dtype=D.int64)
    else:
        if not hasattr(weights, "new_full"):  # given as a parameter: an array
            weights = _opdef.PUBLIC.tensor(weights, device=a.device)
        dtype = weights.dtype if weights.dtype == D.float32 else D.float64
        src = weights.to(dtype)
    return a.new_zeros(size, dtype=dtype).scatter_add(0, a, src)


def histc(a, bins=100, min=0.0, max=0.0):  # noqa: A002 - PyTorch's names
    lo, hi = float(min), float(max)
    if lo == hi and a.numel():
        lo, hi = float(a.amin()), float(a.amax())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    # NumPy's histogram: bin i holds edges[i] <= x < edges[i + 1], the last one hi too;
    # its edges in its dtype (a's, or float64 where a is an integer)
    kind = np.result_type(lo, hi, np.empty(0, a.dtype.to_numpy()))
    edges = _opdef.PUBLIC.tensor(np.linspace(lo, hi, bins + 1, dtype=kind), device=a.device)
    x = a.reshape(-1).to(edges.dtype)
    index = (x.unsqueeze(-1) >= edges).sum(-1) - 1
    index = index.clamp(0, bins - 1)
    inside = (x >= edges[0]).bitwise_and(x <= edges[-1]).to(a.dtype)
    return a.new_zeros(bins, dtype=a.dtype).scatter_add(0, index, inside)


# ----- shapes ----------------------------------------------------------------------------


def _topk_shape(x, k, dim=-1, **params):
    shape = _with(x.shape, dim, k)
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def _kthvalue_shape(x, k, dim=-1, keepdim=False):
    return values_and_indices(x, dim, keepdim)


def _searchsorted_shape(seq, values, right=False, out_int32=False, **params):
    return getattr(values, "shape", ()), np.dtype(np.int32 if out_int32 else np.int64)


def _histc_shape(x, bins=100, min=0.0, max=0.0, **params):  # noqa: A002 - PyTorch's names
    return (bins,), x.dtype


# ----- the declarations ------------------------------------------------------------------


def _sorting(schema, kernel, **fields):
    """An op of :data:`torcia.ops.SORTING`."""
    return define(schema, kernel, group="sorting", **fields)


#: in the order of :data:`torcia.ops.SORTING`; unique, nonzero, searchsorted, bincount and
#: histc give indices or counts: no gradient
DECLARED = (
    _sorting("sort(Tensor x, *, int dim=-1, bool descending=False, bool stable=False) "
             "-> (Tensor, Tensor)", Kernels.sort, shape=scan_with_indices, refuses=_SORT),
    _sorting("topk(Tensor x, *, int? k=None, int dim=-1, bool largest=True, bool sorted=True) "
             "-> (Tensor, Tensor)", Kernels.topk, shape=_topk_shape, decomposition=topk,
             refuses=_TOPK),
    _sorting("unique(Tensor a, *, int? dim=None) -> (Tensor, Tensor, Tensor)", Kernels.unique,
             differentiable=False),
    _sorting("nonzero(Tensor a) -> Tensor", Kernels.nonzero, differentiable=False),
    _sorting("kthvalue(Tensor x, *, int? k=None, int dim=-1, bool keepdim=False) "
             "-> (Tensor, Tensor)", Kernels.kthvalue, shape=_kthvalue_shape,
             decomposition=kthvalue, refuses=_KTHVALUE),
    _sorting("searchsorted(Tensor seq, Tensor values, *, bool right=False, "
             "bool out_int32=False) -> Tensor", Kernels.searchsorted,
             shape=_searchsorted_shape, decomposition=searchsorted, differentiable=False,
             refuses=_SEARCHSORTED),
    _sorting("bincount(Tensor a, *, Tensor? weights=None, int minlength=0) -> Tensor",
             Kernels.bincount, decomposition=bincount, differentiable=False),
    _sorting("histc(Tensor a, *, int bins=100, float min=0.0, float max=0.0) -> Tensor",
             Kernels.histc, shape=_histc_shape, decomposition=histc, differentiable=False),
)
