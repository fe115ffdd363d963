"""Sparse tensors: the COO layout and the compressed ones (CSR, CSC), as PyTorch's.

A sparse tensor is a :class:`~torcia.Tensor` (``isinstance`` holds, modules register it
as a buffer, ``.to()`` moves it) whose data is its structure and its values:

- :class:`SparseCooTensor`: ``indices`` (``sparse_dim x nnz``, int64) and ``values``
  (``nnz`` followed by the dense dimensions), possibly uncoalesced (repeated or unsorted
  coordinates, whose values add up);
- :class:`SparseCompressedTensor`: a 2-D matrix in CSR (``crow_indices``, ``col_indices``)
  or CSC (``ccol_indices``, ``row_indices``) layout with its ``values``.

Gradients flow through the values: every operation computes its result's values with
differentiable ops of the operands' values (or dense operands), so ``s.grad`` is the
gradient of ``s``'s values in ``s``'s layout. The structure (indices) is never
differentiated. Sparse @ dense runs on the ``sparse_mm`` op (SciPy's sparse products with
the ``scipy`` extra, a memory-light NumPy loop without), never through a dense copy.

Operations PyTorch has no sparse kernel for raise an error naming the layout, never a
silent densification; ``to_dense()`` is there when the dense tensor fits.
"""

from __future__ import annotations

import math
import types

import numpy as np

from torcia import _creation, _oplib
from torcia import _dtype as D
from torcia import ops as _oplist
from torcia._oplib.runtime import sparse_coo, sparse_csc, sparse_csr, strided
from torcia._ops import creation
from torcia._tensor import Size, Tensor, _wrap_dim
from torcia._wrapped import WrappedTensor

#: ``torcia.sparse.mm`` and ``torcia.sparse.sum``, which the sparse classes' products and
#: sums run: torcia.sparse, built on this module's classes, sets them as it loads
PRODUCTS = types.SimpleNamespace(mm=None, sum=None)

_LAYOUT_NAMES = {sparse_coo: "torcia.sparse_coo", sparse_csr: "torcia.sparse_csr",
                 sparse_csc: "torcia.sparse_csc"}


class SparseLayoutError(NotImplementedError):
    """An operation without a kernel for a sparse layout."""


def _host(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _index_tensor(arr, device) -> Tensor:
    return _creation.tensor(np.ascontiguousarray(arr, dtype=np.int64), device=device)


class _SparseBase(WrappedTensor):
    """What every sparse layout shares: shape, dtype, device and gradient state come from
    the values; the dense array a kernel would need does not exist."""

    __slots__ = ("_size", "_values_t", "_host_cache")

    is_sparse = False
    is_sparse_csr = False
    is_mkldnn = False

    def _setup(self, values: Tensor, size) -> None:
        self._values_t = values
        self._size = Size(int(s) for s in size)
        self._init_tensor_slots(values)
        self._host_cache = None

    @property
    def _inner(self) -> Tensor:
        return self._values_t

    def _no_dense_data(self, op: str) -> str:
        kind = "SparseCsr" if self.layout is not sparse_coo else "Sparse"
        backend = kind + ("CUDA" if self._device.type == "cuda" else "CPU")
        return (f"Could not run '{op}' with arguments from the '{backend}' backend: torcia has "
                f"no kernel of it for the {self.layout} layout (as PyTorch has none); convert "
                "with .to_dense() first if the dense tensor fits")

    @property
    def shape(self) -> Size:
        return self._size

    def size(self, dim=None):
        """The shape, or the length of one dimension."""
        if dim is None:
            return self._size
        return self._size[_wrap_dim(dim, len(self._size))]

    @property
    def ndim(self) -> int:
        return len(self._size)

    def dim(self) -> int:
        return len(self._size)

    def numel(self) -> int:
        """The number of elements of the dense tensor this one stands for."""
        return math.prod(self._size)

    nelement = numel

    @property
    def grad(self):
        """The gradient of the values, in this tensor's layout and structure."""
        g = self._values_t.grad
        return None if g is None else self._with_values(g)

    @grad.setter
    def grad(self, value):
        if value is None:
            self._values_t.grad = None
            return
        self._values_t.grad = _values_like(value, self)

    def _nnz(self) -> int:
        return int(self._values_t.shape[0])

    def _values(self) -> Tensor:
        return self._values_t

    def values(self) -> Tensor:
        """The stored values."""
        return self._values_t

    def dense_dim(self) -> int:
        return self._values_t.ndim - 1

    def __len__(self):
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    def __bool__(self):
        raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                           f"(a {self.layout} tensor)")

    def __iter__(self):
        raise SparseLayoutError(f"iteration over a {self.layout} tensor is not supported")

    # ----- moves and copies ---------------------------------------------------------
    def to(self, *args, **kwargs):
        """Move or cast the values (the indices follow them to their device)."""
        values = self._values_t.to(*args, **kwargs)
        if values is self._values_t:
            return self
        return self._with_values(values, move=True)

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return f"torcia.sparse.{self.dtype.name}"
        return self.to(dtype)

    def detach(self):
        return self._with_values(self._values_t.detach())

    def clone(self, *, memory_format=None):
        return self._with_values(self._values_t.clone(), copy_structure=True)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        values = self._values_t.detach().clone().requires_grad_(self.requires_grad)
        new = self._with_values(values, copy_structure=True)
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._layout_name(), self._structure_host(),
                           self._values_t.detach().cpu().numpy().copy(),
                           tuple(self._size), str(self._device), self.requires_grad))

    def _layout_name(self) -> str:
        return _LAYOUT_NAMES[self.layout].split(".")[1]

    def numpy(self, *, force=False):
        raise TypeError(f"can't convert a {self.layout} tensor to numpy; use "
                        ".to_dense().numpy()")

    # ----- arithmetic shared by the layouts ------------------------------------------
    def __neg__(self):
        return self._with_values(-self._values_t)

    neg = negative = __neg__

    def __pos__(self):
        return self

    positive = __pos__

    def __mul__(self, other):
        return _sparse_binary("mul", self, other)

    def __rmul__(self, other):
        return _sparse_binary("mul", other, self)

    def __truediv__(self, other):
        return _sparse_binary("div", self, other, True)

    def __rtruediv__(self, other):
        return _sparse_binary("div", other, self, True)

    def __add__(self, other):
        return _sparse_binary("add", self, other)

    def __radd__(self, other):
        return _sparse_binary("add", other, self)

    def __sub__(self, other):
        return _sparse_binary("sub", self, other)

    def __rsub__(self, other):
        return _sparse_binary("sub", other, self)

    def mul(self, other):
        return _sparse_binary("mul", self, other)

    multiply = mul

    def div(self, other, *, rounding_mode=None):
        if rounding_mode is not None:
            return self._unary_values(lambda v: _oplib.div(v, other, rounding_mode=rounding_mode),
                                      linear=False)
        return _sparse_binary("div", self, other, True)

    divide = true_divide = div

    def add(self, other, *, alpha=1):
        return _sparse_binary("add", self, other if alpha == 1 else _scaled(other, alpha))

    def sub(self, other, *, alpha=1):
        return _sparse_binary("sub", self, other if alpha == 1 else _scaled(other, alpha))

    subtract = sub

    def mul_(self, other):
        return self._assign(self.mul(other))

    def div_(self, other):
        return self._assign(self.div(other))

    def add_(self, other, *, alpha=1):
        return self._assign(self.add(other, alpha=alpha))

    def sub_(self, other, *, alpha=1):
        return self._assign(self.sub(other, alpha=alpha))

    def zero_(self):
        """No entries left (PyTorch keeps the size)."""
        empty = self._empty_like()
        return self._assign(empty)

    def __matmul__(self, other):
        return PRODUCTS.mm(self, other)

    def __rmatmul__(self, other):
        return PRODUCTS.mm(other, self)

    def mm(self, mat2):
        return PRODUCTS.mm(self, mat2)

    matmul = mm

    def sum(self, dim=None, keepdim=False, dtype=None):
        if keepdim:
            raise SparseLayoutError("sum(keepdim=True) of a sparse tensor is not supported")
        return PRODUCTS.sum(self, dim, dtype=dtype)

    def pow(self, exponent):
        if not isinstance(exponent, (int, float)):
            raise SparseLayoutError("pow of a sparse tensor takes a number exponent")
        if exponent == 0:
            raise RuntimeError("pow: cannot raise to zeroth power on sparse tensor; it would "
                               "make the result tensor dense")
        return self._unary_values(lambda v: v.pow(exponent), linear=False)

    __pow__ = pow

    def to_sparse_coo(self):
        return self.to_sparse(layout=sparse_coo)


def _scaled(other, alpha):
    return other * alpha


def _values_like(value, like):
    """The values of a gradient given for a sparse tensor ``like``: its own values when it
    has ``like``'s structure, else an error."""
    if isinstance(value, _SparseBase) and value.layout is like.layout and \
            value._structure_host_same(like):
        return value._values_t
    raise RuntimeError(f"the gradient of a {like.layout} tensor must have its layout and "
                       "indices")


# ---------------------------------------------------------------------------------------
# COO
# ---------------------------------------------------------------------------------------


class SparseCooTensor(_SparseBase):
    """A tensor in coordinate (COO) layout, as ``torch.sparse_coo``.

    Parameters
    ----------
    indices : Tensor
        ``(sparse_dim, nnz)`` int64 coordinates.
    values : Tensor
        ``(nnz, *dense_shape)`` values; gradients flow to them.
    size : tuple of int
        The full shape, ``sparse dims + dense dims``.
    is_coalesced : bool
        Whether the indices are known to be sorted and unique.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> isinstance(s, torcia.Tensor), s.layout, s.indices(), s.values()
    (True, torcia.sparse_coo, tensor([[0, 1],
            [1, 0]]), tensor([2., 3.]))
    >>> (torcia.eye(2) + s).tolist()
    [[1.0, 2.0], [3.0, 1.0]]
    """

    __slots__ = ("_indices_t", "_coalesced", "_csr_cache")

    is_sparse = True
    layout = sparse_coo

    def __init__(self, indices: Tensor, values: Tensor, size, is_coalesced: bool = False):
        self._setup(values, size)
        self._indices_t = indices
        self._coalesced = bool(is_coalesced)
        self._csr_cache = None

    def _with_values(self, values, move=False, copy_structure=False):
        idx = self._indices_t
        if move and idx.device != values.device:
            idx = idx.to(values.device)
        elif copy_structure:
            idx = idx.clone()
        return SparseCooTensor(idx, values, self._size, self._coalesced)

    def _empty_like(self):
        return SparseCooTensor(creation.zeros(self.sparse_dim(), 0, dtype=D.int64,
                                               device=self.device),
                               self._values_t.new_zeros((0, *self._values_t.shape[1:])),
                               self._size, True)

    def _assign(self, other):
        """In-place ops: this tensor takes ``other``'s structure and values."""
        other = other if isinstance(other, SparseCooTensor) else other.to_sparse(
            self.sparse_dim())
        self._indices_t, self._values_t = other._indices_t, other._values_t
        self._coalesced = other._coalesced
        self._csr_cache = None
        self._vc[0] += 1
        return self

    def _structure_host(self):
        return (_host(self._indices_t),)

    def _structure_host_same(self, other) -> bool:
        return self._indices_t is other._indices_t or np.array_equal(
            _host(self._indices_t), _host(other._indices_t))

    # ----- attributes ---------------------------------------------------------------
    def sparse_dim(self) -> int:
        return int(self._indices_t.shape[0])

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _coalesced_(self, coalesced: bool):
        self._coalesced = bool(coalesced)
        return self

    def _indices(self) -> Tensor:
        return self._indices_t

    def indices(self) -> Tensor:
        """The coordinates; PyTorch allows this on coalesced tensors only."""
        self._require_coalesced("indices")
        return self._indices_t

    def values(self) -> Tensor:
        """The values; PyTorch allows this on coalesced tensors only."""
        self._require_coalesced("values")
        return self._values_t

    def _require_coalesced(self, what):
        if not self._coalesced:
            raise RuntimeError(f"Cannot get {what} on an uncoalesced tensor, please call "
                               ".coalesce() first")

    # ----- structure ----------------------------------------------------------------
    def _linear(self) -> np.ndarray:
        """The coordinates as flat indices into the sparse dimensions (host, int64)."""
        idx = _host(self._indices_t)
        dims = self._size[: self.sparse_dim()]
        if idx.shape[1] == 0:
            return np.zeros(0, dtype=np.int64)
        return np.ravel_multi_index(tuple(idx), dims)

    def coalesce(self):
        """Sorted, unique coordinates; the values of repeated coordinates are summed
        (differentiably).

        Examples
        --------
        >>> import torcia
        >>> s = torcia.sparse_coo_tensor([[1, 0, 1]], [1.0, 2.0, 3.0], (2,))
        >>> c = s.coalesce()
        >>> c.indices(), c.values(), c.is_coalesced()
        (tensor([[0, 1]]), tensor([2., 4.]), True)
        """
        if self._coalesced:
            return self
        linear = self._linear()
        unique, inverse = np.unique(linear, return_inverse=True)
        dims = self._size[: self.sparse_dim()]
        dev = self.device
        idx = _index_tensor(np.stack(np.unravel_index(unique, dims)).reshape(len(dims), -1),
                            dev)
        if len(unique) == len(linear) and np.all(np.diff(linear) > 0):
            values = self._values_t  # already sorted and unique: nothing to add
        else:
            values = creation.zeros(len(unique), *self._values_t.shape[1:],
                                     dtype=self.dtype, device=dev).index_add(
                0, _index_tensor(inverse.reshape(-1), dev), self._values_t)
        return SparseCooTensor(idx, values, self._size, is_coalesced=True)

    def _csr(self):
        """``(crow, col)`` index tensors of this coalesced 2-D tensor, made once (int32
        where they fit, as SciPy's sparse products take them without a copy)."""
        if self._csr_cache is None:
            idx = _host(self._indices_t)
            m, n = self._size[0], self._size[1]
            crow = np.zeros(m + 1, dtype=np.int64)
            np.cumsum(np.bincount(idx[0], minlength=m), out=crow[1:])
            self._csr_cache = (_compact(crow, self.device, self._nnz()),
                               _compact(idx[1], self.device, n))
        return self._csr_cache

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The dense tensor (differentiable in the values; repeated coordinates add up).

        Examples
        --------
        >>> import torcia
        >>> torcia.sparse_coo_tensor([[0, 1, 1], [1, 0, 0]], [1.0, 2.0, 3.0], (2, 2)).to_dense()
        tensor([[0., 1.],
                [5., 0.]])
        """
        out = _scatter_into(None, self)
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        """This tensor in another layout (``layout=torcia.sparse_csr`` / ``sparse_csc``),
        or itself."""
        if layout in (None, sparse_coo):
            if sparse_dim is not None and sparse_dim != self.sparse_dim():
                raise RuntimeError("to_sparse: conversion from Sparse to Sparse with "
                                   "sparse_dim argument !=self.sparse_dim() is not supported")
            return self
        if layout in (sparse_csr, sparse_csc):
            return _compress(self, layout)
        raise RuntimeError(f"to_sparse: conversion from Sparse to {layout} is not supported "
                           "by torcia (block layouts are not implemented)")

    def to_sparse_csr(self, dense_dim=None):
        return self.to_sparse(layout=sparse_csr)

    def to_sparse_csc(self, dense_dim=None):
        return self.to_sparse(layout=sparse_csc)

    def t(self):
        """The transpose of a 2-D sparse tensor."""
        if self.sparse_dim() != 2 or self.dense_dim():
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, "
                               f"but self is {self.sparse_dim()} sparse and {self.dense_dim()} "
                               "dense")
        return self.transpose(0, 1)

    def t_(self):
        return self._assign(self.t())

    def transpose(self, dim0: int, dim1: int):
        sd = self.sparse_dim()
        dim0, dim1 = _wrap_dim(dim0, self.ndim), _wrap_dim(dim1, self.ndim)
        if dim0 >= sd or dim1 >= sd:
            raise RuntimeError("transpose(): both dimensions of a sparse tensor must be "
                               "sparse ones")
        order = list(range(sd))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        size = list(self._size)
        size[dim0], size[dim1] = size[dim1], size[dim0]
        return SparseCooTensor(self._indices_t[order], self._values_t, size)

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) \
            else dims
        dims = tuple(_wrap_dim(d, self.ndim) for d in dims)
        sd = self.sparse_dim()
        if sorted(dims) != list(range(self.ndim)):
            raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input "
                               "does not match the length of the desired ordering of "
                               "dimensions i.e. input.dim() = "
                               f"{self.ndim} is not equal to len(dims) = {len(dims)}")
        if any(d >= sd for d in dims[:sd]):
            raise NotImplementedError("permute(sparse_coo): transpositions between sparse and "
                                      "dense dimensions are not allowed. Only transpositions "
                                      "within sparse and dense dimensions are supported.")
        values = self._values_t.permute(0, *(d - sd + 1 for d in dims[sd:]))
        return SparseCooTensor(self._indices_t[list(dims[:sd])], values,
                               [self._size[d] for d in dims])

    def _unary_values(self, fn, linear: bool):
        """``fn`` of the values: a zero-preserving op. A linear one keeps the structure; any
        other needs each coordinate once (``fn(a) + fn(b) != fn(a + b)``)."""
        source = self if linear else self.coalesce()
        return SparseCooTensor(source._indices_t, fn(source._values_t), self._size,
                               source._coalesced)

    def __repr__(self):
        idx = repr(self._indices_t).replace("\n", "\n" + " " * 15)
        vals = repr(self._values_t).replace("\n", "\n" + " " * 14)
        grad = ", requires_grad=True" if self.requires_grad and self.is_leaf else ""
        return (f"tensor(indices={idx},\n       values={vals},\n"
                f"       size={tuple(self._size)}, nnz={self._nnz()}, "
                f"layout=torcia.sparse_coo{grad})")


def _compact(arr: np.ndarray, device, bound: int) -> Tensor:
    dtype = np.int32 if bound < 2 ** 31 - 1 else np.int64
    return _creation.tensor(np.ascontiguousarray(arr, dtype=dtype), device=device)


def _scatter_into(dense, s: SparseCooTensor) -> Tensor:
    """``dense + s`` as a dense tensor (``dense`` None: zeros), differentiable in both:
    the values are added at their flat positions (repeated coordinates add up)."""
    sd = s.sparse_dim()
    dims = s._size[:sd]
    rest = tuple(s._size[sd:])
    dtype = s.dtype if dense is None else D.promote_types(dense.dtype, s.dtype)
    if dense is None:
        flat = creation.zeros(math.prod(dims), *rest, dtype=dtype, device=s.device)
    else:
        flat = dense.to(dtype).reshape(math.prod(dims), *rest)
    linear = _index_tensor(s._linear(), s.device)
    return flat.index_add(0, linear, s._values_t.to(dtype)).reshape(*s._size)


# ---------------------------------------------------------------------------------------
# CSR / CSC
# ---------------------------------------------------------------------------------------


class SparseCompressedTensor(_SparseBase):
    """A 2-D matrix in a compressed layout, as ``torch.sparse_csr`` / ``torch.sparse_csc``:
    ``compressed`` (``crow_indices``, or ``ccol_indices`` for CSC) holds where each row's
    (column's) entries start in ``plain`` (``col_indices``, ``row_indices``) and
    ``values``.

    Examples
    --------
    >>> import torcia
    >>> csr = torcia.tensor([[0.0, 2.0], [3.0, 4.0]]).to_sparse_csr()
    >>> csr.crow_indices(), csr.col_indices(), csr.values()
    (tensor([0, 1, 3]), tensor([1, 0, 1]), tensor([2., 3., 4.]))
    >>> csr @ torcia.ones(2, 1)
    tensor([[2.],
            [7.]])
    """

    __slots__ = ("_compressed_t", "_plain_t", "_layout")

    def __init__(self, compressed: Tensor, plain: Tensor, values: Tensor, size, layout):
        self._setup(values, size)
        self._compressed_t = compressed
        self._plain_t = plain
        self._layout = layout

    @property
    def layout(self):
        return self._layout

    @property
    def is_sparse_csr(self) -> bool:
        return self._layout is sparse_csr

    def _with_values(self, values, move=False, copy_structure=False):
        comp, plain = self._compressed_t, self._plain_t
        if move and comp.device != values.device:
            comp, plain = comp.to(values.device), plain.to(values.device)
        elif copy_structure:
            comp, plain = comp.clone(), plain.clone()
        return SparseCompressedTensor(comp, plain, values, self._size, self._layout)

    def _empty_like(self):
        n_comp = self._size[0] if self._layout is sparse_csr else self._size[1]
        return SparseCompressedTensor(
            creation.zeros(n_comp + 1, dtype=D.int64, device=self.device),
            creation.zeros(0, dtype=D.int64, device=self.device),
            self._values_t.new_zeros((0,)), self._size, self._layout)

    def _assign(self, other):
        if not isinstance(other, SparseCompressedTensor) or other._layout is not self._layout:
            other = other.to_sparse(layout=self._layout)
        self._compressed_t, self._plain_t = other._compressed_t, other._plain_t
        self._values_t = other._values_t
        self._vc[0] += 1
        return self

    def _structure_host(self):
        return (_host(self._compressed_t), _host(self._plain_t))

    def _structure_host_same(self, other) -> bool:
        return all(np.array_equal(a, b) for a, b in zip(self._structure_host(),
                                                          other._structure_host()))

    def sparse_dim(self) -> int:
        return 2

    def _require(self, layout, name):
        if self._layout is not layout:
            kind = "row" if layout is sparse_csr else "column"
            raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but got "
                               f"{_short(self._layout)}")

    def crow_indices(self) -> Tensor:
        """Where each row's entries start in :meth:`col_indices` (CSR only)."""
        self._require(sparse_csr, "crow_indices")
        return self._compressed_t

    def col_indices(self) -> Tensor:
        """The column of each entry (CSR only)."""
        self._require(sparse_csr, "col_indices")
        return self._plain_t

    def ccol_indices(self) -> Tensor:
        """Where each column's entries start in :meth:`row_indices` (CSC only)."""
        self._require(sparse_csc, "ccol_indices")
        return self._compressed_t

    def row_indices(self) -> Tensor:
        """The row of each entry (CSC only)."""
        self._require(sparse_csc, "row_indices")
        return self._plain_t

    def _coo(self) -> SparseCooTensor:
        """The same matrix in COO layout (coalesced; its values are these, reordered for
        CSC)."""
        comp, plain = self._structure_host()
        counts = np.diff(comp)
        major = np.repeat(np.arange(len(counts)), counts)
        if self._layout is sparse_csr:
            idx = np.stack([major, plain])
            return SparseCooTensor(_index_tensor(idx, self.device), self._values_t, self._size,
                                   True)
        order = np.lexsort((major, plain))  # row-major order of (row=plain, col=major)
        idx = np.stack([plain[order], major[order]])
        return SparseCooTensor(_index_tensor(idx, self.device),
                               self._values_t.index_select(0, _index_tensor(order, self.device)),
                               self._size, True)

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        return self._coo().to_dense(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is None and sparse_dim is None or layout is sparse_coo or sparse_dim == 2:
            return self._coo()
        if layout is self._layout:
            return self
        if layout in (sparse_csr, sparse_csc):
            return _compress(self._coo(), layout)
        raise RuntimeError(f"to_sparse: conversion from {_short(self._layout)} to {layout} is "
                           "not supported by torcia (block layouts are not implemented)")

    def to_sparse_csr(self, dense_dim=None):
        return self.to_sparse(layout=sparse_csr)

    def to_sparse_csc(self, dense_dim=None):
        return self.to_sparse(layout=sparse_csc)

    def t(self):
        """The transpose: CSR and CSC swap, the arrays stay (as in PyTorch)."""
        other = sparse_csc if self._layout is sparse_csr else sparse_csr
        return SparseCompressedTensor(self._compressed_t, self._plain_t, self._values_t,
                                      (self._size[1], self._size[0]), other)

    def transpose(self, dim0, dim1):
        if {_wrap_dim(dim0, 2), _wrap_dim(dim1, 2)} == {0, 1}:
            return self.t()
        return self

    def _unary_values(self, fn, linear: bool):
        return self._with_values(fn(self._values_t))

    def __repr__(self):
        names = ("crow_indices", "col_indices") if self._layout is sparse_csr else (
            "ccol_indices", "row_indices")
        comp = repr(self._compressed_t).replace("\n", "\n" + " " * (len(names[0]) + 8))
        plain = repr(self._plain_t).replace("\n", "\n" + " " * (len(names[1]) + 8))
        vals = repr(self._values_t).replace("\n", "\n" + " " * 14)
        return (f"tensor({names[0]}={comp},\n       {names[1]}={plain},\n"
                f"       values={vals}, size={tuple(self._size)}, nnz={self._nnz()},\n"
                f"       layout={_LAYOUT_NAMES[self._layout]})")


def _short(layout) -> str:
    return {sparse_coo: "Sparse", sparse_csr: "SparseCsr", sparse_csc: "SparseCsc",
            strided: "Strided"}.get(layout, str(layout))


def _compress(coo: SparseCooTensor, layout) -> SparseCompressedTensor:
    """A 2-D COO tensor in CSR or CSC layout (values reordered differentiably)."""
    if coo.ndim != 2 or coo.dense_dim():
        raise RuntimeError(f"to_sparse_{'csr' if layout is sparse_csr else 'csc'}: expected a "
                           f"2-D tensor without dense dimensions, got size {list(coo.shape)} "
                           f"with {coo.dense_dim()} dense dimensions")
    c = coo.coalesce()
    idx = _host(c._indices_t)
    m, n = c._size
    values = c._values_t
    if layout is sparse_csr:
        major, minor, count = idx[0], idx[1], m
    else:
        order = np.lexsort((idx[0], idx[1]))  # column-major
        major, minor, count = idx[1][order], idx[0][order], n
        values = values.index_select(0, _index_tensor(order, c.device))
    comp = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(major, minlength=count), out=comp[1:])
    return SparseCompressedTensor(_index_tensor(comp, c.device), _index_tensor(minor, c.device),
                                  values, c._size, layout)


def _rebuild(layout, structure, values, size, device, requires_grad):
    v = _creation.tensor(values, device=device)
    if layout == "sparse_coo":
        out = SparseCooTensor(_index_tensor(structure[0], device), v, size)
    else:
        out = SparseCompressedTensor(_index_tensor(structure[0], device),
                                     _index_tensor(structure[1], device), v, size,
                                     sparse_csr if layout == "sparse_csr" else sparse_csc)
    return out.requires_grad_(requires_grad) if requires_grad else out


# ---------------------------------------------------------------------------------------
# zero-preserving elementwise ops on the values
# ---------------------------------------------------------------------------------------

#: the unary ops PyTorch has sparse kernels of (f(0) == 0), by whether they are linear: the
#: declared ones (torcia.ops.tagged) with their other names, and these
_LINEAR_UNARY = ("conj_physical",)
_NONLINEAR_UNARY = _oplist.tagged("sparse") + tuple(
    alias for alias, op in _oplist.ALIASES.items() if op in _oplist.tagged("sparse")) + (
    "round", "sgn", "deg2rad", "rad2deg", "isposinf", "isneginf", "nan_to_num",
)


def _values_op(name, linear):
    def op(self, *args, **kwargs):
        return self._unary_values(lambda v: getattr(v, name)(*args, **kwargs), linear)
    op.__name__ = name
    op.__doc__ = f"``{name}`` of the stored values (zero stays zero)."
    return op


def _values_op_(name):
    def op_(self, *args, **kwargs):
        return self._assign(getattr(self, name)(*args, **kwargs))
    op_.__name__ = name + "_"
    op_.__doc__ = f"In-place ``{name}`` of the stored values."
    return op_


for _name in _LINEAR_UNARY + _NONLINEAR_UNARY:
    setattr(_SparseBase, _name, _values_op(_name, _name in _LINEAR_UNARY))
    # bool results (isposinf, isneginf and the declared tests) have no in-place form
    if not _name.startswith("is") and _name not in _oplist.UNARY_BOOL:
        setattr(_SparseBase, _name + "_", _values_op_(_name))


# ---------------------------------------------------------------------------------------
# binary arithmetic with dense tensors, numbers and other sparse tensors
# ---------------------------------------------------------------------------------------


def _is_sparse(x) -> bool:
    return isinstance(x, _SparseBase)


def _as_coo(x):
    return x._coo() if isinstance(x, SparseCompressedTensor) else x


def _scalar_like(x) -> bool:
    return isinstance(x, (int, float, bool, complex, np.number)) or (
        isinstance(x, Tensor) and not _is_sparse(x) and x.ndim == 0)


def _sparse_binary(op: str, a, b, float_op: bool = False):
    """``a op b`` where one operand is sparse: PyTorch's rules for each mix."""
    if op in ("add", "sub"):
        return _add(a, b, op == "sub")
    if op == "mul":
        return _mul(a, b)
    if op == "div":
        if _is_sparse(a) and _scalar_like(b):
            return a._unary_values(lambda v: v / b, linear=True)
        divisor = b if _is_sparse(a) else a
        shape = list(divisor.shape) if isinstance(divisor, Tensor) else []
        raise RuntimeError("Sparse division requires a scalar or zero-dim dense tensor divisor "
                           f"(got shape {shape} for divisor)")
    raise SparseLayoutError(f"Could not run '{op}' with a sparse operand: torcia has no "
                            f"sparse kernel of it (as PyTorch has none)")


def _add(a, b, subtract: bool):
    if isinstance(a, SparseCooTensor) and not _is_sparse(b):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    if _is_sparse(a) and isinstance(b, Tensor) and not _is_sparse(b):
        # a compressed matrix plus a dense one is dense, as PyTorch adds them
        a, b = (-b, a) if subtract else (b, a)
        subtract = False
    if not isinstance(a, Tensor):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has "
                           f"size {list(a.shape)} while other has size {list(b.shape)} "
                           "(FYI: dense-sparse addition does not currently support "
                           "broadcasting)")
    rhs = -b if subtract else b
    if not _is_sparse(a):
        return _scatter_into(a, _as_coo(rhs))
    layout = a.layout
    x, y = _as_coo(a), _as_coo(rhs)
    if x.sparse_dim() != y.sparse_dim():
        raise RuntimeError(f"add: expected 'self' and 'other' to have same sparse "
                           f"dimensions, got {x.sparse_dim()} and {y.sparse_dim()}")
    dtype = D.promote_types(x.dtype, y.dtype)
    out = SparseCooTensor(_oplib.cat([x._indices_t, y._indices_t.to(x.device)], 1),
                          _oplib.cat([x._values_t.to(dtype), y._values_t.to(dtype)], 0),
                          x._size)
    return out if layout is sparse_coo else _compress(out, layout)


def _mul(a, b):
    if _is_sparse(a) and _is_sparse(b):
        return _mul_sparse(a, b)
    s, other = (a, b) if _is_sparse(a) else (b, a)
    if _scalar_like(other):
        return s._unary_values(lambda v: v * other, linear=True)
    if isinstance(s, SparseCompressedTensor):
        return _compress(_mul(s._coo(), other), s.layout)
    # a dense operand broadcast to the sparse shape, read at the stored coordinates
    dense = other if isinstance(other, Tensor) else _creation.tensor(other)
    full = dense.expand(*s._size)
    sd = s.sparse_dim()
    picked = full[tuple(s._indices_t[d] for d in range(sd))]
    return SparseCooTensor(s._indices_t, s._values_t * picked, s._size, s._coalesced)


def _mul_sparse(a, b):
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"mul: expected 'self' and 'other' to have same sizes, but "
                           f"{list(a.shape)} != {list(b.shape)}")
    layout = a.layout
    x, y = _as_coo(a).coalesce(), _as_coo(b).coalesce()
    _, ia, ib = np.intersect1d(x._linear(), y._linear(), assume_unique=True,
                               return_indices=True)
    dev = x.device
    values = x._values_t.index_select(0, _index_tensor(ia, dev)) * y._values_t.index_select(
        0, _index_tensor(ib, dev))
    out = SparseCooTensor(x._indices_t.index_select(1, _index_tensor(ia, dev)), values,
                          x._size, True)
    return out if layout is sparse_coo else _compress(out, layout)


# the hook of torcia._tensor.binary: torcia.add(dense, sparse) and friends land here
_SparseBase._layout_binary = staticmethod(_sparse_binary)


# ---------------------------------------------------------------------------------------
# construction
# ---------------------------------------------------------------------------------------


def sparse_coo_tensor(indices, values=None, size=None, dtype=None, device=None,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor from ``indices`` (``sparse_dim x nnz``) and ``values``.

    Parameters
    ----------
    indices : array_like
        Integer coordinates, one row per sparse dimension.
    values : array_like
        ``nnz`` values (or ``nnz x dense...`` blocks).
    size : tuple of int, optional
        The shape; inferred from the largest indices when omitted.
    dtype, device, requires_grad
        As for :func:`torcia.tensor`, applied to the values.
    check_invariants : bool, optional
        Check that every index is within ``size`` (always checked).
    is_coalesced : bool, optional
        Declare the indices sorted and unique.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.sparse_coo_tensor([[0, 0], [1, 1]], [2.0, 3.0], (2, 2))
    >>> s.coalesce().values()
    tensor([5.])

    ``sparse_coo_tensor(size)`` alone is an empty sparse tensor of that size:

    >>> torcia.sparse_coo_tensor((2, 3))._nnz()
    0
    """
    if values is None:
        if size is not None:
            raise TypeError("sparse_coo_tensor() missing 1 required positional argument: "
                            "'values'")
        shape = (indices,) if isinstance(indices, int) else tuple(int(s) for s in indices)
        return sparse_coo_tensor(creation.zeros(len(shape), 0, dtype=D.int64, device=device),
                                 creation.zeros(0, dtype=dtype or D.get_default_dtype(),
                                                 device=device),
                                 shape, requires_grad=requires_grad, is_coalesced=True)
    idx = indices if isinstance(indices, Tensor) else _creation.tensor(indices)
    if idx.dtype.is_floating_point or idx.dtype.is_complex:
        raise RuntimeError(f"indices must be an int64 tensor, got {idx.dtype}")
    val = values if isinstance(values, Tensor) else _creation.tensor(
        values, dtype=dtype or (None if _is_int_data(values) else D.get_default_dtype()))
    if dtype is not None and val.dtype is not dtype:
        val = val.to(dtype)
    if device is not None:
        val = val.to(device)
    idx = idx.to(D.int64).to(val.device)
    if idx.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if val.ndim == 0:
        raise RuntimeError("values must be at least 1-D (nnz x dense dims)")
    if idx.shape[1] != val.shape[0]:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from "
                           f"indices: {idx.shape[1]}, nnz from values: {val.shape[0]}")
    host = _host(idx)
    sd = idx.shape[0]
    if size is None:
        size = tuple((host.max(axis=1) + 1).tolist() if host.size else [0] * sd) + tuple(
            val.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sd + val.ndim - 1:
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim "
                           f"({val.ndim - 1}), but got {len(size)}")
    if tuple(val.shape[1:]) != size[sd:]:
        raise RuntimeError(f"values has incorrect size, expected {[val.shape[0], *size[sd:]]}"
                           f", got {list(val.shape)}")
    if host.size:
        for d in range(sd):
            lo, hi = int(host[d].min()), int(host[d].max())
            if lo < 0:
                raise RuntimeError(f"found negative index {lo} for dim {d}")
            if hi >= size[d]:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                                   f"{size[d]} but found index {hi}")
    if requires_grad:
        val.requires_grad_(True)
    return SparseCooTensor(idx, val, size, bool(is_coalesced))


def _is_int_data(values) -> bool:
    arr = np.asarray(values)
    return arr.dtype.kind in "iub"


def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=None, *,
                             dtype=None, layout=None, device=None, requires_grad=False,
                             check_invariants=None):
    """A 2-D sparse matrix in CSR or CSC ``layout`` from its compressed indices, plain
    indices and values.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.sparse_compressed_tensor([0, 1, 2], [1, 0], [5.0, 6.0], (2, 2),
    ...                                     layout=torcia.sparse_csc)
    >>> m.to_dense()
    tensor([[0., 6.],
            [5., 0.]])
    """
    if layout not in (sparse_csr, sparse_csc):
        raise RuntimeError(f"sparse_compressed_tensor: layout must be torcia.sparse_csr or "
                           f"torcia.sparse_csc (block layouts are not implemented), got "
                           f"{layout}")
    comp = compressed_indices if isinstance(compressed_indices, Tensor) else \
        _creation.tensor(compressed_indices)
    plain = plain_indices if isinstance(plain_indices, Tensor) else \
        _creation.tensor(plain_indices)
    val = values if isinstance(values, Tensor) else _creation.tensor(
        values, dtype=dtype or (None if _is_int_data(values) else D.get_default_dtype()))
    if dtype is not None and val.dtype is not dtype:
        val = val.to(dtype)
    if device is not None:
        val = val.to(device)
    for name, t in (("compressed_indices", comp), ("plain_indices", plain)):
        if t.dtype not in (D.int32, D.int64):
            raise RuntimeError(f"{name} must be an int32 or int64 tensor, got {t.dtype}")
        if t.ndim != 1:
            raise RuntimeError(f"{name} must be 1-D (batched compressed tensors are not "
                               f"implemented), got {t.ndim}-D")
    if val.ndim != 1:
        raise RuntimeError(f"values must be 1-D (batched or hybrid compressed tensors are not "
                           f"implemented), got {val.ndim}-D")
    c, p = _host(comp).astype(np.int64), _host(plain).astype(np.int64)
    if len(p) != val.shape[0]:
        raise RuntimeError(f"plain_indices and values must have the same number of elements, "
                           f"got {len(p)} and {val.shape[0]}")
    if size is None:
        n_major = len(c) - 1
        n_minor = int(p.max()) + 1 if len(p) else 0
        size = (n_major, n_minor) if layout is sparse_csr else (n_minor, n_major)
    size = tuple(int(s) for s in size)
    if len(size) != 2:
        raise RuntimeError(f"size must be 2-D, got {list(size)}")
    n_major, n_minor = size if layout is sparse_csr else size[::-1]
    name = "crow_indices" if layout is sparse_csr else "ccol_indices"
    if len(c) != n_major + 1:
        raise RuntimeError(f"{name}.shape[-1] must be equal to the number of "
                           f"{'rows' if layout is sparse_csr else 'columns'} + 1 "
                           f"(={n_major + 1}), but got {len(c)}")
    if c[0] != 0 or c[-1] != len(p) or np.any(np.diff(c) < 0):
        raise RuntimeError(f"{name} must start at 0, be non-decreasing and end at nnz "
                           f"({len(p)}), got {c.tolist()[:8]}...")
    if len(p) and (p.min() < 0 or p.max() >= n_minor):
        raise RuntimeError(f"{'col' if layout is sparse_csr else 'row'}_indices must be in "
                           f"[0, {n_minor}), got values from {p.min()} to {p.max()}")
    if requires_grad:
        val.requires_grad_(True)
    dev = val.device
    return SparseCompressedTensor(_index_tensor(c, dev), _index_tensor(p, dev), val, size,
                                  layout)


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None,
                      layout=None, device=None, requires_grad=False, check_invariants=None):
    """A 2-D sparse matrix in CSR layout (``torch.sparse_csr_tensor``).

    Examples
    --------
    >>> import torcia
    >>> m = torcia.sparse_csr_tensor([0, 2, 3], [0, 1, 1], [1.0, 2.0, 3.0], (2, 2))
    >>> m.to_dense()
    tensor([[1., 2.],
            [0., 3.]])
    """
    return sparse_compressed_tensor(crow_indices, col_indices, values, size, dtype=dtype,
                                    layout=sparse_csr, device=device,
                                    requires_grad=requires_grad)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None,
                      layout=None, device=None, requires_grad=False, check_invariants=None):
    """A 2-D sparse matrix in CSC layout (``torch.sparse_csc_tensor``).

    Examples
    --------
    >>> import torcia
    >>> m = torcia.sparse_csc_tensor([0, 1, 3], [0, 0, 1], [1.0, 2.0, 3.0], (2, 2))
    >>> m.to_dense()
    tensor([[1., 2.],
            [0., 3.]])
    """
    return sparse_compressed_tensor(ccol_indices, row_indices, values, size, dtype=dtype,
                                    layout=sparse_csc, device=device,
                                    requires_grad=requires_grad)


# ---------------------------------------------------------------------------------------
# dense -> sparse (Tensor methods)
# ---------------------------------------------------------------------------------------


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse()``: the nonzero entries as a coalesced sparse COO tensor (the
    first ``sparse_dim`` dimensions sparse), or in ``layout`` (``torcia.sparse_csr``,
    ``torcia.sparse_csc``).

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()._nnz()
    2
    >>> torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse(layout=torcia.sparse_csr).layout
    torcia.sparse_csr
    """
    if _is_sparse(self):
        return self.to_sparse(sparse_dim, layout=layout)
    if layout in (sparse_csr, sparse_csc):
        if self.ndim != 2:
            raise RuntimeError(f"to_sparse: conversion from Strided to {_short(layout)} for "
                               f"a {self.ndim}-D tensor is not supported by torcia (2-D only)")
        return _compress(to_sparse(self), layout)
    if layout not in (None, sparse_coo):
        raise RuntimeError(f"to_sparse: conversion from Strided to {layout} is not supported "
                           "by torcia (block layouts are not implemented)")
    sd = self.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < sd <= self.ndim:
        raise RuntimeError(f"sparse_dim must be in [1, {self.ndim}], got {sd}")
    lead = self.reshape(*self.shape[:sd], -1) if sd < self.ndim else self.unsqueeze(-1)
    nz = np.nonzero((_host(lead) != 0).any(axis=-1))
    idx = _index_tensor(np.stack(nz).reshape(sd, -1), self.device)
    values = self[tuple(idx[d] for d in range(sd))]
    return SparseCooTensor(idx, values, self.shape, is_coalesced=True)


def to_sparse_csr(self, dense_dim=None):
    """``Tensor.to_sparse_csr()``: a 2-D tensor in CSR layout.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csr().crow_indices()
    tensor([0, 1, 2])
    """
    return to_sparse(self, layout=sparse_csr)


def to_sparse_csc(self, dense_dim=None):
    """``Tensor.to_sparse_csc()``: a 2-D tensor in CSC layout.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csc().ccol_indices()
    tensor([0, 1, 2])
    """
    return to_sparse(self, layout=sparse_csc)


def _dense_refusal(name, expected):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected {expected} but got Strided")
    method.__name__ = name
    method.__doc__ = (f"The {name} of a sparse tensor; a dense tensor has none (an error, "
                      "as in PyTorch).")
    return method


#: Tensor methods that only sparse layouts have: on a dense tensor, PyTorch's error
DENSE_REFUSALS = {
    "indices": "sparse coordinate tensor layout",
    "_indices": "sparse coordinate tensor layout",
    "values": "sparse tensor layout",
    "_values": "sparse tensor layout",
    "coalesce": "sparse coordinate tensor layout",
    "is_coalesced": "sparse coordinate tensor layout",
    "_nnz": "sparse tensor layout",
    "crow_indices": "sparse row compressed tensor layout",
    "col_indices": "sparse row compressed tensor layout",
    "ccol_indices": "sparse column compressed tensor layout",
    "row_indices": "sparse column compressed tensor layout",
}


# ---------------------------------------------------------------------------------------
# products with a sparse operand, as torch's top-level functions
# ---------------------------------------------------------------------------------------


def dsmm(input, mat2):
    """``sparse @ dense`` as a dense tensor (``torcia.sparse.mm``).

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.dsmm(sparse, torcia.tensor([[1.0], [3.0]]))
    tensor([[6.],
            [1.]])
    """
    return PRODUCTS.mm(input, mat2)


def hspmm(mat1, mat2):
    """``sparse @ dense`` as a hybrid sparse tensor: one sparse dimension (the rows of
    ``mat1`` that hold entries) and a dense one.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (3, 2))
    >>> torcia.hspmm(s, torcia.ones(2, 2)).indices()
    tensor([[0, 1]])
    """
    dense = PRODUCTS.mm(mat1, mat2)
    rows = _creation.tensor(np.unique(mat1._indices_t.cpu().numpy()[0]) if mat1._nnz()
                            else np.zeros(0, dtype=np.int64), device=dense.device)
    return SparseCooTensor(rows.reshape(1, -1), dense.index_select(0, rows),
                           dense.shape, is_coalesced=True)


hsmm = hspmm


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` as a sparse tensor (``input`` and ``mat1``
    sparse, ``mat2`` dense): ``input``'s entries followed by every entry of the product's
    rows that ``mat1`` touches, not coalesced (as PyTorch).

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.sspaddmm(sparse, sparse, torcia.eye(2), beta=1.0, alpha=1.0).to_dense()
    tensor([[0., 4.],
            [2., 0.]])
    """
    prod = hspmm(mat1, mat2)
    rows = prod._indices_t[0]
    k = mat2.shape[1]
    r = rows.reshape(-1, 1).expand(rows.shape[0], k).reshape(-1)
    c = creation.arange(k, device=rows.device).repeat(rows.shape[0])
    idx = _oplib.cat([input._indices_t, _oplib.stack([r, c], 0)], 1)
    vals = _oplib.cat([input._values_t * beta, prod._values_t.reshape(-1) * alpha], 0)
    return SparseCooTensor(idx, vals, input.shape)


def saddmm(input, mat1, mat2, *, beta=1, alpha=1):
    """PyTorch's older name of :func:`sspaddmm`.

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.saddmm(sparse, sparse, torcia.eye(2)).to_dense()
    tensor([[0., 4.],
            [2., 0.]])
    """
    return sspaddmm(input, mat1, mat2, beta=beta, alpha=alpha)


def smm(input, mat2):
    """``sparse @ dense`` as a sparse tensor (:func:`sspaddmm` onto an empty sparse).

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.smm(sparse, torcia.tensor([[1.0], [3.0]])).to_dense()
    tensor([[6.],
            [1.]])
    """
    empty = SparseCooTensor(creation.zeros(2, 0, dtype=D.int64, device=mat2.device),
                            creation.zeros(0, dtype=mat2.dtype, device=mat2.device),
                            (input.shape[0], mat2.shape[1]))
    return sspaddmm(empty, input, mat2)


def sparse_mask(self, mask):
    """The elements of dense ``self`` at the entries of the sparse ``mask``, as a sparse
    tensor with ``mask``'s indices (differentiable in ``self``).

    Examples
    --------
    >>> import torcia
    >>> m = torcia.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 1.0], (2, 2))
    >>> torcia.tensor([[1.0, 2.0], [3.0, 4.0]]).sparse_mask(m).to_dense()
    tensor([[0., 2.],
            [3., 0.]])
    """
    if not isinstance(mask, SparseCooTensor):
        raise RuntimeError("sparse_mask expects mask to be sparse")
    if tuple(mask.shape) != tuple(self.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    idx = mask._indices_t
    values = self[tuple(idx[d] for d in range(idx.shape[0]))]
    return SparseCooTensor(idx, values, self.shape, is_coalesced=mask.is_coalesced())
