"""Gradients of torcia.special: the composite functions by finite differences, every
differentiable function against torch's gradient, and PyTorch's non-differentiable ones."""

import numpy as np
import pytest

import torcia
from torcia import ops
from torcia.autograd import gradcheck, gradgradcheck

S = torcia.special
RNG = np.random.default_rng(3)


def t(values):
    return torcia.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


@pytest.mark.parametrize("fn, make", [
    (lambda x: S.logit(x), lambda: t(RNG.uniform(0.1, 0.9, (2, 3)))),
    (lambda x: S.logit(x, eps=0.2), lambda: t([0.1, 0.5, 0.7, 0.95])),
    (lambda x: S.multigammaln(x, 3), lambda: t(RNG.uniform(1.5, 4.0, (2, 3)))),
    (lambda x: torcia.mvlgamma(x, 1), lambda: t(RNG.uniform(0.5, 4.0, 4))),
    (lambda x: S.polygamma(0, x), lambda: t(RNG.uniform(0.5, 4.0, 4))),
])
def test_composites_gradcheck(fn, make):
    x = make()
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


GRAD_CASES = {
    "i0": [-1.5, 0.3, 2.0], "i0e": [-1.5, 0.3, 2.0], "i1": [-1.5, 0.0, 2.0],
    "i1e": [-1.5, 0.0, 2.0], "ndtr": [-1.5, 0.3, 2.0], "ndtri": [0.1, 0.5, 0.8],
    "log_ndtr": [-3.0, 0.3, 2.0], "erfcx": [-1.5, 0.3, 2.0], "sinc": [-1.5, 0.0, 0.3],
    "entr": [0.2, 1.0, 3.0], "logit": [0.2, 0.5, 0.7], "expit": [-1.0, 0.5, 2.0],
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_unary_gradient_matches_torch(name):
    torch = pytest.importorskip("torch")
    data = np.array(GRAD_CASES[name])
    x = t(data)
    getattr(S, name)(x).sum().backward()
    tx = torch.tensor(data, requires_grad=True)
    getattr(torch.special, name)(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("name, a, b, wrt", [
    ("xlog1py", [0.0, 1.5, -2.0], [0.5, 1.0, 3.0], (0, 1)),
    ("zeta", [2.0, 3.5, 4.0], [0.5, 1.0, 3.0], (1,)),
    ("gammainc", [0.5, 1.5, 4.0], [0.5, 1.0, 3.0], (1,)),
    ("gammaincc", [0.5, 1.5, 4.0], [0.5, 1.0, 3.0], (1,)),
])
def test_binary_gradient_matches_torch(name, a, b, wrt):
    torch = pytest.importorskip("torch")
    ours = [torcia.tensor(a, dtype=torcia.float64), torcia.tensor(b, dtype=torcia.float64)]
    theirs = [torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)]
    for i in wrt:
        ours[i].requires_grad_()
        theirs[i].requires_grad_()
    getattr(S, name)(*ours).sum().backward()
    getattr(torch.special, name)(*theirs).sum().backward()
    for i in wrt:
        np.testing.assert_allclose(ours[i].grad.numpy(), theirs[i].grad.numpy(), rtol=1e-10)


@pytest.mark.torch
def test_polygamma_and_multigammaln_gradients_match_torch():
    torch = pytest.importorskip("torch")
    data = np.array([1.7, 2.5, 4.0])
    for ours, theirs in [(lambda x: S.polygamma(2, x), lambda x: torch.special.polygamma(2, x)),
                         (lambda x: S.multigammaln(x, 2),
                          lambda x: torch.special.multigammaln(x, 2))]:
        x, tx = t(data), torch.tensor(data, requires_grad=True)
        ours(x).sum().backward()
        theirs(tx).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("name", ops.SPECIAL_NOT_DIFFERENTIABLE)
def test_functions_without_a_derivative_do_not_require_grad(name):
    # as in PyTorch: these results never carry a gradient
    x = t([0.3, 0.6])
    fn = getattr(S, name)
    out = fn(x, 2) if name in ops.SPECIAL_BINARY else fn(x)
    assert not out.requires_grad


@pytest.mark.parametrize("name, message", [
    ("zeta", "the derivative for 'zeta' is not implemented"),
    ("gammainc", "the derivative for 'igamma: input' is not implemented"),
    ("gammaincc", "the derivative for 'igammac: input' is not implemented"),
])
def test_first_argument_derivative_not_implemented(name, message):
    a = t([2.0, 3.0])
    out = getattr(S, name)(a, torcia.tensor([1.0, 2.0], dtype=torcia.float64))
    with pytest.raises(NotImplementedError, match=message):
        out.sum().backward()
