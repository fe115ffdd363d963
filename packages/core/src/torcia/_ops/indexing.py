"""The indexing ops, each declared once: schema, reference kernel, meta shape,
decomposition and autocast policy. ``getitem`` (``tensor[key]``, of
:data:`torcia.ops.VIEW`: a view of its input for a basic key) and, of ``MOVEMENT``
(copies), the gathers and scatters (``gather``, ``scatter``, ``scatter_add``,
``scatter_reduce``, ``take_along_dim``), the ``index_*`` ops (``index_select``,
``index_add``, ``index_copy``, ``index_put``) and ``masked_select``.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy). A decomposition is written with Tensor methods, the public functions
(:data:`torcia._opdef.PUBLIC`) and :data:`torcia._opdef.CALL` (an op by name): it runs on
any device, and this module is below the Tensor class. The public functions of
``gather``, ``scatter``... are at the end of this module, next to their declarations,
with the index checks they share. Their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import np_floating as _floating
from torcia._opdef import define
from torcia._ops._common import along_dim, first_shape, opmath, size_at, with_size, wrap_dim

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
    if xp is np:
        np.add.at(out, key, values)
    else:
        xp.add.at(out, key, values)


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
        out = a.copy()
        key = (slice(None),) * dim + (index,)
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


def _take_along_dim_shape(x, indices, dim=None, **params):
    if dim is None:
        return (math.prod(indices.shape),), x.dtype
    dim %= max(x.ndim, 1)
    shape = np.broadcast_shapes(with_size(x.shape, dim, 1), with_size(indices.shape, dim, 1))
    return with_size(shape, dim, indices.shape[dim]), x.dtype


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


def masked_select(a, mask):
    shape = _opdef.PUBLIC.broadcast_shapes(a.shape, mask.shape)
    return a.expand(shape)[mask.expand(shape)]


def _a_view(schema, kernel, **declared):
    return define(schema, kernel, group="view", **declared)


def _a_move(schema, kernel, **declared):
    return define(schema, kernel, group="movement", **declared)


#: the indexing ops, in the order of torcia.ops.VIEW and MOVEMENT (after the views' own)
DECLARED = (
    _a_view("getitem(Tensor x, *, key=None) -> Tensor", Kernels.getitem, shape=_getitem_shape),
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
            Kernels.scatter_reduce, shape=first_shape,
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
            inplace_example=("[1, 1, 1]", "0, torcia.tensor([0, 2]), torcia.tensor([10, 20])",
                             "tensor([10,  1, 20])")),
    _a_move("index_put(Tensor x, Tensor values, *, key=None, accumulate=False) -> Tensor",
            Kernels.index_put, shape=first_shape, autocast={"cuda": "promote"},
            inplace_example=("[1, 1, 1]", "(torcia.tensor([0, 2]),), torcia.tensor([10, 20])",
                             "tensor([10,  1, 20])")),
    _a_move("take_along_dim(Tensor x, Tensor indices, *, dim=None) -> Tensor",
            Kernels.take_along_dim, shape=_take_along_dim_shape, decomposition=taken_along),
    _a_move("masked_select(Tensor x, Tensor mask) -> Tensor", Kernels.masked_select,
            decomposition=masked_select),
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


#: the public functions above that torcia exports (through torcia._oplib.indexing) and
#: Tensor has as methods
PUBLIC = (gather, index_select, take_along_dim, scatter, scatter_add, index_add, index_copy)

#: the names of those whose Tensor method has an in-place ``name_`` form too (declared
#: ``inplace``)
INPLACE = tuple(d.name for d in DECLARED if d.inplace)
