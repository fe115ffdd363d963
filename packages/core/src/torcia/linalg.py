"""``torcia.linalg``: norms, inverses, solves, determinants and decompositions.

Each function checks its input (floating point, batches of square matrices where needed)
in PyTorch's words and runs one ``linalg_*`` kernel through the dispatcher, so autograd
records it. Inputs may carry leading batch dims.

Examples
--------
>>> import torcia
>>> a = torcia.tensor([[2.0, 0.0], [0.0, 4.0]])
>>> torcia.linalg.inv(a)
tensor([[0.5000, 0.0000],
        [0.0000, 0.2500]])
"""

from __future__ import annotations

import math

from torcia._ops import _dims, _return_type, matmul, to_dtype
from torcia._tensor import Tensor, _torch_name, _wrap_dim, call
from torcia.amp import autocast_as

_Slogdet = _return_type("linalg_slogdet", ("sign", "logabsdet"))
_Svd = _return_type("linalg_svd", ("U", "S", "Vh"))
_Qr = _return_type("linalg_qr", ("Q", "R"))
_Eigh = _return_type("linalg_eigh", ("eigenvalues", "eigenvectors"))


def _float(A, name):
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.{name}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {_torch_name(A.dtype)}")


def _square(A, name):
    _matrix(A, name)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _matrix(A, name):
    _float(A, name)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 "
                           f"dimensions.")


# ----- norms --------------------------------------------------------------------------------


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ``ord``-norm over ``dim`` (all elements when None).

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.vector_norm(torcia.tensor([3.0, -4.0]))
    tensor(5.)
    >>> torcia.linalg.vector_norm(torcia.tensor([3.0, -4.0]), ord=float("inf"))
    tensor(4.)
    """
    if dtype is not None:
        x = to_dtype(x, dtype)
    _float(x, "vector_norm")
    return call("linalg_vector_norm", (x,), {"ord": float(ord), "dim": _dims(dim, x.ndim),
                                             "keepdim": bool(keepdim)})


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm ``ord`` ("fro", "nuc", 1, -1, 2, -2, inf, -inf) over the two ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.matrix_norm(torcia.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    if dtype is not None:
        A = to_dtype(A, dtype)
    _matrix(A, "matrix_norm")
    if ord not in ("fro", "nuc") and ord not in (1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    d = tuple(_wrap_dim(x, A.ndim) for x in dim)
    if len(d) != 2 or d[0] == d[1]:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple of different dims. "
                           f"Got {tuple(dim)}")
    return call("linalg_matrix_norm", (A,), {"ord": ord, "dim": d, "keepdim": bool(keepdim)})


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (1-D input or one ``dim``) or a matrix norm (2-D input or two ``dim``);
    with ``ord`` and ``dim`` both None, the 2-norm of all elements."""
    if dtype is not None:
        A = to_dtype(A, dtype)
    _float(A, "norm")
    if isinstance(dim, int):
        dim = (dim,)
    if ord is not None and dim is None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {A.ndim}D.")
        dim = tuple(range(A.ndim))
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord {ord!r} is a matrix norm; give two dims")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim)


# ----- inverses and solves ---------------------------------------------------------------


def inv(A):
    """The inverse of each square matrix in ``A``; raises for a singular one.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.inv(torcia.tensor([[1.0, 1.0], [0.0, 1.0]]))
    tensor([[ 1., -1.],
            [ 0.,  1.]])
    """
    _square(A, "inv")
    return call("linalg_inv", (A,), {})


@autocast_as("linalg_solve")  # cast before the same-dtype check, as PyTorch
def solve(A, B, *, left=True):
    """The solution ``X`` of ``A @ X = B`` (``X @ A = B`` when ``left`` is False).

    ``B`` may be a batch of vectors (one dim fewer than ``A``) or of matrices.
    """
    _square(A, "solve")
    _float(B, "solve")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {_torch_name(A.dtype)} and B of type "
                           f"{_torch_name(B.dtype)} instead")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    if left and Bm.shape[-2] != A.shape[-1] or not left and Bm.shape[-1] != A.shape[-1]:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{A.shape[-1]} and "
            f"{Bm.shape[-2]}x{Bm.shape[-1]})")
    X = call("linalg_solve", (A, Bm), {"left": bool(left)})
    return X.squeeze(-1) if vector else X


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse; singular values below ``rtol * max`` count as 0."""
    _matrix(A, "pinv")
    if atol is not None:
        raise NotImplementedError("linalg.pinv: atol is not supported; use rtol")
    return call("linalg_pinv", (A,), {"rtol": rtol, "hermitian": bool(hermitian)})


# ----- determinants -------------------------------------------------------------------------


def det(A):
    """The determinant of each square matrix in ``A``.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.det(torcia.tensor([[2.0, 1.0], [0.0, 3.0]]))
    tensor(6.)
    """
    _square(A, "det")
    return call("linalg_det", (A,), {})


def slogdet(A):
    """``(sign, logabsdet)`` of the determinant, stable where ``det`` over- or underflows."""
    _square(A, "slogdet")
    return _Slogdet(*call("linalg_slogdet", (A,), {}))


# ----- decompositions ---------------------------------------------------------------------


def svd(A, full_matrices=True):
    """``U, S, Vh`` with ``A = U @ diag(S) @ Vh``; singular values in descending order."""
    _matrix(A, "svd")
    return _Svd(*call("linalg_svd", (A,), {"full_matrices": bool(full_matrices)}))


def svdvals(A):
    """The singular values of ``A``, in descending order."""
    return svd(A, full_matrices=False).S


def qr(A, mode="reduced"):
    """``Q, R`` with ``A = Q @ R``; ``mode`` is "reduced", "complete" or "r" (Q empty)."""
    _matrix(A, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    return _Qr(*call("linalg_qr", (A,), {"mode": mode}))


def cholesky(A, *, upper=False):
    """The lower (or ``upper``) Cholesky factor of a symmetric positive-definite matrix."""
    _square(A, "cholesky")
    return call("linalg_cholesky", (A,), {"upper": bool(upper)})


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix, reading the ``UPLO``
    triangle."""
    _square(A, "eigh")
    _uplo(UPLO)
    return _Eigh(*call("linalg_eigh", (A,), {"UPLO": UPLO}))


def eigvalsh(A, UPLO="L"):
    """Eigenvalues (ascending) of a symmetric matrix."""
    _square(A, "eigvalsh")
    _uplo(UPLO)
    return call("linalg_eigvalsh", (A,), {"UPLO": UPLO})


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


__all__ = ["vector_norm", "matrix_norm", "norm", "inv", "solve", "pinv", "det", "slogdet",
           "svd", "svdvals", "qr", "cholesky", "eigh", "eigvalsh", "matmul"]
