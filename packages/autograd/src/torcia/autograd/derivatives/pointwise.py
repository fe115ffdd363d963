"""Backward formulas of the elementwise ops with parameters or three inputs (declared in
``_ops/pointwise.py``): ``clamp``, ``where``, ``lerp``, ``addcmul``, casts, ``nan_to_num``..."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import _c, _zero_grad, derivative
from torcia.library import Tensor


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


derivative("round")(_zero_grad)
