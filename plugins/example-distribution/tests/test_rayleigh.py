"""The Rayleigh distribution: against SciPy, by sampling, gradients, and its KL pair against
a Monte Carlo estimate."""

import math

import numpy as np
import pytest

import torcia
from torcia.autograd import gradcheck
from torcia.distributions import kl_divergence
from torcia_example_distribution import Rayleigh

SCALE = np.array([0.5, 1.0, 2.5])
X = np.array([[0.1, 1.0, 3.0], [0.7, 2.2, 0.4]])


def t(x):
    return torcia.tensor(np.asarray(x, dtype=np.float64))


def test_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    d, ref = Rayleigh(t(SCALE)), stats.rayleigh(scale=SCALE)
    np.testing.assert_allclose(d.log_prob(t(X)).numpy(), ref.logpdf(X), rtol=1e-12)
    np.testing.assert_allclose(d.cdf(t(X)).numpy(), ref.cdf(X), rtol=1e-12)
    q = np.array([0.1, 0.5, 0.95])
    np.testing.assert_allclose(d.icdf(t(q)).numpy(), ref.ppf(q), rtol=1e-12)
    np.testing.assert_allclose(d.entropy().numpy(), ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(d.mean.numpy(), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(d.variance.numpy(), ref.var(), rtol=1e-12)


def test_sampling_moments_and_support():
    torcia.manual_seed(0)
    d = Rayleigh(t(SCALE))
    x = d.sample((40_000,)).numpy()
    assert (x >= 0).all()
    se = np.sqrt(d.variance.numpy() / len(x))
    assert np.all(np.abs(x.mean(0) - d.mean.numpy()) <= 5 * se)
    assert tuple(d.expand((2, 3)).sample((4,)).shape) == (4, 2, 3)


def test_rsample_gradient_and_gradcheck():
    torcia.manual_seed(1)
    scale = torcia.tensor([1.5], dtype=torcia.float64, requires_grad=True)
    Rayleigh(scale).rsample((20_000,)).mean().backward()
    # d/ds E[x] = sqrt(pi / 2), exactly for every draw (x is linear in s)
    assert math.isclose(scale.grad.item(), math.sqrt(math.pi / 2), rel_tol=0.02)
    s = t([0.7, 1.3]).requires_grad_()
    assert gradcheck(lambda s: Rayleigh(s).log_prob(t([0.5, 2.0])), (s,))


def test_kl_pair_matches_monte_carlo():
    torcia.manual_seed(2)
    p, q = Rayleigh(t([1.0, 2.0])), Rayleigh(t([1.5, 0.8]))
    x = p.sample((200_000,))
    mc = (p.log_prob(x) - q.log_prob(x)).mean(0).numpy()
    np.testing.assert_allclose(kl_divergence(p, q).numpy(), mc, rtol=0.02)
    assert kl_divergence(p, p).abs().max().item() < 1e-12


def test_bad_scale_is_refused():
    with pytest.raises(ValueError, match="scale .* to satisfy the constraint GreaterThan"):
        Rayleigh(t(-1.0))
