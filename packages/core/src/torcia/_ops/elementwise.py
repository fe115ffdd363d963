"""The one-input elementwise ops of :data:`torcia.ops.UNARY_FLOAT` (integers promote to
the default float dtype), ``UNARY_SAME`` (dtype kept) and ``UNARY_BOOL`` (bool result),
each declared once: schema, reference kernel, meta shape, decomposition, autocast policy,
the dtypes it refuses.

A kernel is one function of the array module (:class:`~torcia._ops._common.ArrayFunction`:
the table holds ``xp.exp`` itself) or a method of the reference backend (``self.xp`` the
array module, NumPy or CuPy). A decomposition is written with Tensor methods only (it runs
on any device, and this module is below the Tensor class). Their public functions are made
in :mod:`torcia._oplib.elementwise`, their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import torch_type_name as _torch_name
from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    COMPLEX,
    ArrayFunction,
    bool_like,
    first_shape,
    no_kernel,
    opmath,
    real_like,
    refusal,
)
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


def _special(name, xp, a):
    """Special functions through SciPy when present, else a vectorised ``math`` fallback."""
    try:
        import scipy.special as sp

        return getattr(sp, name)(a).astype(a.dtype, copy=False)
    except ImportError:
        fn = {"erf": math.erf, "erfc": math.erfc, "gammaln": math.lgamma}.get(name)
        if fn is None:
            if name == "erfinv":
                return _erfinv(xp, a)
            raise NotImplementedError(f"{name} needs SciPy on this backend") from None
        return np.vectorize(fn, otypes=[a.dtype])(a)


def _erfinv(xp, y):
    # Newton steps from Giles' single-precision start point; exact enough for float64
    w = -xp.log((1.0 - y) * (1.0 + y))
    x = xp.where(w < 5, _giles_small(xp, w - 2.5), _giles_large(xp, xp.sqrt(w) - 3.0)) * y
    for _ in range(3):
        err = np.vectorize(math.erf, otypes=[np.float64])(x) - y
        x = x - err / (2 / math.sqrt(math.pi) * xp.exp(-x * x))
    return x.astype(y.dtype, copy=False)


def _giles_small(xp, w):
    p = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p = c + p * w
    return p


def _giles_large(xp, w):
    p = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p = c + p * w
    return p


class Kernels:
    """The reference kernels that are more than one array-module function (see the
    module's doc)."""

    def log1p(self, a):
        xp = self.xp
        if a.dtype.kind != "c":
            return xp.log1p(a)
        # NumPy's complex log1p is log(1 + z), which loses z's digits below 1's ulp
        # (log1p(1e-7+0j) is 1.19e-7 in complex64); PyTorch's formula: the modulus of
        # 1 + z through log1p(x (2 + x) + y^2) near 0, through hypot elsewhere; a NaN part
        # makes both NaN (PyTorch's too, where C's clog(nan+inf*j) keeps the infinity);
        # on the real axis the real log1p (-0 stays -0), off it a y^2 that underflows
        # gives log1p(+0) = +0, as PyTorch's
        x, y = a.real, a.imag
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            r = x * (2 + x) + y * y
            near = xp.abs(a) < 0.5
            log_mod = xp.where(near, xp.where(y == 0, xp.log1p(x), 0.5 * xp.log1p(r)),
                               xp.log(xp.hypot(x + 1, y)))
            log_mod = xp.where(xp.isnan(x) | xp.isnan(y), xp.nan, log_mod)
            out = xp.empty_like(a)
            out.real = log_mod
            out.imag = xp.arctan2(y, x + 1)
        return out

    def rsqrt(self, a):
        return 1 / self.xp.sqrt(a)

    def reciprocal(self, a):
        # a complex one as PyTorch's 1 / z: NumPy's reciprocal of 0j is nan+nanj, where
        # the division gives inf+nanj as PyTorch does
        xp = self.xp
        if a.dtype.kind != "c":
            return xp.reciprocal(a)
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.divide(1, a)

    def sigmoid(self, a):
        xp = self.xp
        if a.dtype.kind == "c":
            # the formula below orders its operands: complex ones have no order
            return 1 / (1 + xp.exp(-a))
        # NOTE: written through exp(-|a|) so nothing overflows: sigmoid(|a|) = 1 / (1 + e),
        # and for a < 0 that times e. max(e, a >= 0) picks the factor (e <= 1) without
        # xp.where, which NumPy runs 3x slower than the rest of the kernel on float32
        # In place where possible: in a training step the arrays are out of cache, and each
        # temporary is a trip to memory.
        e = xp.abs(a, out=xp.empty_like(a))  # an array even for 0-d input
        xp.negative(e, out=e)
        xp.exp(e, out=e)
        factor = xp.maximum(e, (a >= 0).astype(e.dtype))
        e += 1
        xp.reciprocal(e, out=e)
        e *= factor
        return e

    def erf(self, a):
        return _special("erf", self.xp, a)

    def erfc(self, a):
        return _special("erfc", self.xp, a)

    def erfinv(self, a):
        # erfinv(-0) is -0 (SciPy's is +0)
        return self.xp.where(a == 0, a, _special("erfinv", self.xp, a))

    def lgamma(self, a):
        # log|gamma(-inf)| is +inf (SciPy's gammaln says -inf)
        out = _special("gammaln", self.xp, a)
        return self.xp.where(self.xp.isneginf(a), self.xp.asarray(np.inf, out.dtype), out)

    def digamma(self, a):
        return _special("psi", self.xp, a)

    def sign(self, a):
        # NumPy's sign has no bool loop; PyTorch's sign of a bool is itself, of NaN 0
        if a.dtype.kind == "b":
            return a.copy()
        xp = self.xp
        out = xp.sign(a)
        if a.dtype.kind not in "fV":
            return out
        # +0 for NaN and for -0 (ml_dtypes' bfloat16 sign keeps -0), as PyTorch's
        return xp.where((out != out) | (out == 0), xp.zeros((), out.dtype), out)

    def square(self, a):
        # PyTorch squares a bool as pow(a, 2): in int64 (NumPy's square gives int8)
        return self.xp.square(a.astype(np.int64) if a.dtype.kind == "b" else a)

    def frac(self, a):
        return a - self.xp.trunc(a)

    def relu(self, a):
        # negatives to 0, NaN and -0.0 kept, as PyTorch (maximum(-0.0, 0) gives 0.0)
        return self.xp.where(a < 0, a.dtype.type(0), a)

    def signbit(self, a):
        if a.dtype.name == "bfloat16":
            a = a.astype(np.float32)  # no bfloat16 loop: the sign survives the cast
        return self.xp.signbit(a)


# ----- the dtypes PyTorch has no kernel for ----------------------------------------------
# NumPy would do bool arithmetic its own way and order complex numbers lexicographically;
# the decompositions raise the same errors (a message's {} is PyTorch's name of the dtype)


def _rounding(op):
    return {COMPLEX: (NotImplementedError, f"{op} is not supported for complex inputs"),
            BOOL: no_kernel(f"{op}_vml_cpu")}


_SIGN = {COMPLEX: (NotImplementedError, "Unlike NumPy, torch.sign is not intended to support "
                   "complex numbers. Please use torch.sgn instead.")}
_NEG = {BOOL: (RuntimeError, "Negation, the `-` operator, on a bool tensor is not supported. "
               "If you are trying to invert a mask, use the `~` or `logical_not()` operator "
               "instead.")}
_TRUNC = _rounding("trunc")


def _refuse(refuses, a):
    """Raise the reference kernel's error where it refuses ``a``'s dtype."""
    error = refusal(refuses, a.dtype.to_numpy())
    if error is not None:
        raise error


# ----- decompositions (tensors; half precision computes in float32, see opmath) ---------


@opmath
def relu(a):
    # as PyTorch: NaN and -0.0 kept (a * 0), the gradient at 0 is 0
    return _where(a > 0, a, _where(a < 0, a.new_zeros(()), a * 0))


def trunc(a):
    _refuse(_TRUNC, a)
    # -0.0 is not below 0: floor keeps it, as trunc does
    return _where(a < 0, a.ceil(), a.floor())


@opmath
def frac(a):
    return a - a.trunc()


@opmath
def rsqrt(a):
    return a.sqrt().reciprocal()


def reciprocal(a):
    return a.new_ones(()) / a


def isnan(a):
    return a != a


def isinf(a):
    if a.is_complex():
        return isinf(a.real).bitwise_or(isinf(a.imag))
    if not a.is_floating_point():
        return a.new_zeros(a.shape, dtype=D.bool_)
    return a.abs() == math.inf


def isfinite(a):
    if a.is_complex():
        return isfinite(a.real).bitwise_and(isfinite(a.imag))
    if not a.is_floating_point():
        return a.new_ones(a.shape, dtype=D.bool_)
    return (a == a).bitwise_and(a.abs() != math.inf)


def sign(a):
    _refuse(_SIGN, a)
    if a.dtype == D.bool_:
        return a.clone()
    # 0 for a zero of either sign and for NaN, as PyTorch's
    out = (a > 0).to(a.dtype) - (a < 0).to(a.dtype)
    if not a.is_floating_point():
        return out
    # plus a zero made of a: the result is differentiable, its gradient 0 (PyTorch's)
    return out + _where(isfinite(a), a * 0, a.new_zeros(()))


def logical_not(a):
    return a == 0


def bitwise_not(a):
    if a.dtype == D.bool_:
        return logical_not(a)
    if a.is_floating_point() or a.is_complex():
        raise NotImplementedError(
            f'"bitwise_not_cpu" not implemented for \'{_torch_name(a.dtype)}\'')
    return a.bitwise_xor(a.new_full((), -1))  # all ones, in two's complement


def neg(a):
    _refuse(_NEG, a)
    if a.is_complex():
        # the torcia package's: no Tensor method makes a complex tensor of two real ones
        return _opdef.PUBLIC.complex(neg(a.real), neg(a.imag))
    # exact: a sign flip (signed zeros too), and integers wrap alike (-1 of uint8 is 255)
    return a * a.new_full((), -1)


def square(a):
    # a bool squares in int64, as PyTorch's pow(a, 2)
    if a.dtype == D.bool_:
        a = a.to(D.int64)
    return a * a


def _square_shape(x, **params):
    """``square`` is ``pow(x, 2)``: a bool input squares in int64."""
    return x.shape, np.dtype(np.int64) if x.dtype.kind == "b" else x.dtype


# ----- the declarations ------------------------------------------------------------------


def _float(name, kernel, **fields):
    """An op of ``UNARY_FLOAT``: floating inputs (the public function promotes integers)."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=first_shape,
                  floating_inputs=True, group="unary_float", **fields)


def _same(name, kernel, shape=first_shape, **fields):
    """An op of ``UNARY_SAME``: the input's dtype kept."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=shape, group="unary_same",
                  **fields)


def _test(name, kernel, **fields):
    """An op of ``UNARY_BOOL``: a bool result, which carries no gradient."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=bool_like,
                  differentiable=False, group="unary_bool", **fields)


#: PyTorch runs these in float32 under CUDA autocast
_CUDA_FLOAT32 = {"cuda": "float32"}

#: in the order of :data:`torcia.ops.UNARY_FLOAT`, ``UNARY_SAME`` and ``UNARY_BOOL``
DECLARED = (
    _float("exp", ArrayFunction("exp"), autocast=_CUDA_FLOAT32),
    _float("exp2", ArrayFunction("exp2")),
    _float("log", ArrayFunction("log"), autocast=_CUDA_FLOAT32),
    _float("log2", ArrayFunction("log2"), autocast=_CUDA_FLOAT32),
    _float("log10", ArrayFunction("log10"), autocast=_CUDA_FLOAT32),
    _float("log1p", Kernels.log1p, autocast=_CUDA_FLOAT32),
    _float("expm1", ArrayFunction("expm1"), autocast=_CUDA_FLOAT32),
    _float("sqrt", ArrayFunction("sqrt")),
    _float("rsqrt", Kernels.rsqrt, decomposition=rsqrt, autocast=_CUDA_FLOAT32),
    _float("reciprocal", Kernels.reciprocal, decomposition=reciprocal,
           autocast=_CUDA_FLOAT32),
    _float("sin", ArrayFunction("sin")),
    _float("cos", ArrayFunction("cos")),
    _float("tan", ArrayFunction("tan"), autocast=_CUDA_FLOAT32),
    _float("asin", ArrayFunction("arcsin"), autocast=_CUDA_FLOAT32),
    _float("acos", ArrayFunction("arccos"), autocast=_CUDA_FLOAT32),
    _float("atan", ArrayFunction("arctan")),
    _float("sinh", ArrayFunction("sinh"), autocast=_CUDA_FLOAT32),
    _float("cosh", ArrayFunction("cosh"), autocast=_CUDA_FLOAT32),
    _float("tanh", ArrayFunction("tanh")),
    _float("asinh", ArrayFunction("arcsinh")),
    _float("acosh", ArrayFunction("arccosh")),
    _float("atanh", ArrayFunction("arctanh")),
    _float("sigmoid", Kernels.sigmoid),
    _float("erf", Kernels.erf),
    _float("erfc", Kernels.erfc),
    _float("erfinv", Kernels.erfinv, autocast=_CUDA_FLOAT32),
    _float("lgamma", Kernels.lgamma),
    _float("digamma", Kernels.digamma),
    _same("neg", ArrayFunction("negative"), decomposition=neg, refuses=_NEG),
    _same("abs", ArrayFunction("abs"), shape=real_like, refuses={BOOL: no_kernel("abs_cpu")}),
    _same("sign", Kernels.sign, decomposition=sign, refuses=_SIGN),
    _same("square", Kernels.square, shape=_square_shape, decomposition=square),
    _same("floor", ArrayFunction("floor"), refuses=_rounding("floor")),
    _same("ceil", ArrayFunction("ceil"), refuses=_rounding("ceil")),
    _same("trunc", ArrayFunction("trunc"), decomposition=trunc, refuses=_TRUNC),
    _same("frac", Kernels.frac, decomposition=frac, refuses={
        COMPLEX: (NotImplementedError, "frac is not supported for complex inputs"),
        BOOL: no_kernel("frac_cpu")}),
    _same("relu", Kernels.relu, decomposition=relu, refuses={
        COMPLEX: (NotImplementedError, "clamp is not supported for complex types"),
        BOOL: (RuntimeError, "Boolean inputs not supported for relu")}),
    # an integer result: no gradient
    _same("bitwise_not", ArrayFunction("invert"), decomposition=bitwise_not,
          differentiable=False),
    _test("isnan", ArrayFunction("isnan"), decomposition=isnan),
    _test("isinf", ArrayFunction("isinf"), decomposition=isinf),
    _test("isfinite", ArrayFunction("isfinite"), decomposition=isfinite),
    _test("logical_not", ArrayFunction("logical_not"), decomposition=logical_not),
    _test("signbit", Kernels.signbit),
)
