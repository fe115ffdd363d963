"""The distributions under test: constructor arguments and values in their support, shared
by the parity, sampling and shape tests. Parameters have batch shape (3,); values have shape
(4, 3) (or (4, 3) + event shape), so that log_prob broadcasts over a sample dimension."""

from __future__ import annotations

import numpy as np

rs = np.random.RandomState(1234)


def pos(*shape, low=0.5, high=3.0):
    return rs.uniform(low, high, size=shape)


def unit(*shape, low=0.1, high=0.9):
    return rs.uniform(low, high, size=shape)


def simplex(*shape):
    x = rs.uniform(0.2, 1.0, size=shape)
    return x / x.sum(-1, keepdims=True)


def spd(n, batch=()):
    a = rs.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def corr_cholesky(*batch, n):
    a = rs.normal(size=batch + (n, n + 2))
    cov = a @ np.swapaxes(a, -1, -2)
    d = np.sqrt(np.diagonal(cov, axis1=-2, axis2=-1))
    return np.linalg.cholesky(cov / d[..., :, None] / d[..., None, :])


#: name -> (class name, positional parameters, value, is_discrete)
CASES = {
    "Normal": ("Normal", [rs.normal(size=3), pos(3)], rs.normal(size=(4, 3)), False),
    "Laplace": ("Laplace", [rs.normal(size=3), pos(3)], rs.normal(size=(4, 3)), False),
    "Uniform": ("Uniform", [np.array([-1.0, 0.0, 0.5]), np.array([1.0, 2.0, 3.0])],
                np.tile([0.5, 1.0, 2.0], (4, 1)), False),
    "Exponential": ("Exponential", [pos(3)], pos(4, 3), False),
    "Gamma": ("Gamma", [pos(3), pos(3)], pos(4, 3), False),
    "Chi2": ("Chi2", [pos(3, high=5.0)], pos(4, 3), False),
    "Beta": ("Beta", [pos(3), pos(3)], unit(4, 3), False),
    "LogNormal": ("LogNormal", [rs.normal(size=3), pos(3, low=0.2, high=0.6)], pos(4, 3), False),
    "Dirichlet": ("Dirichlet", [pos(3, 4)], simplex(4, 3, 4), False),
    "Poisson": ("Poisson", [pos(3)], rs.randint(0, 6, size=(4, 3)).astype(float), True),
    "Bernoulli": ("Bernoulli", [unit(3)], rs.randint(0, 2, size=(4, 3)).astype(float), True),
    "Binomial": ("Binomial", [np.array([5.0, 5.0, 5.0]), unit(3)],
                 rs.randint(0, 6, size=(4, 3)).astype(float), True),
    "Categorical": ("Categorical", [simplex(3, 5)], rs.randint(0, 5, size=(4, 3)), True),
    "OneHotCategorical": ("OneHotCategorical", [simplex(3, 5)],
                          np.eye(5)[rs.randint(0, 5, size=(4, 3))], True),
    "MultivariateNormal": ("MultivariateNormal", [rs.normal(size=(3, 2)), spd(2, (3,))],
                           rs.normal(size=(4, 3, 2)), False),
    "Cauchy": ("Cauchy", [rs.normal(size=3), pos(3)], rs.normal(size=(4, 3)), False),
    "HalfCauchy": ("HalfCauchy", [pos(3)], pos(4, 3), False),
    "HalfNormal": ("HalfNormal", [pos(3)], pos(4, 3), False),
    "Geometric": ("Geometric", [unit(3)], rs.randint(0, 6, size=(4, 3)).astype(float), True),
    "Gumbel": ("Gumbel", [rs.normal(size=3), pos(3)], rs.normal(size=(4, 3)), False),
    "InverseGamma": ("InverseGamma", [pos(3, low=4.5, high=6.0), pos(3)], pos(4, 3), False),
    "Kumaraswamy": ("Kumaraswamy", [pos(3, low=1.2), pos(3, low=1.2)], unit(4, 3), False),
    "Pareto": ("Pareto", [pos(3, low=0.5, high=1.0), pos(3, low=4.5, high=6.0)],
               pos(4, 3, low=1.0, high=4.0), False),
    "Weibull": ("Weibull", [pos(3), pos(3)], pos(4, 3), False),
    "StudentT": ("StudentT", [pos(3, low=4.5, high=8.0), rs.normal(size=3), pos(3)],
                 rs.normal(size=(4, 3)), False),
    "FisherSnedecor": ("FisherSnedecor", [pos(3, low=3.0, high=8.0),
                                          pos(3, low=9.0, high=12.0)], pos(4, 3), False),
    "ContinuousBernoulli": ("ContinuousBernoulli", [np.array([0.2, 0.4995, 0.8])],
                            unit(4, 3), False),
    "NegativeBinomial": ("NegativeBinomial", [pos(3), unit(3, high=0.6)],
                         rs.randint(0, 6, size=(4, 3)).astype(float), True),
    "VonMises": ("VonMises", [rs.normal(size=3), pos(3)], rs.uniform(-3, 3, size=(4, 3)),
                 False),
    "GeneralizedPareto": ("GeneralizedPareto", [np.zeros(3), pos(3),
                                                np.array([-0.2, 0.0, 0.2])],
                          pos(4, 3, low=0.1, high=2.0), False),
    "Multinomial": ("Multinomial", [5, simplex(3, 4)],
                    np.stack([rs.multinomial(5, [0.25] * 4, size=3) for _ in range(4)])
                    .astype(float), True),
    "LowRankMultivariateNormal": ("LowRankMultivariateNormal",
                                  [rs.normal(size=(3, 2)), rs.normal(size=(3, 2, 1)),
                                   pos(3, 2)], rs.normal(size=(4, 3, 2)), False),
    "LogisticNormal": ("LogisticNormal", [rs.normal(size=(3, 2)), pos(3, 2)],
                       simplex(4, 3, 3), False),
    "RelaxedBernoulli": ("RelaxedBernoulli", [np.array(0.7), unit(3)], unit(4, 3), False),
    "RelaxedOneHotCategorical": ("RelaxedOneHotCategorical", [np.array(0.7), simplex(3, 4)],
                                 simplex(4, 3, 4), False),
    "LKJCholesky": ("LKJCholesky", [3, pos(3)], corr_cholesky(4, 3, n=3), False),
    "Wishart": ("Wishart", [pos(3, low=3.0, high=5.0), spd(2, (3,))], spd(2, (4, 3)), False),
}
