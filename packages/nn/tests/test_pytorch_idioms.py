"""What real PyTorch programs hit first, in torcia-nn: dropout2d's rank rules, BCELoss at
probabilities 0 and 1, RNN.flatten_parameters, nn.parallel, PyTorch's module paths."""

import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import nn
from torcia.autograd import gradcheck


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in caught]


def test_dropout2d_on_3d_input_is_channelwise_over_n_c():
    torcia.manual_seed(0)
    out, messages = _warnings_of(lambda: F.dropout2d(torcia.ones(8, 6, 5), 0.5))
    assert any("Received a 3D input to dropout2d" in m for m in messages)
    # one draw per (n, c) row: every row is all 0 or all 2
    rows = out.numpy().reshape(48, 5)
    assert all(len(set(r.tolist())) == 1 for r in rows)
    assert 0 < (rows[:, 0] == 0).sum() < 48


def test_dropout2d_on_2d_input_warns_and_drops_elements():
    torcia.manual_seed(0)
    out, messages = _warnings_of(lambda: F.dropout2d(torcia.ones(20, 30), 0.5))
    assert any("Received a 2-D input to dropout2d" in m for m in messages)
    flat = out.numpy()
    assert set(np.unique(flat).tolist()) == {0.0, 2.0}
    # elementwise: rows are mixed, unlike a channel-wise draw
    assert any(len(set(r.tolist())) == 2 for r in flat)
    _, quiet = _warnings_of(lambda: F.dropout2d(torcia.ones(1, 2, 3, 3)))
    assert quiet == []


def test_dropout2d_module_follows_the_function():
    torcia.manual_seed(0)
    out, messages = _warnings_of(lambda: nn.Dropout2d(0.5)(torcia.ones(4, 3, 5)))
    assert any("3D input" in m for m in messages)
    assert all(len(set(r.tolist())) == 1 for r in out.numpy().reshape(12, 5))


def test_bce_gradient_is_finite_at_0_and_1():
    p = torcia.tensor([0.0, 1.0, 0.5, 0.0, 1.0], requires_grad=True)
    t = torcia.tensor([1.0, 0.0, 1.0, 0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = nn.BCELoss()(p, t)
        loss.backward()
    assert loss.item() == pytest.approx((100 + 100 + np.log(2)) / 5, rel=1e-6)
    g = p.grad.numpy()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, [-2e11, 2e11, -0.4, 0.0, 0.0], rtol=1e-5)


def test_bce_matches_torch_values_and_gradients():
    torch = pytest.importorskip("torch")
    p = np.array([0.0, 1.0, 0.3, 0.999, 1e-8, 0.0], dtype=np.float32)
    t = np.array([1.0, 0.0, 1.0, 0.0, 0.5, 0.0], dtype=np.float32)
    w = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 3.0], dtype=np.float32)
    for reduction in ("mean", "sum", "none"):
        ours = torcia.tensor(p, requires_grad=True)
        theirs = torch.tensor(p, requires_grad=True)
        lo = F.binary_cross_entropy(ours, torcia.tensor(t), torcia.tensor(w),
                                    reduction=reduction)
        lt = torch.nn.functional.binary_cross_entropy(theirs, torch.tensor(t), torch.tensor(w),
                                                      reduction=reduction)
        np.testing.assert_allclose(lo.detach().numpy(), lt.detach().numpy(), rtol=1e-5)
        lo.sum().backward()
        lt.sum().backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4)


def test_bce_gradcheck():
    p = torcia.tensor([0.2, 0.5, 0.9], dtype=torcia.float64, requires_grad=True)
    t = torcia.tensor([0.0, 0.7, 1.0], dtype=torcia.float64, requires_grad=True)
    assert gradcheck(lambda a, b: F.binary_cross_entropy(a, b), (p, t))


def test_rnn_flatten_parameters_keeps_the_module():
    for cls in (nn.RNN, nn.LSTM, nn.GRU):
        m = cls(3, 4, num_layers=2)
        before = {k: v.clone() for k, v in m.state_dict().items()}
        assert m.flatten_parameters() is None
        out, _ = m(torcia.randn(5, 2, 3))
        assert out.shape == (5, 2, 4)
        assert all(torcia.equal(before[k], v) for k, v in m.state_dict().items())


def test_data_parallel_on_one_device():
    torcia.manual_seed(0)
    inner = nn.Linear(3, 2)
    model = nn.DataParallel(inner)
    x = torcia.randn(4, 3)
    assert torcia.equal(model(x), inner(x))
    assert sorted(model.state_dict()) == ["module.bias", "module.weight"]
    assert model.module is inner
    from torcia.nn.parallel import data_parallel

    assert torcia.equal(data_parallel(inner, x), inner(x))
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        nn.DataParallel(inner, device_ids=["cpu", "cpu"])


def test_ddp_reachable_from_nn_parallel():
    dist = pytest.importorskip("torcia.distributed")
    from torcia.nn.parallel import DistributedDataParallel

    assert DistributedDataParallel is dist.DistributedDataParallel


def test_pytorch_module_paths():
    from torcia.nn.modules.activation import MultiheadAttention
    from torcia.nn.modules.linear import NonDynamicallyQuantizableLinear

    assert MultiheadAttention is nn.MultiheadAttention
    mha = nn.MultiheadAttention(8, 2)
    assert isinstance(mha.out_proj, NonDynamicallyQuantizableLinear)
    assert isinstance(mha.out_proj, nn.Linear)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kw", [{"scale_factor": 2}, {"scale_factor": 0.5}, {"size": (5, 7)}])
def test_bicubic_interpolate_matches_torch(kw, align_corners):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 8))
    want = torch.nn.functional.interpolate(torch.from_numpy(x), mode="bicubic",
                                           align_corners=align_corners, **kw).numpy()
    got = F.interpolate(torcia.from_numpy(x), mode="bicubic", align_corners=align_corners,
                        **kw).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_bicubic_interpolate_gradcheck():
    x = torcia.randn(1, 2, 3, 4, dtype=torcia.float64, requires_grad=True)
    assert gradcheck(lambda t: F.interpolate(t, scale_factor=1.5, mode="bicubic"), (x,))
    assert nn.Upsample(scale_factor=2, mode="bicubic")(x).shape == (1, 2, 6, 8)


TOP_LEVEL = {
    "kl_div": lambda lib, a, b, c: lib.kl_div(a.log_softmax(1), b.softmax(1), 2),
    "hinge_embedding_loss": lambda lib, a, b, c: lib.hinge_embedding_loss(a, c.sign(), 0.5, 0),
    "cosine_embedding_loss": lambda lib, a, b, c: lib.cosine_embedding_loss(
        a, b, c[:, 0].sign(), 0.1, 1),
    "margin_ranking_loss": lambda lib, a, b, c: lib.margin_ranking_loss(a, b, c.sign(), 0.2),
    "poisson_nll_loss": lambda lib, a, b, c: lib.poisson_nll_loss(a, b.abs(), True, False,
                                                                  1e-8, 1),
    "triplet_margin_loss": lambda lib, a, b, c: lib.triplet_margin_loss(a, b, c, 0.5),
    "binary_cross_entropy_with_logits": lambda lib, a, b, c:
        lib.binary_cross_entropy_with_logits(a, b.sigmoid(), None, c.abs(), 2),
    "threshold": lambda lib, a, b, c: lib.threshold(a, 0.1, -1.0),
    "hardshrink": lambda lib, a, b, c: lib.hardshrink(a, 0.3),
    "hardshrink_method": lambda lib, a, b, c: a.hardshrink(0.3),
    "prelu_method": lambda lib, a, b, c: a.prelu(lib.tensor([0.2], dtype=a.dtype)),
    "rrelu_eval": lambda lib, a, b, c: lib.rrelu(a, 0.1, 0.3, False),
    "rms_norm": lambda lib, a, b, c: lib.rms_norm(a, (4,)),
    "channel_shuffle": lambda lib, a, b, c: lib.channel_shuffle(a.reshape(1, 12, 1, 1), 3),
    "max_pool1d_with_indices": lambda lib, a, b, c: lib.max_pool1d_with_indices(
        a.unsqueeze(0), 2)[0],
}


@pytest.mark.parametrize("name", sorted(TOP_LEVEL))
def test_top_level_nn_functions_match_torch(name):
    torch = pytest.importorskip("torch")
    arrays = [np.random.default_rng(k).standard_normal((3, 4)) for k in range(3)]
    ours = TOP_LEVEL[name](torcia, *[torcia.from_numpy(a.copy()) for a in arrays])
    theirs = TOP_LEVEL[name](torch, *[torch.from_numpy(a.copy()) for a in arrays])
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12)


def test_top_level_losses_default_to_no_reduction_as_torch():
    torch = pytest.importorskip("torch")
    a, b, c = (np.random.default_rng(k).standard_normal((3, 4)) for k in range(3))
    for name, args in [("kl_div", (a, b)), ("hinge_embedding_loss", (a, np.sign(c))),
                       ("margin_ranking_loss", (a, b, np.sign(c))),
                       ("triplet_margin_loss", (a, b, c)),
                       ("binary_cross_entropy_with_logits", (a, 1 / (1 + np.exp(-b))))]:
        ours = getattr(torcia, name)(*[torcia.from_numpy(x) for x in args])
        theirs = getattr(torch, name)(*[torch.from_numpy(x) for x in args])
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)
