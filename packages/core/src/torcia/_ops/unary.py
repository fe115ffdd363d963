"""The elementwise ops of one input, each declared once: schema, reference kernel, meta
shape, decomposition, autocast policy, the dtypes it refuses. :data:`torcia.ops.UNARY_FLOAT`
(integers promote to the default float dtype), ``UNARY_SAME`` (dtype kept) and
``UNARY_BOOL`` (bool result). The ops of two inputs are :mod:`torcia._ops.binary`'s.

A kernel is one function of the array module (:class:`~torcia._ops._common.ArrayFunction`:
the table holds ``xp.exp`` itself) or a method of the reference backend (``self.xp`` the
array module, NumPy or CuPy). A decomposition is written with Tensor methods only (it runs
on any device, and this module is below the Tensor class), named for what it computes
(``decomposed_exp2``): the op's name is its public function's, made here from the
declaration (:data:`MADE`). The functions of one input of no op of their own
(``positive``, ``deg2rad``, ``isneginf``, ``isreal``, ``frexp``...) are written after them,
reaching the Tensor class late-bound (:data:`torcia._opdef.PUBLIC`). ``torcia`` exports
``__all__``, :mod:`torcia._oplib` registering the module as a family. Their derivatives
are torcia-autograd's.
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
    examples_section,
    first_shape,
    no_kernel,
    opmath,
    opmath_kernel,
    real_like,
    return_type,
    to_float,
)
from torcia._ops._common import refuse as _refuse
from torcia._ops._common import where as _where
from torcia._ops.complex_numbers import imag
from torcia._ops.creation import ones
from torcia._ops.pointwise import where

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

    @opmath_kernel
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

    @opmath_kernel
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
# frac has a kernel for floating types only (trunc, floor and ceil have integer ones: the
# identity)
_FRAC = dict.fromkeys((COMPLEX, BOOL, "i", "u"), no_kernel("frac_cpu"))
_ABS = {BOOL: no_kernel("abs_cpu")}
_RELU = {COMPLEX: (NotImplementedError, "clamp is not supported for complex types"),
         BOOL: (RuntimeError, "Boolean inputs not supported for relu")}

_FLOOR = _rounding("floor")


# ----- decompositions (tensors; half precision computes in float32, see opmath) ---------


@opmath
def decomposed_relu(a):
    _refuse(_RELU, a)
    # as PyTorch: NaN and -0.0 kept (a * 0), the gradient at 0 is 0
    return _where(a > 0, a, _where(a < 0, a.new_zeros(()), a * 0))


def decomposed_trunc(a):
    _refuse(_TRUNC, a)
    # -0.0 is not below 0: floor keeps it, as trunc does
    return _where(a < 0, a.ceil(), a.floor())


@opmath
def decomposed_frac(a):
    _refuse(_FRAC, a)
    return a - a.trunc()


@opmath
def decomposed_rsqrt(a):
    return a.sqrt().reciprocal()


def decomposed_reciprocal(a):
    return a.new_ones(()) / a


def decomposed_abs(a):
    _refuse(_ABS, a)
    if a.is_complex():
        return a.real.hypot(a.imag)
    # the sign bit, not a < 0: -0.0 becomes 0.0 (integers wrap at their minimum, as NumPy's)
    return _where(a.signbit() if a.is_floating_point() else a < 0, -a, a)


def decomposed_isnan(a):
    return a != a


def decomposed_isinf(a):
    if a.is_complex():
        return decomposed_isinf(a.real).bitwise_or(decomposed_isinf(a.imag))
    if not a.is_floating_point():
        return a.new_zeros(a.shape, dtype=D.bool_)
    return a.abs() == math.inf


def decomposed_isfinite(a):
    if a.is_complex():
        return decomposed_isfinite(a.real).bitwise_and(decomposed_isfinite(a.imag))
    if not a.is_floating_point():
        return a.new_ones(a.shape, dtype=D.bool_)
    return (a == a).bitwise_and(a.abs() != math.inf)


def decomposed_sign(a):
    _refuse(_SIGN, a)
    if a.dtype == D.bool_:
        return a.clone()
    # 0 for a zero of either sign and for NaN, as PyTorch's
    out = (a > 0).to(a.dtype) - (a < 0).to(a.dtype)
    if not a.is_floating_point():
        return out
    # plus a zero made of a: the result is differentiable, its gradient 0 (PyTorch's)
    return out + _where(decomposed_isfinite(a), a * 0, a.new_zeros(()))


def decomposed_logical_not(a):
    return a == 0


def integers_only(op, *operands):
    """Raise the reference kernel's error where the bitwise op ``op`` is given a floating or
    complex tensor (a Python number has no is_complex: the kernel takes it)."""
    for x in operands:
        if hasattr(x, "is_complex") and (x.is_floating_point() or x.is_complex()):
            raise NotImplementedError(
                f'"{op}_cpu" not implemented for \'{_torch_name(x.dtype)}\'')


def decomposed_bitwise_not(a):
    if a.dtype == D.bool_:
        return decomposed_logical_not(a)
    integers_only("bitwise_not", a)
    return a.bitwise_xor(a.new_full((), -1))  # all ones, in two's complement


def decomposed_floor(a):
    _refuse(_FLOOR, a)
    # exact: ceil of the negation, negated (signed zeros and integers' wrapping alike)
    return -(-a).ceil()


def decomposed_sigmoid(a):
    if a.is_complex():
        return (1 + (-a).exp()).reciprocal()
    # the reference kernel's steps, in a's dtype: 1 / (1 + e) with e = exp(-|a|), times e
    # below 0 (nothing overflows); -|a| written as a where, whose gradient is not 0 at 0
    nonnegative = a >= 0
    e = _where(nonnegative, -a, a).exp()
    r = (e + 1).reciprocal()
    return _where(nonnegative, r, r * e)


# The trigonometric and hyperbolic functions and the other bases' logarithms and powers, from
# sin, cos, atan2, pow, exp, expm1, log, log1p and sqrt: written to keep their accuracy (a
# few ulp: expm1 and log1p near 0, nothing overflowing before the result itself does) and
# their signed zeros, NaN and infinities; complex inputs take the textbook formulas.

_LN2 = math.log(2.0)
#: beyond it, sqrt(x^2 + 1) is x (and x^2 may overflow): asinh and acosh are log(2x)
_HUGE = 2.0 ** 28


@opmath
def decomposed_tan(a):
    return a.sin() / a.cos()


def _half_exp(m):
    """e^m / 2 for m >= 20, where e^-m is below the rounding of e^m (sinh and cosh are
    this): as e^(m/2) / 2 * e^(m/2), finite wherever the result is, though e^m may not be."""
    h = (m / 2).exp()
    return h * 0.5 * h


@opmath
def decomposed_sinh(a):
    if a.is_complex():
        return (a.exp() - (-a).exp()) / 2
    near = (a.expm1() - (-a).expm1()) / 2
    return _where(a.abs() < 20, near, _half_exp(a.abs()).copysign(a))


@opmath
def decomposed_cosh(a):
    if a.is_complex():
        return (a.exp() + (-a).exp()) / 2
    m = a.abs()
    return _where(m < 20, (m.exp() + (-m).exp()) / 2, _half_exp(m))


@opmath
def decomposed_tanh(a):
    if a.is_complex():
        e = (2 * a).exp()
        return (e - 1) / (e + 1)
    e = (2 * a).expm1()
    # beyond 20, tanh rounds to +-1 (and e to inf); NaN goes through the formula
    near = (a.abs() < 20).bitwise_or(a != a)
    return _where(near, e / (e + 2), a.new_ones(()).copysign(a))


@opmath
def decomposed_asinh(a):
    if a.is_complex():
        return (a + (a * a + 1).sqrt()).log()
    m = a.abs()
    near = (m + m * m / ((m * m + 1).sqrt() + 1)).log1p()
    return _where(m < _HUGE, near, m.log() + _LN2).copysign(a)


@opmath
def decomposed_acosh(a):
    if a.is_complex():
        return (a + (a + 1).sqrt() * (a - 1).sqrt()).log()
    t = a - 1
    out = _where(a < _HUGE, (t + (2 * t + t * t).sqrt()).log1p(), a.log() + _LN2)
    return _where(a < 1, a.new_full((), math.nan), out)


@opmath
def decomposed_atanh(a):
    if a.is_complex():
        return ((1 + a).log() - (1 - a).log()) / 2
    # odd: taken at |a|, where log1p's argument is positive (near -1 it would cancel)
    m = a.abs()
    return ((2 * m / (1 - m)).log1p() / 2).copysign(a)


@opmath
def decomposed_asin(a):
    if a.is_complex():
        return -1j * decomposed_asinh(1j * a)
    return a.atan2(((1 - a) * (1 + a)).sqrt())


@opmath
def decomposed_acos(a):
    if a.is_complex():
        return math.pi / 2 - decomposed_asin(a)
    return ((1 - a) * (1 + a)).sqrt().atan2(a)


@opmath
def decomposed_atan(a):
    if a.is_complex():
        return 0.5j * ((1 - 1j * a).log() - (1 + 1j * a).log())
    return a.atan2(a.new_ones(()))


@opmath
def decomposed_exp2(a):
    return a.new_full((), 2.0).pow(a)


@opmath
def decomposed_log2(a):
    return a.log() * (1 / _LN2)


@opmath
def decomposed_log10(a):
    return a.log() * (1 / math.log(10.0))


def decomposed_neg(a):
    _refuse(_NEG, a)
    if a.is_complex():
        # the torcia package's: no Tensor method makes a complex tensor of two real ones
        return _opdef.PUBLIC.complex(decomposed_neg(a.real), decomposed_neg(a.imag))
    # exact: a sign flip (signed zeros too), and integers wrap alike (-1 of uint8 is 255)
    return a * a.new_full((), -1)


def decomposed_square(a):
    # a bool squares in int64, as PyTorch's pow(a, 2)
    if a.dtype == D.bool_:
        a = a.to(D.int64)
    return a * a


def _square_shape(x, **params):
    """``square`` is ``pow(x, 2)``: a bool input squares in int64."""
    return x.shape, np.dtype(np.int64) if x.dtype.kind == "b" else x.dtype


# ----- the declarations ------------------------------------------------------------------


def declared_fields(example=None, **fields):
    """``fields`` for :func:`define`: ``example``, one call of the docs example, given as
    ``examples`` (pow shows two); the elementwise ops (these and :mod:`torcia._ops.binary`'s)
    compute in place as ``name_`` unless told not to."""
    if example is not None:
        fields["examples"] = (example,)
    fields.setdefault("inplace", True)
    return fields


def _float(name, kernel, **fields):
    """An op of ``UNARY_FLOAT``: floating inputs (the public function promotes integers)."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=first_shape,
                  floating_inputs=True, group="unary_float", **declared_fields(**fields))


def _same(name, kernel, shape=first_shape, **fields):
    """An op of ``UNARY_SAME``: the input's dtype kept."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=shape, group="unary_same",
                  **declared_fields(**fields))


def _test(name, kernel, inplace=False, **fields):
    """An op of ``UNARY_BOOL``: a bool result, which carries no gradient (and which only
    ``logical_not_`` writes back in place, in the input's dtype)."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=bool_like,
                  differentiable=False, group="unary_bool",
                  **declared_fields(inplace=inplace, **fields))


#: PyTorch runs these in float32 under CUDA autocast
CUDA_FLOAT32 = {"cuda": "float32"}

#: in the order of :data:`torcia.ops.UNARY_FLOAT`, ``UNARY_SAME`` and ``UNARY_BOOL``
DECLARED = (
    _float("exp", ArrayFunction("exp"), autocast=CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([1.0000, 2.7183])"),
           tags=("masked", "nested", "foreach")),
    _float("exp2", ArrayFunction("exp2"), decomposition=decomposed_exp2,
           example=("[0, 3]", "tensor([1., 8.])"),
           tags=("masked", "special")),
    _float("log", ArrayFunction("log"), autocast=CUDA_FLOAT32,
           example=("[1.0, 100.0]", "tensor([0.0000, 4.6052])"),
           tags=("masked", "nested", "foreach")),
    _float("log2", ArrayFunction("log2"), decomposition=decomposed_log2, autocast=CUDA_FLOAT32,
           example=("[1, 8]", "tensor([0., 3.])"),
           tags=("masked", "foreach")),
    _float("log10", ArrayFunction("log10"), decomposition=decomposed_log10, autocast=CUDA_FLOAT32,
           example=("[1.0, 10.0]", "tensor([0., 1.])"),
           tags=("masked", "foreach")),
    _float("log1p", Kernels.log1p, autocast=CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.6931])"),
           tags=("masked", "nested", "foreach", "sparse", "special")),
    _float("expm1", ArrayFunction("expm1"), autocast=CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 1.7183])"),
           tags=("masked", "nested", "foreach", "sparse", "special")),
    _float("sqrt", ArrayFunction("sqrt"),
           example=("[4, 9]", "tensor([2., 3.])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("rsqrt", Kernels.rsqrt, decomposition=decomposed_rsqrt, autocast=CUDA_FLOAT32,
           example=("[4.0, 0.25]", "tensor([0.5000, 2.0000])"),
           tags=("masked", "nested", "foreach")),
    _float("reciprocal", Kernels.reciprocal, decomposition=decomposed_reciprocal,
           autocast=CUDA_FLOAT32,
           example=("[2.0, -4.0]", "tensor([ 0.5000, -0.2500])"),
           tags=("masked", "nested", "foreach")),
    _float("sin", ArrayFunction("sin"),
           example=("[0.0, 1.5708]", "tensor([0., 1.])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("cos", ArrayFunction("cos"),
           example=("[0.0, 3.1416]", "tensor([ 1., -1.])"),
           tags=("masked", "nested", "foreach")),
    _float("tan", ArrayFunction("tan"), decomposition=decomposed_tan, autocast=CUDA_FLOAT32,
           example=("[0.0, 0.7854]", "tensor([0.0000, 1.0000])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("asin", ArrayFunction("arcsin"), decomposition=decomposed_asin, autocast=CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 1.5708])"),
           aliases=("arcsin",),
           tags=("masked", "foreach", "sparse")),
    _float("acos", ArrayFunction("arccos"), decomposition=decomposed_acos, autocast=CUDA_FLOAT32,
           example=("[1.0, 0.0]", "tensor([0.0000, 1.5708])"),
           aliases=("arccos",),
           tags=("masked", "foreach")),
    _float("atan", ArrayFunction("arctan"), decomposition=decomposed_atan,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.7854])"),
           aliases=("arctan",),
           tags=("masked", "foreach", "sparse")),
    _float("sinh", ArrayFunction("sinh"), decomposition=decomposed_sinh, autocast=CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 1.1752])"),
           tags=("masked", "foreach", "sparse")),
    _float("cosh", ArrayFunction("cosh"), decomposition=decomposed_cosh, autocast=CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([1.0000, 1.5431])"),
           tags=("masked", "foreach")),
    _float("tanh", ArrayFunction("tanh"), decomposition=decomposed_tanh,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.7616])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("asinh", ArrayFunction("arcsinh"), decomposition=decomposed_asinh,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.8814])"),
           aliases=("arcsinh",),
           tags=("masked", "sparse")),
    _float("acosh", ArrayFunction("arccosh"), decomposition=decomposed_acosh,
           example=("[1.0, 2.0]", "tensor([0.0000, 1.3170])"),
           aliases=("arccosh",),
           tags=("masked",)),
    _float("atanh", ArrayFunction("arctanh"), decomposition=decomposed_atanh,
           example=("[0.0, 0.5]", "tensor([0.0000, 0.5493])"),
           aliases=("arctanh",),
           tags=("masked", "sparse")),
    _float("sigmoid", Kernels.sigmoid, decomposition=decomposed_sigmoid,
           example=("[0.0, 2.0]", "tensor([0.5000, 0.8808])"),
           tags=("masked", "nested", "foreach")),
    _float("erf", Kernels.erf,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.8427])"),
           tags=("masked", "nested", "foreach", "sparse", "special")),
    _float("erfc", Kernels.erfc,
           example=("[0.0, 1.0]", "tensor([1.0000, 0.1573])"),
           tags=("masked", "foreach", "special")),
    _float("erfinv", Kernels.erfinv, autocast=CUDA_FLOAT32,
           example=("[0.0, 0.5]", "tensor([0.0000, 0.4769])"),
           tags=("masked", "sparse", "special")),
    _float("lgamma", Kernels.lgamma,
           example=("[1.0, 5.0]", "tensor([0.0000, 3.1781])"),
           tags=("masked", "foreach")),
    _float("digamma", Kernels.digamma,
           example=("[1.0, 2.0]", "tensor([-0.5772,  0.4228])"),
           tags=("masked", "special")),
    _same("neg", ArrayFunction("negative"), decomposition=decomposed_neg, refuses=_NEG,
          example=("[1, -2]", "tensor([-1,  2])"),
          aliases=("negative",),
          tags=("masked", "nested", "foreach"),
          operator="neg"),
    _same("abs", ArrayFunction("abs"), shape=real_like, decomposition=decomposed_abs, refuses=_ABS,
          example=("[-1.5, 2.0]", "tensor([1.5000, 2.0000])"),
          aliases=("absolute",),
          tags=("masked", "nested", "foreach", "sparse"),
          operator="abs"),
    _same("sign", Kernels.sign, decomposition=decomposed_sign, refuses=_SIGN,
          example=("[-2, 0, 3]", "tensor([-1,  0,  1])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("square", Kernels.square, shape=_square_shape, decomposition=decomposed_square,
          example=("[2, -3]", "tensor([4, 9])"),
          tags=("masked", "nested", "sparse")),
    _same("floor", ArrayFunction("floor"), decomposition=decomposed_floor, refuses=_FLOOR,
          example=("[-1.5, 1.5]", "tensor([-2.,  1.])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("ceil", ArrayFunction("ceil"), refuses=_rounding("ceil"),
          example=("[-1.5, 1.5]", "tensor([-1.,  2.])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("trunc", ArrayFunction("trunc"), decomposition=decomposed_trunc, refuses=_TRUNC,
          example=("[-1.5, 1.5]", "tensor([-1.,  1.])"),
          aliases=("fix",),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("frac", Kernels.frac, decomposition=decomposed_frac, refuses=_FRAC,
          example=("[-1.5, 2.25]", "tensor([-0.5000,  0.2500])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("relu", Kernels.relu, decomposition=decomposed_relu, refuses=_RELU,
          example=("[-1.0, 2.0]", "tensor([0., 2.])"),
          tags=("nested", "sparse")),
    # an integer result: no gradient
    _same("bitwise_not", ArrayFunction("invert"), decomposition=decomposed_bitwise_not,
          differentiable=False,
          example=("[0, 5]", "tensor([-1, -6])"),
          tags=("masked", "nested"),
          operator="invert"),
    _test("isnan", ArrayFunction("isnan"), decomposition=decomposed_isnan,
          example=('[float("nan"), 1.0]', "tensor([ True, False])"),
          tags=("masked", "nested", "sparse")),
    _test("isinf", ArrayFunction("isinf"), decomposition=decomposed_isinf,
          example=('[float("inf"), 1.0]', "tensor([ True, False])"),
          tags=("sparse",)),
    _test("isfinite", ArrayFunction("isfinite"), decomposition=decomposed_isfinite,
          example=('[float("inf"), 1.0]', "tensor([False,  True])")),
    _test("logical_not", ArrayFunction("logical_not"), decomposition=decomposed_logical_not,
          example=("[0, 3]", "tensor([ True, False])"),
          inplace_example=("[0.0, 3.0]", "", "tensor([1., 0.])"),
          tags=("nested",),
          inplace=True),
    _test("signbit", Kernels.signbit,
          example=("[-1.0, 0.0, -0.0]", "tensor([ True, False,  True])"),
          tags=("masked", "sparse")),
)


# ----- the public functions --------------------------------------------------------------


#: ``_dispatch(name, input, to_float=False)``: ``torcia._tensor.unary``, this module being
#: below the Tensor class, bound on first call (then one global)
_dispatch = _opdef.bind_on_first_call(globals(), "_dispatch", lambda: _opdef.UNARY)


def public_function(op, fn, doc):
    """``fn`` made the public function of the declared elementwise ``op``: its arguments
    named as its schema names them, its docstring its ``doc`` (or ``doc``, its kind's first
    line) and its examples."""
    # the arguments as the schema names them (pow's second is ``exponent``)
    fn.__code__ = fn.__code__.replace(co_varnames=op.inputs, co_name=op.name,
                                      co_qualname=op.name)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = (op.doc or doc.format(op.name)) + examples_section(f"torcia.{op.name}",
                                                                    op.examples)
    return fn


def _unary_function(name, to_float):
    def fn(input):
        return _dispatch(name, input, to_float)

    return fn


#: the first line of each group's docstring, and whether integer inputs promote to float
_KINDS = {
    "unary_float": ("Elementwise ``{}`` of ``input``. Integer inputs give the default "
                    "float dtype.", True),
    "unary_same": ("Elementwise ``{}`` of ``input``.", False),
    "unary_bool": ("Elementwise ``{}`` of ``input``.", False),
}

#: the public functions made from the declarations here, by name
MADE = {op.name: public_function(op, _unary_function(op.name, _KINDS[op.group][1]),
                                   _KINDS[op.group][0]) for op in DECLARED}
globals().update(MADE)


# ----- the public functions of no op of their own ----------------------------------------


def positive(input):
    """``input`` itself (PyTorch's unary plus); not defined for bool.

    Examples
    --------
    >>> import torcia
    >>> torcia.positive(torcia.tensor([-1, 2]))
    tensor([-1,  2])
    """
    if input.dtype is D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def deg2rad(input):
    """Degrees to radians.

    Examples
    --------
    >>> import torcia
    >>> torcia.deg2rad(torcia.tensor([180.0, 90.0]))
    tensor([3.1416, 1.5708])
    """
    refuse_complex_dtype(input.dtype, "deg2rad", RuntimeError,
                         "deg2rad is not supported for complex tensors.")
    return to_float(input) * (math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees.

    Examples
    --------
    >>> import torcia
    >>> torcia.rad2deg(torcia.tensor([3.141592653589793]))
    tensor([180.])
    """
    refuse_complex_dtype(input.dtype, "rad2deg", RuntimeError,
                         "rad2deg is not supported for complex tensors.")
    return to_float(input) * (180.0 / math.pi)


def refuse_complex_dtype(dtype, name, error=NotImplementedError, message=None):
    """PyTorch's refusal of an op it has no complex kernel of, computing in ``dtype``:
    ``error(message)``, by default its dispatcher's ``"name_cpu" not implemented``."""
    if dtype.category == 3:
        raise error(message or f'"{name}_cpu" not implemented for \'{_torch_name(dtype)}\'')


def isneginf(input):
    """Where ``input`` is minus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isneginf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([ True, False, False])
    """
    return MADE["isinf"](input) & (input < 0)


def isposinf(input):
    """Where ``input`` is plus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isposinf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([False,  True, False])
    """
    return MADE["isinf"](input) & (input > 0)


def isreal(input):
    """Where the value is real: an imaginary part of 0 (everywhere, for real dtypes).

    Examples
    --------
    >>> import torcia
    >>> torcia.isreal(torcia.tensor([1.0, 2.0 - 0.5j, 3.0 + 0j]))
    tensor([ True, False,  True])
    """
    if input.dtype.category == 3:
        return imag(input) == 0
    return ones(*input.shape, dtype=D.bool_, device=input.device)


_Frexp = return_type("frexp", ("mantissa", "exponent"))


def frexp(input):
    """``(mantissa, exponent)`` with ``input == mantissa * 2**exponent`` and
    ``0.5 <= |mantissa| < 1``; the exponent is int32.

    Examples
    --------
    >>> import torcia
    >>> torcia.frexp(torcia.tensor([8.0])).exponent
    tensor([4], dtype=torcia.int32)
    """
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    # with tensor ops, not NumPy on the host: they run on the meta device and under vmap
    x = input.detach()
    scaled = x.isfinite() & (x != 0)  # 0, inf and NaN are their own mantissa, exponent 0
    e = where(scaled, x.abs().where(scaled, 1).log2().floor() + 1, 0)
    # log2 can round across a power of two: one step of correction either way
    m = _times_exp2(x, -e)
    e = where(scaled & (m.abs() >= 1), e + 1, where(scaled & (m.abs() < 0.5), e - 1, e))
    m = where(scaled, _times_exp2(input, -e), input)
    return _Frexp(m, e.to(D.int32))


def _times_exp2(x, e):
    """``x * 2**e`` in two exact steps, so that neither power overflows (2**1074 would)."""
    half = (e / 2).floor()
    return x * half.exp2() * (e - half).exp2()


#: the functions here that are also Tensor methods, under the same name: the declared ops'
METHODS = tuple(MADE)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = tuple(op.name for op in DECLARED if op.inplace)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = ("positive", "deg2rad", "rad2deg", "isneginf", "isposinf", "isreal", "frexp")

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = ("deg2rad", "rad2deg")

#: the names ``torcia`` exports from here: the declared ops' functions and those above
__all__ = [*MADE, "positive", "deg2rad", "rad2deg", "isneginf", "isposinf", "isreal", "frexp"]
