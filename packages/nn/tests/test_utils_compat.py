"""weight_norm, spectral_norm, batch-norm fusion and the newer gradient-norm helpers,
against PyTorch."""

import warnings

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.autograd import gradcheck

RNG = np.random.default_rng(0)


def _same_params(ours, theirs):
    for name, p in theirs.named_parameters():
        ours.get_parameter(name).data = torcia.from_numpy(p.detach().numpy().copy())


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch(dim):
    torch = pytest.importorskip("torch")
    theirs = torch.nn.utils.weight_norm(torch.nn.Linear(4, 3).double(), dim=dim)
    ours = nn.utils.weight_norm(nn.Linear(4, 3).double(), dim=dim)
    _same_params(ours, theirs)
    x = RNG.standard_normal((5, 4))
    out_t = theirs(torch.from_numpy(x))
    out_o = ours(torcia.from_numpy(x))
    np.testing.assert_allclose(out_o.detach().numpy(), out_t.detach().numpy(), rtol=1e-12)
    out_t.sum().backward()
    out_o.sum().backward()
    for name in ("weight_g", "weight_v"):
        np.testing.assert_allclose(ours.get_parameter(name).grad.numpy(),
                                   theirs.get_parameter(name).grad.numpy(), rtol=1e-10)
    nn.utils.remove_weight_norm(ours)
    assert sorted(n for n, _ in ours.named_parameters()) == ["bias", "weight"]
    np.testing.assert_allclose(ours(torcia.from_numpy(x)).detach().numpy(),
                               out_t.detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_weight_norm(ours)


def test_weight_norm_gradcheck():
    m = nn.utils.weight_norm(nn.Linear(3, 2).double())
    x = torcia.randn(2, 3, dtype=torcia.float64, requires_grad=True)
    assert gradcheck(lambda t: m(t), (x,))


def test_spectral_norm_matches_torch():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.utils.spectral_norm(torch.nn.Conv2d(2, 3, 3).double(),
                                          n_power_iterations=2)
    ours = nn.utils.spectral_norm(nn.Conv2d(2, 3, 3).double(), n_power_iterations=2)
    _same_params(ours, theirs)
    ours.weight_u.copy_(torcia.from_numpy(theirs.weight_u.numpy().copy()))
    ours.weight_v.copy_(torcia.from_numpy(theirs.weight_v.numpy().copy()))
    x = RNG.standard_normal((1, 2, 5, 5))
    for _ in range(3):
        out_t = theirs(torch.from_numpy(x))
        out_o = ours(torcia.from_numpy(x))
        np.testing.assert_allclose(out_o.detach().numpy(), out_t.detach().numpy(),
                                   rtol=1e-9)
    np.testing.assert_allclose(ours.weight_u.numpy(), theirs.weight_u.numpy(), rtol=1e-9)
    theirs.eval()
    ours.eval()
    np.testing.assert_allclose(ours(torcia.from_numpy(x)).detach().numpy(),
                               theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-9)
    nn.utils.remove_spectral_norm(ours)
    assert "weight" in dict(ours.named_parameters())


def test_fusion_and_norm_helpers():
    torch = pytest.importorskip("torch")
    conv_t = torch.nn.Conv2d(2, 3, 3).double().eval()
    bn_t = torch.nn.BatchNorm2d(3).double().eval()
    with torch.no_grad():
        bn_t.running_mean.uniform_(-1, 1)
        bn_t.running_var.uniform_(0.5, 2)
        bn_t.weight.uniform_(0.5, 2)
        bn_t.bias.uniform_(-1, 1)
    conv_o = nn.Conv2d(2, 3, 3).double().eval()
    bn_o = nn.BatchNorm2d(3).double().eval()
    _same_params(conv_o, conv_t)
    _same_params(bn_o, bn_t)
    bn_o.running_mean.copy_(torcia.from_numpy(bn_t.running_mean.numpy().copy()))
    bn_o.running_var.copy_(torcia.from_numpy(bn_t.running_var.numpy().copy()))
    fused_t = torch.nn.utils.fuse_conv_bn_eval(conv_t, bn_t)
    fused_o = nn.utils.fuse_conv_bn_eval(conv_o, bn_o)
    np.testing.assert_allclose(fused_o.weight.detach().numpy(),
                               fused_t.weight.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(fused_o.bias.detach().numpy(), fused_t.bias.detach().numpy(),
                               rtol=1e-12)
    with pytest.raises(AssertionError, match="eval"):
        nn.utils.fuse_conv_bn_eval(conv_o.train(), bn_o)
    grads = [RNG.standard_normal(3), RNG.standard_normal((2, 2))]
    for p in (1.0, 2.0, float("inf")):
        assert nn.utils.get_total_norm([torcia.from_numpy(g) for g in grads], p).item() == \
            pytest.approx(torch.nn.utils.get_total_norm([torch.from_numpy(g) for g in grads],
                                                        p).item())
    w = nn.Parameter(torcia.zeros(2))
    w.grad = torcia.tensor([3.0, 4.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert nn.utils.clip_grad_norm(w, 1.0).item() == 5.0
    assert caught and issubclass(caught[0].category, FutureWarning)
