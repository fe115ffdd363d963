"""The elementwise ops of two inputs, broadcast and promoted together, each declared once:
schema, reference kernel, meta shape, decomposition, autocast policy, the dtypes it
refuses. :data:`torcia.ops.BINARY` (results in the promoted dtype), ``BINARY_FLOAT``
(floating results) and ``COMPARE`` (bool results); their kernels and decompositions are
written as those of the ops of one input, :mod:`torcia._ops.unary`'s (``xp.add`` itself,
or a method of the reference backend; Tensor methods only; ``decomposed_sub``...). Their
public functions are made here from the declarations (:data:`MADE`;
:mod:`torcia._oplib.elementwise` exports them and replaces ``add``, ``sub`` and ``div``),
their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    COMPLEX,
    ArrayFunction,
    bool_like,
    broadcast,
    no_kernel,
    opmath,
)
from torcia._ops._common import refuse as _refuse
from torcia._ops._common import where as _where
from torcia._ops.unary import (
    CUDA_FLOAT32,
    declared_fields,
    decomposed_logical_not,
    integers_only,
    public_function,
)

# ----- reference kernels -----------------------------------------------------------------


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


def decomposed_sub(a, b):
    # exact: IEEE subtraction is the addition of the negation (signed zeros included), and
    # integers wrap alike
    return a + (-b)


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


def _binary(name, kernel, other="other", **fields):
    """An op of ``BINARY``: two inputs broadcast and promoted together (``other`` the name
    of the second, ``exponent`` for pow)."""
    return define(f"{name}(Tensor input, Tensor {other}) -> Tensor", kernel, shape=broadcast,
                  group="binary", **declared_fields(**fields))


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
    _binary("add", ArrayFunction("add"),
            inplace_example=("[1, 2]", "torcia.tensor([10, 20])", "tensor([11, 22])"),
            tags=("masked", "nested", "foreach"),
            operator="add"),
    _binary("sub", ArrayFunction("subtract"), decomposition=decomposed_sub,
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


def _dispatch(name, input, other, float_op=False):
    """``torcia._tensor.binary``, this module being below the Tensor class: the first call
    binds the module's name to it, so that later calls reach it as one global."""
    global _dispatch
    _dispatch = _opdef.BINARY
    return _dispatch(name, input, other, float_op)


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
