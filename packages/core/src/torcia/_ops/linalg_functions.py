"""The norms and the matrix exponential of :data:`torcia.ops.LINALG`, each declared once
with its public function of :mod:`torcia.linalg`: schema, reference kernel, meta shape,
decomposition, autocast policy, and the function that checks its arguments in PyTorch's
words and dispatches the op.

All decompose: the vector norms into :mod:`torcia._ops.reduce`'s ``norm``, the matrix norms
into sums and extremes of the entries or the singular values of ``linalg_svd``, the
matrix exponential into Pade's approximant with scaling and squaring (products and
``linalg_solve``). What the linear-algebra families share is in
:mod:`torcia._ops._linalg`.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _opdef
from torcia._ops._common import (
    HALF,
    dim_tuple,
    first_shape,
    floating_dtype,
    low_precision,
    real_dtype,
    reduced,
    wrap_dim,
)
from torcia._ops._common import where as _where
from torcia._ops._linalg import check_float, check_matrix, check_square, linalg_op
from torcia._ops.linalg_factorizations import svd
from torcia._ops.linalg_solves import solve
from torcia._ops.reduce import p_norm, sqrt_of_sum

# ----- reference kernels -----------------------------------------------------------------

# Pade approximant of degree 13 (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005): its coefficients and the 1-norm bound it is exact to
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

    def linalg_norm(self, a, ord=None, dim=None, keepdim=False):
        if ord is None and dim is None:
            return self.norm(a, p=2.0, dim=None, keepdim=keepdim)
        if dim is not None and len(dim) == 2:
            return self.linalg_matrix_norm(a, ord="fro" if ord is None else ord, dim=dim,
                                           keepdim=keepdim)
        return self.norm(a, p=2.0 if ord is None else ord, dim=dim, keepdim=keepdim)

    def linalg_vector_norm(self, a, ord=2.0, dim=None, keepdim=False):
        return self.norm(a, p=ord, dim=dim, keepdim=keepdim)

    def linalg_matrix_norm(self, a, ord="fro", dim=(-2, -1), keepdim=False):
        xp = self.xp
        d0, d1 = dim
        if ord == "fro":
            squares = (a * a.conj()).real if a.dtype.kind == "c" else a * a
            return xp.sqrt(xp.sum(squares, axis=dim, keepdims=keepdim))
        if ord in ("nuc", 2, -2):
            s = xp.linalg.svd(xp.moveaxis(a, (d0, d1), (-2, -1)), compute_uv=False)
            out = {"nuc": s.sum(-1), 2: s.max(-1, initial=0), -2: s.min(-1, initial=np.inf)}[ord]
            return _dims_kept(xp, out.astype(a.real.dtype, copy=False), (d0, d1), keepdim)
        # 1 / -1: max/min over columns of the column sums; inf / -inf: over rows
        sum_dim, pick_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = xp.sum(xp.abs(a), axis=sum_dim, keepdims=True)
        pick = xp.amax if ord in (1, np.inf) else xp.amin
        out = pick(sums, axis=pick_dim, keepdims=True)
        return out if keepdim else xp.squeeze(out, axis=(d0, d1))

    def linalg_matrix_exp(self, a):
        xp = self.xp
        if low_precision(a):
            # float16 and bfloat16 (PyTorch's CPU kernel takes them) in float32
            return self.linalg_matrix_exp(a.astype(np.float32)).astype(a.dtype)
        n = a.shape[-1]
        flat = a.reshape((-1, n, n))
        norm1 = xp.abs(flat).sum(axis=-2).max(axis=-1) if n else xp.zeros(flat.shape[0])
        with np.errstate(divide="ignore"):
            s = xp.ceil(xp.log2(norm1 / _THETA13))
        s = xp.where(xp.isfinite(s) & (s > 0), s, 0).astype(np.int64)
        x = flat / (2.0 ** s).astype(a.dtype)[:, None, None]
        eye = xp.eye(n, dtype=a.dtype)
        b = _PADE13
        x2 = x @ x
        x4 = x2 @ x2
        x6 = x4 @ x2
        u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2)
                 + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
        v = (x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2)
             + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye)
        r = xp.linalg.solve(v - u, v + u)
        for k in range(int(s.max()) if s.size else 0):
            r = xp.where((k < s)[:, None, None], r @ r, r)
        return r.reshape(a.shape).astype(a.dtype, copy=False)


def _dims_kept(xp, out, dims, keepdim):
    """``out`` with the reduced ``dims`` back as size 1 where ``keepdim``."""
    if not keepdim:
        return out
    for d in sorted(d % (out.ndim + 2) for d in dims):
        out = xp.expand_dims(out, d)
    return out


# ----- meta shapes -----------------------------------------------------------------------


def _norm_shape(x, ord=None, dim=None, keepdim=False, **params):
    """The norms: ``dim`` reduced, in the real float dtype."""
    return reduced(x.shape, dim, keepdim), real_dtype(floating_dtype(x.dtype))


def _matrix_norm_shape(x, ord="fro", dim=(-2, -1), keepdim=False, **params):
    return _norm_shape(x, ord, dim, keepdim)


# ----- decompositions (tensors) ----------------------------------------------------------


def linalg_norm(a, ord=None, dim=None, keepdim=False):
    if dim is not None and not isinstance(dim, int) and len(dim) == 2:
        return linalg_matrix_norm(a, "fro" if ord is None else ord, dim, keepdim)
    return p_norm(a, 2.0 if ord is None else ord, dim, keepdim)


def linalg_vector_norm(x, ord=2.0, dim=None, keepdim=False):
    return p_norm(x, ord, dim, keepdim)


def linalg_matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False):
    d0, d1 = (d % a.ndim for d in dim)
    if ord == "fro":
        squares = (a * a.conj()).real if a.is_complex() else a * a
        return sqrt_of_sum(squares.sum((d0, d1), keepdim=keepdim))
    if ord in ("nuc", 2, -2):
        moved = a.movedim((d0, d1), (-2, -1))
        s = svd(moved, full_matrices=False).S
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        for d in sorted((d0, d1)) if keepdim else ():
            out = out.unsqueeze(d)
        return out
    # 1 / -1: max/min over columns of the column sums; inf / -inf: over rows
    sum_dim, pick_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = a.abs().sum(sum_dim, keepdim=True)
    out = sums.amax(pick_dim, keepdim=True) if ord in (1, math.inf) else sums.amin(
        pick_dim, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def linalg_matrix_exp(a):
    # the reference kernel's scaling and squaring of Pade's [13/13] approximant
    if a.dtype in HALF:
        return linalg_matrix_exp(a.float()).to(a.dtype)
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    if not n:
        return a.clone()
    norm1 = flat.abs().sum(-2).amax(-1).tolist()  # the squarings: a host decision
    s = [max(math.ceil(math.log2(v / _THETA13)), 0) if 0 < v < math.inf else 0
         for v in norm1]
    x = flat / _opdef.PUBLIC.tensor([2.0 ** k for k in s], device=a.device).to(
        a.dtype).reshape(-1, 1, 1)
    eye = _opdef.PUBLIC.eye(n, dtype=a.dtype, device=a.device)
    b = _PADE13
    x2 = x.matmul(x)
    x4 = x2.matmul(x2)
    x6 = x4.matmul(x2)
    u = x.matmul(x6.matmul(b[13] * x6 + b[11] * x4 + b[9] * x2)
                 + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = (x6.matmul(b[12] * x6 + b[10] * x4 + b[8] * x2)
         + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye)
    r = solve(v - u, v + u)
    steps = _opdef.PUBLIC.tensor(s, device=a.device).reshape(-1, 1, 1)
    for k in range(max(s, default=0)):
        r = _where(steps > k, r.matmul(r), r)
    return r.reshape(a.shape)


# ----- the public functions --------------------------------------------------------------


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
        x = _opdef.PUBLIC.to_dtype(x, dtype)
    check_float(x, "vector_norm")
    return _opdef.CALL("linalg_vector_norm", (x,), {"ord": float(ord),
                                                    "dim": dim_tuple(dim, x.ndim),
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
        A = _opdef.PUBLIC.to_dtype(A, dtype)
    check_matrix(A, "matrix_norm")
    if ord not in ("fro", "nuc") and ord not in (1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    d = tuple(wrap_dim(x, A.ndim) for x in dim)
    if len(d) != 2 or d[0] == d[1]:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple of different dims. "
                           f"Got {tuple(dim)}")
    return _opdef.CALL("linalg_matrix_norm", (A,), {"ord": ord, "dim": d, "keepdim": bool(keepdim)})


def matrix_exp(A):
    """The matrix exponential ``sum_k A^k / k!`` of each square matrix (Pade approximation
    of degree 13 with scaling and squaring, as PyTorch and SciPy).

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.matrix_exp(torcia.tensor([[0.0, 1.0], [0.0, 0.0]]))
    tensor([[1., 1.],
            [0., 1.]])
    """
    check_square(A, "matrix_exp")
    return _opdef.CALL("linalg_matrix_exp", (A,), {})


# ----- the declarations ------------------------------------------------------------------


#: PyTorch runs the norms in float32 under CUDA's autocast
_CUDA_FLOAT32 = {"cuda": "float32"}
_NORM = "int[]? dim=None, bool keepdim=False"

#: in the order of :data:`torcia.ops.LINALG`, after the factorizations
DECLARED = (
    linalg_op(f"linalg_norm(Tensor a, *, Scalar? ord=None, {_NORM}) -> Tensor",
              Kernels.linalg_norm, _norm_shape, decomposition=linalg_norm,
              autocast=_CUDA_FLOAT32, floating_inputs=True),
    linalg_op(f"linalg_vector_norm(Tensor x, *, Scalar ord=2.0, {_NORM}) -> Tensor",
              Kernels.linalg_vector_norm, _norm_shape, decomposition=linalg_vector_norm,
              autocast=_CUDA_FLOAT32, floating_inputs=True),
    linalg_op("linalg_matrix_norm(Tensor a, *, Scalar ord='fro', int[] dim=(-2, -1), "
              "bool keepdim=False) -> Tensor", Kernels.linalg_matrix_norm, _matrix_norm_shape,
              decomposition=linalg_matrix_norm, autocast=_CUDA_FLOAT32, floating_inputs=True),
    linalg_op("linalg_matrix_exp(Tensor a) -> Tensor", Kernels.linalg_matrix_exp, first_shape,
              decomposition=linalg_matrix_exp),
)
