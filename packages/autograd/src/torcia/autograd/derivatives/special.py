"""Backward formulas of the special functions (declared in ``_ops/special.py``):
``i0``, ``ndtr``, ``polygamma``, ``xlog1py``, ``zeta``, ``gammainc``..."""

from __future__ import annotations

import math

import torcia
from torcia.autograd.derivatives import _c, derivative
from torcia.library import Tensor


def _nonzero(x):
    """``x`` with its zeros replaced by 1, so a formula's 0/0 branch stays finite."""
    return x.masked_fill(x == 0, 1)


@derivative("i0")
def _(grad, x):
    return grad * torcia.special.i1(x)


@derivative("i0e")
def _(grad, x, *, result):
    return grad * (torcia.special.i1e(x) - x.sign() * result)


@derivative("i1")
def _(grad, x, *, result):
    # i1'(x) = i0(x) - i1(x) / x, with the limit 1/2 at 0
    return grad * torcia.where(x == 0, torcia.full_like(x, 0.5),
                               torcia.special.i0(x) - result / _nonzero(x))


@derivative("i1e")
def _(grad, x, *, result):
    return grad * torcia.where(
        x == 0, torcia.full_like(x, 0.5),
        torcia.special.i0e(x) - result * (x.sign() + 1 / _nonzero(x)))


@derivative("ndtr")
def _(grad, x):
    return grad * _c((-0.5 * x * x).exp() / math.sqrt(2 * math.pi))


@derivative("ndtri")
def _(grad, _x, *, result):
    return grad * math.sqrt(2 * math.pi) * (0.5 * result * result).exp()


@derivative("log_ndtr")
def _(grad, x, *, result):
    return grad * _c((-0.5 * x * x - result).exp() / math.sqrt(2 * math.pi))


@derivative("erfcx")
def _(grad, x, *, result):
    return grad * _c(2 * x * result - 2 / math.sqrt(math.pi))


@derivative("sinc")
def _(grad, x, *, result):
    # sinc'(x) = (cos(pi x) - sinc(x)) / x; at 0 its linear term, 0 with slope -pi^2/3, so
    # that the second derivative holds there too
    safe = _nonzero(x)
    return grad * _c(torcia.where(x == 0, -(math.pi ** 2 / 3) * x,
                                  ((math.pi * safe).cos() - result) / safe))


@derivative("entr")
def _(grad, x):
    return grad * _c(-(x.log() + 1))


@derivative("polygamma")
def _(grad, x, *, n):
    return grad * torcia.special.polygamma(n + 1, x)


@derivative("xlog1py")
def _(grad, a, b, *, needs_input_grad):
    ga = gb = None
    if needs_input_grad[0]:
        # PyTorch's rule: log1p(b), except 0 where a == 0 and log1p(b) is not finite
        b_t = b if isinstance(b, Tensor) else torcia.full_like(a, b)
        log1p_b = b_t.log1p()
        # complex b (torch has no complex kernel): where log1p(b) is infinite or NaN
        pole = ~log1p_b.isfinite() if log1p_b.is_complex() else b_t <= -1
        ga = grad * _c(torcia.where((a == 0) & pole, torcia.zeros_like(log1p_b), log1p_b))
    if needs_input_grad[1]:
        gb = grad * _c(a / (b + 1))
    return ga, gb


def _no_derivative(name):
    return NotImplementedError(f"the derivative for '{name}' is not implemented.")


@derivative("zeta")
def _(grad, a, b, *, needs_input_grad):
    if needs_input_grad[0]:
        raise _no_derivative("zeta")
    return None, grad * -a * torcia.special.zeta(a + 1, b)


def _gammainc_other(grad, a, b):
    # dP(a, x)/dx = x^(a - 1) e^-x / Gamma(a)
    a = a if isinstance(a, Tensor) else torcia.full_like(b, a)
    return grad * ((a - 1) * b.log() - b - a.lgamma()).exp()


@derivative("gammainc")
def _(grad, a, b, *, needs_input_grad):
    if needs_input_grad[0]:
        raise _no_derivative("igamma: input")
    return None, _gammainc_other(grad, a, b)


@derivative("gammaincc")
def _(grad, a, b, *, needs_input_grad):
    if needs_input_grad[0]:
        raise _no_derivative("igammac: input")
    return None, -_gammainc_other(grad, a, b)
