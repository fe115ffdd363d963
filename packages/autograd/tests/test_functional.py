"""torcia.autograd.functional against hand-derived values and torch.autograd.functional."""

from __future__ import annotations

import numpy as np
import pytest

import torcia
from torcia.autograd import functional as AF

F64 = torcia.float64


def f_single(x):
    return (x ** 3).sin()


def f_pair(x, y):
    return (x * y).exp(), x.sum() * y


def f_scalar(x, y):
    return (x ** 2 * y).sum() + (x.tanh() * y.sin()).sum()


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(ours, theirs):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _close(a, b)
        return
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-10, atol=1e-12)


def test_jacobian_by_hand():
    x = torcia.tensor([1.0, 2.0], dtype=F64)
    jac = AF.jacobian(lambda t: torcia.stack([t[0] * t[1], t[0] ** 2]), x)
    assert jac.tolist() == [[2.0, 1.0], [2.0, 0.0]]
    assert not x.requires_grad


def test_hessian_by_hand():
    x, y = torcia.tensor([1.0, 2.0], dtype=F64), torcia.tensor(3.0, dtype=F64)
    h = AF.hessian(lambda a, b: (a * a).sum() * b, (x, y))
    assert h[0][0].tolist() == [[6.0, 0.0], [0.0, 6.0]]
    assert h[0][1].tolist() == [2.0, 4.0] and h[1][1].item() == 0.0


@pytest.fixture
def points():
    rng = np.random.default_rng(0)
    return rng.standard_normal(3), rng.standard_normal(3)


def test_matches_torch(points):
    torch = pytest.importorskip("torch")
    TF = torch.autograd.functional
    a, b = points
    ours = (torcia.tensor(a), torcia.tensor(b))
    theirs = (torch.tensor(a), torch.tensor(b))
    va, vb = torcia.tensor(b), torcia.tensor(a)
    ta, tb = torch.tensor(b), torch.tensor(a)

    _close(AF.jacobian(f_single, ours[0]), TF.jacobian(f_single, theirs[0]))
    _close(AF.jacobian(f_pair, ours), TF.jacobian(f_pair, theirs))
    _close(AF.hessian(f_scalar, ours), TF.hessian(f_scalar, theirs))
    _close(AF.vjp(f_single, ours[0], va), TF.vjp(f_single, theirs[0], ta))
    _close(AF.jvp(f_single, ours[0], va), TF.jvp(f_single, theirs[0], ta))
    _close(AF.jvp(f_pair, ours, (va, vb)), TF.jvp(f_pair, theirs, (ta, tb)))
    _close(AF.vhp(f_scalar, ours, (va, vb)), TF.vhp(f_scalar, theirs, (ta, tb)))
    _close(AF.hvp(f_scalar, ours, (va, vb)), TF.hvp(f_scalar, theirs, (ta, tb)))


def test_create_graph_makes_results_differentiable():
    x = torcia.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
    _, g = AF.vjp(lambda t: (t ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    g.sum().backward()
    assert x.grad.tolist() == [6.0, 12.0]
    _, g = AF.vjp(lambda t: (t ** 3).sum(), x)
    assert not g.requires_grad


def test_unused_inputs_and_strict():
    x, y = torcia.tensor([1.0], dtype=F64), torcia.tensor([2.0], dtype=F64)
    jac = AF.jacobian(lambda a, b: a * 2, (x, y))
    assert jac[1].tolist() == [[0.0]]
    with pytest.raises(RuntimeError, match="independent of input 1"):
        AF.jacobian(lambda a, b: a * 2, (x, y), strict=True)


def test_argument_errors():
    x = torcia.tensor([1.0, 2.0], dtype=F64)
    with pytest.raises(RuntimeError, match="can only be None"):
        AF.vjp(lambda t: t * 2, x)
    with pytest.raises(RuntimeError, match="invalid size"):
        AF.vjp(lambda t: t * 2, x, torcia.ones(3, dtype=F64))
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        AF.jacobian(lambda t: t, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="single element"):
        AF.hessian(lambda t: t * 2, x)
