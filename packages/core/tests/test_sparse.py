"""Sparse COO tensors: construction, coalesce, to_dense/to_sparse, sparse @ dense with
gradients, against PyTorch where installed."""

import numpy as np
import pytest

import torcia

IDX = [[0, 1, 1, 2, 0], [2, 0, 2, 1, 2]]
VAL = [1.0, 2.0, 3.0, 4.0, 5.0]


def test_construct_and_inspect():
    s = torcia.sparse_coo_tensor(IDX, VAL, (3, 3))
    assert s.is_sparse and s.layout == torcia.sparse_coo and s.shape == (3, 3)
    assert s._nnz() == 5 and s.sparse_dim() == 2 and s.dense_dim() == 0
    assert not s.is_coalesced()
    with pytest.raises(RuntimeError, match="coalesce"):
        s.indices()
    c = s.coalesce()
    assert c.is_coalesced() and c._nnz() == 4
    assert c.indices().tolist() == [[0, 1, 1, 2], [2, 0, 2, 1]]
    assert c.values().tolist() == [6.0, 2.0, 3.0, 4.0]
    assert s.to_dense().tolist() == [[0, 0, 6], [2, 0, 3], [0, 4, 0]]
    assert torcia.sparse_coo_tensor(IDX, VAL).shape == (3, 3)


def test_bad_input_is_named():
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        torcia.sparse_coo_tensor(IDX, VAL, (2, 3))
    with pytest.raises(RuntimeError, match="same nnz"):
        torcia.sparse_coo_tensor(IDX, VAL[:3], (3, 3))
    s = torcia.sparse_coo_tensor(IDX, VAL, (3, 3))
    with pytest.raises(NotImplementedError, match="Could not run 'softmax'.*SparseCPU"):
        s.softmax(0)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torcia.sparse.mm(s, torcia.ones(4, 2))


def test_to_sparse_round_trip():
    dense = torcia.tensor([[0.0, 1.5, 0.0], [0.0, 0.0, -2.0]])
    s = dense.to_sparse()
    assert s.is_coalesced() and s.indices().tolist() == [[0, 1], [1, 2]]
    assert torcia.equal(s.to_dense(), dense)
    assert dense.to_dense() is dense
    blocks = torcia.tensor([[[0.0, 0.0], [1.0, 2.0]], [[0.0, 0.0], [0.0, 0.0]]])
    sb = blocks.to_sparse(sparse_dim=2)
    assert sb.dense_dim() == 1 and sb._nnz() == 1 and torcia.equal(sb.to_dense(), blocks)


def test_mm_and_aliases():
    s = torcia.sparse_coo_tensor(IDX, VAL, (3, 3))
    x = torcia.arange(6.0).reshape(3, 2)
    want = s.to_dense() @ x
    for got in (torcia.sparse.mm(s, x), torcia.spmm(s, x), s @ x, s.mm(x)):
        assert torcia.allclose(got, want)
    assert torcia.allclose(torcia.sparse.mm(x.t(), s), x.t() @ s.to_dense())
    assert torcia.allclose(torcia.sparse.mm(s, torcia.ones(3)), s.to_dense().sum(1))
    assert torcia.allclose((s * 2).to_dense(), s.to_dense() * 2)
    assert torcia.allclose(s.t().to_dense(), s.to_dense().t())
    assert torcia.allclose((s + s).to_dense(), 2 * s.to_dense())


def test_mm_gradients():
    gradcheck = pytest.importorskip("torcia.autograd").gradcheck
    idx = torcia.tensor(IDX)
    values = torcia.tensor(VAL, dtype=torcia.float64, requires_grad=True)
    dense = torcia.randn(3, 2, dtype=torcia.float64, requires_grad=True)

    def f(v, d):
        return torcia.sparse.mm(torcia.sparse_coo_tensor(idx, v, (3, 3)), d)

    assert gradcheck(f, (values, dense))
    assert gradcheck(lambda v: torcia.sparse_coo_tensor(idx, v, (3, 3)).to_dense(), (values,))
    assert gradcheck(lambda v: torcia.sparse_coo_tensor(idx, v, (3, 3)).coalesce().values(),
                     (values,))


def test_matches_torch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torcia.autograd")
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 5, size=(2, 12))
    val = rng.standard_normal(12).astype(np.float32)
    dense = rng.standard_normal((5, 3)).astype(np.float32)
    ts = torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(val), (5, 5))
    ours = torcia.sparse_coo_tensor(torcia.from_numpy(idx), torcia.from_numpy(val), (5, 5))
    np.testing.assert_allclose(ours.to_dense().numpy(), ts.to_dense().numpy(), rtol=1e-6)
    tc, oc = ts.coalesce(), ours.coalesce()
    np.testing.assert_array_equal(oc.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(oc.values().numpy(), tc.values().numpy(), rtol=1e-6)
    tv = torch.from_numpy(val).requires_grad_()
    td = torch.from_numpy(dense).requires_grad_()
    ov = torcia.from_numpy(val).requires_grad_()
    od = torcia.from_numpy(dense).requires_grad_()
    out_t = torch.sparse.mm(torch.sparse_coo_tensor(torch.from_numpy(idx), tv, (5, 5)), td)
    out_o = torcia.sparse.mm(torcia.sparse_coo_tensor(torcia.from_numpy(idx), ov, (5, 5)), od)
    np.testing.assert_allclose(out_o.detach().numpy(), out_t.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    (out_t ** 2).sum().backward()
    (out_o ** 2).sum().backward()
    np.testing.assert_allclose(od.grad.numpy(), td.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ov.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-5)
    d = rng.standard_normal((3, 4)).astype(np.float32) * (rng.random((3, 4)) > 0.5)
    np.testing.assert_array_equal(torcia.from_numpy(d).to_sparse().indices().numpy(),
                                  torch.from_numpy(d).to_sparse().indices().numpy())


def test_torch_level_mm_and_matmul_take_sparse():
    s = torcia.sparse_coo_tensor(IDX, VAL, (3, 3))
    x = torcia.ones(3, 2)
    want = s.to_dense() @ x
    assert torcia.allclose(torcia.mm(s, x), want)
    assert torcia.allclose(torcia.matmul(s, x), want)
    assert torcia.allclose(x.t() @ s, x.t() @ s.to_dense())


def test_result_type_and_alpha_take_sparse_tensors():
    # from the tensor's dtype and ndim, as for a dense one (it has no dense array to read)
    s = torcia.sparse_coo_tensor(IDX, VAL, (3, 3))
    assert torcia.result_type(s, 1) is s.dtype
    assert torcia.result_type(s, torcia.tensor(1.0, dtype=torcia.float64)) is s.dtype
    assert torcia.result_type(s.to(torcia.int64), 2.5) is torcia.float32
    with pytest.raises(RuntimeError, match="Boolean alpha only supported"):
        torcia.add(torcia.ones(3, 3), s, alpha=True)
