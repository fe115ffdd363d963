"""Reference kernels for gathering extras and linear algebra.

A mixin of :class:`torcia._numpy_backend.Reference`: the same conventions hold (arrays of
``self.xp`` positionally, parameters as keywords, multi-output ops return a tuple). The
public functions have already wrapped dims and checked shapes and dtypes.
"""

from __future__ import annotations

import numpy as np

from torcia._dtype import np_floating as _floating
from torcia._kernels_linalg import LinAlgError, half_in_float32, lu_factor


class ExtraKernels:
    """Kernels that are more than one array-module call."""

    xp = np

    # ----- linear algebra ----------------------------------------------------------------
    def linalg_inv(self, a):
        return _linalg(self.xp, "inv", a)

    def linalg_solve(self, a, b, left=True):
        xp = self.xp
        if not left:
            # X A = B  <=>  A^T X^T = B^T
            return xp.swapaxes(_linalg(xp, "solve", xp.swapaxes(a, -1, -2),
                                       xp.swapaxes(b, -1, -2)), -1, -2)
        return _linalg(xp, "solve", a, b)

    def linalg_det(self, a):
        if a.dtype.itemsize == 2 and _floating(a.dtype):
            # PyTorch's CPU det takes float16 and bfloat16, NumPy's linalg does not: in
            # float32, rounded once
            return self.xp.linalg.det(a.astype(np.float32)).astype(a.dtype)
        return self.xp.linalg.det(a)

    @half_in_float32
    def linalg_slogdet(self, a):
        sign, logabs = self.xp.linalg.slogdet(a)
        return sign.astype(a.dtype, copy=False), logabs

    @half_in_float32
    def linalg_svd(self, a, full_matrices=True):
        u, s, vh = self.xp.linalg.svd(a, full_matrices=full_matrices)
        return u, s, vh

    @half_in_float32
    def linalg_qr(self, a, mode="reduced"):
        if mode == "r":
            # NumPy returns R alone in this mode: unpacking it would split R's rows
            return self.xp.zeros((0,), dtype=a.dtype), self.xp.linalg.qr(a, mode="r")
        q, r = self.xp.linalg.qr(a, mode=mode)
        return q, r

    def linalg_cholesky(self, a, upper=False):
        xp = self.xp
        # PyTorch's upper factor reads the upper triangle: the lower factor of A^H, whose
        # lower triangle it is, conjugate-transposed
        read = xp.conj(xp.swapaxes(a, -1, -2)) if upper else a
        low = _linalg(xp, "cholesky", read)
        if xp.isnan(low).any():
            # NumPy's factorization lets a NaN through where LAPACK's potrf stops at it
            raise singular_error(xp, "cholesky", read)
        return xp.conj(xp.swapaxes(low, -1, -2)) if upper else low

    @half_in_float32
    def linalg_eigh(self, a, UPLO="L"):
        return tuple(self.xp.linalg.eigh(a, UPLO=UPLO))

    @half_in_float32
    def linalg_eigvalsh(self, a, UPLO="L"):
        return self.xp.linalg.eigvalsh(a, UPLO=UPLO)

    @half_in_float32
    def linalg_pinv(self, a, rtol=None, hermitian=False):
        xp = self.xp
        if rtol is None:
            rtol = max(a.shape[-2:]) * np.finfo(a.dtype).eps
        return xp.linalg.pinv(a, rcond=rtol, hermitian=hermitian)

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
            return _keep(xp, out.astype(a.real.dtype, copy=False), (d0, d1), keepdim)
        # 1 / -1: max/min over columns of the column sums; inf / -inf: over rows
        sum_dim, pick_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = xp.sum(xp.abs(a), axis=sum_dim, keepdims=True)
        pick = xp.amax if ord in (1, np.inf) else xp.amin
        out = pick(sums, axis=pick_dim, keepdims=True)
        return out if keepdim else xp.squeeze(out, axis=(d0, d1))

    def linalg_norm(self, a, ord=None, dim=None, keepdim=False):
        if ord is None and dim is None:
            return self.norm(a, p=2.0, dim=None, keepdim=keepdim)
        if dim is not None and len(dim) == 2:
            return self.linalg_matrix_norm(a, ord="fro" if ord is None else ord, dim=dim,
                                           keepdim=keepdim)
        return self.norm(a, p=2.0 if ord is None else ord, dim=dim, keepdim=keepdim)




def _keep(xp, out, dims, keepdim):
    if not keepdim:
        return out
    for d in sorted(d % (out.ndim + 2) for d in dims):
        out = xp.expand_dims(out, d)
    return out


def _linalg(xp, name, *arrays):
    """A ``xp.linalg`` call whose failure raises :class:`LinAlgError` in PyTorch's words."""
    if arrays[0].dtype.itemsize == 2 and _floating(arrays[0].dtype):
        # NumPy's LAPACK has no half precision (float16 refused, bfloat16 answered in
        # float64): in float32, rounded once, as linalg_det
        out = _linalg(xp, name, *(x.astype(np.float32) for x in arrays))
        return out.astype(arrays[0].dtype)
    try:
        return getattr(xp.linalg, name)(*arrays)
    except xp.linalg.LinAlgError:
        raise singular_error(xp, name, arrays[0]) from None


def singular_error(xp, name, a):
    """PyTorch's error for a singular (or, for cholesky, not positive-definite) input,
    naming the first failing batch element and pivot or leading minor."""
    n = a.shape[-1]
    flat = a.reshape((-1, n, n))
    if name == "cholesky":
        for b, mat in enumerate(flat):
            for k in range(1, n + 1):
                try:
                    failed = xp.isnan(xp.linalg.cholesky(mat[:k, :k])).any()
                except xp.linalg.LinAlgError:
                    failed = True
                if failed:
                    where = f"(Batch element {b}): " if a.ndim > 2 else ""
                    return LinAlgError(
                        f"linalg.cholesky: {where}The factorization could not be completed "
                        f"because the input is not positive-definite (the leading minor of "
                        f"order {k} is not positive-definite).")
    _, _, info = lu_factor(xp, flat)
    bad = xp.nonzero(info)[0]
    b = int(bad[0]) if bad.size else 0
    where = f"(Batch element {b}): " if a.ndim > 2 else ""
    if name == "solve":
        return LinAlgError(f"torcia.linalg.solve: {where}The solver failed because the input "
                           f"matrix is singular.")
    return LinAlgError(f"linalg.{name}: {where}The diagonal element {int(info[b])} is zero, "
                       f"the inversion could not be completed because the input matrix is "
                       f"singular.")
