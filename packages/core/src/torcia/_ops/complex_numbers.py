"""The complex-number ops, each declared once: schema, reference kernel, meta shape,
decomposition. ``real``, ``imag``, ``view_as_real`` and ``view_as_complex`` are views of
their input (their public functions mark them so); ``conj`` is a copy, ``angle`` the
argument (of a real number: 0, or pi below 0), ``complex`` builds one from two real
tensors. Their public functions are in :mod:`torcia._oplib.complex_numbers`, their
derivatives torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import first_shape, floating_dtype, op, real_dtype, real_like
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


def _complex_of(dtype):
    return np.dtype(np.complex128 if dtype == np.float64 else np.complex64)


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

    def real(self, a):
        return a.real

    def imag(self, a):
        return a.imag

    def view_as_real(self, a):
        real = a.real.dtype
        return self.xp.expand_dims(a, -1).view(real)

    def view_as_complex(self, a):
        xp = self.xp
        cplx = _complex_of(a.dtype)
        return a.view(cplx)[..., 0] if a.ndim > 1 else xp.squeeze(a.view(cplx), -1)

    def conj(self, a):
        return self.xp.conj(a)

    def angle(self, a):
        xp = self.xp
        out = xp.angle(a)
        if a.dtype.kind != "c":
            # pi for negative numbers only: NumPy's angle(-0.0) is pi (the sign bit), and
            # NaN stays NaN
            out = xp.where(xp.isnan(a), a, xp.where(a < 0, out, 0))
        return out.astype(a.real.dtype, copy=False)

    def complex(self, re, im):
        xp = self.xp
        shape = xp.broadcast_shapes(re.shape, im.shape)
        out = xp.empty(shape, dtype=_complex_of(re.dtype))
        out.real = re
        out.imag = im
        return out


# ----- meta shapes -----------------------------------------------------------------------


def _angle_shape(x, **params):
    dtype = floating_dtype(x.dtype)
    return x.shape, real_dtype(dtype) if dtype.kind == "c" else dtype


def _view_as_real_shape(x, **params):
    return x.shape + (2,), real_dtype(x.dtype)


def _view_as_complex_shape(x, **params):
    if not x.shape or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return x.shape[:-1], _complex_of(x.dtype)


def _complex_shape(re, im, **params):
    return np.broadcast_shapes(re.shape, im.shape), _complex_of(re.dtype)


# ----- decompositions ----------------------------------------------------------------------


def angle(a):
    if a.is_complex():
        return a.imag.atan2(a.real)
    # pi for negative numbers only (not for -0.0), NaN kept; the gradient is 0
    return _where(a.isnan(), a, _where(a < 0, a.new_full((), math.pi), a.new_zeros(())))


def conj(a):
    if not a.is_complex():
        return a.clone()  # the kernel's copy
    return op("complex", a.real, -a.imag)  # -0.0 where the part was 0.0, as the kernel's


def complex(re, im):  # noqa: A001 - the op's name
    # the parts side by side along a new last dim, read as complex numbers: exact, where
    # re + 1j * im would turn an infinite part's product with 0 into NaN
    part = D.float64 if re.dtype == D.float64 else D.float32  # as the kernel's _complex_of
    re, im = _opdef.PUBLIC.broadcast_tensors(re.to(part), im.to(part))
    return op("view_as_complex", _opdef.PUBLIC.stack((re, im), -1))


# ----- the declarations ------------------------------------------------------------------


def _one(name, kernel, shape, **fields):
    return define(f"{name}(Tensor x) -> Tensor", kernel, shape=shape, group="complex",
                  **fields)


DECLARED = (
    _one("real", Kernels.real, real_like),
    _one("imag", Kernels.imag, real_like),
    _one("view_as_real", Kernels.view_as_real, _view_as_real_shape),
    _one("view_as_complex", Kernels.view_as_complex, _view_as_complex_shape),
    _one("conj", Kernels.conj, first_shape, decomposition=conj),
    _one("angle", Kernels.angle, _angle_shape, decomposition=angle),
    define("complex(Tensor re, Tensor im) -> Tensor", Kernels.complex, shape=_complex_shape,
           decomposition=complex, group="complex"),
)
