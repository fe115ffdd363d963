"""The factorizations, solvers, norms and matrix functions of :data:`torcia.ops.LINALG`
(the ``linalg_*`` ops), each declared once: schema, reference kernel, meta shape,
decomposition and autocast policy. The primitives are LAPACK's routines: ``linalg_solve``,
``linalg_svd``, ``linalg_qr``, ``linalg_cholesky``, ``linalg_eigh``, ``linalg_eig``, LU with
partial pivoting (``linalg_lu_factor`` -> (LU, pivots, info)), least squares
(``linalg_lstsq`` -> (solution, residuals, rank, singular_values)), LDL on SciPy's LAPACK
(the ``torcia-core[scipy]`` extra: ``linalg_ldl_factor`` -> (LD, pivots, info) and its
solve) and the packed Householder QR (``linalg_geqrf`` -> (a, tau)). The inverse, the
determinants, the pseudo-inverse, the matrix exponential, the norms, the eigenvalues alone,
the permutation of LU's pivots and the triangular solves (substitution, a row at a time)
decompose into them. The products are in :mod:`torcia._ops.linalg`; the public functions
in :mod:`torcia.linalg` and :mod:`torcia._oplib`, the derivatives torcia-autograd's.

The kernels the array module lacks loop over one matrix dimension and are vectorised over
the batch and the other dimension, in ``xp`` (NumPy or CuPy). NumPy's LAPACK has no half
precision: float16 and bfloat16 run in float32 and are rounded once, as PyTorch's CPU
kernels that take them.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import np_floating
from torcia._opdef import define
from torcia._ops._common import (
    HALF,
    first_shape,
    floating_dtype,
    low_precision,
    on_host,
    op,
    real_dtype,
    reduced,
)
from torcia._ops._common import where as _where
from torcia._ops.elementwise import isfinite
from torcia._ops.reduce import norm, sqrt_of_sum

# ----- what the kernels share: half precision, the error, the routines on xp -------------


def half_in_float32(kernel):
    """``kernel`` with float16 and bfloat16 arrays run in float32 and its floating results
    rounded back to their dtype: NumPy's LAPACK has no half precision (float16 refused,
    bfloat16 answered in float64), as PyTorch's CPU kernels that take them."""
    @functools.wraps(kernel)
    def run(self, *args, **params):
        half = next((a.dtype for a in args if hasattr(a, "dtype") and low_precision(a)), None)
        if half is None:
            return kernel(self, *args, **params)
        out = kernel(self, *(a.astype(np.float32) if getattr(a, "dtype", None) == half else a
                             for a in args), **params)

        def back(o):
            return o.astype(half) if np_floating(o.dtype) else o

        return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)

    return run


class LinAlgError(RuntimeError):
    """A linear-algebra routine failed on its input (singular or not positive-definite), as
    ``torch.linalg.LinAlgError``; a subclass of :class:`RuntimeError`.

    Examples
    --------
    >>> import torcia
    >>> try:
    ...     torcia.linalg.inv(torcia.zeros(2, 2))
    ... except torcia.linalg.LinAlgError as error:
    ...     print(type(error).__name__)
    LinAlgError
    """

    __module__ = "torcia.linalg"


# Pade approximant of degree 13 (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005): its coefficients and the 1-norm bound it is exact to
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def lu_factor(xp, a):
    """Batched LU with partial pivoting (LAPACK's getrf): the packed factors, the 1-based
    sequential row swaps (int32) and info (0, or the 1-based index of the first zero pivot).
    """
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    lu = xp.array(a.reshape((-1, m, n)), copy=True)
    count = lu.shape[0]
    rows = xp.arange(count)
    piv = xp.empty((count, k), dtype=np.int32)
    info = xp.zeros(count, dtype=np.int32)
    for j in range(k):
        col = lu[:, j:, j]
        # LAPACK's pivot: the largest |re| + |im| (izamax), |x| for real numbers
        size = xp.abs(col.real) + xp.abs(col.imag) if col.dtype.kind == "c" else xp.abs(col)
        p = j + xp.argmax(size, axis=1)
        piv[:, j] = p + 1
        top, low = lu[rows, j, :].copy(), lu[rows, p, :].copy()
        lu[rows, p, :] = top
        lu[rows, j, :] = low
        d = lu[:, j, j]
        info = xp.where((info == 0) & (d == 0), j + 1, info).astype(np.int32)
        # a zero pivot means a zero column below it: dividing by 1 leaves it as LAPACK does
        lu[:, j + 1:, j] /= xp.where(d == 0, 1, d)[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def pivots_to_permutation(xp, pivots, m, dtype):
    """The permutation matrices ``P`` (with ``A = P L U``) of LAPACK row swaps."""
    batch = pivots.shape[:-1]
    piv = pivots.reshape((-1, pivots.shape[-1])).astype(np.int64) - 1
    count = piv.shape[0]
    rows = xp.arange(count)
    perm = xp.broadcast_to(xp.arange(m), (count, m)).copy()
    for j in range(piv.shape[1]):
        p = piv[:, j]
        a, b = perm[rows, j].copy(), perm[rows, p].copy()
        perm[rows, j] = b
        perm[rows, p] = a
    out = xp.zeros((count, m, m), dtype=dtype)
    # row i of P^T A is row perm[i] of A, so P[perm[i], i] = 1
    out[rows[:, None], perm, xp.arange(m)[None, :]] = 1
    return out.reshape(batch + (m, m))


def solve_triangular(xp, a, b, upper, unitriangular=False):
    """``X`` with ``A X = B`` for triangular ``A``, by substitution (batch dims broadcast)."""
    batch = xp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    dtype = xp.result_type(a, b)
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    n = a.shape[-1]
    x = xp.zeros(batch + b.shape[-2:], dtype=dtype)
    order = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in order:
            done = slice(i + 1, n) if upper else slice(0, i)
            row = b[..., i, :] - (a[..., i:i + 1, done] @ x[..., done, :])[..., 0, :]
            x[..., i, :] = row if unitriangular else row / a[..., i, i][..., None]
    return x


def geqrf(xp, a):
    """Batched Householder QR as LAPACK's geqrf: ``R`` on and above the diagonal, the
    reflectors' vectors (unit first entry implied) below it, and their scalars ``tau``;
    ``H_j = I - tau_j v_j v_j^H`` with ``H_j^H`` applied to the trailing columns."""
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    qr = xp.array(a.reshape((-1, m, n)), copy=True)
    tau = xp.zeros((qr.shape[0], k), dtype=a.dtype)
    for j in range(k):
        alpha = qr[:, j, j].copy()
        x = qr[:, j + 1:, j]
        xnorm = xp.sqrt((xp.abs(x) ** 2).sum(axis=1))
        skip = (xnorm == 0) & (alpha.imag == 0 if a.dtype.kind == "c" else True)
        size = xp.sqrt(xp.abs(alpha) ** 2 + xnorm ** 2)
        beta = -xp.where(alpha.real >= 0, 1.0, -1.0) * size
        beta = xp.where(skip, alpha.real, beta)
        safe = xp.where(skip, 1, beta)
        t = xp.where(skip, 0, (beta - alpha) / safe).astype(a.dtype)
        scale = xp.where(skip, 0, 1 / xp.where(skip, 1, alpha - beta)).astype(a.dtype)
        qr[:, j + 1:, j] = x * scale[:, None]
        qr[:, j, j] = xp.where(skip, alpha, beta)
        tau[:, j] = t
        if j + 1 < n:
            v = qr[:, j:, j].copy()
            v[:, 0] = 1
            rest = qr[:, j:, j + 1:]
            # H^H = I - conj(tau) v v^H on the trailing columns
            w = (v.conj()[:, :, None] * rest).sum(axis=1)
            qr[:, j:, j + 1:] = rest - (t.conj()[:, None, None] * v[:, :, None]) * w[:, None, :]
    return qr.reshape(a.shape), tau.reshape(batch + (k,))


# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

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
        if low_precision(a):
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
            return _dims_kept(xp, out.astype(a.real.dtype, copy=False), (d0, d1), keepdim)
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

    def linalg_lu_factor(self, a):
        return lu_factor(self.xp, a)

    def linalg_lu_permutation(self, pivots, m=0, dtype=None):
        return pivots_to_permutation(self.xp, pivots, m, dtype)

    def linalg_solve_triangular(self, a, b, upper=False, left=True, unitriangular=False):
        xp = self.xp
        if left:
            return solve_triangular(xp, a, b, upper, unitriangular)
        # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        xt = solve_triangular(xp, xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2), not upper,
                              unitriangular)
        return xp.swapaxes(xt, -1, -2)

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

    @half_in_float32
    def linalg_geqrf(self, a):
        return geqrf(self.xp, a)

    def linalg_eig(self, a):
        xp = self.xp
        cplx = np.result_type(a.dtype, np.complex64)
        if not hasattr(xp.linalg, "eig"):  # CuPy before v14: on the host
            w, v = np.linalg.eig(on_host(xp, a))
            return xp.asarray(w.astype(cplx)), xp.asarray(v.astype(cplx))
        w, v = xp.linalg.eig(a)
        return w.astype(cplx, copy=False), v.astype(cplx, copy=False)

    def linalg_eigvals(self, a):
        return self.linalg_eig(a)[0]

    def linalg_lstsq(self, a, b, rcond=None, driver="gelsy"):
        xp = self.xp
        m, n = a.shape[-2:]
        batch = xp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = xp.broadcast_to(a, batch + (m, n)).reshape((-1, m, n))
        k = b.shape[-1]
        b = xp.broadcast_to(b, batch + (m, k)).reshape((-1, m, k))
        if rcond is None:
            rcond = float(np.finfo(a.dtype).eps) * max(m, n)
        sols, ranks, svals = [], [], []
        for i in range(a.shape[0]):
            x, _, rank, sv = xp.linalg.lstsq(a[i], b[i], rcond=rcond)
            sols.append(x)
            ranks.append(int(rank))
            svals.append(sv)
        solution = xp.stack(sols).reshape(batch + (n, k)) if sols else xp.zeros(
            batch + (n, k), dtype=a.dtype)
        rank = xp.asarray(ranks, dtype=np.int64).reshape(batch)
        empty = xp.zeros((0,), dtype=a.real.dtype)
        singular = xp.stack(svals).reshape(batch + (min(m, n),)) if (
            driver in ("gelsd", "gelss") and svals) else empty
        residuals = empty
        if driver != "gelsy" and m > n and all(r == n for r in ranks):
            res = b - a @ solution.reshape((-1, n, k))
            residuals = (res * res.conj()).real.sum(axis=-2).reshape(batch + (k,))
        return solution.astype(a.dtype, copy=False), residuals, rank, singular

    @half_in_float32
    def linalg_ldl_factor(self, a, hermitian=False):
        xp = self.xp
        lapack = _lapack(xp)
        n = a.shape[-1]
        flat = on_host(xp, a).reshape((-1, n, n))
        factor = lapack.get_lapack_funcs("hetrf" if hermitian and flat.dtype.kind == "c"
                                         else "sytrf", (flat,))
        lds, pivs, infos = [], [], []
        for mat in flat:
            ld, piv, info = factor(mat, lower=1)
            lds.append(np.tril(ld))
            pivs.append(piv)
            infos.append(info)
        shape = a.shape[:-2]
        ld = np.stack(lds).reshape(a.shape) if lds else np.zeros(a.shape, flat.dtype)
        piv = np.stack(pivs).astype(np.int32).reshape(shape + (n,)) if pivs else np.zeros(
            shape + (n,), np.int32)
        info = np.asarray(infos, dtype=np.int32).reshape(shape)
        return xp.asarray(ld), xp.asarray(piv), xp.asarray(info)

    @half_in_float32
    def linalg_ldl_solve(self, ld, pivots, b, hermitian=False):
        xp = self.xp
        lapack = _lapack(xp)
        n = ld.shape[-1]
        batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
        lds = np.broadcast_to(on_host(xp, ld), batch + (n, n)).reshape((-1, n, n))
        pivs = np.broadcast_to(on_host(xp, pivots), batch + (n,)).reshape((-1, n))
        _check_ldl_pivots(pivs)
        bs = np.broadcast_to(on_host(xp, b), batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
        solve = lapack.get_lapack_funcs("hetrs" if hermitian and lds.dtype.kind == "c"
                                        else "sytrs", (lds,))
        out = [solve(l_, p_, b_, lower=1)[0] for l_, p_, b_ in zip(lds, pivs, bs)]
        x = np.stack(out) if out else np.zeros(bs.shape, bs.dtype)
        return xp.asarray(x.reshape(batch + b.shape[-2:]))


def _dims_kept(xp, out, dims, keepdim):
    """``out`` with the reduced ``dims`` back as size 1 where ``keepdim``."""
    if not keepdim:
        return out
    for d in sorted(d % (out.ndim + 2) for d in dims):
        out = xp.expand_dims(out, d)
    return out


def _linalg(xp, name, *arrays):
    """A ``xp.linalg`` call whose failure raises :class:`LinAlgError` in PyTorch's words."""
    if low_precision(arrays[0]):
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


def _check_ldl_pivots(pivs):
    """Refuse pivots that are not a factorisation's: LAPACK's sytrs reads them as 1-based
    row numbers, unchecked, so one out of range reads and writes outside the matrices."""
    n = pivs.shape[-1]
    if (pivs == 0).any():
        raise RuntimeError("Pivots given to ldl_solve must all satisfy |pivot| >= 1. Did you "
                           "properly pass the result of ldl_factor?")
    bad = (pivs > n) | (pivs < -n)
    # a 2x2 block (lower storage) is two equal negative pivots, the first not the last row
    neg = pivs < 0
    first = neg & ~np.concatenate([np.zeros_like(neg[:, :1]), neg[:, :-1]], axis=1)
    for row, col in zip(*np.nonzero(first)):
        run = 1
        while col + run < n and pivs[row, col + run] == pivs[row, col]:
            run += 1
        bad[row, col] |= run % 2 == 1
    if bad.any():
        raise RuntimeError(
            "torcia.linalg.ldl_solve: pivots are not those of a factorisation: each must be "
            f"a row number in 1..{n} or, for a 2x2 block, two equal negative ones "
            "(as torcia.linalg.ldl_factor returns them)")


def _lapack(xp):
    try:
        import scipy.linalg as sl
    except ImportError:
        raise ModuleNotFoundError(
            "torcia.linalg.ldl_factor and ldl_solve need SciPy's LAPACK, which is not "
            "installed: pip install 'torcia-core[scipy]'"
        ) from None
    return sl


# ----- meta shapes -----------------------------------------------------------------------


def _batch(*xs) -> tuple:
    """The broadcast batch dims (all but the last two) of several matrices."""
    return tuple(np.broadcast_shapes(*(x.shape[:-2] for x in xs)))


def _complex(dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def _det_shape(a, **params):
    return a.shape[:-2], a.dtype


def _slogdet_shape(a, **params):
    batch = a.shape[:-2]
    return (batch, a.dtype), (batch, real_dtype(a.dtype))


def _eigh_shape(a, **params):
    return (a.shape[:-1], real_dtype(a.dtype)), (a.shape, a.dtype)


def _eigvalsh_shape(a, **params):
    return a.shape[:-1], real_dtype(a.dtype)


def _eig_shape(a, **params):
    return (a.shape[:-1], _complex(a.dtype)), (a.shape, _complex(a.dtype))


def _eigvals_shape(a, **params):
    return a.shape[:-1], _complex(a.dtype)


def _norm_shape(x, ord=None, dim=None, keepdim=False, **params):
    """The norms: ``dim`` reduced, in the real float dtype."""
    return reduced(x.shape, dim, keepdim), real_dtype(floating_dtype(x.dtype))


def _matrix_norm_shape(x, ord="fro", dim=(-2, -1), keepdim=False, **params):
    return _norm_shape(x, ord, dim, keepdim)


def _geqrf_shape(a, **params):
    return (a.shape, a.dtype), (a.shape[:-2] + (min(a.shape[-2:]),), a.dtype)


def _lu_factor_shape(a, **params):
    """``(LU, pivots, info)`` as LAPACK's getrf: int32 pivots and info."""
    return ((a.shape, a.dtype), (a.shape[:-2] + (min(a.shape[-2:]),), np.dtype(np.int32)),
            (a.shape[:-2], np.dtype(np.int32)))


def _lu_permutation_shape(pivots, m=0, dtype=None, **params):
    return pivots.shape[:-1] + (m, m), np.dtype(dtype)


def _ldl_factor_shape(a, hermitian=False, **params):
    return ((a.shape, a.dtype), (a.shape[:-1], np.dtype(np.int32)),
            (a.shape[:-2], np.dtype(np.int32)))


def _ldl_solve_shape(ld, pivots, b, hermitian=False, **params):
    return _batch(ld, b) + b.shape[-2:], np.result_type(ld.dtype, b.dtype)


def _solve_shape(a, b, left=True, **params):
    """NumPy's rule (the kernel's): ``b`` is a vector only when it is 1-D."""
    if b.ndim == 1:
        return a.shape[:-2] + b.shape, np.result_type(a.dtype, b.dtype)
    return _batch(a, b) + b.shape[-2:], np.result_type(a.dtype, b.dtype)


def _solve_triangular_shape(a, b, upper=False, left=True, unitriangular=False, **params):
    return _batch(a, b) + b.shape[-2:], np.result_type(a.dtype, b.dtype)


def _pinv_shape(a, rtol=None, hermitian=False, **params):
    return a.shape[:-2] + a.shape[:-3:-1], a.dtype


def _qr_shape(a, mode="reduced", **params):
    m, n = a.shape[-2:]
    k, batch = min(m, n), a.shape[:-2]
    if mode == "r":
        return ((0,), a.dtype), (batch + (k, n), a.dtype)
    q = m if mode == "complete" else k
    return (batch + (m, q), a.dtype), (batch + (q, n), a.dtype)


def _svd_shape(a, full_matrices=True, **params):
    m, n = a.shape[-2:]
    k, batch = min(m, n), a.shape[:-2]
    return ((batch + (m, m if full_matrices else k), a.dtype),
            (batch + (k,), real_dtype(a.dtype)), (batch + (n if full_matrices else k, n), a.dtype))


def _lstsq_shape(a, b, rcond=None, driver="gelsy", **params):
    """``(solution, residuals, rank, singular_values)``. The residuals exist only when every
    matrix has full rank, which a meta tensor cannot tell: with ``m > n`` and a driver
    other than gelsy the shape depends on the values."""
    m, n = a.shape[-2:]
    if driver != "gelsy" and m > n:
        raise NotImplementedError(
            f"linalg_lstsq: with driver {driver!r} and more rows than columns the "
            "residuals' shape depends on the rank of the matrices, which a meta tensor "
            "does not have; use driver='gelsy'")
    batch = _batch(a, b)
    real = real_dtype(a.dtype)
    singular = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return ((batch + (n, b.shape[-1]), a.dtype), ((0,), real), (batch, np.dtype(np.int64)),
            (singular, real))


# ----- decompositions (tensors) ----------------------------------------------------------


def linalg_vector_norm(x, ord=2.0, dim=None, keepdim=False):
    return norm(x, ord, dim, keepdim)


def linalg_matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False):
    d0, d1 = (d % a.ndim for d in dim)
    if ord == "fro":
        squares = (a * a.conj()).real if a.is_complex() else a * a
        return sqrt_of_sum(squares.sum((d0, d1), keepdim=keepdim))
    if ord in ("nuc", 2, -2):
        moved = a.movedim((d0, d1), (-2, -1))
        s = op("linalg_svd", moved, full_matrices=False)[1]
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


def linalg_norm(a, ord=None, dim=None, keepdim=False):
    if dim is not None and not isinstance(dim, int) and len(dim) == 2:
        return linalg_matrix_norm(a, "fro" if ord is None else ord, dim, keepdim)
    return norm(a, 2.0 if ord is None else ord, dim, keepdim)


def linalg_eigvalsh(a, UPLO="L"):  # noqa: N803 - PyTorch's name
    return op("linalg_eigh", a, UPLO=UPLO)[0]


def linalg_eigvals(a):
    return op("linalg_eig", a)[0]


def linalg_solve_triangular(a, b, upper=False, left=True, unitriangular=False):
    # the reference kernel's substitution, one row of X at a time
    if not left:
        # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        return linalg_solve_triangular(a.transpose(-2, -1), b.transpose(-2, -1), not upper,
                                       True, unitriangular).transpose(-2, -1)
    batch = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    a = a.expand(batch + tuple(a.shape[-2:]))
    b = b.expand(batch + tuple(b.shape[-2:]))
    n = a.shape[-1]
    if not n:
        return b.clone()
    rows = [None] * n
    for i in range(n - 1, -1, -1) if upper else range(n):
        done = range(i + 1, n) if upper else range(i)
        row = b[..., i, :]
        if done:
            solved = op("stack", *(rows[j] for j in done), dim=-2)
            row = row - a[..., i:i + 1, done.start:done.stop].matmul(solved).squeeze(-2)
        rows[i] = row if unitriangular else row / a[..., i, i].unsqueeze(-1)
    return op("stack", *rows, dim=-2)


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
    r = op("linalg_solve", v - u, v + u, left=True)
    steps = _opdef.PUBLIC.tensor(s, device=a.device).reshape(-1, 1, 1)
    for k in range(max(s, default=0)):
        r = _where(steps > k, r.matmul(r), r)
    return r.reshape(a.shape)


def linalg_pinv(a, rtol=None, hermitian=False):
    # V S^+ U^H, the singular values at or below rtol times the largest dropped
    if a.dtype in HALF:
        return linalg_pinv(a.float(), rtol, hermitian).to(a.dtype)
    u, s, vh = op("linalg_svd", a, full_matrices=False)
    if rtol is None:
        rtol = max(a.shape[-2:]) * _opdef.PUBLIC.finfo(s.dtype).eps
    large = s > rtol * s.amax(-1, keepdim=True)
    inv = _where(large, _where(large, s, s.new_ones(())).reciprocal(), s.new_zeros(()))
    if a.is_complex():
        inv = inv.to(a.dtype)
    return vh.transpose(-2, -1).conj().matmul(inv.unsqueeze(-1) * u.transpose(-2, -1).conj())


# determinants and the inverse from the LU factors


def _lu_diagonal(a):
    """(the diagonal of U in A = P L U, the permutation's sign: +-1 in a's dtype)."""
    lu, pivots, _ = op("linalg_lu_factor", a)
    diagonal = op("diagonal", lu, offset=0, dim1=-2, dim2=-1)
    steps = _opdef.PUBLIC.arange(1, pivots.shape[-1] + 1, device=a.device).to(pivots.dtype)
    swaps = (pivots != steps).to(D.int64).sum(-1)
    sign = 1 - 2 * swaps.remainder(2).to(a.dtype)
    return diagonal, sign


def linalg_det(a):
    if a.dtype in HALF:  # in float32, rounded once, as the reference kernel
        return linalg_det(a.float()).to(a.dtype)
    diagonal, sign = _lu_diagonal(a)
    return diagonal.prod(-1) * sign


def linalg_slogdet(a):
    if a.dtype in HALF:
        sign, logabs = linalg_slogdet(a.float())
        return sign.to(a.dtype), logabs.to(a.dtype)
    diagonal, sign = _lu_diagonal(a)
    size = diagonal.abs()
    # a zero pivot: sign 0 and log|det| -inf, as LAPACK-based slogdet
    zero = (size == 0).any(-1)
    if a.is_complex():
        unit = diagonal / _where(size == 0, size.new_ones(()), size).to(diagonal.dtype)
    else:
        # each pivot's sign (+1 for NaN, as LAPACK-based slogdet), plus a zero made of the
        # pivots: the sign is differentiable, its gradient 0 (the kernel's derivative)
        unit = _where(diagonal < 0, diagonal.new_full((), -1), diagonal.new_ones(()))
        sign = sign + _where(isfinite(diagonal), diagonal * 0, diagonal.new_zeros(())).sum(-1)
    sign = _where(zero, sign.new_zeros(()), unit.prod(-1) * sign)
    return sign, size.log().sum(-1)


def linalg_inv(a):
    eye = _opdef.PUBLIC.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(tuple(a.shape))
    try:
        return op("linalg_solve", a, eye, left=True)
    except LinAlgError:
        # the inverse's own words: the first zero pivot of the first singular matrix
        info = op("linalg_lu_factor", a)[2].reshape(-1).tolist()
        b = next((i for i, k in enumerate(info) if k), 0)
        where = f"(Batch element {b}): " if a.ndim > 2 else ""
        raise LinAlgError(f"linalg.inv: {where}The diagonal element {info[b]} is zero, the "
                          "inversion could not be completed because the input matrix is "
                          "singular.") from None


def linalg_lu_permutation(pivots, m=0, dtype=None):
    # LAPACK's sequential row swaps applied to 0..m-1; P[perm[i], i] = 1 (A = P L U)
    k = pivots.shape[-1]
    swaps = pivots.reshape(-1, k).to(D.int64) - 1
    count = swaps.shape[0]
    perm = _opdef.PUBLIC.arange(m, device=pivots.device).expand(count, m).clone()
    for j in range(k):
        to = swaps[:, j:j + 1]
        here, there = perm[:, j:j + 1], perm.gather(1, to)
        perm = perm.scatter(1, pivots.new_full((count, 1), j, dtype=D.int64), there)
        perm = perm.scatter(1, to, here)
    rows = _opdef.PUBLIC.arange(m, device=pivots.device).reshape(m, 1)
    out = op("cast", perm.unsqueeze(-2) == rows, dtype=np.dtype(dtype))
    return out.reshape(tuple(pivots.shape[:-1]) + (m, m))




# ----- the declarations ------------------------------------------------------------------


def _linalg_op(schema, kernel, shape, **fields):
    return define(schema, kernel, shape=shape, group="linalg", **fields)


#: PyTorch runs these in float32 under autocast; the norms on CUDA only
_FLOAT32 = {"cpu": "float32", "cuda": "float32"}
_CUDA_FLOAT32 = {"cuda": "float32"}
_NORM = "int[]? dim=None, bool keepdim=False"

#: in the order of :data:`torcia.ops.LINALG`, after the products
DECLARED = (
    _linalg_op("linalg_inv(Tensor a) -> Tensor", Kernels.linalg_inv, first_shape,
            decomposition=linalg_inv, autocast=_FLOAT32),
    _linalg_op("linalg_solve(Tensor a, Tensor b, *, bool left=True) -> Tensor",
            Kernels.linalg_solve, _solve_shape, autocast=_FLOAT32),
    _linalg_op("linalg_det(Tensor a) -> Tensor", Kernels.linalg_det, _det_shape,
            decomposition=linalg_det, autocast=_FLOAT32),
    _linalg_op("linalg_slogdet(Tensor a) -> (Tensor, Tensor)", Kernels.linalg_slogdet,
            _slogdet_shape, decomposition=linalg_slogdet, autocast=_FLOAT32),
    _linalg_op("linalg_svd(Tensor a, *, bool full_matrices=True) -> (Tensor, Tensor, Tensor)",
            Kernels.linalg_svd, _svd_shape, autocast=_FLOAT32),
    _linalg_op("linalg_qr(Tensor a, *, str mode='reduced') -> (Tensor, Tensor)",
            Kernels.linalg_qr, _qr_shape, autocast=_FLOAT32),
    _linalg_op("linalg_cholesky(Tensor a, *, bool upper=False) -> Tensor",
            Kernels.linalg_cholesky, first_shape, autocast=_FLOAT32),
    _linalg_op("linalg_eigh(Tensor a, *, str UPLO='L') -> (Tensor, Tensor)", Kernels.linalg_eigh,
            _eigh_shape, autocast=_FLOAT32),
    _linalg_op(f"linalg_norm(Tensor a, *, Scalar? ord=None, {_NORM}) -> Tensor",
            Kernels.linalg_norm, _norm_shape, decomposition=linalg_norm,
            autocast=_CUDA_FLOAT32, floating_inputs=True),
    _linalg_op(f"linalg_vector_norm(Tensor x, *, Scalar ord=2.0, {_NORM}) -> Tensor",
            Kernels.linalg_vector_norm, _norm_shape, decomposition=linalg_vector_norm,
            autocast=_CUDA_FLOAT32, floating_inputs=True),
    _linalg_op("linalg_matrix_norm(Tensor a, *, Scalar ord='fro', int[] dim=(-2, -1), "
            "bool keepdim=False) -> Tensor", Kernels.linalg_matrix_norm, _matrix_norm_shape,
            decomposition=linalg_matrix_norm, autocast=_CUDA_FLOAT32, floating_inputs=True),
    _linalg_op("linalg_pinv(Tensor a, *, float? rtol=None, bool hermitian=False) -> Tensor",
            Kernels.linalg_pinv, _pinv_shape, decomposition=linalg_pinv, autocast=_FLOAT32),
    _linalg_op("linalg_eigvalsh(Tensor a, *, str UPLO='L') -> Tensor", Kernels.linalg_eigvalsh,
            _eigvalsh_shape, decomposition=linalg_eigvalsh, autocast=_FLOAT32),
    _linalg_op("linalg_lu_factor(Tensor a) -> (Tensor, Tensor, Tensor)",
            Kernels.linalg_lu_factor, _lu_factor_shape),
    # a permutation matrix of 0s and 1s: no gradient
    _linalg_op("linalg_lu_permutation(Tensor pivots, *, int m=0, ScalarType? dtype=None) -> "
            "Tensor", Kernels.linalg_lu_permutation, _lu_permutation_shape,
            decomposition=linalg_lu_permutation, differentiable=False),
    _linalg_op("linalg_solve_triangular(Tensor a, Tensor b, *, bool upper=False, bool left=True, "
            "bool unitriangular=False) -> Tensor", Kernels.linalg_solve_triangular,
            _solve_triangular_shape, decomposition=linalg_solve_triangular),
    _linalg_op("linalg_matrix_exp(Tensor a) -> Tensor", Kernels.linalg_matrix_exp, first_shape,
            decomposition=linalg_matrix_exp),
    _linalg_op("linalg_lstsq(Tensor a, Tensor b, *, float? rcond=None, str driver='gelsy') -> "
            "(Tensor, Tensor, Tensor, Tensor)", Kernels.linalg_lstsq, _lstsq_shape),
    _linalg_op("linalg_ldl_factor(Tensor a, *, bool hermitian=False) -> (Tensor, Tensor, Tensor)",
            Kernels.linalg_ldl_factor, _ldl_factor_shape),
    _linalg_op("linalg_ldl_solve(Tensor ld, Tensor pivots, Tensor b, *, bool hermitian=False) -> "
            "Tensor", Kernels.linalg_ldl_solve, _ldl_solve_shape),
    _linalg_op("linalg_eig(Tensor a) -> (Tensor, Tensor)", Kernels.linalg_eig, _eig_shape),
    _linalg_op("linalg_eigvals(Tensor a) -> Tensor", Kernels.linalg_eigvals, _eigvals_shape,
            decomposition=linalg_eigvals),
    _linalg_op("linalg_geqrf(Tensor a) -> (Tensor, Tensor)", Kernels.linalg_geqrf, _geqrf_shape),
)
