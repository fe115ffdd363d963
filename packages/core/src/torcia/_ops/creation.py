"""The creation ops without randomness, each declared once: schema, reference kernel, meta
shape, decomposition. They take no tensor: their arguments (the shape, the range, the
NumPy dtype) are positional inputs of the record, as the kernel is given them (by name, from
:mod:`torcia._creation`'s public functions), and they carry no gradient.

A decomposition is given the same arguments and the device to make the tensor on (a
creation op has no input to tell it); it builds with ``full`` and ``arange`` of the
``torcia`` package (this module is below it). The random ops are in
:mod:`torcia._ops.random`; both are :data:`torcia.ops.CREATION`, in this order.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import keyword_samples
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels (``self.xp`` the array module, NumPy or CuPy)."""

    def zeros(self, shape, dtype):
        return self.xp.zeros(shape, dtype=dtype)

    def ones(self, shape, dtype):
        return self.xp.ones(shape, dtype=dtype)

    def full(self, shape, fill_value, dtype):
        return self.xp.full(shape, fill_value, dtype=dtype)

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    def arange(self, start, end, step, dtype):
        if np.dtype(dtype).kind in "iu":
            n = max(0, math.ceil((end - start) / step))
            return (self.xp.arange(n, dtype=np.int64) * step + start).astype(dtype)
        return self.xp.arange(start, end, step, dtype=np.float64).astype(dtype)

    def linspace(self, start, end, steps, dtype):
        return self.xp.linspace(start, end, steps, dtype=np.float64).astype(dtype)

    def logspace(self, start, end, steps, base, dtype):
        return self.xp.logspace(start, end, steps, base=base, dtype=np.float64).astype(dtype)

    def eye(self, n, m, dtype):
        return self.xp.eye(n, m, dtype=dtype)


# ----- meta shapes -----------------------------------------------------------------------


def created(*names):
    """A creation op's shape function; ``names`` are its kernel's positional arguments,
    among them ``shape`` and ``dtype`` (passed by position or by name)."""
    def shape_fn(*args, **params):
        bound = dict(zip(names, args), **params)
        return tuple(bound["shape"]), np.dtype(bound["dtype"])

    shape_fn.__name__ = "created"
    return shape_fn


def _eye_shape(n, m, dtype, **params):
    return (n, n if m is None else m), np.dtype(dtype)


def _linspace_shape(start, end, steps, dtype, **params):
    return (steps,), np.dtype(dtype)


def _logspace_shape(start, end, steps, base, dtype, **params):
    return (steps,), np.dtype(dtype)


def _arange_shape(start, end, step, dtype, **params):
    return (max(0, math.ceil((end - start) / step)),), np.dtype(dtype)


# ----- decompositions: given the NumPy dtype a kernel is given, and the device ------------


def zeros(shape, dtype, device=None):
    return _opdef.PUBLIC.full(shape, 0, dtype=D.FROM_NUMPY[np.dtype(dtype)], device=device)


def empty(shape, dtype, device=None):
    return zeros(shape, dtype, device)  # any values will do


def ones(shape, dtype, device=None):
    return _opdef.PUBLIC.full(shape, 1, dtype=D.FROM_NUMPY[np.dtype(dtype)], device=device)


def eye(n, m, dtype, device=None):
    rows = _opdef.PUBLIC.arange(n, device=device).unsqueeze(1)
    return (rows == _opdef.PUBLIC.arange(m, device=device)).to(D.FROM_NUMPY[np.dtype(dtype)])


def _float64(value, device):
    """``value`` as a 0-dim float64 tensor on ``device``."""
    return _opdef.PUBLIC.full((), value, dtype=D.float64, device=device)


def _linspace(start, end, steps, device):
    """NumPy's linspace in float64, step for step (the reference kernel's)."""
    arange = _opdef.PUBLIC.arange
    y = arange(steps, dtype=D.float64, device=device)
    delta, div = float(end) - float(start), steps - 1
    if div > 0:
        step = delta / div
        # NumPy divides first where the step underflows to 0
        y = y / div * delta if step == 0 else y * step
    else:
        y = y * delta
    y = y + start
    if steps > 1:
        y = _where(arange(steps, device=device) == steps - 1, _float64(end, device), y)
    return y


def linspace(start, end, steps, dtype, device=None):
    return _linspace(start, end, steps, device).to(D.FROM_NUMPY[np.dtype(dtype)])


def logspace(start, end, steps, base, dtype, device=None):
    exponents = _linspace(start, end, steps, device)
    return (_float64(base, device) ** exponents).to(D.FROM_NUMPY[np.dtype(dtype)])


# ----- the declarations ------------------------------------------------------------------


def _creation(schema, kernel, shape, **fields):
    """A creation op: no tensor input, no gradient."""
    return define(schema, kernel, shape=shape, differentiable=False, group="creation",
                  **fields)


_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)

#: in the order of :data:`torcia.ops.CREATION` (the random ops follow)
DECLARED = (
    _creation("zeros(int[] shape, ScalarType dtype) -> Tensor", Kernels.zeros,
              created("shape", "dtype"), decomposition=zeros,
              samples=keyword_samples({"shape": (2, 3), "dtype": _F32},
                                      {"shape": (4,), "dtype": _I64})),
    _creation("ones(int[] shape, ScalarType dtype) -> Tensor", Kernels.ones,
              created("shape", "dtype"), decomposition=ones,
              samples=keyword_samples({"shape": (2, 3), "dtype": _F32},
                                      {"shape": (), "dtype": _I64})),
    _creation("full(int[] shape, Scalar fill_value, ScalarType dtype) -> Tensor", Kernels.full,
              created("shape", "fill_value", "dtype"),
              samples=keyword_samples({"shape": (2, 3), "fill_value": 2.5, "dtype": _F32},
                                      {"shape": (3,), "fill_value": 7, "dtype": _I64})),
    _creation("empty(int[] shape, ScalarType dtype) -> Tensor", Kernels.empty,
              created("shape", "dtype"), decomposition=empty,
              samples=keyword_samples({"shape": (2, 3), "dtype": _F32})),
    _creation("arange(Scalar start, Scalar end, Scalar step, ScalarType dtype) -> Tensor",
              Kernels.arange, _arange_shape,
              samples=keyword_samples({"start": 0, "end": 5, "step": 1, "dtype": _I64},
                                      {"start": 0.0, "end": 1.0, "step": 0.25, "dtype": _F32},
                                      {"start": 5, "end": -1, "step": -2, "dtype": _I64})),
    _creation("linspace(Scalar start, Scalar end, int steps, ScalarType dtype) -> Tensor",
              Kernels.linspace, _linspace_shape, decomposition=linspace,
              samples=keyword_samples({"start": 0.0, "end": 1.0, "steps": 5, "dtype": _F32})),
    _creation("logspace(Scalar start, Scalar end, int steps, float base, ScalarType dtype) "
              "-> Tensor", Kernels.logspace, _logspace_shape, decomposition=logspace,
              samples=keyword_samples({"start": 0.0, "end": 2.0, "steps": 3, "base": 10.0,
                                       "dtype": _F32})),
    _creation("eye(int n, int m, ScalarType dtype) -> Tensor", Kernels.eye, _eye_shape,
              decomposition=eye,
              samples=keyword_samples({"n": 3, "m": 4, "dtype": _F32},
                                      {"n": 2, "m": 2, "dtype": _I64})),
)
