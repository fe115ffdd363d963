"""The elementwise ops with parameters or three inputs (:data:`torcia.ops.ELEMENTWISE_OTHER`),
each declared once: schema, reference kernel, meta shape, decomposition, autocast policy
and refused dtypes. ``round`` (``decimals=``), ``clamp`` (min/max tensors, numbers or
None), ``where``, ``lerp``, ``addcmul`` and ``addcdiv`` (``value=``), ``cast`` (a change
of dtype, differentiable between float types) and ``nan_to_num`` (``masked_fill``, of the
same list, is declared with the indexing ops, :mod:`torcia._ops.indexing`). Their public
functions (``clamp``, ``clip``, ``where``, ``lerp``, ``addcmul``...) are written below
their declarations, reaching dispatch late-bound (this module is below the Tensor class);
their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import cpp_type_name as _cpp_name
from torcia._dtype import torch_type_name as _tname
from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    COMPLEX,
    HALF,
    broadcast,
    first_shape,
    fused_multiply_add,
    low_precision,
    no_kernel,
    op,
    operand_as,
    opmath,
    refuse,
)
from torcia._ops._common import where as _where
from torcia._ops.sorting import nonzero_tuple

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
        # from end above; each side one fused multiply-add, as its kernels compute it
        diff = end - start
        if np.ndim(weight) == 0:  # one side for every element (a number weight)
            out = (fused_multiply_add(weight, diff, start) if np.abs(weight) < 0.5 else
                   fused_multiply_add(-diff, 1 - weight, end))
        else:
            out = np.where(np.abs(weight) < 0.5, fused_multiply_add(weight, diff, start),
                           fused_multiply_add(-diff, 1 - weight, end))
        return np.asarray(out).astype(dt, copy=False)

    def addcmul(self, a, t1, t2, value=1):
        dt = a.dtype
        if low_precision(a):
            a, t1, t2 = (x.astype(np.float32) for x in (a, t1, t2))
            value = float(value)
        # (value * t1) * t2 + a with one rounding after the product, as PyTorch's kernel
        return np.asarray(fused_multiply_add(value * t1, t2, a)).astype(dt, copy=False)

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
        return D.convert(a, dtype)

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
def plus_scaled_product(a, t1, t2, value=1):
    return a + value * (t1 * t2)


@opmath
def plus_scaled_quotient(a, t1, t2, value=1):
    return a + value * (t1 / t2)


@opmath
def two_sided_interpolation(start, end, weight):
    # PyTorch's two-sided form: exact at both ends (weight 0 gives start, 1 gives end)
    diff = end - start
    if not hasattr(weight, "new_full"):  # a number
        return start + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)
    return _where(weight.abs() < 0.5, start + weight * diff, end - diff * (1 - weight))


def non_finite_replaced(a, nan=0.0, posinf=None, neginf=None):
    if a.is_complex():
        return op("complex", non_finite_replaced(a.real, nan, posinf, neginf),
                  non_finite_replaced(a.imag, nan, posinf, neginf))
    if not a.is_floating_point():
        return a.clone()
    info = np.finfo(a.dtype.to_numpy())
    out = a
    for bad, value in ((a.isnan(), nan), (a == math.inf, info.max if posinf is None else posinf),
                       (a == -math.inf, info.min if neginf is None else neginf)):
        out = _where(bad, a.new_full((), value), out)
    return out


def bounded(a, lo, hi):
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
               shape=first_shape, refuses=_ROUND, tags=("special",),
               inplace_example=("[1.4, 2.6]", "", "tensor([1., 3.])")),
    _pointwise("clamp(Tensor x, Tensor? lo, Tensor? hi) -> Tensor", Kernels.clamp,
               decomposition=bounded, refuses=_CLAMP,
               inplace_example=("[-2.0, 0.5, 3.0]", "-1.0, 1.0",
                                "tensor([-1.0000,  0.5000,  1.0000])")),
    _pointwise("where(Tensor cond, Tensor a, Tensor b) -> Tensor", Kernels.where,
               shape=_where_shape),
    _pointwise("lerp(Tensor start, Tensor end, Tensor weight) -> Tensor", Kernels.lerp,
               decomposition=two_sided_interpolation, floating_inputs=True,
               inplace_example=("[0.0, 10.0]", "torcia.tensor([10.0, 20.0]), 0.5",
                                "tensor([ 5., 15.])")),
    _pointwise("addcmul(Tensor x, Tensor t1, Tensor t2, *, Scalar value=1) -> Tensor",
               Kernels.addcmul, decomposition=plus_scaled_product,
               autocast={"cuda": "promote"},
               inplace_example=("[1.0, 1.0]",
                                "torcia.tensor([2.0, 3.0]), torcia.tensor([4.0, 5.0]), value=0.5",
                                "tensor([5.0000, 8.5000])")),
    _pointwise("addcdiv(Tensor x, Tensor t1, Tensor t2, *, Scalar value=1) -> Tensor",
               Kernels.addcdiv, decomposition=plus_scaled_quotient,
               autocast={"cuda": "promote"},
               floating_inputs=True,
               inplace_example=("[1.0, 1.0]",
                                "torcia.tensor([2.0, 3.0]), torcia.tensor([4.0, 5.0]), value=2",
                                "tensor([2.0000, 2.2000])")),
    _pointwise("cast(Tensor x, *, ScalarType dtype=None) -> Tensor", Kernels.cast,
               shape=_cast_shape),
    _pointwise("nan_to_num(Tensor x, *, float nan=0.0, float? posinf=None, "
               "float? neginf=None) -> Tensor", Kernels.nan_to_num, shape=first_shape,
               decomposition=non_finite_replaced,
               inplace_example=('[float("nan"), 1.0]', "nan=0.0", "tensor([0., 1.])")),
)


# ----- the public functions ----------------------------------------------------------------


def tensor_arg(x, name="input"):
    """``x``, or PyTorch's error where the argument ``name`` is no tensor."""
    if isinstance(x, _opdef.PUBLIC.Tensor):
        return x
    raise TypeError(f"argument '{name}' must be Tensor, not {type(x).__name__}")


def scalar_first(op: str, value, rest: tuple, names: str, keyword: str = "value"):
    """PyTorch's deprecated overloads that take the scalar first, still accepted with its
    warning: ``add(x, 2, y)`` for ``add(x, y, alpha=2)`` (``keyword`` "alpha"),
    ``addcmul(x, 0.5, a, b)`` for ``addcmul(x, a, b, value=0.5)``. Returns ``rest`` (the
    tensors)."""
    if isinstance(value, _opdef.PUBLIC.Tensor) or not isinstance(value, numbers.Number):
        raise TypeError(f"{op}() received an invalid combination of arguments: the "
                        f"deprecated overload {op}(Number, {names}) takes a number first, "
                        f"got {type(value).__name__}")
    warnings.warn(f"This overload of {op} is deprecated:\n\t{op}(Number {keyword}, "
                  f"{names})\nConsider using one of the following signatures instead:\n\t"
                  f"{op}({names}, *, Number {keyword} = 1)", UserWarning, stacklevel=3)
    return rest


# the annotation names the Tensor class (above this module) as it reads, unevaluated
def to_dtype(input, dtype) -> Tensor:  # noqa: F821
    """A copy of ``input`` in ``dtype`` (or ``input`` itself when already so).

    Examples
    --------
    >>> import torcia
    >>> torcia.to_dtype(torcia.tensor([1.7, -1.7]), torcia.int64)
    tensor([ 1, -1])
    """
    if input.dtype is dtype:
        return input
    return _opdef.CALL("cast", (input,), {"dtype": dtype.to_numpy()})


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
    return _opdef.CALL("round", (input,), {"decimals": int(decimals)})


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
    dt = _opdef.RESULT_TYPE(input, min, max)
    x = input if input.dtype is dt else input.to(dt)
    return _opdef.CALL("clamp", (x, operand_as(min, dt), operand_as(max, dt)), {})


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
        return nonzero_tuple(condition)
    if condition.dtype is not D.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a "
                           f"tensor with dtype {condition.dtype.name}")
    # the Tensor class looked up once: where is on a training step's path
    tensor = _opdef.PUBLIC.Tensor
    ref = input if isinstance(input, tensor) else other
    if not isinstance(ref, tensor):
        ref = condition
        dt = D.result_type_of((), (), [D.scalar_dtype(input), D.scalar_dtype(other)])
    else:
        tens = [t for t in (input, other) if isinstance(t, tensor)]
        dt = D.result_type_of(
            [t.dtype for t in tens if t.ndim], [t.dtype for t in tens if not t.ndim],
            [D.scalar_dtype(s) for s in (input, other) if not isinstance(s, tensor)],
        )
    a = _cast_operand(input, dt, condition, tensor)
    b = _cast_operand(other, dt, condition, tensor)
    return _opdef.CALL("where", (condition, a, b), {})


def _cast_operand(x, dt, like, tensor):
    if isinstance(x, tensor):
        return x if x.dtype is dt else x.to(dt)
    return _opdef.PUBLIC.tensor(x, dtype=dt, device=like.device)


def lerp(input, end, weight):
    """``input + weight * (end - input)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.lerp(torcia.tensor([0.0, 10.0]), torcia.tensor([10.0, 20.0]), 0.25)
    tensor([ 2.5000, 12.5000])
    """
    tensor_arg(end, "end")
    for name, other in (("end", end), ("weight", weight)):
        if isinstance(other, _opdef.PUBLIC.Tensor) and other.dtype is not input.dtype and (
                name == "end" or other.ndim):
            raise RuntimeError(f"expected dtype {_cpp_name(input.dtype)} for `{name}` but got "
                               f"dtype {_cpp_name(other.dtype)}")
    if input.dtype.category < 2:
        kind = "tensor" if isinstance(weight, _opdef.PUBLIC.Tensor) else "scalar"
        raise NotImplementedError(f'"lerp_kernel_{kind}" not implemented for '
                                  f"'{_tname(input.dtype)}'")
    # a number weight beside float16 and bfloat16 at float32, where the kernel computes:
    # PyTorch's opmath (rounded to float16 first, 17% of the results were a unit apart)
    wide = isinstance(weight, numbers.Number) and input.dtype in HALF
    return _opdef.CALL("lerp", (input, end, operand_as(weight, D.float32 if wide else
                                                       input.dtype)), {})


def _pointwise3(name, input, tensor1, tensor2, value):
    """addcmul/addcdiv: the three tensors promoted together, ``value`` cast to their dtype
    (float32 for float16 and bfloat16)."""
    tensor_arg(tensor1, "tensor1")
    tensor_arg(tensor2, "tensor2")
    dt = _opdef.RESULT_TYPE(input, tensor1, tensor2)
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
    # value beside float16 and bfloat16 at float32, where the kernels compute (as lerp's)
    wide = dt in HALF and isinstance(value, numbers.Number)
    return _opdef.CALL(name, tuple(operand_as(t, dt) for t in (input, tensor1, tensor2)),
                {"value": operand_as(value, D.float32 if wide else dt)})


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
        value, (tensor1, tensor2) = tensor1, scalar_first(
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
        value, (tensor1, tensor2) = tensor1, scalar_first(
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
    return _opdef.CALL("nan_to_num", (input,), {"nan": nan, "posinf": posinf, "neginf": neginf})


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


#: the functions here that are also Tensor methods, under the same name
METHODS = ("round", "clamp", "clip", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv",
           "nan_to_num")

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = ("clamp", "clip", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv",
           "nan_to_num", "round")

#: the names ``torcia`` exports from here
__all__ = ["addcdiv", "addcmul", "clamp", "clamp_max", "clamp_min", "clip", "lerp",
           "nan_to_num", "nan_to_num_", "round", "to_dtype", "where"]
