"""Backward formulas of the elementwise ops (declared in ``_ops/elementwise.py``): unary
functions, special functions, arithmetic, comparisons' neighbours ``clamp``, ``where``,
``lerp``, casts."""

from __future__ import annotations

import math

import torcia
from torcia.autograd.derivatives import _c, _fused, derivative
from torcia.library import Tensor


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
    return grad * _c(1 - result * result)


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
    return grad * _c(result * (1 - result))


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


def _zero_grad(grad, _x, **params):
    """Piecewise constant ops (sign, rounding): PyTorch's gradient is zero everywhere."""
    return torcia.zeros_like(grad)


for _op in ("sign", "floor", "ceil", "trunc", "round"):
    derivative(_op)(_zero_grad)


# ----- special functions (torcia.special) ---------------------------------------------------


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


# =======================================================================================
# elementwise, two or more inputs
# =======================================================================================


@derivative("add")
def _(grad, _a, _b):
    return grad, grad


@derivative("sub")
def _(grad, _a, _b):
    return grad, -grad


@derivative("mul", saved_only_for={"a": "b", "b": "a"})
def _(grad, a, b, *, needs_input_grad):
    return (grad * _c(b) if needs_input_grad[0] else None,
            grad * _c(a) if needs_input_grad[1] else None)


@derivative("div", saved_only_for={"a": "b"})
def _(grad, a, b, *, needs_input_grad, rounding_mode=None):
    if rounding_mode is not None:
        return None, None
    ga = grad / _c(b) if needs_input_grad[0] else None
    gb = -grad * _c(a / (b * b)) if needs_input_grad[1] else None
    return ga, gb


@derivative("pow", names={"b": "exponent"})
def _(grad, a, b, *, result, needs_input_grad):
    ga = gb = None
    if needs_input_grad[0]:
        if isinstance(b, Tensor):
            ga = grad * _c(b * torcia.where(b == 0, torcia.ones_like(a), a) ** (b - 1))
        elif b == 0:
            ga = grad * 0
        else:
            ga = grad * _c(b * a ** (b - 1))
    if needs_input_grad[1]:
        # NOTE: the a == 0 branch keeps 0 * log(0) from becoming nan where b > 0
        gb = grad * _c(torcia.where(a == 0, torcia.zeros_like(result), result * a.log()))
    return ga, gb


def _minmax_grad(grad, a, b, pick_a):
    """maximum/minimum: the chosen side gets the gradient; ties split it evenly."""
    if not isinstance(b, Tensor):
        return torcia.where(a == b, grad / 2, grad * pick_a), None
    tie = a == b
    half = grad / 2
    return (torcia.where(tie, half, grad * pick_a),
            torcia.where(tie, half, grad * pick_a.logical_not()))


@derivative("maximum")
def _(grad, a, b):
    return _minmax_grad(grad, a, b, a > b)


@derivative("minimum")
def _(grad, a, b):
    return _minmax_grad(grad, a, b, a < b)


@derivative("fmax")
def _(grad, a, b):
    nan_b = b.isnan() if isinstance(b, Tensor) else math.isnan(b)
    return _minmax_grad(grad, a, b, (a > b) | nan_b)


@derivative("fmin")
def _(grad, a, b):
    nan_b = b.isnan() if isinstance(b, Tensor) else math.isnan(b)
    return _minmax_grad(grad, a, b, (a < b) | nan_b)


@derivative("remainder")
def _(grad, a, b):
    gb = -grad * (a / b).floor() if isinstance(b, Tensor) else None
    return grad, gb


@derivative("fmod")
def _(grad, a, b):
    gb = -grad * (a / b).trunc() if isinstance(b, Tensor) else None
    return grad, gb


@derivative("atan2")
def _(grad, a, b):
    # NOTE: at a = b = 0 PyTorch's gradient is 0, not 0/0
    denom = a * a + b * b
    denom = denom.masked_fill(denom == 0, 1)
    return grad * b / denom, -grad * a / denom


@derivative("hypot")
def _(grad, a, b, *, result):
    return grad * a / result, grad * b / result


@derivative("xlogy")
def _(grad, a, b):
    log_b = b.log() if isinstance(b, Tensor) else torcia.full_like(a, b).log()
    ga = grad * torcia.where(a == 0, torcia.zeros_like(log_b), log_b)
    return ga, grad * a / b if isinstance(b, Tensor) else None


@derivative("clamp", names={"lo": "min", "hi": "max"})
def _(grad, x, lo, hi):
    keep = torcia.ones_like(x, dtype=torcia.bool)
    if lo is not None:
        keep = keep & (x >= lo)
    if hi is not None:
        keep = keep & (x <= hi)
    zero = torcia.zeros_like(grad)
    glo = torcia.where(x < lo, grad, zero) if isinstance(lo, Tensor) else None
    ghi = torcia.where(x > hi, grad, zero) if isinstance(hi, Tensor) else None
    if isinstance(lo, Tensor) and isinstance(hi, Tensor):
        # PyTorch gives the gradient to max when min > max
        glo = torcia.where((x < lo) & (lo <= hi), grad, zero)
        ghi = torcia.where((x > hi) | (lo > hi), grad, zero)
        keep = keep & (lo <= hi)
    return torcia.where(keep, grad, zero), glo, ghi


@derivative("where", names={"cond": "condition", "a": "self", "b": "other"})
def _(grad, cond, _a, _b):
    zero = torcia.zeros_like(grad)
    return None, torcia.where(cond, grad, zero), torcia.where(cond, zero, grad)


@derivative("lerp")
def _(grad, start, end, weight):
    gw = grad * _c(end - start) if isinstance(weight, Tensor) else None
    return grad * _c(1 - weight), grad * _c(weight), gw


@derivative("addcmul", names={"t1": "tensor1", "t2": "tensor2"})
def _(grad, _x, t1, t2, *, value):
    return grad, grad * _c(value * t2), grad * _c(value * t1)


@derivative("addcdiv", names={"t1": "tensor1", "t2": "tensor2"})
def _(grad, _x, t1, t2, *, value):
    return grad, grad * _c(value / t2), -grad * _c(value * t1 / (t2 * t2))


@derivative("cast")
def _(grad, _x):
    return grad


@derivative("to_device")
def _(grad, _x, *, device):
    return grad.to(device)


@derivative("nan_to_num")
def _(grad, x):
    return grad * x.isfinite()
