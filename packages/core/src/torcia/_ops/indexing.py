"""The indexing ops, each declared once: schema, reference kernel, meta shape,
decomposition and autocast policy. Of :data:`torcia.ops.MOVEMENT` (copies), the gathers
and scatters (``gather``, ``scatter``, ``scatter_add``, ``scatter_reduce``,
``take_along_dim``), the ``index_*`` ops (``index_select``, ``index_add``, ``index_copy``,
``index_put``) and ``masked_select``; ``masked_fill``, of ``ELEMENTWISE_OTHER``; and
``getitem`` (``tensor[key]``), of :data:`torcia.ops.VIEW` (its result is a view where the
key is basic), declared beside its public function; the views' decompositions
(:func:`torcia._ops.views.sliced`) call it by name.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy). A decomposition is written with Tensor methods, the public functions
(:data:`torcia._opdef.PUBLIC`) and :data:`torcia._opdef.CALL` (an op by name): it runs on
any device, and this module is below the Tensor class. The public functions of
``gather``, ``scatter``, ``masked_fill``... are at the end of this module, next to their
declarations, with the index checks they share, and those built on them (``take``,
``put``, ``select``, ``tensor_split``, ``index_fill``, ``masked_scatter``, the
``*_scatter`` functions...), and ``tensor[key]`` and its assignment (``getitem``,
``setitem``, ``index_put``), which write in place through the Tensor class's
:data:`torcia._opdef.WRITE_INPLACE`. Their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import builtins
import functools
import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import np_floating as _floating
from torcia._opdef import define
from torcia._ops._common import (
    along_dim,
    broadcast_error,
    first_shape,
    fused_multiply_add,
    low_precision,
    operand_as,
    opmath,
    random_floats,
    readable_value,
    size_at,
    with_size,
    wrap_dim,
)
from torcia._ops._common import where as _where
from torcia._ops.movement import contiguous
from torcia._ops.views import expand, permute

# ----- reference kernels -----------------------------------------------------------------


def _scatter_index(arange, index, dim):
    """The key of ``gather``/``scatter`` along ``dim``: the open grids of
    ``indices(index.shape, sparse=True)`` (CuPy has no ``sparse``), ``index`` at ``dim``;
    ``arange`` makes them (the array module's for a kernel, a device's for a decomposition
    on tensors)."""
    n = index.ndim
    grids = [arange(s).reshape((1,) * d + (s,) + (1,) * (n - d - 1))
             for d, s in enumerate(index.shape)]
    grids[dim] = index
    return tuple(grids)


#: scatter_reduce's reductions: the ufunc that accumulates each
_REDUCE_UFUNC = {"sum": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum",
                 "mean": "add"}


def _identity(xp, reduce, dtype):
    """What the places scatter_reduce writes to start from where it leaves out their values."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if _floating(np.dtype(dtype)):
        return -np.inf if reduce == "amax" else np.inf
    if np.dtype(dtype).kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _add_at(xp, out, key, values):
    parts = key if key.__class__ is tuple else (key,)
    if all(k is None or k is Ellipsis or k.__class__ in (int, slice) for k in parts):
        view = out[key]
        if view.__class__ is values.__class__ is xp.ndarray and values.dtype == view.dtype \
                and values.ndim <= view.ndim:
            # a basic index names each element at most once: an add into its view is
            # ufunc.at's sum without its unbuffered loop (x[:, -1]'s gradient, (32, 128)
            # values: 37 -> 3 us)
            view += values
            return
    if xp is np:
        np.add.at(out, key, values)
    else:
        xp.add.at(out, key, values)


def _fused_index_add(out, index, source, dim, alpha):
    """``out[index[i]] = fma(source[i], alpha, out[index[i]])`` along ``dim``, for i in
    order. Round r takes each index value's r-th occurrence: within a round the targets
    are distinct, so a round is one vectorised step and the terms of an element still
    arrive in index order."""
    index = np.asarray(index, np.int64).reshape(-1)
    if not index.size:
        return
    order = np.argsort(index, kind="stable")
    ranked = index[order]
    position = np.arange(index.size)
    first = np.where(np.r_[True, ranked[1:] != ranked[:-1]], position, 0)
    occurrence = np.empty_like(position)
    occurrence[order] = position - np.maximum.accumulate(first)
    by_round = np.argsort(occurrence, kind="stable")
    bounds = np.cumsum(np.bincount(occurrence))[:-1]
    to, terms = np.moveaxis(out, dim, 0), np.moveaxis(source, dim, 0)
    alpha = out.dtype.type(alpha)  # in the tensor's dtype, a NumPy float64 too
    for picked in np.split(by_round, bounds):
        rows = index[picked]
        to[rows] = fused_multiply_add(terms[picked], alpha, to[rows])


class Kernels:
    """The reference kernels of the indexing ops (see the module's doc)."""

    def getitem(self, a, key):
        if key.__class__ is tuple and len(key) == 2 and key[0].__class__ is np.ndarray and (
                key[1] is Ellipsis and a.ndim == 1 and key[0].ndim):
            # one index array into a vector, (array, ...): NumPy's own path for a[array],
            # the same copy at a fifth of the cost
            return a[key[0]]
        return a[key]

    def gather(self, a, index, dim):
        # the result has the index's shape: take_along_axis would broadcast a smaller index
        # across the dims not gathered
        return a[_scatter_index(self.xp.arange, index, dim)]

    def scatter(self, a, index, src, dim):
        out = a.copy()
        if isinstance(src, self.xp.ndarray):
            src = src[tuple(slice(0, s) for s in index.shape)]
        out[_scatter_index(self.xp.arange, index, dim)] = src
        return out

    def scatter_add(self, a, index, src, dim):
        xp = self.xp
        out = a.copy()
        src = src[tuple(slice(0, s) for s in index.shape)]
        _add_at(xp, out, _scatter_index(self.xp.arange, index, dim), src)
        return out

    def scatter_reduce(self, a, index, src, dim, reduce, include_self=True):
        xp = self.xp
        key = _scatter_index(self.xp.arange, index, dim)
        src = src[tuple(slice(0, s) for s in index.shape)]
        ufunc = getattr(xp, _REDUCE_UFUNC[reduce])
        out = a.copy()
        count = xp.ones(a.shape, dtype=np.int64) if include_self else xp.zeros(a.shape, np.int64)
        if not include_self:
            # the scattered-to places start from the reduction's identity
            out[key] = _identity(xp, reduce, a.dtype)
        ufunc.at(out, key, src)
        if reduce == "mean":
            xp.add.at(count, key, 1)
            count = xp.maximum(count, 1)
            hit = xp.zeros(a.shape, dtype=bool)
            hit[key] = True
            if _floating(a.dtype) or a.dtype.kind == "c":
                mean = out / count
            else:
                mean = xp.floor_divide(out, count)
            out = xp.where(hit, mean, out).astype(a.dtype, copy=False)
        return out

    def index_select(self, a, index, dim):
        return self.xp.take(a, index, axis=dim)

    def index_add(self, a, index, source, dim, alpha=1):
        xp = self.xp
        key = (slice(None),) * dim + (index,)
        if a.ndim > 1 and low_precision(a) and alpha == 1 and dim in (0, a.ndim - 1):
            # PyTorch scatters along the first and last dims, summing float16 and bfloat16
            # in float32 and rounding once; other dims add (and round) a slice at a time
            out = a.astype(np.float32)
            _add_at(xp, out, key, source.astype(np.float32))
            return out.astype(a.dtype)
        out = a.copy()
        if alpha != 1 and a.ndim > 1 and xp is np and a.dtype.kind == "f" \
                and a.dtype.itemsize >= 4:
            # PyTorch adds each slice in turn with add_'s alpha, fused: one rounding per
            # term, in index order (a vector's kernel rounds the product first, as add.at)
            _fused_index_add(out, index, source, dim, alpha)
            return out
        _add_at(xp, out, key, source * alpha if alpha != 1 else source)
        return out

    def index_copy(self, a, index, source, dim):
        out = a.copy()
        out[(slice(None),) * dim + (index,)] = source
        return out

    def index_put(self, a, values, key, accumulate=False):
        out = a.copy()
        if accumulate:
            _add_at(self.xp, out, key, values)
        else:
            out[key] = values
        return out

    def take_along_dim(self, a, indices, dim=None):
        xp = self.xp
        if dim is None:
            return xp.take_along_axis(a.reshape(-1), indices.reshape(-1), axis=0)
        return xp.take_along_axis(a, indices, axis=dim)

    def masked_fill(self, a, mask, value):
        return self.xp.where(mask, self.xp.asarray(value, dtype=a.dtype), a)

    def masked_select(self, a, mask):
        xp = self.xp
        shape = xp.broadcast_shapes(a.shape, mask.shape)
        return xp.broadcast_to(a, shape)[xp.broadcast_to(mask, shape)]


# ----- meta shapes -----------------------------------------------------------------------


def _gather_shape(x, index, dim, **params):
    return index.shape, x.dtype


def _index_select_shape(x, index, dim, **params):
    dim %= max(x.ndim, 1)
    return x.shape[:dim] + index.shape + x.shape[dim + 1:], x.dtype


def _take_along_dim_shape(x, indices, dim=None, **params):
    if dim is None:
        return (math.prod(indices.shape),), x.dtype
    dim %= max(x.ndim, 1)
    shape = np.broadcast_shapes(with_size(x.shape, dim, 1), with_size(indices.shape, dim, 1))
    return with_size(shape, dim, indices.shape[dim]), x.dtype


def _is_stand_in(arr) -> bool:
    return arr.ndim > 0 and arr.size > 1 and not any(arr.strides)


def _getitem_shape(x, key, **params):
    """``x[key]`` under NumPy's rules (the kernel's): basic indices keep their place; the
    advanced ones (arrays, and integers alongside an array) broadcast together, and their
    dims go where the first is when they are adjacent in the key, else first. A boolean
    mask of a meta tensor has no shape without its values."""
    key = key if isinstance(key, tuple) else (key,)

    def is_mask(k):
        return isinstance(k, (bool, np.bool_)) or (
            isinstance(k, np.ndarray) and k.dtype.kind == "b")

    has_array = any(isinstance(k, np.ndarray) or is_mask(k) for k in key)
    consumed = sum(np.ndim(k) if is_mask(k) else 1 for k in key
                   if k is not None and k is not Ellipsis)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    out, arrays, where, dim = [], [], [], 0
    for i, k in enumerate(key):
        if k is None:
            out.append(1)
        elif k is Ellipsis:
            n = x.ndim - consumed
            out.extend(x.shape[dim:dim + n])
            dim += n
        elif isinstance(k, slice):
            out.append(len(range(*k.indices(x.shape[dim]))))
            dim += 1
        elif is_mask(k):
            k = np.asarray(k)
            if _is_stand_in(k):
                raise NotImplementedError(
                    "getitem: indexing a meta tensor with a boolean mask has no shape "
                    "without the mask's values (it depends on how many are True)")
            where.append((i, len(out)))
            arrays.append((int(k.sum()),))
            dim += k.ndim
        elif isinstance(k, np.ndarray) or has_array:
            where.append((i, len(out)))
            arrays.append(np.shape(k))
            dim += 1
        else:
            n = x.shape[dim]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with "
                                 f"size {n}")
            dim += 1
    out.extend(x.shape[dim:])
    if arrays:
        adjacent = [i for i, _ in where] == list(range(where[0][0], where[-1][0] + 1))
        at = where[0][1] if adjacent else 0
        out[at:at] = np.broadcast_shapes(*arrays)
    return tuple(out), x.dtype


# ----- decompositions ---------------------------------------------------------------------


def _key_along(index, dim, device):
    """The reference kernels' key (:func:`_scatter_index`), of tensors on ``device``."""
    return _scatter_index(functools.partial(_opdef.PUBLIC.arange, device=device), index, dim)


def gathered(x, index, dim=None):
    return x[_key_along(index, dim, x.device)]


def scattered(x, index, src, dim=None):
    # the kernel's writes: src's part of the index's shape (or a number) at the key, into a
    # copy (of repeated places, the last written stays, as NumPy's assignment)
    out = x.clone()
    if hasattr(src, "shape"):
        src = src[tuple(slice(0, s) for s in index.shape)]
    out[_key_along(index, dim, x.device)] = src
    return out


def taken_along(a, indices, dim=None):
    if dim is None:
        return a.reshape(-1).gather(0, indices.reshape(-1))
    dim %= a.ndim
    # both broadcast but along dim, where each keeps its size
    shape = list(_opdef.PUBLIC.broadcast_shapes(
        a.shape[:dim] + (1,) + a.shape[dim + 1:],
        indices.shape[:dim] + (1,) + indices.shape[dim + 1:]))
    expanded = []
    for t in (a, indices):
        shape[dim] = t.shape[dim]
        expanded.append(t.expand(tuple(shape)))
    return expanded[0].gather(dim, expanded[1])


def selected_along(a, index, dim):
    return a.movedim(dim, 0)[index].movedim(0, dim)


@opmath
def scattered_sum(a, index, src, dim):
    return _opdef.CALL("scatter_reduce", (a, index, src), {"dim": dim, "reduce": "sum",
                                                           "include_self": True})


def _spread(index, like, dim):
    """The index of an ``index_*`` op along ``dim``, expanded to ``like``'s shape: the
    index of the scatter doing its work."""
    shape = [1] * like.ndim
    shape[dim] = -1
    return index.reshape(tuple(shape)).expand(tuple(like.shape))


def added_at(a, index, source, dim, alpha=1):
    if alpha != 1:
        source = source * alpha
    return _opdef.CALL("scatter_add", (a, _spread(index, source, dim), source), {"dim": dim})


def copied_at(a, index, source, dim):
    return _opdef.CALL("scatter", (a, _spread(index, source, dim), source), {"dim": dim})


def masked_filled(a, mask, value):
    fill = value.to(a.dtype) if hasattr(value, "new_full") else a.new_full((), value)
    return _where(mask, fill, a)


def masked_selected(a, mask):
    shape = _opdef.PUBLIC.broadcast_shapes(a.shape, mask.shape)
    return a.expand(shape)[mask.expand(shape)]


def _a_move(schema, kernel, **declared):
    return define(schema, kernel, group="movement", **declared)


#: the indexing ops: getitem, last of torcia.ops.VIEW; those of torcia.ops.MOVEMENT, in its
#: order (after the views' own); and masked_fill, last of ELEMENTWISE_OTHER
DECLARED = (
    define("getitem(Tensor x, *, key=None) -> Tensor", Kernels.getitem,
           shape=_getitem_shape, group="view"),
    _a_move("gather(Tensor x, Tensor index, *, dim=None) -> Tensor", Kernels.gather,
            shape=_gather_shape, decomposition=gathered),
    _a_move("scatter(Tensor x, Tensor index, Tensor src, *, dim=None) -> Tensor",
            Kernels.scatter, shape=first_shape, decomposition=scattered, inplace=True,
            inplace_example=("[0, 0, 0, 0]", "0, torcia.tensor([1, 3]), torcia.tensor([5, 7])",
                             "tensor([0, 5, 0, 7])")),
    _a_move("scatter_add(Tensor x, Tensor index, Tensor src, *, dim=None) -> Tensor",
            Kernels.scatter_add, shape=first_shape, decomposition=scattered_sum,
            autocast={"cuda": "promote"}, inplace=True,
            inplace_example=("[1, 1, 1, 1]", "0, torcia.tensor([1, 1]), torcia.tensor([5, 7])",
                             "tensor([ 1, 13,  1,  1])")),
    _a_move("scatter_reduce(Tensor x, Tensor index, Tensor src, *, dim=None, reduce=None, "
            "include_self=True) -> Tensor",
            Kernels.scatter_reduce, shape=first_shape, inplace=True,
            samples=lambda rng: [
                ((random_floats(rng, 3, 4), rng.integers(0, 4, (3, 4)), random_floats(rng, 3, 4)),
                 {"dim": 1, "reduce": reduce, "include_self": True})
                for reduce in ("sum", "amax")],
            inplace_example=("[1.0, 2.0, 3.0]",
                             '0, torcia.tensor([0, 0, 2]), torcia.tensor([5.0, 6.0, 7.0]), '
                             'reduce="amax"',
                             "tensor([6., 2., 7.])")),
    _a_move("index_select(Tensor x, Tensor index, *, dim=None) -> Tensor", Kernels.index_select,
            shape=_index_select_shape, decomposition=selected_along),
    _a_move("index_add(Tensor x, Tensor index, Tensor source, *, dim=None, alpha=1) -> Tensor",
            Kernels.index_add, shape=first_shape, decomposition=added_at, inplace=True,
            inplace_example=("[1, 1, 1]", "0, torcia.tensor([0, 2]), torcia.tensor([10, 20])",
                             "tensor([11,  1, 21])")),
    _a_move("index_copy(Tensor x, Tensor index, Tensor source, *, dim=None) -> Tensor",
            Kernels.index_copy, shape=first_shape, decomposition=copied_at, inplace=True,
            samples=lambda rng: [((random_floats(rng, 3, 4), np.array([0, 2]),
                                   random_floats(rng, 2, 4)), {"dim": 0})],
            inplace_example=("[1, 1, 1]", "0, torcia.tensor([0, 2]), torcia.tensor([10, 20])",
                             "tensor([10,  1, 20])")),
    _a_move("index_put(Tensor x, Tensor values, *, key=None, accumulate=False) -> Tensor",
            Kernels.index_put, shape=first_shape, autocast={"cuda": "promote"}, inplace=True,
            inplace_example=("[1, 1, 1]", "(torcia.tensor([0, 2]),), torcia.tensor([10, 20])",
                             "tensor([10,  1, 20])")),
    _a_move("take_along_dim(Tensor x, Tensor indices, *, dim=None) -> Tensor",
            Kernels.take_along_dim, shape=_take_along_dim_shape, decomposition=taken_along),
    _a_move("masked_select(Tensor x, Tensor mask) -> Tensor", Kernels.masked_select,
            decomposition=masked_selected,
            samples=lambda rng: [((random_floats(rng, 3, 4), random_floats(rng, 3, 4) > 0), {})]),
    define("masked_fill(Tensor x, Tensor mask, *, Scalar value=None) -> Tensor",
           Kernels.masked_fill, shape=first_shape, decomposition=masked_filled,
           group="elementwise_other",
           inplace_example=("[1, 2, 3]", "torcia.tensor([True, False, True]), 0",
                            "tensor([0, 2, 0])")),
)


# ----- public functions (torcia.gather, torcia.scatter...): the ops' calls by name -------


def check_range(arr, size, dim, exc=IndexError, negative=True, message=None):
    """Raise ``exc`` (IndexError for indexing; gather and scatter raise RuntimeError in
    PyTorch) naming the first out-of-range index. ``negative``: whether an index may count
    from the end, as in ``t[-1]``; gather, scatter and the index_* ops refuse it, as
    PyTorch does, instead of wrapping around. ``message`` replaces the default text (a
    function of the index, or a string)."""
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < (-size if negative else 0) or hi >= size:
            bad = hi if hi >= size else lo
            if callable(message):
                message = message(bad)
            raise exc(message or f"index {bad} is out of bounds for dimension {dim} with size "
                                 f"{size}")


def index_tensor(index, name="index"):
    """``index``, when it is an int32 or int64 tensor (what ``name`` takes), else
    PyTorch's RuntimeError."""
    if not isinstance(index, _opdef.PUBLIC.Tensor) or index.dtype not in (D.int64, D.int32):
        got = index.dtype.name if isinstance(index, _opdef.PUBLIC.Tensor) else \
            type(index).__name__
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index, got {got}")
    return index


def gather(input, dim, index, *, sparse_grad=False):
    """Values of ``input`` along ``dim`` at positions ``index``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.gather(x, 1, torcia.tensor([[0, 0], [1, 0]]))
    tensor([[1, 1],
            [4, 3]])
    """
    d = wrap_dim(dim, input.ndim)
    index_tensor(index, "gather")
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for i in range(input.ndim):
        if i != d and index.shape[i] > input.shape[i]:
            raise RuntimeError(
                f"Size does not match at dimension {i} expected index {list(index.shape)} to be "
                f"smaller than self {list(input.shape)} apart from dimension {d}")
    check_range(index._data, size_at(input, d), d, RuntimeError, negative=False)
    return along_dim("gather", (input, index), {"dim": d})


def index_select(input, dim, index):
    """Rows (along ``dim``) of ``input`` at the 1-D ``index``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4], [5, 6]])
    >>> torcia.index_select(x, 0, torcia.tensor([2, 0]))
    tensor([[5, 6],
            [1, 2]])
    """
    d = wrap_dim(dim, input.ndim)
    if index.dtype.category != 1 or index.ndim > 1:
        raise RuntimeError("index_select(): Index is supposed to be a vector of int64")
    check_range(index._data, size_at(input, d), d, IndexError,
                negative=False, message="index out of range in self")
    return along_dim("index_select", (input, index), {"dim": d})


def take_along_dim(input, indices, dim=None):
    """As :func:`gather` with broadcasting (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[10, 30, 20], [60, 40, 50]])
    >>> torcia.take_along_dim(x, torcia.argsort(x, dim=1), dim=1)
    tensor([[10, 20, 30],
            [40, 50, 60]])
    """
    if dim is None:
        return _opdef.CALL("take_along_dim", (input, indices), {"dim": None})
    d = wrap_dim(dim, input.ndim)
    shape_in = list(input.shape)
    shape_ix = list(indices.shape)
    shape_in[d] = shape_ix[d] = 1
    common = list(np.broadcast_shapes(tuple(shape_in), tuple(shape_ix)))
    a_shape = common.copy()
    a_shape[d] = input.shape[d]
    i_shape = common.copy()
    i_shape[d] = indices.shape[d]
    expand = _opdef.PUBLIC.expand
    return _opdef.CALL("take_along_dim", (expand(input, a_shape), expand(indices, i_shape)),
                       {"dim": d})


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """Write ``src`` (or ``value``) into a copy of ``input`` at ``index`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 3)
    >>> torcia.scatter(x, 1, torcia.tensor([[2], [0]]), torcia.tensor([[1.0], [2.0]]))
    tensor([[0., 0., 1.],
            [2., 0., 0.]])
    """
    d = wrap_dim(dim, input.ndim)
    index_tensor(index, "scatter")
    check_range(index._data, size_at(input, d), d, RuntimeError, negative=False)
    if src is None:
        src = value
    tensor = _opdef.PUBLIC.Tensor
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        if not isinstance(src, tensor):
            src = _opdef.PUBLIC.full(index.shape, src, dtype=input.dtype, device=input.device)
        if reduce == "add":
            return scatter_add(input, dim, index, src)
        return _opdef.PUBLIC.scatter_reduce(input, dim, index, src, "prod")
    if isinstance(src, tensor) and src.dtype is not input.dtype:
        src = _opdef.PUBLIC.to_dtype(src, input.dtype)
    return along_dim("scatter", (input, index, src), {"dim": d})


def scatter_add(input, dim, index, src):
    """Add ``src`` into a copy of ``input`` at ``index`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3)
    >>> torcia.scatter_add(x, 0, torcia.tensor([0, 0, 2]), torcia.tensor([1.0, 2.0, 3.0]))
    tensor([3., 0., 3.])
    """
    d = wrap_dim(dim, input.ndim)
    index_tensor(index, "scatter_add")
    check_range(index._data, size_at(input, d), d, RuntimeError, negative=False)
    return along_dim("scatter_add", (input, index, src), {"dim": d})


def index_add(input, dim, index, source, *, alpha=1):
    """Add ``alpha * source`` into a copy of ``input`` at ``index`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3, 2)
    >>> torcia.index_add(x, 0, torcia.tensor([0, 2, 0]), torcia.ones(3, 2))
    tensor([[2., 2.],
            [0., 0.],
            [1., 1.]])
    """
    d = wrap_dim(dim, input.ndim)
    # PyTorch's 1-D kernel and its n-D one word the error differently
    if input.ndim <= 1:
        check_range(index._data, size_at(input, d), d, IndexError, negative=False,
                    message="index out of range in self")
    else:
        check_range(index._data, size_at(input, d), d, RuntimeError, negative=False)
    _check_index_source(input, d, index, source, "index_add_")
    return along_dim("index_add", (input, index, source), {"dim": d, "alpha": alpha})


def _check_index_source(input, d, index, source, name):
    """PyTorch's checks of index_add_/index_copy_'s source: one slice per index, each of the
    input's slice shape."""
    if not input.ndim or not source.ndim:
        if source.ndim != input.ndim or index.numel() != 1:
            raise RuntimeError(
                "source tensor shape must match self tensor shape, excluding the specified "
                f"dimension. Got self.shape = {list(input.shape)} source.shape = "
                f"{list(source.shape)}")
        return
    if index.numel() != source.shape[d]:
        raise RuntimeError(f"{name}(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim): ({source.shape[d]}), for dim: {d}")
    if source.ndim != input.ndim or any(
            a != b for i, (a, b) in enumerate(zip(input.shape, source.shape)) if i != d):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = {list(input.shape)} source.shape = "
            f"{list(source.shape)}")


def index_copy(input, dim, index, source):
    """A copy of ``input`` with its slices at ``index`` along ``dim`` from ``source``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3, 2)
    >>> torcia.index_copy(x, 0, torcia.tensor([2, 0]), torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[3., 4.],
            [0., 0.],
            [1., 2.]])
    """
    d = wrap_dim(dim, input.ndim)
    size = size_at(input, d)
    check_range(index._data, size, d, negative=False, message=lambda bad: f"index_copy_(): "
                f"index {bad} is out of bounds for dimension {d} with size {size}")
    _check_index_source(input, d, index, source, "index_copy_")
    return along_dim("index_copy", (input, index, source), {"dim": d})


def masked_fill(input, mask, value):
    """Fill ``input`` with ``value`` where the bool ``mask`` (broadcast) is True.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, -2.0, 3.0])
    >>> torcia.masked_fill(x, x < 0, 0.0)
    tensor([1., 0., 3.])
    """
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with "
                           f"dtype {mask.dtype.name}")
    if isinstance(value, _opdef.PUBLIC.Tensor):
        if value.ndim:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
        number = None if value._requires_grad else readable_value(value)
        if number is None:
            # a value in the graph (where() differentiates both), or one without a number
            # to read (meta, batched by vmap), is a tensor operand
            return _opdef.PUBLIC.where(mask, _opdef.PUBLIC.to_dtype(value, input.dtype), input)
        value = number
    return _opdef.CALL("masked_fill", (input, mask),
                       {"value": D.checked_scalar(value, input.dtype)})


def masked_select(input, mask):
    """The elements of ``input`` where the bool ``mask`` (broadcast) is True, as 1-D.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, -2], [-3, 4]])
    >>> torcia.masked_select(x, x > 0)
    tensor([1, 4])
    """
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype.name}")
    _broadcast_check(input.shape, mask.shape)
    return _opdef.CALL("masked_select", (input, mask), {})


def _broadcast_check(a, b):
    error = broadcast_error(a, b)
    if error is not None:
        raise error


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Reduce ``src`` into a copy of ``input`` at ``index`` along ``dim`` with ``reduce``
    ("sum", "prod", "mean", "amax" or "amin"); ``include_self`` counts input's own values.

    Examples
    --------
    >>> import torcia
    >>> torcia.scatter_reduce(torcia.zeros(2), 0, torcia.tensor([0, 0, 1]),
    ...                       torcia.tensor([1.0, 2.0, 3.0]), "amax")
    tensor([2., 3.])
    """
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = wrap_dim(dim, input.ndim)
    index_tensor(index, "scatter_reduce")
    check_range(index._data, size_at(input, d), d, RuntimeError)
    if src.dtype is not input.dtype:
        raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype, got "
                           f"{input.dtype.name} and {src.dtype.name}")
    if input.is_complex() and reduce in ("amax", "amin"):
        raise NotImplementedError(f'"scatter_gather_tensor_cpu_reduce_{reduce}" not '
                                  f"implemented for '{D.torch_type_name(input.dtype)}'")
    if input.is_complex() and (input._requires_grad or src._requires_grad) and (
            _opdef.PUBLIC.is_grad_enabled()):
        # its gradients are real formulas (prod's, mean's): torch refuses as well
        raise RuntimeError("scatter_reduce does not support automatic differentiation for "
                           "outputs with complex dtype.")
    return _opdef.CALL("scatter_reduce", (input, index, src),
                       {"dim": d, "reduce": reduce, "include_self": bool(include_self)})


# ----- the public functions built on them (torcia.take, torcia.select...) ------------------


def argwhere(input):
    """As ``nonzero(input)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.argwhere(torcia.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    return _opdef.PUBLIC.nonzero(input)


def take(input, index):
    """Elements of the flattened ``input`` at ``index``; the result has ``index``'s shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.take(torcia.tensor([[1, 2], [3, 4]]), torcia.tensor([0, 3]))
    tensor([1, 4])
    """
    return input.reshape(-1)[_flat_index(index, input.numel())].reshape(index.shape)


def _flat_index(index, numel):
    """``take``/``put``'s indices into the flattened input, negative ones counted from the
    end, as a 1-D tensor; one outside ``[-numel, numel)`` raises PyTorch's IndexError."""
    idx = index.reshape(-1)
    # min and max, not a boolean selection, which vmap's batched indices cannot answer
    check_range(idx._data, numel, 0, message=lambda bad: f"out of range: tried to access "
                f"index {bad} on a tensor of {numel} elements.")
    return _opdef.PUBLIC.where(idx < 0, idx + numel, idx)


def unravel_index(indices, shape):
    """Flat indices into ``shape`` as a tuple of coordinate tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.unravel_index(torcia.tensor([5, 1]), (2, 3))
    (tensor([1, 0]), tensor([2, 1]))
    """
    public = _opdef.PUBLIC
    idx = indices if isinstance(indices, public.Tensor) else public.tensor(indices)
    if idx.is_floating_point():
        raise TypeError("expected 'indices' to be integer dtype, but got "
                        f"{idx.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = int(np.prod(shape))
    if not total:
        if idx.numel():
            raise RuntimeError("ZeroDivisionError")  # PyTorch's words
        return tuple(public.zeros(idx.shape, dtype=D.int64, device=idx.device) for _ in shape)
    # with tensor ops (they run on the meta device and under vmap); an index out of range
    # wraps around, as PyTorch's (which does not check)
    rest = idx.long() % total
    coords = []
    for size in reversed(shape):
        coords.append(rest % size)
        rest = rest // size
    return tuple(reversed(coords))


def index_fill(input, dim, index, value):
    """A copy of ``input`` with the slices at ``index`` along ``dim`` set to ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.index_fill(torcia.zeros(2, 3), 1, torcia.tensor([0, 2]), 1.0)
    tensor([[1., 0., 1.],
            [1., 0., 1.]])
    """
    d = wrap_dim(dim, input.ndim)
    size = size_at(input, d)
    check_range(index._data, size, d, IndexError)
    mask_shape = [1] * input.ndim
    if input.ndim:
        mask_shape[d] = size
    # out of place: an index batched by vmap writes a batched mask
    mask = _opdef.PUBLIC.zeros(size, dtype=D.bool_, device=input.device).scatter(
        0, index.reshape(-1), True)
    return input.masked_fill(mask.reshape(mask_shape), value)


def masked_scatter(input, mask, source):
    """A copy of ``input`` with the positions where ``mask`` is True filled, in order, from
    ``source``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(4)
    >>> mask = torcia.tensor([True, False, True, False])
    >>> torcia.masked_scatter(x, mask, torcia.tensor([1.0, 2.0]))
    tensor([1., 0., 2., 0.])
    """
    m = mask.expand(*input.shape) if mask.shape != input.shape else mask
    flat_mask = m.reshape(-1)
    taken = flat_mask.long().cumsum(0)  # how many masked positions up to each
    src = source.reshape(-1)
    # the count read from the array, as check_range reads indices: the meta device's
    # stand-ins and vmap's batched arrays answer max()
    if taken.numel() and int(taken._data.max()) > src.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many "
                           "elements as ones in mask")
    gathered = src[(taken - 1).clamp(min=0)]
    return _opdef.PUBLIC.where(flat_mask, gathered.to(input.dtype), input.reshape(-1)).reshape(
        input.shape)


def put(input, index, source, accumulate=False):
    """A copy of ``input`` with the flattened positions ``index`` set from ``source`` (or
    increased by it with ``accumulate``).

    Examples
    --------
    >>> import torcia
    >>> torcia.put(torcia.zeros(2, 2), torcia.tensor([0, 3]), torcia.tensor([5.0, 6.0]))
    tensor([[5., 0.],
            [0., 6.]])
    """
    flat = input.reshape(-1)
    idx = _flat_index(index, flat.numel())
    if accumulate:
        out = flat.index_add(0, idx, source.reshape(-1).to(input.dtype))
    else:
        out = flat.index_copy(0, idx, source.reshape(-1).to(input.dtype))
    return out.reshape(input.shape)


def select_scatter(input, src, dim, index):
    """A copy of ``input`` with ``input.select(dim, index)`` replaced by ``src``.

    Examples
    --------
    >>> import torcia
    >>> torcia.select_scatter(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]), 0, 1)
    tensor([[0., 0.],
            [1., 2.]])
    """
    out = input.clone()
    key = [slice(None)] * input.ndim
    key[dim] = index
    out[tuple(key)] = src
    return out


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of ``input`` with the slice ``start:end:step`` along ``dim`` replaced.

    Examples
    --------
    >>> import torcia
    >>> torcia.slice_scatter(torcia.zeros(4), torcia.ones(2), start=0, step=2)
    tensor([1., 0., 1., 0.])
    """
    out = input.clone()
    key = [slice(None)] * input.ndim
    key[dim] = slice(start, end, step)
    out[tuple(key)] = src
    return out


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of ``input`` with the diagonal ``(offset, dim1, dim2)`` replaced by ``src``.

    Examples
    --------
    >>> import torcia
    >>> torcia.diagonal_scatter(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    out = input.clone()
    out.diagonal(offset, dim1, dim2).copy_(src)
    return out


def fill(input, value):
    """A tensor like ``input`` filled with ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fill(torcia.zeros(2), 7.0)
    tensor([7., 7.])
    """
    public = _opdef.PUBLIC
    return public.full_like(input, value.item() if isinstance(value, public.Tensor) else value)


def fill_diagonal(input, fill_value, wrap=False):
    """A copy of ``input`` (2-D, or N-D with equal sizes) with its main diagonal set to
    ``fill_value``; ``wrap`` continues the diagonal below a tall matrix, as NumPy's.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(3, 2).fill_diagonal(5.0)
    tensor([[5., 0.],
            [0., 5.],
            [0., 0.]])
    >>> torcia.zeros(5, 2).fill_diagonal(5.0, wrap=True)
    tensor([[5., 0.],
            [0., 5.],
            [0., 0.],
            [5., 0.],
            [0., 5.]])
    """
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(tuple(input.shape), dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    public = _opdef.PUBLIC
    return public.where(public.tensor(mask, device=input.device),
                        public.full_like(input, fill_value), input)


_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """Reduce the slices of ``source`` into ``input`` at ``index`` along ``dim`` with
    ``reduce`` ("prod", "mean", "amax" or "amin"); ``include_self=False`` leaves the
    indexed values of ``input`` out of the reduction.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(3)
    >>> torcia.index_reduce(x, 0, torcia.tensor([0, 0, 2]), torcia.tensor([2.0, 3.0, 4.0]),
    ...                     "prod")
    tensor([6., 1., 4.])
    """
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if index.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (D.int64, D.int32):
        raise IndexError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                         f"{index.dtype}")
    d = dim % max(input.ndim, 1)
    src = source if source.ndim else source.reshape(1)
    if index.numel() != (src.shape[d] if src.ndim else 1):
        raise IndexError(f"index_reduce_(): Number of indices ({index.numel()}) should be "
                         f"equal to source.size(dim) ({src.shape[d]})")
    if input.is_complex() and (not include_self or reduce in ("amax", "amin")):
        # PyTorch's kernels: no complex one without the input's values, nor an order
        kernel = ("index_reduce_func_exclude_input_init" if not include_self else
                  "maximum_cpu" if reduce == "amax" else "minimum_cpu")
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{D.torch_type_name(input.dtype)}'")
    if input.ndim == 0:
        return input.reshape(1).scatter_reduce(0, index.reshape(-1).long(), src, reduce,
                                               include_self=include_self).reshape(())
    shape = [1] * input.ndim
    shape[d] = -1
    idx = index.reshape(-1).long().reshape(shape).expand(*src.shape)
    return input.scatter_reduce(d, idx, src, reduce, include_self=include_self)


def nonzero_static(input, *, size, fill_value=-1):
    """The indices of the nonzero elements (as :func:`torcia.nonzero`), cut or padded with
    ``fill_value`` rows to exactly ``size`` rows.

    Examples
    --------
    >>> import torcia
    >>> torcia.nonzero_static(torcia.tensor([0, 3, 0, 5]), size=3)
    tensor([[ 1],
            [ 3],
            [-1]])
    """
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got "
                           f"{size}")
    nz = input.nonzero()
    n = nz.shape[0]
    if n >= size:
        return nz[:size]
    pad = _opdef.PUBLIC.full((size - n, input.ndim), fill_value, dtype=D.int64,
                             device=input.device)
    return _opdef.PUBLIC.cat([nz, pad], 0)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of ``input`` with ``src`` written into its ``as_strided(size, stride,
    storage_offset)`` view (differentiable in both).

    Examples
    --------
    >>> import torcia
    >>> torcia.as_strided_scatter(torcia.zeros(4), torcia.tensor([1.0, 2.0]), (2,), (2,))
    tensor([1., 0., 2., 0.])
    """
    out = input.clone()
    out.as_strided(tuple(size), tuple(stride), storage_offset or 0).copy_(src)
    return out


def select(input, dim, index):
    """The slice of ``input`` at ``index`` along ``dim``, without that dimension (a view).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.select(x, 1, 0)
    tensor([1, 3])
    """
    d = wrap_dim(dim, input.ndim)
    return _opdef.PUBLIC.getitem(input, (slice(None),) * d + (index,))


def tensor_split(input, indices_or_sections, dim=0):
    """Split into ``n`` nearly equal pieces (the first ones larger), or at indices.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor_split(torcia.arange(7), 3)
    (tensor([0, 1, 2]), tensor([3, 4]), tensor([5, 6]))
    >>> torcia.tensor_split(torcia.arange(7), [1, 5])
    (tensor([0]), tensor([1, 2, 3, 4]), tensor([5, 6]))
    """
    d = wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(indices_or_sections, _opdef.PUBLIC.Tensor):
        if indices_or_sections.ndim > 1 or indices_or_sections.dtype is not D.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor of dtype long, but "
                               f"got a tensor with {indices_or_sections.ndim} dims and dtype "
                               f"{indices_or_sections.dtype}")
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        sections = [size // n + (1 if i < size % n else 0) for i in range(n)]
        return _opdef.PUBLIC.split(input, sections, d)
    # each piece is input[start:end] along d, with a Python slice's reading of negative and
    # out-of-range bounds: pieces can be empty, or overlap when the indices decrease
    bounds = [0, *(int(i) for i in indices_or_sections), None]
    head = (slice(None),) * d
    getitem = _opdef.PUBLIC.getitem
    return tuple(getitem(input, (*head, slice(a, b))) for a, b in zip(bounds, bounds[1:]))


def _split_by(name, dim_needed, dim, example):
    def pieces(input, indices_or_sections):
        if input.ndim < dim_needed:
            raise RuntimeError(f"torcia.{name} requires a tensor with at least {dim_needed} "
                               f"dimension, but got a tensor with {input.ndim} dimensions!")
        d = 0 if (name == "hsplit" and input.ndim == 1) else dim
        if isinstance(indices_or_sections, int) and input.shape[d] % indices_or_sections:
            raise RuntimeError(f"torcia.{name} attempted to split along dimension {d}, but "
                               f"the size of the dimension {input.shape[d]} is not "
                               f"divisible by the split_size {indices_or_sections}!")
        return tensor_split(input, indices_or_sections, d)

    pieces.__name__ = name
    pieces.__doc__ = (f"Split ``input`` into pieces along dimension {dim}, as ``numpy.{name}``."
                      f"\n\nExamples\n--------\n>>> import torcia\n{example}\n")
    return pieces


hsplit = _split_by("hsplit", 1, 1, """>>> torcia.hsplit(torcia.arange(6).reshape(2, 3), [1])
(tensor([[0],
        [3]]), tensor([[1, 2],
        [4, 5]]))""")


vsplit = _split_by("vsplit", 2, 0, """>>> torcia.vsplit(torcia.arange(6).reshape(3, 2), [1])
(tensor([[0, 1]]), tensor([[2, 3],
        [4, 5]]))""")


dsplit = _split_by("dsplit", 3, 2, """>>> [t.shape for t in torcia.dsplit(torcia.zeros(2, 2, 4), 2)]
[torcia.Size([2, 2, 2]), torcia.Size([2, 2, 2])]""")


# ----- tensor[key] and its assignment --------------------------------------------------

#: the Tensor class, dispatch (torcia._tensor.call), torcia.tensor and the Tensor class's
#: in-place write and overlap check, bound by the first call of ``_index_key`` (then
#: :func:`_key_of`): this module is below the Tensor class, and tensor[key] is too hot to
#: look them up at each call
_Tensor = _call = _tensor_of = _write_inplace = _check_overlap = None


def _bound_key_of():
    global _Tensor, _call, _tensor_of, _write_inplace, _check_overlap
    _Tensor, _call, _tensor_of = _opdef.PUBLIC.Tensor, _opdef.CALL, _opdef.PUBLIC.tensor
    _write_inplace, _check_overlap = _opdef.WRITE_INPLACE, _opdef.CHECK_OVERLAP
    return _key_of


_index_key = _opdef.bind_on_first_call(globals(), "_index_key", _bound_key_of)


def _basic_key(shape, key):
    """``key`` as a tuple when it is only in-range ints and slices of ints (the common case,
    checked without the general walk), else None.

    Keys end in an Ellipsis: NumPy then gives a 0-d view for all-int keys, not a scalar
    copy, as PyTorch does."""
    if key.__class__ is int:
        return (key, Ellipsis) if shape and -shape[0] <= key < shape[0] else None
    if key.__class__ is not tuple:
        key = (key,)
    if len(key) > len(shape):
        return None
    for k, size in zip(key, shape):
        cls = k.__class__
        if cls is int:
            if not -size <= k < size:
                return None
        elif cls is not slice or not (
            (k.start is None or k.start.__class__ is int)
            and (k.stop is None or k.stop.__class__ is int)
            and (k.step is None or (k.step.__class__ is int and k.step > 0))
        ):
            return None
    return key + (Ellipsis,)


def _key_of(input, key):
    """Turn a user index into a key of arrays; report out-of-range and bad keys like PyTorch."""
    shape = input._data.shape
    dev = input._device
    if key.__class__ is _Tensor and key._device is dev and key._data.dtype.kind in "iu" and (
        shape and dev.backend.xp is np
    ):
        # one integer index tensor on NumPy: NumPy checks the range itself (see getitem)
        return (key._data, Ellipsis), True
    basic = _basic_key(shape, key)
    if basic is not None:
        return basic, False
    # a Python range indexes as the list of its ints, as in PyTorch (not a basic key)
    if isinstance(key, range):
        key = list(key)
    elif isinstance(key, tuple) and builtins.any(isinstance(k, range) for k in key):
        key = tuple(list(k) if isinstance(k, range) else k for k in key)
    if not isinstance(key, tuple):
        key = (key,)
    ndim = len(shape)
    out = []
    dim = 0
    advanced = False
    n_specified = 0
    for k in key:
        if k is None or k is Ellipsis:
            continue
        is_mask = (isinstance(k, _Tensor) and k._data.dtype.kind == "b") or (
            isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype.kind == "b")
        n_specified += np.ndim(k._data if isinstance(k, _Tensor) else k) if is_mask else 1
    if n_specified > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    for k in key:
        if k is None:
            out.append(None)
            continue
        if k is Ellipsis:
            out.append(Ellipsis)
            dim = ndim - (n_specified - dim)
            continue
        if isinstance(k, (_Tensor, list, np.ndarray)):
            if isinstance(k, _Tensor):
                if k._device is not dev and k._device.type != "cpu":
                    raise RuntimeError(
                        f"indices should be either on cpu or on the same device as the indexed "
                        f"tensor ({dev})")
                host = k._data if k._device.type == "cpu" else None
                arr = k._data if k._device is dev else dev.backend.from_host(k._data, dev.index)
            else:
                host = arr = np.asarray(k)
                if dev.type != "cpu":
                    arr = dev.backend.xp.asarray(arr)
            kind = arr.dtype.kind
            if kind == "b":
                _check_mask(arr.shape, shape, dim)
                dim += arr.ndim
            elif kind in "iu":
                check_range(host if host is not None else arr, shape[dim], dim)
                dim += 1
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            out.append(arr)
            advanced = True
            continue
        if isinstance(k, slice):
            step = k.step.item() if isinstance(k.step, _Tensor) else k.step
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            out.append(slice(*(int(v) if isinstance(v, _Tensor) else v
                               for v in (k.start, k.stop, k.step))))
            dim += 1
            continue
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            size = shape[dim]
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {size}")
            out.append(int(k))
            dim += 1
            continue
        if isinstance(k, bool):
            out.append(k)
            advanced = True
            continue
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
            f"are valid indices (got {type(k).__name__})"
        )
    if not builtins.any(k is Ellipsis for k in out):
        out.append(Ellipsis)  # all-int keys then give a 0-d view, as in _basic_key
    return tuple(out), advanced


def _check_mask(mask_shape, shape, dim):
    for j, m in enumerate(mask_shape):
        if m != shape[dim + j]:
            raise IndexError(
                f"The shape of the mask {list(mask_shape)} at index {j} does not match the "
                f"shape of the indexed tensor {list(shape)} at index {dim + j}")


def _is_array_key(k):
    return not (k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)))


def _consumed(key):
    """How many dimensions of the indexed tensor ``key`` uses (``...`` takes the rest)."""
    return builtins.sum(
        (k.ndim if k.dtype.kind == "b" else 1) if _is_array_key(k) else 1
        for k in key if k is not None and k is not Ellipsis)


def _torch_placement(key, shape):
    """Where PyTorch puts the broadcast dimensions when NumPy would put them elsewhere.

    NumPy counts an integer beside an index array as one more advanced index, so
    ``x[1, :, [0, 4]]`` has its advanced indices apart and the broadcast dimensions go
    first; PyTorch selects with the integer first and only the list is advanced, so they
    stay in place. Returns ``(nb, p)`` (``nb`` broadcast dimensions that NumPy puts first
    and PyTorch at output position ``p``), or None when both rules agree.
    """
    if len(key) == 2 and key[1] is Ellipsis:
        return None  # one index and the Ellipsis (a[idx]): nothing beside it to place
    ints = [i for i, k in enumerate(key) if isinstance(k, (int, np.integer))]
    if not ints or builtins.any(isinstance(k, bool) for k in key):
        return None  # (a bool is an int: without ints, no bools either)
    arrays = [i for i, k in enumerate(key) if _is_array_key(k)]
    if not arrays:
        return None
    numpy_adv = sorted(ints + arrays)
    if numpy_adv[-1] - numpy_adv[0] == len(numpy_adv) - 1:
        return None  # adjacent in NumPy, hence in PyTorch too, at the same place
    rest = [k for k in key if not isinstance(k, (int, np.integer))]
    torch_adv = [i for i, k in enumerate(rest) if _is_array_key(k)]
    if torch_adv[-1] - torch_adv[0] != len(torch_adv) - 1:
        return None  # apart in both: the broadcast dimensions go first in both
    consumed = _consumed(key)
    p = 0
    for k in rest[:torch_adv[0]]:
        p += len(shape) - consumed if k is Ellipsis else 1
    nb = len(np.broadcast_shapes(*(
        (1,) if k.dtype.kind == "b" else k.shape for k in key if _is_array_key(k))))
    return nb, p


def _indexed_shape(key, shape, placement):
    """The shape of ``input[key]`` under PyTorch's rule (``placement`` from above)."""
    nb, p = placement
    arrays = []
    rest = []
    dim = 0
    consumed = _consumed(key)
    for k in key:
        if k is None:
            rest.append(1)
        elif k is Ellipsis:
            n = len(shape) - consumed
            rest.extend(shape[dim:dim + n])
            dim += n
        elif isinstance(k, slice):
            rest.append(len(range(*k.indices(shape[dim]))))
            dim += 1
        elif isinstance(k, (int, np.integer)):
            dim += 1
        elif k.dtype.kind == "b":
            arrays.append((int(k.sum()),))
            dim += k.ndim
        else:
            arrays.append(k.shape)
            dim += 1
    return tuple(rest[:p]) + tuple(np.broadcast_shapes(*arrays)) + tuple(rest[p:])


def _moved(nb, p, n, to_torch):
    """The permutation between NumPy's layout (broadcast dimensions first) and PyTorch's."""
    if to_torch:
        return list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, n))
    return list(range(p, p + nb)) + list(range(p)) + list(range(p + nb, n))


def getitem(input, key):
    """``input[key]``: a view for basic indexing, a copy for advanced indexing.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6).reshape(2, 3)
    >>> torcia.getitem(x, (slice(None), 1))
    tensor([1, 4])
    """
    key, advanced = _index_key(input, key)
    try:
        out = _call("getitem", (input,), {"key": key}, view_of=None if advanced else input)
    except IndexError as exc:
        # NumPy's range error, in PyTorch's words
        raise IndexError(str(exc).replace(" for axis ", " for dimension ")) from None
    placement = _torch_placement(key, input._data.shape) if advanced else None
    if placement is not None:
        out = contiguous(permute(out, _moved(*placement, out.ndim, True)))
    return out


def setitem(input, key, value):
    """``input[key] = value`` in place (recorded for autograd as an ``index_put``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3)
    >>> torcia.setitem(x, 1, 5.0)
    >>> x
    tensor([0., 5., 0.])
    """
    k, advanced = _index_key(input, key)
    if not isinstance(value, _Tensor):
        value = _tensor_of(value, dtype=input.dtype, device=input.device)
    elif value.dtype is not input.dtype:
        value = operand_as(value, input.dtype)
    placement = _torch_placement(k, input._data.shape) if advanced else None
    if placement is not None and value.ndim:
        target = _indexed_shape(k, input._data.shape, placement)
        try:
            np.broadcast_shapes(tuple(value.shape), target)
            if value.ndim > len(target):
                raise ValueError
        except ValueError:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                f"broadcast to indexing result of shape {list(target)}") from None
        value = permute(expand(value, *target), _moved(*placement, len(target), False))
    if not advanced:
        # PyTorch copies into the region input[key]: what the value may not partly overlap
        _check_overlap(_call("getitem", (input,), {"key": k}, view_of=input), (value,))
    _write_inplace(lambda x, v: _call("index_put", (x, v), {"key": k, "accumulate": False}),
                  input, (value,), {}, (value,) if advanced else ())


def index_put(input, indices, values, accumulate=False):
    """Out-of-place ``input[indices] = values`` (or ``+=`` with ``accumulate``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(4)
    >>> torcia.index_put(x, (torcia.tensor([0, 2]),), torcia.tensor(5.0))
    tensor([5., 0., 5., 0.])
    >>> torcia.index_put(x, (torcia.tensor([1, 1]),), torcia.tensor(1.0), accumulate=True)
    tensor([0., 2., 0., 0.])
    """
    k, _ = _index_key(input, tuple(indices))
    return _call("index_put", (input, values), {"key": k, "accumulate": bool(accumulate)})


def where_method(self, condition, y):
    """``Tensor.where(condition, y)``: ``torcia.where(condition, self, y)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, -2, 3])
    >>> x.where(x > 0, 0)
    tensor([1, 0, 3])
    """
    return _opdef.PUBLIC.where(condition, self, y)


#: the public functions here that torcia exports
__all__ = ["argwhere", "as_strided_scatter", "diagonal_scatter", "dsplit", "fill", "gather",
           "getitem", "hsplit", "index_add", "index_copy", "index_fill", "index_put",
           "index_reduce", "index_select", "masked_fill", "masked_scatter", "masked_select",
           "nonzero_static", "put", "scatter", "scatter_add", "scatter_reduce", "select",
           "select_scatter", "setitem", "slice_scatter", "take", "take_along_dim",
           "tensor_split", "unravel_index", "vsplit"]

#: those that are Tensor methods too, under the same name
METHODS = ("gather", "index_select", "take_along_dim", "scatter", "scatter_add", "index_add",
           "index_copy", "masked_fill", "masked_select", "scatter_reduce", "index_reduce",
           "argwhere", "nonzero_static", "as_strided_scatter", "select", "tensor_split",
           "index_put")

#: ... and those with an in-place ``name_`` method (computed out of place, then written
#: back): the ops declared ``inplace``, and index_reduce
INPLACE = tuple(d.name for d in DECLARED if d.inplace) + ("index_reduce",)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = ("take", "index_fill", "masked_scatter", "put", "select_scatter",
                    "slice_scatter", "diagonal_scatter", "fill_diagonal", "hsplit", "vsplit",
                    "dsplit")

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = ("index_fill", "masked_scatter", "put", "fill_diagonal")
