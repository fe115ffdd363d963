"""The elementwise ops with parameters or three inputs (:data:`torcia.ops.ELEMENTWISE_OTHER`),
each declared once: schema, reference kernel, meta shape, decomposition, autocast policy
and refused dtypes. ``round`` (``decimals=``), ``clamp`` (min/max tensors, numbers or
None), ``where``, ``lerp``, ``addcmul`` and ``addcdiv`` (``value=``), ``cast`` (a change
of dtype, differentiable between float types) and ``nan_to_num`` (``masked_fill``, of the
same list, is declared with the indexing ops, :mod:`torcia._ops.indexing`). Their public
functions are in :mod:`torcia._oplib.elementwise`, their derivatives torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    COMPLEX,
    broadcast,
    first_shape,
    low_precision,
    no_kernel,
    op,
    opmath,
    refuse,
)
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

    def round(self, a, decimals=0):
        return self.xp.round(a, decimals)

    def clamp(self, a, lo, hi):
        xp = self.xp
        if lo is not None:
            a = xp.maximum(a, lo)
        if hi is not None:
            a = xp.minimum(a, hi)
        return a

    def where(self, cond, a, b):
        return self.xp.where(cond, a, b)

    # float16 and bfloat16 compute in float32 and round once, as PyTorch's opmath
    def lerp(self, start, end, weight):
        dt = start.dtype
        if low_precision(start):
            start, end = start.astype(np.float32), end.astype(np.float32)
            weight = weight.astype(np.float32) if hasattr(weight, "astype") else weight
        # PyTorch's two-sided form, exact at both ends: from start below a weight of 0.5,
        # from end above
        diff = end - start
        near_start = np.abs(weight) < 0.5
        out = np.where(near_start, start + weight * diff, end - diff * (1 - weight))
        return np.asarray(out).astype(dt, copy=False)

    def addcmul(self, a, t1, t2, value=1):
        dt = a.dtype
        if low_precision(a):
            a, t1, t2 = (x.astype(np.float32) for x in (a, t1, t2))
            value = float(value)
        return (a + value * t1 * t2).astype(dt, copy=False)

    def addcdiv(self, a, t1, t2, value=1):
        dt = a.dtype
        if low_precision(a):
            a, t1, t2 = (x.astype(np.float32) for x in (a, t1, t2))
            value = float(value)
        return (a + value * t1 / t2).astype(dt, copy=False)

    def cast(self, a, dtype):
        if a.dtype.name == "bfloat16" and np.dtype(dtype).kind in "iu":
            # ml_dtypes saturates (-2 to uint8 is 0); PyTorch converts as from float32,
            # which wraps (254)
            a = a.astype(np.float32)
        return a.astype(dtype)

    def nan_to_num(self, a, nan=0.0, posinf=None, neginf=None):
        if a.dtype.name == "bfloat16":
            # NumPy's nan_to_num knows kinds "f" and "c" only: through float32, whose
            # finfo would give +-inf the wrong (float32) limits
            info = np.finfo(a.dtype)
            return self.xp.nan_to_num(a.astype(np.float32), nan=nan,
                                      posinf=float(info.max) if posinf is None else posinf,
                                      neginf=float(info.min) if neginf is None else neginf
                                      ).astype(a.dtype)
        return self.xp.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf)


# ----- meta shapes -----------------------------------------------------------------------


def _cast_shape(x, dtype, **params):
    return x.shape, np.dtype(dtype)


def _where_shape(cond, a, b, **params):
    return np.broadcast_shapes(*(getattr(v, "shape", ()) for v in (cond, a, b))), \
        np.result_type(*(getattr(v, "dtype", v) for v in (a, b)))


# ----- decompositions (tensors) ------------------------------------------------------------

_CLAMP = {COMPLEX: (NotImplementedError, "clamp is not supported for complex types")}
_ROUND = {BOOL: no_kernel("round_vml_cpu")}


@opmath
def addcmul(a, t1, t2, value=1):
    return a + value * (t1 * t2)


@opmath
def addcdiv(a, t1, t2, value=1):
    return a + value * (t1 / t2)


@opmath
def lerp(start, end, weight):
    # PyTorch's two-sided form: exact at both ends (weight 0 gives start, 1 gives end)
    diff = end - start
    if not hasattr(weight, "new_full"):  # a number
        return start + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)
    return _where(weight.abs() < 0.5, start + weight * diff, end - diff * (1 - weight))


def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    if a.is_complex():
        return op("complex", nan_to_num(a.real, nan, posinf, neginf),
                  nan_to_num(a.imag, nan, posinf, neginf))
    if not a.is_floating_point():
        return a.clone()
    info = np.finfo(a.dtype.to_numpy())
    out = a
    for bad, value in ((a.isnan(), nan), (a == math.inf, info.max if posinf is None else posinf),
                       (a == -math.inf, info.min if neginf is None else neginf)):
        out = _where(bad, a.new_full((), value), out)
    return out


def clamp(a, lo, hi):
    refuse(_CLAMP, a)
    # each bound where the value is beyond it or where it is NaN (the maximum and minimum
    # of the reference kernel); at a bound the value is kept, and takes the gradient, as
    # in PyTorch's
    for bound, below in ((lo, True), (hi, False)):
        if bound is None:
            continue
        if not hasattr(bound, "new_full"):  # a number
            bound = a.new_full((), bound)
        beyond = a < bound if below else a > bound
        a = _where(beyond.bitwise_or(bound != bound), bound, a)
    return a


# ----- the declarations ------------------------------------------------------------------


def _pointwise(schema, kernel, shape=broadcast, **fields):
    return define(schema, kernel, shape=shape, group="elementwise_other", **fields)


DECLARED = (
    _pointwise("round(Tensor x, *, int decimals=0) -> Tensor", Kernels.round,
               shape=first_shape, refuses=_ROUND, tags=("special",)),
    _pointwise("clamp(Tensor x, Tensor? lo, Tensor? hi) -> Tensor", Kernels.clamp,
               decomposition=clamp, refuses=_CLAMP),
    _pointwise("where(Tensor cond, Tensor a, Tensor b) -> Tensor", Kernels.where,
               shape=_where_shape),
    _pointwise("lerp(Tensor start, Tensor end, Tensor weight) -> Tensor", Kernels.lerp,
               decomposition=lerp, floating_inputs=True),
    _pointwise("addcmul(Tensor x, Tensor t1, Tensor t2, *, Scalar value=1) -> Tensor",
               Kernels.addcmul, decomposition=addcmul, autocast={"cuda": "promote"}),
    _pointwise("addcdiv(Tensor x, Tensor t1, Tensor t2, *, Scalar value=1) -> Tensor",
               Kernels.addcdiv, decomposition=addcdiv, autocast={"cuda": "promote"},
               floating_inputs=True),
    _pointwise("cast(Tensor x, *, ScalarType dtype=None) -> Tensor", Kernels.cast,
               shape=_cast_shape),
    _pointwise("nan_to_num(Tensor x, *, float nan=0.0, float? posinf=None, "
               "float? neginf=None) -> Tensor", Kernels.nan_to_num, shape=first_shape,
               decomposition=nan_to_num),
)
