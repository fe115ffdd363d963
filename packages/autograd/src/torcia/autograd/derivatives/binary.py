"""Backward formulas of the elementwise ops of two inputs (declared in ``_ops/binary.py``):
arithmetic, ``pow``, ``maximum``, ``atan2``, ``xlogy``..."""

from __future__ import annotations

import math

import torcia
from torcia.autograd.derivatives import _c, derivative
from torcia.library import Tensor


@derivative("add")
def _(grad, _a, _b, *, alpha=1):
    return grad, grad if alpha == 1 else grad * alpha


@derivative("sub")
def _(grad, _a, _b, *, alpha=1):
    return grad, -grad if alpha == 1 else -grad * alpha


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
