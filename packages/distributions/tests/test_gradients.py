"""Gradients: rsample's pathwise gradients against analytic gradients of expectations
(Normal, Gamma, Beta, Dirichlet) and against finite differences of the quantile function
(Gamma's implicit reparameterisation), and gradcheck of log_prob, cdf and entropy in
float64."""

import numpy as np
import pytest

import torcia
import torcia.distributions as D
from torcia.autograd import gradcheck

N = 50_000


def leaf(x):
    return torcia.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)


def test_normal_rsample_gradient_of_second_moment():
    torcia.manual_seed(0)
    loc, scale = leaf([0.5, -1.0]), leaf([1.0, 2.0])
    x = D.Normal(loc, scale).rsample((N,))
    (x ** 2).mean(0).sum().backward()
    # E[x^2] = loc^2 + scale^2
    np.testing.assert_allclose(loc.grad.numpy(), 2 * loc.detach().numpy(), atol=0.05)
    np.testing.assert_allclose(scale.grad.numpy(), 2 * scale.detach().numpy(), rtol=0.03)


def test_gamma_rsample_gradient_of_moments():
    torcia.manual_seed(1)
    alpha, beta = leaf([0.4, 1.0, 3.0]), leaf([1.0, 2.0, 0.5])
    x = D.Gamma(alpha, beta).rsample((N,))
    x.mean(0).sum().backward()
    a, b = alpha.detach().numpy(), beta.detach().numpy()
    # E[x] = a / b
    np.testing.assert_allclose(alpha.grad.numpy(), 1 / b, rtol=0.03)
    np.testing.assert_allclose(beta.grad.numpy(), -a / b ** 2, rtol=0.03)
    alpha.grad = None
    y = D.Gamma(alpha, beta.detach()).rsample((N,))
    (y ** 2).mean(0).sum().backward()
    # E[x^2] = a (a + 1) / b^2
    np.testing.assert_allclose(alpha.grad.numpy(), (2 * a + 1) / b ** 2, rtol=0.05)


def test_gamma_implicit_gradient_matches_the_quantile_function():
    special = pytest.importorskip("scipy.special")
    from torcia.distributions._special import standard_gamma_grad

    alpha = np.array([0.05, 0.3, 1.0, 2.5, 10.0, 80.0])
    u = np.array([0.2, 0.5, 0.9, 0.1, 0.7, 0.4])
    x = special.gammaincinv(alpha, u)
    h = 1e-6 * alpha
    expected = (special.gammaincinv(alpha + h, u) - special.gammaincinv(alpha - h, u)) / (2 * h)
    got = standard_gamma_grad(torcia.tensor(x), torcia.tensor(alpha)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_beta_rsample_gradient_of_mean():
    torcia.manual_seed(2)
    a, b = leaf([0.5, 2.0]), leaf([1.5, 3.0])
    D.Beta(a, b).rsample((N,)).mean(0).sum().backward()
    an, bn = a.detach().numpy(), b.detach().numpy()
    np.testing.assert_allclose(a.grad.numpy(), bn / (an + bn) ** 2, rtol=0.05)
    np.testing.assert_allclose(b.grad.numpy(), -an / (an + bn) ** 2, rtol=0.05)


def test_dirichlet_rsample_gradient_of_mean():
    torcia.manual_seed(3)
    conc = leaf([0.7, 1.5, 3.0])
    w = torcia.tensor([1.0, -2.0, 0.5], dtype=torcia.float64)
    (D.Dirichlet(conc).rsample((N,)) * w).sum(-1).mean().backward()
    c = conc.detach().numpy()
    c0 = c.sum()
    # d E[x_i] / d c_j = (delta_ij c0 - c_i) / c0^2
    jac = (np.eye(3) * c0 - c[:, None]) / c0 ** 2
    np.testing.assert_allclose(conc.grad.numpy(), w.numpy() @ jac, rtol=0.05, atol=2e-3)


def test_student_t_and_chi2_rsample_are_differentiable():
    df = leaf([3.0, 5.0])
    torcia.manual_seed(4)
    D.Chi2(df).rsample((N,)).mean(0).sum().backward()
    np.testing.assert_allclose(df.grad.numpy(), [1.0, 1.0], rtol=0.03)


LOG_PROB_CASES = {
    "Normal": (lambda a, b: D.Normal(a, b), [0.3, -0.2], [1.2, 0.7], [0.1, 0.5]),
    "Laplace": (lambda a, b: D.Laplace(a, b), [0.3, -0.2], [1.2, 0.7], [0.1, 0.5]),
    "Gamma": (lambda a, b: D.Gamma(a, b), [1.3, 2.2], [1.2, 0.7], [0.4, 1.5]),
    "Beta": (lambda a, b: D.Beta(a, b), [1.3, 2.2], [1.2, 0.7], [0.4, 0.6]),
    "LogNormal": (lambda a, b: D.LogNormal(a, b), [0.3, -0.2], [1.2, 0.7], [0.4, 1.5]),
    "Uniform": (lambda a, b: D.Uniform(a, b + 1.0), [-0.3, -0.2], [1.2, 0.7], [0.4, 0.5]),
}


@pytest.mark.parametrize("name", sorted(LOG_PROB_CASES))
def test_gradcheck_log_prob_cdf_entropy(name):
    make, a, b, v = LOG_PROB_CASES[name]
    a, b, v = leaf(a), leaf(b), torcia.tensor(v, dtype=torcia.float64)
    assert gradcheck(lambda a, b: make(a, b).log_prob(v), (a, b))
    assert gradcheck(lambda a, b: make(a, b).entropy(), (a, b))
    if name not in ("Beta",):
        assert gradcheck(lambda a, b: make(a, b).cdf(v), (a, b))


def test_gradcheck_gamma_cdf_in_both_arguments():
    from torcia.distributions._special import gammainc

    a, x = leaf([0.5, 1.5, 4.0]), leaf([0.3, 2.0, 3.5])
    assert gradcheck(gammainc, (a, x), atol=1e-5, rtol=1e-3)


def test_gradcheck_categorical_and_mvn():
    logits = leaf([[0.1, 0.5, -0.3], [1.0, 0.0, 0.2]])
    idx = torcia.tensor([2, 0])
    assert gradcheck(lambda z: D.Categorical(logits=z).log_prob(idx), (logits,))
    assert gradcheck(lambda z: D.Categorical(logits=z).entropy(), (logits,))
    loc = leaf([0.2, -0.1])
    tril = leaf([[1.0, 0.0], [0.3, 0.8]])
    x = torcia.tensor([0.5, 0.5], dtype=torcia.float64)
    assert gradcheck(lambda m, s: D.MultivariateNormal(m, scale_tril=s.tril()).log_prob(x),
                     (loc, tril))


def test_gammainc_matches_scipy_over_a_wide_range():
    special = pytest.importorskip("scipy.special")
    from torcia.distributions._special import gammainc

    a = np.array([1e-3, 0.1, 0.5, 1.0, 3.0, 30.0, 500.0, 1e5, 1e5, 1e5])
    x = np.array([1e-4, 2.0, 0.01, 1.0, 10.0, 29.0, 510.0, 0.999e5, 1.01e5, 0.97e5])
    got = gammainc(torcia.tensor(a), torcia.tensor(x)).numpy()
    np.testing.assert_allclose(got, special.gammainc(a, x), rtol=1e-9, atol=1e-14)


def test_implicit_gamma_gradient_agrees_with_pytorch():
    torch = pytest.importorskip("torch")
    from torcia.distributions._special import standard_gamma_grad

    alpha = np.repeat([0.05, 0.3, 1.0, 2.5, 10.0, 80.0, 500.0], 10)
    x = np.random.RandomState(0).gamma(alpha)
    ours = standard_gamma_grad(torcia.tensor(x), torcia.tensor(alpha)).numpy()
    # PyTorch's is an approximation (series, asymptotic expansions and a rational fit)
    theirs = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=5e-4)


def test_student_t_rsample_gradient_in_df():
    torcia.manual_seed(5)
    df = leaf([10.0, 16.0])
    (D.StudentT(df).rsample((60_000,)) ** 2).mean(0).sum().backward()
    # E[x^2] = df / (df - 2)
    d = df.detach().numpy()
    np.testing.assert_allclose(df.grad.numpy(), -2 / (d - 2) ** 2, rtol=0.08)


def test_straight_through_gradient_is_the_probabilities_gradient():
    logits = leaf([0.2, -0.3, 0.5])
    w = torcia.tensor([1.0, 2.0, -1.0], dtype=torcia.float64)
    s = D.OneHotCategoricalStraightThrough(logits=logits).rsample()
    assert sorted(s.detach().tolist()) == [0.0, 0.0, 1.0]
    (s * w).sum().backward()
    expected = leaf([0.2, -0.3, 0.5])
    (torcia.softmax(expected, -1) * w).sum().backward()
    np.testing.assert_allclose(logits.grad.numpy(), expected.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda z: D.RelaxedOneHotCategorical(torcia.tensor(0.5, dtype=torcia.float64), logits=z),
    lambda z: D.RelaxedBernoulli(torcia.tensor(0.5, dtype=torcia.float64), logits=z),
    lambda z: D.LogisticNormal(z, torcia.ones(3, dtype=torcia.float64)),
    lambda z: D.Gumbel(z, torcia.ones(3, dtype=torcia.float64)),
], ids=["RelaxedOneHotCategorical", "RelaxedBernoulli", "LogisticNormal", "Gumbel"])
def test_gradcheck_rsample_with_fixed_noise(make):
    def draw(z):
        torcia.manual_seed(0)
        return make(z).rsample((2,))

    assert gradcheck(draw, (leaf([0.1, -0.4, 0.3]),))


def test_multivariate_normal_gradients_as_pytorch_defines_them():
    # log N(x; 0, Sigma) = -1/2 x^T Sigma^-1 x - 1/2 log det Sigma - k/2 log(2 pi): its
    # derivative in Sigma, taken as a symmetric matrix, is (S^-1 x x^T S^-1 - S^-1) / 2
    sigma = np.array([[2.0, 0.3, 0.1], [0.3, 1.5, 0.2], [0.1, 0.2, 1.0]])
    x = np.array([0.3, -0.2, 0.5])
    inv = np.linalg.inv(sigma)
    want = (inv @ np.outer(x, x) @ inv - inv) / 2
    cov = leaf(sigma)
    D.MultivariateNormal(torcia.zeros(3, dtype=torcia.float64), covariance_matrix=cov).log_prob(
        torcia.tensor(x)).backward()
    np.testing.assert_allclose(cov.grad.numpy(), want, rtol=1e-10)
    # scale_tril: only the lower triangle is read (the upper one gets zero), and the lower
    # one passes finite differences
    tril = np.linalg.cholesky(sigma)
    st = leaf(tril)
    D.MultivariateNormal(torcia.zeros(3, dtype=torcia.float64), scale_tril=st).log_prob(
        torcia.tensor(x)).backward()
    assert np.all(np.triu(st.grad.numpy(), 1) == 0)

    def log_prob(lower):
        return D.MultivariateNormal(torcia.zeros(3, dtype=torcia.float64),
                                    scale_tril=lower.tril()).log_prob(torcia.tensor(x))

    assert gradcheck(log_prob, (leaf(tril),))
