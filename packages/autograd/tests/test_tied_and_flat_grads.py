"""Gradients PyTorch defines where a naive formula is undefined or picks one element
(issue #36): piecewise constant ops have a zero gradient, ties of the median share it,
and the spread of equal values has a zero gradient instead of 0 / 0."""

import pytest

import torcia
from torcia.autograd import gradcheck, gradgradcheck


@pytest.mark.parametrize("op", ["sign", "floor", "ceil", "trunc", "round"])
def test_piecewise_constant_ops_have_a_zero_gradient(op):
    x = torcia.tensor([1.5, -2.0, 0.25], requires_grad=True)
    out = getattr(torcia, op)(x)
    assert out.requires_grad
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_round_with_decimals_has_a_zero_gradient():
    x = torcia.tensor([1.25, -2.0], requires_grad=True)
    torcia.round(x, decimals=1).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_median_spreads_its_gradient_over_ties():
    # the lower median of [1, 2, 2, 3] is 2, held by two elements: half each
    x = torcia.tensor([1.0, 2.0, 2.0, 3.0], requires_grad=True)
    m = torcia.median(x)
    assert m.item() == 2.0
    m.backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5, 0.0]
    # with a NaN the median is NaN and the gradient goes to the NaN elements
    y = torcia.tensor([1.0, float("nan"), 2.0], requires_grad=True)
    torcia.median(y).backward()
    assert y.grad.tolist() == [0.0, 1.0, 0.0]


def test_median_without_ties_passes_gradcheck():
    x = torcia.tensor([[0.4, 2.0, -2.0], [1.2, -0.4, -1.2]], dtype=torcia.float64,
                      requires_grad=True)
    assert gradcheck(torcia.median, (x,))
    assert gradgradcheck(torcia.median, (x,))


@pytest.mark.parametrize("op", ["std", "var"])
def test_spread_of_equal_values_has_a_zero_gradient(op):
    x = torcia.ones(3, requires_grad=True)
    getattr(torcia, op)(x).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_std_gradient_elsewhere_is_unchanged():
    x = torcia.tensor([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]], dtype=torcia.float64,
                      requires_grad=True)
    # row 1 is constant (std 0, gradient 0); row 0 passes finite differences
    torcia.std(x, 1).sum().backward()
    assert x.grad[1].tolist() == [0.0, 0.0, 0.0]
    assert gradcheck(lambda t: torcia.std(t, 1), (x[:1].detach().requires_grad_(),))


# ----- reverse over forward ----------------------------------------------------------------


def test_reverse_over_forward_hessian():
    func = pytest.importorskip("torcia.func")  # torcia-nn's
    hessian, jacfwd, jacrev = func.hessian, func.jacfwd, func.jacrev

    # f = sum(x^3) + sin(x0 x1): the Hessian is diag(6 x) plus, from the sine,
    # -sin(x0 x1) [[x1^2, x0 x1], [x0 x1, x0^2]] + cos(x0 x1) [[0, 1], [1, 0]]
    def f(x):
        return (x ** 3).sum() + (x[0] * x[1]).sin()

    x = torcia.tensor([1.0, 2.0], dtype=torcia.float64)
    s, c = torcia.sin(x[0] * x[1]).item(), torcia.cos(x[0] * x[1]).item()
    want = [[6 - 4 * s, -2 * s + c], [-2 * s + c, 12 - s]]
    for transform in (jacrev(jacfwd(f)), jacfwd(jacrev(f)), hessian(f)):
        got = transform(x)
        assert got.tolist() == [pytest.approx(row) for row in want]


def test_forward_mode_tangent_is_differentiable():
    import torcia.autograd.forward_ad as fwAD

    # d/dx of the tangent of exp(x) along t = 1 is exp(x)
    x = torcia.tensor([0.5], dtype=torcia.float64, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torcia.ones(1, dtype=torcia.float64))
        tangent = fwAD.unpack_dual(d.exp()).tangent
    (g,) = torcia.autograd.grad(tangent.sum(), x)
    assert g.item() == pytest.approx(torcia.exp(x).item())
