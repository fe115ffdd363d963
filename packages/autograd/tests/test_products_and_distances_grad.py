"""Gradients of mv, addmv, addr, addbmm, baddbmm, dist and cdist: finite differences in
float64 (first and second order), and PyTorch's gradients where torch is installed."""

import math

import numpy as np
import pytest

import torcia
from torcia.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(1)

# name -> (function of the library (torcia or torch) and the inputs, input shapes)
CASES = {
    "mv": (lambda L, m, v: L.mv(m, v), [(3, 4), (4,)]),
    "Tensor.mv": (lambda L, m, v: m.mv(v), [(2, 3), (3,)]),
    "addmv": (lambda L, i, m, v: L.addmv(i, m, v, beta=0.5, alpha=2), [(3,), (3, 4), (4,)]),
    "addmv broadcast": (lambda L, i, m, v: L.addmv(i, m, v), [(1,), (3, 4), (4,)]),
    "addr": (lambda L, i, a, b: L.addr(i, a, b, beta=2, alpha=-1), [(3, 4), (3,), (4,)]),
    "addbmm": (lambda L, i, a, b: L.addbmm(i, a, b, alpha=0.3),
               [(3, 5), (2, 3, 4), (2, 4, 5)]),
    "baddbmm": (lambda L, i, a, b: L.baddbmm(i, a, b, beta=1.5),
                [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    "baddbmm beta=0": (lambda L, i, a, b: L.baddbmm(i, a, b, beta=0),
                       [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    "dist": (lambda L, a, b: L.dist(a, b), [(3, 4), (4,)]),
    "dist p=1": (lambda L, a, b: L.dist(a, b, 1), [(5,), (5,)]),
    "dist p=3.5": (lambda L, a, b: L.dist(a, b, 3.5), [(5,), (5,)]),
    "dist p=inf": (lambda L, a, b: L.dist(a, b, math.inf), [(5,), (5,)]),
    "cdist": (lambda L, a, b: L.cdist(a, b), [(3, 4), (5, 4)]),
    "cdist batched p=1": (lambda L, a, b: L.cdist(a, b, p=1.0), [(2, 3, 4), (5, 4)]),
    "cdist p=3": (lambda L, a, b: L.cdist(a, b, p=3.0), [(3, 2), (2, 2)]),
    "cdist p=inf": (lambda L, a, b: L.cdist(a, b, p=math.inf), [(3, 2), (2, 2)]),
}
SECOND_ORDER = ["mv", "addmv", "addr", "addbmm", "baddbmm", "dist", "cdist", "cdist p=3"]


def _inputs(name):
    return [torcia.tensor(RNG.standard_normal(s), dtype=torcia.float64, requires_grad=True)
            for s in CASES[name][1]]


def _fn(name):
    fn = CASES[name][0]
    return lambda *xs: fn(torcia, *xs)


@pytest.mark.parametrize("name", CASES)
def test_gradcheck(name):
    assert gradcheck(_fn(name), _inputs(name), eps=1e-6, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_gradgradcheck(name):
    assert gradgradcheck(_fn(name), _inputs(name), eps=1e-6, atol=1e-5, rtol=1e-3)


def test_cdist_gradient_at_zero_distance_is_zero():
    # PyTorch's choice: a pair of equal rows contributes no gradient, not NaN
    a = torcia.tensor([[1.0, 2.0]], dtype=torcia.float64, requires_grad=True)
    torcia.cdist(a, a.detach()).sum().backward()
    assert a.grad.tolist() == [[0.0, 0.0]]


@pytest.mark.torch
@pytest.mark.parametrize("name", CASES)
def test_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    fn = CASES[name][0]
    ours = _inputs(name)
    theirs = [torch.tensor(x.detach().numpy(), requires_grad=True) for x in ours]
    out, expected_out = fn(torcia, *ours), fn(torch, *theirs)
    np.testing.assert_allclose(out.detach().numpy(), expected_out.detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(tuple(out.shape))
    grads = torcia.autograd.grad(out, ours, torcia.tensor(w))
    expected = torch.autograd.grad(expected_out, theirs, torch.tensor(w))
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12)
