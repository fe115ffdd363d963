"""Backward formulas of the complex-number ops (declared in ``_ops/complex_numbers.py``):
``real``, ``imag``, ``view_as_real``, ``conj``, ``angle``, ``complex``."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import derivative

# ----- complex numbers ----------------------------------------------------------------------


@derivative("real")
def _(grad, _x):
    return grad


@derivative("imag")
def _(grad, _x):
    # x = a + ib: d imag / db = 1, and the gradient holds d/da + i d/db
    return grad * 1j


@derivative("view_as_real")
def _(grad, _x):
    return torcia.view_as_complex(grad.contiguous())


@derivative("view_as_complex")
def _(grad, _x):
    return torcia.view_as_real(grad)


@derivative("conj")
def _(grad, _x):
    return grad.conj()


@derivative("angle")
def _(grad, x):
    if not x.is_complex():
        return torcia.zeros_like(x)
    # angle = atan2(b, a): d/da = -b / |x|^2, d/db = a / |x|^2, so the gradient is
    # grad * i x / |x|^2 (0 at 0)
    size2 = (x * x.conj()).real
    return torcia.where(size2 == 0, torcia.zeros_like(x), grad * 1j * x / size2)


@derivative("complex", names={"re": "real", "im": "imag"})
def _(grad, _re, _im):
    return grad.real, grad.imag
