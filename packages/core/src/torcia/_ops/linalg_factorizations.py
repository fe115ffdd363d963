"""The factorizations of :data:`torcia.ops.LINALG`, each declared once with its public
function of :mod:`torcia.linalg`: schema, reference kernel, meta shape, decomposition,
autocast policy, and the function that checks its arguments in PyTorch's words and
dispatches the op.

The primitives are LAPACK's routines: ``linalg_svd``, ``linalg_qr``, ``linalg_cholesky``,
``linalg_eigh``, ``linalg_eig``, LU with partial pivoting (``linalg_lu_factor`` -> (LU,
pivots, info)), LDL on SciPy's LAPACK (the ``torcia-core[scipy]`` extra:
``linalg_ldl_factor`` -> (LD, pivots, info) and its solve) and the packed Householder QR
(``linalg_geqrf`` -> (a, tau)). The eigenvalues alone and the permutation of LU's pivots
decompose into them. What the linear-algebra families share is in
:mod:`torcia._ops._linalg`; the derivatives are torcia-autograd's.
"""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._ops._common import first_shape, on_host, op, real_dtype, return_type
from torcia._ops._linalg import (
    FLOAT32,
    batch_dims,
    check_float,
    check_info,
    check_matrix,
    check_square,
    eye_like,
    half_in_float32,
    linalg_op,
    lu_packed,
    singular_error,
    xp_linalg,
)

# ----- reference kernels -----------------------------------------------------------------


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


def qr_packed(xp, a):
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


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

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
        low = xp_linalg(xp, "cholesky", read)
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

    def linalg_lu_factor(self, a):
        return lu_packed(self.xp, a)

    def linalg_lu_permutation(self, pivots, m=0, dtype=None):
        return pivots_to_permutation(self.xp, pivots, m, dtype)

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

    @half_in_float32
    def linalg_geqrf(self, a):
        return qr_packed(self.xp, a)


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


def _complex(dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def _svd_shape(a, full_matrices=True, **params):
    m, n = a.shape[-2:]
    k, batch = min(m, n), a.shape[:-2]
    return ((batch + (m, m if full_matrices else k), a.dtype),
            (batch + (k,), real_dtype(a.dtype)), (batch + (n if full_matrices else k, n), a.dtype))


def _qr_shape(a, mode="reduced", **params):
    m, n = a.shape[-2:]
    k, batch = min(m, n), a.shape[:-2]
    if mode == "r":
        return ((0,), a.dtype), (batch + (k, n), a.dtype)
    q = m if mode == "complete" else k
    return (batch + (m, q), a.dtype), (batch + (q, n), a.dtype)


def _eigh_shape(a, **params):
    return (a.shape[:-1], real_dtype(a.dtype)), (a.shape, a.dtype)


def _eigvalsh_shape(a, **params):
    return a.shape[:-1], real_dtype(a.dtype)


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
    return batch_dims(ld, b) + b.shape[-2:], np.result_type(ld.dtype, b.dtype)


def _eig_shape(a, **params):
    return (a.shape[:-1], _complex(a.dtype)), (a.shape, _complex(a.dtype))


def _eigvals_shape(a, **params):
    return a.shape[:-1], _complex(a.dtype)


def _geqrf_shape(a, **params):
    return (a.shape, a.dtype), (a.shape[:-2] + (min(a.shape[-2:]),), a.dtype)


# ----- decompositions (tensors) ----------------------------------------------------------


def linalg_eigvalsh(a, UPLO="L"):  # noqa: N803 - PyTorch's name
    return op("linalg_eigh", a, UPLO=UPLO)[0]


def linalg_eigvals(a):
    return op("linalg_eig", a)[0]


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


# ----- the public functions --------------------------------------------------------------

_Svd = return_type("linalg_svd", ("U", "S", "Vh"))
_Qr = return_type("linalg_qr", ("Q", "R"))
_Eigh = return_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
_Eig = return_type("linalg_eig", ("eigenvalues", "eigenvectors"))
_LuFactor = return_type("linalg_lu_factor", ("LU", "pivots"))
_LuFactorEx = return_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
_LuUnpack = return_type("lu_unpack", ("P", "L", "U"))
_LdlFactor = return_type("linalg_ldl_factor", ("LD", "pivots"))
_LdlFactorEx = return_type("linalg_ldl_factor_ex", ("LD", "pivots", "info"))
_Geqrf = return_type("geqrf", ("a", "tau"))


def svd(A, full_matrices=True):
    """``U, S, Vh`` with ``A = U @ diag(S) @ Vh``; singular values in descending order.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[0.0, 2.0], [1.0, 0.0]])
    >>> U, S, Vh = torcia.linalg.svd(A)
    >>> S
    tensor([2., 1.])
    >>> torcia.allclose(U @ torcia.diag(S) @ Vh, A)
    True
    """
    check_matrix(A, "svd")
    return _Svd(*_opdef.CALL("linalg_svd", (A,), {"full_matrices": bool(full_matrices)}))


def qr(A, mode="reduced"):
    """``Q, R`` with ``A = Q @ R``; ``mode`` is "reduced", "complete" or "r" (Q empty).

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[3.0, 1.0], [4.0, 2.0]])
    >>> Q, R = torcia.linalg.qr(A)
    >>> torcia.allclose(Q @ R, A), torcia.allclose(Q.T @ Q, torcia.eye(2))
    (True, True)
    """
    check_matrix(A, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    return _Qr(*_opdef.CALL("linalg_qr", (A,), {"mode": mode}))


def cholesky(A, *, upper=False):
    """The lower (or ``upper``) Cholesky factor of a symmetric positive-definite matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.cholesky(torcia.tensor([[4.0, 2.0], [2.0, 5.0]]))
    tensor([[2., 0.],
            [1., 2.]])
    """
    check_square(A, "cholesky")
    return _opdef.CALL("linalg_cholesky", (A,), {"upper": bool(upper)})


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix, reading the ``UPLO``
    triangle.

    Examples
    --------
    >>> import torcia
    >>> values, vectors = torcia.linalg.eigh(torcia.tensor([[2.0, 1.0], [1.0, 2.0]]))
    >>> values
    tensor([1., 3.])
    """
    check_square(A, "eigh")
    _uplo(UPLO)
    return _Eigh(*_opdef.CALL("linalg_eigh", (A,), {"UPLO": UPLO}))


def eigvalsh(A, UPLO="L"):
    """Eigenvalues (ascending) of a symmetric matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.eigvalsh(torcia.tensor([[2.0, 1.0], [1.0, 2.0]]))
    tensor([1., 3.])
    """
    check_square(A, "eigvalsh")
    _uplo(UPLO)
    return _opdef.CALL("linalg_eigvalsh", (A,), {"UPLO": UPLO})


def eig(A):
    """Eigenvalues and eigenvectors of a general square matrix, complex (as LAPACK's geev:
    each eigenvector of unit norm, its largest component real).

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.eig(torcia.tensor([[0.0, -1.0], [1.0, 0.0]])).eigenvalues
    tensor([0.+1.j, 0.-1.j])
    """
    check_square(A, "eig")
    return _Eig(*_opdef.CALL("linalg_eig", (A,), {}))


def eigvals(A):
    """Eigenvalues of a general square matrix, complex.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.eigvals(torcia.tensor([[2.0, 0.0], [0.0, 3.0]]))
    tensor([2.+0.j, 3.+0.j])
    """
    check_square(A, "eigvals")
    return _opdef.CALL("linalg_eigvals", (A,), {})


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _zero_pivot(k):
    return (f"U[{k},{k}] is zero and using it on lu_solve would result in a division by zero. "
            f"If you still want to perform the factorization, consider calling "
            f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """``(LU, pivots, info)``: the LU factorization with partial pivoting of each matrix,
    packed as LAPACK's getrf (``L`` below the unit diagonal, ``U`` on and above it), the
    1-based row swaps (int32), and info (0, or the index of the first zero pivot).

    Examples
    --------
    >>> import torcia
    >>> LU, pivots, info = torcia.linalg.lu_factor_ex(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> pivots, info
    (tensor([2, 2], dtype=torcia.int32), tensor(0, dtype=torcia.int32))
    """
    check_matrix(A, "lu_factor_ex")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the "
                           "CPU")
    LU, pivots, info = _opdef.CALL("linalg_lu_factor", (A,), {})
    if check_errors:
        check_info(info, "torcia.linalg.lu_factor_ex", _zero_pivot)
    return _LuFactorEx(LU, pivots, info)


def lu_factor(A, *, pivot=True):
    """``(LU, pivots)`` as :func:`lu_factor_ex`; raises for a singular matrix.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> LU, pivots = torcia.linalg.lu_factor(A)
    >>> torcia.linalg.lu_solve(LU, pivots, torcia.tensor([[5.0], [6.0]]))
    tensor([[-4.0000],
            [ 4.5000]])
    """
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    if A.shape[-1] == A.shape[-2]:
        check_info(info, "torcia.linalg.lu_factor", _zero_pivot)
    return _LuFactor(LU, pivots)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """``(P, L, U)`` from the packed factors and pivots of :func:`lu_factor`, with
    ``A = P @ L @ U`` (``L`` m x k unit lower, ``U`` k x n upper, k = min(m, n)).

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> P, L, U = torcia.lu_unpack(*torcia.linalg.lu_factor(A))
    >>> P @ L @ U
    tensor([[1., 2.],
            [3., 4.]])
    """
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    P = L = U = None
    if unpack_pivots:
        P = _opdef.CALL("linalg_lu_permutation", (LU_pivots,),
                        {"m": m, "dtype": LU_data.dtype.to_numpy()})
    if unpack_data:
        L = LU_data.narrow(-1, 0, k).tril(-1) + eye_like(max(m, k), LU_data)[:m, :k]
        U = LU_data.narrow(-2, 0, k).triu()
    empty = LU_data.new_zeros((0,))
    return _LuUnpack(empty if P is None else P, empty if L is None else L,
                     empty if U is None else U)


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """``(LD, pivots, info)``: the Bunch-Kaufman LDL factorization of a symmetric matrix as
    LAPACK's sytrf packs it (needs SciPy: ``torcia-core[scipy]``). Not differentiable.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> LD, pivots, info = torcia.linalg.ldl_factor_ex(A)
    >>> info
    tensor(0, dtype=torcia.int32)
    """
    check_square(A, "ldl_factor_ex")
    LD, pivots, info = _opdef.CALL("linalg_ldl_factor", (A,), {"hermitian": bool(hermitian)})
    if check_errors:
        check_info(info, "torcia.linalg.ldl_factor_ex", lambda k: (
            f"The factorization could not be completed because the input is singular "
            f"(D[{k},{k}] is zero)."))
    return _LdlFactorEx(LD, pivots, info)


def ldl_factor(A, *, hermitian=False):
    """``(LD, pivots)`` as :func:`ldl_factor_ex`.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> LD, pivots = torcia.linalg.ldl_factor(A)
    >>> torcia.linalg.ldl_solve(LD, pivots, torcia.tensor([[6.0], [5.0]]))
    tensor([[1.],
            [1.]])
    """
    LD, pivots, _ = ldl_factor_ex(A, hermitian=hermitian)
    return _LdlFactor(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian=False):
    """The solution of ``A X = B`` from the factors of :func:`ldl_factor` (SciPy's
    LAPACK). Not differentiable.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> LD, pivots = torcia.linalg.ldl_factor(A)
    >>> torcia.linalg.ldl_solve(LD, pivots, torcia.tensor([[6.0], [5.0]]))
    tensor([[1.],
            [1.]])
    """
    check_square(LD, "ldl_solve")
    check_float(B, "ldl_solve")
    if B.ndim < 2:
        raise RuntimeError("torcia.linalg.ldl_solve: Expected B to have at least 2 dimensions")
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"torcia.linalg.ldl_solve: Expected LD.shape[:-1] and pivots.shape "
                           f"to be the same, but got pivots with shape {list(pivots.shape)} "
                           f"instead")
    if pivots.dtype.is_floating_point or pivots.dtype.is_complex or pivots.dtype is D.bool_:
        raise RuntimeError(f"torcia.linalg.ldl_solve: Expected pivots to be integers. Got "
                           f"{D.torch_type_name(pivots.dtype)}")
    if LD.dtype != B.dtype:
        raise RuntimeError("torcia.linalg.ldl_solve: Expected LD and B to have the same dtype, "
                           f"but found LD of type {D.torch_type_name(LD.dtype)} and B of type "
                           f"{D.torch_type_name(B.dtype)} instead")
    if B.shape[-2] != LD.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for torcia.linalg.ldl_solve: each A "
                           f"matrix is {LD.shape[-2]} by {LD.shape[-1]} but each b matrix is "
                           f"{B.shape[-2]} by {B.shape[-1]}")
    return _opdef.CALL("linalg_ldl_solve", (LD, pivots, B), {"hermitian": bool(hermitian)})


def geqrf(input):
    """``(a, tau)``: the QR factorization as LAPACK's geqrf packs it (``R`` on and above
    the diagonal, Householder vectors below it, their scalars in ``tau``). Not
    differentiable, as in PyTorch; ``torcia.linalg.householder_product`` rebuilds ``Q``.

    Examples
    --------
    >>> import torcia
    >>> a, tau = torcia.geqrf(torcia.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> a[0, 0]
    tensor(-5.)
    """
    check_matrix(input, "geqrf")
    return _Geqrf(*_opdef.CALL("linalg_geqrf", (input,), {}))


# ----- the declarations ------------------------------------------------------------------


#: in the order of :data:`torcia.ops.LINALG`, after the solves
DECLARED = (
    linalg_op("linalg_svd(Tensor a, *, bool full_matrices=True) -> (Tensor, Tensor, Tensor)",
              Kernels.linalg_svd, _svd_shape, autocast=FLOAT32),
    linalg_op("linalg_qr(Tensor a, *, str mode='reduced') -> (Tensor, Tensor)",
              Kernels.linalg_qr, _qr_shape, autocast=FLOAT32),
    linalg_op("linalg_cholesky(Tensor a, *, bool upper=False) -> Tensor",
              Kernels.linalg_cholesky, first_shape, autocast=FLOAT32),
    linalg_op("linalg_eigh(Tensor a, *, str UPLO='L') -> (Tensor, Tensor)", Kernels.linalg_eigh,
              _eigh_shape, autocast=FLOAT32),
    linalg_op("linalg_eigvalsh(Tensor a, *, str UPLO='L') -> Tensor", Kernels.linalg_eigvalsh,
              _eigvalsh_shape, decomposition=linalg_eigvalsh, autocast=FLOAT32),
    linalg_op("linalg_lu_factor(Tensor a) -> (Tensor, Tensor, Tensor)",
              Kernels.linalg_lu_factor, _lu_factor_shape),
    # a permutation matrix of 0s and 1s: no gradient
    linalg_op("linalg_lu_permutation(Tensor pivots, *, int m=0, ScalarType? dtype=None) -> "
              "Tensor", Kernels.linalg_lu_permutation, _lu_permutation_shape,
              decomposition=linalg_lu_permutation, differentiable=False),
    linalg_op("linalg_ldl_factor(Tensor a, *, bool hermitian=False) -> (Tensor, Tensor, Tensor)",
              Kernels.linalg_ldl_factor, _ldl_factor_shape),
    linalg_op("linalg_ldl_solve(Tensor ld, Tensor pivots, Tensor b, *, bool hermitian=False) -> "
              "Tensor", Kernels.linalg_ldl_solve, _ldl_solve_shape),
    linalg_op("linalg_eig(Tensor a) -> (Tensor, Tensor)", Kernels.linalg_eig, _eig_shape),
    linalg_op("linalg_eigvals(Tensor a) -> Tensor", Kernels.linalg_eigvals, _eigvals_shape,
              decomposition=linalg_eigvals),
    linalg_op("linalg_geqrf(Tensor a) -> (Tensor, Tensor)", Kernels.linalg_geqrf, _geqrf_shape),
)
