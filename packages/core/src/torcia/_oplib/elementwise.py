"""Element-wise ops: the generated unary, binary and comparison functions
(``torcia.exp``, ``torcia.mul``, ``torcia.eq``...) and the ones with their own arguments
(``add``'s ``alpha``, ``clamp``, ``where``, ``lerp``, ``addcmul``, ``logaddexp``, ``frexp``...).
"""

from __future__ import annotations

import builtins
import math
import numbers
import warnings

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia import ops as _oplist
from torcia._creation import tensor
from torcia._oplib._common import _example, _operand_as, _return_type, _tname, _to_float
from torcia._tensor import (
    Tensor,
    _as_operand,
    _cpp_name,
    _torch_name,
    binary,
    call,
    inplace,
    result_type,
    unary,
)


def _tensor_arg(x, name="input") -> Tensor:
    if isinstance(x, Tensor):
        return x
    raise TypeError(f"argument '{name}' must be Tensor, not {type(x).__name__}")


def _make_unary(name, to_float):
    def fn(input):
        return unary(name, input, to_float)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of ``input``." + (
        " Integer inputs give the default float dtype." if to_float else ""
    ) + _example(name)
    return fn


def _make_binary(name, float_op):
    def fn(input, other):
        return binary(name, input, other, float_op)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Elementwise ``{name}`` with broadcasting and PyTorch's type promotion."
                  + _example(name))
    return fn


def _make_compare(name):
    def fn(input, other):
        return binary(name, input, other)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` comparison; returns a bool tensor." + _example(name)
    return fn


_g = globals()


for _n in _oplist.UNARY_FLOAT:
    _g[_n] = _make_unary(_n, True)


for _n in _oplist.UNARY_SAME + _oplist.UNARY_BOOL:
    _g[_n] = _make_unary(_n, False)


for _n in _oplist.BINARY + ("atan2", "hypot", "xlogy"):
    _g[_n] = _make_binary(_n, _n in _oplist.BINARY_FLOAT)


for _n in _oplist.COMPARE:
    _g[_n] = _make_compare(_n)


# named here for the functions below (and for linters); the loops above made them
mul, maximum, minimum = _g["mul"], _g["maximum"], _g["minimum"]
isfinite, isinf, signbit = _g["isfinite"], _g["isinf"], _g["signbit"]


def _scalar_first(op: str, value, rest: tuple, names: str):
    """PyTorch's deprecated overloads that take the scalar first, still accepted with its
    warning: ``add(x, 2, y)`` for ``add(x, y, alpha=2)``, ``addcmul(x, 0.5, a, b)`` for
    ``addcmul(x, a, b, value=0.5)``. Returns ``rest`` (the tensors)."""
    if isinstance(value, Tensor) or not isinstance(value, numbers.Number):
        raise TypeError(f"{op}() received an invalid combination of arguments: the "
                        f"deprecated overload {op}(Number, {names}) takes a number first, "
                        f"got {type(value).__name__}")
    keyword = "alpha" if op in ("add", "sub") else "value"
    warnings.warn(f"This overload of {op} is deprecated:\n\t{op}(Number {keyword}, "
                  f"{names})\nConsider using one of the following signatures instead:\n\t"
                  f"{op}({names}, *, Number {keyword} = 1)", UserWarning, stacklevel=3)
    return rest


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
        alpha, (other,) = other, _scalar_first("add", other, deprecated, "Tensor other")
    if alpha != 1:
        other = mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return binary("add", input, other)


def sub(input, other, *deprecated, alpha=1):
    """``input - alpha * other`` with broadcasting.

    Examples
    --------
    >>> import torcia
    >>> torcia.sub(torcia.tensor([5, 6]), torcia.tensor([1, 2]), alpha=2)
    tensor([3, 2])
    """
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
        alpha, (other,) = other, _scalar_first("sub", other, deprecated, "Tensor other")
    if alpha != 1:
        other = mul(other, alpha) if isinstance(other, Tensor) else other * alpha
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


def pow(input, exponent):
    """``input ** exponent`` elementwise; either may be a number.

    Examples
    --------
    >>> import torcia
    >>> torcia.pow(torcia.tensor([1, 2, 3]), 2)
    tensor([1, 4, 9])
    >>> torcia.pow(2, torcia.tensor([1.0, 0.5]))
    tensor([2.0000, 1.4142])
    """
    return binary("pow", input, exponent)


def float_power(input, exponent):
    """``input ** exponent`` computed in double precision (float64, or complex128).

    Examples
    --------
    >>> import torcia
    >>> torcia.float_power(torcia.tensor([2, 3]), 2)
    tensor([4., 9.], dtype=torcia.float64)
    """
    dt = D.complex128 if result_type(input, exponent).category == 3 else D.float64
    return pow(to_dtype(input, dt) if isinstance(input, Tensor) else input,
               to_dtype(exponent, dt) if isinstance(exponent, Tensor) else exponent)


def round(input, *, decimals=0):
    """Round half to even, as PyTorch; ``decimals`` places.

    Examples
    --------
    >>> import torcia
    >>> torcia.round(torcia.tensor([0.5, 1.5, 2.567]))
    tensor([0., 2., 3.])
    >>> torcia.round(torcia.tensor([2.567]), decimals=2)
    tensor([2.5700])
    """
    return call("round", (input,), {"decimals": int(decimals)})


def clamp(input, min=None, max=None):
    """Limit values to [min, max]; either bound may be None, a number or a tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.clamp(torcia.tensor([-2.0, 0.5, 3.0]), min=-1, max=1)
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    dt = result_type(input, min, max)
    x = input if input.dtype is dt else input.to(dt)
    return call("clamp", (x, _operand_as(min, dt), _operand_as(max, dt)), {})


clip = clamp


def clamp_min(input, min):
    """``input`` clamped from below at ``min``.

    Examples
    --------
    >>> import torcia
    >>> torcia.clamp_min(torcia.tensor([1, 5, 9]), 4)
    tensor([4, 5, 9])
    """
    return clamp(input, min=min)


def clamp_max(input, max):
    """``input`` clamped from above at ``max``.

    Examples
    --------
    >>> import torcia
    >>> torcia.clamp_max(torcia.tensor([1, 5, 9]), 4)
    tensor([1, 4, 4])
    """
    return clamp(input, max=max)


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
    return bool(binary("eq", input, other).all().item())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (NaNs equal when asked).

    Examples
    --------
    >>> import torcia
    >>> torcia.isclose(torcia.tensor([1.0, 1.1]), torcia.tensor([1.0 + 1e-7, 1.0]))
    tensor([ True, False])
    """
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


def where(condition, input=None, other=None):
    """Choose from ``input`` where ``condition`` holds, else from ``other``.

    With only ``condition``, the indices where it holds (as ``nonzero(as_tuple=True)``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-1.0, 2.0, -3.0])
    >>> torcia.where(x > 0, x, torcia.zeros(3))
    tensor([0., 2., 0.])
    >>> torcia.where(x > 0)
    (tensor([1]),)
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if condition.dtype is not D.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a "
                           f"tensor with dtype {condition.dtype.name}")
    ref = input if isinstance(input, Tensor) else other
    if not isinstance(ref, Tensor):
        ref = condition
        dt = D.result_type_of((), (), [D.scalar_dtype(input), D.scalar_dtype(other)])
    else:
        tens = [t for t in (input, other) if isinstance(t, Tensor)]
        dt = D.result_type_of(
            [t.dtype for t in tens if t.ndim], [t.dtype for t in tens if not t.ndim],
            [D.scalar_dtype(s) for s in (input, other) if not isinstance(s, Tensor)],
        )
    a = _cast_operand(input, dt, condition)
    b = _cast_operand(other, dt, condition)
    return call("where", (condition, a, b), {})


def _cast_operand(x, dt, like):
    if isinstance(x, Tensor):
        return x if x.dtype is dt else x.to(dt)
    return tensor(x, dtype=dt, device=like.device)


def lerp(input, end, weight):
    """``input + weight * (end - input)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.lerp(torcia.tensor([0.0, 10.0]), torcia.tensor([10.0, 20.0]), 0.25)
    tensor([ 2.5000, 12.5000])
    """
    _tensor_arg(end, "end")
    for name, other in (("end", end), ("weight", weight)):
        if isinstance(other, Tensor) and other.dtype is not input.dtype and (
                name == "end" or other.ndim):
            raise RuntimeError(f"expected dtype {_cpp_name(input.dtype)} for `{name}` but got "
                               f"dtype {_cpp_name(other.dtype)}")
    if input.dtype.category < 2:
        kind = "tensor" if isinstance(weight, Tensor) else "scalar"
        raise NotImplementedError(f'"lerp_kernel_{kind}" not implemented for '
                                  f"'{_tname(input.dtype)}'")
    return call("lerp", (input, end, _operand_as(weight, input.dtype)), {})


def _pointwise3(name, input, tensor1, tensor2, value):
    """addcmul/addcdiv: the three tensors promoted together, ``value`` cast to their dtype."""
    _tensor_arg(tensor1, "tensor1")
    _tensor_arg(tensor2, "tensor2")
    dt = result_type(input, tensor1, tensor2)
    if name == "addcdiv" and tensor1.dtype.category < 2 and tensor2.dtype.category < 2:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic "
            "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
            "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
            "tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    if dt is D.bool_:
        raise NotImplementedError(f'"{name}_cpu_out" not implemented for \'Bool\'')
    return call(name, tuple(_operand_as(t, dt) for t in (input, tensor1, tensor2)),
                {"value": _operand_as(value, dt)})


def addcmul(input, tensor1, tensor2, *deprecated, value=1):
    """``input + value * tensor1 * tensor2``.

    Examples
    --------
    >>> import torcia
    >>> x, a, b = torcia.tensor([1.0, 1.0]), torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0])
    >>> torcia.addcmul(x, a, b, value=0.5)
    tensor([2.5000, 5.0000])
    """
    if deprecated:
        value, (tensor1, tensor2) = tensor1, _scalar_first(
            "addcmul", tensor1, (tensor2, *deprecated), "Tensor tensor1, Tensor tensor2")
    return _pointwise3("addcmul", input, tensor1, tensor2, value)


def addcdiv(input, tensor1, tensor2, *deprecated, value=1):
    """``input + value * tensor1 / tensor2``.

    Examples
    --------
    >>> import torcia
    >>> x, a, b = torcia.tensor([1.0, 1.0]), torcia.tensor([1.0, 4.0]), torcia.tensor([2.0, 2.0])
    >>> torcia.addcdiv(x, a, b, value=2)
    tensor([2., 5.])
    """
    if deprecated:
        value, (tensor1, tensor2) = tensor1, _scalar_first(
            "addcdiv", tensor1, (tensor2, *deprecated), "Tensor tensor1, Tensor tensor2")
    return _pointwise3("addcdiv", input, tensor1, tensor2, value)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """``input`` with NaN, inf and -inf replaced by ``nan``, ``posinf`` and ``neginf``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([float("nan"), float("inf"), -1.0])
    >>> torcia.nan_to_num(x, posinf=100.0)
    tensor([  0., 100.,  -1.])
    """
    return call("nan_to_num", (input,), {"nan": nan, "posinf": posinf, "neginf": neginf})


def to_dtype(input, dtype) -> Tensor:
    """A copy of ``input`` in ``dtype`` (or ``input`` itself when already so).

    Examples
    --------
    >>> import torcia
    >>> torcia.to_dtype(torcia.tensor([1.7, -1.7]), torcia.int64)
    tensor([ 1, -1])
    """
    if input.dtype is dtype:
        return input
    return call("cast", (input,), {"dtype": dtype.to_numpy()})


def multiply(input, other):
    """``input * other`` with broadcasting (an alias of :func:`mul`).

    Examples
    --------
    >>> import torcia
    >>> torcia.multiply(torcia.tensor([1, 2]), torcia.tensor([[3], [4]]))
    tensor([[3, 6],
            [4, 8]])
    """
    return binary("mul", input, other)


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
    # shifted by the greater (real part), which sets the magnitude
    m = maximum(input.real, other.real).detach() if input.is_complex() else \
        maximum(input, other).detach()
    m = where(isfinite(m), m, C.zeros_like(m))
    return m + ((input - m).exp() + (other - m).exp()).log()


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
    zero = C.zeros_like(input)
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
    return where(signbit(other), -mag, mag)


def ldexp(input, other):
    """``input * 2**other``.

    Examples
    --------
    >>> import torcia
    >>> torcia.ldexp(torcia.tensor([1.0, 3.0]), torcia.tensor([3, -1]))
    tensor([8.0000, 1.5000])
    """
    _tensor_arg(other, "other")
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
    _tensor_arg(other, "other")
    return _host_binary(np.gcd, "gcd", input, other, "iu")


def lcm(input, other):
    """Elementwise least common multiple of integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.lcm(torcia.tensor([4, 6]), torcia.tensor([6, 5]))
    tensor([12, 30])
    """
    _tensor_arg(other, "other")
    return _host_binary(np.lcm, "lcm", input, other, "iu")


def isneginf(input):
    """Where ``input`` is minus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isneginf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([ True, False, False])
    """
    return isinf(input) & (input < 0)


def isposinf(input):
    """Where ``input`` is plus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isposinf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([False,  True, False])
    """
    return isinf(input) & (input > 0)


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
    return C.ones(*input.shape, dtype=D.bool_, device=input.device)


def rsub(input, other, *, alpha=1):
    """``other - alpha * input``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rsub(torcia.tensor([1, 2]), 10)
    tensor([9, 8])
    """
    return sub(other, input, alpha=alpha)


def nan_to_num_(input, nan=0.0, posinf=None, neginf=None):
    """In-place :func:`nan_to_num`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([float("nan"), 1.0])
    >>> torcia.nan_to_num_(x, nan=-1.0)
    tensor([-1.,  1.])
    """
    return input.nan_to_num_(nan=nan, posinf=posinf, neginf=neginf)


def _host_binary(fn, name, input, other, kinds):
    """``fn`` (a NumPy function) of two operands on the host, in their dtype as PyTorch
    promotes them, which must be of a NumPy kind in ``kinds`` (else PyTorch's refusal of
    its kernel ``name``); the result is not differentiable."""
    dt = result_type(input, other)
    if dt.to_numpy().kind not in kinds:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_torch_name(dt)}'")
    a = to_dtype(input, dt).detach().cpu().numpy()
    b = to_dtype(other, dt).detach().cpu().numpy() if isinstance(other, Tensor) else \
        np.asarray(D.checked_scalar(other, dt), dtype=dt.np)
    return C.tensor(np.asarray(fn(a, b)).astype(dt.np, copy=False), device=input.device)


def nextafter(input, other):
    """The next representable float after ``input`` towards ``other`` (no gradient).

    Examples
    --------
    >>> import torcia
    >>> torcia.nextafter(torcia.tensor([1.0]), torcia.tensor([2.0])) > 1
    tensor([True])
    """
    return _host_binary(np.nextafter, "nextafter", input, other, "f")


def bitwise_left_shift(input, other):
    """``input << other`` on integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.bitwise_left_shift(torcia.tensor([1, 3]), 2)
    tensor([ 4, 12])
    """
    return _host_binary(np.left_shift, "lshift", input, other, "iu")


def bitwise_right_shift(input, other):
    """``input >> other`` on integer tensors (arithmetic for signed ones).

    Examples
    --------
    >>> import torcia
    >>> torcia.bitwise_right_shift(torcia.tensor([8, -8]), 2)
    tensor([ 2, -2])
    """
    return _host_binary(np.right_shift, "rshift", input, other, "iu")


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
    m, e = np.frexp(input.detach().cpu().numpy())
    return _Frexp(C.tensor(m, device=input.device),
                  C.tensor(e.astype(np.int32), device=input.device))


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


#: the functions here that are also Tensor methods, under the same name
METHODS = (
    _oplist.UNARY_FLOAT + _oplist.UNARY_SAME + _oplist.UNARY_BOOL + _oplist.BINARY + _oplist.COMPARE
    + (
        "equal", "isclose", "allclose", "div", "divide", "true_divide", "multiply", "subtract",
        "atan2", "hypot", "xlogy", "float_power", "round", "clamp", "clip", "clamp_min",
        "clamp_max", "lerp", "addcmul", "addcdiv", "nan_to_num", "float_power_",
    )
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = (
    _oplist.UNARY_FLOAT + _oplist.BINARY + _oplist.COMPARE
    + (
        "neg", "abs", "sign", "square", "floor", "ceil", "trunc", "frac", "relu", "bitwise_not",
        "logical_not", "div", "atan2", "hypot", "xlogy", "clamp", "clip", "clamp_min",
        "clamp_max", "lerp", "addcmul", "addcdiv", "nan_to_num", "round", "multiply",
        "subtract", "divide", "true_divide",
    )
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
    if not _n.startswith("_") and callable(_v) and getattr(_v, "__module__", "") == __name__
    and _n != "float_power_"  # a Tensor method only, as in PyTorch
]


# the other families, bound once this one has loaded (they may import it first)
from torcia._oplib.complex_numbers import imag
from torcia._oplib.indexing import nonzero
