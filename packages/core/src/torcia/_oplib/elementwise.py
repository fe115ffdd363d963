"""Element-wise ops: the unary, binary and comparison functions made from their
declarations in :mod:`torcia._ops.unary` and ``binary`` (``torcia.exp``, ``torcia.mul``,
``torcia.eq``...), exported here, and the ones with their own arguments
(``add``'s ``alpha``, ``div``'s ``rounding_mode``, ``logaddexp``, ``frexp``...); those of
the ops with parameters or three inputs (``clamp``, ``where``, ``lerp``, ``addcmul``...) are
:mod:`torcia._ops.pointwise`'s.
"""

from __future__ import annotations

import builtins
import math
import types

import numpy as np

from torcia import _dtype as D
from torcia._creation import tensor
from torcia._oplib._common import (
    _operand_as,
    _return_type,
    _to_float,
    to_dtype,
)
from torcia._ops import DECLARED
from torcia._ops import binary as _binary_ops
from torcia._ops import unary as _unary_ops
from torcia._ops.complex_numbers import imag
from torcia._ops.creation import full_like, ones, zeros_like
from torcia._ops.pointwise import scalar_first, tensor_arg, where
from torcia._ops.views import broadcast_tensors
from torcia._tensor import (
    Tensor,
    _as_operand,
    _torch_name,
    binary,
    call,
    inplace,
    result_type,
)

#: the public functions made from the declarations of torcia._ops.unary and binary
#: (named here for the functions below, which call them as attributes; those defined below
#: by hand replace their globals)
_made = types.SimpleNamespace(**_unary_ops.MADE, **_binary_ops.MADE)
globals().update(vars(_made))


def add(input, other, *deprecated, alpha=1):
    """``input + alpha * other`` with broadcasting.

    PyTorch's deprecated ``add(input, alpha, other)`` is accepted, with its warning.

    Examples
    --------
    >>> import torcia
    >>> torcia.add(torcia.tensor([1, 2]), torcia.tensor([10, 20]), alpha=2)
    tensor([21, 42])
    """
    if deprecated:
        alpha, (other,) = other, scalar_first("add", other, deprecated, "Tensor other",
                                          "alpha")
    if alpha != 1:
        other = _made.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return binary("add", input, other)


def _not_bool(v) -> bool:
    """Whether ``v`` is a plain tensor not of bool dtype, an int or a float (False: maybe
    a bool operand)."""
    return v.__class__ in (int, float) or v.__class__ is Tensor and v._data.dtype.kind != "b"


def sub(input, other, *deprecated, alpha=1):
    """``input - alpha * other`` with broadcasting.

    Examples
    --------
    >>> import torcia
    >>> torcia.sub(torcia.tensor([5, 6]), torcia.tensor([1, 2]), alpha=2)
    tensor([3, 2])
    """
    if _not_bool(input) and _not_bool(other):
        bools = 0  # (most calls) found without the walk below
    else:
        # a Python bool is a bool operand too (PyTorch wraps it as a bool tensor)
        bools = builtins.sum(isinstance(v, bool) or isinstance(v, Tensor) and v.dtype is D.bool_
                             for v in (input, other))
    if bools == 2:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if bools:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    if deprecated:
        alpha, (other,) = other, scalar_first("sub", other, deprecated, "Tensor other",
                                          "alpha")
    if alpha != 1:
        other = _made.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return binary("sub", input, other)


def div(input, other, *, rounding_mode=None):
    """Divide; true division gives floats, ``rounding_mode`` "trunc" or "floor" round.

    Examples
    --------
    >>> import torcia
    >>> torcia.div(torcia.tensor([7, -7]), 2)
    tensor([ 3.5000, -3.5000])
    >>> torcia.div(torcia.tensor([7, -7]), 2, rounding_mode="floor")
    tensor([ 3, -4])
    """
    if rounding_mode is None:
        return binary("div", input, other, True)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found '{rounding_mode}'")
    if not isinstance(input, Tensor):
        input = _as_operand(input, other)
    if isinstance(other, Tensor):
        dt = D.result_type_of([t.dtype for t in (input, other) if t.ndim],
                              [t.dtype for t in (input, other) if not t.ndim], ())
        if other.dtype is not dt:
            other = other.to(dt)
    else:
        dt = D.tensor_scalar_dtype(input.dtype, type(other))
    a = input if input.dtype is dt else input.to(dt)
    return call("div", (a, other), {"rounding_mode": rounding_mode})


true_divide = divide = div


def float_power(input, exponent):
    """``input ** exponent`` computed in double precision (float64, or complex128).

    Examples
    --------
    >>> import torcia
    >>> torcia.float_power(torcia.tensor([2, 3]), 2)
    tensor([4., 9.], dtype=torcia.float64)
    """
    dt = D.complex128 if result_type(input, exponent).category == 3 else D.float64
    return _made.pow(to_dtype(input, dt) if isinstance(input, Tensor) else input,
                     to_dtype(exponent, dt) if isinstance(exponent, Tensor) else exponent)


def equal(input, other) -> bool:
    """True when both tensors have the same shape and the same elements.

    Examples
    --------
    >>> import torcia
    >>> torcia.equal(torcia.tensor([1, 2]), torcia.tensor([1, 2])), torcia.equal(
    ...     torcia.tensor([1, 2]), torcia.tensor([1]))
    (True, False)
    """
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(_made.eq(input, other).all().item())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (NaNs equal when asked).

    Examples
    --------
    >>> import torcia
    >>> torcia.isclose(torcia.tensor([1.0, 1.1]), torcia.tensor([1.0 + 1e-7, 1.0]))
    tensor([ True, False])
    """
    if isinstance(other, Tensor) and input.dtype is not other.dtype:
        # PyTorch compares only tensors of one dtype (no promotion)
        raise RuntimeError(f"{_torch_name(input.dtype)} did not match "
                           f"{_torch_name(other.dtype)}")
    dt = result_type(input, other)
    if dt.category < 2:
        # integers and bools compare as doubles: their difference would wrap or be refused
        input, other = to_dtype(input, D.float64), to_dtype(other, D.float64)
    # infinities are close only to themselves: inf - x <= inf would say otherwise
    finite = input.isfinite() & other.isfinite()
    close = (finite & ((input - other).abs() <= atol + rtol * other.abs())) | (input == other)
    if equal_nan:
        close = close | (input.isnan() & other.isnan())
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether every element of ``input`` is close to ``other`` (see :func:`isclose`).

    Examples
    --------
    >>> import torcia
    >>> torcia.allclose(torcia.tensor([1.0]), torcia.tensor([1.0 + 1e-9]))
    True
    """
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def multiply(input, other):
    """``input * other`` with broadcasting (an alias of :func:`mul`).

    Examples
    --------
    >>> import torcia
    >>> torcia.multiply(torcia.tensor([1, 2]), torcia.tensor([[3], [4]]))
    tensor([[3, 6],
            [4, 8]])
    """
    return _made.mul(input, other)


def subtract(input, other, *, alpha=1):
    """``input - alpha * other`` with broadcasting (an alias of :func:`sub`).

    Examples
    --------
    >>> import torcia
    >>> torcia.subtract(torcia.tensor([5.0, 6.0]), 1.5)
    tensor([3.5000, 4.5000])
    """
    return sub(input, other, alpha=alpha)


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
    _no_complex(input.dtype, "deg2rad", RuntimeError,
                "deg2rad is not supported for complex tensors.")
    return _to_float(input) * (math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees.

    Examples
    --------
    >>> import torcia
    >>> torcia.rad2deg(torcia.tensor([3.141592653589793]))
    tensor([180.])
    """
    _no_complex(input.dtype, "rad2deg", RuntimeError,
                "rad2deg is not supported for complex tensors.")
    return _to_float(input) * (180.0 / math.pi)


def _no_complex(dtype, name, error=NotImplementedError, message=None):
    """PyTorch's refusal of an op it has no complex kernel of, computing in ``dtype``:
    ``error(message)``, by default its dispatcher's ``"name_cpu" not implemented``."""
    if dtype.category == 3:
        raise error(message or f'"{name}_cpu" not implemented for \'{_torch_name(dtype)}\'')


def logaddexp(input, other):
    """``log(exp(input) + exp(other))``, computed without overflow.

    Examples
    --------
    >>> import torcia
    >>> torcia.logaddexp(torcia.tensor([0.0]), torcia.tensor([0.0]))
    tensor([0.6931])
    """
    input, other = _log_add_operands(input, other, "logaddexp")
    if input.is_complex():
        return _logaddexp_complex(input, other)
    # shifted by the greater, which sets the magnitude
    m = _made.maximum(input, other).detach()
    m = where(_made.isfinite(m), m, zeros_like(m))
    return m + ((input - m).exp() + (other - m).exp()).log()


def _logaddexp_complex(x, y):
    """PyTorch's complex logaddexp: the operand of the greater real part plus
    ``log1p(exp(lesser - greater))``, so the imaginary part is the greater's plus an angle
    in (-pi, pi] (not the principal value of ``log(exp(x) + exp(y))``); a NaN in either
    gives nan+nanj, two equal infinite real parts the lesser (-inf) or the plain formula."""
    nan_x, nan_y = x.real.isnan() | x.imag.isnan(), y.real.isnan() | y.imag.isnan()
    x_less = ~nan_y & (nan_x | (x.real < y.real))
    lo, hi = where(x_less, x, y), where(x_less, y, x)
    with np.errstate(all="ignore"):
        out = (lo - hi).exp().log1p() + hi
        both_inf = ~_made.isfinite(lo.real) & (lo.real == hi.real)
        out = where(both_inf, where(lo.real < 0, lo, (lo.exp() + hi.exp()).log()), out)
    return where(nan_x | nan_y, full_like(out, complex(math.nan, math.nan)), out)


def _log_add_operands(input, other, name):
    """logaddexp's operands in their common dtype, which must be floating (or complex
    for logaddexp): PyTorch has no integer kernel."""
    dt = result_type(input, other)
    if dt.category < 2 or (dt.category == 3 and name == "logaddexp2"):
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_torch_name(dt)}\'')
    return to_dtype(input, dt), to_dtype(other, dt)


def logaddexp2(input, other):
    """``log2(2**input + 2**other)``, computed without overflow.

    Examples
    --------
    >>> import torcia
    >>> torcia.logaddexp2(torcia.tensor([1.0, 100.0]), torcia.tensor([1.0, 100.0]))
    tensor([  2., 101.])
    """
    input, other = _log_add_operands(input, other, "logaddexp2")
    return logaddexp(input * math.log(2), other * math.log(2)) / math.log(2)


def heaviside(input, values):
    """0 where ``input < 0``, 1 where ``> 0``, ``values`` where it is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.heaviside(torcia.tensor([-1.0, 0.0, 2.0]), torcia.tensor(0.5))
    tensor([0.0000, 0.5000, 1.0000])
    """
    if input.dtype is not values.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different "
                           f"dtypes, got {input.dtype} and {values.dtype}")
    zero = zeros_like(input)
    return where(input == 0, values.to(input.dtype), (input > 0).to(input.dtype) + zero)


def copysign(input, other):
    """``|input|`` with the sign of ``other`` (sign bit, so -0.0 counts as negative).

    Examples
    --------
    >>> import torcia
    >>> torcia.copysign(torcia.tensor([1.0, -2.0]), torcia.tensor([-1.0, -0.0]))
    tensor([-1., -2.])
    """
    dt = result_type(input, other)
    if dt.category < 2:
        dt = D.get_default_dtype()
    _no_complex(dt, "copysign")
    mag = to_dtype(input, dt).abs()
    # the gradient flows to input only (PyTorch's: other's sign is piecewise constant)
    if not isinstance(other, Tensor):
        return -mag if math.copysign(1.0, other) < 0 else mag
    return where(_made.signbit(other), -mag, mag)


def ldexp(input, other):
    """``input * 2**other``.

    Examples
    --------
    >>> import torcia
    >>> torcia.ldexp(torcia.tensor([1.0, 3.0]), torcia.tensor([3, -1]))
    tensor([8.0000, 1.5000])
    """
    tensor_arg(other, "other")
    dt = result_type(input, other)
    if dt.category < 2:
        dt = D.get_default_dtype()
    return to_dtype(input, dt) * builtins.pow(2.0, to_dtype(other, dt))


def gcd(input, other):
    """Elementwise greatest common divisor of integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.gcd(torcia.tensor([12, 7]), torcia.tensor([18, 5]))
    tensor([6, 1])
    """
    tensor_arg(other, "other")
    a, b = _integer_operands("gcd", input, other)
    return _gcd(a, b)


def lcm(input, other):
    """Elementwise least common multiple of integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.lcm(torcia.tensor([4, 6]), torcia.tensor([6, 5]))
    tensor([12, 30])
    """
    tensor_arg(other, "other")
    a, b = _integer_operands("lcm", input, other)
    g = _gcd(a, b)
    # PyTorch's kernel computes abs(a / g * b) in C's promoted type: int8 and int16 in
    # int32, so the absolute value is taken before the wrap to the narrow type, not after
    dt = a.dtype
    wide = dt if dt.itemsize >= 4 else D.int32
    a, b, g = to_dtype(a, wide), to_dtype(b, wide), to_dtype(g, wide)
    product = (div(a, where(g == 0, 1, g), rounding_mode="trunc") * b).abs()
    return to_dtype(where(g == 0, 0, product), dt)


def isneginf(input):
    """Where ``input`` is minus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isneginf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([ True, False, False])
    """
    return _made.isinf(input) & (input < 0)


def isposinf(input):
    """Where ``input`` is plus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isposinf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([False,  True, False])
    """
    return _made.isinf(input) & (input > 0)


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


def rsub(input, other, *, alpha=1):
    """``other - alpha * input``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rsub(torcia.tensor([1, 2]), 10)
    tensor([9, 8])
    """
    return sub(other, input, alpha=alpha)


#: the dtypes PyTorch's integer kernels (shifts, gcd, lcm) take: bool and the wider unsigned
#: dtypes are refused
_INTEGER_KERNEL = (D.uint8, D.int8, D.int16, D.int32, D.int64)

#: Euclid's steps that suffice for any pair of a dtype (Lamé: n steps need a divisor of at
#: least the (n + 1)th Fibonacci number), with room for the first swap and |int min|
_EUCLID_STEPS = {D.uint8: 14, D.int8: 14, D.int16: 26, D.int32: 49, D.int64: 95}


def _integer_operands(name, input, other):
    """``input`` and ``other`` (either may be a number) in the dtype PyTorch promotes them
    to, which must be one that its integer kernel ``name`` takes; a number wraps into it as
    PyTorch's scalars do."""
    if not isinstance(input, Tensor):
        input = _as_operand(input, other)
    dt = result_type(input, other)
    if dt not in _INTEGER_KERNEL:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_torch_name(dt)}'")
    b = _operand_as(other, dt)
    if not isinstance(b, Tensor):
        b = tensor(b, dtype=dt, device=input.device)
    return to_dtype(input, dt).detach(), b.detach()


def _gcd(a, b):
    """Euclid's algorithm as PyTorch's kernel runs it (on absolute values, so int min, whose
    absolute value wraps to itself, stays negative), for a fixed number of steps: tensor ops
    with no data-dependent loop, so it runs on any device and under vmap."""
    a, b = broadcast_tensors(a.abs(), b.abs())
    for _ in range(_EUCLID_STEPS[a.dtype]):
        going = a != 0
        a, b = where(going, _made.fmod(b, where(going, a, 1)), a), where(going, a, b)
    return b


def _powers_of_two(dt, device):
    """``1 << k`` for each bit ``k`` of the integer dtype ``dt``, wrapped into it."""
    bits = dt.itemsize * 8
    signed = dt is not D.uint8
    return tensor([(1 << k) - (1 << bits if signed and k == bits - 1 else 0)
                     for k in range(bits)], dtype=dt, device=device)


def nextafter(input, other):
    """The next representable float after ``input`` towards ``other`` (no gradient).

    Examples
    --------
    >>> import torcia
    >>> torcia.nextafter(torcia.tensor([1.0]), torcia.tensor([2.0])) > 1
    tensor([True])
    """
    dt = result_type(input, other)
    if dt not in _PRECISION:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{_torch_name(dt)}'")
    # with tensor ops, not NumPy on the host (which has no bfloat16 loop): they run on the
    # meta device and under vmap. One ulp of a = m 2^e (0.5 <= |m| < 1) is 2^(e - p), half
    # that from a power of two towards zero, and never below the smallest subnormal.
    digits, min_exp, largest = _PRECISION[dt]
    a = to_dtype(input, dt).detach()
    b = to_dtype(other if isinstance(other, Tensor) else tensor(other, device=a.device),
                 dt).detach()
    a, b = broadcast_tensors(a, b)
    up = b > a
    m, e = frexp(a)
    halve = (m.abs() == 0.5) & ((a > 0) != up)
    exponent = (e.to(D.int64) - digits - halve.to(D.int64)).clamp(min=min_exp - digits + 1)
    step = exponent.to(D.float64).exp2().to(dt)
    with np.errstate(all="ignore"):  # the infinities and NaNs are replaced below
        out = a + where(up, step, -step)
        # -tiny + tiny is +0: the step to zero keeps a's sign, as the bit pattern's does
        out = where(out == 0, a * 0, out)
        tiny = full_like(a, math.ldexp(1.0, min_exp - digits + 1))
        out = where(a == 0, where(up, tiny, -tiny), out)
        out = where(a.isinf(), a.sign() * largest, out)
        out = where(a == b, b, out)
        return where(a.isnan() | b.isnan(), a + b, out).to(dt)


#: (significand digits, least normal exponent, largest finite value) of the floating dtypes
_PRECISION = {D.float16: (11, -14, 65504.0), D.bfloat16: (8, -126, 3.3895313892515355e38),
              D.float32: (24, -126, 3.4028234663852886e38),
              D.float64: (53, -1022, 1.7976931348623157e308)}


def bitwise_left_shift(input, other):
    """``input << other`` on integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.bitwise_left_shift(torcia.tensor([1, 3]), 2)
    tensor([ 4, 12])
    """
    a, b = _integer_operands("lshift", input, other)
    # PyTorch's kernel shifts unsigned: an amount that is negative or past the width gives 0
    bits = a.dtype.itemsize * 8
    n = to_dtype(b, D.int64)
    shifted = a * _powers_of_two(a.dtype, a.device)[n.clamp(0, bits - 1)]
    return where((n >= 0) & (n < bits), shifted, 0)


def bitwise_right_shift(input, other):
    """``input >> other`` on integer tensors (arithmetic for signed ones).

    Examples
    --------
    >>> import torcia
    >>> torcia.bitwise_right_shift(torcia.tensor([8, -8]), 2)
    tensor([ 2, -2])
    """
    a, b = _integer_operands("rshift", input, other)
    # PyTorch's kernel: an amount that is negative or at least the width less the sign bit
    # shifts by that, which leaves the sign (0 or -1; 0 for uint8)
    last = a.dtype.itemsize * 8 - (a.dtype is not D.uint8)
    n = to_dtype(b, D.int64)
    shifted = div(a, _powers_of_two(a.dtype, a.device)[n.clamp(0, last - 1)],
                  rounding_mode="floor")
    return where((n >= 0) & (n < last), shifted, -(a < 0).to(a.dtype))


_Frexp = _return_type("frexp", ("mantissa", "exponent"))


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


def float_power_(self, exponent):
    """In-place :func:`torcia.float_power`; ``self`` must be float64 (complex128 for a
    complex result), the dtype the operation computes in."""
    want = D.complex128 if (self.is_complex() or (isinstance(exponent, Tensor)
                                                   and exponent.is_complex())
                            or isinstance(exponent, complex)) else D.float64
    if self.dtype is not want:
        raise RuntimeError(f"the base given to float_power_ has dtype "
                           f"{_torch_name(self.dtype)} but the operation's result "
                           f"requires dtype {_torch_name(want)}")
    return inplace(float_power, self, exponent)


#: the functions here that are also Tensor methods, under the same name: the declared ops'
#: and these
METHODS = tuple(vars(_made)) + (
    "equal", "isclose", "allclose", "divide", "true_divide", "multiply", "subtract",
    "float_power", "float_power_",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = tuple(name for name, op in DECLARED.items() if name in vars(_made) and op.inplace) + (
    "multiply", "subtract", "divide", "true_divide",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "positive", "deg2rad", "rad2deg", "logaddexp", "logaddexp2", "heaviside", "copysign",
    "ldexp", "gcd", "lcm", "isneginf", "isposinf", "isreal", "nextafter",
    "bitwise_left_shift", "bitwise_right_shift", "frexp",
)

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = (
    "deg2rad", "rad2deg", "copysign", "ldexp", "gcd", "lcm", "heaviside", "nextafter",
    "bitwise_left_shift", "bitwise_right_shift",
)

#: the names ``torcia`` exports from here: every public function defined above, the
#: generated ones included
__all__ = [
    _n for _n, _v in list(globals().items())
    if not _n.startswith("_") and callable(_v)
    and getattr(_v, "__module__", "") in (__name__, _unary_ops.__name__, _binary_ops.__name__)
    and _n != "float_power_"  # a Tensor method only, as in PyTorch
] + ["to_dtype"]  # defined in _common, below the families that all use it
