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
    if isinstance(x, int):
        return x
    return torcia.tensor(np.asarray(x, dtype=np.float64))


def build(name):
    cls, params, _, _ = CASES[name]
    return getattr(D, cls)(*map(ours, params))


def check_moments(d, samples, variance=True):
    x = samples.numpy().astype(np.float64)
    mean, var = d.mean.numpy(), d.variance.numpy()
    se_mean = np.sqrt(var / N)
    assert np.all(np.abs(x.mean(0) - mean) <= Z * se_mean + 1e-12), (x.mean(0), mean)
    if not variance:
        return
    # the variance of the sample variance: (mu4 - var^2) / N, mu4 estimated from the draws
    mu4 = ((x - x.mean(0)) ** 4).mean(0)
    se_var = np.sqrt(np.maximum(mu4 - var ** 2, 0) / N)
    assert np.all(np.abs(x.var(0) - var) <= Z * se_var + 1e-12), (x.var(0), var)


# no mean (Categorical's is NaN, see test_categorical_frequencies; Cauchy's is undefined)
# or none defined (PyTorch defines none for these either); VonMises is circular, below
NO_MOMENTS = {"Categorical", "Cauchy", "HalfCauchy", "LKJCholesky", "LogisticNormal",
              "RelaxedBernoulli", "RelaxedOneHotCategorical", "VonMises"}
# a finite variance but an infinite (or huge) fourth moment: the sample variance is no test
MEAN_ONLY = {"Pareto", "StudentT", "FisherSnedecor", "InverseGamma"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_moments_of_samples(name):
    torcia.manual_seed(0)
    d = build(name)
    samples = d.sample((N,))
    assert tuple(samples.shape) == (N,) + tuple(d.batch_shape) + tuple(d.event_shape)
    assert bool(d.support.check(samples).all())
    if d.has_rsample:
        assert tuple(d.rsample((2,)).shape) == (2,) + tuple(samples.shape[1:])
    if name not in NO_MOMENTS:
        check_moments(d, samples, variance=name not in MEAN_ONLY)


def test_von_mises_circular_moments():
    torcia.manual_seed(4)
    d = build("VonMises")
    x = d.sample((N,))
    # E[cos(x - loc)] = I1(k) / I0(k) = 1 - circular variance
    c = torcia.cos(x - d.loc).numpy()
    expected = 1 - d.variance.numpy()
    assert np.all(np.abs(c.mean(0) - expected) <= Z * c.std(0) / np.sqrt(N))
    assert np.all(np.abs(torcia.sin(x - d.loc).numpy().mean(0)) <= Z / np.sqrt(N))


CONTINUOUS = [n for n in sorted(CASES) if not CASES[n][3] and n not in (
    "Dirichlet", "MultivariateNormal", "Beta", "StudentT", "FisherSnedecor", "VonMises",
    "LowRankMultivariateNormal", "LogisticNormal", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "LKJCholesky", "Wishart")]


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


def test_student_t_and_f_kolmogorov_smirnov():
    stats = pytest.importorskip("scipy.stats")
    torcia.manual_seed(5)
    df, loc, scale = CASES["StudentT"][1]
    x = build("StudentT").sample((N,)).numpy()
    for j in range(3):
        assert stats.kstest(x[:, j], stats.t(df[j], loc[j], scale[j]).cdf).pvalue > 1e-4
    df1, df2 = CASES["FisherSnedecor"][1]
    y = build("FisherSnedecor").sample((N,)).numpy()
    for j in range(3):
        assert stats.kstest(y[:, j], stats.f(df1[j], df2[j]).cdf).pvalue > 1e-4


def test_lkj_and_wishart_samples():
    stats = pytest.importorskip("scipy.stats")
    torcia.manual_seed(6)
    L = build("LKJCholesky").sample((5000,))
    corr = (L @ L.mT).numpy()
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, atol=1e-6)
    # LKJ(eta) in d dimensions: (r + 1) / 2 ~ Beta(eta - 1 + d / 2, eta - 1 + d / 2)
    eta = CASES["LKJCholesky"][1][1]
    for j in range(3):
        b = eta[j] - 1 + 1.5
        assert stats.kstest((corr[:, j, 1, 0] + 1) / 2, stats.beta(b, b).cdf).pvalue > 1e-4
    W = build("Wishart")
    s = W.sample((N,)).numpy()
    se = np.sqrt(W.variance.numpy() / N)
    assert np.all(np.abs(s.mean(0) - W.mean.numpy()) <= Z * se)


def test_relaxed_samples_concentrate_at_low_temperature():
    torcia.manual_seed(7)
    p = torcia.tensor([0.2, 0.5, 0.3], dtype=torcia.float64)
    x = D.RelaxedOneHotCategorical(torcia.tensor(0.05), p).sample((N,)).numpy()
    np.testing.assert_allclose(x.sum(-1), 1.0, atol=1e-9)
    freq = np.bincount(x.argmax(-1), minlength=3) / N
    assert np.all(np.abs(freq - p.numpy()) <= Z * np.sqrt(p.numpy() * (1 - p.numpy()) / N))
    b = D.RelaxedBernoulli(torcia.tensor(0.05), torcia.tensor([0.3])).sample((N,)).numpy()
    assert abs((b > 0.5).mean() - 0.3) <= Z * np.sqrt(0.21 / N)


def test_mixture_same_family_moments_and_frequencies():
    torcia.manual_seed(8)
    mix = D.Categorical(ours([0.3, 0.7]))
    comp = D.Normal(ours([-2.0, 3.0]), ours([0.5, 1.0]))
    d = D.MixtureSameFamily(mix, comp)
    check_moments(d, d.sample((N,)))


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


def test_wishart_redraws_singular_samples():
    torcia.manual_seed(9)
    # df just above dim - 1: about half the float32 draws are singular
    with pytest.warns(UserWarning, match="Low df values detected"):
        w = D.Wishart(torcia.tensor(2.001), torcia.eye(3) * 1e-3)
    with pytest.warns(UserWarning, match="Singular sample detected"):
        w.rsample((200,), max_try_correction=0)
    samples = w.rsample((20,), max_try_correction=30)
    assert bool(D.constraints.positive_definite.check(samples).all())


def test_kolmogorov_smirnov_of_the_other_continuous_distributions():
    """The continuous distributions without a cdf, through a statistic whose law is known:
    projections of (low-rank) multivariate normals, the logits of relaxed Bernoulli and of
    logistic-normal draws, and von Mises draws against SciPy's."""
    stats = pytest.importorskip("scipy.stats")
    torcia.manual_seed(10)
    u = np.array([0.6, -0.8])
    for name in ("MultivariateNormal", "LowRankMultivariateNormal"):
        d = build(name)
        x = d.sample((N,)).numpy() @ u
        mean, cov = d.mean.numpy() @ u, d.covariance_matrix.numpy()
        sd = np.sqrt(np.einsum("i,bij,j->b", u, cov, u))
        for j in range(3):
            assert stats.kstest(x[:, j], stats.norm(mean[j], sd[j]).cdf).pvalue > 1e-4
    temperature, probs = CASES["RelaxedBernoulli"][1]
    y = build("RelaxedBernoulli").sample((N,)).numpy()
    logit = np.log(y) - np.log1p(-y)
    for j in range(3):
        # (Logistic(0, 1) + logit(p)) / temperature
        ref = stats.logistic(np.log(probs[j] / (1 - probs[j])) / temperature, 1 / temperature)
        assert stats.kstest(logit[:, j], ref.cdf).pvalue > 1e-4
    loc, scale = CASES["LogisticNormal"][1]
    z = build("LogisticNormal").sample((N,))
    x = D.StickBreakingTransform().inv(z).numpy()
    for j in range(3):
        for k in range(2):
            assert stats.kstest(x[:, j, k], stats.norm(loc[j, k], scale[j, k]).cdf).pvalue > 1e-4
    loc, kappa = CASES["VonMises"][1]
    v = build("VonMises").sample((N,)).numpy()
    for j in range(3):
        wrapped = (v[:, j] - loc[j] + np.pi) % (2 * np.pi) - np.pi
        assert stats.kstest(wrapped, stats.vonmises(kappa[j]).cdf).pvalue > 1e-4
