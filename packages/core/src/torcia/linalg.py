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

import numpy as np

from torcia import _dtype as D
from torcia._autocast import autocast_as
from torcia._oplib._common import to_dtype
from torcia._ops._common import return_type

# the functions that run one op are written next to its declaration, in the op families
# below this module
from torcia._ops._linalg import (
    LinAlgError,
    check_float,
    check_info,
    check_matrix,
    check_square,
    check_system,
    eye_like,
)
from torcia._ops.creation import arange, zeros
from torcia._ops.linalg import matmul
from torcia._ops.linalg_factorizations import (
    cholesky,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    geqrf,
    ldl_factor,
    ldl_factor_ex,
    ldl_solve,
    lu_factor,
    lu_factor_ex,
    lu_unpack,
    qr,
    svd,
)
from torcia._ops.linalg_functions import matrix_exp, matrix_norm, vector_norm
from torcia._ops.linalg_solves import det, inv, lstsq, pinv, slogdet, solve, solve_triangular
from torcia._ops.movement import cat
from torcia._tensor import _torch_name, _wrap_dim

_CholeskyEx = return_type("linalg_cholesky_ex", ("L", "info"))
_InvEx = return_type("linalg_inv_ex", ("inverse", "info"))
_SolveEx = return_type("linalg_solve_ex", ("result", "info"))
_Lu = return_type("linalg_lu", ("P", "L", "U"))
_SvdOld = return_type("svd", ("U", "S", "V"))
_QrOld = return_type("qr", ("Q", "R"))
_TriangularSolve = return_type("triangular_solve", ("solution", "cloned_coefficient"))


# ----- norms --------------------------------------------------------------------------------


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (1-D input or one ``dim``) or a matrix norm (2-D input or two ``dim``);
    with ``ord`` and ``dim`` both None, the 2-norm of all elements.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[3.0, 0.0], [0.0, 4.0]])
    >>> torcia.linalg.norm(A)
    tensor(5.)
    >>> torcia.linalg.norm(A, ord=1)
    tensor(4.)
    >>> torcia.linalg.norm(torcia.tensor([3.0, 4.0]))
    tensor(5.)
    """
    if dtype is not None:
        A = to_dtype(A, dtype)
    check_float(A, "norm")
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


# ----- decompositions ---------------------------------------------------------------------


def svdvals(A):
    """The singular values of ``A``, in descending order.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.svdvals(torcia.tensor([[0.0, 2.0], [1.0, 0.0]]))
    tensor([2., 1.])
    """
    return svd(A, full_matrices=False).S


# ----- the "_ex" variants: an info tensor instead of an error -------------------------------


def inv_ex(A, *, check_errors=False):
    """``(inverse, info)``: info is 0 for an invertible matrix, else the 1-based index of the
    first zero pivot of its LU factorization (whose inverse then holds inf or nan).

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.inv_ex(torcia.zeros(2, 2)).info
    tensor(1, dtype=torcia.int32)
    """
    check_square(A, "inv_ex")
    LU, pivots, info = lu_factor_ex(A)
    if check_errors:
        check_info(info, "linalg.inv_ex", lambda k: (
            f"The diagonal element {k} is zero, the inversion could not be completed because "
            f"the input matrix is singular."))
    # from the factors whatever info holds: no branch on the values (meta, vmap)
    eye = eye_like(A.shape[-1], A).expand(A.shape)
    return _InvEx(lu_solve(LU, pivots, eye), info)


def solve_ex(A, B, *, left=True, check_errors=False):
    """``(result, info)`` of :func:`solve`; info as in :func:`inv_ex`.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[2.0, 0.0], [0.0, 4.0]])
    >>> torcia.linalg.solve_ex(A, torcia.tensor([2.0, 2.0]))
    torcia.return_types.linalg_solve_ex(
    result=tensor([1.0000, 0.5000]),
    info=tensor(0, dtype=torcia.int32))
    """
    check_square(A, "solve_ex")
    LU, pivots, info = lu_factor_ex(A)
    if check_errors:
        check_info(info, "torcia.linalg.solve_ex",
                    lambda k: "The solver failed because the input matrix is singular.")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    X = lu_solve(LU, pivots, B.unsqueeze(-1) if vector else B, left=left)
    return _SolveEx(X.squeeze(-1) if vector else X, info)


def cholesky_ex(A, *, upper=False, check_errors=False):
    """``(L, info)``: info is 0 where the factorization succeeded, else the order of the
    first leading minor that is not positive-definite. The factor of such a matrix is nan
    (PyTorch leaves LAPACK's partial result there).

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.cholesky_ex(-torcia.eye(2)).info
    tensor(1, dtype=torcia.int32)
    """
    check_square(A, "cholesky_ex")
    try:
        L = cholesky(A, upper=upper)
    except LinAlgError:
        L = None  # some matrix is not positive-definite: which minor, below
    info = zeros(A.shape[:-2], dtype=D.int32, device=A.device) if L is not None \
        else _cholesky_info(A.mH if upper else A)
    if check_errors:
        check_info(info, "linalg.cholesky_ex", lambda k: (
            f"The factorization could not be completed because the input is not "
            f"positive-definite (the leading minor of order {k} is not positive-definite)."))
    if L is not None:
        return _CholeskyEx(L, info)
    # the failed matrices replaced by the identity, then their factors by nan: no branch on
    # the values (vmap)
    bad = (info != 0).unsqueeze(-1).unsqueeze(-1)
    eye = eye_like(A.shape[-1], A)
    L = cholesky(A.masked_fill(bad, 0) + eye * bad, upper=upper)
    return _CholeskyEx(L.masked_fill(bad, math.nan), info)


def _cholesky_info(A):
    """The order of each matrix's first leading minor that is not positive-definite (0: none),
    read from its lower triangle: where LAPACK's potrf stops, its pivot not positive, by the
    same column-by-column recurrence in tensor ops, so that it runs under vmap (each sample
    its own)."""
    a = A.detach()
    if a.dtype in (D.float16, D.bfloat16):
        a = a.float()  # as the factorization: LAPACK has no half precision
    n = a.shape[-1]
    info = zeros(a.shape[:-2], dtype=D.int32, device=a.device)
    cols = []  # the factor's columns found so far, each (..., n)
    for k in range(n):
        row = [c[..., k] for c in cols]  # L[k, :k]
        d = a[..., k, k].real
        for lkj in row:
            d = d - (lkj * lkj.conj()).real
        failed = ~(d > 0)  # a NaN pivot fails too
        info = info.masked_fill((info == 0) & failed, k + 1)
        col = a[..., :, k]
        for j, lkj in enumerate(row):
            col = col - cols[j] * lkj.conj().unsqueeze(-1)
        # a failed pivot's column is not read again: its order is already recorded
        col = col / d.clamp(min=1).where(failed, d).sqrt().unsqueeze(-1)
        cols.append(col * (arange(n, device=a.device) >= k))
    return info


# ----- LU ---------------------------------------------------------------------------------


def lu(A, *, pivot=True):
    """``(P, L, U)`` with ``A = P @ L @ U``: ``P`` a permutation, ``L`` unit lower
    triangular, ``U`` upper triangular (rectangular and singular ``A`` allowed).

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> P, L, U = torcia.linalg.lu(A)
    >>> torcia.allclose(P @ L @ U, A)
    True
    """
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return _Lu(*lu_unpack(LU, pivots))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """The solution of ``A X = B`` (``X A = B`` when not ``left``; ``A^H`` for ``adjoint``)
    from the factors of :func:`lu_factor`.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> LU, pivots = torcia.linalg.lu_factor(A)
    >>> torcia.linalg.lu_solve(LU, pivots, torcia.tensor([[5.0], [11.0]]))
    tensor([[1.],
            [2.]])
    """
    check_square(LU, "lu_solve")
    check_float(B, "lu_solve")
    if B.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 "
                           "dimensions.")
    check_system(LU, B, left, "lu_solve")
    P, L, U = lu_unpack(LU, pivots)
    if left and not adjoint:  # X = U^-1 L^-1 P^T B
        Y = solve_triangular(L, P.mT @ B, upper=False, unitriangular=True)
        return solve_triangular(U, Y, upper=True)
    if left:  # A^H X = B: X = P L^-H U^-H B
        Y = solve_triangular(U.mT, B, upper=False)
        return P @ solve_triangular(L.mT, Y, upper=True, unitriangular=True)
    if not adjoint:  # X = B U^-1 L^-1 P^T
        Y = solve_triangular(U, B, upper=True, left=False)
        return solve_triangular(L, Y, upper=False, left=False, unitriangular=True) @ P.mT
    # X A^H = B: X = B P L^-H U^-H
    Y = solve_triangular(L.mT, B @ P, upper=True, left=False, unitriangular=True)
    return solve_triangular(U.mT, Y, upper=False, left=False)


# ----- Householder ---------------------------------------------------------------------------


def householder_product(A, tau):
    """The first n columns of the product of Householder reflectors
    ``H_i = I - tau_i v_i v_i^H`` whose vectors ``v_i`` are the columns of ``A`` below the
    diagonal (with a 1 on it), as LAPACK's orgqr.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.householder_product(torcia.zeros(2, 2), torcia.zeros(2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    check_matrix(A, "householder_product")
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    if m < n:
        raise RuntimeError("torcia.linalg.householder_product: input.shape[-2] must be greater "
                           "than or equal to input.shape[-1]")
    if k > n:
        raise RuntimeError("torcia.linalg.householder_product: input.shape[-1] must be greater "
                           "than or equal to tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"torcia.linalg.householder_product: Expected batch dimensions of "
                           f"tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if A.dtype in (D.float16, D.bfloat16) and tau.dtype == A.dtype:
        # each reflector's product would round to half precision: k roundings, not one
        return householder_product(A.float(), tau.float()).to(A.dtype)
    eye = eye_like(m, A)
    V = A.tril(-1) + eye[:, :n]
    Q = eye.expand(*A.shape[:-2], m, m)
    for i in range(k):
        v = V[..., :, i:i + 1]
        Q = Q - (Q @ v) @ (tau[..., i:i + 1].unsqueeze(-1) * v.mH)
    return Q[..., :, :n]


# ----- functions of matrices ----------------------------------------------------------------


def matrix_power(A, n):
    """``A`` multiplied by itself ``n`` times (the inverse's power for negative ``n``, the
    identity for 0), by repeated squaring.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.matrix_power(torcia.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    tensor([[1., 3.],
            [0., 1.]])
    """
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {A.shape[-2] if A.ndim > 1 else 1} by "
                           f"{A.shape[-1] if A.ndim else 1} matrices")
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if n == 0:
        return eye_like(A.shape[-1], A).expand(A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):
    """The number of singular values above ``max(atol, rtol * largest)`` (int64).

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.matrix_rank(torcia.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(1)
    """
    check_matrix(A, "matrix_rank")
    if tol is not None:
        atol, rtol = tol, 0.0
    S = eigvalsh(A).abs() if hermitian else svdvals(A)
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else (
            max(A.shape[-2:]) * float(np.finfo(A.dtype.to_numpy()).eps))
    largest = S.amax(-1, keepdim=True) if S.shape[-1] else S.sum(-1, keepdim=True)
    threshold = largest * rtol
    if atol is not None:
        threshold = threshold.clamp(min=atol)
    return (S > threshold).sum(-1)


def cond(A, p=None):
    """The condition number ``norm(A, p) * norm(inv(A), p)``; for ``p`` None or +-2 the ratio
    of the extreme singular values.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.cond(torcia.tensor([[2.0, 0.0], [0.0, 0.5]]))
    tensor(4.)
    """
    check_matrix(A, "cond")
    if p in (None, 2, -2):
        S = svdvals(A)
        big, small = S.narrow(-1, 0, 1).squeeze(-1), S.narrow(-1, S.shape[-1] - 1, 1).squeeze(-1)
        return small / big if p == -2 else big / small
    check_square(A, "cond")
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


@autocast_as("linalg_multi_dot")
def multi_dot(tensors):
    """The product of a chain of matrices, in the order of fewest multiplications (the
    first may be a vector, taken as a row, and the last a column vector).

    Examples
    --------
    >>> import torcia
    >>> a, b, c = torcia.ones(2, 3), torcia.ones(3, 4), torcia.ones(4)
    >>> torcia.linalg.multi_dot([a, b, c])
    tensor([12., 12.])
    """
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first_vec, last_vec = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = list(tensors)
    if first_vec:
        mats[0] = mats[0].unsqueeze(0)
    if last_vec:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i, t in enumerate(mats):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(mats[i].shape)} and "
                f"{list(mats[i + 1].shape)} cannot be multiplied")
    out = _chain(mats)
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


def _chain(mats):
    """The matrix-chain product in the cheapest order (dynamic programming over splits)."""
    dims = [m.shape[0] for m in mats] + [mats[-1].shape[1]]
    n = len(mats)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return product(i, k) @ product(k + 1, j)

    return product(0, n - 1)


def tensorinv(A, ind=2):
    """The inverse of ``A`` seen as a map from its last dims to its first ``ind`` dims:
    ``tensordot(tensorinv(A), A, ind)`` is the identity.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.tensorinv(torcia.eye(4).reshape(4, 2, 2), ind=1).shape
    torcia.Size([2, 2, 4])
    """
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out_shape = tuple(A.shape[ind:])
    rows = math.prod(A.shape[:ind])
    cols = math.prod(out_shape)
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) "
                           f"== prod(self.shape[:ind]), but got {cols} != {rows}")
    return inv(A.reshape(rows, cols)).reshape(out_shape + tuple(A.shape[:ind]))


def tensorsolve(A, B, dims=None):
    """The ``X`` with ``tensordot(A, X, X.ndim) == B``; ``dims`` first moves those dims of
    ``A`` to the end.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.eye(6).reshape(2, 3, 6)
    >>> torcia.linalg.tensorsolve(A, torcia.ones(2, 3)).shape
    torcia.Size([6])
    """
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        rest = [d for d in range(A.ndim) if d not in dims]
        A = A.permute(*(rest + dims))
    result_shape = tuple(A.shape[B.ndim:])
    rows = B.numel()
    cols = math.prod(result_shape)
    if rows != cols or tuple(A.shape[:B.ndim]) != tuple(B.shape):
        raise RuntimeError(f"Expected self to satisfy the requirement "
                           f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), "
                           f"but got {cols} != {math.prod(A.shape[:B.ndim])}")
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(result_shape)


# ----- vectors ------------------------------------------------------------------------------


def vander(x, *, N=None):
    """The Vandermonde matrix with columns ``x**0, x**1, ..., x**(N-1)`` (batched over the
    leading dims of ``x``).

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.vander(torcia.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [1, 2, 4],
            [1, 3, 9]])
    """
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension.")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        if n < 0:
            raise RuntimeError(f"linalg.vander: N must be greater than 1. Got {n}")
        return x.unsqueeze(-1).new_ones(tuple(x.shape) + (n,))
    x = x if x.dtype is not D.bool_ else to_dtype(x, D.int64)
    cols = x.unsqueeze(-1).expand(*x.shape, n - 1)
    return cat([x.unsqueeze(-1).new_ones(tuple(x.shape) + (1,)), cols], -1).cumprod(-1)


@autocast_as("linalg_vecdot")
def vecdot(x, y, *, dim=-1):
    """The dot product of ``x`` and ``y`` over ``dim`` (``x`` conjugated when complex), with
    broadcasting.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.vecdot(torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0]))
    tensor(11.)
    """
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but "
                           f"found x of type {_torch_name(x.dtype)} and y of type "
                           f"{_torch_name(y.dtype)} instead")
    return (x.conj() * y).sum(dim)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim``, with broadcasting.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.cross(torcia.tensor([1.0, 0.0, 0.0]), torcia.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    d = _wrap_dim(dim, len(shape))
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[dim]} and {other.shape[dim]}")
    a, b = input.expand(*shape), other.expand(*shape)
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonal of each matrix (a view), as :func:`torcia.diagonal` with batch-last
    defaults.

    Examples
    --------
    >>> import torcia
    >>> torcia.linalg.diagonal(torcia.eye(2))
    tensor([1., 1.])
    """
    return A.diagonal(offset, dim1, dim2)


# ----- PyTorch's top-level (torch.*) and Tensor-method names --------------------------------


def _cholesky_top(input, upper=False):
    """``torch.cholesky``: as :func:`cholesky` with ``upper`` positional.

    Examples
    --------
    >>> import torcia
    >>> torcia.cholesky(torcia.tensor([[4.0, 2.0], [2.0, 5.0]]))
    tensor([[2., 0.],
            [1., 2.]])
    """
    return cholesky(input, upper=upper)


def cholesky_solve(B, L, upper=False):
    """The solution of ``A X = B`` from the Cholesky factor ``L`` of ``A`` (``U`` when
    ``upper``).

    Examples
    --------
    >>> import torcia
    >>> L = torcia.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> torcia.cholesky_solve(torcia.tensor([[4.0], [3.0]]), L)  # A = L L^T = [[4, 2], [2, 2]]
    tensor([[0.5000],
            [1.0000]])
    """
    # A = L L^H: the conjugate transpose, for complex factors (their transpose for real)
    if upper:
        return solve_triangular(L, solve_triangular(L.mH, B, upper=False), upper=True)
    return solve_triangular(L.mH, solve_triangular(L, B, upper=False), upper=True)


def cholesky_inverse(L, upper=False):
    """The inverse of ``A`` from its Cholesky factor ``L`` (``U`` when ``upper``).

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> torcia.cholesky_inverse(torcia.linalg.cholesky(A)) @ A
    tensor([[1., 0.],
            [0., 1.]])
    """
    return cholesky_solve(eye_like(L.shape[-1], L).expand(L.shape), L, upper)


def _lu_top(A, pivot=True, get_infos=False):
    """``torch.lu``: ``(LU, pivots)``, and ``infos`` when ``get_infos``.

    Examples
    --------
    >>> import torcia
    >>> LU, pivots = torcia.lu(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> pivots
    tensor([2, 2], dtype=torcia.int32)
    """
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def _lu_solve_top(b, LU_data, LU_pivots):
    """``torch.lu_solve(b, LU_data, LU_pivots)``.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.lu_solve(torcia.tensor([[5.0], [11.0]]), *torcia.lu(A))
    tensor([[1.],
            [2.]])
    """
    return lu_solve(LU_data, LU_pivots, b)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """``torch.triangular_solve``: ``(solution, cloned_coefficient)`` of ``A X = b`` (``A^T``
    when ``transpose``).

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[2.0, 1.0], [0.0, 4.0]])
    >>> torcia.triangular_solve(torcia.tensor([[4.0], [8.0]]), A).solution
    tensor([[1.],
            [2.]])
    """
    coeff = A.mT if transpose else A
    X = solve_triangular(coeff, b, upper=upper != transpose, unitriangular=unitriangular)
    return _TriangularSolve(X, A.clone())


def _svd_top(input, some=True, compute_uv=True):
    """``torch.svd``: ``(U, S, V)`` (V, not its transpose); zero U and V without
    ``compute_uv``.

    Examples
    --------
    >>> import torcia
    >>> U, S, V = torcia.svd(torcia.tensor([[3.0, 0.0], [0.0, -2.0]]))
    >>> S
    tensor([3., 2.])
    """
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        S = svdvals(input)
        return _SvdOld(input.new_zeros((*input.shape[:-2], m, m)), S,
                       input.new_zeros((*input.shape[:-2], n, n)))
    U, S, Vh = svd(input, full_matrices=not some)
    return _SvdOld(U, S, Vh.mT)


def _qr_top(input, some=True):
    """``torch.qr``: reduced (``some``) or complete ``(Q, R)``.

    Examples
    --------
    >>> import torcia
    >>> Q, R = torcia.qr(torcia.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> torcia.allclose(Q @ R, torcia.tensor([[3.0, 1.0], [4.0, 2.0]]))
    True
    """
    return _QrOld(*qr(input, mode="reduced" if some else "complete"))


def _vander_top(x, N=None, increasing=False):
    """``torch.vander``: powers of a 1-D ``x``, decreasing unless ``increasing``.

    Examples
    --------
    >>> import torcia
    >>> torcia.vander(torcia.tensor([1, 2, 3]), N=3)
    tensor([[1, 1, 1],
            [4, 2, 1],
            [9, 3, 1]])
    """
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    V = vander(x, N=N)
    return V if increasing else V.flip(-1)


@autocast_as("cross")
def _cross_top(input, other, dim=None):
    """``torch.cross``: along ``dim``, or the first dim of size 3 when None.

    Examples
    --------
    >>> import torcia
    >>> torcia.cross(torcia.tensor([1.0, 0.0, 0.0]), torcia.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    if dim is None:
        shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
        sizes = [i for i, s in enumerate(shape) if s == 3]
        if not sizes:
            raise RuntimeError("no dimension of size 3 in input")
        dim = sizes[0]
    return cross(input, other, dim=dim)


def ormqr(input, input2, input3, left=True, transpose=False):
    """``Q @ input3`` (``input3 @ Q`` when not ``left``; ``Q^H`` when ``transpose``) for the
    ``Q`` of :func:`geqrf`'s ``(input, input2)``, without forming it outside.

    Examples
    --------
    >>> import torcia
    >>> A = torcia.tensor([[3.0, 1.0], [4.0, 2.0]])
    >>> Q, _ = torcia.linalg.qr(A)
    >>> torcia.allclose(torcia.ormqr(*torcia.geqrf(A), torcia.eye(2)).abs(), Q.abs())
    True
    """
    m, n = input.shape[-2], input.shape[-1]
    other_rows = input3.shape[-2] if left else input3.shape[-1]
    if other_rows != m:
        raise RuntimeError(f"torcia.ormqr: other.shape[{-2 if left else -1}] must be equal to "
                           f"input.shape[-2]")
    if input.dtype in (D.float16, D.bfloat16) and input2.dtype == input3.dtype == input.dtype:
        # one rounding of the product, not one per reflector
        return ormqr(input.float(), input2.float(), input3.float(), left,
                     transpose).to(input.dtype)
    if m > n:  # reflectors beyond tau's count are the identity: pad to a square Q
        input = cat([input, input.new_zeros((*input.shape[:-1], m - n))], -1)
    Q = householder_product(input[..., :, :m], input2)
    if transpose:
        Q = Q.mH
    return Q @ input3 if left else input3 @ Q


#: torcia.<name> -> function, as torch.<name>
TOP_LEVEL = {
    "cholesky": _cholesky_top, "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse, "lu": _lu_top, "lu_solve": _lu_solve_top,
    "lu_unpack": lu_unpack, "matrix_exp": matrix_exp, "matrix_power": matrix_power,
    "cross": _cross_top, "triangular_solve": triangular_solve, "svd": _svd_top,
    "qr": _qr_top, "vander": _vander_top, "orgqr": householder_product, "geqrf": geqrf,
    "ormqr": ormqr,
}
#: Tensor.<name>, with the tensor as first argument (as PyTorch's methods)
METHODS = {
    "cholesky": _cholesky_top, "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse, "lu": _lu_top, "lu_solve": _lu_solve_top,
    "matrix_exp": matrix_exp, "matrix_power": matrix_power, "cross": _cross_top,
    "triangular_solve": triangular_solve, "svd": _svd_top, "qr": _qr_top,
    "orgqr": householder_product, "geqrf": geqrf, "ormqr": ormqr,
}


__all__ = ["vector_norm", "matrix_norm", "norm", "inv", "solve", "pinv", "det", "slogdet",
           "svd", "svdvals", "qr", "cholesky", "eigh", "eigvalsh", "eig", "eigvals", "matmul",
           "LinAlgError",
           "inv_ex", "solve_ex", "cholesky_ex", "lu_factor", "lu_factor_ex", "lu", "lu_solve",
           "solve_triangular", "lstsq", "ldl_factor", "ldl_factor_ex", "ldl_solve",
           "householder_product", "matrix_exp", "matrix_power", "matrix_rank", "cond",
           "multi_dot", "tensorinv", "tensorsolve", "vander", "vecdot", "cross", "diagonal"]
