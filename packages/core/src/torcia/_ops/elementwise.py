"""The elementwise ops, each declared once: schema, reference kernel, meta shape,
decomposition, autocast policy, the dtypes it refuses. One input: :data:`torcia.ops.UNARY_FLOAT`
(integers promote to the default float dtype), ``UNARY_SAME`` (dtype kept) and
``UNARY_BOOL`` (bool result); two inputs, broadcast and promoted together: ``BINARY``,
``BINARY_FLOAT`` (floating results) and ``COMPARE`` (bool results).

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
    broadcast,
    first_shape,
    no_kernel,
    opmath,
    real_like,
)
from torcia._ops._common import refuse as _refuse
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


class IntegerDivisionByZero(RuntimeError, ZeroDivisionError):
    """An integer division by zero: PyTorch raises RuntimeError("ZeroDivisionError"), and
    Python code expects ZeroDivisionError; this is both."""


def _check_divisor(xp, a, b) -> None:
    # NumPy returns 0 for an integer division by zero (with a warning at most); PyTorch's
    # CPU kernels raise
    if xp.result_type(a, b).kind in "iub" and not xp.all(b):
        raise IntegerDivisionByZero("ZeroDivisionError")


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

    def floor_divide(self, a, b):
        _check_divisor(self.xp, a, b)
        return self.xp.floor_divide(a, b)

    def remainder(self, a, b):
        _check_divisor(self.xp, a, b)
        xp = self.xp
        if xp.result_type(a, b).kind not in "fV":
            return xp.remainder(a, b)
        # PyTorch's: fmod moved into the divisor's sign, so an exact 0 keeps the dividend's
        # sign (NumPy's remainder gives the divisor's: remainder(-0.0, 2) is +0, PyTorch -0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = xp.fmod(a, b)
            return xp.where((out != 0) & ((out < 0) != (b < 0)), out + b, out)

    def fmod(self, a, b):
        _check_divisor(self.xp, a, b)
        return self.xp.fmod(a, b)

    def pow(self, a, b):
        xp = self.xp
        if xp.asarray(a).dtype.kind == "b":
            if b.__class__ is bool or getattr(b, "dtype", np.dtype(np.int64)).kind == "b":
                if b.__class__ is not bool:
                    raise NotImplementedError('"pow" not implemented for \'Bool\'')
                # a bool to a bool power stays bool: x ** True is x, x ** False True
                return a.copy() if b else xp.ones_like(a)
        if xp.asarray(a).dtype.kind not in "iub":
            return xp.power(a, b)
        if isinstance(b, (int, np.integer)):
            if b < 0:
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            return xp.power(a, b)
        negative = b < 0
        if not negative.any():
            return xp.power(a, b)
        # a tensor of exponents: a ** -k is 1 / a ** k truncated, which is 0 but for
        # a = 1 (1) and a = -1 (+-1 by the parity of k), as PyTorch's integer pow
        out = xp.power(a, xp.where(negative, 0, b))
        unit = xp.where(b % 2 == 0, 1, xp.where(a == -1, -1, 1)).astype(out.dtype)
        return xp.where(negative, xp.where(xp.abs(a) == 1, unit, 0), out).astype(out.dtype)

    def div(self, a, b, rounding_mode=None):
        xp = self.xp
        if rounding_mode is None:
            return xp.true_divide(a, b)
        if rounding_mode in ("trunc", "floor"):
            _check_divisor(xp, a, b)
        if rounding_mode == "trunc" and xp.result_type(a, b).kind in "iu":
            # exactly, not through float64 (which rounds int64 past 2**53): the floor
            # quotient is one less than the truncated one where the division is inexact
            # and the signs differ
            q = xp.floor_divide(a, b)
            q = q + ((xp.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
        elif rounding_mode == "trunc":
            q = xp.true_divide(a, b)
            q = xp.trunc(q)
        elif rounding_mode == "floor":
            q = xp.floor_divide(a, b)
        else:
            raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or "
                             f"'floor' but found '{rounding_mode}'")
        return q.astype(xp.result_type(a, b), copy=False)

    def xlogy(self, a, b):
        xp = self.xp
        # a Python number b is of a's dtype (xp.log would make it float64); 0 * log(nan)
        # is nan, 0 * log(anything else) 0
        b = b if isinstance(b, xp.ndarray) else xp.asarray(b, dtype=a.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.where((a == 0) & ~xp.isnan(b), xp.zeros((), dtype=xp.result_type(a, b)),
                            a * xp.log(b))


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


def _no_complex(op):
    """PyTorch's refusal of complex operands of ``op`` (no order, or no formula)."""
    return {COMPLEX: no_kernel(f"{op}_cpu")}


def _no_complex_extreme(op):
    return {COMPLEX: (RuntimeError, f"{op} not implemented for complex tensors.")}


def _no_bool_or_complex(kernel):
    return {BOOL: no_kernel(kernel), COMPLEX: no_kernel(kernel)}


_LE = _no_complex("le")
_FLOOR_DIVIDE = _no_bool_or_complex("div_floor_cpu")
_REMAINDER = _no_bool_or_complex("remainder_cpu")
_FLOOR = _rounding("floor")
_MINIMUM = _no_complex_extreme("minimum")
_FMAX, _FMIN = _no_complex_extreme("fmax"), _no_complex_extreme("fmin")
_HYPOT, _XLOGY = _no_complex("hypot"), _no_complex("xlogy")
_GT, _GE = _no_complex("gt"), _no_complex("ge")


def _refuse_complex(refuses, *operands):
    """:func:`_refuse` for an op of several operands that refuses complex ones only: any
    complex operand makes the promoted dtype complex."""
    for x in operands:
        if hasattr(x, "is_complex") and x.is_complex():
            _refuse(refuses, x)


# ----- decompositions (tensors; half precision computes in float32, see opmath) ---------


@opmath
def relu(a):
    _refuse(_RELU, a)
    # as PyTorch: NaN and -0.0 kept (a * 0), the gradient at 0 is 0
    return _where(a > 0, a, _where(a < 0, a.new_zeros(()), a * 0))


def trunc(a):
    _refuse(_TRUNC, a)
    # -0.0 is not below 0: floor keeps it, as trunc does
    return _where(a < 0, a.ceil(), a.floor())


@opmath
def frac(a):
    _refuse(_FRAC, a)
    return a - a.trunc()


@opmath
def rsqrt(a):
    return a.sqrt().reciprocal()


def reciprocal(a):
    return a.new_ones(()) / a


def abs(a):  # noqa: A001 - the op's name
    _refuse(_ABS, a)
    if a.is_complex():
        return a.real.hypot(a.imag)
    # the sign bit, not a < 0: -0.0 becomes 0.0 (integers wrap at their minimum, as NumPy's)
    return _where(a.signbit() if a.is_floating_point() else a < 0, -a, a)


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


def _integers_only(op, *operands):
    """Raise the reference kernel's error where the bitwise op ``op`` is given a floating or
    complex tensor (a Python number has no is_complex: the kernel takes it)."""
    for x in operands:
        if hasattr(x, "is_complex") and (x.is_floating_point() or x.is_complex()):
            raise NotImplementedError(
                f'"{op}_cpu" not implemented for \'{_torch_name(x.dtype)}\'')


def bitwise_not(a):
    if a.dtype == D.bool_:
        return logical_not(a)
    _integers_only("bitwise_not", a)
    return a.bitwise_xor(a.new_full((), -1))  # all ones, in two's complement


def bitwise_or(a, b):
    _integers_only("bitwise_or", a, b)
    # exact: the bits set in one of them, and those set in both (disjoint, so xor adds them)
    return a.bitwise_xor(b).bitwise_xor(a.bitwise_and(b))


def floor_divide(a, b):
    _refuse(_FLOOR_DIVIDE, a)
    # the division kernel's floor mode is the same NumPy floor division (and the same
    # error for an integer divisor of 0)
    return a.div(b, rounding_mode="floor")


def floor(a):
    _refuse(_FLOOR, a)
    # exact: ceil of the negation, negated (signed zeros and integers' wrapping alike)
    return -(-a).ceil()


def minimum(a, b):
    _refuse_complex(_MINIMUM, a, b)
    # exact, NaN kept: the maximum of the order-reversed values (which keeps the reference
    # kernel's choice between equal values, such as 0.0 and -0.0: the second)
    if hasattr(b, "dtype") and b.dtype != a.dtype:  # ~ and - before promotion would differ
        dt = D.promote_types(a.dtype, b.dtype)
        a, b = a.to(dt), b.to(dt)
    if a.is_floating_point():
        return -(-a).maximum(-b)
    return ~(~a).maximum(~b)


def remainder(a, b):
    _refuse(_REMAINDER, a)
    if not hasattr(b, "dtype"):
        b = a.new_full((), b)
    # the reference kernel's: fmod (which refuses an integer division by zero) moved into
    # the divisor's sign, so an exact 0 keeps the dividend's; integers' floor modulus alike
    out = a.fmod(b)
    return _where((out != 0).bitwise_and((out < 0) != (b < 0)), out + b, out)


def sigmoid(a):
    if a.is_complex():
        return (1 + (-a).exp()).reciprocal()
    # the reference kernel's steps, in a's dtype: 1 / (1 + e) with e = exp(-|a|), times e
    # below 0 (nothing overflows); -|a| written as a where, whose gradient is not 0 at 0
    nonnegative = a >= 0
    e = _where(nonnegative, -a, a).exp()
    r = (e + 1).reciprocal()
    return _where(nonnegative, r, r * e)


def hypot(a, b):
    _refuse_complex(_HYPOT, a, b)
    # the larger side times sqrt(1 + r^2), r = smaller / larger: nothing overflows; an
    # infinite side gives inf beside NaN too
    x, y = a.abs(), b.abs()
    big, small = x.maximum(y), x.minimum(y)
    r = small / _where(big == 0, big.new_ones(()), big)
    out = big * (1 + r * r).sqrt()
    return _where((x == math.inf).bitwise_or(y == math.inf), out.new_full((), math.inf), out)


# The trigonometric and hyperbolic functions and the other bases' logarithms and powers, from
# sin, cos, atan2, pow, exp, expm1, log, log1p and sqrt: written to keep their accuracy (a
# few ulp: expm1 and log1p near 0, nothing overflowing before the result itself does) and
# their signed zeros, NaN and infinities; complex inputs take the textbook formulas.

_LN2 = math.log(2.0)
#: beyond it, sqrt(x^2 + 1) is x (and x^2 may overflow): asinh and acosh are log(2x)
_HUGE = 2.0 ** 28


@opmath
def tan(a):
    return a.sin() / a.cos()


def _half_exp(m):
    """e^m / 2 for m >= 20, where e^-m is below the rounding of e^m (sinh and cosh are
    this): as e^(m/2) / 2 * e^(m/2), finite wherever the result is, though e^m may not be."""
    h = (m / 2).exp()
    return h * 0.5 * h


@opmath
def sinh(a):
    if a.is_complex():
        return (a.exp() - (-a).exp()) / 2
    near = (a.expm1() - (-a).expm1()) / 2
    return _where(a.abs() < 20, near, _half_exp(a.abs()).copysign(a))


@opmath
def cosh(a):
    if a.is_complex():
        return (a.exp() + (-a).exp()) / 2
    m = a.abs()
    return _where(m < 20, (m.exp() + (-m).exp()) / 2, _half_exp(m))


@opmath
def tanh(a):
    if a.is_complex():
        e = (2 * a).exp()
        return (e - 1) / (e + 1)
    e = (2 * a).expm1()
    # beyond 20, tanh rounds to +-1 (and e to inf); NaN goes through the formula
    near = (a.abs() < 20).bitwise_or(a != a)
    return _where(near, e / (e + 2), a.new_ones(()).copysign(a))


@opmath
def asinh(a):
    if a.is_complex():
        return (a + (a * a + 1).sqrt()).log()
    m = a.abs()
    near = (m + m * m / ((m * m + 1).sqrt() + 1)).log1p()
    return _where(m < _HUGE, near, m.log() + _LN2).copysign(a)


@opmath
def acosh(a):
    if a.is_complex():
        return (a + (a + 1).sqrt() * (a - 1).sqrt()).log()
    t = a - 1
    out = _where(a < _HUGE, (t + (2 * t + t * t).sqrt()).log1p(), a.log() + _LN2)
    return _where(a < 1, a.new_full((), math.nan), out)


@opmath
def atanh(a):
    if a.is_complex():
        return ((1 + a).log() - (1 - a).log()) / 2
    # odd: taken at |a|, where log1p's argument is positive (near -1 it would cancel)
    m = a.abs()
    return ((2 * m / (1 - m)).log1p() / 2).copysign(a)


@opmath
def asin(a):
    if a.is_complex():
        return -1j * asinh(1j * a)
    return a.atan2(((1 - a) * (1 + a)).sqrt())


@opmath
def acos(a):
    if a.is_complex():
        return math.pi / 2 - asin(a)
    return ((1 - a) * (1 + a)).sqrt().atan2(a)


@opmath
def atan(a):
    if a.is_complex():
        return 0.5j * ((1 - 1j * a).log() - (1 + 1j * a).log())
    return a.atan2(a.new_ones(()))


@opmath
def exp2(a):
    return a.new_full((), 2.0).pow(a)


@opmath
def log2(a):
    return a.log() * (1 / _LN2)


@opmath
def log10(a):
    return a.log() * (1 / math.log(10.0))


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


def sub(a, b):
    # exact: IEEE subtraction is the addition of the negation (signed zeros included), and
    # integers wrap alike
    return a + (-b)


def fmax(a, b):
    _refuse_complex(_FMAX, a, b)
    return _where(b.isnan(), a, _where(a.isnan(), b, a.maximum(b)))


def fmin(a, b):
    _refuse_complex(_FMIN, a, b)
    return _where(b.isnan(), a, _where(a.isnan(), b, a.minimum(b)))


@opmath
def xlogy(a, b):
    _refuse_complex(_XLOGY, a, b)
    # 0 * log(y) is 0 unless y is NaN
    return _where((a == 0).bitwise_and(b == b), a.new_zeros(()), a * b.log())


def gt(a, b):
    _refuse_complex(_GT, a, b)
    return b < a


def le(a, b):
    _refuse_complex(_LE, a, b)
    return (a < b).bitwise_or(a == b)


def ge(a, b):
    _refuse_complex(_GE, a, b)
    return b <= a


def ne(a, b):
    return logical_not(a == b)


# bitwise on bools: ``&`` would dispatch logical_and again
def logical_and(a, b):
    return (a != 0).bitwise_and(b != 0)


def logical_or(a, b):
    return (a != 0).bitwise_or(b != 0)


def logical_xor(a, b):
    return (a != 0) != (b != 0)


def _square_shape(x, **params):
    """``square`` is ``pow(x, 2)``: a bool input squares in int64."""
    return x.shape, np.dtype(np.int64) if x.dtype.kind == "b" else x.dtype


# ----- the declarations ------------------------------------------------------------------


def _fields(example=None, **fields):
    """``fields`` for :func:`define`: ``example``, one call of the docs example, given as
    ``examples`` (pow shows two); the family's ops compute in place as ``name_`` unless
    told not to."""
    if example is not None:
        fields["examples"] = (example,)
    fields.setdefault("inplace", True)
    return fields


def _float(name, kernel, **fields):
    """An op of ``UNARY_FLOAT``: floating inputs (the public function promotes integers)."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=first_shape,
                  floating_inputs=True, group="unary_float", **_fields(**fields))


def _same(name, kernel, shape=first_shape, **fields):
    """An op of ``UNARY_SAME``: the input's dtype kept."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=shape, group="unary_same",
                  **_fields(**fields))


def _test(name, kernel, inplace=False, **fields):
    """An op of ``UNARY_BOOL``: a bool result, which carries no gradient (and which only
    ``logical_not_`` writes back in place, in the input's dtype)."""
    return define(f"{name}(Tensor input) -> Tensor", kernel, shape=bool_like,
                  differentiable=False, group="unary_bool", **_fields(inplace=inplace, **fields))


def _binary(name, kernel, other="other", **fields):
    """An op of ``BINARY``: two inputs broadcast and promoted together (``other`` the name
    of the second, ``exponent`` for pow)."""
    return define(f"{name}(Tensor input, Tensor {other}) -> Tensor", kernel, shape=broadcast,
                  group="binary", **_fields(**fields))


def _binary_float(name, kernel, params="", **fields):
    """An op of ``BINARY_FLOAT``: floating inputs (the public function promotes integers);
    ``params``: the schema's keyword-only parameters."""
    return define(f"{name}(Tensor input, Tensor other{params}) -> Tensor", kernel,
                  shape=broadcast, floating_inputs=True, group="binary_float",
                  **_fields(**fields))


def _compare(name, kernel, **fields):
    """An op of ``COMPARE``: a bool result, which carries no gradient."""
    return define(f"{name}(Tensor input, Tensor other) -> Tensor", kernel, shape=bool_like,
                  differentiable=False, group="compare", **_fields(**fields))


#: PyTorch runs these in float32 under CUDA autocast
_CUDA_FLOAT32 = {"cuda": "float32"}

#: in the order of :data:`torcia.ops.UNARY_FLOAT`, ``UNARY_SAME``, ``UNARY_BOOL``,
#: ``BINARY``, ``BINARY_FLOAT`` and ``COMPARE``
DECLARED = (
    _float("exp", ArrayFunction("exp"), autocast=_CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([1.0000, 2.7183])"),
           tags=("masked", "nested", "foreach")),
    _float("exp2", ArrayFunction("exp2"), decomposition=exp2,
           example=("[0, 3]", "tensor([1., 8.])"),
           tags=("masked", "special")),
    _float("log", ArrayFunction("log"), autocast=_CUDA_FLOAT32,
           example=("[1.0, 100.0]", "tensor([0.0000, 4.6052])"),
           tags=("masked", "nested", "foreach")),
    _float("log2", ArrayFunction("log2"), decomposition=log2, autocast=_CUDA_FLOAT32,
           example=("[1, 8]", "tensor([0., 3.])"),
           tags=("masked", "foreach")),
    _float("log10", ArrayFunction("log10"), decomposition=log10, autocast=_CUDA_FLOAT32,
           example=("[1.0, 10.0]", "tensor([0., 1.])"),
           tags=("masked", "foreach")),
    _float("log1p", Kernels.log1p, autocast=_CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.6931])"),
           tags=("masked", "nested", "foreach", "sparse", "special")),
    _float("expm1", ArrayFunction("expm1"), autocast=_CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 1.7183])"),
           tags=("masked", "nested", "foreach", "sparse", "special")),
    _float("sqrt", ArrayFunction("sqrt"),
           example=("[4, 9]", "tensor([2., 3.])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("rsqrt", Kernels.rsqrt, decomposition=rsqrt, autocast=_CUDA_FLOAT32,
           example=("[4.0, 0.25]", "tensor([0.5000, 2.0000])"),
           tags=("masked", "nested", "foreach")),
    _float("reciprocal", Kernels.reciprocal, decomposition=reciprocal,
           autocast=_CUDA_FLOAT32,
           example=("[2.0, -4.0]", "tensor([ 0.5000, -0.2500])"),
           tags=("masked", "nested", "foreach")),
    _float("sin", ArrayFunction("sin"),
           example=("[0.0, 1.5708]", "tensor([0., 1.])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("cos", ArrayFunction("cos"),
           example=("[0.0, 3.1416]", "tensor([ 1., -1.])"),
           tags=("masked", "nested", "foreach")),
    _float("tan", ArrayFunction("tan"), decomposition=tan, autocast=_CUDA_FLOAT32,
           example=("[0.0, 0.7854]", "tensor([0.0000, 1.0000])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("asin", ArrayFunction("arcsin"), decomposition=asin, autocast=_CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 1.5708])"),
           aliases=("arcsin",),
           tags=("masked", "foreach", "sparse")),
    _float("acos", ArrayFunction("arccos"), decomposition=acos, autocast=_CUDA_FLOAT32,
           example=("[1.0, 0.0]", "tensor([0.0000, 1.5708])"),
           aliases=("arccos",),
           tags=("masked", "foreach")),
    _float("atan", ArrayFunction("arctan"), decomposition=atan,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.7854])"),
           aliases=("arctan",),
           tags=("masked", "foreach", "sparse")),
    _float("sinh", ArrayFunction("sinh"), decomposition=sinh, autocast=_CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([0.0000, 1.1752])"),
           tags=("masked", "foreach", "sparse")),
    _float("cosh", ArrayFunction("cosh"), decomposition=cosh, autocast=_CUDA_FLOAT32,
           example=("[0.0, 1.0]", "tensor([1.0000, 1.5431])"),
           tags=("masked", "foreach")),
    _float("tanh", ArrayFunction("tanh"), decomposition=tanh,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.7616])"),
           tags=("masked", "nested", "foreach", "sparse")),
    _float("asinh", ArrayFunction("arcsinh"), decomposition=asinh,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.8814])"),
           aliases=("arcsinh",),
           tags=("masked", "sparse")),
    _float("acosh", ArrayFunction("arccosh"), decomposition=acosh,
           example=("[1.0, 2.0]", "tensor([0.0000, 1.3170])"),
           aliases=("arccosh",),
           tags=("masked",)),
    _float("atanh", ArrayFunction("arctanh"), decomposition=atanh,
           example=("[0.0, 0.5]", "tensor([0.0000, 0.5493])"),
           aliases=("arctanh",),
           tags=("masked", "sparse")),
    _float("sigmoid", Kernels.sigmoid, decomposition=sigmoid,
           example=("[0.0, 2.0]", "tensor([0.5000, 0.8808])"),
           tags=("masked", "nested", "foreach")),
    _float("erf", Kernels.erf,
           example=("[0.0, 1.0]", "tensor([0.0000, 0.8427])"),
           tags=("masked", "nested", "foreach", "sparse", "special")),
    _float("erfc", Kernels.erfc,
           example=("[0.0, 1.0]", "tensor([1.0000, 0.1573])"),
           tags=("masked", "foreach", "special")),
    _float("erfinv", Kernels.erfinv, autocast=_CUDA_FLOAT32,
           example=("[0.0, 0.5]", "tensor([0.0000, 0.4769])"),
           tags=("masked", "sparse", "special")),
    _float("lgamma", Kernels.lgamma,
           example=("[1.0, 5.0]", "tensor([0.0000, 3.1781])"),
           tags=("masked", "foreach")),
    _float("digamma", Kernels.digamma,
           example=("[1.0, 2.0]", "tensor([-0.5772,  0.4228])"),
           tags=("masked", "special")),
    _same("neg", ArrayFunction("negative"), decomposition=neg, refuses=_NEG,
          example=("[1, -2]", "tensor([-1,  2])"),
          aliases=("negative",),
          tags=("masked", "nested", "foreach"),
          operator="neg"),
    _same("abs", ArrayFunction("abs"), shape=real_like, decomposition=abs, refuses=_ABS,
          example=("[-1.5, 2.0]", "tensor([1.5000, 2.0000])"),
          aliases=("absolute",),
          tags=("masked", "nested", "foreach", "sparse"),
          operator="abs"),
    _same("sign", Kernels.sign, decomposition=sign, refuses=_SIGN,
          example=("[-2, 0, 3]", "tensor([-1,  0,  1])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("square", Kernels.square, shape=_square_shape, decomposition=square,
          example=("[2, -3]", "tensor([4, 9])"),
          tags=("masked", "nested", "sparse")),
    _same("floor", ArrayFunction("floor"), decomposition=floor, refuses=_FLOOR,
          example=("[-1.5, 1.5]", "tensor([-2.,  1.])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("ceil", ArrayFunction("ceil"), refuses=_rounding("ceil"),
          example=("[-1.5, 1.5]", "tensor([-1.,  2.])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("trunc", ArrayFunction("trunc"), decomposition=trunc, refuses=_TRUNC,
          example=("[-1.5, 1.5]", "tensor([-1.,  1.])"),
          aliases=("fix",),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("frac", Kernels.frac, decomposition=frac, refuses=_FRAC,
          example=("[-1.5, 2.25]", "tensor([-0.5000,  0.2500])"),
          tags=("masked", "nested", "foreach", "sparse")),
    _same("relu", Kernels.relu, decomposition=relu, refuses=_RELU,
          example=("[-1.0, 2.0]", "tensor([0., 2.])"),
          tags=("nested", "sparse")),
    # an integer result: no gradient
    _same("bitwise_not", ArrayFunction("invert"), decomposition=bitwise_not,
          differentiable=False,
          example=("[0, 5]", "tensor([-1, -6])"),
          tags=("masked", "nested"),
          operator="invert"),
    _test("isnan", ArrayFunction("isnan"), decomposition=isnan,
          example=('[float("nan"), 1.0]', "tensor([ True, False])"),
          tags=("masked", "nested", "sparse")),
    _test("isinf", ArrayFunction("isinf"), decomposition=isinf,
          example=('[float("inf"), 1.0]', "tensor([ True, False])"),
          tags=("sparse",)),
    _test("isfinite", ArrayFunction("isfinite"), decomposition=isfinite,
          example=('[float("inf"), 1.0]', "tensor([False,  True])")),
    _test("logical_not", ArrayFunction("logical_not"), decomposition=logical_not,
          example=("[0, 3]", "tensor([ True, False])"),
          inplace_example=("[0.0, 3.0]", "", "tensor([1., 0.])"),
          tags=("nested",),
          inplace=True),
    _test("signbit", Kernels.signbit,
          example=("[-1.0, 0.0, -0.0]", "tensor([ True, False,  True])"),
          tags=("masked", "sparse")),
    _binary("add", ArrayFunction("add"),
            inplace_example=("[1, 2]", "torcia.tensor([10, 20])", "tensor([11, 22])"),
            tags=("masked", "nested", "foreach"),
            operator="add"),
    _binary("sub", ArrayFunction("subtract"), decomposition=sub,
            inplace_example=("[5, 7]", "torcia.tensor([1, 2])", "tensor([4, 5])"),
            tags=("masked", "nested", "foreach"),
            operator="sub"),
    _binary("mul", ArrayFunction("multiply"),
            example=("[2, 3]", "[4, 5]", "tensor([ 8, 15])"),
            tags=("masked", "nested", "foreach"),
            operator="mul"),
    # an integer result: no gradient
    _binary("floor_divide", Kernels.floor_divide, decomposition=floor_divide,
            differentiable=False, refuses=_FLOOR_DIVIDE,
            example=("[7, -7]", "2", "tensor([ 3, -4])"),
            tags=("masked",),
            operator="floordiv"),
    _binary("remainder", Kernels.remainder, decomposition=remainder, refuses=_REMAINDER,
            example=("[7, -7]", "3", "tensor([1, 2])"),
            tags=("masked",),
            operator="mod"),
    _binary("fmod", Kernels.fmod, refuses=_no_bool_or_complex("fmod_cpu"),
            example=("[7, -7]", "3", "tensor([ 1, -1])"),
            tags=("masked",)),
    _binary("pow", Kernels.pow, autocast=_CUDA_FLOAT32,
            other="exponent",
            doc="``input ** exponent`` elementwise; either may be a number.",
            examples=(("[1, 2, 3]", "2", "tensor([1, 4, 9])"),
                      ("2", "[1.0, 0.5]", "tensor([2.0000, 1.4142])")),
            inplace_example=("[2.0, 3.0]", "2", "tensor([4., 9.])"),
            tags=("nested", "foreach"),
            operator="pow"),
    _binary("maximum", ArrayFunction("maximum"), refuses=_no_complex_extreme("maximum"),
            example=("[1, 5]", "[3, 2]", "tensor([3, 5])"),
            tags=("masked", "nested", "foreach")),
    _binary("minimum", ArrayFunction("minimum"), decomposition=minimum, refuses=_MINIMUM,
            example=("[1, 5]", "[3, 2]", "tensor([1, 2])"),
            tags=("masked", "nested", "foreach")),
    _binary("bitwise_and", ArrayFunction("bitwise_and"), differentiable=False,
            example=("[12, 10]", "[10, 6]", "tensor([8, 2])"),
            tags=("masked",),
            operator="and"),
    _binary("bitwise_or", ArrayFunction("bitwise_or"), decomposition=bitwise_or,
            differentiable=False,
            example=("[12, 10]", "[10, 6]", "tensor([14, 14])"),
            tags=("masked",),
            operator="or"),
    _binary("bitwise_xor", ArrayFunction("bitwise_xor"), differentiable=False,
            example=("[12, 10]", "[10, 6]", "tensor([ 6, 12])"),
            tags=("masked",),
            operator="xor"),
    _binary("fmax", ArrayFunction("fmax"), decomposition=fmax, refuses=_FMAX,
            example=('[1.0, float("nan")]', "[2.0, 3.0]", "tensor([2., 3.])"),
            tags=("masked",)),
    _binary("fmin", ArrayFunction("fmin"), decomposition=fmin, refuses=_FMIN,
            example=('[1.0, float("nan")]', "[2.0, 3.0]", "tensor([1., 3.])"),
            tags=("masked",)),
    _binary_float("div", Kernels.div, params=", *, str? rounding_mode=None",
                  inplace_example=("[3.0, 8.0]", "2", "tensor([1.5000, 4.0000])"),
                  tags=("masked", "nested", "foreach"),
                  operator="truediv"),
    # PyTorch promotes atan2's inputs to the widest under CUDA autocast
    _binary_float("atan2", ArrayFunction("arctan2"), autocast={"cuda": "promote"},
                  refuses=_no_complex("atan2"),
                  example=("[1.0, 0.0]", "[1.0, -1.0]", "tensor([0.7854, 3.1416])"),
                  aliases=("arctan2",),
                  tags=("masked",)),
    _binary_float("hypot", ArrayFunction("hypot"), decomposition=hypot, refuses=_HYPOT,
                  example=("[3.0, 5.0]", "[4.0, 12.0]", "tensor([ 5., 13.])")),
    _binary_float("xlogy", Kernels.xlogy, decomposition=xlogy, refuses=_XLOGY,
                  example=("[0.0, 2.0]", "[3.0, 4.0]", "tensor([0.0000, 2.7726])"),
                  inplace_example=("[0.0, 2.0]", "torcia.tensor([3.0, 4.0])",
                                   "tensor([0.0000, 2.7726])"),
                  tags=("special",)),
    _compare("eq", ArrayFunction("equal"),
             example=("[1, 2, 3]", "[1, 0, 3]", "tensor([ True, False,  True])"),
             inplace_example=("[1.0, 2.0, 3.0]", "torcia.tensor([1.0, 0.0, 3.0])",
                              "tensor([1., 0., 1.])"),
             tags=("masked",),
             operator="eq"),
    _compare("ne", ArrayFunction("not_equal"), decomposition=ne,
             example=("[1, 2, 3]", "[1, 0, 3]", "tensor([False,  True, False])"),
             inplace_example=("[1.0, 2.0, 3.0]", "torcia.tensor([1.0, 0.0, 3.0])",
                              "tensor([0., 1., 0.])"),
             aliases=("not_equal",),
             tags=("masked",),
             operator="ne"),
    _compare("lt", ArrayFunction("less"), refuses=_no_complex("lt"),
             example=("[1, 2, 3]", "2", "tensor([ True, False, False])"),
             inplace_example=("[1.0, 2.0, 3.0]", "2", "tensor([1., 0., 0.])"),
             aliases=("less",),
             tags=("masked",),
             operator="lt"),
    _compare("le", ArrayFunction("less_equal"), decomposition=le, refuses=_LE,
             example=("[1, 2, 3]", "2", "tensor([ True,  True, False])"),
             inplace_example=("[1.0, 2.0, 3.0]", "2", "tensor([1., 1., 0.])"),
             aliases=("less_equal",),
             tags=("masked",),
             operator="le"),
    _compare("gt", ArrayFunction("greater"), decomposition=gt, refuses=_GT,
             example=("[1, 2, 3]", "2", "tensor([False, False,  True])"),
             inplace_example=("[1.0, 2.0, 3.0]", "2", "tensor([0., 0., 1.])"),
             aliases=("greater",),
             tags=("masked",),
             operator="gt"),
    _compare("ge", ArrayFunction("greater_equal"), decomposition=ge, refuses=_GE,
             example=("[1, 2, 3]", "2", "tensor([False,  True,  True])"),
             inplace_example=("[1.0, 2.0, 3.0]", "2", "tensor([0., 1., 1.])"),
             aliases=("greater_equal",),
             tags=("masked",),
             operator="ge"),
    _compare("logical_and", ArrayFunction("logical_and"), decomposition=logical_and,
             example=("[0, 1, 2]", "[1, 1, 0]", "tensor([False,  True, False])"),
             inplace_example=("[0, 1, 2]", "torcia.tensor([1, 1, 0])", "tensor([0, 1, 0])")),
    _compare("logical_or", ArrayFunction("logical_or"), decomposition=logical_or,
             example=("[0, 1, 2]", "[1, 0, 0]", "tensor([True, True, True])"),
             inplace_example=("[0, 1, 2]", "torcia.tensor([1, 0, 0])", "tensor([1, 1, 1])")),
    _compare("logical_xor", ArrayFunction("logical_xor"), decomposition=logical_xor,
             example=("[0, 1, 2]", "[1, 1, 0]", "tensor([ True, False,  True])"),
             inplace_example=("[0, 1, 2]", "torcia.tensor([1, 1, 0])", "tensor([1, 0, 1])")),
)
