"""``torcia.sparse``: sparse COO tensors, enough for graph networks, as ``torch.sparse``.

A :class:`SparseCooTensor` holds ``indices`` (``sparse_dim x nnz``, int64) and ``values``
(``nnz`` followed by the dense dimensions) of a tensor of a given ``size``. It is built by
:func:`torcia.sparse_coo_tensor` or ``dense.to_sparse()`` and supports what graph code
uses: :func:`mm` (sparse @ dense, differentiable in the values and the dense operand),
``coalesce``, ``indices``/``values``, ``to_dense`` (differentiable), ``t``, scaling by a
number, device and dtype moves. Any other tensor operation on it raises an error naming
it, never a silent densification.

Examples
--------
>>> import torcia
>>> adj = torcia.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], [1.0, 2.0, 3.0], (2, 3))
>>> torcia.sparse.mm(adj, torcia.ones(3, 2))
tensor([[1., 1.],
        [5., 5.]])
>>> adj.to_dense()
tensor([[0., 1., 0.],
        [2., 0., 3.]])
"""

from __future__ import annotations

import numpy as np

from torcia import _creation
from torcia import _dtype as D
from torcia._ops_compat_more import sparse_coo as _layout_coo
from torcia._tensor import Size, Tensor

__all__ = ["SparseCooTensor", "addmm", "mm", "spmm", "sum"]


class SparseCooTensor:
    """A sparse tensor in coordinate (COO) layout; see the module docstring.

    Parameters
    ----------
    indices : Tensor
        ``(sparse_dim, nnz)`` integer coordinates.
    values : Tensor
        ``(nnz, *dense_shape)`` values; gradients flow to it.
    size : tuple of int
        The full shape, ``sparse dims + dense dims``.
    is_coalesced : bool
        Whether the indices are known to be sorted and unique.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> s = torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> isinstance(s, torcia.sparse.SparseCooTensor), s.indices(), s.values()
    (True, tensor([[0, 1],
            [1, 0]]), tensor([2., 3.]))
    """

    is_sparse = True
    is_sparse_csr = False
    is_quantized = False
    is_meta = False
    layout = _layout_coo

    def __init__(self, indices: Tensor, values: Tensor, size, is_coalesced: bool = False):
        self._indices_t = indices
        self._values_t = values
        self._size = Size(int(s) for s in size)
        self._coalesced = bool(is_coalesced)

    # ----- attributes -----------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return self._size

    def size(self, dim=None):
        """The shape, or the length of one dimension."""
        return self._size if dim is None else self._size[dim]

    @property
    def ndim(self) -> int:
        return len(self._size)

    def dim(self) -> int:
        return len(self._size)

    @property
    def dtype(self):
        return self._values_t.dtype

    @property
    def device(self):
        return self._values_t.device

    @property
    def is_cuda(self) -> bool:
        return self._values_t.is_cuda

    @property
    def is_cpu(self) -> bool:
        return self._values_t.is_cpu

    @property
    def requires_grad(self) -> bool:
        return self._values_t.requires_grad

    def requires_grad_(self, requires_grad: bool = True):
        self._values_t.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """The gradient reaching the values, as a sparse tensor with the same indices."""
        g = self._values_t.grad
        return None if g is None else SparseCooTensor(self._indices_t, g, self._size,
                                                      self._coalesced)

    def sparse_dim(self) -> int:
        return int(self._indices_t.shape[0])

    def dense_dim(self) -> int:
        return self._values_t.ndim - 1

    def _nnz(self) -> int:
        return int(self._indices_t.shape[1])

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _indices(self) -> Tensor:
        return self._indices_t

    def _values(self) -> Tensor:
        return self._values_t

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

    # ----- conversion -----------------------------------------------------------------
    def _linear(self) -> np.ndarray:
        idx = self._indices_t.cpu().numpy().astype(np.int64)
        dims = self._size[: self.sparse_dim()]
        if idx.shape[1] == 0:
            return np.zeros(0, dtype=np.int64)
        return np.ravel_multi_index(tuple(idx), dims)

    def coalesce(self) -> SparseCooTensor:
        """Sorted, unique coordinates; the values of repeated coordinates are summed
        (differentiably)."""
        if self._coalesced:
            return self
        linear = self._linear()
        unique, inverse = np.unique(linear, return_inverse=True)
        dims = self._size[: self.sparse_dim()]
        dev = self.device
        idx = _creation.tensor(np.stack(np.unravel_index(unique, dims)).reshape(
            len(dims), -1).astype(np.int64), device=dev)
        zeros = _creation.zeros(len(unique), *self._values_t.shape[1:], dtype=self.dtype,
                                device=dev)
        values = zeros.index_add(0, _creation.tensor(inverse.reshape(-1), device=dev),
                                 self._values_t)
        return SparseCooTensor(idx, values, self._size, is_coalesced=True)

    def to_dense(self, dtype=None) -> Tensor:
        """The dense tensor (differentiable in the values; duplicates add up)."""
        dims = self._size[: self.sparse_dim()]
        rest = tuple(self._size[self.sparse_dim():])
        flat = _creation.zeros(int(np.prod(dims)), *rest, dtype=self.dtype, device=self.device)
        linear = _creation.tensor(self._linear(), device=self.device)
        out = flat.index_add(0, linear, self._values_t).reshape(*self._size)
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None) -> SparseCooTensor:
        return self

    def to(self, *args, **kwargs) -> SparseCooTensor:
        """Move or cast the values (and move the indices) like ``Tensor.to``."""
        values = self._values_t.to(*args, **kwargs)
        return SparseCooTensor(self._indices_t.to(values.device), values, self._size,
                               self._coalesced)

    def cpu(self) -> SparseCooTensor:
        return self.to("cpu")

    def cuda(self, device=None) -> SparseCooTensor:
        return self.to("cuda" if device is None else device)

    def float(self) -> SparseCooTensor:
        return self.to(D.float32)

    def double(self) -> SparseCooTensor:
        return self.to(D.float64)

    def detach(self) -> SparseCooTensor:
        return SparseCooTensor(self._indices_t, self._values_t.detach(), self._size,
                               self._coalesced)

    def clone(self) -> SparseCooTensor:
        return SparseCooTensor(self._indices_t.clone(), self._values_t.clone(), self._size,
                               self._coalesced)

    # ----- arithmetic -----------------------------------------------------------------
    def t(self) -> SparseCooTensor:
        """The transpose of a 2-D sparse tensor."""
        if self.sparse_dim() != 2 or self.dense_dim():
            raise RuntimeError(f"t() expects a 2-D sparse tensor, got size {list(self._size)}")
        return self.transpose(0, 1)

    def transpose(self, dim0: int, dim1: int) -> SparseCooTensor:
        sd = self.sparse_dim()
        dim0, dim1 = dim0 % self.ndim, dim1 % self.ndim
        if dim0 >= sd or dim1 >= sd:
            raise RuntimeError("transpose of a sparse tensor: both dimensions must be sparse")
        order = list(range(sd))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        size = list(self._size)
        size[dim0], size[dim1] = size[dim1], size[dim0]
        return SparseCooTensor(self._indices_t[order], self._values_t, size)

    def mm(self, other: Tensor) -> Tensor:
        return mm(self, other)

    def matmul(self, other: Tensor) -> Tensor:
        return mm(self, other)

    __matmul__ = matmul

    def __mul__(self, other):
        if isinstance(other, (int, float)):
            return SparseCooTensor(self._indices_t, self._values_t * other, self._size,
                                   self._coalesced)
        raise TypeError("torcia sparse COO tensors multiply by Python numbers only; "
                        f"got {type(other).__name__}")

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self * (1.0 / other)

    def __neg__(self):
        return self * -1

    def __add__(self, other):
        if isinstance(other, SparseCooTensor):
            if other._size != self._size:
                raise RuntimeError(f"sizes {list(self._size)} and {list(other._size)} "
                                   "do not match")
            return SparseCooTensor(
                _cat([self._indices_t, other._indices_t], 1),
                _cat([self._values_t, other._values_t], 0), self._size).coalesce()
        if isinstance(other, Tensor):
            return self.to_dense() + other
        return NotImplemented

    __radd__ = __add__

    def __len__(self):
        return self._size[0]

    def __repr__(self):
        return (f"tensor(indices={self._indices_t!r},\n       values={self._values_t!r},\n"
                f"       size={tuple(self._size)}, nnz={self._nnz()}, "
                f"layout=torcia.sparse_coo)")

    def __getattr__(self, name):
        if hasattr(Tensor, name):
            raise NotImplementedError(
                f"Tensor.{name} is not supported on torcia's sparse COO tensors (they support "
                "mm/matmul, coalesce, indices, values, to_dense, t, transpose, to, scaling); "
                "call .to_dense() first if the dense tensor fits in memory")
        raise AttributeError(f"'SparseCooTensor' object has no attribute {name!r}")


def _cat(tensors, dim):
    from torcia._ops import cat

    return cat(tensors, dim)


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
        return sparse_coo_tensor(_creation.zeros(len(shape), 0, dtype=D.int64, device=device),
                                 _creation.zeros(0, dtype=dtype or D.get_default_dtype(),
                                                 device=device),
                                 shape, requires_grad=requires_grad, is_coalesced=True)
    idx = indices if isinstance(indices, Tensor) else _creation.tensor(indices)
    if idx.dtype.is_floating_point:
        raise RuntimeError(f"indices must be an int64 tensor, got {idx.dtype}")
    val = values if isinstance(values, Tensor) else _creation.tensor(
        values, dtype=dtype or D.get_default_dtype())
    if dtype is not None and val.dtype is not dtype:
        val = val.to(dtype)
    if device is not None:
        val = val.to(device)
    idx = idx.to(D.int64).to(val.device)
    if idx.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if idx.shape[1] != val.shape[0]:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from "
                           f"indices: {idx.shape[1]}, nnz from values: {val.shape[0]}")
    host = idx.cpu().numpy()
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
            if lo < 0 or hi >= size[d]:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                                   f"{size[d]} but found index {hi if hi >= size[d] else lo}")
    if requires_grad:
        val.requires_grad_(True)
    return SparseCooTensor(idx, val, size, bool(is_coalesced))


def to_sparse(self, sparse_dim=None, layout=None):
    """``Tensor.to_sparse()``: the nonzero entries as a coalesced sparse COO tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()._nnz()
    2
    """
    if layout not in (None, "torcia.sparse_coo"):
        raise NotImplementedError(f"to_sparse(layout={layout}): torcia supports the COO "
                                  "layout only")
    sd = self.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < sd <= self.ndim:
        raise RuntimeError(f"sparse_dim must be in [1, {self.ndim}], got {sd}")
    lead = self.reshape(*self.shape[:sd], -1) if sd < self.ndim else self.unsqueeze(-1)
    nz = np.nonzero((lead.detach().cpu().numpy() != 0).any(axis=-1))
    idx = _creation.tensor(np.stack(nz).reshape(sd, -1).astype(np.int64), device=self.device)
    values = self[tuple(idx[d] for d in range(sd))]
    return SparseCooTensor(idx, values, self.shape, is_coalesced=True)


def mm(mat1, mat2) -> Tensor:
    """``sparse @ dense`` for a 2-D sparse ``mat1`` (n x m) and a dense ``mat2`` (m x k);
    differentiable in ``mat1``'s values and in ``mat2``.

    Examples
    --------
    >>> import torcia
    >>> eye = torcia.sparse_coo_tensor([[0, 1], [0, 1]], [1.0, 1.0], (2, 2))
    >>> torcia.sparse.mm(eye, torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[1., 2.],
            [3., 4.]])
    """
    if isinstance(mat2, SparseCooTensor):
        if isinstance(mat1, SparseCooTensor):
            raise NotImplementedError("torcia.sparse.mm of two sparse tensors is not "
                                      "supported; densify one with .to_dense()")
        # dense @ sparse == (sparse.T @ dense.T).T
        return mm(mat2.t(), mat1.t()).t()
    if not isinstance(mat1, SparseCooTensor):
        return mat1 @ mat2
    if mat1.sparse_dim() != 2 or mat1.dense_dim():
        raise RuntimeError(f"sparse.mm expects a 2-D sparse matrix, got size "
                           f"{list(mat1.shape)}")
    squeeze = mat2.ndim == 1
    dense = mat2.unsqueeze(-1) if squeeze else mat2
    if dense.ndim != 2 or dense.shape[0] != mat1.shape[1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {'x'.join(map(str, mat2.shape))})")
    rows, cols = mat1._indices_t[0], mat1._indices_t[1]
    gathered = dense.index_select(0, cols) * mat1._values_t.unsqueeze(-1)
    out = _creation.zeros(mat1.shape[0], dense.shape[1], dtype=gathered.dtype,
                          device=dense.device).index_add(0, rows, gathered)
    return out.squeeze(-1) if squeeze else out


spmm = mm


def addmm(mat, mat1, mat2, beta=1.0, alpha=1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1``.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> torcia.sparse.addmm(torcia.ones(2, 2), m, torcia.eye(2))
    tensor([[1., 3.],
            [4., 1.]])
    """
    return mat * beta + mm(mat1, mat2) * alpha


def sum(input, dim=None, dtype=None):  # noqa: A001 - PyTorch's name
    """The sum of a sparse tensor's entries (all of them, or over ``dim`` as dense).

    Examples
    --------
    >>> import torcia
    >>> s = torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> torcia.sparse.sum(s)
    tensor(5.)
    >>> torcia.sparse.sum(s, dim=0)
    tensor([3., 2.])
    """
    if not isinstance(input, SparseCooTensor):
        return input.sum() if dim is None else input.sum(dim)
    if dim is None:
        out = input._values_t.sum()
    else:
        out = input.to_dense().sum(dim)
    return out if dtype is None else out.to(dtype)
