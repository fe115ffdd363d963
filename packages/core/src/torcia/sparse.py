"""``torcia.sparse``: sparse tensors and their products, as ``torch.sparse``.

Sparse tensors come in PyTorch's layouts: COO (:func:`torcia.sparse_coo_tensor`,
``dense.to_sparse()``), CSR and CSC (:func:`torcia.sparse_csr_tensor`,
``dense.to_sparse_csr()``, ``to_sparse(layout=torcia.sparse_csc)``). They are
:class:`torcia.Tensor` objects (see :class:`SparseCooTensor`): ``dense + sparse``,
``sparse * dense``, ``sparse @ dense``, ``dense @ sparse`` and ``sparse @ sparse`` work as in
PyTorch, and so do ``coalesce``, ``indices``/``values``, ``to_dense``, the zero-preserving
elementwise ops (``abs``, ``sqrt``, ``relu``...) and the functions here, all differentiable
in the values and in the dense operands.

:func:`mm` multiplies a sparse matrix into a dense one without densifying it: with SciPy
installed (the ``scipy`` extra), through SciPy's compressed-row products; otherwise one
pass over the entries per column of the result.

Examples
--------
>>> import torcia
>>> adj = torcia.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], [1.0, 2.0, 3.0], (2, 3))
>>> torcia.sparse.mm(adj, torcia.ones(3, 2))
tensor([[1., 1.],
        [5., 5.]])
>>> torcia.sparse.softmax(adj, dim=1).to_dense()
tensor([[0.0000, 1.0000, 0.0000],
        [0.2689, 0.0000, 0.7311]])
"""

from __future__ import annotations

import builtins
import functools

import numpy as np

from torcia import _creation, _sparse
from torcia._oplib.runtime import sparse_coo, sparse_csc, sparse_csr
from torcia._ops import creation
from torcia._ops.linalg import SPARSE_PRODUCTS
from torcia._sparse import (
    SparseCompressedTensor,
    SparseCooTensor,
    _as_coo,
    _compress,
    _host,
    _index_tensor,
    _is_sparse,
)
from torcia._tensor import Tensor, _wrap_dim, call

__all__ = [
    "SparseCompressedTensor", "SparseCooTensor", "addmm", "as_sparse_gradcheck",
    "check_sparse_tensor_invariants", "log_softmax", "mm", "softmax", "spmm", "sum",
]

# ---------------------------------------------------------------------------------------
# products
# ---------------------------------------------------------------------------------------


def _check_mm_operands(sparse, dense, dense_on_left):
    if sparse.ndim != 2 or sparse.dense_dim():
        raise RuntimeError(f"sparse matrix products expect a 2-D sparse matrix without dense "
                           f"dimensions, got size {list(sparse.shape)}")
    if dense.ndim not in (1, 2):
        raise RuntimeError(f"sparse matrix products expect a 1-D or 2-D dense operand, got "
                           f"{dense.ndim}-D")
    if dense.dtype is not sparse.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(sparse.dtype)} but found "
                           f"{_scalar_name(dense.dtype)}")
    m, n = sparse.shape
    if dense_on_left:
        rows = dense.shape[-1]
        if rows != m:
            left = dense.shape if dense.ndim == 2 else (1, dense.shape[0])
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({left[0]}x{left[1]}"
                               f" and {m}x{n})")
    elif dense.shape[0] != n:
        right = "x".join(map(str, dense.shape if dense.ndim == 2 else (dense.shape[0], 1)))
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({m}x{n} and {right})")


def _scalar_name(dtype) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half",
            "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "complex64": "ComplexFloat",
            "complex128": "ComplexDouble"}.get(dtype.name, dtype.name)


def _compressed_rows(s):
    """``(compressed, plain, values, rows_of_the_matrix_they_describe, transposed)``: the
    CSR arrays of ``s`` (``transposed`` False) or of ``s``'s transpose (a CSC matrix's
    arrays, ``transposed`` True)."""
    if isinstance(s, SparseCompressedTensor):
        return s._compressed_t, s._plain_t, s._values_t, s._layout is sparse_csc
    c = s.coalesce()
    crow, col = c._csr()
    return crow, col, c._values_t, False


def _sparse_dense(s, dense, dense_on_left: bool) -> Tensor:
    """``s @ dense`` (or ``dense @ s``) with the ``sparse_mm`` op."""
    _check_mm_operands(s, dense, dense_on_left)
    m, n = s.shape
    comp, plain, values, transposed = _compressed_rows(s)
    # the arrays describe A (m x n) as CSR, or A's transpose (n x m) as CSR for CSC
    ncols = m if transposed else n
    vector = dense.ndim == 1
    if dense_on_left:
        # dense @ A == (A^T @ dense^T)^T
        rhs = dense.unsqueeze(-1) if vector else dense.t()
        out = call("sparse_mm", (comp, plain, values, rhs),
                   {"ncols": ncols, "transpose": not transposed})
        return out.squeeze(-1) if vector else out.t()
    rhs = dense.unsqueeze(-1) if vector else dense
    out = call("sparse_mm", (comp, plain, values, rhs),
               {"ncols": ncols, "transpose": transposed})
    return out.squeeze(-1) if vector else out


def _sparse_sparse(a, b):
    """``a @ b`` of two sparse matrices, sparse: each entry of ``a`` meets the entries of
    ``b``'s row it points at (the index join is made on the host; the products and their
    sums are differentiable ops of the values)."""
    if a.ndim != 2 or b.ndim != 2 or a.dense_dim() or b.dense_dim():
        raise RuntimeError("sparse @ sparse expects two 2-D sparse matrices without dense "
                           "dimensions")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x"
                           f"{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(a.dtype)} but found "
                           f"{_scalar_name(b.dtype)}")
    layout = a.layout
    x, y = _as_coo(a).coalesce(), _as_coo(b).coalesce()
    xi, yi = _host(x._indices_t), _host(y._indices_t)
    crow = np.zeros(y.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(yi[0], minlength=y.shape[0]), out=crow[1:])
    counts = crow[xi[1] + 1] - crow[xi[1]]
    left = np.repeat(np.arange(xi.shape[1]), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    right = crow[xi[1]][left] + (np.arange(len(left)) - starts)
    dev = x.device
    values = x._values_t.index_select(0, _index_tensor(left, dev)) * \
        y._values_t.index_select(0, _index_tensor(right, dev))
    idx = np.stack([xi[0][left], yi[1][right]]) if len(left) else np.zeros((2, 0), np.int64)
    out = SparseCooTensor(_index_tensor(idx, dev), values,
                          (a.shape[0], b.shape[1])).coalesce()
    # PyTorch gives compressed operands a CSR product
    return out if layout is sparse_coo else _compress(out, sparse_csr)


def mm(mat1, mat2) -> Tensor:
    """The matrix product where either operand (or both) is sparse: ``sparse @ dense`` and
    ``dense @ sparse`` are dense, ``sparse @ sparse`` is sparse; differentiable in the
    values and in the dense operand.

    Examples
    --------
    >>> import torcia
    >>> eye = torcia.sparse_coo_tensor([[0, 1], [0, 1]], [1.0, 1.0], (2, 2))
    >>> torcia.sparse.mm(eye, torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[1., 2.],
            [3., 4.]])
    >>> torcia.sparse.mm(eye, eye).to_dense()
    tensor([[1., 0.],
            [0., 1.]])
    """
    if _is_sparse(mat1) and _is_sparse(mat2):
        return _sparse_sparse(mat1, mat2)
    if _is_sparse(mat1):
        return _sparse_dense(mat1, mat2, dense_on_left=False)
    if _is_sparse(mat2):
        return _sparse_dense(mat2, mat1, dense_on_left=True)
    return mat1 @ mat2


spmm = mm
SPARSE_PRODUCTS["mm"] = mm


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` (dense result).

    Examples
    --------
    >>> import torcia
    >>> m = torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> torcia.sparse.addmm(torcia.ones(2, 2), m, torcia.eye(2))
    tensor([[1., 3.],
            [4., 1.]])
    """
    product = mm(mat1, mat2)
    if _is_sparse(product):
        product = product.to_dense()
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (mat if beta == 1 else mat * beta) + product


# ---------------------------------------------------------------------------------------
# reductions and softmax
# ---------------------------------------------------------------------------------------


def sum(input, dim=None, dtype=None):  # noqa: A001 - PyTorch's name
    """The sum of a sparse tensor's entries: over all of them (a dense scalar), or over
    ``dim`` (sparse while sparse dimensions remain, dense otherwise).

    Examples
    --------
    >>> import torcia
    >>> s = torcia.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> torcia.sparse.sum(s)
    tensor(5.)
    >>> torcia.sparse.sum(s, dim=0).to_dense()
    tensor([3., 2.])
    """
    if not _is_sparse(input):
        out = input.sum() if dim is None else input.sum(dim)
        return out if dtype is None else out.to(dtype)
    s = _as_coo(input)
    values = s._values_t if dtype is None else s._values_t.to(dtype)
    if dim is None:
        return values.sum()
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = sorted({_wrap_dim(d, s.ndim) for d in dims})
    sd = s.sparse_dim()
    dense_dims = [d - sd + 1 for d in dims if d >= sd]
    if dense_dims:
        values = values.sum(dense_dims)
    reduced = [d for d in dims if d < sd]
    if len(reduced) == sd:
        return values.sum(0)
    keep = [d for d in range(sd) if d not in reduced]
    size = [s.shape[d] for d in keep] + [s.shape[d] for d in range(sd, s.ndim)
                                          if d not in dims]
    return SparseCooTensor(s._indices_t[keep], values, size).coalesce()


def _softmax(input, dim, dtype, log: bool):
    if isinstance(input, SparseCompressedTensor):
        raise NotImplementedError(f"softmax of a {input.layout} tensor is not supported; "
                                  "convert with .to_sparse() first")
    if not _is_sparse(input):
        fn = input.log_softmax if log else input.softmax
        return fn(dim, dtype=dtype)
    s = input.coalesce()
    values = s._values_t if dtype is None else s._values_t.to(dtype)
    d = _wrap_dim(dim, s.ndim)
    sd = s.sparse_dim()
    if d >= sd:
        fn = values.log_softmax if log else values.softmax
        return SparseCooTensor(s._indices_t, fn(d - sd + 1), s.shape, True)
    # the entries that differ only in coordinate d share a softmax; coordinates that are
    # not stored count as -inf (they get no share), as in PyTorch
    idx = _host(s._indices_t)
    others = [k for k in range(sd) if k != d]
    keys = np.ravel_multi_index(tuple(idx[others]), [s.shape[k] for k in others]) \
        if others and idx.shape[1] else np.zeros(idx.shape[1], dtype=np.int64)
    _, group = np.unique(keys, return_inverse=True)
    n_groups = int(group.max()) + 1 if len(group) else 0
    host_values = _host(values)
    peak = np.full((n_groups, *host_values.shape[1:]), -np.inf, dtype=host_values.dtype)
    np.maximum.at(peak, group.reshape(-1), host_values)
    g = _index_tensor(group.reshape(-1), s.device)
    # the maximum only steadies exp: a constant of the gradient
    shifted = values - _creation.tensor(peak, device=s.device)[g]
    exp = shifted.exp()
    total = creation.zeros(n_groups, *values.shape[1:], dtype=values.dtype,
                            device=s.device).index_add(0, g, exp)
    out = shifted - total.log()[g] if log else exp / total[g]
    return SparseCooTensor(s._indices_t, out, s.shape, True)


def softmax(input, dim, *, dtype=None):
    """Softmax along ``dim`` over the stored entries of a sparse COO tensor (entries not
    stored count as -inf and stay unstored): a sparse tensor with ``input``'s coalesced
    indices.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.sparse_coo_tensor([[0, 0], [0, 2]], [1.0, 1.0], (1, 3))
    >>> torcia.sparse.softmax(s, 1).to_dense()
    tensor([[0.5000, 0.0000, 0.5000]])
    """
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input, dim, *, dtype=None):
    """Log-softmax along ``dim`` over the stored entries of a sparse COO tensor (see
    :func:`softmax`).

    Examples
    --------
    >>> import torcia
    >>> s = torcia.sparse_coo_tensor([[0, 0], [0, 2]], [1.0, 1.0], (1, 3))
    >>> torcia.sparse.log_softmax(s, 1).values()
    tensor([-0.6931, -0.6931])
    """
    return _softmax(input, dim, dtype, log=True)


# ---------------------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------------------


class check_sparse_tensor_invariants:  # noqa: N801 - PyTorch's name
    """PyTorch's switch for checking the indices of new sparse tensors (as a context
    manager, a decorator, or with :meth:`enable`/:meth:`disable`). torcia always checks
    them (bounds, shapes, compressed offsets); the switch is kept so that code toggling
    it runs, and :meth:`is_enabled` reports it.

    Examples
    --------
    >>> import torcia
    >>> with torcia.sparse.check_sparse_tensor_invariants():
    ...     torcia.sparse.check_sparse_tensor_invariants.is_enabled()
    True
    >>> torcia.sparse.check_sparse_tensor_invariants.is_enabled()
    False
    """

    _enabled = [False]

    def __init__(self, enable: bool = True):
        self.state = enable
        self.saved_state = None

    @staticmethod
    def is_enabled() -> bool:
        return check_sparse_tensor_invariants._enabled[0]

    @staticmethod
    def enable() -> None:
        check_sparse_tensor_invariants._enabled[0] = True

    @staticmethod
    def disable() -> None:
        check_sparse_tensor_invariants._enabled[0] = False

    def __enter__(self):
        if self.saved_state is not None:
            raise RuntimeError("This context manager instance is already activated. Use a "
                               "different context manager instance for context nesting.")
        self.saved_state = self.is_enabled()
        self._enabled[0] = self.state

    def __exit__(self, *exc):
        self._enabled[0] = self.saved_state
        self.saved_state = None

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)
        return wrapped


def as_sparse_gradcheck(gradcheck):
    """A version of ``gradcheck`` (e.g. :func:`torcia.autograd.gradcheck`) that takes
    sparse inputs: each sparse input that requires grad is checked through its values (its
    structure held fixed), and sparse outputs are compared densely.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd import gradcheck
    >>> s = torcia.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2),
    ...                              dtype=torcia.float64, requires_grad=True)
    >>> d = torcia.randn(2, 3, dtype=torcia.float64, requires_grad=True)
    >>> torcia.sparse.as_sparse_gradcheck(gradcheck)(torcia.sparse.mm, (s, d))
    True
    """

    def sparse_gradcheck(func, inputs, **kwargs):
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        flat, rebuilds = [], []
        for x in inputs:
            if _is_sparse(x) and x.requires_grad:
                flat.append(x._values_t.detach().clone().requires_grad_(True))
                rebuilds.append(x._with_values)
            else:
                flat.append(x)
                rebuilds.append(None)

        def dense_func(*args):
            rebuilt = [r(a) if r is not None else a for r, a in builtins.zip(rebuilds, args)]
            out = func(*rebuilt)
            outs = out if isinstance(out, tuple) else (out,)
            dense = tuple(o.to_dense() if _is_sparse(o) else o for o in outs)
            return dense if isinstance(out, tuple) else dense[0]

        return gradcheck(dense_func, tuple(flat), **kwargs)

    sparse_gradcheck.__name__ = f"sparse_{getattr(gradcheck, '__name__', 'gradcheck')}"
    return sparse_gradcheck


# the sparse classes' products and sums (torcia._sparse, below this module) run these
_sparse.PRODUCTS.mm, _sparse.PRODUCTS.sum = mm, sum
