"""Fractional max pooling: the windows of PyTorch's kernel for the same random samples
(values and indices bit for bit), gradients, the module forms and argument checks."""

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import nn

RNG = np.random.default_rng(0)
CASES = [(2, (2, 3, 9, 11), (2, 3), (5, 4)), (2, (3, 7, 8), 3, (4, 5)),
         (3, (2, 2, 7, 6, 9), (2, 2, 3), (3, 4, 5)), (3, (1, 5, 5, 5), 2, 3)]


def _samples(shape, nd, dtype):
    n = shape[0] if len(shape) == nd + 2 else 1
    return RNG.uniform(0, 1, (n, shape[-nd - 1], nd)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nd, shape, k, out", CASES)
def test_matches_torch_for_the_same_samples(nd, shape, k, out, dtype):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(shape).astype(dtype)
    s = _samples(shape, nd, dtype)
    theirs = getattr(torch.nn.functional, f"fractional_max_pool{nd}d")(
        torch.from_numpy(x), k, output_size=out, return_indices=True,
        _random_samples=torch.from_numpy(s))
    ours = getattr(F, f"fractional_max_pool{nd}d_with_indices")(
        torcia.from_numpy(x), k, output_size=out, _random_samples=torcia.from_numpy(s))
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


def test_windows_by_hand():
    # samples (u_w, u_h) = (0.3, 0.7), input 5, output 3, pool 2: alpha = 1.5, starts
    # int((i + u) * 1.5) - int(u * 1.5): W: 0 - 0, 1 - 0, then 5 - 2 = 3; H: 1 - 1,
    # 2 - 1, then 3. Windows [0, 1], [1, 2], [3, 4] both ways: maxima at rows and
    # columns 1, 2, 4
    x = torcia.arange(25.0).reshape(1, 1, 5, 5)
    out, idx = F.fractional_max_pool2d(x, 2, output_size=3, return_indices=True,
                                       _random_samples=torcia.tensor([[[0.3, 0.7]]]))
    assert idx.reshape(-1).tolist() == [6, 7, 9, 11, 12, 14, 21, 22, 24]
    assert out.reshape(-1).tolist() == [6.0, 7.0, 9.0, 11.0, 12.0, 14.0, 21.0, 22.0, 24.0]


def test_gradient_flows_to_the_maxima():
    x = torcia.from_numpy(RNG.standard_normal((1, 2, 6, 6))).requires_grad_()
    s = torcia.from_numpy(_samples((1, 2, 6, 6), 2, np.float64))
    assert torcia.autograd.gradcheck(
        lambda t: F.fractional_max_pool2d(t, 2, output_size=3, _random_samples=s), (x,))
    x3 = torcia.from_numpy(RNG.standard_normal((1, 4, 4, 4))).requires_grad_()
    s3 = torcia.from_numpy(_samples((1, 4, 4, 4), 3, np.float64))
    assert torcia.autograd.gradcheck(
        lambda t: F.fractional_max_pool3d(t, 2, output_ratio=0.5, _random_samples=s3), (x3,))


def test_modules_draw_samples_or_use_the_given_ones():
    torcia.manual_seed(0)
    pool = nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5), return_indices=True)
    out, idx = pool(torcia.randn(2, 3, 10, 12))
    assert out.shape == (2, 3, 5, 6) and idx.dtype is torcia.int64
    fixed = torcia.full((1, 1, 3), 0.5)
    pool3 = nn.FractionalMaxPool3d(2, output_size=2, _random_samples=fixed)
    x = torcia.randn(1, 1, 4, 4, 4)
    assert torcia.equal(pool3(x), pool3(x)) and "_random_samples" in dict(pool3.named_buffers())


def test_argument_checks():
    with pytest.raises(ValueError, match="requires specifying either an output_size"):
        F.fractional_max_pool2d(torcia.ones(1, 4, 4), 2)
    with pytest.raises(RuntimeError, match="pool height 2 too large relative to input "
                                           "height 5"):
        F.fractional_max_pool2d(torcia.ones(1, 1, 5, 5), 2, output_size=5)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool3d_out\(\): pool time 2"):
        F.fractional_max_pool3d(torcia.ones(1, 5, 5, 5), 2, output_size=4)
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool3d(2, output_size=2, output_ratio=0.5)
    with pytest.raises(RuntimeError, match="expected _random_samples of shape"):
        F.fractional_max_pool2d(torcia.ones(1, 1, 4, 4), 2, output_size=2,
                                _random_samples=torcia.ones(1, 1, 3))
