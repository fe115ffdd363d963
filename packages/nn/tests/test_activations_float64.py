"""Every activation in float64, forward and first derivative, against its closed form
written again in float64 NumPy: a float32 constant or intermediate anywhere (a rounded
``1 / alpha``, ``1 / 6`` or SELU's scale) shows up as a relative error near 1e-7, far above
the 1e-14 allowed here. The second derivatives (the create_graph formulas) are checked the
same way for the activations whose derivative has a closed form.

PyTorch itself is not the reference here: its float64 CELU gradient rounds ``1 / alpha`` to
float32 (about 9e-7 relative for alpha = 0.3) and its hardsigmoid gradient uses a float32
``1 / 6`` (3e-8), so comparing with it would hide an error of the same size.
"""

import math

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
X = np.concatenate([np.linspace(-7.0, 7.0, 57), [-0.3, 1e-3, -1e-3, 2.5]])
ERF = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# 0.5 (1 + tanh u) written as sigmoid(2 u), and 1 - tanh^2 u as 4 s (1 - s): the same
# functions, but 1 + tanh u cancels for x < 0 (tanh u near -1), where it loses up to 1e-2
# of relative accuracy at x = -7 (checked against mpmath) and would fail an exact kernel
def _gelu_tanh(x):
    k = math.sqrt(2 / math.pi)
    return x * _sigmoid(2 * k * (x + 0.044715 * x ** 3))


def _gelu_tanh_grad(x):
    k = math.sqrt(2 / math.pi)
    s = _sigmoid(2 * k * (x + 0.044715 * x ** 3))
    return s + 2 * x * s * (1 - s) * k * (1 + 3 * 0.044715 * x * x)


def _softplus(x, beta, threshold):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


# name: (call, f, f', f'' or None); the points avoid the kinks of the piecewise ones
CASES = {
    "selu": (F.selu,
             lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
             lambda x: SELU_SCALE * np.where(x > 0, 1.0, SELU_ALPHA * np.exp(x)),
             lambda x: SELU_SCALE * np.where(x > 0, 0.0, SELU_ALPHA * np.exp(x))),
    "celu(0.3)": (lambda x: F.celu(x, 0.3),
                  lambda x: np.where(x > 0, x, 0.3 * np.expm1(x / 0.3)),
                  lambda x: np.where(x > 0, 1.0, np.exp(x / 0.3)),
                  lambda x: np.where(x > 0, 0.0, np.exp(x / 0.3) / 0.3)),
    "celu(1.7)": (lambda x: F.celu(x, 1.7),
                  lambda x: np.where(x > 0, x, 1.7 * np.expm1(x / 1.7)),
                  lambda x: np.where(x > 0, 1.0, np.exp(x / 1.7)),
                  lambda x: np.where(x > 0, 0.0, np.exp(x / 1.7) / 1.7)),
    "elu(0.7)": (lambda x: F.elu(x, 0.7),
                 lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)),
                 lambda x: np.where(x > 0, 1.0, 0.7 * np.exp(x)),
                 lambda x: np.where(x > 0, 0.0, 0.7 * np.exp(x))),
    "leaky_relu(0.1)": (lambda x: F.leaky_relu(x, 0.1),
                        lambda x: np.where(x > 0, x, 0.1 * x),
                        lambda x: np.where(x > 0, 1.0, 0.1), None),
    "gelu": (F.gelu,
             lambda x: 0.5 * x * (1 + ERF(x / math.sqrt(2))),
             lambda x: 0.5 * (1 + ERF(x / math.sqrt(2)))
             + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi),
             lambda x: np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) * (2 - x * x)),
    "gelu(tanh)": (lambda x: F.gelu(x, approximate="tanh"), _gelu_tanh, _gelu_tanh_grad,
                   None),
    "silu": (F.silu, lambda x: x * _sigmoid(x),
             lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))),
             lambda x: _sigmoid(x) * (1 - _sigmoid(x)) * (2 + x * (1 - 2 * _sigmoid(x)))),
    "mish": (F.mish, lambda x: x * np.tanh(np.log1p(np.exp(x))),
             lambda x: np.tanh(np.log1p(np.exp(x)))
             + x * (1 - np.tanh(np.log1p(np.exp(x))) ** 2) * _sigmoid(x), None),
    "softplus(2, 5)": (lambda x: F.softplus(x, 2.0, 5.0),
                       lambda x: _softplus(x, 2.0, 5.0),
                       lambda x: np.where(2 * x > 5, 1.0, _sigmoid(2 * x)), None),
    "logsigmoid": (F.logsigmoid, lambda x: -np.log1p(np.exp(-x)),
                   lambda x: _sigmoid(-x), lambda x: -_sigmoid(x) * _sigmoid(-x)),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x)),
                 lambda x: 1 / (1 + np.abs(x)) ** 2, None),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x), lambda x: np.tanh(x) ** 2,
                   lambda x: 2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6,
                  lambda x: np.where(x < -3, 0.0, np.where(x > 3, 1.0, x / 3 + 0.5)), None),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6,
                    lambda x: np.where(np.abs(x) < 3, 1 / 6, 0.0), None),
    "hardtanh(-0.5, 2)": (lambda x: F.hardtanh(x, -0.5, 2.0), lambda x: np.clip(x, -0.5, 2.0),
                          lambda x: ((x > -0.5) & (x < 2.0)) * 1.0, None),
    "sigmoid": (torcia.sigmoid, _sigmoid, lambda x: _sigmoid(x) * (1 - _sigmoid(x)), None),
    "tanh": (torcia.tanh, np.tanh, lambda x: 1 - np.tanh(x) ** 2, None),
}


def _points(name):
    # keep away from the kinks, where one-sided formulas disagree by definition
    kinks = {"hardswish": (-3, 3), "hardsigmoid": (-3, 3), "hardtanh(-0.5, 2)": (-0.5, 2),
             "softplus(2, 5)": (2.5,)}.get(name, (0,))
    return X[np.min(np.abs(X[:, None] - np.array(kinks)[None]), axis=1) > 1e-6]


def assert_exact(ours, expected):
    # relative 1e-14 (absolute where the value is near 0): float64 rounding only
    np.testing.assert_allclose(ours, expected, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", CASES)
def test_float64_forward_and_gradient_have_no_float32_step(name):
    call, f, df, _ = CASES[name]
    x = _points(name)
    t = torcia.tensor(x, dtype=torcia.float64, requires_grad=True)
    y = call(t)
    assert y.dtype is torcia.float64
    assert_exact(y.detach().numpy(), f(x))
    # the fused first-derivative kernel (no graph) and the differentiable formulas
    w = np.cos(3 * x)  # an upstream gradient that is not all ones
    (g,) = torcia.autograd.grad(y, t, torcia.tensor(w))
    assert_exact(g.numpy(), w * df(x))
    (g,) = torcia.autograd.grad(call(t), t, torcia.tensor(w), create_graph=True)
    assert_exact(g.detach().numpy(), w * df(x))


@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[3] is not None])
def test_float64_second_derivative_has_no_float32_step(name):
    call, _, _, d2f = CASES[name]
    x = _points(name)
    t = torcia.tensor(x, dtype=torcia.float64, requires_grad=True)
    (g,) = torcia.autograd.grad(call(t).sum(), t, create_graph=True)
    (gg,) = torcia.autograd.grad(g.sum(), t)
    assert_exact(gg.numpy(), d2f(x))


@pytest.mark.parametrize("name", ["selu", "celu(0.3)", "elu(0.7)"])
def test_float64_in_place_gradient_has_no_float32_step(name):
    call, f, df, _ = CASES[name]
    x = _points(name)
    t = torcia.tensor(x, dtype=torcia.float64, requires_grad=True)
    inplace = {"selu": lambda u: F.selu(u, inplace=True),
               "celu(0.3)": lambda u: F.celu(u, 0.3, inplace=True),
               "elu(0.7)": lambda u: F.elu(u, 0.7, inplace=True)}[name]
    y = inplace(t * 1)
    assert_exact(y.detach().numpy(), f(x))
    (g,) = torcia.autograd.grad(y.sum(), t)
    np.testing.assert_allclose(g.numpy(), df(x), rtol=1e-13)
