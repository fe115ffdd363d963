"""Backward formulas of activations and softmax (declared in ``_ops/nn_activation.py``)."""

from __future__ import annotations

import math

import torcia
from torcia.autograd.derivatives import _c, _differentiable_formulas, _fused, derivative
from torcia.library import call


@derivative("leaky_relu")
def _(grad, x, *, negative_slope):
    fused = _fused("leaky_relu", grad, x, negative_slope=negative_slope)
    if fused is not None:
        return fused
    return torcia.where(x > 0, grad, grad * negative_slope)


@derivative("elu")
def _(grad, x, *, alpha):
    fused = _fused("elu", grad, x, alpha=alpha)
    if fused is not None:
        return fused
    return torcia.where(x > 0, grad, grad * alpha * x.exp())


@derivative("selu")
def _(grad, x):
    fused = _fused("selu", grad, x)
    if fused is not None:
        return fused
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return torcia.where(x > 0, grad * scale, grad * (scale * alpha) * x.exp())


@derivative("celu")
def _(grad, x, *, alpha):
    fused = _fused("celu", grad, x, alpha=alpha)
    if fused is not None:
        return fused
    return torcia.where(x > 0, grad, grad * (x / alpha).exp())


@derivative("gelu")
def _(grad, x, *, approximate):
    return call("gelu_backward", (grad, x), {"approximate": approximate})


@derivative("gelu_backward")
def _(grad, g, x, *, approximate, needs_input_grad):
    gg = call("gelu_backward", (grad, x), {"approximate": approximate}) \
        if needs_input_grad[0] else None
    if not needs_input_grad[1]:
        return gg, None
    if approximate == "tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = (k * (x + c * x * x * x)).tanh()
        du = k * (1 + 3 * c * x * x)
        second = (1 - t * t) * (du - x * t * du * du + 3 * k * c * x * x)
    else:
        pdf = (-0.5 * x * x).exp() * (1 / math.sqrt(2 * math.pi))
        second = pdf * (2 - x * x)
    return gg, grad * g * second


@derivative("silu")
def _(grad, x):
    # silu has real coefficients: silu'(conj z) is conj(silu'(z)), the factor a complex
    # input's gradient takes (torch refuses complex autograd of silu)
    return call("silu_backward", (grad, _c(x)), {})


@derivative("silu_backward")
def _(grad, g, x, *, needs_input_grad):
    gg = call("silu_backward", (grad, _c(x)), {}) if needs_input_grad[0] else None
    if not needs_input_grad[1]:
        return gg, None
    s = x.sigmoid()
    return gg, grad * _c(g * s * (1 - s) * (2 + x * (1 - 2 * s)))


@derivative("mish")
def _(grad, x):
    fused = _fused("mish", grad, x)
    if fused is not None:
        return fused
    t = call("softplus", (x,), {"beta": 1.0, "threshold": 20.0}).tanh()
    return grad * (t + x * (1 - t * t) * x.sigmoid())


@derivative("softplus")
def _(grad, x, *, beta, threshold):
    fused = _fused("softplus", grad, x, beta=beta, threshold=threshold)
    if fused is not None:
        return fused
    z = x * beta
    return torcia.where(z > threshold, grad, grad * z.sigmoid())


@derivative("hardtanh")
def _(grad, x, *, min_val, max_val):
    fused = _fused("hardtanh", grad, x, min_val=min_val, max_val=max_val)
    if fused is not None:
        return fused
    # NOTE: strict bounds, as PyTorch: no gradient at the clipping points themselves
    return grad * ((x > min_val) & (x < max_val))


@derivative("hardswish")
def _(grad, x):
    fused = _fused("hardswish", grad, x)
    if fused is not None:
        return fused
    mid = torcia.where(x < -3, torcia.zeros_like(x), x / 3 + 0.5)
    return grad * torcia.where(x > 3, torcia.ones_like(x), mid)


@derivative("hardsigmoid")
def _(grad, x):
    fused = _fused("hardsigmoid", grad, x)
    if fused is not None:
        return fused
    return grad * ((x > -3) & (x < 3)) / 6


@derivative("logsigmoid")
def _(grad, x):
    fused = _fused("logsigmoid", grad, x)
    if fused is not None:
        return fused
    return grad * (-x).sigmoid()


@derivative("softsign")
def _(grad, x):
    fused = _fused("softsign", grad, x)
    if fused is not None:
        return fused
    d = 1 + x.abs()
    if x.is_complex():
        # z / (1 + |z|) is not holomorphic: its |z| adds -Re(grad conj(z)) sgn(z) / d^2
        return grad / d - (grad * x.conj()).real * torcia.sgn(x) / (d * d)
    return grad / (d * d)


@derivative("tanhshrink")
def _(grad, x):
    fused = _fused("tanhshrink", grad, x)
    if fused is not None:
        return fused
    t = x.tanh()
    return grad * _c(t * t)


@derivative("softmax")
def _(grad, _x, *, dim, result):
    if not _differentiable_formulas():
        return call("softmax_backward", (grad, result), {"dim": dim})
    return result * (grad - (grad * result).sum(dim, keepdim=True))


@derivative("log_softmax")
def _(grad, _x, *, dim, result):
    if not _differentiable_formulas():
        return call("log_softmax_backward", (grad, result), {"dim": dim})
    return grad - result.exp() * grad.sum(dim, keepdim=True)
