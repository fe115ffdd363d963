"""The solves, inverses and determinants of :data:`torcia.ops.LINALG`, each declared once
with its public function of :mod:`torcia.linalg`: schema, reference kernel, meta shape,
decomposition, autocast policy, and the function that checks its arguments in PyTorch's
words and dispatches the op.

The primitives are LAPACK's solve (``linalg_solve``) and least squares (``linalg_lstsq`` ->
(solution, residuals, rank, singular_values)). The inverse and the determinants decompose
into the LU factors of :mod:`torcia._ops.linalg_factorizations`, the pseudo-inverse into
its SVD, and the triangular solve into substitution, a row at a time. What the linear-
algebra families share is in :mod:`torcia._ops._linalg`; the derivatives are
torcia-autograd's.
"""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._ops._common import (
    HALF,
    autocast_as,
    first_shape,
    low_precision,
    op,
    real_dtype,
    return_type,
)
from torcia._ops._common import where as _where
from torcia._ops._linalg import (
    FLOAT32,
    LinAlgError,
    batch_dims,
    check_float,
    check_matrix,
    check_same_dtype,
    check_square,
    check_system,
    half_in_float32,
    linalg_op,
    xp_linalg,
)
from torcia._ops.linalg_factorizations import lu_factor_ex, svd
from torcia._ops.unary import decomposed_isfinite

# ----- reference kernels -----------------------------------------------------------------


def substitution(xp, a, b, upper, unitriangular=False):
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


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

    def linalg_inv(self, a):
        return xp_linalg(self.xp, "inv", a)

    def linalg_solve(self, a, b, left=True):
        xp = self.xp
        if not left:
            # X A = B  <=>  A^T X^T = B^T
            return xp.swapaxes(xp_linalg(xp, "solve", xp.swapaxes(a, -1, -2),
                                         xp.swapaxes(b, -1, -2)), -1, -2)
        return xp_linalg(xp, "solve", a, b)

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
    def linalg_pinv(self, a, rtol=None, hermitian=False):
        xp = self.xp
        if rtol is None:
            rtol = max(a.shape[-2:]) * np.finfo(a.dtype).eps
        return xp.linalg.pinv(a, rcond=rtol, hermitian=hermitian)

    def linalg_solve_triangular(self, a, b, upper=False, left=True, unitriangular=False):
        xp = self.xp
        if left:
            return substitution(xp, a, b, upper, unitriangular)
        # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        xt = substitution(xp, xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2), not upper,
                          unitriangular)
        return xp.swapaxes(xt, -1, -2)

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


# ----- meta shapes -----------------------------------------------------------------------


def _det_shape(a, **params):
    return a.shape[:-2], a.dtype


def _slogdet_shape(a, **params):
    batch = a.shape[:-2]
    return (batch, a.dtype), (batch, real_dtype(a.dtype))


def _solve_shape(a, b, left=True, **params):
    """NumPy's rule (the kernel's): ``b`` is a vector only when it is 1-D."""
    if b.ndim == 1:
        return a.shape[:-2] + b.shape, np.result_type(a.dtype, b.dtype)
    return batch_dims(a, b) + b.shape[-2:], np.result_type(a.dtype, b.dtype)


def _solve_triangular_shape(a, b, upper=False, left=True, unitriangular=False, **params):
    return batch_dims(a, b) + b.shape[-2:], np.result_type(a.dtype, b.dtype)


def _pinv_shape(a, rtol=None, hermitian=False, **params):
    return a.shape[:-2] + a.shape[:-3:-1], a.dtype


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
    batch = batch_dims(a, b)
    real = real_dtype(a.dtype)
    singular = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return ((batch + (n, b.shape[-1]), a.dtype), ((0,), real), (batch, np.dtype(np.int64)),
            (singular, real))


# ----- decompositions (tensors) ----------------------------------------------------------


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


def linalg_pinv(a, rtol=None, hermitian=False):
    # V S^+ U^H, the singular values at or below rtol times the largest dropped
    if a.dtype in HALF:
        return linalg_pinv(a.float(), rtol, hermitian).to(a.dtype)
    u, s, vh = svd(a, full_matrices=False)
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
    lu, pivots, _ = lu_factor_ex(a)
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
        sign = sign + _where(decomposed_isfinite(diagonal), diagonal * 0,
                             diagonal.new_zeros(())).sum(-1)
    sign = _where(zero, sign.new_zeros(()), unit.prod(-1) * sign)
    return sign, size.log().sum(-1)


def linalg_inv(a):
    eye = _opdef.PUBLIC.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(tuple(a.shape))
    try:
        return op("linalg_solve", a, eye, left=True)
    except LinAlgError:
        # the inverse's own words: the first zero pivot of the first singular matrix
        info = lu_factor_ex(a).info.reshape(-1).tolist()
        b = next((i for i, k in enumerate(info) if k), 0)
        where = f"(Batch element {b}): " if a.ndim > 2 else ""
        raise LinAlgError(f"linalg.inv: {where}The diagonal element {info[b]} is zero, the "
                          "inversion could not be completed because the input matrix is "
                          "singular.") from None


# ----- the public functions --------------------------------------------------------------

_Slogdet = return_type("linalg_slogdet", ("sign", "logabsdet"))
_Lstsq = return_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))


def inv(A):
    """The inverse of each square matrix in ``A``; raises for a singular one.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.inv(torcia.tensor([[1.0, 1.0], [0.0, 1.0]]))
    tensor([[ 1., -1.],
            [ 0.,  1.]])
    """
    check_square(A, "inv")
    return _opdef.CALL("linalg_inv", (A,), {})


@autocast_as("linalg_solve")  # cast before the same-dtype check, as PyTorch
def solve(A, B, *, left=True):
    """The solution ``X`` of ``A @ X = B`` (``X @ A = B`` when ``left`` is False).

    ``B`` may be a batch of vectors (one dim fewer than ``A``) or of matrices.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> torcia.linalg.solve(A, torcia.tensor([2.0, 3.0]))
    tensor([1., 2.])
    """
    check_square(A, "solve")
    check_float(B, "solve")
    check_same_dtype(A, B, "solve")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    check_system(A, Bm, left, "solve")
    X = _opdef.CALL("linalg_solve", (A, Bm), {"left": bool(left)})
    return X.squeeze(-1) if vector else X


def det(A):
    """The determinant of each square matrix in ``A``.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.det(torcia.tensor([[2.0, 1.0], [0.0, 3.0]]))
    tensor(6.)
    """
    check_square(A, "det")
    return _opdef.CALL("linalg_det", (A,), {})


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
    check_square(A, "slogdet")
    return _Slogdet(*_opdef.CALL("linalg_slogdet", (A,), {}))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse; singular values below ``rtol * max`` count as 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.pinv(torcia.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]]))
    tensor([[1.0000, 0.0000, 0.0000],
            [0.0000, 0.0000, 0.5000]])
    """
    check_matrix(A, "pinv")
    if atol is not None:
        raise NotImplementedError("linalg.pinv: atol is not supported; use rtol")
    return _opdef.CALL("linalg_pinv", (A,), {"rtol": rtol, "hermitian": bool(hermitian)})


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """The solution of ``A X = B`` (``X A = B`` when not ``left``) for triangular ``A``,
    reading only its ``upper`` or lower triangle (and a unit diagonal when
    ``unitriangular``). Batch dims broadcast.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[2.0, 1.0], [0.0, 4.0]])
    >>> torcia.linalg.solve_triangular(A, torcia.tensor([[3.0], [4.0]]), upper=True)
    tensor([[1.],
            [1.]])
    """
    check_square(A, "solve_triangular")
    check_float(B, "solve_triangular")
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 "
                           "dimensions.")
    check_same_dtype(A, B, "solve_triangular")
    check_system(A, B, left, "solve_triangular")
    return _opdef.CALL("linalg_solve_triangular", (A, B),
                       {"upper": bool(upper), "left": bool(left),
                        "unitriangular": bool(unitriangular)})


def lstsq(A, B, rcond=None, *, driver=None):
    """``(solution, residuals, rank, singular_values)`` of ``min ||A X - B||``.

    The solution is the minimum-norm one; ``rank`` counts singular values above
    ``rcond * max``; ``singular_values`` come with the "gelsd" and "gelss" drivers, and
    ``residuals`` (squared column norms of ``A X - B``) when ``A`` is tall and of full rank
    with a driver other than the default "gelsy", as in PyTorch.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> torcia.linalg.lstsq(A, torcia.tensor([[1.0], [2.0], [3.0]])).solution
    tensor([[1.],
            [2.]])
    """
    check_matrix(A, "lstsq")
    check_float(B, "lstsq")
    if driver is None:
        driver = "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torcia.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"torcia.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {D.torch_type_name(A.dtype)} and "
                           f"other's dtype {D.torch_type_name(B.dtype)}")
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"torcia.linalg.lstsq: input.size(-2) should match other.size(-2) "
                           f"when other is a matrix (got {A.shape[-2]} and {Bm.shape[-2]})")
    X, res, rank, sv = _opdef.CALL("linalg_lstsq", (A, Bm),
                                   {"rcond": rcond, "driver": driver})
    return _Lstsq(X.squeeze(-1) if vector else X, res, rank, sv)


# ----- the declarations ------------------------------------------------------------------


#: in the order of :data:`torcia.ops.LINALG`, after the products
DECLARED = (
    linalg_op("linalg_inv(Tensor a) -> Tensor", Kernels.linalg_inv, first_shape,
              decomposition=linalg_inv, autocast=FLOAT32),
    linalg_op("linalg_solve(Tensor a, Tensor b, *, bool left=True) -> Tensor",
              Kernels.linalg_solve, _solve_shape, autocast=FLOAT32),
    linalg_op("linalg_det(Tensor a) -> Tensor", Kernels.linalg_det, _det_shape,
              decomposition=linalg_det, autocast=FLOAT32),
    linalg_op("linalg_slogdet(Tensor a) -> (Tensor, Tensor)", Kernels.linalg_slogdet,
              _slogdet_shape, decomposition=linalg_slogdet, autocast=FLOAT32),
    linalg_op("linalg_pinv(Tensor a, *, float? rtol=None, bool hermitian=False) -> Tensor",
              Kernels.linalg_pinv, _pinv_shape, decomposition=linalg_pinv, autocast=FLOAT32),
    linalg_op("linalg_solve_triangular(Tensor a, Tensor b, *, bool upper=False, bool left=True, "
              "bool unitriangular=False) -> Tensor", Kernels.linalg_solve_triangular,
              _solve_triangular_shape, decomposition=linalg_solve_triangular),
    linalg_op("linalg_lstsq(Tensor a, Tensor b, *, float? rcond=None, str driver='gelsy') -> "
              "(Tensor, Tensor, Tensor, Tensor)", Kernels.linalg_lstsq, _lstsq_shape),
)
