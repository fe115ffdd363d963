"""The public functions of core ops (``torcia.add``, ``torcia.sum``...).

Each function checks and normalises its arguments (dims wrapped, shapes validated, dtypes
decided by PyTorch's rules) and then calls :func:`torcia._tensor.call` with plain
parameters, so kernels never see user-facing quirks. Most are also Tensor methods (see
``METHODS`` at the bottom).
"""

from __future__ import annotations

import builtins
import math
import numbers
import re
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import ops as _oplist
from torcia._kernels_linalg import outer_operands
from torcia._tensor import (
    Tensor,
    _as_operand,
    _cpp_name,
    _wrap_dim,
    binary,
    call,
    check_overlap,
    result_type,
    unary,
    write_inplace,
)
from torcia.amp import autocast_as

# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def _dims(dim, ndim: int):
    """``dim`` (None, int or sequence) as None or a sorted tuple of non-negative ints."""
    if dim is None:
        return None
    if isinstance(dim, (int, np.integer)):
        dim = (dim,)
    out = tuple(_wrap_dim(d, ndim) for d in dim)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {list(dim)} appears multiple times in the list of dims")
    if not out or not ndim:
        # a 0-dim tensor's dim 0 (or -1) is all of it: the kernels reduce it as dim=None
        return None
    return tuple(sorted(out))


def _size_at(input, d) -> int:
    """The size of dim ``d`` (1 for a 0-dim tensor's dim 0)."""
    return input.shape[d] if input.ndim else 1


def _along_dim(op, inputs, params, view_of=None):
    """``call(op, inputs, params)`` for an op along one dim: a 0-dim first input (and 0-dim
    tensors beside it, an index) runs as a 1-element 1-D tensor, and the results come back
    0-dim, as PyTorch treats a 0-dim tensor's dim 0."""
    if inputs[0]._data.ndim:
        return call(op, inputs, params, view_of)
    ones = tuple(reshape(x, (1,)) if isinstance(x, Tensor) and not x._data.ndim else x
                 for x in inputs)
    out = call(op, ones, params)
    if isinstance(out, tuple):
        return tuple(reshape(o, ()) if o._data.size == 1 else o for o in out)
    return reshape(out, ()) if out._data.size == 1 else out


def _shape_arg(shape) -> tuple:
    for s in shape:
        if s.__class__ is not int:
            break
    else:
        return shape  # already a tuple of ints (the common case)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Tensor)) or (
        len(shape) == 1 and hasattr(shape[0], "__len__")
    ):
        shape = tuple(shape[0])
    return tuple(map(int, shape))


def _infer_shape(shape, numel: int, src_shape) -> tuple:
    known = 1
    for s in shape:
        if s < 0:
            break
        known *= s
    else:
        if known == numel:
            return shape  # nothing to infer (the common case)
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _tensor_arg(x, name="input") -> Tensor:
    if isinstance(x, Tensor):
        return x
    raise TypeError(f"argument '{name}' must be Tensor, not {type(x).__name__}")


# ---------------------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------------------


# The example of each function made below: its arguments (a list stands for a tensor of it)
# and what the call prints; the docs tests run them.
_EXAMPLES = {
    "exp": ("[0.0, 1.0]", "tensor([1.0000, 2.7183])"),
    "exp2": ("[0, 3]", "tensor([1., 8.])"),
    "log": ("[1.0, 100.0]", "tensor([0.0000, 4.6052])"),
    "log2": ("[1, 8]", "tensor([0., 3.])"),
    "log10": ("[1.0, 10.0]", "tensor([0., 1.])"),
    "log1p": ("[0.0, 1.0]", "tensor([0.0000, 0.6931])"),
    "expm1": ("[0.0, 1.0]", "tensor([0.0000, 1.7183])"),
    "sqrt": ("[4, 9]", "tensor([2., 3.])"),
    "rsqrt": ("[4.0, 0.25]", "tensor([0.5000, 2.0000])"),
    "reciprocal": ("[2.0, -4.0]", "tensor([ 0.5000, -0.2500])"),
    "sin": ("[0.0, 1.5708]", "tensor([0., 1.])"),
    "cos": ("[0.0, 3.1416]", "tensor([ 1., -1.])"),
    "tan": ("[0.0, 0.7854]", "tensor([0.0000, 1.0000])"),
    "asin": ("[0.0, 1.0]", "tensor([0.0000, 1.5708])"),
    "acos": ("[1.0, 0.0]", "tensor([0.0000, 1.5708])"),
    "atan": ("[0.0, 1.0]", "tensor([0.0000, 0.7854])"),
    "sinh": ("[0.0, 1.0]", "tensor([0.0000, 1.1752])"),
    "cosh": ("[0.0, 1.0]", "tensor([1.0000, 1.5431])"),
    "tanh": ("[0.0, 1.0]", "tensor([0.0000, 0.7616])"),
    "asinh": ("[0.0, 1.0]", "tensor([0.0000, 0.8814])"),
    "acosh": ("[1.0, 2.0]", "tensor([0.0000, 1.3170])"),
    "atanh": ("[0.0, 0.5]", "tensor([0.0000, 0.5493])"),
    "sigmoid": ("[0.0, 2.0]", "tensor([0.5000, 0.8808])"),
    "erf": ("[0.0, 1.0]", "tensor([0.0000, 0.8427])"),
    "erfc": ("[0.0, 1.0]", "tensor([1.0000, 0.1573])"),
    "erfinv": ("[0.0, 0.5]", "tensor([0.0000, 0.4769])"),
    "lgamma": ("[1.0, 5.0]", "tensor([0.0000, 3.1781])"),
    "digamma": ("[1.0, 2.0]", "tensor([-0.5772,  0.4228])"),
    "neg": ("[1, -2]", "tensor([-1,  2])"),
    "abs": ("[-1.5, 2.0]", "tensor([1.5000, 2.0000])"),
    "sign": ("[-2, 0, 3]", "tensor([-1,  0,  1])"),
    "square": ("[2, -3]", "tensor([4, 9])"),
    "floor": ("[-1.5, 1.5]", "tensor([-2.,  1.])"),
    "ceil": ("[-1.5, 1.5]", "tensor([-1.,  2.])"),
    "trunc": ("[-1.5, 1.5]", "tensor([-1.,  1.])"),
    "frac": ("[-1.5, 2.25]", "tensor([-0.5000,  0.2500])"),
    "relu": ("[-1.0, 2.0]", "tensor([0., 2.])"),
    "bitwise_not": ("[0, 5]", "tensor([-1, -6])"),
    "isnan": ('[float("nan"), 1.0]', "tensor([ True, False])"),
    "isinf": ('[float("inf"), 1.0]', "tensor([ True, False])"),
    "isfinite": ('[float("inf"), 1.0]', "tensor([False,  True])"),
    "logical_not": ("[0, 3]", "tensor([ True, False])"),
    "signbit": ("[-1.0, 0.0, -0.0]", "tensor([ True, False,  True])"),
    "mul": ("[2, 3]", "[4, 5]", "tensor([ 8, 15])"),
    "floor_divide": ("[7, -7]", "2", "tensor([ 3, -4])"),
    "remainder": ("[7, -7]", "3", "tensor([1, 2])"),
    "fmod": ("[7, -7]", "3", "tensor([ 1, -1])"),
    "maximum": ("[1, 5]", "[3, 2]", "tensor([3, 5])"),
    "minimum": ("[1, 5]", "[3, 2]", "tensor([1, 2])"),
    "bitwise_and": ("[12, 10]", "[10, 6]", "tensor([8, 2])"),
    "bitwise_or": ("[12, 10]", "[10, 6]", "tensor([14, 14])"),
    "bitwise_xor": ("[12, 10]", "[10, 6]", "tensor([ 6, 12])"),
    "fmax": ('[1.0, float("nan")]', "[2.0, 3.0]", "tensor([2., 3.])"),
    "fmin": ('[1.0, float("nan")]', "[2.0, 3.0]", "tensor([1., 3.])"),
    "atan2": ("[1.0, 0.0]", "[1.0, -1.0]", "tensor([0.7854, 3.1416])"),
    "hypot": ("[3.0, 5.0]", "[4.0, 12.0]", "tensor([ 5., 13.])"),
    "xlogy": ("[0.0, 2.0]", "[3.0, 4.0]", "tensor([0.0000, 2.7726])"),
    "eq": ("[1, 2, 3]", "[1, 0, 3]", "tensor([ True, False,  True])"),
    "ne": ("[1, 2, 3]", "[1, 0, 3]", "tensor([False,  True, False])"),
    "lt": ("[1, 2, 3]", "2", "tensor([ True, False, False])"),
    "le": ("[1, 2, 3]", "2", "tensor([ True,  True, False])"),
    "gt": ("[1, 2, 3]", "2", "tensor([False, False,  True])"),
    "ge": ("[1, 2, 3]", "2", "tensor([False,  True,  True])"),
    "logical_and": ("[0, 1, 2]", "[1, 1, 0]", "tensor([False,  True, False])"),
    "logical_or": ("[0, 1, 2]", "[1, 0, 0]", "tensor([True, True, True])"),
    "logical_xor": ("[0, 1, 2]", "[1, 1, 0]", "tensor([ True, False,  True])"),
}


# The example of each in-place form whose op has none above (or whose bool result an
# in-place call writes back in the input's dtype): the input, the arguments after it
# and what the input holds afterwards.
_INPLACE_EXAMPLES = {
    "add": ("[1, 2]", "torcia.tensor([10, 20])", "tensor([11, 22])"),
    "sub": ("[5, 7]", "torcia.tensor([1, 2])", "tensor([4, 5])"),
    "pow": ("[2.0, 3.0]", "2", "tensor([4., 9.])"),
    "div": ("[3.0, 8.0]", "2", "tensor([1.5000, 4.0000])"),
    "divide": ("[3.0, 8.0]", "2", "tensor([1.5000, 4.0000])"),
    "true_divide": ("[3.0, 8.0]", "2", "tensor([1.5000, 4.0000])"),
    "multiply": ("[1, 2]", "3", "tensor([3, 6])"),
    "subtract": ("[5, 7]", "2", "tensor([3, 5])"),
    "eq": ("[1.0, 2.0, 3.0]", "torcia.tensor([1.0, 0.0, 3.0])", "tensor([1., 0., 1.])"),
    "ne": ("[1.0, 2.0, 3.0]", "torcia.tensor([1.0, 0.0, 3.0])", "tensor([0., 1., 0.])"),
    "lt": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 0., 0.])"),
    "le": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 1., 0.])"),
    "gt": ("[1.0, 2.0, 3.0]", "2", "tensor([0., 0., 1.])"),
    "ge": ("[1.0, 2.0, 3.0]", "2", "tensor([0., 1., 1.])"),
    "greater": ("[1.0, 2.0, 3.0]", "2", "tensor([0., 0., 1.])"),
    "greater_equal": ("[1.0, 2.0, 3.0]", "2", "tensor([0., 1., 1.])"),
    "less": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 0., 0.])"),
    "less_equal": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 1., 0.])"),
    "not_equal": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 0., 1.])"),
    "logical_not": ("[0.0, 3.0]", "", "tensor([1., 0.])"),
    "logical_and": ("[0, 1, 2]", "torcia.tensor([1, 1, 0])", "tensor([0, 1, 0])"),
    "logical_or": ("[0, 1, 2]", "torcia.tensor([1, 0, 0])", "tensor([1, 1, 1])"),
    "logical_xor": ("[0, 1, 2]", "torcia.tensor([1, 1, 0])", "tensor([1, 0, 1])"),
    "clamp": ("[-2.0, 0.5, 3.0]", "-1.0, 1.0", "tensor([-1.0000,  0.5000,  1.0000])"),
    "clip": ("[-2.0, 0.5, 3.0]", "-1.0, 1.0", "tensor([-1.0000,  0.5000,  1.0000])"),
    "clamp_min": ("[-2.0, 0.5, 3.0]", "0.0", "tensor([0.0000, 0.5000, 3.0000])"),
    "clamp_max": ("[-2.0, 0.5, 3.0]", "1.0", "tensor([-2.0000,  0.5000,  1.0000])"),
    "lerp": ("[0.0, 10.0]", "torcia.tensor([10.0, 20.0]), 0.5", "tensor([ 5., 15.])"),
    "addcmul": ("[1.0, 1.0]", "torcia.tensor([2.0, 3.0]), torcia.tensor([4.0, 5.0]), value=0.5",
                "tensor([5.0000, 8.5000])"),
    "addcdiv": ("[1.0, 1.0]", "torcia.tensor([2.0, 3.0]), torcia.tensor([4.0, 5.0]), value=2",
                "tensor([2.0000, 2.2000])"),
    "masked_fill": ("[1, 2, 3]", "torcia.tensor([True, False, True]), 0", "tensor([0, 2, 0])"),
    "nan_to_num": ('[float("nan"), 1.0]', "nan=0.0", "tensor([0., 1.])"),
    "round": ("[1.4, 2.6]", "", "tensor([1., 3.])"),
    "scatter": ("[0, 0, 0, 0]", "0, torcia.tensor([1, 3]), torcia.tensor([5, 7])",
                "tensor([0, 5, 0, 7])"),
    "scatter_add": ("[1, 1, 1, 1]", "0, torcia.tensor([1, 1]), torcia.tensor([5, 7])",
                    "tensor([ 1, 13,  1,  1])"),
    "index_add": ("[1, 1, 1]", "0, torcia.tensor([0, 2]), torcia.tensor([10, 20])",
                  "tensor([11,  1, 21])"),
    "index_copy": ("[1, 1, 1]", "0, torcia.tensor([0, 2]), torcia.tensor([10, 20])",
                   "tensor([10,  1, 20])"),
    "index_put": ("[1, 1, 1]", "(torcia.tensor([0, 2]),), torcia.tensor([10, 20])",
                  "tensor([10,  1, 20])"),
    "index_fill": ("[1, 2, 3]", "0, torcia.tensor([0, 2]), 0", "tensor([0, 2, 0])"),
    "tril": ("[[1, 2], [3, 4]]", "", "tensor([[1, 0],\n        [3, 4]])"),
    "triu": ("[[1, 2], [3, 4]]", "", "tensor([[1, 2],\n        [0, 4]])"),
    "cumsum": ("[1, 2, 3]", "0", "tensor([1, 3, 6])"),
    "cumprod": ("[1, 2, 3]", "0", "tensor([1, 2, 6])"),
    "addmv": ("[1.0, 1.0]", "torcia.eye(2), torcia.tensor([2.0, 3.0])", "tensor([3., 4.])"),
    "addr": ("[[0.0, 0.0], [0.0, 0.0]]", "torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0])",
             "tensor([[3., 4.],\n        [6., 8.]])"),
    "addmm": ("[[1.0, 0.0], [0.0, 1.0]]", "torcia.eye(2), torcia.tensor([[1.0, 2.0], [3.0, 4.0]])",
              "tensor([[2., 2.],\n        [3., 5.]])"),
    "addbmm": ("[[0.0, 0.0], [0.0, 0.0]]", "torcia.ones(2, 2, 3), torcia.ones(2, 3, 2)",
               "tensor([[6., 6.],\n        [6., 6.]])"),
    "baddbmm": ("[[[1.0, 1.0]]]", "torcia.ones(1, 1, 3), torcia.ones(1, 3, 2)",
                "tensor([[[4., 4.]]])"),
    "absolute": ("[-1.5, 2.0]", "", "tensor([1.5000, 2.0000])"),
    "arccos": ("[1.0, 0.0]", "", "tensor([0.0000, 1.5708])"),
    "arccosh": ("[1.0, 2.0]", "", "tensor([0.0000, 1.3170])"),
    "arcsin": ("[0.0, 1.0]", "", "tensor([0.0000, 1.5708])"),
    "arcsinh": ("[0.0, 1.0]", "", "tensor([0.0000, 0.8814])"),
    "arctan": ("[0.0, 1.0]", "", "tensor([0.0000, 0.7854])"),
    "arctanh": ("[0.0, 0.5]", "", "tensor([0.0000, 0.5493])"),
    "arctan2": ("[1.0, 0.0]", "torcia.tensor([1.0, -1.0])", "tensor([0.7854, 3.1416])"),
    "negative": ("[1, -2]", "", "tensor([-1,  2])"),
    "fix": ("[-1.5, 1.5]", "", "tensor([-1.,  1.])"),
    "deg2rad": ("[180.0, 90.0]", "", "tensor([3.1416, 1.5708])"),
    "copysign": ("[1.0, 2.0]", "torcia.tensor([-1.0, 1.0])", "tensor([-1.,  2.])"),
    "ldexp": ("[1.0, 3.0]", "torcia.tensor([2, 1])", "tensor([4., 6.])"),
    "gcd": ("[12, 9]", "torcia.tensor([8, 6])", "tensor([4, 3])"),
    "lcm": ("[4, 3]", "torcia.tensor([6, 5])", "tensor([12, 15])"),
    "heaviside": ("[-1.0, 0.0, 2.0]", "torcia.tensor([0.5])", "tensor([0.0000, 0.5000, 1.0000])"),
    "bitwise_left_shift": ("[1, 3]", "2", "tensor([ 4, 12])"),
    "bitwise_right_shift": ("[8, 12]", "2", "tensor([2, 3])"),
    "renorm": ("[[3.0, 4.0], [0.3, 0.4]]", "2, 0, 1.0",
               "tensor([[0.6000, 0.8000],\n        [0.3000, 0.4000]])"),
    "masked_scatter": ("[0, 0, 0]", "torcia.tensor([True, False, True]), torcia.tensor([7, 8])",
                       "tensor([7, 0, 8])"),
    "put": ("[1, 2, 3]", "torcia.tensor([0, 2]), torcia.tensor([10, 30])", "tensor([10,  2, 30])"),
    "fill_diagonal": ("[[1, 2], [3, 4]]", "0", "tensor([[0, 2],\n        [3, 0]])"),
    "sgn": ("[-2.0, 0.0, 3.0]", "", "tensor([-1.,  0.,  1.])"),
    "i0": ("[0.0, 1.0]", "", "tensor([1.0000, 1.2661])"),
    "sinc": ("[0.0, 0.5]", "", "tensor([1.0000, 0.6366])"),
    "logit": ("[0.5, 0.75]", "", "tensor([0.0000, 1.0986])"),
    "xlogy": ("[0.0, 2.0]", "torcia.tensor([3.0, 4.0])", "tensor([0.0000, 2.7726])"),
    "mvlgamma": ("[2.5, 3.0]", "p=2", "tensor([0.8570, 1.5502])"),
    "igamma": ("[1.0, 2.0]", "torcia.tensor([1.0, 1.0])", "tensor([0.6321, 0.2642])"),
    "igammac": ("[1.0, 2.0]", "torcia.tensor([1.0, 1.0])", "tensor([0.3679, 0.7358])"),
    "polygamma": ("[1.0, 2.0]", "1", "tensor([1.6449, 0.6449])"),
    "conj_physical": ("[1.0, -2.0]", "", "tensor([ 1., -2.])"),
    "scatter_reduce": ("[1.0, 2.0, 3.0]",
                       '0, torcia.tensor([0, 0, 2]), torcia.tensor([5.0, 6.0, 7.0]), reduce="amax"',
                       "tensor([6., 2., 7.])"),
    "index_reduce": ("[1.0, 2.0, 3.0]",
                     '0, torcia.tensor([0, 0, 2]), torcia.tensor([5.0, 6.0, 7.0]), "prod"',
                     "tensor([30.,  2., 21.])"),
    "fill": ("[1.0, 2.0]", "7.0", "tensor([7., 7.])"),
    "zero": ("[1.0, 2.0]", "", "tensor([0., 0.])"),
    "detach": ("[1.0, 2.0], requires_grad=True", "", "tensor([1., 2.])"),
    "resize_as": ("[1, 2, 3, 4]", "torcia.zeros(2, 2)", "tensor([[1, 2],\n        [3, 4]])"),
    "as_strided": ("[1, 2, 3, 4]", "(2,), (2,)", "tensor([1, 3])"),
    "transpose": ("[[1, 2], [3, 4]]", "0, 1", "tensor([[1, 3],\n        [2, 4]])"),
    "swapaxes": ("[[1, 2], [3, 4]]", "0, 1", "tensor([[1, 3],\n        [2, 4]])"),
    "swapdims": ("[[1, 2], [3, 4]]", "0, 1", "tensor([[1, 3],\n        [2, 4]])"),
    "squeeze": ("[[1, 2]]", "", "tensor([1, 2])"),
    "unsqueeze": ("[1, 2]", "0", "tensor([[1, 2]])"),
    "copy": ("[1.0, 2.0]", "torcia.tensor([5, 6])", "tensor([5., 6.])"),
    "dropout": ("[1.0, 2.0]", "0.0, False", "tensor([1., 2.])"),
    "alpha_dropout": ("[1.0, 2.0]", "0.5, False", "tensor([1., 2.])"),
    "feature_dropout": ("[1.0, 2.0]", "0.5, False", "tensor([1., 2.])"),
    "feature_alpha_dropout": ("[1.0, 2.0]", "0.5, False", "tensor([1., 2.])"),
    "rad2deg": ("[0.0, 3.141592653589793]", "", "tensor([  0., 180.])"),
    "float_power": ("[2.0, 3.0], dtype=torcia.float64", "2",
                    "tensor([4., 9.], dtype=torcia.float64)"),
}


def _example(name):
    if name not in _EXAMPLES:
        # add, sub and pow: defined again below, with examples of their own
        return ""
    *args, result = _EXAMPLES[name]
    call = ", ".join(f"torcia.tensor({a})" if a.startswith("[") else a for a in args)
    return f"\n\nExamples\n--------\n>>> import torcia\n>>> torcia.{name}({call})\n{result}\n"


def _inplace_example(name, function=False):
    """The Examples section of the in-place ``name_``, as ``Tensor.name_`` (or
    ``torcia.name_`` with ``function``): its entry of ``_INPLACE_EXAMPLES``, else the
    example of the elementwise ``name`` above run in place; "" for the others."""
    if name in _INPLACE_EXAMPLES:
        first, given, result = _INPLACE_EXAMPLES[name]
        args = [given] if given else []
    elif name not in _EXAMPLES or name in _oplist.COMPARE + _oplist.UNARY_BOOL:
        return ""
    else:
        first, *others, result = _EXAMPLES[name]
        if name in _oplist.UNARY_FLOAT:
            # in place, the result keeps the input's dtype: an integer input cannot hold it
            first = re.sub(r"(?<![\w.])(-?\d+)(?![\d.])", r"\1.0", first)
        args = [f"torcia.tensor({a})" if a.startswith("[") else a for a in others]
    call = f"torcia.{name}_({', '.join(['x', *args])})" if function else \
        f"x.{name}_({', '.join(args)})"
    return (f"\n\nExamples\n--------\n>>> import torcia\n>>> x = torcia.tensor({first})\n"
            f">>> {call}\n{result}\n>>> x\n{result}\n")


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


def _operand_as(x, dt):
    """A tensor or Python-number operand of an op computing in ``dt``, converted to it: a
    number as PyTorch's scalars, so -1 bounds a uint8 tensor at 255."""
    if isinstance(x, Tensor):
        return x if x.dtype is dt else to_dtype(x, dt)
    if x is None or dt.category == 3 or x.__class__ is complex:
        return x
    return np.array(x).astype(dt.to_numpy())[()]


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
        from torcia._ops_extra import nonzero

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
    from torcia._creation import tensor

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


def masked_fill(input, mask, value):
    """Fill ``input`` with ``value`` where the bool ``mask`` (broadcast) is True.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, -2.0, 3.0])
    >>> torcia.masked_fill(x, x < 0, 0.0)
    tensor([1., 0., 3.])
    """
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with "
                           f"dtype {mask.dtype.name}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
        if value._requires_grad:
            # a value that wants a gradient stays in the graph: where() differentiates both
            return where(mask, to_dtype(value, input.dtype), input)
        value = value.item()
    return call("masked_fill", (input, mask), {"value": D.checked_scalar(value, input.dtype)})


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


def _to_float(input) -> Tensor:
    """``input`` with an integer or bool dtype cast to the default float dtype, as ops that
    compute in floating point take it; float and complex inputs are returned as they are."""
    if input.dtype.category >= 2:
        return input
    return call("cast", (input,), {"dtype": D.get_default_dtype().to_numpy()})


# ---------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------


def _acc_dtype(input, dtype):
    if dtype is not None:
        return dtype.to_numpy()
    if input._data.dtype.kind in "biu":
        return np.int64
    return None


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (int, tuple, or all); integer and bool inputs sum in int64.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.sum(x), torcia.sum(x, dim=0), x.sum(1, keepdim=True).shape
    (tensor(10), tensor([4, 6]), torcia.Size([2, 1]))
    """
    if dim is None and dtype is None and input._data.dtype.kind in "fc":
        return call("sum", (input,), {"dim": None, "keepdim": bool(keepdim), "dtype": None})
    return call("sum", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim),
                                  "dtype": _acc_dtype(input, dtype)})


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (all dims when None), counting NaN as zero.

    Examples
    --------
    >>> import torcia
    >>> torcia.nansum(torcia.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    return call("nansum", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim),
                                     "dtype": _acc_dtype(input, dtype)})


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim``; the input must be floating point (or ``dtype`` given).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.mean(x)
    tensor(2.5000)
    >>> torcia.mean(x, dim=0, keepdim=True)
    tensor([[2., 3.]])
    """
    if dtype is None and input.dtype.category < 2:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {_tname(input.dtype)}"
        )
    if dtype is not None:
        input = to_dtype(input, dtype)
    return call("mean", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim)})


def _tname(d):
    from torcia._tensor import _torch_name

    return _torch_name(d)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product over one ``dim`` (or all).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.prod(x)
    tensor(24)
    >>> torcia.prod(x, dim=0)
    tensor([3, 8])
    """
    return call("prod", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim),
                                   "dtype": _acc_dtype(input, dtype)})


def amax(input, dim=(), keepdim=False):
    """Maximum over ``dim`` (all dims when empty).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.amax(x)
    tensor(5)
    >>> torcia.amax(x, dim=0)
    tensor([4, 5])
    """
    _check_nonempty(input, dim, "amax")
    return call("amax", (input,), {"dim": _dims(dim, input.ndim) if dim != () else None,
                                   "keepdim": bool(keepdim)})


def amin(input, dim=(), keepdim=False):
    """Minimum over ``dim`` (all dims when empty).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.amin(x, dim=1)
    tensor([1, 2])
    """
    _check_nonempty(input, dim, "amin")
    return call("amin", (input,), {"dim": _dims(dim, input.ndim) if dim != () else None,
                                   "keepdim": bool(keepdim)})


def _check_nonempty(input, dim, name):
    """PyTorch's refusal of a reduction with no identity (max, argmax...) over nothing:
    of an empty tensor without a dim, or along a dim of size 0."""
    if input.numel():
        return
    if dim is None or dim == ():
        raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                         "== 0. Specify the reduction dim with the 'dim' argument.")
    for d in (dim,) if isinstance(dim, (int, np.integer)) else dim:
        d = _wrap_dim(d, input.ndim)
        if _size_at(input, d) == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


class _ReturnType(tuple):
    """Base of the named results of multi-output ops (``values``/``indices``...)."""

    __slots__ = ()
    _fields: tuple = ()
    _name = ""

    def __new__(cls, *items):
        return tuple.__new__(cls, items)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"torcia.return_types.{self._name}(\n{body})"


def _return_type(name: str, fields: tuple) -> type:
    """A tuple subclass named like ``torch.return_types.<name>`` with attributes ``fields``.

    Examples
    --------
    >>> import torcia
    >>> r = torcia.max(torcia.tensor([[1, 5], [7, 2]]), dim=1)
    >>> r.values, r.indices
    (tensor([5, 7]), tensor([1, 0]))
    """
    attrs = {"_fields": fields, "_name": name, "__slots__": ()}
    for i, f in enumerate(fields):
        attrs[f] = property(lambda self, i=i: self[i])
    return type(name, (_ReturnType,), attrs)


_Max = _return_type("max", ("values", "indices"))
_Min = _return_type("min", ("values", "indices"))


def max(input, dim=None, keepdim=False, *, other=None):
    """The maximum of all elements; with ``dim``, (values, indices) along it; with a tensor
    as second argument, the elementwise maximum.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [7, 2]])
    >>> torcia.max(x)
    tensor(7)
    >>> torcia.max(x, dim=1)
    torcia.return_types.max(
    values=tensor([5, 7]),
    indices=tensor([1, 0]))
    """
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        _check_nonempty(input, None, "max")
        return amax(input)
    d = _wrap_dim(dim, input.ndim)
    _check_nonempty(input, d, "max")
    v, i = _along_dim("max_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Max(v, i)


def min(input, dim=None, keepdim=False):
    """As :func:`max`, for the minimum.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[4, 1], [2, 3]])
    >>> torcia.min(x)
    tensor(1)
    >>> torcia.min(x, dim=1)
    torcia.return_types.min(
    values=tensor([1, 2]),
    indices=tensor([1, 0]))
    """
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        _check_nonempty(input, None, "min")
        return amin(input)
    d = _wrap_dim(dim, input.ndim)
    _check_nonempty(input, d, "min")
    v, i = _along_dim("min_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Min(v, i)


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.argmax(x)
    tensor(1)
    >>> torcia.argmax(x, dim=1)
    tensor([1, 0])
    """
    return _arg_extreme("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.argmin(x, dim=0)
    tensor([0, 1])
    """
    return _arg_extreme("argmin", input, dim, keepdim)


def _arg_extreme(op, input, dim, keepdim):
    # refused by dtype before the dim is looked at, as PyTorch
    if input.dtype is D.bool_ or input.is_complex():
        kind = "bool" if input.dtype is D.bool_ else "complex"
        raise RuntimeError(f"{op}(): does not support {kind} input")
    _check_nonempty(input, dim, op)
    return _along_dim(op, (input,), {
        "dim": None if dim is None else _wrap_dim(dim, input.ndim), "keepdim": bool(keepdim)})


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased in (None, True) else 0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1).

    Examples
    --------
    >>> import torcia
    >>> torcia.var(torcia.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor(1.6667)
    """
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return call("var", (_float_input(input, "var"),),
                {"dim": _dims(dim, input.ndim), "correction": _correction(unbiased, correction),
                 "keepdim": bool(keepdim)})


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over ``dim`` with Bessel's ``correction`` (default 1).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0, 3.0, 4.0])
    >>> torcia.std(x)
    tensor(1.2910)
    >>> torcia.std(x, correction=0)
    tensor(1.1180)
    """
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return call("std", (_float_input(input, "std"),),
                {"dim": _dims(dim, input.ndim), "correction": _correction(unbiased, correction),
                 "keepdim": bool(keepdim)})


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The variance and the mean over ``dim``, as :func:`var` and :func:`mean`.

    Examples
    --------
    >>> import torcia
    >>> torcia.var_mean(torcia.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return (var(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation and the mean over ``dim``, as :func:`std` and :func:`mean`.

    Examples
    --------
    >>> import torcia
    >>> torcia.std_mean(torcia.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return (std(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim, keepdim))


def _float_input(input, name):
    if input.dtype.category < 2:
        raise RuntimeError(f"{name}(): input dtype should be floating point, got "
                           f"{input.dtype.name}")
    return input


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over ``dim`` (``"fro"`` is the 2-norm of all elements).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[3.0, 4.0], [0.0, 0.0]])
    >>> torcia.norm(x)
    tensor(5.)
    >>> torcia.norm(x, p=1, dim=1)
    tensor([7., 0.])
    """
    if p in ("fro", None):
        p = 2.0
    if p == "nuc":
        from torcia import linalg

        return linalg.matrix_norm(input, "nuc", dim=(-2, -1) if dim is None else dim,
                                  keepdim=keepdim)
    if dtype is not None:
        input = to_dtype(input, dtype)
    return call("norm", (_float_input(input, "norm"),),
                {"p": float(p), "dim": _dims(dim, input.ndim), "keepdim": bool(keepdim)})


def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(input)))`` over ``dim``, computed stably.

    Examples
    --------
    >>> import torcia
    >>> torcia.logsumexp(torcia.tensor([[0.0, 0.0], [1000.0, 1000.0]]), dim=1)
    tensor([6.9315e-01, 1.0007e+03])
    """
    input = _to_float(input)
    return call("logsumexp", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim)})


def all(input, dim=None, keepdim=False):
    """Whether all elements (along ``dim``) are nonzero.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[True, False], [True, True]])
    >>> torcia.all(x)
    tensor(False)
    >>> torcia.all(x, dim=1)
    tensor([False,  True])
    """
    return _logical_reduction("all", input, dim, keepdim)


def any(input, dim=None, keepdim=False):
    """Whether any element (along ``dim``) is nonzero.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[0, 0], [0, 3]])
    >>> torcia.any(x)
    tensor(True)
    >>> torcia.any(x, dim=1)
    tensor([False,  True])
    """
    return _logical_reduction("any", input, dim, keepdim)


def _logical_reduction(op, input, dim, keepdim):
    out = call(op, (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim)})
    # PyTorch keeps uint8 for uint8 inputs (its masks of old), bool for every other dtype
    return to_dtype(out, D.uint8) if input.dtype is D.uint8 else out


def count_nonzero(input, dim=None):
    """The number of nonzero elements (along ``dim``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[0, 1, 2], [0, 0, 3]])
    >>> torcia.count_nonzero(x)
    tensor(3)
    >>> torcia.count_nonzero(x, dim=0)
    tensor([0, 1, 2])
    """
    return call("count_nonzero", (input,), {"dim": _dims(dim, input.ndim)})


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cumsum(torcia.tensor([[1, 2], [3, 4]]), dim=1)
    tensor([[1, 3],
            [3, 7]])
    """
    return _along_dim("cumsum", (input,), {"dim": _wrap_dim(dim, input.ndim),
                                           "dtype": _acc_dtype(input, dtype)})


def cumprod(input, dim, *, dtype=None):
    """Cumulative product along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cumprod(torcia.tensor([1, 2, 3, 4]), dim=0)
    tensor([ 1,  2,  6, 24])
    """
    return _along_dim("cumprod", (input,), {"dim": _wrap_dim(dim, input.ndim),
                                            "dtype": _acc_dtype(input, dtype)})


# ---------------------------------------------------------------------------------------
# views and shape
# ---------------------------------------------------------------------------------------


def _view_call(op, input, params):
    return call(op, (input,), params, view_of=input)


def view(input, *shape, dtype=None):
    """The same data with another shape; raises when no view is possible (use reshape).

    A dtype argument (``view(torcia.int16)`` or ``view(dtype=torcia.int16)``) reinterprets
    the bytes instead, as ``Tensor.view(dtype)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.view(torcia.arange(6), (3, 2))
    tensor([[0, 1],
            [2, 3],
            [4, 5]])
    """
    if dtype is not None:
        if shape:
            raise TypeError("view() takes a shape or dtype=, not both")
        shape = (dtype,)
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        return Tensor._make(input._data.view(shape[0].to_numpy()), input.device, input)
    shape = _infer_shape(_shape_arg(shape), input._data.size, input._data.shape)
    return call("view", (input,), {"shape": shape}, input)


def reshape(input, *shape):
    """The same data with another shape: a view when possible, else a copy.

    Examples
    --------
    >>> import torcia
    >>> torcia.reshape(torcia.arange(6), (2, -1))
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    shape = _infer_shape(_shape_arg(shape), input.numel(), input.shape)
    if tuple(shape) == tuple(input.shape):
        return _view_call("view", input, {"shape": shape})
    out = call("reshape", (input,), {"shape": shape})
    if np.shares_memory(out._data, input._data) if input.device.type == "cpu" else False:
        out._vc = input._vc
        out._base = input._base if input._base is not None else input
    return out


def permute(input, *dims):
    """Reorder dimensions (a view).

    Examples
    --------
    >>> import torcia
    >>> torcia.permute(torcia.zeros(2, 3, 4), (2, 0, 1)).shape
    torcia.Size([4, 2, 3])
    """
    dims = tuple(_wrap_dim(d, input.ndim) for d in _shape_arg(dims))
    if len(dims) != input.ndim or sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match "
            f"the length of the desired ordering of dimensions i.e. input.dim() = {input.ndim} "
            f"is not equal to len(dims) = {len(dims)}" if len(dims) != input.ndim
            else f"permute(): duplicate dims are not allowed, got {list(dims)}"
        )
    return _view_call("permute", input, {"dims": dims})


def transpose(input, dim0, dim1):
    """Swap two dimensions (a view).

    Examples
    --------
    >>> import torcia
    >>> torcia.transpose(torcia.zeros(2, 3, 4), 0, 2).shape
    torcia.Size([4, 3, 2])
    """
    n = input.ndim
    d0, d1 = _wrap_dim(dim0, n), _wrap_dim(dim1, n)
    if not n:
        return _view_call("view", input, {"shape": ()})
    return _view_call("transpose", input, {"dim0": d0, "dim1": d1})


swapaxes = swapdims = transpose


def t(input):
    """Transpose of a tensor of at most 2 dimensions.

    Examples
    --------
    >>> import torcia
    >>> torcia.t(torcia.tensor([[1, 2, 3]]))
    tensor([[1],
            [2],
            [3]])
    """
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    if input.ndim < 2:
        return _view_call("view", input, {"shape": tuple(input.shape)})
    return transpose(input, 0, 1)


def squeeze(input, dim=None):
    """Remove dimensions of size 1 (all, or those in ``dim``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 1, 3, 1)
    >>> torcia.squeeze(x).shape
    torcia.Size([2, 3])
    >>> torcia.squeeze(x, 1).shape
    torcia.Size([2, 3, 1])
    """
    d = None if dim is None else _dims(dim, input.ndim)
    if input.ndim == 0:
        return _view_call("view", input, {"shape": ()})
    return _view_call("squeeze", input, {"dim": d})


def unsqueeze(input, dim):
    """Insert a dimension of size 1 at ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, 2])
    >>> torcia.unsqueeze(x, 0).shape
    torcia.Size([1, 2])
    >>> torcia.unsqueeze(x, -1).shape
    torcia.Size([2, 1])
    """
    return _view_call("unsqueeze", input, {"dim": _wrap_dim(dim, input.ndim + 1)})


def expand(input, *sizes):
    """Broadcast to a larger shape without copying (``-1`` keeps a dimension).

    Examples
    --------
    >>> import torcia
    >>> torcia.expand(torcia.tensor([[1], [2]]), 2, 3)
    tensor([[1, 1, 1],
            [2, 2, 2]])
    """
    sizes = _shape_arg(sizes)
    have = input._data.shape
    lead = len(sizes) - len(have)
    if lead >= 0 and -1 not in sizes:
        for n, s in zip(have, sizes[lead:]):
            if n != s and n != 1:
                break
        else:  # nothing to infer, every size fits (the common case)
            return call("expand", (input,), {"shape": tuple(sizes)}, input)
    if len(sizes) < input.ndim:
        raise RuntimeError(
            f"expand(torcia.{input.dtype.name}{{{list(input.shape)}}}, size={list(sizes)}): the "
            "number of sizes provided must be greater or equal to the number of dimensions in "
            "the tensor"
        )
    lead = len(sizes) - input.ndim
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dim")
            s = input.shape[i - lead]
        elif i >= lead and input.shape[i - lead] not in (1, s):
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size "
                f"({input.shape[i - lead]}) at non-singleton dimension {i}.  Target sizes: "
                f"{list(sizes)}.  Tensor sizes: {list(input.shape)}"
            )
        shape.append(s)
    return _view_call("expand", input, {"shape": tuple(shape)})


def expand_as(input, other):
    """``input`` broadcast to the shape of ``other``, as a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.expand_as(torcia.tensor([1, 2]), torcia.zeros(3, 2)).shape
    torcia.Size([3, 2])
    """
    return expand(input, other.shape)


def broadcast_to(input, shape):
    """``input`` broadcast to ``shape``, as a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.broadcast_to(torcia.tensor([1, 2]), (2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    return expand(input, shape)


def broadcast_tensors(*tensors):
    """The ``tensors`` broadcast to their common shape (as views).

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.broadcast_tensors(torcia.tensor([[1], [2]]), torcia.tensor([10, 20, 30]))
    >>> a
    tensor([[1, 1, 1],
            [2, 2, 2]])
    >>> b.shape
    torcia.Size([2, 3])
    """
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def broadcast_shapes(*shapes):
    """The shape that tensors of the given ``shapes`` broadcast to.

    Examples
    --------
    >>> import torcia
    >>> torcia.broadcast_shapes((2, 1), (1, 3))
    torcia.Size([2, 3])
    """
    from torcia._tensor import Size

    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    ndim = builtins.max(map(len, shapes), default=0)
    out = [1] * ndim
    for index, shape in enumerate(shapes):
        for k in range(1, len(shape) + 1):
            if shape[-k] == out[-k] or shape[-k] == 1:
                continue
            if out[-k] != 1:
                # PyTorch's words: the first shape that does not fit the ones before it
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {shape[-k]} at {-k}! "
                    f"Mismatching argument at index {index} had {shape}; but expected shape "
                    f"should be broadcastable to {out}")
            out[-k] = shape[-k]
    return Size(out)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim..end_dim`` into one.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 3, 4)
    >>> torcia.flatten(x).shape
    torcia.Size([24])
    >>> torcia.flatten(x, start_dim=1).shape
    torcia.Size([2, 12])
    """
    s, e = _wrap_dim(start_dim, input.ndim), _wrap_dim(end_dim, input.ndim)
    if input.ndim == 0:
        return reshape(input, (1,))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = tuple(input.shape[:s]) + (-1,) + tuple(input.shape[e + 1:])
    if input.numel() == 0:
        shape = tuple(input.shape[:s]) + (math.prod(input.shape[s:e + 1]),) + tuple(
            input.shape[e + 1:])
    return reshape(input, shape)


def unflatten(input, dim, sizes):
    """Split dim ``dim`` into ``sizes``.

    Examples
    --------
    >>> import torcia
    >>> torcia.unflatten(torcia.zeros(2, 12), 1, (3, 4)).shape
    torcia.Size([2, 3, 4])
    """
    d = _wrap_dim(dim, input.ndim)
    sizes = tuple(sizes)
    inner = _infer_shape(sizes, input.shape[d], sizes)
    return view(input, tuple(input.shape[:d]) + inner + tuple(input.shape[d + 1:]))


def narrow(input, dim, start, length):
    """The slice ``start:start+length`` of dim ``dim`` (a view).

    Examples
    --------
    >>> import torcia
    >>> torcia.narrow(torcia.arange(10), 0, 2, 3)
    tensor([2, 3, 4])
    """
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(start, Tensor):
        start = int(start.item())
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _view_call("narrow", input, {"dim": d, "start": start, "length": length})


def unfold(input, dimension, size, step):
    """Sliding windows of ``size`` with ``step`` along ``dimension``, as a new last dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.unfold(torcia.arange(6), 0, 3, 2)
    tensor([[0, 1, 2],
            [2, 3, 4]])
    """
    d = _wrap_dim(dimension, input.ndim)
    if size > (input.shape[d] if input.ndim else 1):
        raise RuntimeError(f"maximum size for tensor at dimension {d} is "
                           f"{input.shape[d]} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return _view_call("unfold", input, {"dimension": d, "size": size, "step": step})


def movedim(input, source, destination):
    """Move dims from ``source`` positions to ``destination`` positions.

    Examples
    --------
    >>> import torcia
    >>> torcia.movedim(torcia.zeros(2, 3, 4), 0, -1).shape
    torcia.Size([3, 4, 2])
    """
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError("movedim: Invalid source or destination dims: source "
                           f"({src} dims) should contain the same number of dims as "
                           f"destination ({dst} dims)")
    n = input.ndim
    src = [_wrap_dim(s, n) for s in src]
    dst = [_wrap_dim(s, n) for s in dst]
    if not n:
        return _view_call("view", input, {"shape": ()})
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


def contiguous(input, memory_format=None):
    """``input`` itself when C-contiguous, else a contiguous copy.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6).reshape(2, 3).t()
    >>> x.is_contiguous(), torcia.contiguous(x).is_contiguous()
    (False, True)
    """
    if input.is_contiguous():
        return input
    return call("contiguous", (input,), {})


def clone(input, *, memory_format=None):
    """A copy with its own storage (gradients flow back to ``input``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, 2])
    >>> y = torcia.clone(x)
    >>> y[0] = 7
    >>> x, y
    (tensor([1, 2]), tensor([7, 2]))
    """
    return call("clone", (input,), {})


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal with ``offset`` of the 2-D planes (dim1, dim2), as a view.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(9).reshape(3, 3)
    >>> torcia.diagonal(x)
    tensor([0, 4, 8])
    >>> torcia.diagonal(x, offset=1)
    tensor([1, 5])
    """
    n = input.ndim
    d1, d2 = _wrap_dim(dim1, n), _wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _view_call("diagonal", input, {"offset": offset, "dim1": d1, "dim2": d2})


def as_strided(input, size, stride, storage_offset=None):
    """A view of ``input``'s storage with the given ``size``, ``stride`` and
    ``storage_offset`` (in elements; by default ``input``'s own). The storage is the memory
    of the tensor ``input`` is a view of: ``input``'s own shape and strides play no part.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6)
    >>> torcia.as_strided(x, (2, 2), (1, 2))
    tensor([[0, 2],
            [1, 3]])
    >>> torcia.as_strided(x[2:], (2,), (1,)), torcia.as_strided(x[2:], (2,), (1,), 0)
    (tensor([2, 3]), tensor([0, 1]))
    """
    from torcia._storage import storage_size

    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: got {len(size)} sizes "
                           f"and {len(stride)} strides")
    if builtins.any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, "
                           f"got strides: {list(stride)}")
    if builtins.any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {builtins.min(size)}"
                           f": {list(size)}")
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    need = 0 if 0 in size else offset + 1 + builtins.sum(
        (n - 1) * st for n, st in zip(size, stride))
    have = storage_size(input)
    if need > have and input._device.type != "meta":  # a meta tensor holds no storage
        item = input._data.itemsize
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {offset}, and itemsize {item} requiring a storage size of "
                           f"{need * item} are out of bounds for storage of size {have * item}")
    params = {"size": size, "stride": stride, "storage_offset": offset}
    root = input._base
    if root is None or (not input.storage_offset() and input.is_contiguous()
                        and input.numel() == have):
        # input holds its whole storage in order: read it through input, which keeps what
        # the base lacks (a gradient path, a forward-mode tangent)
        return _view_call("as_strided", input, params)
    if input._requires_grad and not root._requires_grad:
        raise RuntimeError("as_strided of a view that requires grad while its base does "
                           "not reaches memory outside the view; call .clone() first")
    # the view's geometry is relative to the storage: take it from the base
    return _view_call("as_strided", root, params)


def detach(input):
    """A tensor sharing storage with ``input`` but outside the graph.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(2, requires_grad=True)
    >>> torcia.detach(x * 2).requires_grad
    False
    """
    t = Tensor._make(input._data, input._device)
    t._vc = input._vc
    return t


def select(input, dim, index):
    """The slice of ``input`` at ``index`` along ``dim``, without that dimension (a view).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.select(x, 1, 0)
    tensor([1, 3])
    """
    d = _wrap_dim(dim, input.ndim)
    return getitem(input, (slice(None),) * d + (index,))


# ----- indexing -------------------------------------------------------------------------


def _basic_key(shape, key):
    """``key`` as a tuple when it is only in-range ints and slices of ints (the common case,
    checked without the general walk), else None.

    Keys end in an Ellipsis: NumPy then gives a 0-d view for all-int keys, not a scalar
    copy, as PyTorch does."""
    if key.__class__ is int:
        return (key, Ellipsis) if shape and -shape[0] <= key < shape[0] else None
    if key.__class__ is not tuple:
        key = (key,)
    if len(key) > len(shape):
        return None
    for k, size in zip(key, shape):
        cls = k.__class__
        if cls is int:
            if not -size <= k < size:
                return None
        elif cls is not slice or not (
            (k.start is None or k.start.__class__ is int)
            and (k.stop is None or k.stop.__class__ is int)
            and (k.step is None or (k.step.__class__ is int and k.step > 0))
        ):
            return None
    return key + (Ellipsis,)


def _index_key(input, key):
    """Turn a user index into a key of arrays; report out-of-range and bad keys like PyTorch."""
    shape = input._data.shape
    # a Python range indexes as the list of its ints, as in PyTorch
    if isinstance(key, range):
        key = list(key)
    elif isinstance(key, tuple) and builtins.any(isinstance(k, range) for k in key):
        key = tuple(list(k) if isinstance(k, range) else k for k in key)
    basic = _basic_key(shape, key)
    if basic is not None:
        return basic, False
    dev = input._device
    if key.__class__ is Tensor and key._device is dev and key._data.dtype.kind in "iu" and (
        shape and dev.backend.xp is np
    ):
        # one integer index tensor on NumPy: NumPy checks the range itself (see getitem)
        return (key._data, Ellipsis), True
    if not isinstance(key, tuple):
        key = (key,)
    ndim = len(shape)
    out = []
    dim = 0
    advanced = False
    n_specified = 0
    for k in key:
        if k is None or k is Ellipsis:
            continue
        is_mask = (isinstance(k, Tensor) and k._data.dtype.kind == "b") or (
            isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype.kind == "b")
        n_specified += np.ndim(k._data if isinstance(k, Tensor) else k) if is_mask else 1
    if n_specified > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    for k in key:
        if k is None:
            out.append(None)
            continue
        if k is Ellipsis:
            out.append(Ellipsis)
            dim = ndim - (n_specified - dim)
            continue
        if isinstance(k, (Tensor, list, np.ndarray)):
            if isinstance(k, Tensor):
                if k._device is not dev and k._device.type != "cpu":
                    raise RuntimeError(
                        f"indices should be either on cpu or on the same device as the indexed "
                        f"tensor ({dev})")
                host = k._data if k._device.type == "cpu" else None
                arr = k._data if k._device is dev else dev.backend.from_host(k._data, dev.index)
            else:
                host = arr = np.asarray(k)
                if dev.type != "cpu":
                    arr = dev.backend.xp.asarray(arr)
            kind = arr.dtype.kind
            if kind == "b":
                _check_mask(arr.shape, shape, dim)
                dim += arr.ndim
            elif kind in "iu":
                _check_range(host if host is not None else arr, shape[dim], dim)
                dim += 1
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            out.append(arr)
            advanced = True
            continue
        if isinstance(k, slice):
            step = k.step.item() if isinstance(k.step, Tensor) else k.step
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            out.append(slice(*(int(v) if isinstance(v, Tensor) else v
                               for v in (k.start, k.stop, k.step))))
            dim += 1
            continue
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            size = shape[dim]
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {size}")
            out.append(int(k))
            dim += 1
            continue
        if isinstance(k, bool):
            out.append(k)
            advanced = True
            continue
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
            f"are valid indices (got {type(k).__name__})"
        )
    if not builtins.any(k is Ellipsis for k in out):
        out.append(Ellipsis)  # all-int keys then give a 0-d view, as in _basic_key
    return tuple(out), advanced


def _check_mask(mask_shape, shape, dim):
    for j, m in enumerate(mask_shape):
        if m != shape[dim + j]:
            raise IndexError(
                f"The shape of the mask {list(mask_shape)} at index {j} does not match the "
                f"shape of the indexed tensor {list(shape)} at index {dim + j}")


def _check_range(arr, size, dim, exc=IndexError, negative=True, message=None):
    """Raise ``exc`` (IndexError for indexing; gather and scatter raise RuntimeError in
    PyTorch) naming the first out-of-range index. ``negative``: whether an index may count
    from the end, as in ``t[-1]``; gather, scatter and the index_* ops refuse it, as
    PyTorch does, instead of wrapping around. ``message`` replaces the default text."""
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < (-size if negative else 0) or hi >= size:
            bad = hi if hi >= size else lo
            raise exc(message or f"index {bad} is out of bounds for dimension {dim} with size "
                                 f"{size}")


def _is_array_key(k):
    return not (k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)))


def _consumed(key):
    """How many dimensions of the indexed tensor ``key`` uses (``...`` takes the rest)."""
    return builtins.sum(
        (k.ndim if k.dtype.kind == "b" else 1) if _is_array_key(k) else 1
        for k in key if k is not None and k is not Ellipsis)


def _torch_placement(key, shape):
    """Where PyTorch puts the broadcast dimensions when NumPy would put them elsewhere.

    NumPy counts an integer beside an index array as one more advanced index, so
    ``x[1, :, [0, 4]]`` has its advanced indices apart and the broadcast dimensions go
    first; PyTorch selects with the integer first and only the list is advanced, so they
    stay in place. Returns ``(nb, p)`` (``nb`` broadcast dimensions that NumPy puts first
    and PyTorch at output position ``p``), or None when both rules agree.
    """
    if builtins.any(isinstance(k, bool) for k in key):
        return None
    ints = [i for i, k in enumerate(key) if isinstance(k, (int, np.integer))]
    arrays = [i for i, k in enumerate(key) if _is_array_key(k)]
    if not ints or not arrays:
        return None
    numpy_adv = sorted(ints + arrays)
    if numpy_adv[-1] - numpy_adv[0] == len(numpy_adv) - 1:
        return None  # adjacent in NumPy, hence in PyTorch too, at the same place
    rest = [k for k in key if not isinstance(k, (int, np.integer))]
    torch_adv = [i for i, k in enumerate(rest) if _is_array_key(k)]
    if torch_adv[-1] - torch_adv[0] != len(torch_adv) - 1:
        return None  # apart in both: the broadcast dimensions go first in both
    consumed = _consumed(key)
    p = 0
    for k in rest[:torch_adv[0]]:
        p += len(shape) - consumed if k is Ellipsis else 1
    nb = len(np.broadcast_shapes(*(
        (1,) if k.dtype.kind == "b" else k.shape for k in key if _is_array_key(k))))
    return nb, p


def _indexed_shape(key, shape, placement):
    """The shape of ``input[key]`` under PyTorch's rule (``placement`` from above)."""
    nb, p = placement
    arrays = []
    rest = []
    dim = 0
    consumed = _consumed(key)
    for k in key:
        if k is None:
            rest.append(1)
        elif k is Ellipsis:
            n = len(shape) - consumed
            rest.extend(shape[dim:dim + n])
            dim += n
        elif isinstance(k, slice):
            rest.append(len(range(*k.indices(shape[dim]))))
            dim += 1
        elif isinstance(k, (int, np.integer)):
            dim += 1
        elif k.dtype.kind == "b":
            arrays.append((int(k.sum()),))
            dim += k.ndim
        else:
            arrays.append(k.shape)
            dim += 1
    return tuple(rest[:p]) + tuple(np.broadcast_shapes(*arrays)) + tuple(rest[p:])


def _moved(nb, p, n, to_torch):
    """The permutation between NumPy's layout (broadcast dimensions first) and PyTorch's."""
    if to_torch:
        return list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, n))
    return list(range(p, p + nb)) + list(range(p)) + list(range(p + nb, n))


def getitem(input, key):
    """``input[key]``: a view for basic indexing, a copy for advanced indexing.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6).reshape(2, 3)
    >>> torcia.getitem(x, (slice(None), 1))
    tensor([1, 4])
    """
    key, advanced = _index_key(input, key)
    try:
        out = call("getitem", (input,), {"key": key}, view_of=None if advanced else input)
    except IndexError as exc:
        # NumPy's range error, in PyTorch's words
        raise IndexError(str(exc).replace(" for axis ", " for dimension ")) from None
    placement = _torch_placement(key, input._data.shape) if advanced else None
    if placement is not None:
        out = contiguous(permute(out, _moved(*placement, out.ndim, True)))
    return out


def setitem(input, key, value):
    """``input[key] = value`` in place (recorded for autograd as an ``index_put``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3)
    >>> torcia.setitem(x, 1, 5.0)
    >>> x
    tensor([0., 5., 0.])
    """
    k, advanced = _index_key(input, key)
    if not isinstance(value, Tensor):
        from torcia._creation import tensor

        value = tensor(value, dtype=input.dtype, device=input.device)
    elif value.dtype is not input.dtype:
        value = to_dtype(value, input.dtype)
    placement = _torch_placement(k, input._data.shape) if advanced else None
    if placement is not None and value.ndim:
        target = _indexed_shape(k, input._data.shape, placement)
        try:
            np.broadcast_shapes(tuple(value.shape), target)
            if value.ndim > len(target):
                raise ValueError
        except ValueError:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                f"broadcast to indexing result of shape {list(target)}") from None
        value = permute(expand(value, *target), _moved(*placement, len(target), False))
    if not advanced:
        # PyTorch copies into the region input[key]: what the value may not partly overlap
        check_overlap(call("getitem", (input,), {"key": k}, view_of=input), (value,))
    write_inplace(lambda x, v: call("index_put", (x, v), {"key": k, "accumulate": False}),
                  input, (value,), {}, (value,) if advanced else ())


def index_put(input, indices, values, accumulate=False):
    """Out-of-place ``input[indices] = values`` (or ``+=`` with ``accumulate``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(4)
    >>> torcia.index_put(x, (torcia.tensor([0, 2]),), torcia.tensor(5.0))
    tensor([5., 0., 5., 0.])
    >>> torcia.index_put(x, (torcia.tensor([1, 1]),), torcia.tensor(1.0), accumulate=True)
    tensor([0., 2., 0., 0.])
    """
    k, _ = _index_key(input, tuple(indices))
    return call("index_put", (input, values), {"key": k, "accumulate": bool(accumulate)})


# ---------------------------------------------------------------------------------------
# joining, splitting, gathering
# ---------------------------------------------------------------------------------------


def _same_dtype(tensors, op):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{op}(): expected a non-empty list of Tensors")
    first = None
    same = True
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected a sequence of Tensors, got {type(t).__name__}")
        if first is None:
            first = t._data.dtype
        elif t._data.dtype is not first:
            same = False
    if same:
        return tensors
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = D.promote_types(dt, t.dtype)
    return [t if t.dtype is dt else to_dtype(t, dt) for t in tensors]


def cat(tensors, dim=0):
    """Concatenate along an existing ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cat([torcia.zeros(1, 2), torcia.ones(2, 2)]).shape
    torcia.Size([3, 2])
    """
    tensors = _same_dtype(tensors, "cat")
    n = tensors[0]._data.ndim
    if dim.__class__ is int and -n <= dim < n:
        try:
            return call("cat", tuple(tensors), {"dim": dim % n})
        except ValueError:
            pass  # the array module refused: find PyTorch's reason below
    # legacy: 1-D empty tensors are skipped whatever the others' shapes
    kept = [t for t in tensors if t._data.shape != (0,)] or tensors[:1]
    ref = kept[0]._data.shape
    if not ref:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    n = len(ref)
    d = dim if dim.__class__ is int and 0 <= dim < n else _wrap_dim(dim, n)
    rest = ref[:d] + ref[d + 1:]
    for i, t in enumerate(kept):
        shape = t._data.shape
        if shape[:d] + shape[d + 1:] != rest or len(shape) != n:
            _cat_mismatch(ref, shape, d, i)
    return call("cat", tuple(kept), {"dim": d})


def _cat_mismatch(ref, shape, d, i):
    if len(shape) != len(ref):
        raise RuntimeError(
            f"Tensors must have same number of dimensions: got {len(ref)} and {len(shape)}")
    for j in range(len(ref)):
        if j != d and shape[j] != ref[j]:
            raise RuntimeError(
                f"Sizes of tensors must match except in dimension {d}. Expected size "
                f"{ref[j]} but got size {shape[j]} for tensor number {i} in the list.")


concat = concatenate = cat


def stack(tensors, dim=0):
    """Join along a new ``dim``; all tensors must have the same shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.stack([torcia.tensor([1, 2]), torcia.tensor([3, 4])], dim=1)
    tensor([[1, 3],
            [2, 4]])
    """
    tensors = _same_dtype(tensors, "stack")
    ref = tensors[0]
    for i, t in enumerate(tensors):
        if t.shape != ref.shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(ref.shape)} at entry "
                f"0 and {list(t.shape)} at entry {i}")
    return call("stack", tuple(tensors), {"dim": _wrap_dim(dim, ref.ndim + 1)})


def hstack(tensors):
    """Concatenate ``tensors`` along their second dimension (the first for 1-D ones).

    Examples
    --------
    >>> import torcia
    >>> torcia.hstack([torcia.tensor([1, 2]), torcia.tensor([3])])
    tensor([1, 2, 3])
    >>> torcia.hstack([torcia.ones(2, 1), torcia.zeros(2, 2)])
    tensor([[1., 0., 0.],
            [1., 0., 0.]])
    """
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenate ``tensors`` along their first dimension (1-D ones as rows).

    Examples
    --------
    >>> import torcia
    >>> torcia.vstack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[1, 2],
            [3, 4]])
    """
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


def split(tensor, split_size_or_sections, dim=0):
    """Split into chunks of a size (the last may be smaller) or of the listed sizes.

    Examples
    --------
    >>> import torcia
    >>> torcia.split(torcia.arange(5), 2)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    >>> torcia.split(torcia.arange(5), [1, 4])
    (tensor([0]), tensor([1, 2, 3, 4]))
    """
    d = _wrap_dim(dim, tensor.ndim)
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {size}")
        sections = [step] * (size // step) + ([size % step] if size % step else []) if step else [0]
    else:
        sections = [int(s) for s in split_size_or_sections]
        if builtins.sum(sections) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sections}")
    if len(sections) == 1:
        return (_view_call("view", tensor, {"shape": tuple(tensor.shape)}),)
    outs = call("split", (tensor,), {"sections": tuple(sections), "dim": d})
    for o in outs:
        o._vc = tensor._vc
        o._base = tensor._base if tensor._base is not None else tensor
    return outs


def chunk(input, chunks, dim=0):
    """Split into ``chunks`` pieces of equal size (the last may be smaller).

    Examples
    --------
    >>> import torcia
    >>> torcia.chunk(torcia.arange(5), 2)
    (tensor([0, 1, 2]), tensor([3, 4]))
    """
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    size = input.shape[_wrap_dim(dim, input.ndim)]
    step = -(-size // chunks) if size else 1
    return split(input, step, dim)


def tensor_split(input, indices_or_sections, dim=0):
    """Split into ``n`` nearly equal pieces (the first ones larger), or at indices.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor_split(torcia.arange(7), 3)
    (tensor([0, 1, 2]), tensor([3, 4]), tensor([5, 6]))
    >>> torcia.tensor_split(torcia.arange(7), [1, 5])
    (tensor([0]), tensor([1, 2, 3, 4]), tensor([5, 6]))
    """
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.ndim > 1 or indices_or_sections.dtype is not D.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor of dtype long, but "
                               f"got a tensor with {indices_or_sections.ndim} dims and dtype "
                               f"{indices_or_sections.dtype}")
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        sections = [size // n + (1 if i < size % n else 0) for i in range(n)]
        return split(input, sections, d)
    # each piece is input[start:end] along d, with a Python slice's reading of negative and
    # out-of-range bounds: pieces can be empty, or overlap when the indices decrease
    bounds = [0, *(int(i) for i in indices_or_sections), None]
    head = (slice(None),) * d
    return tuple(getitem(input, (*head, slice(a, b))) for a, b in zip(bounds, bounds[1:]))


def unbind(input, dim=0):
    """The slices along ``dim``, each without that dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.unbind(torcia.tensor([[1, 2], [3, 4]]), dim=1)
    (tensor([1, 3]), tensor([2, 4]))
    """
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] == 0:
        return ()
    # one split node: its backward concatenates the slices' gradients once, where a select
    # per slice would scatter each into a zero tensor of the input's size
    return tuple(squeeze(t, d) for t in split(input, 1, d))


def _index_tensor(index, name="index"):
    if not isinstance(index, Tensor) or index.dtype not in (D.int64, D.int32):
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index, got {got}")
    return index


def gather(input, dim, index, *, sparse_grad=False):
    """Values of ``input`` along ``dim`` at positions ``index``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.gather(x, 1, torcia.tensor([[0, 0], [1, 0]]))
    tensor([[1, 1],
            [4, 3]])
    """
    d = _wrap_dim(dim, input.ndim)
    _index_tensor(index, "gather")
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for i in range(input.ndim):
        if i != d and index.shape[i] > input.shape[i]:
            raise RuntimeError(
                f"Size does not match at dimension {i} expected index {list(index.shape)} to be "
                f"smaller than self {list(input.shape)} apart from dimension {d}")
    _check_range(index._data, _size_at(input, d), d, RuntimeError, negative=False)
    return _along_dim("gather", (input, index), {"dim": d})


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """Write ``src`` (or ``value``) into a copy of ``input`` at ``index`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 3)
    >>> torcia.scatter(x, 1, torcia.tensor([[2], [0]]), torcia.tensor([[1.0], [2.0]]))
    tensor([[0., 0., 1.],
            [2., 0., 0.]])
    """
    d = _wrap_dim(dim, input.ndim)
    _index_tensor(index, "scatter")
    _check_range(index._data, _size_at(input, d), d, RuntimeError, negative=False)
    if src is None:
        src = value
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        if not isinstance(src, Tensor):
            from torcia._creation import full

            src = full(index.shape, src, dtype=input.dtype, device=input.device)
        if reduce == "add":
            return scatter_add(input, dim, index, src)
        from torcia._ops_extra import scatter_reduce

        return scatter_reduce(input, dim, index, src, "prod")
    if isinstance(src, Tensor) and src.dtype is not input.dtype:
        src = to_dtype(src, input.dtype)
    return _along_dim("scatter", (input, index, src), {"dim": d})


def scatter_add(input, dim, index, src):
    """Add ``src`` into a copy of ``input`` at ``index`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3)
    >>> torcia.scatter_add(x, 0, torcia.tensor([0, 0, 2]), torcia.tensor([1.0, 2.0, 3.0]))
    tensor([3., 0., 3.])
    """
    d = _wrap_dim(dim, input.ndim)
    _index_tensor(index, "scatter_add")
    _check_range(index._data, _size_at(input, d), d, RuntimeError, negative=False)
    return _along_dim("scatter_add", (input, index, src), {"dim": d})


def index_select(input, dim, index):
    """Rows (along ``dim``) of ``input`` at the 1-D ``index``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4], [5, 6]])
    >>> torcia.index_select(x, 0, torcia.tensor([2, 0]))
    tensor([[5, 6],
            [1, 2]])
    """
    d = _wrap_dim(dim, input.ndim)
    if index.dtype.category != 1 or index.ndim > 1:
        raise RuntimeError("index_select(): Index is supposed to be a vector of int64")
    _check_range(index._data, _size_at(input, d), d, IndexError,
                 negative=False, message="index out of range in self")
    return _along_dim("index_select", (input, index), {"dim": d})


def index_add(input, dim, index, source, *, alpha=1):
    """Add ``alpha * source`` into a copy of ``input`` at ``index`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3, 2)
    >>> torcia.index_add(x, 0, torcia.tensor([0, 2, 0]), torcia.ones(3, 2))
    tensor([[2., 2.],
            [0., 0.],
            [1., 1.]])
    """
    d = _wrap_dim(dim, input.ndim)
    # PyTorch's 1-D kernel and its n-D one word the error differently
    if input.ndim <= 1:
        _check_range(index._data, _size_at(input, d), d, IndexError, negative=False,
                     message="index out of range in self")
    else:
        _check_range(index._data, _size_at(input, d), d, RuntimeError, negative=False)
    _check_index_source(input, d, index, source, "index_add_")
    return _along_dim("index_add", (input, index, source), {"dim": d, "alpha": alpha})


def _check_index_source(input, d, index, source, name):
    """PyTorch's checks of index_add_/index_copy_'s source: one slice per index, each of the
    input's slice shape."""
    if not input.ndim or not source.ndim:
        if source.ndim != input.ndim or index.numel() != 1:
            raise RuntimeError(
                "source tensor shape must match self tensor shape, excluding the specified "
                f"dimension. Got self.shape = {list(input.shape)} source.shape = "
                f"{list(source.shape)}")
        return
    if index.numel() != source.shape[d]:
        raise RuntimeError(f"{name}(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim): ({source.shape[d]}), for dim: {d}")
    if source.ndim != input.ndim or builtins.any(
            a != b for i, (a, b) in enumerate(zip(input.shape, source.shape)) if i != d):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = {list(input.shape)} source.shape = "
            f"{list(source.shape)}")


def index_copy(input, dim, index, source):
    """A copy of ``input`` with its slices at ``index`` along ``dim`` from ``source``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3, 2)
    >>> torcia.index_copy(x, 0, torcia.tensor([2, 0]), torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[3., 4.],
            [0., 0.],
            [1., 2.]])
    """
    d = _wrap_dim(dim, input.ndim)
    bad = index._data[(index._data < 0) | (index._data >= _size_at(input, d))]
    if bad.size:
        raise IndexError(f"index_copy_(): index {int(bad[0])} is out of bounds for dimension "
                         f"{d} with size {_size_at(input, d)}")
    _check_index_source(input, d, index, source, "index_copy_")
    return _along_dim("index_copy", (input, index, source), {"dim": d})


def take_along_dim(input, indices, dim=None):
    """As :func:`gather` with broadcasting (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[10, 30, 20], [60, 40, 50]])
    >>> torcia.take_along_dim(x, torcia.argsort(x, dim=1), dim=1)
    tensor([[10, 20, 30],
            [40, 50, 60]])
    """
    if dim is None:
        return call("take_along_dim", (input, indices), {"dim": None})
    d = _wrap_dim(dim, input.ndim)
    shape_in = list(input.shape)
    shape_ix = list(indices.shape)
    shape_in[d] = shape_ix[d] = 1
    common = list(np.broadcast_shapes(tuple(shape_in), tuple(shape_ix)))
    a_shape = common.copy()
    a_shape[d] = input.shape[d]
    i_shape = common.copy()
    i_shape[d] = indices.shape[d]
    return call("take_along_dim", (expand(input, a_shape), expand(indices, i_shape)), {"dim": d})


def flip(input, dims):
    """Reverse the order along ``dims``.

    Examples
    --------
    >>> import torcia
    >>> torcia.flip(torcia.tensor([[1, 2], [3, 4]]), dims=(0,))
    tensor([[3, 4],
            [1, 2]])
    """
    d = _dims(dims if not isinstance(dims, int) else (dims,), input.ndim)
    return call("flip", (input,), {"dims": d or ()})


def fliplr(input):
    """``input`` reversed along its second dimension (left-right).

    Examples
    --------
    >>> import torcia
    >>> torcia.fliplr(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[2, 1],
            [4, 3]])
    """
    return flip(input, (1,))


def flipud(input):
    """``input`` reversed along its first dimension (up-down).

    Examples
    --------
    >>> import torcia
    >>> torcia.flipud(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[3, 4],
            [1, 2]])
    """
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    """Shift elements circularly by ``shifts`` along ``dims`` (flattened when None).

    Examples
    --------
    >>> import torcia
    >>> torcia.roll(torcia.tensor([1, 2, 3, 4]), 1)
    tensor([4, 1, 2, 3])
    """
    if dims is None:
        return call("roll", (input,), {"shifts": shifts, "dims": None})
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    return call("roll", (input,), {"shifts": shifts,
                                   "dims": tuple(_wrap_dim(d, input.ndim) for d in dims)})


def repeat(input, *sizes):
    """Tile ``input`` ``sizes`` times along each dim (PyTorch's ``Tensor.repeat``).

    Examples
    --------
    >>> import torcia
    >>> torcia.repeat(torcia.tensor([1, 2]), 2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    return call("repeat", (input,), {"sizes": sizes})


def tile(input, dims):
    """Repeat ``input`` ``dims`` times per dimension (an int counts for the last one).

    Examples
    --------
    >>> import torcia
    >>> torcia.tile(torcia.tensor([1, 2]), (2, 2))
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (along ``dim``, or of the flattened input).

    Examples
    --------
    >>> import torcia
    >>> torcia.repeat_interleave(torcia.tensor([1, 2]), 2)
    tensor([1, 1, 2, 2])
    >>> torcia.repeat_interleave(torcia.tensor([[1, 2], [3, 4]]), torcia.tensor([1, 2]), dim=0)
    tensor([[1, 2],
            [3, 4],
            [3, 4]])
    """
    if repeats is None:
        # repeat_interleave(repeats): each index i repeated repeats[i] times
        from torcia._creation import arange

        input, repeats = arange(input.shape[0], device=input.device), input
    if isinstance(repeats, Tensor):
        rep = repeats._data
    else:
        rep = int(repeats)
    d = None if dim is None else _wrap_dim(dim, input.ndim)
    if d is not None and not input.ndim:
        # PyTorch reads the size of dim 0, which a 0-dim tensor lacks
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         "1)")
    return call("repeat_interleave", (input,), {"repeats": rep, "dim": d})


def tril(input, diagonal=0):
    """The lower triangle (below ``diagonal``) of the last two dims; the rest zero.

    Examples
    --------
    >>> import torcia
    >>> torcia.tril(torcia.ones(3, 3))
    tensor([[1., 0., 0.],
            [1., 1., 0.],
            [1., 1., 1.]])
    """
    if input.ndim < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    return call("tril", (input,), {"diagonal": int(diagonal)})


def triu(input, diagonal=0):
    """The upper triangle (above ``diagonal``) of the last two dims; the rest zero.

    Examples
    --------
    >>> import torcia
    >>> torcia.triu(torcia.ones(3, 3), diagonal=1)
    tensor([[0., 1., 1.],
            [0., 0., 1.],
            [0., 0., 0.]])
    """
    if input.ndim < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    return call("triu", (input,), {"diagonal": int(diagonal)})


# ---------------------------------------------------------------------------------------
# linear algebra
# ---------------------------------------------------------------------------------------


def _matmul_dtype(a, b, name):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"{name}(): arguments must be Tensors")
    if a._data.dtype != b._data.dtype and not _autocasting(a):
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{a.dtype.name} != {b.dtype.name}")


def _autocasting(t) -> bool:
    """Whether autocast will give ``t``'s op one dtype (so a mismatch now is fine)."""
    from torcia._tensor import AUTOCAST

    return AUTOCAST.enabled and AUTOCAST.region.device_type == t.device.type


def matmul(input, other):
    """Matrix product with NumPy/PyTorch broadcasting of batch dims.

    Examples
    --------
    >>> import torcia
    >>> (torcia.ones(2, 3) @ torcia.ones(3, 4)).shape
    torcia.Size([2, 4])
    """
    if input.__class__ is Tensor and other.__class__ is Tensor and (
            input._data.dtype is other._data.dtype):
        pass  # two dense tensors of one dtype (the common case): nothing to check first
    elif input.is_sparse or other.is_sparse:
        return _sparse_mm(input, other)
    else:
        _matmul_dtype(input, other, "matmul")
    try:
        return call("matmul", (input, other), {})
    except (ValueError, RuntimeError) as exc:
        # the array module refused the shapes (the dispatcher words NumPy's refusal as a
        # broadcast of the whole shapes, where matmul broadcasts batch dims only): say why in
        # PyTorch's words; or a kernel refused something else, which is raised as it is
        refused = exc
    a, b = input._data.shape, other._data.shape
    if not a or not b:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{len(a)}D and {len(b)}D")
    if a[-1] != (b[-2] if len(b) > 1 else b[0]):
        a_shape = "x".join(map(str, a if len(a) > 1 else (1,) + a))
        b_shape = "x".join(map(str, b if len(b) > 1 else b + (1,)))
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a_shape} and {b_shape})")
    ba, bb = a[:-2], b[:-2]
    n = builtins.max(len(ba), len(bb))
    for i in range(1, n + 1):
        x = ba[-i] if i <= len(ba) else 1
        y = bb[-i] if i <= len(bb) else 1
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension {n - i}")
    if isinstance(refused, RuntimeError):
        raise refused
    raise RuntimeError(f"matmul: the array module refused shapes {list(a)} and {list(b)}")


def _sparse_mm(a, b):
    from torcia import sparse

    return sparse.mm(a, b)


def mm(input, mat2):
    """Product of two 2-D matrices (one may be a sparse COO matrix).

    Examples
    --------
    >>> import torcia
    >>> torcia.mm(torcia.tensor([[1.0, 2.0]]), torcia.tensor([[3.0], [4.0]]))
    tensor([[11.]])
    """
    if input.is_sparse or mat2.is_sparse:
        return _sparse_mm(input, mat2)
    _matmul_dtype(input, mat2, "mm")
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"self must be a matrix (got {input.ndim}-D and {mat2.ndim}-D)")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({input.shape[0]}x"
                           f"{input.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    return call("mm", (input, mat2), {})


def bmm(input, mat2):
    """Batched product of two 3-D tensors (b, n, m) @ (b, m, p).

    Examples
    --------
    >>> import torcia
    >>> a = torcia.ones(4, 2, 3)
    >>> torcia.bmm(a, torcia.ones(4, 3, 5)).shape
    torcia.Size([4, 2, 5])
    """
    _matmul_dtype(input, mat2, "bmm")
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor (got {input.ndim}-D and {mat2.ndim}-D)")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{input.shape[0]}, {input.shape[2]}] but got: [{mat2.shape[0]}, {mat2.shape[1]}].")
    return call("bmm", (input, mat2), {})


def dot(input, other):
    """Inner product of two 1-D tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.dot(torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0]))
    tensor(11.)
    """
    _matmul_dtype(input, other, "dot")
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        n, m = input.shape[0], other.shape[0]
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to "
                           f"have the same number of elements, but got {n} and {m} elements "
                           f"respectively")
    return call("dot", (input, other), {})


def inner(input, other):
    """Sum of products over the last dimension: ``dot`` for vectors, and for N-D inputs a
    result of shape ``input.shape[:-1] + other.shape[:-1]``; a 0-d operand scales.

    Examples
    --------
    >>> import torcia
    >>> torcia.inner(torcia.ones(2, 3), torcia.ones(4, 3)).shape
    torcia.Size([2, 4])
    """
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.ndim == 1 and other.ndim == 1:
        return dot(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    a = input.reshape(-1, input.shape[-1])
    b = other.reshape(-1, other.shape[-1])
    return (a @ b.mT).reshape(*input.shape[:-1], *other.shape[:-1])


def outer(input, vec2):
    """Outer product of two 1-D tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.outer(torcia.tensor([1, 2]), torcia.tensor([1, 10, 100]))
    tensor([[  1,  10, 100],
            [  2,  20, 200]])
    """
    for name, v in (("self", input), ("vec2", vec2)):
        if not isinstance(v, Tensor):
            raise TypeError(f"outer(): argument '{name}' must be Tensor, not "
                            f"{type(v).__name__}")
    outer_operands(input, vec2)
    # an elementwise product: its operands promote as mul's
    dt = result_type(input, vec2)
    return call("outer", (to_dtype(input, dt), to_dtype(vec2, dt)), {})


ger = outer


def einsum(equation, *operands):
    """Einstein summation, e.g. ``einsum("bij,bjk->bik", a, b)``.

    Examples
    --------
    >>> import torcia
    >>> a = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.einsum("ij,j->i", a, torcia.tensor([1.0, 1.0]))
    tensor([3., 7.])
    >>> torcia.einsum("ii", a)
    tensor(5.)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    operands = _same_dtype(operands, "einsum")
    return call("einsum", tuple(operands), {"equation": equation.replace(" ", "")})


def tensordot(a, b, dims=2):
    """Contract ``dims`` dimensions (an int, or two lists of dims) of ``a`` and ``b``.

    Examples
    --------
    >>> import torcia
    >>> a = torcia.ones(3, 4, 5)
    >>> torcia.tensordot(a, torcia.ones(4, 5, 2)).shape
    torcia.Size([3, 2])
    >>> torcia.tensordot(a, torcia.ones(5, 3), dims=([0, 2], [1, 0])).shape
    torcia.Size([4])
    """
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        dims = (tuple(range(a.ndim - dims, a.ndim)), tuple(range(dims)))
    else:
        dims = (tuple(_wrap_dim(d, a.ndim) for d in dims[0]),
                tuple(_wrap_dim(d, b.ndim) for d in dims[1]))
    if len(dims[0]) == a.ndim and len(dims[1]) == b.ndim:
        return _full_contraction(a, b, dims)
    return call("tensordot", (a, b), {"dims": dims})


@autocast_as("dot")
def _full_contraction(a, b, dims):
    # PyTorch contracts every dimension through dot, which its CPU autocast leaves alone
    return call("tensordot", (a, b), {"dims": dims})


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.addmm(torcia.ones(2, 2), m, torcia.eye(2), beta=10)
    tensor([[11., 12.],
            [13., 14.]])
    """
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if not isinstance(m, Tensor):
            raise TypeError(f"addmm(): argument '{name}' must be Tensor, not {type(m).__name__}")
        if m.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    for a, b in ((input, mat2), (mat1, mat2)):
        if a.dtype is not b.dtype and not _autocasting(a):
            raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                               f"{_tname(a.dtype)} and {_tname(b.dtype)}")
    # the bias must expand to the product's shape (expand's own error otherwise)
    expand(input, mat1.shape[0], mat2.shape[1])
    # beta and alpha in the inputs' dtype: an integer product scales by integers
    return call("addmm", (input, mat1, mat2), {"beta": _operand_as(beta, mat1.dtype),
                                               "alpha": _operand_as(alpha, mat1.dtype)})


def _scaled_sum(input, product, beta, alpha):
    """``beta * input + alpha * product``; with ``beta == 0`` ``input`` is ignored, NaN
    and infinity included, as PyTorch's BLAS-style ops do. beta and alpha take the
    product's dtype (an integer product scales by integers: 0.5 is 0)."""
    beta, alpha = _operand_as(beta, product.dtype), _operand_as(alpha, product.dtype)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        if input.requires_grad:
            from torcia._creation import ones

            # still in the graph, with a zero gradient, as PyTorch
            keep = ones(tuple(product.shape), dtype=D.bool_, device=product.device)
            return where(keep, product, input)
        return product  # the shapes were checked: input broadcasts to the product's
    return (input if beta == 1 else input * beta) + product


def _check_out_shape(input, shape, name):
    try:
        ok = np.broadcast_shapes(tuple(input.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"{name}: the input of shape {list(input.shape)} cannot be "
                           f"broadcast to the result's shape {list(shape)}")


@autocast_as("mv")
def mv(input, vec):
    """Matrix-vector product: ``input`` (n, m) times ``vec`` (m,) gives (n,).

    Examples
    --------
    >>> import torcia
    >>> torcia.mv(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]), torcia.tensor([1.0, -1.0]))
    tensor([-1., -1.])
    """
    _matmul_dtype(input, vec, "mv")
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, "
                           f"{vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat "
                           f"({input.shape[0]}x{input.shape[1]}), vec ({vec.shape[0]})")
    return matmul(input, vec)


@autocast_as("addmv")
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)`` for a matrix ``mat`` (n, m) and a vector
    ``vec`` (m,); ``input`` broadcasts to (n,) and is ignored when ``beta`` is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.addmv(torcia.ones(2), torcia.eye(2), torcia.tensor([2.0, 3.0]), alpha=2)
    tensor([5., 7.])
    """
    product = mv(mat, vec)
    _check_out_shape(input, tuple(product.shape), "addmv")
    return _scaled_sum(input, product, beta, alpha)


@autocast_as("addr")
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``; ``input`` broadcasts to
    (len(vec1), len(vec2)) and is ignored when ``beta`` is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.addr(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0]))
    tensor([[3., 4.],
            [6., 8.]])
    """
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D"
                           if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    product = outer(vec1, vec2)
    _check_out_shape(input, tuple(product.shape), "addr")
    return _scaled_sum(input, product, beta, alpha)


@autocast_as("baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``: (b, n, m) and (b, m, p) give
    (b, n, p); ``input`` broadcasts to that shape and is ignored when ``beta`` is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.baddbmm(torcia.ones(1, 1, 1), torcia.ones(1, 1, 3), torcia.ones(1, 3, 1))
    tensor([[[4.]]])
    """
    product = bmm(batch1, batch2)
    _check_out_shape(input, tuple(product.shape), "baddbmm")
    return _scaled_sum(input, product, beta, alpha)


@autocast_as("addbmm")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]``: the batch of products
    (b, n, m) @ (b, m, p) summed into one (n, p) matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.addbmm(torcia.zeros(1, 1), torcia.ones(2, 1, 3), torcia.ones(2, 3, 1))
    tensor([[6.]])
    """
    product = bmm(batch1, batch2)
    product = product.sum(0, dtype=product.dtype)  # integers keep their dtype
    _check_out_shape(input, tuple(product.shape), "addbmm")
    return _scaled_sum(input, product, beta, alpha)


@autocast_as("dist")
def dist(input, other, p=2):
    """The ``p``-norm of ``input - other`` (broadcast), as one 0-d tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.dist(torcia.tensor([0.0, 0.0]), torcia.tensor([3.0, 4.0]))
    tensor(5.)
    """
    from torcia.linalg import vector_norm

    return vector_norm(input - other, float(p))


@autocast_as("cdist")
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The ``p``-norm distance between each row of ``x1`` (B, P, M) and each row of
    ``x2`` (B, R, M): a (B, P, R) result; batch dimensions broadcast.

    Computed from the differences for every ``compute_mode``: the matrix-product form that
    PyTorch may use for ``p = 2`` loses accuracy for nearby points.

    Examples
    --------
    >>> import torcia
    >>> torcia.cdist(torcia.tensor([[0.0, 0.0]]), torcia.tensor([[3.0, 4.0], [0.0, 1.0]]))
    tensor([[5., 1.]])
    """
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: "
                               f"{x.ndim}D")
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{x.dtype.name}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    from torcia.linalg import vector_norm

    diff = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    return vector_norm(diff, float(p), dim=-1)


# ---------------------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------------------

#: Functions that are also Tensor methods under the same name.
METHODS = (
    _oplist.UNARY_FLOAT + _oplist.UNARY_SAME + _oplist.UNARY_BOOL + _oplist.BINARY
    + _oplist.COMPARE
    + ("equal", "isclose", "allclose")
    + ("div", "divide", "true_divide", "multiply", "subtract", "atan2", "hypot", "xlogy",
       "float_power", "round", "clamp", "clip", "clamp_min", "clamp_max", "lerp", "addcmul",
       "addcdiv", "masked_fill", "nan_to_num", "sum", "nansum", "mean", "prod", "amax",
       "amin", "max", "min", "argmax", "argmin", "var", "std", "norm", "logsumexp", "all",
       "any", "count_nonzero", "cumsum", "cumprod", "view", "reshape", "permute",
       "transpose", "swapaxes", "swapdims", "t", "squeeze", "unsqueeze", "expand", "expand_as",
       "broadcast_to", "flatten", "unflatten", "narrow", "unfold", "movedim", "moveaxis",
       "contiguous", "clone", "diagonal", "as_strided", "detach", "select", "split", "chunk",
       "tensor_split", "unbind", "gather", "scatter", "scatter_add", "index_select",
       "index_add", "index_copy", "index_put", "take_along_dim", "flip", "fliplr", "flipud",
       "roll", "repeat", "tile", "repeat_interleave", "tril", "triu", "matmul", "mm", "bmm",
       "dot", "inner", "outer", "ger", "tensordot", "addmm", "var_mean", "std_mean", "mv",
       "addmv", "addr", "addbmm", "baddbmm", "dist")
)

#: Methods with an in-place ``name_`` variant (computed out of place, then written back).
INPLACE = (
    _oplist.UNARY_FLOAT + ("neg", "abs", "sign", "square", "floor", "ceil", "trunc", "frac",
                           "relu", "bitwise_not", "logical_not")
    + _oplist.BINARY + _oplist.COMPARE
    + ("div", "atan2", "hypot", "xlogy", "clamp", "clip", "clamp_min", "clamp_max", "lerp",
       "addcmul", "addcdiv", "masked_fill", "nan_to_num", "round", "scatter", "scatter_add",
       "index_add", "index_copy", "index_put", "tril", "triu", "cumsum", "cumprod",
       "multiply", "subtract", "divide", "true_divide", "addmv", "addr", "addbmm",
       "baddbmm")
)


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


__all__ = [
    _n for _n, _v in list(globals().items())
    if not _n.startswith("_") and callable(_v) and getattr(_v, "__module__", "") == __name__
]
