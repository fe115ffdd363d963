"""The sparse-matrix product, declared once: schema, reference kernel, meta shape.
``sparse_mm(crow, col, values, dense, ncols=, transpose=)`` is the compressed-row matrix
the first three describe (``len(crow) - 1`` rows, ``ncols`` columns) times ``dense``, or
its transpose times ``dense`` with ``transpose=True``; differentiable in ``values`` and
``dense``. A primitive: a device backend owes it.

SciPy's sparse products (CuPy's ``cupyx.scipy.sparse`` for CuPy arrays) are the kernel's
fast path, through the ``scipy`` extra of torcia-core; without it the product is a pass
over the entries per column of the result (``bincount``), which needs memory for one
column of products, never a dense copy of the sparse matrix. The public functions are
:mod:`torcia.sparse`'s products, the derivative is torcia-autograd's.
"""

from __future__ import annotations

import numpy as np

from torcia._opdef import define

#: the dtypes SciPy's sparse kernels take (others are computed in float32 and cast)
_SCIPY_DTYPES = frozenset("float32 float64 complex64 complex128 int32 int64".split())


def scipy_sparse(xp):
    """The sparse-matrix module for ``xp`` arrays, or None when it is not installed."""
    try:
        if getattr(xp, "__name__", "") == "cupy":
            import cupyx.scipy.sparse as sp
        else:
            import scipy.sparse as sp
    except ImportError:
        return None
    return sp


# ----- reference kernel ------------------------------------------------------------------


class Kernels:
    """The reference kernel (``self.xp`` the array module)."""

    def sparse_mm(self, crow, col, values, dense, ncols, transpose=False):
        """sparse_mm(crow (m + 1,), col (nnz,), values (nnz,), dense, ncols, transpose):
        ``A @ dense`` for the CSR matrix ``A`` (m x ncols) the arrays describe, or
        ``A^T @ dense`` with ``transpose``."""
        xp = self.xp
        m = crow.shape[0] - 1
        out_rows = ncols if transpose else m
        dtype = xp.result_type(values, dense)
        sp = scipy_sparse(xp)
        if sp is not None and dtype.name in _SCIPY_DTYPES and values.shape[0]:
            work = values if values.dtype == dtype else values.astype(dtype)
            matrix = sp.csr_matrix((work, col, crow), shape=(m, ncols))
            product = (matrix.T if transpose else matrix) @ dense.astype(dtype, copy=False)
            return xp.ascontiguousarray(xp.asarray(product), dtype=dtype)
        rows = xp.repeat(xp.arange(m), xp.diff(crow).astype(xp.int64))
        source, target = (rows, col) if transpose else (col, rows)
        k = dense.shape[1]
        out = xp.zeros((out_rows, k), dtype=dtype)
        parts = ((xp.real, 1), (xp.imag, 1j)) if dtype.kind == "c" else ((None, 1),)
        for j in range(k):
            products = values * dense[source, j]
            for part, unit in parts:
                weights = products if part is None else part(products)
                column = xp.bincount(target, weights=weights.astype(xp.float64),
                                     minlength=out_rows)
                out[:, j] += (column * unit).astype(dtype) if part is not None else \
                    column.astype(dtype)
        return out


# ----- shape -----------------------------------------------------------------------------


def _sparse_mm_shape(crow, col, values, dense, ncols, transpose=False):
    """(len(crow) - 1, k), or (ncols, k) with ``transpose``, for a dense (rows, k)."""
    return ((ncols if transpose else crow.shape[0] - 1, dense.shape[1]),
            np.result_type(values.dtype, dense.dtype))


# ----- the declaration -------------------------------------------------------------------

#: :data:`torcia.ops.SPARSE`; ncols=None as the records have always read it: the products
#: of torcia.sparse always pass it
DECLARED = (
    define("sparse_mm(Tensor crow, Tensor col, Tensor values, Tensor dense, *, "
           "int? ncols=None, bool transpose=False) -> Tensor", Kernels.sparse_mm,
           shape=_sparse_mm_shape, group="sparse"),
)
