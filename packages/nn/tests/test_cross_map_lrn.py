"""CrossMapLRN2d: Lua Torch's channel window by hand, PyTorch's forward bit for bit, the
exact gradient, and LocalResponseNorm where the two agree."""

import numpy as np
import pytest

import torcia
from torcia import nn

RNG = np.random.default_rng(0)


def _by_hand(x, size, alpha, beta, k):
    # Lua Torch's loop: channel 0 sums channels 0..p-1; each next channel adds c+p-1 (if
    # it exists) and, once c > p, drops c-p
    sq = x ** 2
    c_all = x.shape[1]
    p = (size - 1) // 2 + 1
    scale = np.zeros_like(x)
    scale[:, 0] = sq[:, :min(p, c_all)].sum(1)
    for c in range(1, c_all):
        scale[:, c] = scale[:, c - 1]
        if c < c_all - p + 1:
            scale[:, c] += sq[:, c + p - 1]
        if c > p:
            scale[:, c] -= sq[:, c - p]
    return x * (k + alpha / size * scale) ** -beta


@pytest.mark.parametrize("size, channels", [(3, 6), (5, 8), (4, 9), (5, 3), (1, 4)])
def test_forward_follows_lua_torch(size, channels):
    x = RNG.standard_normal((2, channels, 3, 2))
    got = nn.CrossMapLRN2d(size, 0.5, 0.75, 1.3)(torcia.tensor(x)).numpy()
    np.testing.assert_allclose(got, _by_hand(x, size, 0.5, 0.75, 1.3), rtol=1e-12)


def test_matches_pytorch_forward():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 7, 3, 3))
    theirs = torch.nn.CrossMapLRN2d(5, 1e-2, 0.75, 2.0)(torch.tensor(x)).numpy()
    ours = nn.CrossMapLRN2d(5, 1e-2, 0.75, 2.0)(torcia.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-13)


def test_gradient_is_the_derivative_of_the_forward():
    x = torcia.tensor(RNG.standard_normal((1, 8, 2, 2)), requires_grad=True)
    assert torcia.autograd.gradcheck(nn.CrossMapLRN2d(5, 0.5, 0.75, 1.0), (x,))


def test_agrees_with_local_response_norm_below_channel_p_and_checks_rank():
    # size 3: p = 2, so channels 0 and 1 have LocalResponseNorm's centred windows
    x = torcia.tensor(RNG.standard_normal((2, 2, 3, 3)))
    np.testing.assert_allclose(nn.CrossMapLRN2d(3, 0.5, 0.75, 1.0)(x).numpy(),
                               nn.LocalResponseNorm(3, 0.5, 0.75, 1.0)(x).numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D"):
        nn.CrossMapLRN2d(3)(torcia.ones(1, 2, 2))
    assert repr(nn.CrossMapLRN2d(3)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"
