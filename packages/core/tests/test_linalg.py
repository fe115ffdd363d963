"""Matrix products and ``torcia.linalg``: closed forms (reconstructions, known inverses and
determinants), NumPy, and torch parity; the errors PyTorch raises."""

import math

import numpy as np
import pytest

import torcia
from torcia.testing import assert_close

RNG = np.random.default_rng(0)


def spd(n, batch=()):
    a = RNG.normal(size=batch + (n, n))
    return torcia.from_numpy(a @ np.swapaxes(a, -1, -2) + n * np.eye(n))


def test_matmul_shapes_and_broadcasting():
    a, b = RNG.normal(size=(2, 1, 3, 4)), RNG.normal(size=(5, 4, 2))
    out = torcia.from_numpy(a) @ torcia.from_numpy(b)
    assert out.shape == (2, 5, 3, 2)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12)
    v = torcia.tensor([1.0, 2.0])
    m = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (v @ m).tolist() == [7.0, 10.0] and (m @ v).tolist() == [5.0, 11.0]
    assert (v @ v).item() == 5.0
    assert torcia.mm(m, m).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert torcia.bmm(m[None], m[None]).shape == (1, 2, 2)
    assert torcia.dot(v, v).item() == 5.0
    assert torcia.outer(v, torcia.tensor([1.0, 0.0, 2.0])).tolist() == [[1, 0, 2], [2, 0, 4]]
    assert torcia.addmm(torcia.ones(2, 2), m, m, beta=2, alpha=0.5).tolist() == \
        [[5.5, 7.0], [9.5, 13.0]]
    assert torcia.tensordot(m, m, dims=1).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert torcia.tensordot(m, m, dims=([0, 1], [0, 1])).item() == 30.0
    assert torcia.einsum("ij,jk->ik", m, m).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert torcia.einsum("ii", m).item() == 5.0
    assert torcia.einsum("bi,bj->bij", [m, m]).shape == (2, 2, 2)


def test_product_errors():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                           r"\(2x3 and 2x3\)"):
        torcia.ones(2, 3) @ torcia.ones(2, 3)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: "
                                           "float32 != float64"):
        torcia.ones(2, 2) @ torcia.ones(2, 2, dtype=torcia.float64)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(2\) must match the size of "
                                           r"tensor b \(3\) at non-singleton dimension 0"):
        torcia.ones(2, 2, 3) @ torcia.ones(3, 3, 2)
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        torcia.tensor(1.0) @ torcia.ones(2)
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
        torcia.dot(torcia.ones(2, 2), torcia.ones(2))
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        torcia.bmm(torcia.ones(2, 2), torcia.ones(2, 2))


def test_norms():
    v = torcia.tensor([3.0, -4.0])
    assert torcia.linalg.vector_norm(v).item() == 5.0
    assert torcia.linalg.vector_norm(v, ord=1).item() == 7.0
    assert torcia.linalg.vector_norm(v, ord=-math.inf).item() == 3.0
    m = torcia.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert torcia.linalg.matrix_norm(m).item() == pytest.approx(math.sqrt(30))
    assert torcia.linalg.matrix_norm(m, ord=1).item() == 6.0  # max column sum
    assert torcia.linalg.matrix_norm(m, ord=math.inf).item() == 7.0  # max row sum
    assert torcia.linalg.matrix_norm(m, ord=-1).item() == 4.0
    s = np.linalg.svd(m.numpy().astype(np.float64), compute_uv=False)
    assert torcia.linalg.matrix_norm(m, ord=2).item() == pytest.approx(s[0], rel=1e-6)
    assert torcia.linalg.matrix_norm(m, ord="nuc").item() == pytest.approx(s.sum(), rel=1e-6)
    assert torcia.linalg.norm(m).item() == pytest.approx(math.sqrt(30))
    assert torcia.linalg.norm(v, ord=math.inf).item() == 4.0
    assert torcia.linalg.norm(m, ord=1).item() == 6.0  # 2-D input: a matrix norm
    assert torcia.linalg.norm(m, dim=1).tolist() == pytest.approx([math.sqrt(5), 5.0])
    batch = torcia.stack([m, 2 * m])
    assert torcia.linalg.matrix_norm(batch, keepdim=True).shape == (2, 1, 1)
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: Order 3 not supported"):
        torcia.linalg.matrix_norm(m, ord=3)


def test_inverse_solve_det():
    a = spd(4, (3,))
    assert_close(torcia.linalg.inv(a) @ a, torcia.eye(4, dtype=torcia.float64).expand(3, 4, 4))
    b = torcia.from_numpy(RNG.normal(size=(3, 4, 2)))
    x = torcia.linalg.solve(a, b)
    assert_close(a @ x, b)
    vec = torcia.from_numpy(RNG.normal(size=(3, 4)))
    xv = torcia.linalg.solve(a, vec)
    assert xv.shape == (3, 4)
    assert_close((a @ xv.unsqueeze(-1)).squeeze(-1), vec)
    xl = torcia.linalg.solve(a, b.mT, left=False)
    assert_close(xl @ a, b.mT)
    m = torcia.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torcia.float64)
    assert torcia.linalg.det(m).item() == pytest.approx(-2.0)
    sign, logabs = torcia.linalg.slogdet(m)
    assert sign.item() == -1.0 and logabs.item() == pytest.approx(math.log(2.0))
    assert torcia.linalg.det(torcia.eye(3) * 2).item() == pytest.approx(8.0)


def test_decompositions_reconstruct():
    a = torcia.from_numpy(RNG.normal(size=(2, 5, 3)))
    u, s, vh = torcia.linalg.svd(a, full_matrices=False)
    assert u.shape == (2, 5, 3) and s.shape == (2, 3) and vh.shape == (2, 3, 3)
    assert_close(u @ torcia.diag_embed(s) @ vh, a)
    assert (s[:, :-1] >= s[:, 1:]).all()
    assert torcia.linalg.svd(a).U.shape == (2, 5, 5)
    assert_close(torcia.linalg.svdvals(a), s)
    q, r = torcia.linalg.qr(a)
    assert_close(q @ r, a)
    assert_close(q.mT @ q, torcia.eye(3, dtype=torcia.float64).expand(2, 3, 3))
    assert_close(torcia.triu(r), r)
    assert torcia.linalg.qr(a, mode="complete").Q.shape == (2, 5, 5)
    p = spd(3)
    low = torcia.linalg.cholesky(p)
    assert_close(low @ low.mT, p)
    assert_close(torcia.tril(low), low)
    assert_close(torcia.linalg.cholesky(p, upper=True), low.mT)
    w, v = torcia.linalg.eigh(p)
    assert_close(v @ torcia.diag_embed(w) @ v.mT, p)
    assert (w[:-1] <= w[1:]).all()
    assert_close(torcia.linalg.eigvalsh(p), w)
    pinv = torcia.linalg.pinv(a)
    assert pinv.shape == (2, 3, 5)
    assert_close(a @ pinv @ a, a)


def test_linalg_errors():
    with pytest.raises(RuntimeError, match="linalg.inv: A must be batches of square matrices, "
                                           "but they are 2 by 3 matrices"):
        torcia.linalg.inv(torcia.ones(2, 3))
    with pytest.raises(RuntimeError, match="linalg.inv: Expected a floating point or complex "
                                           "tensor as input. Got Long"):
        torcia.linalg.inv(torcia.ones(2, 2, dtype=torcia.int64))
    with pytest.raises(RuntimeError, match="singular"):
        torcia.linalg.inv(torcia.ones(2, 2))
    with pytest.raises(RuntimeError, match="linalg.cholesky: The factorization could not be "
                                           "completed because the input is not "
                                           "positive-definite"):
        torcia.linalg.cholesky(-torcia.eye(2))
    with pytest.raises(RuntimeError, match=r"linalg.solve: Incompatible shapes of A and B for "
                                           r"the equation AX = B \(2x2 and 3x1\)"):
        torcia.linalg.solve(torcia.eye(2), torcia.ones(3))
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U'"):
        torcia.linalg.eigh(torcia.eye(2), UPLO="X")


@pytest.mark.torch
def test_linalg_matches_torch(torch_parity):
    a = spd(4, (2,)).numpy()
    b = RNG.normal(size=(2, 4, 3))
    g = RNG.normal(size=(3, 5))
    cases = [
        lambda m, a, b, g: m.linalg.inv(a),
        lambda m, a, b, g: m.linalg.solve(a, b),
        lambda m, a, b, g: m.linalg.det(a),
        lambda m, a, b, g: m.linalg.slogdet(a),
        lambda m, a, b, g: m.linalg.cholesky(a),
        lambda m, a, b, g: m.linalg.eigvalsh(a),
        lambda m, a, b, g: m.linalg.svdvals(g),
        lambda m, a, b, g: m.linalg.pinv(g),
        lambda m, a, b, g: m.linalg.norm(g),
        lambda m, a, b, g: m.linalg.norm(g, ord="nuc"),
        lambda m, a, b, g: m.linalg.norm(g, ord=-2),
        lambda m, a, b, g: m.linalg.vector_norm(g, ord=3, dim=1),
        lambda m, a, b, g: m.linalg.matrix_norm(b, ord=-math.inf),
        lambda m, a, b, g: m.einsum("bij,bjk->bik", a, b),
        lambda m, a, b, g: m.tensordot(a, b, dims=([2], [1])),
    ]
    torch_parity(cases, a, b, g, rtol=1e-9, atol=1e-12)


def test_top_level_aliases():
    m = torcia.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torcia.float64)
    assert torcia.det(m).item() == pytest.approx(-2.0)
    assert m.det().item() == pytest.approx(-2.0)
    assert math.isnan(torcia.logdet(m).item())
    assert torcia.logdet(torcia.eye(2, dtype=torcia.float64) * 3).item() == \
        pytest.approx(2 * math.log(3))
    assert torcia.logdet(torcia.zeros(2, 2)).item() == -math.inf
    assert_close(m.inverse() @ m, torcia.eye(2, dtype=torcia.float64))
    assert_close(torcia.pinverse(m), torcia.linalg.inv(m))
    assert torcia.slogdet(m).sign.item() == -1.0


def test_qr_mode_r_returns_the_whole_r():
    # NumPy's mode "r" returns R alone; it was unpacked as (Q, R), splitting R's rows
    a = np.random.default_rng(3).standard_normal((2, 5, 3))
    q, r = torcia.linalg.qr(torcia.tensor(a), mode="r")
    assert q.shape == (0,) and r.shape == (2, 3, 3)
    np.testing.assert_allclose(np.abs(r.numpy()), np.abs(np.linalg.qr(a, mode="r")), atol=1e-12)
    assert torcia.linalg.qr(torcia.tensor(a[0]), mode="r")[1].shape == (3, 3)
