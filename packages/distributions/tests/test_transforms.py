"""Transforms: forward, inverse and log|det J| against PyTorch and against a numerical
Jacobian; shapes; and the constraint registry (``biject_to``, ``transform_to``)."""

import numpy as np
import pytest

import torcia
import torcia.distributions as D
from torcia.distributions import constraints
from torcia.distributions import transforms as T

rs = np.random.RandomState(0)


def ours(x):
    return torcia.tensor(np.asarray(x, dtype=np.float64))


def transform_cases(lib, mod):
    """(name, transform, input) triples; ``mod`` is torcia.distributions or
    torch.distributions, ``lib`` the tensor library."""
    def t(x):
        return lib.tensor(np.asarray(x, dtype=np.float64))

    x = rs.normal(size=(2, 3))
    return [
        ("Exp", mod.ExpTransform(), x),
        ("Affine", mod.AffineTransform(t([1.0, -2.0, 0.5]), t([2.0, -0.5, 3.0])), x),
        ("AffineScalar", mod.AffineTransform(1.0, -3.0), x),
        ("AffineEvent", mod.AffineTransform(t([1.0, 2.0, 3.0]), t([2.0, 0.5, 3.0]),
                                            event_dim=1), x),
        ("Sigmoid", mod.SigmoidTransform(), x),
        ("Tanh", mod.TanhTransform(), x),
        ("Softplus", mod.SoftplusTransform(), x),
        ("Power", mod.PowerTransform(t(2.5)), np.abs(x) + 0.1),
        ("StickBreaking", mod.StickBreakingTransform(), x),
        ("LowerCholesky", mod.LowerCholeskyTransform(), rs.normal(size=(2, 3, 3))),
        ("CorrCholesky", mod.CorrCholeskyTransform(), x),
        ("Compose", mod.ComposeTransform([mod.AffineTransform(0.5, 2.0),
                                          mod.SigmoidTransform()]), x),
        ("Independent", mod.IndependentTransform(mod.ExpTransform(), 1), x),
        ("Reshape", mod.ReshapeTransform((3,), (3, 1)), x),
        ("Cat", mod.CatTransform([mod.ExpTransform(), mod.SigmoidTransform()], dim=-1,
                                 lengths=[1, 2]), x),
        ("Stack", mod.StackTransform([mod.ExpTransform(), mod.TanhTransform(),
                                      mod.AffineTransform(1.0, 2.0)], dim=-1), x),
        ("Inverse", mod.ExpTransform().inv, np.abs(x) + 0.1),
        ("CumulativeDistribution", mod.CumulativeDistributionTransform(
            mod.Normal(t(0.5), t(2.0))), x),
    ]


NAMES = [c[0] for c in transform_cases(torcia, D)]


@pytest.mark.torch
@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_transforms_match_pytorch(index):
    torch = pytest.importorskip("torch")
    name, ours_t, x = transform_cases(torcia, D)[index]
    _, theirs_t, _ = transform_cases(torch, torch.distributions)[index]
    xo, xt = ours(x), torch.tensor(x)
    yo, yt = ours_t(xo), theirs_t(xt)
    np.testing.assert_allclose(yo.numpy(), yt.numpy(), rtol=1e-10, atol=1e-12)
    if name != "Abs":
        np.testing.assert_allclose(ours_t.inv(yo).numpy(), theirs_t.inv(yt).numpy(),
                                   rtol=1e-8, atol=1e-10)
    if name not in ("LowerCholesky",):  # not bijective on square matrices: no Jacobian
        np.testing.assert_allclose(ours_t.log_abs_det_jacobian(xo, yo).numpy(),
                                   theirs_t.log_abs_det_jacobian(xt, yt).numpy(),
                                   rtol=1e-9, atol=1e-10)
    assert tuple(ours_t.forward_shape(xo.shape)) == tuple(theirs_t.forward_shape(xt.shape))
    assert tuple(ours_t.inverse_shape(yo.shape)) == tuple(theirs_t.inverse_shape(yt.shape))
    assert ours_t.bijective == theirs_t.bijective
    assert ours_t.codomain.event_dim == theirs_t.codomain.event_dim


def numerical_log_det(fn, x, eps=1e-6):
    """log|det J| of ``fn`` at vector ``x`` by central differences (square Jacobians)."""
    n = x.size
    J = np.zeros((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        J[:, i] = (fn(x + e) - fn(x - e)) / (2 * eps)
    return np.linalg.slogdet(J)[1]


@pytest.mark.parametrize("make, dim", [
    (lambda: T.ExpTransform(), 3),
    (lambda: T.SigmoidTransform(), 3),
    (lambda: T.TanhTransform(), 3),
    (lambda: T.AffineTransform(ours([1.0, 2.0, 3.0]), ours([2.0, -0.5, 3.0]), event_dim=1), 3),
    (lambda: T.PowerTransform(ours(1.7)), 3),
    (lambda: T.ComposeTransform([T.AffineTransform(0.5, 2.0), T.TanhTransform()]), 3),
])
def test_log_abs_det_jacobian_elementwise_by_finite_differences(make, dim):
    t = make()
    x = np.abs(rs.normal(size=dim)) + 0.2
    y = t(ours(x))
    ldj = t.log_abs_det_jacobian(ours(x), y)
    expected = numerical_log_det(lambda v: t(ours(v)).numpy(), x)
    got = ldj.sum().item() if ldj.dim() else ldj.item()
    assert abs(got - expected) < 1e-6


def test_stick_breaking_log_det_by_finite_differences():
    t = T.StickBreakingTransform()
    x = rs.normal(size=3)
    y = t(ours(x))
    # the simplex has one fewer degree of freedom: J of x -> y[:-1]
    expected = numerical_log_det(lambda v: t(ours(v)).numpy()[:-1], x)
    assert abs(t.log_abs_det_jacobian(ours(x), y).item() - expected) < 1e-6


def test_corr_cholesky_maps_onto_correlation_factors():
    t = T.CorrCholeskyTransform()
    y = t(ours(rs.normal(size=(4, 6))))
    assert tuple(y.shape) == (4, 4, 4)
    assert bool(constraints.corr_cholesky.check(y).all())
    np.testing.assert_allclose(t.inv(y).numpy(), t.inv(t(t.inv(y))).numpy(), atol=1e-9)


def test_cache_returns_the_input_itself():
    t = T.ExpTransform().with_cache(1)
    x = ours([0.5])
    assert t.inv(t(x)) is x
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        T.ExpTransform(cache_size=2)


def test_reshape_rejects_mismatched_sizes():
    with pytest.raises(ValueError, match="different numbers of elements"):
        T.ReshapeTransform((3,), (2, 2))


# ---------------------------------------------------------------------------------------
# Constraint registry
# ---------------------------------------------------------------------------------------

CONSTRAINTS = [
    (constraints.real, (3,)),
    (constraints.positive, (3,)),
    (constraints.nonnegative, (3,)),
    (constraints.greater_than(2.0), (3,)),
    (constraints.less_than(-1.0), (3,)),
    (constraints.unit_interval, (3,)),
    (constraints.interval(-2.0, 5.0), (3,)),
    (constraints.half_open_interval(0.0, 4.0), (3,)),
    (constraints.simplex, (3,)),
    (constraints.real_vector, (3,)),
    (constraints.corr_cholesky, (3,)),
    (constraints.independent(constraints.positive, 1), (3,)),
    (constraints.cat([constraints.positive, constraints.unit_interval], -1, [1, 2]), (3,)),
    (constraints.stack([constraints.positive, constraints.real, constraints.unit_interval],
                       -1), (3,)),
]


@pytest.mark.parametrize("constraint, shape", CONSTRAINTS, ids=repr)
@pytest.mark.parametrize("registry", [D.biject_to, D.transform_to],
                         ids=["biject_to", "transform_to"])
def test_registry_maps_onto_the_constraint(registry, constraint, shape):
    t = registry(constraint)
    x = ours(rs.normal(size=(5,) + shape))
    y = t(x)
    assert bool(constraint.check(y).all()), y
    if registry is D.biject_to:
        np.testing.assert_allclose(t.inv(y).numpy(), x.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("constraint", [constraints.lower_cholesky,
                                        constraints.positive_definite])
def test_transform_to_matrices(constraint):
    y = D.transform_to(constraint)(ours(rs.normal(size=(2, 3, 3))))
    assert bool(constraint.check(y).all())


def test_registry_errors_and_register():
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        D.biject_to(constraints.boolean)
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        D.biject_to.register(int, lambda c: None)
    registry = D.constraint_registry.ConstraintRegistry()
    registry.register(constraints.positive, lambda c: T.SoftplusTransform())
    assert isinstance(registry(constraints.positive), T.SoftplusTransform)


def test_transformed_distribution_through_biject_to_matches_change_of_variables():
    base = D.Normal(ours(np.zeros(3)), ours(np.ones(3)))
    d = D.TransformedDistribution(base, [D.biject_to(constraints.unit_interval)])
    y = ours([0.2, 0.5, 0.9])
    x = np.log(y.numpy() / (1 - y.numpy()))
    expected = (-0.5 * x ** 2 - 0.5 * np.log(2 * np.pi)) - np.log(y.numpy() * (1 - y.numpy()))
    np.testing.assert_allclose(d.log_prob(y).numpy(), expected, rtol=1e-10)
