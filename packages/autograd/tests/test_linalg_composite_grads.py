"""Gradients of the torcia.linalg functions built from other differentiable ops (Householder
products, LU solves, matrix powers, chain products...), first and second order, and one
gradient against torch's."""

import numpy as np
import pytest

import torcia
from torcia.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(11)
L = torcia.linalg


def r(*shape):
    return torcia.tensor(RNG.standard_normal(shape), requires_grad=True)


def spd(n):
    a = RNG.standard_normal((n, n))
    return torcia.tensor(a @ a.T + n * np.eye(n), requires_grad=True)


def _pd(a):
    # symmetric in the input, so that finite differences move A along symmetric directions
    return a @ a.mT + 3 * torcia.eye(a.shape[-1], dtype=a.dtype)


CASES = {
    "householder_product": (lambda a, tau: L.householder_product(a, tau), (r(4, 3), r(3))),
    "ormqr": (lambda a, tau, c: torcia.ormqr(a, tau, c, transpose=True), (r(4, 3), r(3),
                                                                         r(4, 2))),
    "lu_solve_adjoint": (lambda a, b: L.lu_solve(*L.lu_factor(a), b, adjoint=True, left=False),
                         (spd(3), r(2, 3))),
    "solve_ex": (lambda a, b: L.solve_ex(a, b).result, (spd(3), r(3, 2))),
    "inv_ex": (lambda a: L.inv_ex(a).inverse, (spd(3),)),
    "cholesky_ex": (lambda a: L.cholesky_ex(a @ a.mT + torcia.eye(3, dtype=torcia.float64)).L,
                    (r(3, 3),)),
    "matrix_power": (lambda a: L.matrix_power(a, 3), (r(3, 3),)),
    "matrix_power_negative": (lambda a: L.matrix_power(a, -2), (spd(3),)),
    "multi_dot": (lambda a, b, c: L.multi_dot([a, b, c]), (r(3), r(3, 4), r(4, 2))),
    "tensorinv": (lambda a: L.tensorinv(a.reshape(4, 2, 2), ind=1), (spd(4),)),
    "tensorsolve": (lambda a, b: L.tensorsolve(a.reshape(2, 2, 4), b), (spd(4), r(2, 2))),
    "vander": (lambda x: L.vander(x, N=4), (r(2, 3),)),
    "vecdot": (lambda x, y: L.vecdot(x, y), (r(2, 3), r(3))),
    "cross": (lambda x, y: L.cross(x, y), (r(2, 3), r(3))),
    "cond": (lambda a: L.cond(a), (spd(3),)),
    "cholesky_solve": (lambda b, a: torcia.cholesky_solve(b, L.cholesky(_pd(a))),
                       (r(3, 2), r(3, 3))),
    "cholesky_inverse": (lambda a: torcia.cholesky_inverse(L.cholesky(_pd(a)).mT, upper=True),
                         (r(3, 3),)),
    "triangular_solve": (lambda b, a: torcia.triangular_solve(b, a, transpose=True).solution,
                         (r(3, 2), spd(3))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn, inputs = CASES[name]
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


@pytest.mark.torch
def test_lu_and_matrix_exp_gradients_match_torch():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((2, 3, 3))
    ours = torcia.tensor(a, requires_grad=True)
    theirs = torch.tensor(a, requires_grad=True)
    for lib, x in ((torcia, ours), (torch, theirs)):
        P, Lo, U = lib.linalg.lu(x)
        (Lo.sin().sum() + U.cos().sum() + lib.linalg.matrix_exp(x).square().sum()).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-10)
