"""The nn modules, init aliases added for the compatibility sweep: against PyTorch's
modules (same weights, same inputs), with finite-difference gradients."""

import warnings

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.autograd import gradcheck

RNG = np.random.default_rng(0)

# name -> (constructor args, kwargs, input shapes)
MODULES = {
    "ZeroPad3d": ((1,), {}, [(1, 2, 2, 3, 3)]),
    "ConstantPad3d": (((1, 0, 2, 1, 0, 1), 0.5), {}, [(1, 2, 2, 3, 3)]),
    "ReflectionPad3d": ((1,), {}, [(1, 2, 3, 3, 3)]),
    "ReplicationPad3d": ((1,), {}, [(1, 2, 2, 3, 3)]),
    "CircularPad3d": ((1,), {}, [(1, 2, 2, 3, 3)]),
    "AdaptiveAvgPool3d": (((1, 2, 2),), {}, [(2, 2, 3, 4, 5)]),
    "AdaptiveMaxPool3d": (((1, 2, 2),), {}, [(2, 2, 3, 4, 5)]),
    "LPPool1d": ((2, 2), {}, [(2, 3, 6)]),
    "LPPool2d": ((3, 2), {}, [("positive", (2, 3, 4, 4))]),
    "InstanceNorm3d": ((2,), {"affine": True}, [(2, 2, 3, 3, 3)]),
    "RMSNorm": ((4,), {}, [(3, 4)]),
    "LocalResponseNorm": ((3,), {}, [(2, 5, 3, 3)]),
    "ConvTranspose3d": ((2, 3, 2), {"stride": 2}, [(1, 2, 2, 2, 2)]),
    "Softmax2d": ((), {}, [(2, 3, 2, 2)]),
    "UpsamplingNearest2d": ((), {"scale_factor": 2}, [(1, 2, 2, 3)]),
    "UpsamplingBilinear2d": ((), {"size": (4, 5)}, [(1, 2, 2, 3)]),
    "MultiLabelSoftMarginLoss": ((), {}, [(3, 4), "labels01"]),
    "GaussianNLLLoss": ((), {}, [(3, 4), (3, 4), "positive"]),
    "TripletMarginWithDistanceLoss": ((), {"margin": 0.5}, [(3, 4), (3, 4), (3, 4)]),
    "ChannelShuffle": ((2,), {}, [(1, 4, 2, 2)]),
}


def _inputs(shapes, lib):
    out = []
    for s in shapes:
        if s == "labels01":
            arr = (RNG.random((3, 4)) > 0.5).astype(np.float64)
        elif s == "positive":
            arr = RNG.uniform(0.5, 2.0, (3, 4))
        elif s[0] == "positive":
            arr = RNG.uniform(0.5, 2.0, s[1])
        else:
            arr = RNG.standard_normal(s)
        out.append(arr)
    return out


def _copy_state(ours, theirs, torch):
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            ours.get_parameter(name).data = torcia.from_numpy(p.detach().numpy().copy())


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_matches_torch(name):
    torch = pytest.importorskip("torch")
    args, kwargs, shapes = MODULES[name]
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(nn, name)(*args, **kwargs).double()
    _copy_state(ours, theirs, torch)
    arrays = _inputs(shapes, None)
    want = theirs(*[torch.from_numpy(a) for a in arrays])
    got = ours(*[torcia.from_numpy(a) for a in arrays])
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-8,
                               atol=1e-10)
    assert type(ours).__name__ == name and repr(ours).startswith(name)


@pytest.mark.parametrize("name", sorted(set(MODULES) - {"AdaptiveMaxPool3d"}))
def test_module_gradcheck(name):
    args, kwargs, shapes = MODULES[name]
    module = getattr(nn, name)(*args, **kwargs).double()
    tensors = [torcia.from_numpy(a).requires_grad_() for a in _inputs(shapes, None)]
    assert gradcheck(lambda *xs: module(*xs), tuple(tensors))


def test_embedding_bag_matches_torch():
    torch = pytest.importorskip("torch")
    weight = RNG.standard_normal((10, 3))
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = np.array([0, 3, 5])
    for mode in ("sum", "mean", "max"):
        theirs = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(weight), mode=mode)
        ours = nn.EmbeddingBag.from_pretrained(torcia.from_numpy(weight), mode=mode)
        np.testing.assert_allclose(
            ours(torcia.from_numpy(idx), torcia.from_numpy(offsets)).numpy(),
            theirs(torch.from_numpy(idx), torch.from_numpy(offsets)).numpy(), rtol=1e-12)
    bag = nn.EmbeddingBag(10, 3, padding_idx=0)
    assert bag.weight[0].abs().sum().item() == 0
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(10, 3, mode="median")


def test_max_unpool_and_ctc_match_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((1, 2, 4, 4))
    out_t, idx_t = torch.nn.MaxPool2d(2, return_indices=True)(torch.from_numpy(x))
    out_o, idx_o = nn.MaxPool2d(2, return_indices=True)(torcia.from_numpy(x))
    np.testing.assert_allclose(nn.MaxUnpool2d(2)(out_o, idx_o).numpy(),
                               torch.nn.MaxUnpool2d(2)(out_t, idx_t).numpy())
    logp = np.log(RNG.dirichlet(np.ones(4), size=(6, 2)))
    targets = np.array([[1, 2, 2], [3, 1, 0]])
    args_t = (torch.from_numpy(logp), torch.from_numpy(targets), [6, 5], [3, 2])
    args_o = (torcia.from_numpy(logp), torcia.from_numpy(targets), [6, 5], [3, 2])
    np.testing.assert_allclose(nn.CTCLoss()(*args_o).item(), torch.nn.CTCLoss()(*args_t).item(),
                               rtol=1e-8)


def test_rrelu_dropout3d_feature_alpha_dropout():
    x = torcia.tensor([-2.0, 3.0])
    assert nn.RReLU(0.1, 0.3).eval()(x).tolist() == pytest.approx([-0.4, 3.0])
    y = nn.RReLU(0.1, 0.3).train()(torcia.full((1000,), -1.0))
    assert -0.3 <= y.min().item() and y.max().item() <= -0.1
    torcia.manual_seed(0)
    d = nn.Dropout3d(0.5)(torcia.ones(2, 8, 2, 2, 2))
    per_channel = d.sum((2, 3, 4)).flatten().tolist()
    assert set(per_channel) <= {0.0, 16.0} and len(set(per_channel)) == 2
    assert nn.FeatureAlphaDropout(0.3).eval()(x).tolist() == x.tolist()


def test_nll_loss_2d_and_multilabel_margin():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 4))
    t = np.array([[3, 0, -1, 1], [1, -1, 0, 0]])
    np.testing.assert_allclose(
        nn.MultiLabelMarginLoss()(torcia.from_numpy(x), torcia.from_numpy(t)).item(),
        torch.nn.MultiLabelMarginLoss()(torch.from_numpy(x), torch.from_numpy(t)).item())
    assert issubclass(nn.NLLLoss2d, nn.NLLLoss) and issubclass(nn.LSTMCell, nn.RNNCellBase)


def test_old_init_names_warn_and_work():
    w = torcia.empty(4, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.init.xavier_uniform(w)
        nn.init.constant(w, 0.5)
    assert all(issubclass(c.category, FutureWarning) for c in caught) and len(caught) == 2
    assert w.eq(0.5).all()
    s = nn.init.sparse_(torcia.empty(10, 4), sparsity=0.2)
    assert [int((s[:, j] == 0).sum()) for j in range(4)] == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="2 dimensions"):
        nn.init.sparse_(torcia.empty(3), 0.5)
