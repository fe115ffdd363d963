"""torcia.nn.init against PyTorch's formulas: gains, fans, bounds and standard deviations,
structure (eye, dirac, orthogonal), truncation, generators and no recorded history."""

import math

import numpy as np
import pytest

import torcia
from torcia.nn import init


def test_calculate_gain_table():
    assert init.calculate_gain("linear") == 1
    assert init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope"):
        init.calculate_gain("leaky_relu", "steep")


def test_fans():
    assert init._calculate_fan_in_and_fan_out(torcia.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(torcia.empty(8, 4, 3, 2)) == (24, 48)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(torcia.empty(3))


def _stats(t):
    a = t.numpy().astype(np.float64).ravel()
    return a, a.std()


@pytest.mark.parametrize("fn,kwargs,shape,kind,scale", [
    # scale: the uniform bound or the normal std that PyTorch's formula gives
    (init.xavier_uniform_, {"gain": 2.0}, (200, 100), "uniform", 2 * math.sqrt(6 / 300)),
    (init.xavier_normal_, {}, (200, 100), "normal", math.sqrt(2 / 300)),
    (init.kaiming_uniform_, {"nonlinearity": "relu"}, (300, 50, 2), "uniform",
     math.sqrt(2) * math.sqrt(3 / 100)),
    (init.kaiming_uniform_, {"a": math.sqrt(5)}, (300, 80), "uniform", 1 / math.sqrt(80)),
    (init.kaiming_normal_, {"mode": "fan_out", "nonlinearity": "relu"}, (100, 300), "normal",
     math.sqrt(2 / 100)),
    (init.kaiming_normal_, {"nonlinearity": "tanh"}, (300, 100), "normal", (5 / 3) / 10),
    (init.uniform_, {"a": -3.0, "b": 3.0}, (100, 200), "uniform", 3.0),
    (init.normal_, {"std": 0.02}, (100, 200), "normal", 0.02),
])
def test_random_initialisers_follow_the_formulas(fn, kwargs, shape, kind, scale):
    g = torcia.Generator().manual_seed(0)
    values, std = _stats(fn(torcia.empty(shape), generator=g, **kwargs))
    if kind == "uniform":
        assert np.abs(values).max() <= scale * (1 + 1e-6)
        assert np.abs(values).max() > 0.99 * scale
        assert std == pytest.approx(scale / math.sqrt(3), rel=0.02)
    else:
        assert std == pytest.approx(scale, rel=0.02)
    assert abs(values.mean()) < 0.02 * scale * 3


def test_trunc_normal_stays_in_bounds_with_the_truncated_moments():
    g = torcia.Generator().manual_seed(0)
    values, std = _stats(init.trunc_normal_(torcia.empty(200000), std=1.0, a=-1.0, b=2.0,
                                            generator=g))
    assert values.min() >= -1.0 and values.max() <= 2.0
    # moments of N(0, 1) truncated to [a, b]: mean (phi(a) - phi(b)) / Z
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    z = cdf(2.0) - cdf(-1.0)
    mean = (phi(-1.0) - phi(2.0)) / z
    var = 1 + (-1.0 * phi(-1.0) - 2.0 * phi(2.0)) / z - mean ** 2
    assert values.mean() == pytest.approx(mean, abs=0.01)
    assert std == pytest.approx(math.sqrt(var), abs=0.01)


def test_constant_ones_zeros_eye_dirac():
    np.testing.assert_array_equal(init.constant_(torcia.empty(2, 2), 3.5).numpy(),
                                  np.full((2, 2), 3.5))
    np.testing.assert_array_equal(init.ones_(torcia.empty(3)).numpy(), np.ones(3))
    np.testing.assert_array_equal(init.zeros_(torcia.empty(3)).numpy(), np.zeros(3))
    np.testing.assert_array_equal(init.eye_(torcia.empty(3, 2)).numpy(), np.eye(3, 2))
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(torcia.empty(2, 2, 2))
    w = init.dirac_(torcia.empty(4, 2, 3, 3), groups=2)
    x = torcia.randn(1, 2, 5, 5)
    # a dirac weight makes the convolution copy input channels (per group)
    y = torcia.nn.functional.conv2d(x, w, padding=1)
    np.testing.assert_allclose(y[0, 0].numpy(), x[0, 0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(y[0, 2].numpy(), x[0, 0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(y[0, 1].numpy(), x[0, 1].numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape", [(4, 4), (3, 7), (7, 3), (6, 2, 2)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    q = init.orthogonal_(torcia.empty(shape), gain=2.0).numpy().reshape(shape[0], -1)
    q = q.astype(np.float64) / 2.0
    small = min(q.shape)
    gram = q @ q.T if q.shape[0] == small else q.T @ q
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)


def test_generator_makes_draws_reproducible_and_fills_record_no_history():
    a = init.kaiming_uniform_(torcia.empty(3, 4), generator=torcia.Generator().manual_seed(7))
    b = init.kaiming_uniform_(torcia.empty(3, 4), generator=torcia.Generator().manual_seed(7))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    p = torcia.nn.Parameter(torcia.empty(3, 3))
    for fn in (init.xavier_uniform_, init.normal_, init.zeros_, init.eye_, init.orthogonal_,
               init.trunc_normal_, init.ones_):
        out = fn(p)
        assert out is p and p.grad_fn is None and p.requires_grad


def test_kaiming_on_an_empty_tensor_is_a_no_op():
    assert init.kaiming_uniform_(torcia.empty(0, 3)).shape == torcia.Size([0, 3])
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(torcia.empty(2, 2), mode="fan_avg")
