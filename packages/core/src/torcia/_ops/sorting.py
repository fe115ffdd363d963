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
results carry no gradient. Their public functions are at the end of this module, next to
their declarations, and after them those built on them (``argsort``, ``msort``,
``bucketize``, ``unique_consecutive``, ``isin``, ``histogram``, ``histogramdd``), which
:mod:`torcia._oplib` registers as a family; the derivatives of sort, topk and kthvalue are
torcia-autograd's.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    COMPLEX,
    along_dim,
    op,
    random_floats,
    refuse,
    return_type,
    scan_with_indices,
    size_at,
    values_and_indices,
    wrap_dim,
)
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


def kth_by_sort(a, k=None, dim=-1, keepdim=False):
    refuse(_KTHVALUE, a)
    return sorted_at(a, k - 1, dim, keepdim)


def topk_by_sort(a, k=None, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's name
    refuse(_TOPK, a)
    values, index = op("sort", a, dim=dim, descending=largest)
    return values.narrow(dim, 0, k).clone(), index.narrow(dim, 0, k).clone()


def searchsorted_by_count(seq, values, right=False, out_int32=False):
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


def bincount_by_scatter(a, weights=None, minlength=0):
    size = max(int(a.amax()) + 1 if a.numel() else 0, minlength)
    if weights is None:
        dtype, src = D.int64, a.new_ones(a.shape, dtype=D.int64)
    else:
        if not hasattr(weights, "new_full"):  # given as a parameter: an array
            weights = _opdef.PUBLIC.tensor(weights, device=a.device)
        dtype = weights.dtype if weights.dtype == D.float32 else D.float64
        src = weights.to(dtype)
    return a.new_zeros(size, dtype=dtype).scatter_add(0, a, src)


def histc_by_scatter(a, bins=100, min=0.0, max=0.0):  # noqa: A002 - PyTorch's names
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
             "-> (Tensor, Tensor)", Kernels.topk, shape=_topk_shape, decomposition=topk_by_sort,
             refuses=_TOPK),
    _sorting("unique(Tensor a, *, int? dim=None) -> (Tensor, Tensor, Tensor)", Kernels.unique,
             differentiable=False),
    _sorting("nonzero(Tensor a) -> Tensor", Kernels.nonzero, differentiable=False),
    _sorting("kthvalue(Tensor x, *, int? k=None, int dim=-1, bool keepdim=False) "
             "-> (Tensor, Tensor)", Kernels.kthvalue, shape=_kthvalue_shape,
             decomposition=kth_by_sort, refuses=_KTHVALUE),
    _sorting("searchsorted(Tensor seq, Tensor values, *, bool right=False, "
             "bool out_int32=False) -> Tensor", Kernels.searchsorted,
             shape=_searchsorted_shape, decomposition=searchsorted_by_count, differentiable=False,
             refuses=_SEARCHSORTED),
    _sorting("bincount(Tensor a, *, Tensor? weights=None, int minlength=0) -> Tensor",
             Kernels.bincount, decomposition=bincount_by_scatter, differentiable=False,
             samples=lambda rng: [((np.array([0, 1, 1, 3]),), {"weights": None, "minlength": 0}),
                                  ((np.array([0, 2, 2]),),
                                   {"weights": random_floats(rng, 3), "minlength": 5})]),
    _sorting("histc(Tensor a, *, int bins=100, float min=0.0, float max=0.0) -> Tensor",
             Kernels.histc, shape=_histc_shape, decomposition=histc_by_scatter,
             differentiable=False),
)


# ----- public functions (torcia.sort, torcia.topk...): the ops' calls by name -----------

_Sort = return_type("sort", ("values", "indices"))


_Topk = return_type("topk", ("values", "indices"))


_Kth = return_type("kthvalue", ("values", "indices"))


def sort(input, dim=-1, descending=False, stable=False):
    """Sort along ``dim``; returns ``(values, indices)``. Equal elements keep their order.

    Examples
    --------
    >>> import torcia
    >>> torcia.sort(torcia.tensor([3, 1, 2])).values
    tensor([1, 2, 3])
    """
    d = wrap_dim(dim, input.ndim)
    v, i = along_dim("sort", (input,), {"dim": d, "descending": bool(descending),
                                        "stable": bool(stable)})
    return _Sort(v, i)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest) elements along ``dim``, with their indices.

    Examples
    --------
    >>> import torcia
    >>> torcia.topk(torcia.tensor([1.0, 5.0, 3.0]), 2).indices
    tensor([1, 2])
    """
    d = wrap_dim(dim, input.ndim)
    if not 0 <= k <= size_at(input, d):
        raise RuntimeError("selected index k out of range")
    v, i = along_dim("topk", (input,), {"k": int(k), "dim": d, "largest": bool(largest),
                                        "sorted": bool(sorted)})
    return _Topk(v, i)


def kthvalue(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element (1-based) along ``dim``, with its index.

    Examples
    --------
    >>> import torcia
    >>> torcia.kthvalue(torcia.tensor([3.0, 1.0, 2.0]), 2)
    torcia.return_types.kthvalue(
    values=tensor(2.),
    indices=tensor(2))
    """
    d = wrap_dim(dim, input.ndim)
    if not 1 <= k <= size_at(input, d):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    v, i = along_dim("kthvalue", (input,), {"k": int(k), "dim": d, "keepdim": bool(keepdim)})
    return _Kth(v, i)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The sorted unique elements (or slices along ``dim``), optionally with the inverse
    indices and the counts.

    Examples
    --------
    >>> import torcia
    >>> torcia.unique(torcia.tensor([3, 1, 3]), return_counts=True)
    (tensor([1, 3]), tensor([1, 2]))
    """
    d = None if dim is None else wrap_dim(dim, input.ndim)
    values, inverse, counts = _opdef.CALL("unique", (input,), {"dim": d})
    out = (values,) + ((inverse,) if return_inverse else ()) + (
        (counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Indices where ``input`` would be inserted into the innermost dim of
    ``sorted_sequence`` to keep it sorted (``right`` or ``side="right"``: after equals).

    Examples
    --------
    >>> import torcia
    >>> torcia.searchsorted(torcia.tensor([1, 3, 5]), torcia.tensor([3, 4]))
    tensor([1, 2])
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"we got '{side}'")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites")
        right = side == "right"
    if not isinstance(input, _opdef.PUBLIC.Tensor):
        # a Python number promotes with the sequence as a weak scalar (2.5 among int64
        # values stays 2.5; 4 among bools makes both int64), held in double precision
        dt = _opdef.PUBLIC.result_type(sorted_sequence, input)
        input = _opdef.PUBLIC.to_dtype(
            _opdef.PUBLIC.tensor(np.asarray(input), device=sorted_sequence.device), dt)
    if sorter is not None:
        sorted_sequence = _opdef.PUBLIC.take_along_dim(sorted_sequence, sorter, -1)
    seq_shape, val_shape = tuple(sorted_sequence.shape), tuple(input.shape)
    if len(seq_shape) > 1 and seq_shape[:-1] != val_shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq_shape)} and input value tensor {list(val_shape)}")
    dt = D.promote_types(sorted_sequence.dtype, input.dtype)
    to_dtype = _opdef.PUBLIC.to_dtype
    return _opdef.CALL("searchsorted", (to_dtype(sorted_sequence, dt), to_dtype(input, dt)),
                       {"right": bool(right), "out_int32": bool(out_int32)})


def bincount(input, weights=None, minlength=0):
    """Count the occurrences of each value in a 1-D tensor of non-negative integers
    (summing ``weights`` instead when given).

    Examples
    --------
    >>> import torcia
    >>> torcia.bincount(torcia.tensor([0, 2, 2]))
    tensor([1, 0, 2])
    """
    if input.ndim != 1 or input.dtype.category != 1 or (
        input.numel() and int(input._data.min()) < 0
    ):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    return _opdef.CALL("bincount", (input, weights), {"minlength": int(minlength)})


def histc(input, bins=100, min=0, max=0):
    """Histogram of ``bins`` equal-width bins over [min, max] (the data's range when both
    are 0); elements outside are ignored.

    Examples
    --------
    >>> import torcia
    >>> torcia.histc(torcia.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {min} "
                           f"max {max}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"torch.histc: input tensor must be of floating point dtype, got "
                           f"{input.dtype.name}")
    return _opdef.CALL("histc", (input,), {"bins": int(bins), "min": float(min),
                                           "max": float(max)})


def nonzero_tuple(input) -> tuple:
    """``nonzero(input, as_tuple=True)``, which ``where(condition)`` returns too: one int64
    index tensor per dim (one for a 0-dim tensor)."""
    idx = _opdef.CALL("nonzero", (input,), {})
    if input.ndim == 0:
        return (idx.reshape(-1),)
    return tuple(idx[:, j] for j in range(input.ndim))


def nonzero(input, *, as_tuple=False):
    """Indices of the nonzero elements: an ``(n, ndim)`` int64 tensor, or one index tensor
    per dim with ``as_tuple``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nonzero(torcia.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    if as_tuple:
        return nonzero_tuple(input)
    return _opdef.CALL("nonzero", (input,), {})


#: the public functions of the ops above, which torcia exports and Tensor has as methods
#: (but ``searchsorted``, a function only)
PUBLIC = (sort, topk, kthvalue, unique, nonzero, searchsorted, bincount, histc)


# ----- public functions built on the ops ---------------------------------------------------


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.argsort(torcia.tensor([3, 1, 2]), descending=True)
    tensor([0, 2, 1])
    """
    return sort(input, dim, descending, stable).indices


def msort(input):
    """Sort along the first dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.msort(torcia.tensor([[3, 1], [1, 2]]))
    tensor([[1, 1],
            [3, 2]])
    """
    return sort(input, 0).values


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element of ``input`` among the 1-D sorted ``boundaries``.

    Examples
    --------
    >>> import torcia
    >>> torcia.bucketize(torcia.tensor([0.5, 1.0, 2.5]), torcia.tensor([1.0, 2.0]))
    tensor([0, 0, 2])
    """
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive elements (of the flattened input, or slices
    along ``dim``).

    Examples
    --------
    >>> import torcia
    >>> torcia.unique_consecutive(torcia.tensor([1, 1, 2, 2, 1]), return_counts=True)
    (tensor([1, 2, 1]), tensor([2, 2, 1]))
    """
    public = _opdef.PUBLIC
    x = input.reshape(-1) if dim is None else input.movedim(dim, 0)
    n = x.shape[0]
    if n == 0:
        outs = [input]
    else:
        flat = x.reshape(n, -1)
        change = public.ones(n, dtype=D.bool_, device=input.device)
        if n > 1:
            change[1:] = (flat[1:] != flat[:-1]).any(dim=1)
        starts = change.nonzero().reshape(-1)
        values = x[starts]
        outs = [values if dim is None else values.movedim(0, dim)]
        if return_inverse:
            inverse = change.long().cumsum(0) - 1
            outs.append(inverse.reshape(input.shape) if dim is None else inverse)
        if return_counts:
            ends = public.cat([starts[1:], public.tensor([n], device=input.device)])
            outs.append(ends - starts)
    return outs[0] if len(outs) == 1 else tuple(outs)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Where each of ``elements`` occurs in ``test_elements``.

    Examples
    --------
    >>> import torcia
    >>> torcia.isin(torcia.tensor([1, 2, 3]), torcia.tensor([2, 5]))
    tensor([False,  True, False])
    """
    public = _opdef.PUBLIC
    device = (elements if isinstance(elements, public.Tensor) else test_elements).device
    el = elements if isinstance(elements, public.Tensor) else public.tensor(elements,
                                                                          device=device)
    te = test_elements if isinstance(test_elements, public.Tensor) else \
        public.tensor(test_elements, device=device)
    dt = public.result_type(el, te)
    if dt is D.bool_:  # torcia is lenient here (torch refuses bool); searched as uint8
        dt = D.uint8
    # with tensor ops, not NumPy on the host: they run on the meta device and under vmap
    flat, te = public.to_dtype(el, dt).reshape(-1), public.to_dtype(te, dt).reshape(-1)
    if not te.numel() or not flat.numel():
        found = public.zeros(flat.shape, dtype=D.bool_, device=device)
    elif dt.is_complex:  # no order to search in: compare with every test element
        found = (flat.unsqueeze(-1) == te).any(-1)
    else:
        ordered = te.sort().values
        at = searchsorted(ordered, flat).clamp(max=te.numel() - 1)
        found = ordered.take(at) == flat
    found = found.reshape(el.shape)
    return ~found if invert else found


_Histogram = return_type("histogram", ("hist", "bin_edges"))


def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """Histogram of ``input``'s values: ``bins`` equal bins over ``range`` (default the
    data's extent) or explicit edges; returns ``(hist, bin_edges)``, as NumPy's.

    Examples
    --------
    >>> import torcia
    >>> hist, edges = torcia.histogram(torcia.tensor([1.0, 2.0, 2.0, 4.0]), bins=3)
    >>> hist
    tensor([1., 2., 1.])
    >>> edges
    tensor([1., 2., 3., 4.])
    """
    # tensor ops rather than NumPy on the host: they run under vmap (each sample its own
    # range) and on any device
    public = _opdef.PUBLIC
    x = input.detach().reshape(-1)
    dev = input.device
    if isinstance(bins, public.Tensor) and range is not None:
        raise TypeError("histogram(): range= goes with a number of bins; bins given as a "
                        "tensor of edges bound the histogram themselves")
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided, input tensor "
                           f"and weight tensor should have the same dtype, but got "
                           f"input({D.cpp_type_name(input.dtype)}), and weight"
                           f"({D.cpp_type_name(weight.dtype)})")
    if isinstance(bins, public.Tensor):
        if bins.dtype != input.dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                               f"the same dtype, but got input with dtype "
                               f"{D.cpp_type_name(input.dtype)} and bins for dimension 0 "
                               f"with dtype {D.cpp_type_name(bins.dtype)}")
        if bins.numel() < 2:
            raise RuntimeError("torch.histogram(): bins must be > 0, but got 0 for dimension 0")
        edges = bins.detach()
    else:
        n = int(bins)
        if n <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {n} for "
                               f"dimension 0")
        if range is not None:
            lo, hi = (public.full((), float(r), dtype=D.float64, device=dev) for r in range)
        elif x.numel():
            lo, hi = x.amin().double(), x.amax().double()
        else:
            lo, hi = (public.full((), r, dtype=D.float64, device=dev) for r in (0.0, 1.0))
        # every sample's range at once (a batched array's min and max take them all)
        first, last = float(lo._data.min()), float(hi._data.max())
        if first > last:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                               f"{first:g} max {last:g} for dimension 0")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{first:g}, {last:g}] "
                               f"is not finite")
        same = (lo == hi).double() * 0.5  # an empty range widened, as NumPy's
        # the edges in the input's dtype by PyTorch's linspace (from each end towards the
        # middle): the values on an edge fall in the bin torch's do (integers, which torch
        # refuses, in float64)
        ct = input.dtype if input.is_floating_point() else D.float64
        lo, hi = (lo - same).to(ct), (hi + same).to(ct)
        at = public.arange(n + 1, dtype=ct, device=dev)
        step = (hi - lo) / n
        edges = (lo + step * at).where(at < (n + 1) // 2, hi - step * (n - at))
    n = edges.numel() - 1
    xe = x.to(edges.dtype)
    # the bin whose edges hold the value, the last one closed on the right
    at = searchsorted(edges, xe, right=True).sub(1).clamp(0, n - 1)
    keep = ((xe >= edges[0]) & (xe <= edges[-1])).double()
    w = keep if weight is None else keep * weight.detach().reshape(-1).double()
    hist = public.zeros(n, dtype=D.float64, device=dev).scatter_add(0, at, w)
    if density:
        hist = hist / (edges[1:] - edges[:-1]).double() / hist.sum()
    return _Histogram(hist.to(input.dtype), edges.to(input.dtype, copy=True))


_Histogramdd = return_type("histogramdd", ("hist", "bin_edges"))


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    """The histogram of the points in ``input`` (``... x D``: the last dimension holds
    each point's coordinates): ``bins`` is a number of equal bins per dimension, a list of
    them, or a list of 1-D tensors of bin edges; ``range`` is ``[lo0, hi0, lo1, hi1...]``.
    Returns ``(hist, bin_edges)``, ``bin_edges`` a list of one tensor per dimension.

    Examples
    --------
    >>> import torcia
    >>> pts = torcia.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    >>> torcia.histogramdd(pts, bins=[2, 2]).hist
    tensor([[1., 0.],
            [1., 1.]])
    """
    if not input.is_floating_point():
        raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                           f"the same dtype, but got input {input.dtype}")
    public = _opdef.PUBLIC
    pts = input.detach().cpu().numpy()
    ndim = pts.shape[-1]
    pts = pts.reshape(-1, ndim)
    if isinstance(bins, public.Tensor):
        bins = bins.tolist()
    if isinstance(bins, (list, tuple)):
        bins = [b.detach().cpu().numpy() if isinstance(b, public.Tensor) else int(b) for b in bins]
    ranges = None
    if range is not None:
        r = list(range)
        if len(r) != 2 * ndim:
            raise RuntimeError(f"torch.histogramdd: for a {ndim}-dimensional histogram, range "
                               f"should have {2 * ndim} elements, but got {len(r)}")
        ranges = [(r[2 * k], r[2 * k + 1]) for k in builtins.range(ndim)]
    w = None if weight is None else weight.detach().cpu().numpy().reshape(-1)
    hist, edges = np.histogramdd(pts, bins, range=ranges, weights=w, density=density)
    dt = pts.dtype
    return _Histogramdd(public.tensor(hist.astype(dt), device=input.device),
                        [public.tensor(e.astype(dt), device=input.device) for e in edges])


#: the functions here that are also Tensor methods, under the same name
METHODS = tuple(fn.__name__ for fn in PUBLIC if fn is not searchsorted) + (
    "argsort", "msort",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "unique_consecutive", "isin", "histogram",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in PUBLIC) + (
    "argsort", "bucketize", "histogram", "histogramdd", "isin", "msort", "unique_consecutive",
))
