"""Sampling checked statistically: the mean and variance of 2 * 10^4 draws lie within a
few standard errors of the analytic values, and continuous samples pass a
Kolmogorov-Smirnov test against the distribution's own cdf. Raw samples are never compared
across libraries."""

import math

import numpy as np
import pytest
from cases import CASES

import torcia
import torcia.distributions as D

N = 20_000
Z = 5.0  # standard errors allowed: a false alarm about once in 10^6 comparisons


def ours(x):
    return torcia.tensor(np.asarray(x, dtype=np.float64))


def build(name):
    cls, params, _, _ = CASES[name]
    return getattr(D, cls)(*map(ours, params))


def check_moments(d, samples):
    x = samples.numpy().astype(np.float64)
    mean, var = d.mean.numpy(), d.variance.numpy()
    se_mean = np.sqrt(var / N)
    assert np.all(np.abs(x.mean(0) - mean) <= Z * se_mean + 1e-12), (x.mean(0), mean)
    # the variance of the sample variance: (mu4 - var^2) / N, mu4 estimated from the draws
    mu4 = ((x - x.mean(0)) ** 4).mean(0)
    se_var = np.sqrt(np.maximum(mu4 - var ** 2, 0) / N)
    assert np.all(np.abs(x.var(0) - var) <= Z * se_var + 1e-12), (x.var(0), var)


@pytest.mark.parametrize("name", sorted(CASES))
def test_moments_of_samples(name):
    torcia.manual_seed(0)
    d = build(name)
    samples = d.sample((N,))
    assert tuple(samples.shape) == (N,) + tuple(d.batch_shape) + tuple(d.event_shape)
    assert bool(d.support.check(samples).all())
    if name != "Categorical":  # its mean is undefined (NaN); see test_categorical_frequencies
        check_moments(d, samples)


CONTINUOUS = [n for n in sorted(CASES) if not CASES[n][3] and n not in (
    "Dirichlet", "MultivariateNormal", "Beta")]


@pytest.mark.parametrize("name", CONTINUOUS)
def test_kolmogorov_smirnov(name):
    stats = pytest.importorskip("scipy.stats")
    torcia.manual_seed(1)
    d = build(name)
    samples = d.sample((N,))
    u = d.cdf(samples).numpy()
    for j in range(u.shape[1]):
        assert stats.kstest(u[:, j], "uniform").pvalue > 1e-4


def test_beta_and_dirichlet_marginals_kolmogorov_smirnov():
    stats = pytest.importorskip("scipy.stats")
    torcia.manual_seed(2)
    a, b = CASES["Beta"][1]
    x = build("Beta").sample((N,)).numpy()
    for j in range(3):
        assert stats.kstest(x[:, j], stats.beta(a[j], b[j]).cdf).pvalue > 1e-4
    conc = CASES["Dirichlet"][1][0]
    y = build("Dirichlet").sample((N,)).numpy()
    for j in range(3):
        # each coordinate of a Dirichlet is Beta(a_k, a_0 - a_k)
        assert stats.kstest(y[:, j, 0], stats.beta(conc[j, 0],
                                                   conc[j].sum() - conc[j, 0]).cdf).pvalue > 1e-4


def test_seeding_makes_draws_reproducible():
    d = D.Gamma(ours([0.5, 2.0]), ours([1.0, 3.0]))
    torcia.manual_seed(5)
    a = d.sample((10,))
    torcia.manual_seed(5)
    assert bool((a == d.sample((10,))).all())


def test_rsample_keeps_the_graph_and_sample_does_not():
    loc = ours([0.0, 1.0]).requires_grad_()
    d = D.Normal(loc, 1.0)
    assert d.rsample().requires_grad
    assert not d.sample().requires_grad
    with pytest.warns(UserWarning, match="sample_n"):
        assert tuple(d.sample_n(3).shape) == (3, 2)


def test_categorical_frequencies():
    torcia.manual_seed(3)
    p = np.array([0.1, 0.2, 0.7])
    x = D.Categorical(ours(p)).sample((N,)).numpy()
    freq = np.bincount(x, minlength=3) / N
    assert np.all(np.abs(freq - p) <= Z * np.sqrt(p * (1 - p) / N))
    assert math.isclose(D.Categorical(ours(p)).perplexity().item(),
                        math.exp(-(p * np.log(p)).sum()), rel_tol=1e-9)
