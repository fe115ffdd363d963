"""Reference kernels of the factorizations and solvers of ``torcia.linalg`` that the array
module lacks: LU with partial pivoting, triangular solves, the matrix exponential, least
squares, and (on SciPy's LAPACK, the ``torcia-core[scipy]`` extra) the LDL factorization.

A mixin of :class:`torcia._numpy_backend.Reference`. Loops run over one matrix dimension
and are vectorised over the batch and the other dimension, in ``xp`` (NumPy or CuPy).
"""

from __future__ import annotations

import functools

import numpy as np

from torcia._dtype import np_floating


def half_in_float32(kernel):
    """``kernel`` with float16 and bfloat16 arrays run in float32 and its floating results
    rounded back to their dtype: NumPy's LAPACK has no half precision (float16 refused,
    bfloat16 answered in float64), as PyTorch's CPU kernels that take them."""
    @functools.wraps(kernel)
    def run(self, *args, **params):
        half = next((a.dtype for a in args if hasattr(a, "dtype") and a.dtype.itemsize == 2
                     and np_floating(a.dtype)), None)
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


class LinalgKernels:
    """Kernels of the ``linalg_*`` factorizations and solvers beyond ``xp.linalg``."""

    xp = np

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
        if a.dtype.itemsize == 2 and a.dtype.kind in "fV":
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
            w, v = np.linalg.eig(_host(xp, a))
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
        flat = _host(xp, a).reshape((-1, n, n))
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
        lds = np.broadcast_to(_host(xp, ld), batch + (n, n)).reshape((-1, n, n))
        pivs = np.broadcast_to(_host(xp, pivots), batch + (n,)).reshape((-1, n))
        _check_ldl_pivots(pivs)
        bs = np.broadcast_to(_host(xp, b), batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
        solve = lapack.get_lapack_funcs("hetrs" if hermitian and lds.dtype.kind == "c"
                                        else "sytrs", (lds,))
        out = [solve(l_, p_, b_, lower=1)[0] for l_, p_, b_ in zip(lds, pivs, bs)]
        x = np.stack(out) if out else np.zeros(bs.shape, bs.dtype)
        return xp.asarray(x.reshape(batch + b.shape[-2:]))


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


def _host(xp, a):
    """``a`` as a NumPy array (LAPACK's LDL routines run on the host)."""
    return a if isinstance(a, np.ndarray) else xp.asnumpy(a)
