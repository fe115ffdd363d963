"""Backward formulas of the elementwise ops of one input (declared in ``_ops/unary.py``):
``exp``, ``log``, the trigonometric functions, ``erf``, ``lgamma``, ``sign``..."""

from __future__ import annotations

import math

import torcia
from torcia.autograd.derivatives import _c, _fused, _zero_grad, derivative


@derivative("neg")
def _(grad, _x):
    return -grad


@derivative("abs")
def _(grad, x):
    return grad * torcia.sgn(x)


@derivative("square")
def _(grad, x):
    return grad * 2 * _c(x)


@derivative("relu")
def _(grad, _x, *, result):
    fused = _fused("relu", grad, result)
    if fused is not None:
        return fused
    return torcia.where(result <= 0, 0.0, grad)


@derivative("exp")
def _(grad, _x, *, result):
    return grad * _c(result)


@derivative("exp2")
def _(grad, _x, *, result):
    return grad * _c(result * math.log(2.0))


@derivative("expm1")
def _(grad, _x, *, result):
    return grad * _c(result + 1)


@derivative("log")
def _(grad, x):
    return grad / _c(x)


@derivative("log2")
def _(grad, x):
    return grad / _c(x * math.log(2.0))


@derivative("log10")
def _(grad, x):
    return grad / _c(x * math.log(10.0))


@derivative("log1p")
def _(grad, x):
    return grad / _c(x + 1)


@derivative("sqrt")
def _(grad, _x, *, result):
    return grad / (2 * _c(result))


@derivative("rsqrt")
def _(grad, _x, *, result):
    return -0.5 * grad * _c(result * result * result)


@derivative("reciprocal")
def _(grad, _x, *, result):
    return -grad * _c(result * result)


@derivative("sin")
def _(grad, x):
    return grad * _c(x.cos())


@derivative("cos")
def _(grad, x):
    return -grad * _c(x.sin())


@derivative("tan")
def _(grad, _x, *, result):
    return grad * _c(1 + result * result)


@derivative("asin")
def _(grad, x):
    return grad * _c((1 - x * x).rsqrt())


@derivative("acos")
def _(grad, x):
    return -grad * _c((1 - x * x).rsqrt())


@derivative("atan")
def _(grad, x):
    return grad / _c(1 + x * x)


@derivative("sinh")
def _(grad, x):
    return grad * _c(x.cosh())


@derivative("cosh")
def _(grad, x):
    return grad * _c(x.sinh())


@derivative("tanh")
def _(grad, _x, *, result):
    # one pass where it can (as PyTorch's tanh_backward); a complex result keeps the
    # conjugate's formula
    fused = None if result.is_complex() else _fused("tanh", grad, result)
    return fused if fused is not None else grad * _c(1 - result * result)


@derivative("asinh")
def _(grad, x):
    return grad * _c((x * x + 1).rsqrt())


@derivative("acosh")
def _(grad, x):
    return grad * _c((x * x - 1).rsqrt())


@derivative("atanh")
def _(grad, x):
    return grad / _c(1 - x * x)


@derivative("sigmoid")
def _(grad, _x, *, result):
    fused = None if result.is_complex() else _fused("sigmoid", grad, result)
    return fused if fused is not None else grad * _c(result * (1 - result))


@derivative("erf")
def _(grad, x):
    return grad * _c((2 / math.sqrt(math.pi)) * (-(x * x)).exp())


@derivative("erfc")
def _(grad, x):
    return grad * _c((-2 / math.sqrt(math.pi)) * (-(x * x)).exp())


@derivative("erfinv")
def _(grad, _x, *, result):
    return grad * (math.sqrt(math.pi) / 2) * (result * result).exp()


@derivative("lgamma")
def _(grad, x):
    return grad * x.digamma()


@derivative("digamma")
def _(grad, x):
    return grad * _c(_trigamma(x))


def _trigamma(x):
    """psi'(x) from differentiable ops: the recurrence psi'(z) = psi'(z + 1) + 1/z^2 up to
    z + 10, then the asymptotic series; x left of 1/2 (its real part) by reflection."""
    neg = (x.real if x.is_complex() else x) < 0.5
    z = torcia.where(neg, 1 - x, x)
    total = torcia.zeros_like(z)
    for k in range(10):
        total = total + 1 / ((z + k) * (z + k))
    w = 1 / (z + 10)
    w2 = w * w
    total = total + w + w2 / 2 + w * w2 * (1 / 6 - w2 * (1 / 30 - w2 * (1 / 42 - w2 / 30)))
    # psi'(1 - x) + psi'(x) = pi^2 / sin^2(pi x)
    reflected = (math.pi / (math.pi * x).sin()) ** 2 - total
    return torcia.where(neg, reflected, total)


@derivative("frac")
def _(grad, _x):
    return grad



for _op in ("sign", "floor", "ceil", "trunc"):
    derivative(_op)(_zero_grad)
