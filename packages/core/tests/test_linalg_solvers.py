"""The rest of ``torcia.linalg`` (LU, triangular and least-squares solves, LDL, Householder,
matrix functions, the ``_ex`` variants, vector helpers) and PyTorch's top-level and method
aliases: reconstructions, torch parity (float32 and float64, batched), and the errors."""

import math

import numpy as np
import pytest

import torcia
from torcia.testing import assert_close

RNG = np.random.default_rng(7)
L = torcia.linalg


def spd(n, batch=(), dtype=np.float64):
    a = RNG.normal(size=batch + (n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def normal(*shape, dtype=np.float64):
    return RNG.normal(size=shape).astype(dtype)


def t(a):
    return torcia.from_numpy(np.ascontiguousarray(a))


# ----- closed forms and reconstructions (no torch needed) --------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (5, 3), (3, 5), (2, 1, 4, 2)])
def test_lu_reconstructs(shape):
    A = t(normal(*shape))
    P, Lo, U = L.lu(A)
    assert_close(P @ Lo @ U, A)
    k = min(shape[-2:])
    assert Lo.shape[-2:] == (shape[-2], k) and U.shape[-2:] == (k, shape[-1])
    assert_close(Lo.diagonal(0, -2, -1), torcia.ones(*shape[:-2], k, dtype=torcia.float64))
    assert torcia.equal(Lo, Lo.tril()) and torcia.equal(U, U.triu())


def test_lu_factor_solve_and_singular():
    A = t(normal(2, 4, 4))
    B = t(normal(2, 4, 3))
    LU, piv = L.lu_factor(A)
    assert piv.dtype is torcia.int32
    for left in (True, False):
        for adjoint in (True, False):
            rhs = B if left else B.mT
            X = L.lu_solve(LU, piv, rhs, left=left, adjoint=adjoint)
            M = A.mT if adjoint else A
            assert_close(M @ X if left else X @ M, rhs)
    S = torcia.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert L.lu_factor_ex(S).info.item() == 2
    with pytest.raises(L.LinAlgError, match=r"U\[2,2\] is zero"):
        L.lu_factor(S)
    with pytest.raises(RuntimeError, match="without pivoting"):
        L.lu_factor(S, pivot=False)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(upper, left, unit):
    A = t(spd(4, (2,)))
    B = t(normal(3, 1, 4, 4))
    X = L.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
    T = A.triu() if upper else A.tril()
    if unit:
        T = T - torcia.diag_embed(T.diagonal(0, -2, -1)) + torcia.eye(4, dtype=torcia.float64)
    assert X.shape == (3, 2, 4, 4)
    assert_close(T @ X if left else X @ T, B.expand(3, 2, 4, 4))


def test_matrix_functions():
    N = torcia.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=torcia.float64)
    assert_close(L.matrix_exp(N), torcia.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torcia.float64))
    theta = 2.5  # exp of a rotation generator, scaled past the Pade bound
    G = torcia.tensor([[0.0, -theta], [theta, 0.0]], dtype=torcia.float64) * 4
    c, s = np.cos(4 * theta), np.sin(4 * theta)
    assert_close(L.matrix_exp(G), torcia.tensor([[c, -s], [s, c]], dtype=torcia.float64))
    A = t(spd(3))
    assert_close(L.matrix_power(A, 3), A @ A @ A)
    assert_close(L.matrix_power(A, -2), L.inv(A @ A))
    assert_close(L.matrix_power(A, 0), torcia.eye(3, dtype=torcia.float64))
    assert L.matrix_rank(torcia.tensor([[1.0, 2.0], [2.0, 4.0]])).item() == 1
    assert L.matrix_rank(A, hermitian=True).item() == 3


def test_multi_dot_orders_and_vectors():
    a, b, c, d = (t(normal(*s)) for s in [(10, 2), (2, 30), (30, 3), (3,)])
    assert_close(L.multi_dot([a, b, c, d]), a @ b @ c @ d)
    v = t(normal(10))
    assert_close(L.multi_dot([v, a, b]), v @ a @ b)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        L.multi_dot([a, a])


def test_householder_product_matches_qr():
    A = t(normal(5, 3))
    Q, R = L.qr(A)
    # the reflectors of Q's own columns rebuild a Q with the same span
    H = L.householder_product(torcia.zeros(5, 3, dtype=torcia.float64),
                              torcia.zeros(3, dtype=torcia.float64))
    assert_close(H, torcia.eye(5, 3, dtype=torcia.float64))
    assert_close(Q.mT @ Q, torcia.eye(3, dtype=torcia.float64))


def test_tensorinv_tensorsolve_vander_vecdot_cross():
    A = t(spd(6)).reshape(2, 3, 6)
    Ainv = L.tensorinv(A.reshape(6, 2, 3), ind=1)
    assert_close(torcia.tensordot(Ainv, A.reshape(6, 2, 3), 1), torcia.eye(
        6, dtype=torcia.float64).reshape(2, 3, 2, 3))
    B = t(normal(2, 3))
    X = L.tensorsolve(A, B)
    assert_close(torcia.tensordot(A, X, 1), B)
    assert L.vander(torcia.tensor([2, 3]), N=4).tolist() == [[1, 2, 4, 8], [1, 3, 9, 27]]
    assert L.vecdot(torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0])).item() == 11.0
    e1, e2 = torcia.tensor([1.0, 0.0, 0.0]), torcia.tensor([0.0, 1.0, 0.0])
    assert L.cross(e1, e2).tolist() == [0.0, 0.0, 1.0]
    assert L.cross(e1.expand(2, 3), e2).shape == (2, 3)
    with pytest.raises(RuntimeError, match="must have length 3"):
        L.cross(torcia.ones(2), torcia.ones(2))
    assert L.diagonal(torcia.eye(2)).tolist() == [1.0, 1.0]


def test_ex_variants_and_linalg_error():
    singular = torcia.zeros(2, 2, 2, dtype=torcia.float64)
    singular[0] = torcia.eye(2, dtype=torcia.float64)
    assert L.inv_ex(singular).info.tolist() == [0, 1]
    assert L.solve_ex(singular, torcia.ones(2, 2, dtype=torcia.float64)).info.tolist() == [0, 1]
    with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\): The diagonal element 1 is "
                                             r"zero"):
        L.inv(singular)
    with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\): The solver failed"):
        L.solve(singular, torcia.ones(2, 2, dtype=torcia.float64))
    with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\)"):
        L.inv_ex(singular, check_errors=True)
    notpd = torcia.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 2.0], [0.0, 2.0, 1.0]])
    Lf, info = L.cholesky_ex(notpd)
    assert info.item() == 3
    with pytest.raises(L.LinAlgError, match="leading minor of order 3 is not positive-definite"):
        L.cholesky(notpd)
    assert issubclass(L.LinAlgError, RuntimeError)
    good = t(spd(3))
    assert L.cholesky_ex(good).info.item() == 0
    assert_close(L.cholesky_ex(good).L, L.cholesky(good))


def test_cholesky_reads_torchs_triangle_and_stops_at_nan():
    # upper=True factors the upper triangle, as torch's (it read the lower one); a NaN in
    # the triangle read fails its leading minor, as LAPACK's potrf (NumPy let it through)
    a = torcia.tensor([[4.0, 3.0], [2.0, 5.0]], dtype=torcia.float64)
    assert_close(L.cholesky(a, upper=True), torcia.tensor([[2.0, 1.5], [0.0, 11 ** 0.5 / 2]],
                                                         dtype=torcia.float64))
    assert_close(L.cholesky(a), torcia.tensor([[2.0, 0.0], [1.0, 2.0]], dtype=torcia.float64))
    nan = torcia.tensor([[[4.0, 0.0], [0.0, 4.0]], [[4.0, 1.0], [math.nan, 4.0]]],
                        dtype=torcia.float64)
    assert L.cholesky_ex(nan).info.tolist() == [0, 2]
    assert L.cholesky_ex(nan, upper=True).info.tolist() == [0, 0]
    assert L.cholesky_ex(nan.mT, upper=True).info.tolist() == [0, 2]
    assert torcia.isnan(L.cholesky_ex(nan).L[1]).all()
    with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\): .* leading minor of order 2"):
        L.cholesky(nan)


@pytest.mark.parametrize("dtype", [torcia.float16, torcia.bfloat16])
def test_half_precision_factorizations_keep_the_dtype(dtype):
    # computed in float32 and rounded back, as the meta device says (bfloat16 came back
    # float64, float16's LDL float32)
    a = torcia.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=dtype)
    for f in (L.qr, L.svd, L.eigh, L.eigvalsh, L.svdvals, L.pinv, L.slogdet, torcia.logdet,
              L.cond, lambda m: L.ldl_factor(m)[0], lambda m: L.ldl_solve(*L.ldl_factor(m), m)):
        out = f(a)
        for part in out if isinstance(out, tuple) else (out,):
            assert part.dtype is dtype
    assert_close(L.eigvalsh(a).float(), L.eigvalsh(a.float()), atol=2e-2, rtol=1e-2)


def test_lstsq_shapes():
    A, B = t(normal(2, 5, 3)), t(normal(2, 5, 4))
    out = L.lstsq(A, B, driver="gelsd")
    assert out.solution.shape == (2, 3, 4) and out.residuals.shape == (2, 4)
    assert out.rank.tolist() == [3, 3] and out.singular_values.shape == (2, 3)
    assert_close(out.solution, L.pinv(A) @ B)
    assert L.lstsq(A, B).residuals.numel() == 0
    assert L.lstsq(A, B[..., 0]).solution.shape == (2, 3)
    with pytest.raises(RuntimeError, match="parameter `driver`"):
        L.lstsq(A, B, driver="nope")


def test_top_level_and_method_aliases():
    A = t(spd(3))
    B = t(normal(3, 2))
    C = L.cholesky(A)
    assert_close(torcia.cholesky_solve(B, C), L.solve(A, B))
    assert_close(B.cholesky_solve(C.mT, upper=True), L.solve(A, B))
    assert_close(torcia.cholesky_inverse(C), L.inv(A))
    LU, piv = torcia.lu(A)
    assert_close(torcia.lu_solve(B, LU, piv), L.solve(A, B))
    assert_close(B.lu_solve(LU, piv), L.solve(A, B))
    P, Lo, U = torcia.lu_unpack(LU, piv)
    assert_close(P @ Lo @ U, A)
    X, coeff = torcia.triangular_solve(B, A, upper=False)
    assert_close(A.tril() @ X, B)
    assert_close(coeff, A)
    U_, S, V = torcia.svd(A)
    assert_close(U_ @ torcia.diag(S) @ V.mT, A)
    Q, R = A.qr()
    assert_close(Q @ R, A)
    assert_close(A.matrix_exp(), L.matrix_exp(A))
    assert_close(A.matrix_power(2), A @ A)
    assert torcia.vander(torcia.tensor([2, 3])).tolist() == [[2, 1], [3, 1]]
    e1, e2 = torcia.tensor([[1.0, 0.0, 0.0]]), torcia.tensor([[0.0, 1.0, 0.0]])
    assert torcia.cross(e1, e2).tolist() == [[0.0, 0.0, 1.0]]
    assert e1.cross(e2, dim=1).tolist() == [[0.0, 0.0, 1.0]]


# ----- torch parity ----------------------------------------------------------------------------


def _cases():
    return [
        lambda m, a, b, g, v: m.linalg.lu_factor(a),
        lambda m, a, b, g, v: m.linalg.lu_factor_ex(g),
        lambda m, a, b, g, v: m.linalg.lu(g),
        lambda m, a, b, g, v: m.linalg.lu(g.mT),
        lambda m, a, b, g, v: m.linalg.lu_solve(*m.linalg.lu_factor(a), b),
        lambda m, a, b, g, v: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, adjoint=True),
        lambda m, a, b, g, v: m.linalg.lu_solve(*m.linalg.lu_factor(a), b.mT, left=False),
        lambda m, a, b, g, v: m.linalg.solve_triangular(a, b, upper=True),
        lambda m, a, b, g, v: m.linalg.solve_triangular(a, b.mT, upper=False, left=False,
                                                         unitriangular=True),
        lambda m, a, b, g, v: m.linalg.solve_ex(a, b),
        lambda m, a, b, g, v: m.linalg.inv_ex(a),
        lambda m, a, b, g, v: m.linalg.cholesky_ex(a),
        lambda m, a, b, g, v: m.linalg.matrix_exp(a / 4),
        lambda m, a, b, g, v: m.linalg.matrix_exp(g[..., :3, :3] * 3),
        lambda m, a, b, g, v: m.linalg.matrix_power(a, 3),
        lambda m, a, b, g, v: m.linalg.matrix_power(a, -2),
        lambda m, a, b, g, v: m.linalg.matrix_rank(g),
        lambda m, a, b, g, v: m.linalg.matrix_rank(a, hermitian=True, rtol=0.1),
        lambda m, a, b, g, v: m.linalg.cond(a),
        lambda m, a, b, g, v: m.linalg.cond(a, "fro"),
        lambda m, a, b, g, v: m.linalg.multi_dot([g[0].mT, g[1], v[0]]),
        lambda m, a, b, g, v: m.linalg.householder_product(g, v[..., :3]),
        lambda m, a, b, g, v: m.linalg.tensorinv(a[0].reshape(4, 2, 2), ind=1),
        lambda m, a, b, g, v: m.linalg.tensorsolve(a[0].reshape(2, 2, 4), b[0, :, 0].reshape(
            2, 2)),
        lambda m, a, b, g, v: m.linalg.vander(v),
        lambda m, a, b, g, v: m.linalg.vander(v, N=2),
        lambda m, a, b, g, v: m.linalg.vecdot(b, b, dim=-2),
        lambda m, a, b, g, v: m.linalg.cross(v[..., :3], b[..., :3, 0]),
        lambda m, a, b, g, v: m.linalg.diagonal(g, offset=1),
        lambda m, a, b, g, v: m.linalg.svd(g, full_matrices=True)[1],
        lambda m, a, b, g, v: m.linalg.ldl_factor(a),
        lambda m, a, b, g, v: m.linalg.ldl_solve(*m.linalg.ldl_factor(a), b),
        lambda m, a, b, g, v: m.cholesky_solve(b, m.linalg.cholesky(a)),
        lambda m, a, b, g, v: m.cholesky_inverse(m.linalg.cholesky(a), upper=False),
        lambda m, a, b, g, v: m.triangular_solve(b, a, transpose=True),
        lambda m, a, b, g, v: m.lu_unpack(*m.linalg.lu_factor(a)),
        lambda m, a, b, g, v: m.vander(v[0], increasing=False),
        lambda m, a, b, g, v: m.svd(g, compute_uv=False)[1],
        lambda m, a, b, g, v: m.geqrf(g),
        lambda m, a, b, g, v: m.ormqr(*m.geqrf(g), b[..., :1, :].expand(2, 5, 3)),
        lambda m, a, b, g, v: m.ormqr(*m.geqrf(g), g.mT, left=False, transpose=True),
        lambda m, a, b, g, v: m.vdot(v[0], v[1]),
    ]


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linalg_solvers_match_torch(torch_parity, dtype):
    a = spd(4, (2,), dtype)
    b = normal(2, 4, 3, dtype=dtype)
    g = normal(2, 5, 4, dtype=dtype)
    v = normal(2, 4, dtype=dtype)
    tol = 2e-4 if dtype == np.float32 else 1e-9
    torch_parity(_cases(), a, b, g, v, rtol=tol, atol=tol)


@pytest.mark.torch
def test_lstsq_matches_torch(torch_parity):
    a, b = normal(2, 5, 3), normal(2, 5, 2)
    torch_parity([lambda m, a, b: m.linalg.lstsq(a, b),
                  lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"),
                  lambda m, a, b: m.linalg.lstsq(a, b[..., 0], driver="gelss"),
                  lambda m, a, b: m.linalg.lstsq(a.mT, b[..., :3, :], driver="gelsd")],
                 a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.torch
def test_every_torch_linalg_name_exists():
    torch = pytest.importorskip("torch")
    names = {n for n in dir(torch.linalg) if not n.startswith("_")} - {"common_notes"}
    assert sorted(n for n in names if not hasattr(L, n)) == []


def _complex(*shape, dtype=np.complex128):
    return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_linalg_matches_torch(torch_parity, dtype):
    g = _complex(2, 4, 4, dtype=dtype)
    a = (g @ np.conj(np.swapaxes(g, -1, -2)) + 4 * np.eye(4)).astype(dtype)
    b = _complex(2, 4, 3, dtype=dtype)
    cases = [
        lambda m, a, b, g: m.linalg.eig(g),
        lambda m, a, b, g: m.linalg.eigvals(g),
        lambda m, a, b, g: m.linalg.eigvalsh(a),
        lambda m, a, b, g: m.linalg.inv(a),
        lambda m, a, b, g: m.linalg.solve(a, b),
        lambda m, a, b, g: m.linalg.det(g),
        lambda m, a, b, g: m.linalg.slogdet(g),
        lambda m, a, b, g: m.linalg.cholesky(a, upper=True),
        lambda m, a, b, g: m.linalg.svdvals(g),
        lambda m, a, b, g: m.linalg.matrix_norm(g),
        lambda m, a, b, g: m.linalg.matrix_norm(g, "nuc"),
        lambda m, a, b, g: m.linalg.lu_factor(g),
        lambda m, a, b, g: m.linalg.solve_triangular(a, b, upper=False),
        lambda m, a, b, g: m.linalg.matrix_exp(g / 4),
        lambda m, a, b, g: m.linalg.lstsq(g, b, driver="gelsd"),
        lambda m, a, b, g: m.linalg.vecdot(g, g),
    ]
    tol = 2e-4 if dtype == np.complex64 else 1e-9
    torch_parity(cases, a, b, g, rtol=tol, atol=tol)


def _canonical_eig(w, v):
    """Eigenpairs in a fixed order (by real, then imaginary part of the eigenvalue), each
    eigenvector turned so its largest entry is real and positive: eigenvectors are unique
    only up to a unit complex factor, and LAPACK builds (OpenBLAS's, MKL's) pick different
    ones and may list the eigenvalues in another order."""
    order = np.lexsort((w.imag.round(9), w.real.round(9)), axis=-1)
    w = np.take_along_axis(w, order, -1)
    v = np.take_along_axis(v, order[..., None, :], -1)
    big = np.take_along_axis(v, np.abs(v).argmax(-2)[..., None, :], -2)
    return w, v * (np.abs(big) / big)


@pytest.mark.torch
def test_eig_of_real_input_matches_torch():
    torch = pytest.importorskip("torch")
    a = normal(3, 4, 4)
    w, v = (x.numpy() for x in torcia.linalg.eig(t(a)))
    tw, tv = (x.numpy() for x in torch.linalg.eig(torch.from_numpy(a)))
    assert w.dtype == tw.dtype and v.dtype == tv.dtype
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=1e-10)  # A v = v diag(w)
    for ours, theirs in zip(_canonical_eig(w, v), _canonical_eig(tw, tv)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(np.sort_complex(torcia.linalg.eigvals(t(a)).numpy()),
                               np.sort_complex(tw), rtol=1e-9, atol=1e-10)


_EX_CALLS = {
    "inv_ex": lambda a, b: L.inv_ex(a),
    "solve_ex": lambda a, b: L.solve_ex(a, b),
    "cholesky_ex": lambda a, b: L.cholesky_ex(a),
    "lu_factor": lambda a, b: L.lu_factor(a),
    "lu_factor_ex": lambda a, b: L.lu_factor_ex(a),
    "lu_solve": lambda a, b: L.lu_solve(*L.lu_factor(a), b),
}


@pytest.mark.parametrize("name", sorted(_EX_CALLS))
@pytest.mark.parametrize("batch", [(), (2,)])
def test_factorizations_run_on_the_meta_device(name, batch):
    # the meta device holds no values: the info checks and the value-dependent branches
    # must not read them; shapes and dtypes as on the CPU
    a, b = t(spd(3, batch)), t(normal(*batch, 3, 2))
    cpu = _EX_CALLS[name](a, b)
    meta = _EX_CALLS[name](a.to("meta"), b.to("meta"))
    cpu, meta = (cpu, meta) if isinstance(cpu, tuple) else ((cpu,), (meta,))
    assert [(m.shape, m.dtype, m.device.type) for m in meta] == \
        [(c.shape, c.dtype, "meta") for c in cpu]


def test_ex_variants_give_the_values_of_the_plain_ones():
    # inv_ex and solve_ex go through the LU factors whatever info holds
    a, b = t(spd(4, (3,))) + t(normal(3, 4, 4)), t(normal(3, 4, 2))
    assert_close(L.inv_ex(a).inverse, L.inv(a))
    assert_close(L.solve_ex(a, b).result, L.solve(a, b))
    assert_close(L.solve_ex(a, b[..., 0]).result, L.solve(a, b[..., 0]))
    assert_close(L.cholesky_ex(a @ a.mT).L, L.cholesky(a @ a.mT))


@pytest.mark.parametrize("dtype", [torcia.float16, torcia.bfloat16])
@pytest.mark.parametrize("name", ["cholesky", "inv", "solve"])
def test_half_precision_linalg_as_its_ex_variant(name, dtype):
    # computed in float32 and rounded (torch refuses; torcia's documented leniency), in the
    # input's dtype (NumPy's LAPACK refuses float16 and answers bfloat16 in float64)
    a = t(spd(3)).to(dtype)
    args = (a,) if name != "solve" else (a, a[:, :1])
    plain, ex = getattr(L, name)(*args), getattr(L, name + "_ex")(*args)[0]
    assert plain.dtype is ex.dtype is dtype
    want = getattr(L, name)(*(x.float() for x in args))
    assert_close(plain.float(), want, atol=2e-2, rtol=2e-2)
    assert_close(ex.float(), want, atol=2e-2, rtol=2e-2)


def test_ldl_solve_refuses_pivots_that_are_not_a_factorisations():
    # LAPACK's sytrs reads pivots as row numbers without a check: junk ones must be refused
    # before it runs (PyTorch 2.13 crashes on some of these)
    a = torcia.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])
    ld, pivots = L.ldl_factor(a)
    assert pivots.tolist() == [-3, -3, 3]  # a 2x2 block, then a row
    assert_close(a @ L.ldl_solve(ld, pivots, torcia.eye(3)), torcia.eye(3), atol=1e-5, rtol=0)
    b = torcia.ones(3, 2)
    for junk, message in (([9, -100, 1], "not those of a factorisation"),
                          ([1, 2, 4], "not those of a factorisation"),
                          ([1, 2, -3], "not those of a factorisation"),
                          ([-1, -1, -1], "not those of a factorisation"),
                          ([1, 0, 3], r"\|pivot\| >= 1")):
        with pytest.raises(RuntimeError, match=message):
            L.ldl_solve(ld, torcia.tensor(junk, dtype=torcia.int32), b)
    for args, message in (((ld, pivots[:2], b), "pivots.shape to be the same"),
                          ((ld, pivots.float(), b), "pivots to be integers. Got Float"),
                          ((ld, pivots, b.double()), "same dtype"),
                          ((ld, pivots, torcia.ones(2, 2)), "each b matrix is 2 by 2")):
        with pytest.raises(RuntimeError, match=message):
            L.ldl_solve(*args)
