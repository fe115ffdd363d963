"""Tracing a model into an ONNX graph."""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

import onnx
import torcia
from onnx import helper, numpy_helper
from torcia import nn
from torcia.library import TRACE_ORDER, DispatchMode, Tensor, op_table
from torcia.utils import pytree

_INT_MAX = np.iinfo(np.int64).max


class UnsupportedOperatorError(RuntimeError):
    """An op of the traced forward pass has no ONNX translation.

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.onnx.UnsupportedOperatorError, RuntimeError)
    True
    """


class _Unsupported:
    """Stands for a traced value ONNX cannot represent (e.g. max-pool indices)."""

    def __init__(self, what):
        self.what = what


class Graph:
    """The ONNX graph under construction: nodes, initializers, and the ONNX value name of
    every array the trace has seen (by object identity; the arrays are kept alive)."""

    def __init__(self, opset):
        self.opset = opset
        self.nodes = []
        self.initializers = []
        self.names: dict[int, object] = {}
        self.keep = []
        self.module_path = ["<model>"]
        self._count = 0

    def fresh(self, base):
        self._count += 1
        return f"{base}_{self._count}"

    def bind(self, arr, name):
        self.names[id(arr)] = name
        self.keep.append(arr)

    def const(self, value, dtype=None, base="const"):
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(base)
        self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    def ints(self, values):
        return self.const(np.asarray(list(values), dtype=np.int64), base="shape")

    def value(self, x, like=None):
        """The ONNX name of an input: a traced array, a constant array, or a scalar (made
        a constant of ``like``'s dtype)."""
        if isinstance(x, np.ndarray):
            name = self.names.get(id(x))
            if isinstance(name, _Unsupported):
                raise UnsupportedOperatorError(
                    f"{name.what} cannot be exported to ONNX (used in module "
                    f"'{self.module_path[-1]}')")
            if name is None:
                name = self.const(x)
                self.bind(x, name)
            return name
        dtype = like.dtype if isinstance(like, np.ndarray) else None
        return self.const(np.asarray(x, dtype=dtype))

    def node(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=self.fresh(op_type), **attrs))
        return outs if n_out > 1 else outs[0]


# ---------------------------------------------------------------------------------------
# op -> ONNX
# ---------------------------------------------------------------------------------------

#: op -> its converter, as written (the trace reads :func:`converters`)
CONVERTERS = {}
#: the ops of CONVERTERS that a plugin defines, not core: torcia-ao's quantized ops, which
#: torcia-onnx does not depend on, are ops only while torcia-ao is installed
_PLUGIN_OPS: set = set()


def converts(*ops, plugin=False):
    """Register the decorated function as the converter of ``ops`` (``plugin``: ops a
    plugin defines, see ``_PLUGIN_OPS``)."""

    def register(fn):
        for op in ops:
            CONVERTERS[op] = fn
        if plugin:
            _PLUGIN_OPS.update(ops)
        return fn

    return register


@functools.cache
def converters() -> dict:
    """CONVERTERS as the trace reads it, built at the first export with each op resolved to
    its record (``library.op_table``): a converter of a name that is no op (misspelt,
    renamed, or an op that became a composite the trace sees through) is an error naming
    it, rather than one no trace reaches; a plugin's op is left out while no installed
    plugin defines it."""
    return op_table("torcia.onnx._export.CONVERTERS", CONVERTERS, optional=_PLUGIN_OPS)


@functools.cache
def _creation() -> dict:
    """The creation ops, baked in as constants where they are used, resolved as
    :func:`converters`."""
    return op_table("torcia.onnx._export._CREATION", dict.fromkeys(_CREATION))


_UNARY = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin",
          "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "tanh": "Tanh",
          "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "sigmoid": "Sigmoid",
          "erf": "Erf", "floor": "Floor", "ceil": "Ceil", "relu": "Relu", "sign": "Sign",
          "isnan": "IsNaN", "logical_not": "Not", "softsign": "Softsign",
          "hardswish": "HardSwish", "bitwise_not": "BitwiseNot"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "pow": "Pow", "maximum": "Max",
           "minimum": "Min", "eq": "Equal", "lt": "Less", "gt": "Greater",
           "le": "LessOrEqual", "ge": "GreaterOrEqual", "logical_and": "And",
           "logical_or": "Or", "logical_xor": "Xor", "matmul": "MatMul", "mm": "MatMul",
           "bmm": "MatMul", "dot": "MatMul"}


@converts(*_UNARY)
def _unary(g, op, args, p, out):
    return g.node(_UNARY[op], [g.value(args[0])])


@converts(*_BINARY)
def _binary(g, op, args, p, out):
    a, b = args
    like = a if isinstance(a, np.ndarray) else b
    other = g.value(b, like)
    if p.get("alpha", 1) != 1:  # add's and sub's: a op alpha * b
        other = g.node("Mul", [other, g.value(p["alpha"], like)])
    return g.node(_BINARY[op], [g.value(a, like), other])


@converts("div")
def _div(g, op, args, p, out):
    if p.get("rounding_mode") is not None:
        raise UnsupportedOperatorError("div with rounding_mode")
    a, b = args
    like = a if isinstance(a, np.ndarray) else b
    return g.node("Div", [g.value(a, like), g.value(b, like)])


@converts("ne")
def _ne(g, op, args, p, out):
    return g.node("Not", [_binary(g, "eq", args, p, out)])


@converts("rsqrt")
def _rsqrt(g, op, args, p, out):
    return g.node("Reciprocal", [g.node("Sqrt", [g.value(args[0])])])


@converts("square")
def _square(g, op, args, p, out):
    x = g.value(args[0])
    return g.node("Mul", [x, x])


@converts("log1p", "expm1", "log2", "log10")
def _log_exp(g, op, args, p, out):
    x = args[0]
    xn = g.value(x)
    if op == "log1p":
        return g.node("Log", [g.node("Add", [xn, g.value(1.0, x)])])
    if op == "expm1":
        return g.node("Sub", [g.node("Exp", [xn]), g.value(1.0, x)])
    base = 2.0 if op == "log2" else 10.0
    return g.node("Div", [g.node("Log", [xn]), g.value(math.log(base), x)])


@converts("isinf")
def _isinf(g, op, args, p, out):
    return g.node("IsInf", [g.value(args[0])])


@converts("round")
def _round(g, op, args, p, out):
    if p.get("decimals", 0):
        raise UnsupportedOperatorError("round with decimals")
    return g.node("Round", [g.value(args[0])])  # half to even, as torcia's


@converts("addcmul", "addcdiv")
def _addc(g, op, args, p, out):
    x, t1, t2 = args
    combine = g.node("Mul" if op == "addcmul" else "Div", [g.value(t1, x), g.value(t2, x)])
    scaled = g.node("Mul", [combine, g.value(p.get("value", 1), x)])
    return g.node("Add", [g.value(x), scaled])


@converts("lerp")
def _lerp(g, op, args, p, out):
    start, end, weight = args
    diff = g.node("Sub", [g.value(end, start), g.value(start)])
    return g.node("Add", [g.value(start), g.node("Mul", [diff, g.value(weight, start)])])


@converts("cumsum")
def _cumsum(g, op, args, p, out):
    y = g.node("CumSum", [g.value(args[0]), g.const(np.int64(p["dim"]))])
    if p.get("dtype") is not None:
        y = g.node("Cast", [y], to=helper.np_dtype_to_tensor_dtype(np.dtype(p["dtype"])))
    return y


@converts("topk")
def _topk(g, op, args, p, out):
    values, indices = g.node("TopK", [g.value(args[0]), g.ints([p["k"]])], n_out=2,
                             axis=p.get("dim", -1), largest=int(p.get("largest", True)),
                             sorted=int(p.get("sorted", True)))
    return [values, indices]


@converts("pad")
def _pad(g, op, args, p, out):
    x = args[0]
    pad = list(p["pad"])
    begins, ends = [0] * x.ndim, [0] * x.ndim
    for i in range(len(pad) // 2):  # torcia's pad runs from the last dim backwards
        begins[x.ndim - 1 - i], ends[x.ndim - 1 - i] = pad[2 * i], pad[2 * i + 1]
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}.get(
        p.get("mode", "constant"))
    if mode is None:
        raise UnsupportedOperatorError(f"pad with mode={p.get('mode')!r}")
    inputs = [g.value(x), g.ints(begins + ends)]
    if mode == "constant":
        inputs.append(g.value(p.get("value") or 0.0, x))
    return g.node("Pad", inputs, mode=mode)


@converts("tile")
def _tile(g, op, args, p, out):
    return g.node("Tile", [g.value(args[0]), g.ints(p["dims"])])


@converts("contiguous", "clone", "detach_view")
def _identity(g, op, args, p, out):
    return g.node("Identity", [g.value(args[0])])


@converts("cast")
def _cast(g, op, args, p, out):
    return g.node("Cast", [g.value(args[0])],
                  to=helper.np_dtype_to_tensor_dtype(np.dtype(p["dtype"])))


@converts("where")
def _where(g, op, args, p, out):
    cond, a, b = args
    like = a if isinstance(a, np.ndarray) else b
    return g.node("Where", [g.value(cond), g.value(a, like), g.value(b, like)])


@converts("masked_fill")
def _masked_fill(g, op, args, p, out):
    x, mask = args
    return g.node("Where", [g.value(mask), g.value(p["value"], x), g.value(x)])


@converts("clamp")
def _clamp(g, op, args, p, out):
    x, lo, hi = args
    y = g.value(x)
    if lo is not None:
        y = g.node("Max", [y, g.value(lo, x)])
    if hi is not None:
        y = g.node("Min", [y, g.value(hi, x)])
    return y


@converts("addmm")
def _addmm(g, op, args, p, out):
    c, a, b = args
    if a.ndim == 2:
        return g.node("Gemm", [g.value(a), g.value(b), g.value(c)], alpha=float(p["alpha"]),
                      beta=float(p["beta"]))
    # baddbmm: Gemm takes matrices only
    y = g.node("MatMul", [g.value(a), g.value(b)])
    if p["alpha"] != 1:
        y = g.node("Mul", [y, g.value(p["alpha"], a)])
    if p["beta"] == 0:
        return y
    cc = g.value(c) if p["beta"] == 1 else g.node("Mul", [g.value(c), g.value(p["beta"], a)])
    return g.node("Add", [y, cc])


@converts("linear")
def _linear(g, op, args, p, out):
    x, w, b = args
    if x.ndim == 2 and b is not None:
        return g.node("Gemm", [g.value(x), g.value(w), g.value(b)], transB=1)
    y = g.node("MatMul", [g.value(x), g.node("Transpose", [g.value(w)], perm=[1, 0])])
    return g.node("Add", [y, g.value(b)]) if b is not None else y


@converts("einsum")
def _einsum(g, op, args, p, out):
    return g.node("Einsum", [g.value(a) for a in args], equation=p["equation"])


@converts("outer")
def _outer(g, op, args, p, out):
    a = g.node("Unsqueeze", [g.value(args[0]), g.ints([1])])
    b = g.node("Unsqueeze", [g.value(args[1]), g.ints([0])])
    return g.node("Mul", [a, b])


# ----- shape --------------------------------------------------------------------------


@converts("view", "reshape")
def _reshape(g, op, args, p, out):
    x = args[0]
    shape = list(out.shape)
    # a leading dim equal to the input's is copied (0), so a dynamic batch survives
    if x.ndim and shape and shape[0] == x.shape[0]:
        shape[0] = 0
    return g.node("Reshape", [g.value(x), g.ints(shape)])


@converts("permute")
def _permute(g, op, args, p, out):
    return g.node("Transpose", [g.value(args[0])], perm=list(p["dims"]))


@converts("transpose")
def _transpose(g, op, args, p, out):
    perm = list(range(args[0].ndim))
    perm[p["dim0"]], perm[p["dim1"]] = perm[p["dim1"]], perm[p["dim0"]]
    return g.node("Transpose", [g.value(args[0])], perm=perm)


@converts("squeeze")
def _squeeze(g, op, args, p, out):
    x = args[0]
    dims = p.get("dim")
    axes = [d for d in (dims if dims is not None else range(x.ndim)) if x.shape[d] == 1]
    return g.node("Squeeze", [g.value(x), g.ints(axes)]) if axes else _identity(g, op, args,
                                                                              p, out)


@converts("unsqueeze")
def _unsqueeze(g, op, args, p, out):
    return g.node("Unsqueeze", [g.value(args[0]), g.ints([p["dim"]])])


@converts("expand")
def _expand(g, op, args, p, out):
    x = args[0]
    shape = list(p["shape"])
    lead = len(shape) - x.ndim
    # dims the input already has stay 1: Expand keeps them, whatever their size at run time
    for i in range(x.ndim):
        if x.shape[i] == shape[lead + i]:
            shape[lead + i] = 1
    return g.node("Expand", [g.value(x), g.ints(shape)])


def _slice(g, x, axis, start, stop, step):
    return g.node("Slice", [x, g.ints([start]), g.ints([stop]), g.ints([axis]), g.ints([step])])


@converts("narrow")
def _narrow(g, op, args, p, out):
    return _slice(g, g.value(args[0]), p["dim"], p["start"], p["start"] + p["length"], 1)


@converts("getitem")
def _getitem(g, op, args, p, out):
    x = args[0]
    key = p["key"]
    if Ellipsis in key:
        i = key.index(Ellipsis)
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - used) + key[i + 1:]
    y = g.value(x)
    axis = 0
    for k in key:
        if k is None:
            y = g.node("Unsqueeze", [y, g.ints([axis])])
            axis += 1
        elif isinstance(k, slice):
            start, stop, step = k.start, k.stop, k.step or 1
            if (start, stop, step) != (None, None, 1):
                if step < 0:
                    raise UnsupportedOperatorError("indexing with a negative step")
                y = _slice(g, y, axis, start or 0, _INT_MAX if stop is None else stop, step)
            axis += 1
        elif isinstance(k, (int, np.integer)):
            y = g.node("Gather", [y, g.const(np.int64(k))], axis=axis)
        elif isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.ndim <= 1:
            y = g.node("Gather", [y, g.value(k.astype(np.int64))], axis=axis)
            axis += k.ndim
        else:
            raise UnsupportedOperatorError(f"indexing with {type(k).__name__} keys")
    return y


@converts("cat")
def _cat(g, op, args, p, out):
    return g.node("Concat", [g.value(a) for a in args], axis=p["dim"])


@converts("stack")
def _stack(g, op, args, p, out):
    parts = [g.node("Unsqueeze", [g.value(a), g.ints([p["dim"]])]) for a in args]
    return g.node("Concat", parts, axis=p["dim"])


@converts("split")
def _split(g, op, args, p, out):
    names = g.node("Split", [g.value(args[0]), g.ints(p["sections"])], n_out=len(out),
                   axis=p["dim"])
    return names if isinstance(names, list) else [names]


@converts("flip")
def _flip(g, op, args, p, out):
    y = g.value(args[0])
    for d in p["dims"]:
        y = _slice(g, y, d, -1, -_INT_MAX, -1)
    return y


@converts("tril", "triu")
def _trilu(g, op, args, p, out):
    return g.node("Trilu", [g.value(args[0]), g.const(np.int64(p["diagonal"]))],
                  upper=int(op == "triu"))


@converts("index_select")
def _index_select(g, op, args, p, out):
    return g.node("Gather", [g.value(args[0]), g.value(args[1])], axis=p["dim"])


@converts("gather")
def _gather(g, op, args, p, out):
    return g.node("GatherElements", [g.value(args[0]), g.value(args[1])], axis=p["dim"])


@converts("repeat")
def _repeat(g, op, args, p, out):
    x = args[0]
    sizes = list(p["sizes"])
    y = g.value(x)
    extra = len(sizes) - x.ndim
    if extra:
        y = g.node("Unsqueeze", [y, g.ints(range(extra))])
    return g.node("Tile", [y, g.ints(sizes)])


# ----- reductions ---------------------------------------------------------------------


def _axes(p, x):
    return list(range(x.ndim)) if p.get("dim") is None else list(p["dim"])


def _reduce(g, onnx_op, x, axes, keepdim):
    """Reduce ``x`` (a traced array, or the ONNX name of a value) over ``axes``."""
    x = x if isinstance(x, str) else g.value(x)
    # ReduceSum takes axes as an input since opset 13, the others since 18
    if onnx_op == "ReduceSum" or g.opset >= 18:
        return g.node(onnx_op, [x, g.ints(axes)], keepdims=int(keepdim))
    return g.node(onnx_op, [x], axes=axes, keepdims=int(keepdim))


@converts("sum", "mean", "amax", "amin", "logsumexp", "prod")
def _reduction(g, op, args, p, out):
    onnx_op = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax",
               "amin": "ReduceMin", "logsumexp": "ReduceLogSumExp", "prod": "ReduceProd"}[op]
    y = _reduce(g, onnx_op, args[0], _axes(p, args[0]), p.get("keepdim", False))
    if p.get("dtype") is not None:
        y = g.node("Cast", [y], to=helper.np_dtype_to_tensor_dtype(np.dtype(p["dtype"])))
    return y


@converts("max_dim", "min_dim")
def _max_dim(g, op, args, p, out):
    kind = "Max" if op == "max_dim" else "Min"
    values = _reduce(g, f"Reduce{kind}", args[0], [p["dim"]], p["keepdim"])
    indices = g.node(f"Arg{kind}", [g.value(args[0])], axis=p["dim"],
                     keepdims=int(p["keepdim"]))
    return [values, indices]


@converts("argmax", "argmin")
def _argmax(g, op, args, p, out):
    x = args[0]
    y = g.value(x)
    if p["dim"] is None:
        y = g.node("Reshape", [y, g.ints([-1])])
        return g.node("ArgMax" if op == "argmax" else "ArgMin", [y], axis=0, keepdims=0)
    return g.node("ArgMax" if op == "argmax" else "ArgMin", [y], axis=p["dim"],
                  keepdims=int(p["keepdim"]))


@converts("var", "std")
def _var(g, op, args, p, out):
    x = args[0]
    axes = _axes(p, x)
    n = math.prod(x.shape[a] for a in axes)
    centred = g.node("Sub", [g.value(x), _reduce(g, "ReduceMean", x, axes, True)])
    squared = g.node("Mul", [centred, centred])
    total = g.node("ReduceSum", [squared, g.ints(axes)], keepdims=int(p["keepdim"]))
    y = g.node("Div", [total, g.const(np.asarray(max(n - p["correction"], 0), x.dtype))])
    return g.node("Sqrt", [y]) if op == "std" else y


@converts("norm")
def _norm(g, op, args, p, out):
    onnx_op = {1.0: "ReduceL1", 2.0: "ReduceL2"}.get(float(p["p"]))
    if onnx_op is None:
        raise UnsupportedOperatorError(f"norm with p={p['p']}")
    return _reduce(g, onnx_op, args[0], _axes(p, args[0]), p["keepdim"])


@converts("softmax", "log_softmax")
def _softmax(g, op, args, p, out):
    return g.node("Softmax" if op == "softmax" else "LogSoftmax", [g.value(args[0])],
                  axis=p["dim"])


@converts("flash_attention")
def _flash_attention(g, op, args, p, out):
    """scaled_dot_product_attention's fused op (what MultiheadAttention without weights
    runs) as its math: softmax(q k^T scale + mask) v, a query that may attend to no key
    given zero weights, as torcia's and PyTorch's attention give it."""
    q, k, v, mask = args
    if k.shape[:-2] != q.shape[:-2]:
        raise UnsupportedOperatorError("flash_attention with grouped query heads")
    perm = list(range(k.ndim))
    perm[-2:] = perm[-1], perm[-2]
    scores = g.node("MatMul", [g.value(q), g.node("Transpose", [g.value(k)], perm=perm)])
    scores = g.node("Mul", [scores, g.value(p["scale"], q)])
    if p["is_causal"]:
        allowed = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
        scores = g.node("Add", [scores, g.const(np.where(allowed, 0, -np.inf), q.dtype)])
    elif mask is not None and mask.dtype == np.bool_:
        scores = g.node("Where", [g.value(mask), scores, g.value(-np.inf, q)])
    elif mask is not None:
        scores = g.node("Add", [scores, g.value(mask)])
    weights = g.node("Softmax", [scores], axis=-1)
    if p["is_causal"] or mask is not None:
        blocked = g.node("Equal", [_reduce(g, "ReduceMax", scores, [-1], True),
                                   g.value(-np.inf, q)])
        weights = g.node("Where", [blocked, g.value(0.0, q), weights])
    return [g.node("MatMul", [weights, g.value(v)])]


# ----- layers -------------------------------------------------------------------------


def _pads(padding):
    return [lo for lo, _ in padding] + [hi for _, hi in padding]


@converts("conv")
def _conv(g, op, args, p, out):
    x, w, b = args
    inputs = [g.value(x), g.value(w)] + ([g.value(b)] if b is not None else [])
    return g.node("Conv", inputs, strides=list(p["stride"]), pads=_pads(p["padding"]),
                  dilations=list(p["dilation"]), group=p["groups"],
                  kernel_shape=list(w.shape[2:]))


def _conv_transpose_node(g, inputs, attrs, output_padding):
    """A ConvTranspose node. onnxruntime refuses an output padding not below the stride,
    which PyTorch allows below the dilation too: that case is the whole product, padded
    with zeros at the end, cropped by the padding, the bias added after."""
    if all(o < s for o, s in zip(output_padding, attrs["strides"])):
        return g.node("ConvTranspose", inputs, output_padding=list(output_padding), **attrs)
    nd = len(output_padding)
    full = g.node("ConvTranspose", inputs[:2], **{**attrs, "pads": [0] * (2 * nd)})
    padded = g.node("Pad", [full, g.ints([0] * (nd + 2) + [0, 0] + list(output_padding))])
    lows, highs = attrs["pads"][:nd], attrs["pads"][nd:]
    y = g.node("Slice", [padded, g.ints(lows), g.ints([-h if h else _INT_MAX for h in highs]),
                         g.ints(range(2, nd + 2))])
    if len(inputs) > 2:
        y = g.node("Add", [y, g.node("Reshape", [inputs[2], g.ints([1, -1] + [1] * nd)])])
    return y


@converts("conv_transpose")
def _conv_transpose(g, op, args, p, out):
    x, w, b = args
    inputs = [g.value(x), g.value(w)] + ([g.value(b)] if b is not None else [])
    attrs = {"strides": list(p["stride"]), "pads": _pads(p["padding"]),
             "dilations": list(p["dilation"]), "group": p["groups"],
             "kernel_shape": list(w.shape[2:])}
    return _conv_transpose_node(g, inputs, attrs, list(p["output_padding"]))


def _max_pool_node(g, x, p):
    return g.node("MaxPool", [g.value(x)], kernel_shape=list(p["kernel_size"]),
                  strides=list(p["stride"]), pads=list(p["padding"]) * 2,
                  dilations=list(p["dilation"]), ceil_mode=int(p["ceil_mode"]))


@converts("max_pool")
def _max_pool(g, op, args, p, out):
    return [_max_pool_node(g, args[0], p),
            _Unsupported("max_pool's indices (return_indices=True)")]


@converts("avg_pool")
def _avg_pool(g, op, args, p, out):
    if p.get("divisor_override"):
        raise UnsupportedOperatorError("avg_pool with divisor_override")
    return g.node("AveragePool", [g.value(args[0])], kernel_shape=list(p["kernel_size"]),
                  strides=list(p["stride"]), pads=list(p["padding"]) * 2,
                  ceil_mode=int(p["ceil_mode"]),
                  count_include_pad=int(p["count_include_pad"]))


@converts("adaptive_max_pool")
def _adaptive(g, op, args, p, out):
    x = args[0]
    size = list(p["output_size"])
    if all(s == 1 for s in size):
        y = g.node("GlobalMaxPool", [g.value(x)])
    elif all(i % o == 0 for i, o in zip(x.shape[2:], size)):
        k = [i // o for i, o in zip(x.shape[2:], size)]
        y = g.node("MaxPool", [g.value(x)], kernel_shape=k, strides=k)
    else:
        raise UnsupportedOperatorError(f"{op} to {size} from {list(x.shape[2:])} (input "
                                       "sizes must be multiples of the output sizes)")
    return [y, _Unsupported(f"{op}'s indices")]


def _per_channel(g, v, x):
    """A per-channel (C,) value as (1, C, 1, ...), to broadcast against ``x``."""
    return g.node("Reshape", [g.value(v), g.ints([1, -1] + [1] * (x.ndim - 2))])


def _batch_statistics_norm(g, x, w, b, eps):
    """Normalization by the batch's own mean and biased variance per channel (what
    batch_norm in training mode computes, instance_norm included)."""
    axes = [0] + list(range(2, x.ndim))
    centred = g.node("Sub", [g.value(x), _reduce(g, "ReduceMean", x, axes, True)])
    var = _reduce(g, "ReduceMean", g.node("Mul", [centred, centred]), axes, True)
    std = g.node("Sqrt", [g.node("Add", [var, g.const(np.asarray(eps, x.dtype))])])
    y = g.node("Div", [centred, std])
    if w is not None:
        y = g.node("Mul", [y, _per_channel(g, w, x)])
    return g.node("Add", [y, _per_channel(g, b, x)]) if b is not None else y


@converts("batch_norm")
def _batch_norm(g, op, args, p, out):
    x, w, b, mean, var = args
    if p["training"]:
        # a module forcing batch statistics (instance norm, BatchNorm without running
        # statistics): its output is the graph's; updating running statistics is not
        stats = _Unsupported("batch statistics of batch_norm in training mode (running "
                             "statistics cannot be updated by an exported model)")
        return [_batch_statistics_norm(g, x, w, b, float(p["eps"])), stats, stats]
    c = x.shape[1]
    scale = g.value(w) if w is not None else g.const(np.ones(c, x.dtype))
    bias = g.value(b) if b is not None else g.const(np.zeros(c, x.dtype))
    y = g.node("BatchNormalization", [g.value(x), scale, bias, g.value(mean), g.value(var)],
               epsilon=float(p["eps"]))
    return [y, _Unsupported("batch statistics"), _Unsupported("batch statistics")]


@converts("layer_norm")
def _layer_norm(g, op, args, p, out):
    x, w, b = args
    shape = x.shape[x.ndim - p["normalized_ndim"]:]
    scale = g.value(w) if w is not None else g.const(np.ones(shape, x.dtype))
    inputs = [g.value(x), scale] + ([g.value(b)] if b is not None else [])
    return g.node("LayerNormalization", inputs, axis=-p["normalized_ndim"],
                  epsilon=float(p["eps"]))


@converts("embedding")
def _embedding(g, op, args, p, out):
    weight, indices = args
    return g.node("Gather", [g.value(weight), g.value(indices)], axis=0)


def _lstm_step(g, gates, c, hidden):
    """(h, c') of one LSTM step from the ONNX names of its gate pre-activations and cell
    state."""
    i, f, gg, o = g.node("Split", [gates, g.ints([hidden] * 4)], n_out=4, axis=-1)
    c_new = g.node("Add", [g.node("Mul", [g.node("Sigmoid", [f]), c]),
                           g.node("Mul", [g.node("Sigmoid", [i]), g.node("Tanh", [gg])])])
    return g.node("Mul", [g.node("Sigmoid", [o]), g.node("Tanh", [c_new])]), c_new


@converts("lstm_cell")
def _lstm_cell(g, op, args, p, out):
    gates, c = args
    h, c_new = _lstm_step(g, g.value(gates), g.value(c), gates.shape[-1] // 4)
    return [h, c_new, _Unsupported("lstm_cell's saved activations")]


@converts("lstm_layer")
def _lstm_layer(g, op, args, p, out):
    # unrolled over the traced sequence length, a step as lstm_cell's, rather than ONNX's
    # LSTM operator, which gives no cell state but the last
    x_gates, h0, c0, w_hh_t = args
    x, w = g.value(x_gates), g.value(w_hh_t)
    h, c = g.value(h0), g.value(c0)
    hs, cs = [], []
    for t in range(x_gates.shape[0]):
        step = g.node("Gather", [x, g.const(np.int64(t))], axis=0)
        h, c = _lstm_step(g, g.node("Add", [step, g.node("MatMul", [h, w])]), c,
                          h0.shape[-1])
        hs.append(g.node("Unsqueeze", [h, g.ints([0])]))
        cs.append(g.node("Unsqueeze", [c, g.ints([0])]))
    return [g.node("Concat", hs, axis=0), g.node("Concat", cs, axis=0),
            _Unsupported("lstm_layer's saved activations")]


@converts("leaky_relu")
def _leaky_relu(g, op, args, p, out):
    return g.node("LeakyRelu", [g.value(args[0])], alpha=float(p.get("negative_slope", 0.01)))


@converts("elu", "celu")
def _elu(g, op, args, p, out):
    return g.node("Elu" if op == "elu" else "Celu", [g.value(args[0])],
                  alpha=float(p.get("alpha", 1.0)))


@converts("selu")
def _selu(g, op, args, p, out):
    return g.node("Selu", [g.value(args[0])])


@converts("hardtanh")
def _hardtanh(g, op, args, p, out):
    x = args[0]
    lo, hi = p.get("min_val", -1.0), p.get("max_val", 1.0)
    return g.node("Clip", [g.value(x), g.value(lo, x), g.value(hi, x)])


@converts("hardsigmoid")
def _hardsigmoid(g, op, args, p, out):
    return g.node("HardSigmoid", [g.value(args[0])], alpha=1.0 / 6, beta=0.5)


@converts("softplus")
def _softplus(g, op, args, p, out):
    x = args[0]
    beta = float(p.get("beta", 1.0))
    if beta == 1.0:
        return g.node("Softplus", [g.value(x)])
    scaled = g.node("Mul", [g.value(x), g.value(beta, x)])
    return g.node("Div", [g.node("Softplus", [scaled]), g.value(beta, x)])


@converts("silu")
def _silu(g, op, args, p, out):
    x = g.value(args[0])
    return g.node("Mul", [x, g.node("Sigmoid", [x])])


@converts("mish")
def _mish(g, op, args, p, out):
    x = g.value(args[0])
    return g.node("Mul", [x, g.node("Tanh", [g.node("Softplus", [x])])])


@converts("logsigmoid")
def _logsigmoid(g, op, args, p, out):
    return g.node("Neg", [g.node("Softplus", [g.node("Neg", [g.value(args[0])])])])


@converts("tanhshrink")
def _tanhshrink(g, op, args, p, out):
    x = g.value(args[0])
    return g.node("Sub", [x, g.node("Tanh", [x])])


@converts("gelu")
def _gelu(g, op, args, p, out):
    x = args[0]
    xn = g.value(x)
    half = g.node("Mul", [xn, g.value(0.5, x)])
    if p.get("approximate", "none") == "tanh":
        cube = g.node("Mul", [g.node("Mul", [xn, xn]), xn])
        inner = g.node("Add", [xn, g.node("Mul", [cube, g.value(0.044715, x)])])
        t = g.node("Tanh", [g.node("Mul", [inner, g.value(math.sqrt(2 / math.pi), x)])])
    else:
        t = g.node("Erf", [g.node("Div", [xn, g.value(math.sqrt(2.0), x)])])
    return g.node("Mul", [half, g.node("Add", [t, g.value(1.0, x)])])


_CREATION = ("zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye")


# ---------------------------------------------------------------------------------------
# tracing
# ---------------------------------------------------------------------------------------


# ----- quantized ops (torcia-ao's), as QDQ: DequantizeLinear -> float op -> QuantizeLinear,
# integer weights and biases stored as such; onnxruntime runs (and fuses) them ------------


def _q_params(g, scale, zero_point, zero_dtype):
    return [g.const(np.float32(scale), base="scale"),
            g.const(np.asarray(zero_point, dtype=zero_dtype), base="zero_point")]


def _dequantize(g, x, scale, zero_point):
    return g.node("DequantizeLinear", [g.value(x), *_q_params(g, scale, zero_point, x.dtype)])


def _quantize(g, y, scale, zero_point, qmin=0, qmax=255, dtype=np.uint8):
    q = g.node("QuantizeLinear", [y, *_q_params(g, scale, zero_point, dtype)])
    return _clip_range(g, q, qmin, qmax, dtype)


def _clip_range(g, q, qmin, qmax, dtype):
    info = np.iinfo(dtype)
    if qmin > info.min or qmax < info.max:  # a reduced range: clamp the integers too
        q = g.node("Clip", [q, g.const(np.asarray(qmin, dtype)), g.const(np.asarray(qmax, dtype))])
    return q


def _dequantize_weight(g, wq, scales):
    """int8 weights with a scale per output channel (zero point 0), axis 0."""
    scales = np.ascontiguousarray(np.broadcast_to(scales, (wq.shape[0],)), dtype=np.float32)
    return g.node("DequantizeLinear", [g.const(wq, base="weight_int8"),
                                       g.const(scales, base="weight_scale"),
                                       g.const(np.zeros(wq.shape[0], np.int8), base="weight_zp")],
                  axis=0)


def _dequantize_bias(g, bias, x_scale, w_scales, out_channels):
    """The float bias as int32 at scale x_scale * w_scale (zero point 0): QDQ's form, which
    onnxruntime fuses with the integer product."""
    if bias is None:
        return []
    scales = (np.float32(x_scale) * np.broadcast_to(np.asarray(w_scales, np.float32),
                                                     (out_channels,))).astype(np.float32)
    ints = np.rint(np.asarray(bias, np.float64) / scales).astype(np.int32)
    return [g.node("DequantizeLinear", [g.const(ints, base="bias_int32"),
                                        g.const(scales, base="bias_scale"),
                                        g.const(np.zeros(out_channels, np.int32),
                                                base="bias_zp")], axis=0)]


def _requantize(g, y, p):
    if p.get("relu"):
        y = g.node("Relu", [y])
    if p.get("out_scale") is None:
        return y
    return _quantize(g, y, p["out_scale"], p["out_zero_point"])


@converts("quantize_per_tensor", plugin=True)
def _quantize_per_tensor(g, op, args, p, out):
    dtype = np.int8 if p["dtype"] == "qint8" else np.uint8
    if p["dtype"] not in ("qint8", "quint8"):
        raise UnsupportedOperatorError(f"quantization to {p['dtype']}")
    return _quantize(g, g.value(args[0]), p["scale"], p["zero_point"], p["qmin"], p["qmax"],
                     dtype)


@converts("dequantize_per_tensor", plugin=True)
def _dequantize_per_tensor(g, op, args, p, out):
    return _dequantize(g, args[0], p["scale"], p["zero_point"])


def _per_dim(value, nd):
    return list(value) if isinstance(value, (tuple, list)) else [value] * nd


def _conv_attrs(p, wq, padding_pairs):
    """ONNX Conv/ConvTranspose attributes from a quantized convolution's parameters
    (ints or one per spatial dimension; ``padding`` a (low, high) pair per dimension
    where ``padding_pairs``)."""
    nd = wq.ndim - 2
    padding = _per_dim(p.get("padding", 0), nd)
    if padding_pairs:
        padding = [q if isinstance(q, (tuple, list)) else (q, q) for q in padding]
    else:
        padding = [(q, q) for q in padding]
    return {"strides": _per_dim(p.get("stride", 1), nd), "pads": _pads(padding),
            "dilations": _per_dim(p.get("dilation", 1), nd), "group": p.get("groups", 1),
            "kernel_shape": list(wq.shape[2:])}


@converts("quantized_conv2d", "quantized_conv", plugin=True)
def _quantized_conv(g, op, args, p, out):
    xq, wq, w_scales, bias = args
    x = _dequantize(g, xq, p["x_scale"], p["x_zero_point"])
    inputs = [x, _dequantize_weight(g, wq, w_scales)]
    inputs += _dequantize_bias(g, bias, p["x_scale"], w_scales, wq.shape[0])
    y = g.node("Conv", inputs, **_conv_attrs(p, wq, padding_pairs=True))
    return _requantize(g, y, p)


@converts("quantized_max_pool2d", plugin=True)
def _quantized_max_pool2d(g, op, args, p, out):
    # ONNX's MaxPool takes uint8 and int8 (opset 12 on): the integers pooled as they are
    return _max_pool_node(g, args[0], p)


@converts("quantized_conv_transpose", plugin=True)
def _quantized_conv_transpose(g, op, args, p, out):
    xq, wq, w_scales, bias = args
    scales = np.asarray(w_scales, np.float32)
    if scales.size and np.any(scales != scales.reshape(-1)[0]):
        raise UnsupportedOperatorError("a transposed convolution whose weight has a scale "
                                       "per output channel (its weight's axis 0 is the "
                                       "input's channels)")
    out_channels = wq.shape[1] * p.get("groups", 1)
    w = g.node("DequantizeLinear", [g.const(wq, base="weight_int8"),
                                    *_q_params(g, scales.reshape(-1)[0], 0, np.int8)])
    x = _dequantize(g, xq, p["x_scale"], p["x_zero_point"])
    inputs = [x, w] + _dequantize_bias(g, bias, p["x_scale"], scales, out_channels)
    y = _conv_transpose_node(g, inputs, _conv_attrs(p, wq, padding_pairs=False),
                             _per_dim(p.get("output_padding", 0), wq.ndim - 2))
    return _requantize(g, y, p)


def _byte_rows(g, wq, scales, zero_points, indices):
    """The float32 rows ``indices`` of a uint8 table with a float scale and zero point per
    row: ``(q - zero_point) * scale``, as torcia-ao computes them (the table stays uint8
    in the file; ONNX's DequantizeLinear wants integer zero points, these are float)."""
    rows = g.node("Cast", [g.node("Gather", [g.value(wq), indices], axis=0)],
                  to=onnx.TensorProto.FLOAT)

    def per_row(v):
        return g.node("Unsqueeze", [g.node("Gather", [g.value(v), indices], axis=0),
                                    g.ints([-1])])

    return g.node("Mul", [g.node("Sub", [rows, per_row(zero_points)]), per_row(scales)])


@converts("embedding_byte", plugin=True)
def _embedding_byte(g, op, args, p, out):
    wq, scales, zero_points, indices = args
    return _byte_rows(g, wq, scales, zero_points, g.value(indices))


@converts("embedding_bag_byte", plugin=True)
def _embedding_bag_byte(g, op, args, p, out):
    wq, scales, zero_points, indices, offsets, weights = args
    if indices.ndim == 2:
        # fixed-size bags: their offsets, read as given ones are (torcia-ao's rule)
        offsets = np.arange(0, indices.size, indices.shape[1], dtype=np.int64)
        flat = g.node("Reshape", [g.value(indices), g.ints([-1])])
    else:
        flat = g.value(indices)
    rows = _byte_rows(g, wq, scales, zero_points, flat)
    if weights is not None:
        rows = g.node("Mul", [rows, g.node("Unsqueeze", [g.value(weights), g.ints([-1])])])
    # each bag sums the rows in [start, end): a 0/1 matrix (bags, indices) times the rows
    bounds = g.node("Cast", [g.value(offsets)], to=onnx.TensorProto.INT64)
    count = g.node("Shape", [flat])
    if p.get("include_last_offset"):
        starts = _slice(g, bounds, 0, 0, -1, 1)
    else:
        starts, bounds = bounds, g.node("Concat", [bounds, count], axis=0)
    ends = _slice(g, bounds, 0, 1, _INT_MAX, 1)
    scalar = g.node("Squeeze", [count, g.ints([0])])
    positions = g.node("Range", [g.const(np.int64(0)), scalar, g.const(np.int64(1))])

    def column(v):
        return g.node("Unsqueeze", [v, g.ints([1])])

    inside = g.node("And", [g.node("GreaterOrEqual", [positions, column(starts)]),
                            g.node("Less", [positions, column(ends)])])
    return g.node("MatMul", [g.node("Cast", [inside], to=onnx.TensorProto.FLOAT), rows])


@converts("quantized_linear", plugin=True)
def _quantized_linear(g, op, args, p, out):
    xq, wq, w_scales, bias = args
    x = _dequantize(g, xq, p["x_scale"], p["x_zero_point"])
    w = _dequantize_weight(g, wq, w_scales)
    b = _dequantize_bias(g, bias, p["x_scale"], w_scales, wq.shape[0])
    if xq.ndim == 2:
        y = g.node("Gemm", [x, w, *b], transB=1)
    else:
        y = g.node("MatMul", [x, g.node("Transpose", [w], perm=[1, 0])])
        if b:
            y = g.node("Add", [y, b[0]])
    return _requantize(g, y, p)


def _qparam(g, value, dtype, per_channel):
    """A scale or zero point as QuantizeLinear wants it: a scalar per tensor, a vector per
    channel, of ``dtype``. Its value as the traced forward left it (an enabled observer
    has seen the example input by then): observers are Python, not graph ops."""
    value = np.asarray(value).astype(dtype)
    return g.const(value if per_channel else value.reshape(()), base="qparam")


@converts("fake_quantize", plugin=True)
def _fake_quantize(g, op, args, p, out):
    # what QAT trains through, as the QuantizeLinear -> DequantizeLinear pair it stands for
    x, scale, zero_point = args
    qmin, qmax = p["qmin"], p["qmax"]
    dtype = np.uint8 if qmin >= 0 else np.int8
    if qmin < np.iinfo(dtype).min or qmax > np.iinfo(dtype).max:
        raise UnsupportedOperatorError(f"fake quantization to [{qmin}, {qmax}] (more than "
                                       "8 bits)")
    per_channel = np.size(scale) > 1
    attrs = {"axis": p.get("axis", -1) % x.ndim} if per_channel else {}
    params = [_qparam(g, scale, np.float32, per_channel),
              _qparam(g, zero_point, dtype, per_channel)]
    q = g.node("QuantizeLinear", [g.value(x), *params], **attrs)
    return g.node("DequantizeLinear", [_clip_range(g, q, qmin, qmax, dtype), *params], **attrs)


@converts("quantized_add", plugin=True)
def _quantized_add(g, op, args, p, out):
    a, b = args
    y = g.node("Add", [_dequantize(g, a, p["a_scale"], p["a_zero_point"]),
                       _dequantize(g, b, p["b_scale"], p["b_zero_point"])])
    return _requantize(g, y, p)


@converts("linear_dynamic", "linear_weight_int8", plugin=True)
def _linear_int8_weights(g, op, args, p, out):
    # the weights stay int8 in the file; activations are float here (onnxruntime's
    # dynamic quantization would requantize them at run time, in another range)
    x, wq, w_scales, bias = args
    w = _dequantize_weight(g, wq, w_scales)
    y = g.node("MatMul", [g.value(x), g.node("Transpose", [w], perm=[1, 0])])
    return g.node("Add", [y, g.value(bias)]) if bias is not None else y


@converts("linear_weight_int4", plugin=True)
def _linear_weight_int4(g, op, args, p, out):
    # the weights stay two to a byte in the file and are unpacked by the graph (ONNX's
    # own 4-bit types need opset 21); each group of group_size along K has its scale and
    # zero point: w = (q - zero) * scale, as torcia-ao computes it
    x, packed, scales, zeros, bias = args
    n, k = packed.shape[0], x.shape[-1]
    high = g.node("BitShift", [g.value(packed), g.const(np.uint8(4))], direction="RIGHT")
    high = g.node("Cast", [high], to=onnx.TensorProto.FLOAT)
    low = g.node("Sub", [g.node("Cast", [g.value(packed)], to=onnx.TensorProto.FLOAT),
                         g.node("Mul", [high, g.const(np.float32(16))])])
    nibbles = g.node("Concat", [g.node("Unsqueeze", [v, g.ints([-1])]) for v in (low, high)],
                     axis=-1)

    def per_weight(v):  # (N, ...) -> (N, K)
        return _slice(g, g.node("Reshape", [v, g.ints([n, -1])]), 1, 0, k, 1)

    def per_group(v):
        spread = g.node("Expand", [g.node("Unsqueeze", [g.value(v), g.ints([-1])]),
                                   g.ints([1, 1, p["group_size"]])])
        return per_weight(spread)

    w = g.node("Mul", [g.node("Sub", [per_weight(nibbles), per_group(zeros)]),
                       per_group(scales)])
    y = g.node("MatMul", [g.value(x), g.node("Transpose", [w], perm=[1, 0])])
    return g.node("Add", [y, g.value(bias)]) if bias is not None else y


class _Trace(DispatchMode):
    """A dispatch mode (at ``TRACE_ORDER``) that turns each kernel the exporting thread
    runs into graph nodes, and follows module forwards to name them."""

    order = TRACE_ORDER

    def __init__(self, graph, names_of_modules):
        self.graph = graph
        self.converters, self.creation = converters(), _creation()
        self.module_names = names_of_modules
        self.handles = []
        self.thread = threading.get_ident()

    def around_kernel(self, op, kernel, device):
        return self._wrap(op, kernel)

    def on_inplace(self, target, out):
        # an in-place op: the written tensor now holds the op's result
        name = self.graph.names.get(id(out.__torcia_data__))
        if name is not None:
            self.graph.bind(target.__torcia_data__, name)

    def __enter__(self):
        path = self.graph.module_path
        thread = self.thread

        # module hooks are process-wide: only the exporting thread's modules are named
        def enter(module, args):
            if threading.get_ident() == thread:
                path.append(self.module_names.get(id(module), type(module).__name__))

        def leave(module, args, output):
            if threading.get_ident() == thread:
                path.pop()  # returns None: a forward hook's result would replace the output

        self.handles.append(nn.modules.module.register_module_forward_pre_hook(enter))
        self.handles.append(nn.modules.module.register_module_forward_hook(leave))
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        for h in self.handles:
            h.remove()
        return False

    def _wrap(self, op, fn):
        graph = self.graph
        creation, convert = op in self.creation, self.converters.get(op)

        def kernel(*args, **params):
            out = fn(*args, **params)
            if creation:
                return out  # baked in as a constant where it is used
            if convert is None:
                raise UnsupportedOperatorError(
                    f"ONNX export does not support the op '{op}' (used in module "
                    f"'{graph.module_path[-1]}')")
            try:
                names = convert(graph, op, args, params, out)
            except UnsupportedOperatorError as exc:
                raise UnsupportedOperatorError(
                    f"ONNX export does not support {exc} (op '{op}' in module "
                    f"'{graph.module_path[-1]}')") from None
            outs = out if isinstance(out, tuple) else (out,)
            names = names if isinstance(names, list) else [names]
            for arr, name in zip(outs, names):
                graph.bind(arr, name)
            return out

        return kernel


def _value_info(name, t, dynamic):
    shape = [dynamic.get(i, d) for i, d in enumerate(t.shape)]
    return helper.make_tensor_value_info(
        name, helper.np_dtype_to_tensor_dtype(t.__torcia_data__.dtype), shape)


def export(model, args, f, export_params=True, verbose=False, input_names=None,
           output_names=None, opset_version=17, dynamic_axes=None, do_constant_folding=True,
           training=None, keep_initializers_as_inputs=None):
    """Export ``model`` run on the example inputs ``args`` to the ONNX file ``f``.

    Parameters
    ----------
    model : torcia.nn.Module
        Traced in eval mode (restored afterwards).
    args : Tensor or tuple of Tensors
        Example inputs; shapes in the graph are theirs except ``dynamic_axes``.
    f : str or path
        Where the ``.onnx`` file is written.
    input_names, output_names : list of str, optional
        Names of the graph's inputs and outputs (default ``input_0``, ``output_0``...).
    opset_version : int
        The ONNX opset (17 by default; 17 or later for LayerNormalization).
    dynamic_axes : dict, optional
        ``{name: {axis: "symbolic_name"}}`` (or a list of axes) for sizes that vary.

    Raises
    ------
    UnsupportedOperatorError
        Naming the op without an ONNX translation and the module that used it.
    """
    if opset_version < 13:
        raise ValueError(f"opset_version {opset_version} is not supported: use 13 or later")
    args = (args,) if isinstance(args, Tensor) else tuple(args)
    inputs = [a for a in args if isinstance(a, Tensor)]
    input_names = list(input_names or [f"input_{i}" for i in range(len(inputs))])
    dynamic = {}
    for name, axes in (dynamic_axes or {}).items():
        dynamic[name] = axes if isinstance(axes, dict) else {a: f"{name}_dim{a}" for a in axes}
    graph = Graph(opset_version)
    named = {id(m): n or type(model).__name__ for n, m in model.named_modules()}
    for n, p in model.state_dict().items():
        graph.initializers.append(numpy_helper.from_array(np.ascontiguousarray(p.numpy()), n))
        graph.bind(p.__torcia_data__, n)
    for name, t in zip(input_names, inputs):
        graph.bind(t.__torcia_data__, name)
    was_training = model.training
    model.eval()
    try:
        with torcia.enable_grad(), _Trace(graph, named):
            # intermediates that require grad make in-place writes visible to the trace
            traced_inputs = [t.detach().requires_grad_(t.dtype.is_floating_point)
                             if isinstance(t, Tensor) else t for t in args]
            for t, orig in zip(traced_inputs, args):
                if isinstance(t, Tensor):
                    graph.bind(t.__torcia_data__, graph.names[id(orig.__torcia_data__)])
            result = model(*traced_inputs)
    finally:
        model.train(was_training)
    outputs = [t for t in pytree.tree_leaves(result) if isinstance(t, Tensor)]
    output_names = list(output_names or [f"output_{i}" for i in range(len(outputs))])
    for name, t in zip(output_names, outputs):
        source = graph.value(t.__torcia_data__)
        graph.nodes.append(helper.make_node("Identity", [source], [name]))
    used = {i for n in graph.nodes for i in n.input}
    onnx_graph = helper.make_graph(
        graph.nodes, type(model).__name__,
        [_value_info(n, t, dynamic.get(n, {})) for n, t in zip(input_names, inputs)],
        [_value_info(n, t, dynamic.get(n, {})) for n, t in zip(output_names, outputs)],
        [init for init in graph.initializers if init.name in used])
    proto = helper.make_model(onnx_graph, producer_name="torcia",
                              opset_imports=[helper.make_opsetid("", opset_version)])
    proto.ir_version = min(proto.ir_version, 9)
    onnx.checker.check_model(proto)
    onnx.save(proto, str(f))
