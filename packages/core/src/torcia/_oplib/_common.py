"""Helpers the op families share: argument normalisation (dims, shapes, operands), the
cast to a dtype (``to_dtype``, exported by ``elementwise``), named-tuple results and the
Examples sections of the declared ops' functions and in-place methods. It
imports no family: every family may import it.
"""

from __future__ import annotations

import re

from torcia._ops import DECLARED
from torcia._ops._common import (
    check_tensor,
    dim_tuple,
    examples_section,
    functional,
    operand_as,
    promoted,
    readable_value,
    return_type,
    size_at,
    to_float,
)
from torcia._ops.sorting import nonzero_tuple
from torcia._tensor import Tensor, _torch_name, call

# the families' names of helpers written in torcia._ops, below them
_dims = dim_tuple
_return_type = return_type
_to_float = to_float
_size_at = size_at
_check_tensor = check_tensor
_F = functional
_readable_value = readable_value
_nonzero_tuple = nonzero_tuple
_operand_as = operand_as
_same_dtype = promoted


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


# The example of each in-place form of a function that is not an op declared in
# torcia._ops (whose declarations carry theirs): the input, the arguments after it and
# what the input holds afterwards.
_INPLACE_EXAMPLES = {
    "divide": ("[3.0, 8.0]", "2", "tensor([1.5000, 4.0000])"),
    "true_divide": ("[3.0, 8.0]", "2", "tensor([1.5000, 4.0000])"),
    "multiply": ("[1, 2]", "3", "tensor([3, 6])"),
    "subtract": ("[5, 7]", "2", "tensor([3, 5])"),
    "greater": ("[1.0, 2.0, 3.0]", "2", "tensor([0., 0., 1.])"),
    "greater_equal": ("[1.0, 2.0, 3.0]", "2", "tensor([0., 1., 1.])"),
    "less": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 0., 0.])"),
    "less_equal": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 1., 0.])"),
    "not_equal": ("[1.0, 2.0, 3.0]", "2", "tensor([1., 0., 1.])"),
    "clip": ("[-2.0, 0.5, 3.0]", "-1.0, 1.0", "tensor([-1.0000,  0.5000,  1.0000])"),
    "clamp_min": ("[-2.0, 0.5, 3.0]", "0.0", "tensor([0.0000, 0.5000, 3.0000])"),
    "clamp_max": ("[-2.0, 0.5, 3.0]", "1.0", "tensor([-2.0000,  0.5000,  1.0000])"),
    "index_fill": ("[1, 2, 3]", "0, torcia.tensor([0, 2]), 0", "tensor([0, 2, 0])"),
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
    "logit": ("[0.5, 0.75]", "", "tensor([0.0000, 1.0986])"),
    "mvlgamma": ("[2.5, 3.0]", "p=2", "tensor([0.8570, 1.5502])"),
    "igamma": ("[1.0, 2.0]", "torcia.tensor([1.0, 1.0])", "tensor([0.6321, 0.2642])"),
    "igammac": ("[1.0, 2.0]", "torcia.tensor([1.0, 1.0])", "tensor([0.3679, 0.7358])"),
    "polygamma": ("[1.0, 2.0]", "1", "tensor([1.6449, 0.6449])"),
    "conj_physical": ("[1.0, -2.0]", "", "tensor([ 1., -2.])"),
    "index_reduce": ("[1.0, 2.0, 3.0]",
                     '0, torcia.tensor([0, 0, 2]), torcia.tensor([5.0, 6.0, 7.0]), "prod"',
                     "tensor([30.,  2., 21.])"),
    "fill": ("[1.0, 2.0]", "7.0", "tensor([7., 7.])"),
    "zero": ("[1.0, 2.0]", "", "tensor([0., 0.])"),
    "detach": ("[1.0, 2.0], requires_grad=True", "", "tensor([1., 2.])"),
    "resize_as": ("[1, 2, 3, 4]", "torcia.zeros(2, 2)", "tensor([[1, 2],\n        [3, 4]])"),
    "swapaxes": ("[[1, 2], [3, 4]]", "0, 1", "tensor([[1, 3],\n        [2, 4]])"),
    "swapdims": ("[[1, 2], [3, 4]]", "0, 1", "tensor([[1, 3],\n        [2, 4]])"),
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
    """The Examples section of the declared op ``name``; "" for the others and for the
    ops declared without one (add and sub: their functions below carry their own)."""
    op = DECLARED.get(name)
    return examples_section(f"torcia.{name}", op.examples) if op is not None else ""


def _inplace_example(name, function=False):
    """The Examples section of the in-place ``name_``, as ``Tensor.name_`` (or
    ``torcia.name_`` with ``function``): the declaration's ``inplace_example`` or the entry
    of ``_INPLACE_EXAMPLES``, else the declared op's example run in place; "" for the
    others and for a bool result (which in place is written back in the input's dtype)."""
    op = DECLARED.get(name)
    if op is not None and op.inplace_example:
        first, given, result = op.inplace_example
        args = [given] if given else []
    elif name in _INPLACE_EXAMPLES:
        first, given, result = _INPLACE_EXAMPLES[name]
        args = [given] if given else []
    elif op is None or not op.examples or op.group in ("compare", "unary_bool"):
        return ""
    else:
        first, *others, result = op.examples[0]
        if op.group == "unary_float":
            # in place, the result keeps the input's dtype: an integer input cannot hold it
            first = re.sub(r"(?<![\w.])(-?\d+)(?![\d.])", r"\1.0", first)
        args = [f"torcia.tensor({a})" if a.startswith("[") else a for a in others]
    call = f"torcia.{name}_({', '.join(['x', *args])})" if function else \
        f"x.{name}_({', '.join(args)})"
    return (f"\n\nExamples\n--------\n>>> import torcia\n>>> x = torcia.tensor({first})\n"
            f">>> {call}\n{result}\n>>> x\n{result}\n")


def _tname(d):
    return _torch_name(d)
