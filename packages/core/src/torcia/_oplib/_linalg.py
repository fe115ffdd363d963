"""The functions of :mod:`torcia.linalg` that op families call too: the vector and matrix
norms, ``inv``, ``pinv``, ``det`` and ``slogdet``, with the argument checks every function
of ``torcia.linalg`` makes (in PyTorch's words).

They are defined here, in the op library, so that the families (``torch.det``,
``torch.dist``, ``torch.norm``, ``embedding``'s ``max_norm``...) call them without
importing :mod:`torcia.linalg`, which sits above the op library; ``torcia.linalg``
publishes them.
"""

from __future__ import annotations

import math

from torcia._oplib._common import _dims, _return_type, to_dtype
from torcia._tensor import Tensor, _torch_name, _wrap_dim, call

_Slogdet = _return_type("linalg_slogdet", ("sign", "logabsdet"))


def _float(A, name):
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.{name}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dtype.category < 2:
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


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse; singular values below ``rtol * max`` count as 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.pinv(torcia.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]]))
    tensor([[1.0000, 0.0000, 0.0000],
            [0.0000, 0.0000, 0.5000]])
    """
    _matrix(A, "pinv")
    if atol is not None:
        raise NotImplementedError("linalg.pinv: atol is not supported; use rtol")
    return call("linalg_pinv", (A,), {"rtol": rtol, "hermitian": bool(hermitian)})


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
    """``(sign, logabsdet)`` of the determinant, stable where ``det`` over- or underflows.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.slogdet(torcia.tensor([[-2.0, 0.0], [0.0, 3.0]]))
    torcia.return_types.linalg_slogdet(
    sign=tensor(-1.),
    logabsdet=tensor(1.7918))
    """
    _square(A, "slogdet")
    return _Slogdet(*call("linalg_slogdet", (A,), {}))
