"""More of PyTorch's names at ``torch`` and on ``torch.Tensor`` (the compatibility
sweep): values against PyTorch where it is installed, gradients by finite differences,
storages, in-place view ops and process-wide switches by their observable effects."""

import importlib.util

import numpy as np
import pytest

import torcia

RNG = np.random.default_rng(3)
A = RNG.uniform(0.1, 0.9, (3, 4))
B = RNG.uniform(-1, 1, (3, 4))
X4 = RNG.standard_normal((4, 3, 5))


def _np(x):
    if isinstance(x, (tuple, list)):
        return [_np(v) for v in x]
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _both(fn, *arrays):
    torch = pytest.importorskip("torch")
    ours = fn(torcia, *(torcia.from_numpy(a.copy()) for a in arrays))
    theirs = fn(torch, *(torch.from_numpy(a.copy()) for a in arrays))
    return ours, theirs


def _close(ours, theirs, rtol=1e-10, atol=1e-12):
    got, want = _np(ours), _np(theirs)
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w, rtol, atol)
        return
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert np.asarray(got).shape == np.asarray(want).shape


# name -> function of (lib, *tensors) and the NumPy inputs
PARITY = {
    "gradient": (lambda lib, a: lib.gradient(a), (A,)),
    "gradient_spacing": (lambda lib, a: lib.gradient(a, spacing=[0.5, 2.0]), (A,)),
    "gradient_edge2": (lambda lib, a: lib.gradient(a, dim=1, edge_order=2), (A,)),
    "gradient_coords": (lambda lib, a, x: lib.gradient(a, spacing=(x,), dim=1,
                                                       edge_order=2),
                        (A, np.array([0.0, 0.3, 1.0, 1.7]))),
    "gradient_coords1": (lambda lib, a, x: lib.gradient(a, spacing=(x,), dim=1),
                         (A, np.array([0.0, 0.3, 1.0, 1.7]))),
    "histogramdd": (lambda lib, a: lib.histogramdd(a[:, :2], bins=[3, 2]), (A,)),
    "histogramdd_range": (lambda lib, a: lib.histogramdd(
        a[:, :2], bins=2, range=[0.0, 1.0, 0.0, 1.0], density=True), (A,)),
    "nuclear_norm": (lambda lib, a: lib.nuclear_norm(a), (A,)),
    "index_reduce_prod": (lambda lib, a, b: lib.index_reduce(
        a, 0, lib.tensor([0, 2, 0]), b, "prod"), (A, B)),
    "index_reduce_mean": (lambda lib, a, b: a.index_reduce(
        1, lib.tensor([3, 3, 0, 1]), b, "mean", include_self=False), (A, B)),
    "index_reduce_amax": (lambda lib, a, b: lib.index_reduce(
        a, 0, lib.tensor([1, 1, 2]), b, "amax"), (A, B)),
    "index_reduce_amin": (lambda lib, a, b: lib.index_reduce(
        a, 0, lib.tensor([1, 1, 2]), b, "amin", include_self=False), (A, B)),
    "nonzero_static": (lambda lib, b: lib.nonzero_static(b > 0, size=4), (B,)),
    "nonzero_static_pad": (lambda lib, b: lib.nonzero_static(b > 2, size=2,
                                                             fill_value=7), (B,)),
    "as_strided_scatter": (lambda lib, a: lib.as_strided_scatter(
        a, lib.ones(2, 2, dtype=lib.float64), (2, 2), (4, 1), 1), (A,)),
    "conv_tbc": (lambda lib, x, w, b: lib.conv_tbc(x, w, b, 1),
                 (X4, RNG.standard_normal((2, 5, 3)), RNG.standard_normal(3))),
    "convolution": (lambda lib, x, w: lib.convolution(x, w, None, [1], [1], [1], False, [0],
                                                      1), (X4, RNG.standard_normal((2, 3, 2)))),
    "convolution_t": (lambda lib, x, w: lib.convolution(x, w, None, [2], [0], [1], True, [1],
                                                        1), (X4, RNG.standard_normal((3, 2, 2)))),
    "rnn_tanh_cell": (lambda lib, x, h, wi, wh: lib.rnn_tanh_cell(x, h, wi, wh, wi[:, 0],
                                                                  wh[:, 0]),
                      (A, B[:, :2], RNG.standard_normal((2, 4)),
                       RNG.standard_normal((2, 2)))),
    "rnn_relu_cell": (lambda lib, x, h, wi, wh: lib.rnn_relu_cell(x, h, wi, wh),
                      (A, B[:, :2], RNG.standard_normal((2, 4)),
                       RNG.standard_normal((2, 2)))),
    "lstm_cell": (lambda lib, x, h, wi, wh: lib.lstm_cell(x, (h, h * 2), wi, wh, wi[:, 0],
                                                          wh[:, 1]),
                  (A, B[:, :2], RNG.standard_normal((8, 4)), RNG.standard_normal((8, 2)))),
    "gru_cell": (lambda lib, x, h, wi, wh: lib.gru_cell(x, h, wi, wh, wi[:, 0], wh[:, 1]),
                 (A, B[:, :2], RNG.standard_normal((6, 4)), RNG.standard_normal((6, 2)))),
    "float_power_": (lambda lib, a: a.clone().float_power_(2.5), (A,)),
    "addmm_": (lambda lib, a, b: a[:, :3].clone().addmm_(b, b.t(), beta=0.5, alpha=2),
               (A, B)),
    "resize": (lambda lib, a: a.clone().resize_(2, 2), (A,)),
    "resize_grow": (lambda lib, a: a.clone().resize_(4, 4)[:3].reshape(-1)[:12], (A,)),
    "t_": (lambda lib, a: a.clone().t_(), (A,)),
    "transpose_": (lambda lib, x: x.clone().transpose_(0, 2), (X4,)),
    "swapaxes_": (lambda lib, x: x.clone().swapaxes_(1, 2), (X4,)),
    "swapdims_": (lambda lib, x: x.clone().swapdims_(0, 1), (X4,)),
    "squeeze_": (lambda lib, a: a.clone().reshape(3, 1, 4).squeeze_(), (A,)),
    "unsqueeze_": (lambda lib, a: a.clone().unsqueeze_(1), (A,)),
    "as_strided_": (lambda lib, a: a.clone().as_strided_((2, 3), (1, 2)), (A,)),
    "dim_order": (lambda lib, x: lib.tensor(x.permute(2, 0, 1).dim_order()), (X4,)),
    "empty_strided": (lambda lib: lib.tensor(lib.empty_strided((2, 3), (1, 2)).stride()), ()),
    "empty_permuted": (lambda lib: lib.tensor(lib.empty_permuted((2, 3, 4), (2, 0, 1))
                                              .stride()), ()),
}


@pytest.mark.parametrize("name", sorted(PARITY))
def test_matches_torch(name):
    fn, arrays = PARITY[name]
    ours, theirs = _both(fn, *arrays)
    _close(ours, theirs)


def test_sequence_rnns_match_torch():
    torch = pytest.importorskip("torch")
    for mod_name, fn_name in (("LSTM", "lstm"), ("GRU", "gru"), ("RNN", "rnn_tanh")):
        torch.manual_seed(0)
        mod = getattr(torch.nn, mod_name)(4, 3, num_layers=2, bidirectional=True,
                                          batch_first=True).double()
        x = torch.randn(2, 5, 4, dtype=torch.float64)
        h = torch.randn(4, 2, 3, dtype=torch.float64)
        hx = (h, h * 0.5) if mod_name == "LSTM" else h
        want = mod(x, hx)
        params = [torcia.from_numpy(p.detach().numpy().copy()) for p in mod._flat_weights]
        ours_hx = tuple(torcia.from_numpy(t.numpy().copy()) for t in hx) \
            if mod_name == "LSTM" else (torcia.from_numpy(h.numpy().copy()),)
        got = getattr(torcia, fn_name)(torcia.from_numpy(x.numpy().copy()), ours_hx, params,
                                       True, 2, 0.0, False, True, True)
        flat_want = [want[0], *(want[1] if mod_name == "LSTM" else (want[1],))]
        _close(list(got), [w.detach() for w in flat_want])


def test_packed_sequence_rnn_matches_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    mod = torch.nn.GRU(2, 3, bidirectional=True).double()
    seqs = [torch.randn(n, 2, dtype=torch.float64) for n in (4, 2, 1)]
    packed = torch.nn.utils.rnn.pack_sequence(seqs)
    h = torch.zeros(2, 3, 3, dtype=torch.float64)
    out, hn = mod(packed, h)
    params = [torcia.from_numpy(p.detach().numpy().copy()) for p in mod._flat_weights]
    got_out, got_h = torcia.gru(torcia.from_numpy(packed.data.numpy().copy()),
                                torcia.tensor(packed.batch_sizes.tolist()),
                                torcia.zeros(2, 3, 3, dtype=torcia.float64), params, True, 1,
                                0.0, False, True)
    _close([got_out, got_h], [out.data.detach(), hn.detach()])


def test_sync_batch_norm_statistics():
    # PyTorch implements these for CUDA only: the truth here is NumPy and autograd
    eps = 1e-5
    x = torcia.from_numpy(X4.copy())
    mean, var = X4.mean((0, 2)), X4.var((0, 2))
    got_mean, got_invstd = torcia.batch_norm_stats(x, eps)
    np.testing.assert_allclose(got_mean.numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(got_invstd.numpy(), 1 / np.sqrt(var + eps), rtol=1e-12)
    w, b = RNG.uniform(1, 2, 3), RNG.standard_normal(3)
    out = torcia.batch_norm_elemt(x, torcia.from_numpy(w), torcia.from_numpy(b), got_mean,
                                  got_invstd, eps)
    want = (X4 - mean[:, None]) / np.sqrt(var[:, None] + eps) * w[:, None] + b[:, None]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    # two "processes" holding 1 and 3 samples combine into the statistics of all 4
    parts = [torcia.batch_norm_stats(x[:1], eps), torcia.batch_norm_stats(x[1:], eps)]
    rm, rv = torcia.zeros(3, dtype=torcia.float64), torcia.ones(3, dtype=torcia.float64)
    g_mean, g_invstd = torcia.batch_norm_gather_stats_with_counts(
        x, torcia.stack([p[0] for p in parts]), torcia.stack([p[1] for p in parts]), rm, rv,
        0.1, eps, torcia.tensor([5.0, 15.0], dtype=torcia.float64))
    np.testing.assert_allclose(g_mean.numpy(), mean, rtol=1e-10)
    np.testing.assert_allclose(g_invstd.numpy(), 1 / np.sqrt(var + eps), rtol=1e-10)
    np.testing.assert_allclose(rm.numpy(), 0.1 * mean, rtol=1e-10)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * X4.var((0, 2), ddof=1), rtol=1e-10)
    same = torcia.batch_norm_gather_stats(
        x, torcia.stack([parts[1][0], parts[1][0]]), torcia.stack([parts[1][1]] * 2), None,
        None, 0.1, eps, 15)
    np.testing.assert_allclose(same[0].numpy(), parts[1][0].numpy(), rtol=1e-12)
    rm, rv = torcia.zeros(3, dtype=torcia.float64), torcia.ones(3, dtype=torcia.float64)
    u_mean, u_var = torcia.batch_norm_update_stats(x, rm, rv, 0.1)
    np.testing.assert_allclose(u_var.numpy(), var, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * X4.var((0, 2), ddof=1), rtol=1e-12)


def test_sync_batch_norm_backward_is_the_batch_norm_gradient():
    autograd = pytest.importorskip("torcia.autograd")
    eps = 1e-5
    g = torcia.from_numpy(RNG.standard_normal(X4.shape))
    w = torcia.from_numpy(RNG.uniform(1, 2, 3))
    x = torcia.from_numpy(X4.copy()).requires_grad_()
    w_leaf = w.clone().requires_grad_()
    b_leaf = torcia.zeros(3, dtype=torcia.float64, requires_grad=True)
    out = torcia.batch_norm_elemt(x, w_leaf, b_leaf, *torcia.batch_norm_stats(x, eps), eps)
    want_x, want_w, want_b = autograd.grad((out * g).sum(), (x, w_leaf, b_leaf))
    with torcia.no_grad():
        mean, invstd = torcia.batch_norm_stats(x, eps)
        sum_dy, sum_dy_xmu, grad_w, grad_b = torcia.batch_norm_backward_reduce(
            g, x, mean, invstd, w, True, True, True)
        grad_x = torcia.batch_norm_backward_elemt(g, x, mean, invstd, w, sum_dy, sum_dy_xmu,
                                                  torcia.tensor([4 * 5], dtype=torcia.int32))
    np.testing.assert_allclose(grad_x.numpy(), want_x.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad_w.numpy(), want_w.numpy(), rtol=1e-9)
    np.testing.assert_allclose(grad_b.numpy(), want_b.numpy(), rtol=1e-9)
    none = torcia.batch_norm_backward_reduce(g, x.detach(), mean, invstd, w, False, False,
                                             False)
    assert none == (None, None, None, None)



def test_sync_batch_norm_backward_elemt_reads_no_values_of_the_count():
    # the count summed as a tensor: the same gradient, and meta tensors (no values) run it
    args = [torcia.from_numpy(RNG.standard_normal(s)) for s in ((4, 3), (4, 3), (3,), (3,),
                                                                 (3,), (3,), (3,))]
    args[3] = args[3].abs() + 0.5
    counts = torcia.tensor([3, 5], dtype=torcia.int32)
    got = torcia.batch_norm_backward_elemt(*args, counts)
    want = torcia.batch_norm_backward_elemt(*args, 8)
    assert got.dtype is torcia.float64
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    meta = torcia.batch_norm_backward_elemt(*(a.to("meta") for a in args), counts.to("meta"))
    assert meta.device.type == "meta" and meta.shape == (4, 3)

def test_sparse_products_match_torch():
    torch = pytest.importorskip("torch")
    idx, val, dense = [[0, 2, 2], [1, 0, 2]], [1.0, 2.0, 3.0], RNG.standard_normal((3, 2))
    ours = torcia.sparse_coo_tensor(idx, val, (3, 3))
    theirs = torch.sparse_coo_tensor(idx, val, (3, 3))
    d_o, d_t = torcia.tensor(dense, dtype=torcia.float32), torch.tensor(dense,
                                                                         dtype=torch.float32)
    _close(torcia.dsmm(ours, d_o), torch.dsmm(theirs, d_t), rtol=1e-6)
    for name in ("hspmm", "hsmm", "smm"):
        got, want = getattr(torcia, name)(ours, d_o), getattr(torch, name)(theirs, d_t)
        _close(got.to_dense(), want.to_dense(), rtol=1e-6)
    base_o = torcia.tensor([[1.0, 0, 0], [0, 0, 0], [0, 0, 2.0]])[:, :2].to_sparse()
    base_t = torch.tensor([[1.0, 0, 0], [0, 0, 0], [0, 0, 2.0]])[:, :2].to_sparse()
    for name in ("sspaddmm", "saddmm"):
        got = getattr(torcia, name)(base_o, ours, d_o, beta=0.5, alpha=2.0)
        want = getattr(torch, name)(base_t, theirs, d_t, beta=0.5, alpha=2.0)
        _close(got.to_dense(), want.to_dense(), rtol=1e-6)
    m = torcia.tensor(A[:, :3]).sparse_mask(ours)
    _close(m.to_dense(), torch.tensor(A[:, :3]).sparse_mask(theirs).to_dense())
    assert torcia.sparse_coo_tensor(3).shape == torch.sparse_coo_tensor(3).shape


# ---------------------------------------------------------------------------------------
# gradients
# ---------------------------------------------------------------------------------------

GRAD = {
    "gradient": (lambda a: torcia.gradient(a, spacing=0.5)[1], (A,)),
    "gradient_coords": (lambda a, x: torcia.gradient(a, spacing=(x,), dim=1, edge_order=2)[0],
                        (A, np.array([0.0, 0.3, 1.0, 1.7]))),
    "nuclear_norm": (lambda a: torcia.nuclear_norm(a), (A,)),
    "index_reduce": (lambda a, b: torcia.index_reduce(a, 0, torcia.tensor([0, 2, 1]), b,
                                                      "prod"), (A, B)),
    "as_strided_scatter": (lambda a, s: torcia.as_strided_scatter(a, s, (2, 2), (4, 1), 1),
                           (A, B[:2, :2])),
    "conv_tbc": (lambda x, w, b: torcia.conv_tbc(x, w, b, 1),
                 (X4[:2], RNG.standard_normal((2, 5, 3)), RNG.standard_normal(3))),
    "lstm_cell": (lambda x, h, wi, wh: torcia.lstm_cell(x, (h, h), wi, wh)[1],
                  (A, B[:, :2], RNG.standard_normal((8, 4)), RNG.standard_normal((8, 2)))),
    "gru_cell": (lambda x, h, wi, wh: torcia.gru_cell(x, h, wi, wh),
                 (A, B[:, :2], RNG.standard_normal((6, 4)), RNG.standard_normal((6, 2)))),
    "batch_norm_elemt": (lambda x, w: torcia.batch_norm_elemt(
        x, w, None, *torcia.batch_norm_stats(x, 1e-5), 1e-5), (X4[:2], RNG.uniform(1, 2, 3))),
    "t_": (lambda a: (a * 1).t_() * torcia.arange(3.0, dtype=torcia.float64), (A,)),
    "unsqueeze_": (lambda a: (a * 1).unsqueeze_(0).squeeze_(0).transpose_(0, 1), (A,)),
}


@pytest.mark.parametrize("name", sorted(GRAD))
def test_gradcheck(name):
    gradcheck = pytest.importorskip("torcia.autograd").gradcheck
    fn, arrays = GRAD[name]
    inputs = tuple(torcia.from_numpy(a.copy()).requires_grad_() for a in arrays)
    assert gradcheck(fn, inputs)


def test_rnn_sequence_gradcheck():
    gradcheck = pytest.importorskip("torcia.autograd").gradcheck
    x = torcia.from_numpy(RNG.standard_normal((3, 2, 2))).requires_grad_()
    w = [torcia.from_numpy(RNG.standard_normal(s)).requires_grad_()
         for s in ((8, 2), (8, 2), (8,), (8,))]
    h = torcia.zeros(1, 2, 2, dtype=torcia.float64)

    def fn(x, *w):
        out, hn, cn = torcia.lstm(x, (h, h), list(w), True, 1, 0.0, False, False, False)
        return out.sum() + cn.sum()

    assert gradcheck(fn, (x, *w))


# ---------------------------------------------------------------------------------------
# in-place views, resizing, storages
# ---------------------------------------------------------------------------------------


def test_inplace_view_is_the_same_tensor_on_the_same_memory():
    x = torcia.arange(6.0).reshape(2, 3)
    ptr, version = x.data_ptr(), x._version
    assert x.t_() is x and x.shape == (3, 2) and x.data_ptr() == ptr
    assert x._version == version + 1
    x[0, 1] = 10.0  # the transposed position (1, 0) of the original layout
    assert x.t().reshape(-1).tolist() == [0.0, 1.0, 2.0, 10.0, 4.0, 5.0]


def test_inplace_view_on_a_leaf_that_requires_grad_is_refused():
    pytest.importorskip("torcia.autograd")
    w = torcia.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.t_()


def test_resize_keeps_memory_order_and_refuses_grad():
    x = torcia.arange(6.0)
    assert x.resize_(2, 2).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert x.resize_(3, 3).reshape(-1)[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    y = torcia.zeros(4)
    assert y.resize_as_(torcia.zeros(2, 1)).shape == (2, 1)
    with pytest.warns(UserWarning, match="deprecated"):
        assert torcia.arange(6.0).resize(3, 2).shape == (3, 2)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="preserving the number"):
        torcia.arange(6.0).resize(4)
    pytest.importorskip("torcia.autograd")
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        torcia.ones(2, requires_grad=True).resize_(3)


def test_storage_shares_the_tensors_memory():
    x = torcia.tensor([1.0, 2.0, 3.0])
    view = x[1:]
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        s = view.storage()
    assert s.tolist() == [1.0, 2.0, 3.0] and s.dtype is torcia.float32 and len(s) == 3
    assert s.element_size() == 4 and s.nbytes() == 12 and s.data_ptr() == x.data_ptr()
    s[0] = 7.0
    assert x[0].item() == 7.0
    u = x.untyped_storage()
    assert u.nbytes() == 12 and u.size() == 12 and u.element_size() == 1
    assert torcia.is_storage(u) and torcia.is_storage(s) and not torcia.is_storage(x)
    assert x.storage_type() is torcia.FloatStorage
    assert torcia.zeros(1, dtype=torcia.int64).storage_type() is torcia.LongStorage


def test_legacy_storages_and_set_():
    s = torcia.FloatStorage([1.0, 2.0, 3.0, 4.0])
    assert s.dtype is torcia.float32 and s.type() == "torcia.FloatStorage"
    t = torcia.empty(0).set_(s, 1, (2,), (1,))
    assert t.tolist() == [2.0, 3.0]
    t[0] = 9.0
    assert s.tolist() == [1.0, 9.0, 3.0, 4.0]
    assert torcia.LongStorage(3).tolist() == [0, 0, 0]
    a = torcia.zeros(2, 2)
    b = torcia.empty(0).set_(a)
    assert b.is_set_to(a) and not b.is_set_to(a.t())
    with pytest.raises(RuntimeError, match="out of bounds"):
        torcia.empty(0).set_(s, 3, (2,), (1,))
    whole = torcia.empty(0).set_(torcia.UntypedStorage(8))
    assert whole.shape == (2,) and whole.tolist() == [0.0, 0.0]


def test_storage_semantics_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (torcia, torch):
        x = lib.arange(6, dtype=lib.int16)
        u = x.untyped_storage()
        assert (u.nbytes(), len(u), u.element_size()) == (12, 12, 1)
        assert lib.ShortStorage(2).size() == 2
        assert x.storage_type().__name__ == "ShortStorage"


# ---------------------------------------------------------------------------------------
# construction, queries and small functions
# ---------------------------------------------------------------------------------------


def test_frombuffer_and_from_file(tmp_path):
    buf = bytearray(np.arange(4, dtype=np.float32).tobytes())
    t = torcia.frombuffer(buf, dtype=torcia.float32, count=2, offset=4)
    assert t.tolist() == [1.0, 2.0]
    t[0] = 5.0  # shares the buffer
    assert np.frombuffer(buf, dtype=np.float32)[1] == 5.0
    with pytest.warns(UserWarning, match="not writable"):
        assert torcia.frombuffer(b"\x01\x02", dtype=torcia.uint8).tolist() == [1, 2]
    with pytest.raises(ValueError, match="multiple of element size"):
        torcia.frombuffer(bytearray(3), dtype=torcia.int16)
    path = tmp_path / "x.bin"
    np.arange(5, dtype=np.float64).tofile(path)
    assert torcia.from_file(str(path), size=3, dtype=torcia.float64).tolist() == [0, 1, 2]
    shared = torcia.from_file(str(path), shared=True, size=5, dtype=torcia.float64)
    shared[0] = 42.0
    shared.numpy().flush()
    assert np.fromfile(path, dtype=np.float64)[0] == 42.0
    with pytest.raises(RuntimeError, match="unexpected EOF"):
        torcia.from_file(str(path), size=9, dtype=torcia.float64)


def test_default_device_and_tensor_type():
    assert torcia.get_default_device() == torcia.device("cpu")
    torcia.set_default_device("meta")
    try:
        assert torcia.zeros(2).device.type == "meta"
        assert torcia.tensor([1.0]).device.type == "meta"
        assert torcia.arange(3).device.type == "meta"
        assert torcia.get_default_device().type == "meta"
    finally:
        torcia.set_default_device(None)
    assert torcia.zeros(1).device.type == "cpu"
    torcia.set_default_tensor_type(torcia.DoubleTensor)
    try:
        assert torcia.zeros(1).dtype is torcia.float64
    finally:
        torcia.set_default_tensor_type("torch.FloatTensor")
    assert torcia.get_default_dtype() is torcia.float32
    with pytest.raises(TypeError, match="only floating-point types"):
        torcia.set_default_tensor_type(torcia.LongTensor)


def test_autocast_setters():
    # float16 on the CPU, as PyTorch allows: bfloat16 needs the optional ml_dtypes
    a = torcia.ones(2, 2)
    torcia.set_autocast_dtype("cpu", torcia.float16)
    torcia.set_autocast_enabled("cpu", True)
    try:
        assert torcia.is_autocast_enabled("cpu") and (a @ a).dtype is torcia.float16
        assert torcia.get_autocast_dtype("cpu") is torcia.float16
        with torcia.autocast("cpu", enabled=False):
            assert (a @ a).dtype is torcia.float32
        assert (a @ a).dtype is torcia.float16
    finally:
        torcia.set_autocast_enabled("cpu", False)
        torcia.set_autocast_cpu_dtype(torcia.bfloat16)
    assert not torcia.is_autocast_enabled("cpu") and (a @ a).dtype is torcia.float32
    assert torcia.get_autocast_cpu_dtype() is torcia.bfloat16
    torcia.set_autocast_cpu_enabled(True)
    assert torcia.is_autocast_cpu_enabled()
    torcia.set_autocast_cpu_enabled(False)
    torcia.set_autocast_gpu_dtype(torcia.bfloat16)
    assert torcia.get_autocast_gpu_dtype() is torcia.bfloat16
    torcia.set_autocast_gpu_dtype(torcia.float16)
    assert torcia.autocast_increment_nesting() == 1
    assert torcia.autocast_decrement_nesting() == 0
    torcia.set_autocast_cache_enabled(True)
    assert torcia.GradScaler is torcia.amp.GradScaler


def test_anomaly_functions():
    autograd = pytest.importorskip("torcia.autograd")
    assert not torcia.is_anomaly_enabled()
    torcia.set_anomaly_enabled(True, check_nan=False)
    try:
        assert torcia.is_anomaly_enabled() and autograd.is_anomaly_enabled()
        assert not torcia.is_anomaly_check_nan_enabled()
    finally:
        torcia.set_anomaly_enabled(False)
    assert not torcia.is_anomaly_enabled()


def test_queries_and_small_methods():
    x = torcia.tensor([1.0, 2.0])
    assert not torcia.is_conj(x) and not torcia.is_neg(x) and not x.is_neg()
    assert x.name is None and x.const_data_ptr() == x.data_ptr()
    with pytest.warns(UserWarning, match="volatile was removed"):
        assert x.volatile is False
    assert x.cfloat().dtype is torcia.complex64 and x.cdouble().dtype is torcia.complex128
    assert x.sparse_dim() == 0 and x.dense_dim() == 1 and not x.is_distributed()
    assert x.clone().map_(torcia.tensor([3.0, 4.0]), lambda a, b: a * b).tolist() == [3, 8]
    assert x.clone().map2_(x, x, lambda a, b, c: a + b + c).tolist() == [3.0, 6.0]
    loaded = torcia.zeros(2).module_load(x)
    assert loaded.tolist() == [1.0, 2.0]
    assert x.module_load(torcia.ones(2), assign=True).tolist() == [1.0, 1.0]

    class Mine(torcia.Tensor):
        pass

    m = x.as_subclass(Mine)
    assert type(m) is Mine and m.tolist() == [1.0, 2.0] and m.data_ptr() == x.data_ptr()
    assert x.new_empty_strided((2, 2), (1, 2)).stride() == (1, 2)
    if _has_autograd():
        w = torcia.ones(2, requires_grad=True)
        alias = w.as_subclass(Mine)
        assert type(alias) is Mine and not alias.is_leaf and alias.requires_grad
        (alias * 2).sum().backward()
        assert w.grad.tolist() == [2.0, 2.0]
    assert torcia.zeros(1).layout is torcia.strided and isinstance(torcia.strided,
                                                                   torcia.layout)
    assert isinstance(torcia.channels_last, torcia.memory_format)
    assert torcia.thread_safe_generator() is None
    torcia.init_num_threads()


def _has_autograd():
    return importlib.util.find_spec("torcia.autograd") is not None


def test_cond_and_feature_dropout():
    x = torcia.tensor([1.0, -2.0])
    assert torcia.cond(torcia.tensor(True), lambda v: v * 2, lambda v: v, (x,)).tolist() == \
        [2.0, -4.0]
    assert torcia.cond(False, lambda v: v * 2, lambda v: v - 1, [x]).tolist() == [0.0, -3.0]
    with pytest.raises(RuntimeError, match="single-element"):
        torcia.cond(x > 0, lambda v: v, lambda v: v, (x,))
    torcia.manual_seed(0)
    out = torcia.feature_dropout(torcia.ones(8, 16, 5), 0.5, True)
    per_map = out.reshape(8 * 16, 5)
    # whole feature maps are dropped or kept (scaled by 2)
    assert set(np.unique(per_map.numpy().std(axis=1)).tolist()) == {0.0}
    assert set(np.unique(per_map.numpy()).tolist()) <= {0.0, 2.0}
    y = torcia.ones(4, 3)
    assert torcia.feature_dropout_(y, 0.5, False) is y
    z = torcia.ones(100)
    torcia.dropout_(z, 0.5, True)
    assert set(np.unique(z.numpy()).tolist()) <= {0.0, 2.0}


def test_inplace_top_level_functions():
    x = torcia.tensor([0.25, 0.5])
    assert torcia.logit_(x) is x and x.tolist() == pytest.approx([np.log(1 / 3), 0.0])
    y = torcia.tensor([0.5])
    torcia.sinc_(y)
    assert y.item() == pytest.approx(np.sinc(0.5))
    z = torcia.tensor([2.0])
    torcia.xlogy_(z, torcia.tensor([np.e]))
    assert z.item() == pytest.approx(2.0)
    with pytest.raises(RuntimeError, match="float_power_ has dtype Float"):
        torcia.ones(2).float_power_(2)
    w = torcia.tensor([[3.0, 4.0], [0.3, 0.4]])
    torcia.embedding_renorm_(w, torcia.tensor([0, 1]), 1.0, 2.0)
    np.testing.assert_allclose(w.numpy(), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)


def test_stream_and_event_on_cpu():
    s = torcia.Stream()
    assert s.query() and s.device_type == "cpu"
    e = s.record_event(torcia.Event(enable_timing=True))
    end = torcia.Event(enable_timing=True)
    end.record()
    assert e.query() and e.elapsed_time(end) >= 0.0
    with pytest.raises(RuntimeError, match="enable_timing"):
        torcia.Event().elapsed_time(end)


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="Expected reduce to be one of"):
        torcia.index_reduce(torcia.zeros(3), 0, torcia.tensor([0]), torcia.ones(1), "sum")
    with pytest.raises(RuntimeError, match="physical_layout"):
        torcia.empty_permuted((2, 3), (0,))
    with pytest.raises(RuntimeError, match="edge_order"):
        torcia.gradient(torcia.ones(3), edge_order=3)
    with pytest.raises(RuntimeError, match="2 dimensions"):
        torcia.nuclear_norm(torcia.ones(2, 2, 2))


def test_device_modules():
    assert torcia.get_device_module("cpu") is torcia.cpu
    assert torcia.get_device_module(torcia.device("cpu")) is torcia.cpu
    assert torcia.get_device_module() is (torcia.cuda if torcia.cuda.is_available()
                                          else torcia.cpu)
    with pytest.raises(RuntimeError, match="does not have a corresponding module"):
        torcia.get_device_module("meta")
    assert torcia.cpu.is_available() and torcia.cpu.device_count() == 1
    assert torcia.cpu.current_device() == "cpu" and torcia.cpu.current_stream().query()
    with torcia.cpu.stream(torcia.cpu.current_stream()) as s:
        assert s.device_type == "cpu"
    torcia.cpu.synchronize()
    with pytest.raises(ValueError, match="expected a CPU device"):
        torcia.cpu.set_device("cuda:0")


def test_device_modules_match_torch():
    torch = pytest.importorskip("torch")
    for name in ("is_available", "device_count", "current_device"):
        assert getattr(torcia.cpu, name)() == getattr(torch.cpu, name)()
    assert torch.get_device_module("cpu") is torch.cpu
