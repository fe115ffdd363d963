"""Sparse gradients for optimizers: nn.Embedding(sparse=True)'s gradient (by hand and
against torch), SparseAdam's lazy update (by hand, replayed in float64, and against torch
over steps with repeated and padding rows), SGD taking sparse gradients, and the other
optimizers refusing them in PyTorch's words."""

import numpy as np
import pytest

import torcia

RNG = np.random.default_rng(2)


def _coo(lib, shape=(4, 5), nnz=7, seed=0):
    gen = np.random.default_rng(seed)
    idx = np.stack([gen.integers(0, n, nnz) for n in shape])
    return lib.sparse_coo_tensor(lib.from_numpy(idx), lib.from_numpy(gen.standard_normal(nnz)),
                                 shape)


def test_sparse_embedding_gradient_by_hand():
    emb = torcia.nn.Embedding(5, 2, sparse=True, padding_idx=1)
    emb(torcia.tensor([[0, 1], [3, 0]])).sum().backward()
    g = emb.weight.grad
    # one entry per looked-up row but the padding one, not coalesced
    assert g.is_sparse and not g.is_coalesced() and g.shape == (5, 2)
    assert g._indices().tolist() == [[0, 3, 0]] and g._values().tolist() == [[1.0, 1.0]] * 3
    emb(torcia.tensor([4])).sum().backward()
    assert g is not emb.weight.grad and emb.weight.grad._nnz() == 4
    assert emb.weight.grad.to_dense()[:, 0].tolist() == [2.0, 0.0, 0.0, 1.0, 1.0]


def test_sparse_adam_by_hand():
    w = torcia.nn.Parameter(torcia.zeros(3, 1, dtype=torcia.float64))
    opt = torcia.optim.SparseAdam([w], lr=0.1)
    for g in ([[1.0]], [[2.0]]):
        w.grad = None
        w.grad = torcia.sparse_coo_tensor([[2]], torcia.tensor(g, dtype=torcia.float64), (3, 1))
        opt.step()
    # row 2, step 1: m = 0.1, v = 0.001, step size 0.1 sqrt(0.001) / 0.1, move m / sqrt(v)
    # step 2: m = 0.29, v = 0.004999, step size 0.1 sqrt(1 - 0.999^2) / (1 - 0.9^2)
    m1, v1 = 0.1, 0.001
    w1 = -0.1 * np.sqrt(1 - 0.999) / (1 - 0.9) * m1 / (np.sqrt(v1) + 1e-8)
    m2, v2 = 0.9 * m1 + 0.1 * 2.0, 0.999 * v1 + 0.001 * 4.0
    w2 = w1 - 0.1 * np.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2) * m2 / (np.sqrt(v2) + 1e-8)
    assert w[0, 0].item() == 0.0 and w[1, 0].item() == 0.0
    assert w[2, 0].item() == pytest.approx(w2, rel=1e-12)
    with pytest.raises(RuntimeError, match="does not support dense gradients"):
        w.grad = torcia.ones(3, 1, dtype=torcia.float64)
        opt.step()
    with pytest.raises(ValueError, match="SparseAdam requires dense parameter tensors"):
        torcia.optim.SparseAdam([_coo(torcia)])
    for name in ("Adam", "RMSprop"):
        w.grad = torcia.sparse_coo_tensor([[0]], torcia.ones(1, 1, dtype=torcia.float64),
                                          (3, 1))
        with pytest.raises(RuntimeError, match=f"{name} does not support sparse gradients"):
            getattr(torcia.optim, name)([w]).step()


def test_sgd_takes_sparse_gradients():
    w = torcia.nn.Parameter(torcia.ones(3, 2))
    w.grad = torcia.sparse_coo_tensor([[0, 2, 0]], torcia.ones(3, 2), (3, 2))
    torcia.optim.SGD([w], lr=0.5).step()
    # row 0 appears twice: 1 - 0.5 * 2
    assert w[:, 0].tolist() == [0.0, 1.0, 0.5]


@pytest.mark.torch
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("maximize", [False, True])
def test_embedding_and_sparse_adam_match_torch(padding_idx, maximize):
    pytest.importorskip("torch")
    import torch

    weight = RNG.standard_normal((8, 3))
    batches = [np.array([[1, 2, 1], [5, 2, 0]]), np.array([[7, 7, 3]]), np.array([[2, 6, 6]])]

    def run(lib):
        emb = lib.nn.Embedding(8, 3, sparse=True, padding_idx=padding_idx).double()
        with lib.no_grad():
            emb.weight.copy_(lib.from_numpy(weight))
        opt = lib.optim.SparseAdam(emb.parameters(), lr=0.05, maximize=maximize)
        grads = []
        for batch in batches:
            opt.zero_grad()
            out = emb(lib.from_numpy(batch))
            (out * out).sum().backward()
            g = emb.weight.grad
            grads.append((g._indices().numpy().copy(), g._values().detach().numpy().copy()))
            opt.step()
        return emb.weight.detach().numpy(), grads

    (wo, go), (wt, gt) = run(torcia), run(torch)
    for (oi, ov), (ti, tv) in zip(go, gt):
        np.testing.assert_array_equal(oi, ti)
        np.testing.assert_allclose(ov, tv, rtol=1e-12)
    np.testing.assert_allclose(wo, wt, rtol=1e-10, atol=1e-12)
