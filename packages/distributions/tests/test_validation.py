"""Argument and support validation, on by default as in PyTorch, with its messages; and the
constraints themselves."""

import re

import pytest

import torcia
import torcia.distributions as D
from torcia.distributions import constraints


@pytest.fixture
def default_validation():
    yield
    D.Distribution.set_default_validate_args(True)


BAD_PARAMETERS = [
    (lambda: D.Normal(0.0, -1.0), "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Gamma(torcia.tensor([1.0, -2.0]), 1.0), "concentration", "GreaterThan"),
    (lambda: D.Bernoulli(probs=torcia.tensor(1.5)), "probs", "Interval"),
    (lambda: D.Categorical(probs=torcia.tensor([-0.5, 1.5])), "probs", "Simplex()"),
    (lambda: D.Dirichlet(torcia.tensor([1.0, 0.0])), "concentration", "IndependentConstraint"),
    (lambda: D.Poisson(torcia.tensor(-1.0)), "rate", "GreaterThanEq"),
    (lambda: D.Binomial(torcia.tensor(2.5), torcia.tensor(0.5)), "total_count",
     "IntegerGreaterThan"),
    (lambda: D.MultivariateNormal(torcia.zeros(2), torcia.tensor([[1.0, 2.0], [2.0, 1.0]])),
     "covariance_matrix", "PositiveDefinite"),
    (lambda: D.Exponential(torcia.tensor(float("nan"))), "rate", "GreaterThan"),
]


@pytest.mark.parametrize("make, param, constraint", BAD_PARAMETERS)
def test_bad_parameters_raise_value_error_naming_the_constraint(make, param, constraint):
    with pytest.raises(ValueError, match=f"Expected parameter {param} .* to satisfy the "
                                         f"constraint {re.escape(constraint)}"):
        make()


def test_values_outside_the_support_raise():
    with pytest.raises(ValueError, match=r"to be within the support \(GreaterThanEq"):
        D.Gamma(1.0, 1.0).log_prob(torcia.tensor(-1.0))
    with pytest.raises(ValueError, match="within the support"):
        D.Categorical(logits=torcia.zeros(3)).log_prob(torcia.tensor(3))
    with pytest.raises(ValueError, match="within the support"):
        D.Bernoulli(0.3).log_prob(torcia.tensor(0.5))
    with pytest.raises(ValueError, match="must match event_shape"):
        D.Dirichlet(torcia.ones(3)).log_prob(torcia.ones(2) / 2)
    with pytest.raises(ValueError, match="must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)


def test_uniform_needs_low_below_high():
    with pytest.raises(ValueError, match="Uniform is not defined when low>= high"):
        D.Uniform(1.0, 0.0)


def test_probs_or_logits_exactly_one():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        D.Categorical()
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        D.Bernoulli(0.5, 0.0)


def test_validation_can_be_turned_off(default_validation):
    D.Normal(0.0, -1.0, validate_args=False)
    D.Distribution.set_default_validate_args(False)
    d = D.Normal(0.0, -1.0)
    assert not d._validate_args
    D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_expand_keeps_validation_and_shares_parameters():
    d = D.Normal(torcia.tensor([0.0, 1.0]), 1.0).expand((3, 2))
    assert tuple(d.batch_shape) == (3, 2)
    with pytest.raises(ValueError, match="within the support"):
        D.Gamma(torcia.ones(2), 1.0).expand((3, 2)).log_prob(-torcia.ones(3, 2))


@pytest.mark.parametrize("constraint, good, bad", [
    (constraints.positive, [1.0], [0.0]),
    (constraints.unit_interval, [0.0, 1.0], [1.5]),
    (constraints.simplex, [[0.3, 0.7]], [[0.3, 0.3]]),
    (constraints.lower_cholesky, [[[1.0, 0.0], [2.0, 1.0]]], [[[1.0, 1.0], [0.0, 1.0]]]),
    (constraints.corr_cholesky, [[[1.0, 0.0], [0.6, 0.8]]], [[[1.0, 0.0], [0.6, 0.9]]]),
    (constraints.integer_interval(0, 3), [0.0, 3.0], [4.0]),
    (constraints.one_hot, [[0.0, 1.0]], [[1.0, 1.0]]),
    (constraints.real_vector, [[0.0, 1.0]], [[0.0, float("nan")]]),
])
def test_constraints(constraint, good, bad):
    assert bool(constraint.check(torcia.tensor(good)).all())
    assert not bool(constraint.check(torcia.tensor(bad)).all())


def test_dependent_constraints():
    assert constraints.is_dependent(D.Uniform.arg_constraints["low"])
    assert not constraints.is_dependent(constraints.real)
    with pytest.raises(ValueError, match="dependent constraint"):
        constraints.dependent.check(torcia.zeros(1))
    assert D.Uniform(0.0, 2.0).support.upper_bound.item() == 2.0
