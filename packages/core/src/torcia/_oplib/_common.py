"""Helpers the op families share: argument normalisation (dims, shapes, operands),
named-tuple results and the docstring examples of generated ops.
"""

from __future__ import annotations

import re

import numpy as np

from torcia import _dtype as D
from torcia import ops as _oplist
from torcia import plugins
from torcia._tensor import Tensor, _torch_name, _wrap_dim, call


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


def _operand_as(x, dt):
    """A tensor or Python-number operand of an op computing in ``dt``, converted to it: a
    number as PyTorch's scalars, so -1 bounds a uint8 tensor at 255."""
    if isinstance(x, Tensor):
        return x if x.dtype is dt else to_dtype(x, dt)
    if x is None or dt.category == 3 or x.__class__ is complex:
        return x
    return np.array(x).astype(dt.to_numpy())[()]


def _to_float(input) -> Tensor:
    """``input`` with an integer or bool dtype cast to the default float dtype, as ops that
    compute in floating point take it; float and complex inputs are returned as they are."""
    if input.dtype.category >= 2:
        return input
    return call("cast", (input,), {"dtype": D.get_default_dtype().to_numpy()})


def _tname(d):
    return _torch_name(d)


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


def _check_tensor(x, name: str, fn: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _F():  # noqa: N802 - the usual name of the functional module
    return plugins.lent("torcia.nn.functional", "torcia-nn")


def _sparse():
    # torcia.sparse imports this module (for its layout), so it is reached at call time
    from torcia import sparse

    return sparse


# the other families, bound once this one has loaded (they may import it first)
from torcia._oplib.elementwise import to_dtype
from torcia._oplib.views import reshape
