"""The elementwise ops of two inputs, broadcast and promoted together, each declared once:
schema, reference kernel, meta shape, decomposition, autocast policy, the dtypes it
refuses. :data:`torcia.ops.BINARY` (results in the promoted dtype), ``BINARY_FLOAT``
(floating results) and ``COMPARE`` (bool results); their kernels and decompositions are
written as those of the ops of one input, :mod:`torcia._ops.unary`'s (``xp.add`` itself,
or a method of the reference backend; Tensor methods only; ``decomposed_sub``...). Their
public functions are made here from the declarations (:data:`MADE`), but for ``add`` and
``sub`` (``alpha``) and ``div`` (``rounding_mode``), written after them with the functions
of two inputs of no op of their own (``isclose``, ``logaddexp``, ``gcd``, the shifts,
``nextafter``...); they dispatch late-bound, this module being below the Tensor class
(:data:`torcia._opdef.BINARY`, ``CALL``, ``PUBLIC``). ``torcia`` exports ``__all__``,
:mod:`torcia._oplib` registering the module as a family; their derivatives are
torcia-autograd's.
"""

from __future__ import annotations

import builtins
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
    fused_multiply_add,
    no_kernel,
    operand_as,
    opmath,
)
from torcia._ops._common import refuse as _refuse
from torcia._ops._common import where as _where
from torcia._ops.creation import full_like, zeros_like
from torcia._ops.pointwise import scalar_first, tensor_arg, to_dtype, where
from torcia._ops.unary import (
    CUDA_FLOAT32,
    declared_fields,
    decomposed_logical_not,
    frexp,
    integers_only,
    isfinite,
    public_function,
    refuse_complex_dtype,
    signbit,
)
from torcia._ops.views import broadcast_tensors

# ----- reference kernels -----------------------------------------------------------------


class IntegerDivisionByZero(RuntimeError, ZeroDivisionError):
    """An integer division by zero: PyTorch raises RuntimeError("ZeroDivisionError"), and
    Python code expects ZeroDivisionError; this is both."""


def _scaled(xp, a, b, alpha, out):
    """``a + alpha * b`` (``alpha`` negated for sub): PyTorch's CPU kernels take ``alpha``
    in the result's dtype and fuse the multiply-add for real floats (float16 and bfloat16
    in float32), one rounding; other dtypes multiply, then add (exact for integers and
    bools, where it is an "or" of an "and")."""
    dt = xp.result_type(a, b)
    if xp is np and D.np_floating(dt):
        result = fused_multiply_add(np.asarray(b, dt), dt.type(alpha), a)
    elif dt.kind == "b":
        result = xp.logical_or(a, xp.logical_and(b, bool(alpha)))
    else:
        result = xp.add(a, xp.multiply(b, xp.asarray(alpha).astype(dt)))
    if out is None:
        return result
    out[...] = result
    return out


def _check_divisor(xp, a, b) -> None:
    # NumPy returns 0 for an integer division by zero (with a warning at most); PyTorch's
    # CPU kernels raise
    if xp.result_type(a, b).kind in "iub" and not xp.all(b):
        raise IntegerDivisionByZero("ZeroDivisionError")


class Kernels:
    """The reference kernels that are more than one array-module function (see the
    module's doc)."""

    def add(self, a, b, alpha=1, out=None):
        return self.xp.add(a, b, out=out) if alpha == 1 else _scaled(self.xp, a, b, alpha, out)

    def sub(self, a, b, alpha=1, out=None):
        if alpha == 1:
            return self.xp.subtract(a, b, out=out)
        return _scaled(self.xp, a, b, -alpha, out)

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

    def div(self, a, b, rounding_mode=None, out=None):
        xp = self.xp
        if rounding_mode is None:
            return xp.true_divide(a, b, out=out)
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

def decomposed_bitwise_or(a, b):
    integers_only("bitwise_or", a, b)
    # exact: the bits set in one of them, and those set in both (disjoint, so xor adds them)
    return a.bitwise_xor(b).bitwise_xor(a.bitwise_and(b))


def decomposed_floor_divide(a, b):
    _refuse(_FLOOR_DIVIDE, a)
    # the division kernel's floor mode is the same NumPy floor division (and the same
    # error for an integer divisor of 0)
    return a.div(b, rounding_mode="floor")


def decomposed_minimum(a, b):
    _refuse_complex(_MINIMUM, a, b)
    # exact, NaN kept: the maximum of the order-reversed values (which keeps the reference
    # kernel's choice between equal values, such as 0.0 and -0.0: the second)
    if hasattr(b, "dtype") and b.dtype != a.dtype:  # ~ and - before promotion would differ
        dt = D.promote_types(a.dtype, b.dtype)
        a, b = a.to(dt), b.to(dt)
    if a.is_floating_point():
        return -(-a).maximum(-b)
    return ~(~a).maximum(~b)


def decomposed_remainder(a, b):
    _refuse(_REMAINDER, a)
    if not hasattr(b, "dtype"):
        b = a.new_full((), b)
    # the reference kernel's: fmod (which refuses an integer division by zero) moved into
    # the divisor's sign, so an exact 0 keeps the dividend's; integers' floor modulus alike
    out = a.fmod(b)
    return _where((out != 0).bitwise_and((out < 0) != (b < 0)), out + b, out)


def decomposed_hypot(a, b):
    _refuse_complex(_HYPOT, a, b)
    # the larger side times sqrt(1 + r^2), r = smaller / larger: nothing overflows; an
    # infinite side gives inf beside NaN too
    x, y = a.abs(), b.abs()
    big, small = x.maximum(y), x.minimum(y)
    r = small / _where(big == 0, big.new_ones(()), big)
    out = big * (1 + r * r).sqrt()
    return _where((x == math.inf).bitwise_or(y == math.inf), out.new_full((), math.inf), out)


def decomposed_sub(a, b, alpha=1):
    # exact: IEEE subtraction is the addition of the negation (signed zeros included), and
    # integers wrap alike
    return a + (-b) if alpha == 1 else a.add(b, alpha=-alpha)


def decomposed_fmax(a, b):
    _refuse_complex(_FMAX, a, b)
    return _where(b.isnan(), a, _where(a.isnan(), b, a.maximum(b)))


def decomposed_fmin(a, b):
    _refuse_complex(_FMIN, a, b)
    return _where(b.isnan(), a, _where(a.isnan(), b, a.minimum(b)))


@opmath
def decomposed_xlogy(a, b):
    _refuse_complex(_XLOGY, a, b)
    # 0 * log(y) is 0 unless y is NaN
    return _where((a == 0).bitwise_and(b == b), a.new_zeros(()), a * b.log())


def decomposed_gt(a, b):
    _refuse_complex(_GT, a, b)
    return b < a


def decomposed_le(a, b):
    _refuse_complex(_LE, a, b)
    return (a < b).bitwise_or(a == b)


def decomposed_ge(a, b):
    _refuse_complex(_GE, a, b)
    return b <= a


def decomposed_ne(a, b):
    return decomposed_logical_not(a == b)


# bitwise on bools: ``&`` would dispatch logical_and again
def decomposed_logical_and(a, b):
    return (a != 0).bitwise_and(b != 0)


def decomposed_logical_or(a, b):
    return (a != 0).bitwise_or(b != 0)


def decomposed_logical_xor(a, b):
    return (a != 0) != (b != 0)


# ----- the declarations ------------------------------------------------------------------


def _binary(name, kernel, other="other", params="", **fields):
    """An op of ``BINARY``: two inputs broadcast and promoted together (``other`` the name
    of the second, ``exponent`` for pow; ``params``: the schema's keyword-only ones)."""
    return define(f"{name}(Tensor input, Tensor {other}{params}) -> Tensor", kernel,
                  shape=broadcast, group="binary", **declared_fields(**fields))


def _binary_float(name, kernel, params="", **fields):
    """An op of ``BINARY_FLOAT``: floating inputs (the public function promotes integers);
    ``params``: the schema's keyword-only parameters."""
    return define(f"{name}(Tensor input, Tensor other{params}) -> Tensor", kernel,
                  shape=broadcast, floating_inputs=True, group="binary_float",
                  **declared_fields(**fields))


def _compare(name, kernel, **fields):
    """An op of ``COMPARE``: a bool result, which carries no gradient."""
    return define(f"{name}(Tensor input, Tensor other) -> Tensor", kernel, shape=bool_like,
                  differentiable=False, group="compare", **declared_fields(**fields))


#: in the order of :data:`torcia.ops.BINARY`, ``BINARY_FLOAT`` and ``COMPARE``
DECLARED = (
    _binary("add", Kernels.add, params=", *, Scalar alpha=1",
            inplace_example=("[1, 2]", "torcia.tensor([10, 20])", "tensor([11, 22])"),
            tags=("masked", "nested", "foreach"),
            operator="add"),
    _binary("sub", Kernels.sub, params=", *, Scalar alpha=1", decomposition=decomposed_sub,
            inplace_example=("[5, 7]", "torcia.tensor([1, 2])", "tensor([4, 5])"),
            tags=("masked", "nested", "foreach"),
            operator="sub"),
    _binary("mul", ArrayFunction("multiply"),
            example=("[2, 3]", "[4, 5]", "tensor([ 8, 15])"),
            tags=("masked", "nested", "foreach"),
            operator="mul"),
    # an integer result: no gradient
    _binary("floor_divide", Kernels.floor_divide, decomposition=decomposed_floor_divide,
            differentiable=False, refuses=_FLOOR_DIVIDE,
            example=("[7, -7]", "2", "tensor([ 3, -4])"),
            tags=("masked",),
            operator="floordiv"),
    _binary("remainder", Kernels.remainder, decomposition=decomposed_remainder, refuses=_REMAINDER,
            example=("[7, -7]", "3", "tensor([1, 2])"),
            tags=("masked",),
            operator="mod"),
    _binary("fmod", Kernels.fmod, refuses=_no_bool_or_complex("fmod_cpu"),
            example=("[7, -7]", "3", "tensor([ 1, -1])"),
            tags=("masked",)),
    _binary("pow", Kernels.pow, autocast=CUDA_FLOAT32,
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
    _binary("minimum", ArrayFunction("minimum"), decomposition=decomposed_minimum, refuses=_MINIMUM,
            example=("[1, 5]", "[3, 2]", "tensor([1, 2])"),
            tags=("masked", "nested", "foreach")),
    _binary("bitwise_and", ArrayFunction("bitwise_and"), differentiable=False,
            example=("[12, 10]", "[10, 6]", "tensor([8, 2])"),
            tags=("masked",),
            operator="and"),
    _binary("bitwise_or", ArrayFunction("bitwise_or"), decomposition=decomposed_bitwise_or,
            differentiable=False,
            example=("[12, 10]", "[10, 6]", "tensor([14, 14])"),
            tags=("masked",),
            operator="or"),
    _binary("bitwise_xor", ArrayFunction("bitwise_xor"), differentiable=False,
            example=("[12, 10]", "[10, 6]", "tensor([ 6, 12])"),
            tags=("masked",),
            operator="xor"),
    _binary("fmax", ArrayFunction("fmax"), decomposition=decomposed_fmax, refuses=_FMAX,
            example=('[1.0, float("nan")]', "[2.0, 3.0]", "tensor([2., 3.])"),
            tags=("masked",)),
    _binary("fmin", ArrayFunction("fmin"), decomposition=decomposed_fmin, refuses=_FMIN,
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
    _binary_float("hypot", ArrayFunction("hypot"), decomposition=decomposed_hypot, refuses=_HYPOT,
                  example=("[3.0, 5.0]", "[4.0, 12.0]", "tensor([ 5., 13.])")),
    _binary_float("xlogy", Kernels.xlogy, decomposition=decomposed_xlogy, refuses=_XLOGY,
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
    _compare("ne", ArrayFunction("not_equal"), decomposition=decomposed_ne,
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
    _compare("le", ArrayFunction("less_equal"), decomposition=decomposed_le, refuses=_LE,
             example=("[1, 2, 3]", "2", "tensor([ True,  True, False])"),
             inplace_example=("[1.0, 2.0, 3.0]", "2", "tensor([1., 1., 0.])"),
             aliases=("less_equal",),
             tags=("masked",),
             operator="le"),
    _compare("gt", ArrayFunction("greater"), decomposition=decomposed_gt, refuses=_GT,
             example=("[1, 2, 3]", "2", "tensor([False, False,  True])"),
             inplace_example=("[1.0, 2.0, 3.0]", "2", "tensor([0., 0., 1.])"),
             aliases=("greater",),
             tags=("masked",),
             operator="gt"),
    _compare("ge", ArrayFunction("greater_equal"), decomposition=decomposed_ge, refuses=_GE,
             example=("[1, 2, 3]", "2", "tensor([False,  True,  True])"),
             inplace_example=("[1.0, 2.0, 3.0]", "2", "tensor([0., 1., 1.])"),
             aliases=("greater_equal",),
             tags=("masked",),
             operator="ge"),
    _compare("logical_and", ArrayFunction("logical_and"), decomposition=decomposed_logical_and,
             example=("[0, 1, 2]", "[1, 1, 0]", "tensor([False,  True, False])"),
             inplace_example=("[0, 1, 2]", "torcia.tensor([1, 1, 0])", "tensor([0, 1, 0])")),
    _compare("logical_or", ArrayFunction("logical_or"), decomposition=decomposed_logical_or,
             example=("[0, 1, 2]", "[1, 0, 0]", "tensor([True, True, True])"),
             inplace_example=("[0, 1, 2]", "torcia.tensor([1, 0, 0])", "tensor([1, 1, 1])")),
    _compare("logical_xor", ArrayFunction("logical_xor"), decomposition=decomposed_logical_xor,
             example=("[0, 1, 2]", "[1, 1, 0]", "tensor([ True, False,  True])"),
             inplace_example=("[0, 1, 2]", "torcia.tensor([1, 1, 0])", "tensor([1, 0, 1])")),
)



# ----- the public functions --------------------------------------------------------------


#: ``_dispatch(name, input, other, float_op=False)``: ``torcia._tensor.binary``, this module
#: being below the Tensor class, bound on first call (then one global)
_dispatch = _opdef.bind_on_first_call(globals(), "_dispatch", lambda: _opdef.BINARY)


def _binary_function(name, float_op):
    def fn(input, other):
        return _dispatch(name, input, other, float_op)

    return fn


#: the first line of each group's docstring, and whether the op computes in floating point
_KINDS = {
    "binary": ("Elementwise ``{}`` with broadcasting and PyTorch's type promotion.", False),
    "binary_float": ("Elementwise ``{}`` with broadcasting and PyTorch's type promotion.",
                     True),
    "compare": ("Elementwise ``{}`` comparison; returns a bool tensor.", False),
}

#: the public functions made from the declarations here, by name
MADE = {op.name: public_function(op, _binary_function(op.name, _KINDS[op.group][1]),
                                 _KINDS[op.group][0]) for op in DECLARED}
globals().update(MADE)


# ----- the public functions with their own arguments (add's alpha, div's rounding_mode),
# which replace the made ones' globals, and those of no op of their own (isclose, gcd...)


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
    if alpha != 1 or alpha.__class__ is bool:
        dt = _alpha_checked(input, other, alpha)
        out = _scaled_call("add", input, other, alpha, dt)
        if out is not None:
            return out
        if dt is D.bool_:
            alpha = builtins.bool(alpha)  # bools add as "or": a or (b and alpha)
        other = MADE["mul"](other, alpha) if isinstance(other, _opdef.PUBLIC.Tensor) else \
            other * alpha
    return _dispatch("add", input, other)


def _strided(v) -> bool:
    """A number or a tensor of the strided layout (a sparse one adds by its own rules)."""
    return not isinstance(v, _opdef.PUBLIC.Tensor) or v.layout is _opdef.PUBLIC.strided


def _scaled_call(op, input, other, alpha, dt):
    """``input op alpha * other`` of real floating dtype ``dt``: the op with its ``alpha``,
    one rounding, as PyTorch's fused kernels; None where the caller multiplies and then
    adds (other dtypes: exact for integers, complex numbers in PyTorch's two steps; other
    layouts; a device whose kernel takes no ``alpha``)."""
    if dt.category != 2 or not (_strided(input) and _strided(other)):
        return None
    Tensor = _opdef.PUBLIC.Tensor
    if not isinstance(input, Tensor):
        input = _opdef.TENSOR._as_operand(input, other)
    kernels = input._device.kernels
    kernel = kernels.get(op) if kernels is not None else None
    if kernel is not None and not _opdef.TENSOR.takes_param(kernel, "alpha"):
        return None
    if isinstance(other, Tensor) and other.dtype is not dt:
        other = other.to(dt)
    return _opdef.CALL(op, (input if input.dtype is dt else input.to(dt), other),
                       {"alpha": alpha})


def _alpha_checked(input, other, alpha):
    """The dtype of ``input + alpha * other``, ``alpha`` checked against it as PyTorch's
    ``alpha_check``: a bool alpha for bool results only, no float alpha beside integers
    (that would silently make a float result), no complex alpha beside reals."""
    dt = _opdef.RESULT_TYPE(input, other)
    if alpha.__class__ is bool and dt is not D.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if dt.category < 2 and not isinstance(alpha, (int, np.integer)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    if dt.category < 3 and isinstance(alpha, (complex, np.complexfloating)):
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a "
                           "complex number.")
    return dt


#: the Tensor class, bound by the first call of ``_not_bool`` (then :func:`_plain`): this
#: module is below it, and sub is too hot to look it up at each call
_Tensor = None


def _bound_plain():
    global _Tensor
    _Tensor = _opdef.PUBLIC.Tensor
    return _plain


_not_bool = _opdef.bind_on_first_call(globals(), "_not_bool", _bound_plain)


def _plain(v) -> bool:
    """Whether ``v`` is a plain tensor not of bool dtype, an int or a float (False: maybe
    a bool operand)."""
    return v.__class__ in (int, float) or v.__class__ is _Tensor and v._data.dtype.kind != "b"


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
        # a Python bool is a bool operand too (PyTorch wraps it as a bool tensor); _Tensor
        # is bound, by the calls above
        bools = builtins.sum(isinstance(v, bool) or isinstance(v, _Tensor) and v.dtype is D.bool_
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
    if alpha != 1 or alpha.__class__ is bool:
        dt = _alpha_checked(input, other, alpha)
        out = _scaled_call("sub", input, other, alpha, dt)
        if out is not None:
            return out
        other = MADE["mul"](other, alpha) if isinstance(other, _Tensor) else other * alpha
    return _dispatch("sub", input, other)


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
        return _dispatch("div", input, other, True)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found '{rounding_mode}'")
    if not isinstance(input, _opdef.PUBLIC.Tensor):
        input = _opdef.TENSOR._as_operand(input, other)
    if isinstance(other, _opdef.PUBLIC.Tensor):
        dt = D.result_type_of([t.dtype for t in (input, other) if t.ndim],
                              [t.dtype for t in (input, other) if not t.ndim], ())
        if other.dtype is not dt:
            other = other.to(dt)
    else:
        dt, operand = D.scalar_operand(input.dtype, other, "div")
        if operand is None:  # float16 or bfloat16 by a number: in float32, as PyTorch
            return div(input.float(), other, rounding_mode=rounding_mode).to(dt)
    a = input if input.dtype is dt else input.to(dt)
    return _opdef.CALL("div", (a, other), {"rounding_mode": rounding_mode})


true_divide = divide = div


def float_power(input, exponent):
    """``input ** exponent`` computed in double precision (float64, or complex128).

    Examples
    --------
    >>> import torcia
    >>> torcia.float_power(torcia.tensor([2, 3]), 2)
    tensor([4., 9.], dtype=torcia.float64)
    """
    dt = D.complex128 if _opdef.RESULT_TYPE(input, exponent).category == 3 else D.float64
    tensor = _opdef.PUBLIC.Tensor
    return MADE["pow"](to_dtype(input, dt) if isinstance(input, tensor) else input,
                       to_dtype(exponent, dt) if isinstance(exponent, tensor) else exponent)


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
    return bool(MADE["eq"](input, other).all().item())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (NaNs equal when asked).

    Examples
    --------
    >>> import torcia
    >>> torcia.isclose(torcia.tensor([1.0, 1.1]), torcia.tensor([1.0 + 1e-7, 1.0]))
    tensor([ True, False])
    """
    if isinstance(other, _opdef.PUBLIC.Tensor) and input.dtype is not other.dtype:
        # PyTorch compares only tensors of one dtype (no promotion)
        raise RuntimeError(f"{_torch_name(input.dtype)} did not match "
                           f"{_torch_name(other.dtype)}")
    dt = _opdef.RESULT_TYPE(input, other)
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
    return MADE["mul"](input, other)


def subtract(input, other, *, alpha=1):
    """``input - alpha * other`` with broadcasting (an alias of :func:`sub`).

    Examples
    --------
    >>> import torcia
    >>> torcia.subtract(torcia.tensor([5.0, 6.0]), 1.5)
    tensor([3.5000, 4.5000])
    """
    return sub(input, other, alpha=alpha)


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
    return _log_add(input, other)


@opmath
def _log_add(input, other):
    """``log(exp(input) + exp(other))`` of real tensors of one dtype; float16 and bfloat16
    in float32, rounded once, as PyTorch's kernel (rounded at each step, a third of the
    results were off, in bfloat16 up to 14 times the true value where it is near 0)."""
    # shifted by the greater, which sets the magnitude
    m = MADE["maximum"](input, other).detach()
    m = where(isfinite(m), m, zeros_like(m))
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
        both_inf = ~isfinite(lo.real) & (lo.real == hi.real)
        out = where(both_inf, where(lo.real < 0, lo, (lo.exp() + hi.exp()).log()), out)
    return where(nan_x | nan_y, full_like(out, complex(math.nan, math.nan)), out)


def _log_add_operands(input, other, name):
    """logaddexp's operands in their common dtype, which must be floating (or complex
    for logaddexp): PyTorch has no integer kernel."""
    dt = _opdef.RESULT_TYPE(input, other)
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
    if input.is_complex():
        return logaddexp(input * math.log(2), other * math.log(2)) / math.log(2)
    return _log_add_2(input, other)


@opmath
def _log_add_2(input, other):
    return _log_add(input * math.log(2), other * math.log(2)) / math.log(2)


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
    dt = _opdef.RESULT_TYPE(input, other)
    if dt.category < 2:
        dt = D.get_default_dtype()
    refuse_complex_dtype(dt, "copysign")
    mag = to_dtype(input, dt).abs()
    # the gradient flows to input only (PyTorch's: other's sign is piecewise constant)
    if not isinstance(other, _opdef.PUBLIC.Tensor):
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
    tensor_arg(other, "other")
    dt = _opdef.RESULT_TYPE(input, other)
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
    if not isinstance(input, _opdef.PUBLIC.Tensor):
        input = _opdef.TENSOR._as_operand(input, other)
    dt = _opdef.RESULT_TYPE(input, other)
    if dt not in _INTEGER_KERNEL:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_torch_name(dt)}'")
    b = operand_as(other, dt)
    if not isinstance(b, _opdef.PUBLIC.Tensor):
        b = _opdef.PUBLIC.tensor(b, dtype=dt, device=input.device)
    return to_dtype(input, dt).detach(), b.detach()


def _gcd(a, b):
    """Euclid's algorithm as PyTorch's kernel runs it (on absolute values, so int min, whose
    absolute value wraps to itself, stays negative), for a fixed number of steps: tensor ops
    with no data-dependent loop, so it runs on any device and under vmap."""
    a, b = broadcast_tensors(a.abs(), b.abs())
    for _ in range(_EUCLID_STEPS[a.dtype]):
        going = a != 0
        a, b = where(going, MADE["fmod"](b, where(going, a, 1)), a), where(going, a, b)
    return b


def _powers_of_two(dt, device):
    """``1 << k`` for each bit ``k`` of the integer dtype ``dt``, wrapped into it."""
    bits = dt.itemsize * 8
    signed = dt is not D.uint8
    return _opdef.PUBLIC.tensor([(1 << k) - (1 << bits if signed and k == bits - 1 else 0)
                     for k in range(bits)], dtype=dt, device=device)


def nextafter(input, other):
    """The next representable float after ``input`` towards ``other`` (no gradient).

    Examples
    --------
    >>> import torcia
    >>> torcia.nextafter(torcia.tensor([1.0]), torcia.tensor([2.0])) > 1
    tensor([True])
    """
    dt = _opdef.RESULT_TYPE(input, other)
    if dt not in _PRECISION:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{_torch_name(dt)}'")
    # with tensor ops, not NumPy on the host (which has no bfloat16 loop): they run on the
    # meta device and under vmap. One ulp of a = m 2^e (0.5 <= |m| < 1) is 2^(e - p), half
    # that from a power of two towards zero, and never below the smallest subnormal.
    digits, min_exp, largest = _PRECISION[dt]
    a = to_dtype(input, dt).detach()
    b = to_dtype(other if isinstance(other, _opdef.PUBLIC.Tensor)
                 else _opdef.PUBLIC.tensor(other, device=a.device), dt).detach()
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


def float_power_(self, exponent):
    """In-place :func:`torcia.float_power`; ``self`` must be float64 (complex128 for a
    complex result), the dtype the operation computes in."""
    want = D.complex128 if (self.is_complex() or (isinstance(exponent, _opdef.PUBLIC.Tensor)
                                                   and exponent.is_complex())
                            or isinstance(exponent, complex)) else D.float64
    if self.dtype is not want:
        raise RuntimeError(f"the base given to float_power_ has dtype "
                           f"{_torch_name(self.dtype)} but the operation's result "
                           f"requires dtype {_torch_name(want)}")
    return _opdef.INPLACE(float_power, self, exponent)



#: the functions here that are also Tensor methods, under the same name: the declared ops'
#: and these
METHODS = tuple(MADE) + (
    "equal", "isclose", "allclose", "divide", "true_divide", "multiply", "subtract",
    "float_power", "float_power_",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = tuple(op.name for op in DECLARED if op.inplace) + (
    "multiply", "subtract", "divide", "true_divide",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "logaddexp", "logaddexp2", "heaviside", "copysign", "ldexp", "gcd", "lcm", "nextafter",
    "bitwise_left_shift", "bitwise_right_shift",
)

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = (
    "copysign", "ldexp", "gcd", "lcm", "heaviside", "nextafter", "bitwise_left_shift",
    "bitwise_right_shift",
)

#: the names ``torcia`` exports from here: the declared ops' functions and those above but
#: ``float_power_`` (a Tensor method only, as in PyTorch)
__all__ = [
    *MADE, "true_divide", "divide", "float_power", "equal", "isclose", "allclose", "multiply",
    "subtract", "logaddexp", "logaddexp2", "heaviside", "copysign", "ldexp", "gcd", "lcm",
    "rsub", "nextafter", "bitwise_left_shift", "bitwise_right_shift",
]
