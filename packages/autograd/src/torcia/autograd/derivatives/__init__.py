"""The derivative table: one backward formula per differentiable core op.

Convention. A formula is registered with ``@derivative("op")`` and receives:

- ``grad`` (the gradient of the op's single output) or ``grads`` (a list, one per output,
  ``None`` where no gradient flowed), then
- the op's inputs, positionally, in the op's order. An input named with a leading
  underscore is not kept alive by the graph: the formula gets its :class:`Meta` (shape,
  dtype, device) instead of its value. A ``*args`` parameter takes variadic inputs.
  ``saved_only_for={"a": "b"}`` keeps ``a`` only when ``b`` wants a gradient (the
  formula then reads ``a`` only under ``needs_input_grad``).
- keyword-only: the op's parameters by name, ``result`` (the output, or the tuple of
  outputs), and ``needs_input_grad`` (which inputs want a gradient).

It returns one gradient per input (or a single tensor for a one-input op), ``None`` for
inputs that get none. Gradients may have the broadcast shape or a promoted dtype: the
engine reduces and casts them to each input's shape and dtype. Formulas are written with
differentiable torcia ops, so second derivatives come free (``create_graph=True``).

Complex numbers follow PyTorch's convention: for an input ``z = a + ib`` the gradient is
``dL/da + i dL/db``, so a holomorphic ``f`` gives ``grad * conj(f'(z))`` (``_c``
conjugates complex factors and leaves real ones alone), and a real input's gradient is the
real part of a complex one.

Ops that are not differentiable are listed in :data:`torcia.ops.NOT_DIFFERENTIABLE`.

The rows are in one module per family of ops, named as core's family module that declares
them (``torcia/_ops/<family>.py``): ``derivatives/unary.py``, ``derivatives/reduce.py``,
``derivatives/nn_conv.py``... This module holds the table and the helpers several families
share, and imports the families, which register their rows in :data:`TABLE`.
"""

from __future__ import annotations

import inspect
import math

import torcia
from torcia.autograd.graph import Meta
from torcia.library import Tensor, call, dtype_from_numpy
from torcia.library import alias as make_alias

# PyTorch's argument names that formulas use as theirs; any other input is ``self`` (the
# first) or ``other`` (the second) in PyTorch's names, unless the row says (``names=``)
_TORCH_ARGS = frozenset({
    "weight", "bias", "target", "index", "indices", "mask", "src", "source", "values",
    "end", "running_mean", "running_var", "log_probs", "targets", "input_lengths",
    "target_lengths"})
_STRIDED = torcia.strided


class Entry:
    """A formula with what it needs, read once from its signature."""

    __slots__ = ("op", "fn", "multi", "saved_flags", "variadic_saved", "param_names",
                 "uses_result", "wants_needs", "differentiable_outputs", "only_for",
                 "saved_outputs", "names", "_saved")

    def __init__(self, op, fn, differentiable_outputs=None, saved_only_for=None,
                 saved_outputs=None, names=None):
        self.op = op
        self.fn = fn
        self.differentiable_outputs = differentiable_outputs
        self.saved_outputs = saved_outputs
        self.names = names
        self._saved = None
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        positional = [p.name for p in params[1:] if p.kind is p.POSITIONAL_OR_KEYWORD]
        # input i is kept only when input j wants a gradient: {i: j}
        self.only_for = {positional.index(k): positional.index(v)
                         for k, v in (saved_only_for or {}).items()} or None
        self.multi = params[0].name == "grads"
        flags = []
        self.variadic_saved = False
        self.param_names = []
        self.uses_result = False
        self.wants_needs = False
        for p in params[1:]:
            if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.POSITIONAL_ONLY:
                flags.append(not p.name.startswith("_"))
            elif p.kind is p.VAR_POSITIONAL:
                # a variadic parameter stands for all remaining inputs
                self.variadic_saved = not p.name.startswith("_")
            elif p.kind is p.KEYWORD_ONLY:
                if p.name == "result":
                    self.uses_result = True
                elif p.name == "needs_input_grad":
                    self.wants_needs = True
                else:
                    self.param_names.append(p.name)
        self.saved_flags = tuple(flags)

    def saved_attributes(self, node) -> dict:
        """What ``node`` (a node of this op) saved, under PyTorch's names (``self``,
        ``other``, ``dim``, ``result``...): ``{name: (kind, key)}``, where kind is "input"
        (key: its position; "inputs" for a variadic parameter, from that position on),
        "sizes" or "strides" (an input's shape, which the node keeps for every input, or
        its strides, for one it keeps), "param" (key: the parameter and its default) or
        "result" (key: the output's index). Read
        through ``grad_fn._saved_<name>`` (:class:`torcia.autograd.graph.Node`)."""
        dynamic = callable(self.names)
        if not dynamic and self._saved is not None and node.n_outputs in self._saved:
            return self._saved[node.n_outputs]
        names = (self.names(node) if dynamic else self.names) or {}
        out = {}
        params = list(inspect.signature(self.fn).parameters.values())[1:]
        i = 0
        for p in params:
            bare = p.name.lstrip("_")
            if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.POSITIONAL_ONLY:
                torch_name = names.get(bare) or (
                    bare if bare in _TORCH_ARGS else ("self", "other")[i] if i < 2 else bare)
                if not p.name.startswith("_"):
                    out[torch_name] = ("input", i)
                    out[torch_name + "_sym_strides"] = ("strides", i)
                out[torch_name + "_sym_sizes"] = ("sizes", i)
                i += 1
            elif p.kind is p.VAR_POSITIONAL:
                if not p.name.startswith("_"):
                    out[names.get(bare, "tensors")] = ("inputs", i)
            elif p.kind is p.KEYWORD_ONLY and p.name == "result":
                if node.n_outputs > 1:
                    for k in range(node.n_outputs):
                        if self.saved_outputs is None or k in self.saved_outputs:
                            out[names.get(f"result{k}", f"result{k}")] = ("result", k)
                else:
                    out[names.get("result", "result")] = ("result", 0)
            elif p.kind is p.KEYWORD_ONLY and p.name != "needs_input_grad":
                default = None if p.default is p.empty else p.default
                out[names.get(p.name, p.name)] = ("param", (p.name, default))
        if not dynamic:
            self._saved = {**(self._saved or {}), node.n_outputs: out}
        return out

    def backward(self, node, grads, create_graph):
        args = node.unpack(create_graph)
        metas = node.metas
        edges = node.next_functions
        n = len(edges)
        inputs = list(args[:n]) if len(args) != n else list(args)
        for i, m in enumerate(metas):
            if m is not None and inputs[i] is None:
                inputs[i] = Meta(m)
        if self.param_names:
            params = node.params
            kwargs = {name: params[name] for name in self.param_names if name in params}
        else:
            kwargs = {}
        if self.uses_result:
            result = args[n:]
            if create_graph:
                result = tuple(r if r is None or r.dtype.category < 2 else
                               _reattach(r, node, i) for i, r in enumerate(result))
            kwargs["result"] = result if len(result) > 1 else result[0]
        if self.wants_needs:
            kwargs["needs_input_grad"] = tuple([e[0] is not None for e in edges])
        out = self.fn(grads if self.multi else grads[0], *inputs, **kwargs)
        if out.__class__ is not tuple:
            out = (out,)
        fitted = []
        for g, m, e in zip(out, metas, edges):
            if g is None or e[0] is None:
                fitted.append(None)
            elif g.__class__ is Tensor and (data := g.__torcia_data__).shape == m[0] \
                    and data.dtype is m[1]:
                fitted.append(g)
            else:
                fitted.append(_fit(g, m))
        return fitted


def _reattach(alias, node, i):
    """A saved output seen as the node's output again, so double backward reaches it."""
    t = make_alias(alias)
    t.__torcia_requires_grad__ = True
    t.grad_fn = node
    t.__torcia_output_nr__ = i
    return t


def _sum_to(g: Tensor, shape) -> Tensor:
    """Reduce a broadcast gradient back to ``shape``."""
    gs = g.__torcia_data__.shape
    lead = len(gs) - len(shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and gs[i + lead] != 1
    )
    if dims:
        g = g.sum(dims, keepdim=True)
    if lead or tuple(g.__torcia_data__.shape) != tuple(shape):
        g = g.reshape(tuple(shape))
    return g


def _fit(g, meta) -> Tensor:
    """A formula's gradient made to match its input's shape and dtype."""
    shape, dtype, _ = meta
    if not isinstance(g, Tensor):
        raise TypeError(f"a derivative formula returned {type(g).__name__}, not a Tensor")
    if g.layout is not _STRIDED:
        # a sparse gradient (embedding's with sparse=True) keeps its layout
        if tuple(g.shape) != tuple(shape):
            raise RuntimeError(f"a sparse gradient of shape {list(g.shape)} for an input of "
                               f"shape {list(shape)}")
        return g
    if g.__torcia_data__.shape != shape:
        g = _sum_to(g, shape)
    if g.__torcia_data__.dtype is not dtype:
        if g.__torcia_data__.dtype.kind == "c" and dtype.kind != "c":
            # a real input's gradient is the real part (PyTorch's convention)
            g = g.real
        g = g.to(dtype_from_numpy(dtype))
    return g


TABLE: dict[str, Entry] = {}


def derivative(op: str, *, differentiable_outputs=None, saved_only_for=None,
               saved_outputs=None, names=None):
    """Register the backward formula of ``op`` (see the module docstring).

    ``differentiable_outputs`` (a tuple of bools, one per output of a multi-output op)
    marks float outputs that never carry a gradient, such as the sign of ``slogdet``.
    ``saved_only_for`` maps an input's name to the input whose gradient alone needs it
    (``{"a": "b"}``: keep ``a`` only when ``b`` requires grad); otherwise the formula gets
    its :class:`Meta` and must not read its value. ``saved_outputs`` (indices) keeps only
    those outputs for ``result``, the others reading None: an output that is not kept
    may be written in place before backward. ``names`` maps the formula's names of what
    it saves (inputs without their underscore, parameters, ``result`` or ``result0``...)
    to PyTorch's, where they differ from the default (the first input ``self``, the
    second ``other``, an input named as one of PyTorch's arguments keeps its name): they
    name ``grad_fn._saved_<name>`` (a function of the node where they depend on it).
    """

    def register(fn):
        if op in TABLE:
            raise ValueError(f"a derivative for {op!r} is already registered")
        TABLE[op] = Entry(op, fn, differentiable_outputs, saved_only_for, saved_outputs,
                          names)
        return fn

    return register


# PyTorch's names of saved inputs and outputs shared by several rows (``names=``)
_INPUT_WEIGHT_BIAS = {"x": "input", "w": "weight", "b": "bias"}
_FFT_NAMES = {"dims": "dim", "norm": "normalization"}
_EIGEN_NAMES = {"result0": "eigenvalues", "result1": "eigenvectors"}
_INDICES = {"result0": "values", "result1": "indices"}


def _matmul_names(node):
    """matmul's second operand as PyTorch's node of the same name (MmBackward0...)
    calls it."""
    other = {"MmBackward0": "mat2", "MvBackward0": "vec", "DotBackward0": "tensor"}
    return {"b": other.get(node.name(), "other")}


def _c(x):
    """The conjugate of a complex tensor or number, anything else itself. PyTorch's
    convention (conjugate Wirtinger derivatives) makes a holomorphic ``f``'s input
    gradient ``grad * conj(f'(z))``; for real inputs this is the usual chain rule."""
    if x.__class__ is Tensor or isinstance(x, Tensor):
        return x.conj() if x.__torcia_data__.dtype.kind == "c" else x
    return x.conjugate() if isinstance(x, complex) else x


def _zeros(meta):
    return torcia.zeros(meta.shape, dtype=meta.dtype, device=meta.device)


def _zero_grad(grad, _x, **params):
    """Piecewise constant ops (sign, rounding): PyTorch's gradient is zero everywhere."""
    return torcia.zeros_like(grad)


def _expand_to(g, shape: tuple):
    """``g.expand(shape)`` for a ``shape`` known to fit (a reduced gradient back to its
    input's shape), without ``expand``'s argument checks: sum's backward runs in every
    training step."""
    if g.__torcia_data__.shape == shape:
        return g
    return call("expand", (g,), {"shape": shape}, g)


def _restore_dims(g, dim, keepdim, ndim):
    """Re-insert reduced dims (size 1) so ``g`` broadcasts against the input."""
    if keepdim or dim is None:
        return g
    for d in dim:
        g = g.unsqueeze(d)
    return g


def _read_as(x, dtype):
    """``x`` as a kernel with ``dtype=`` reads it: cast first (a complex input cast to a real
    dtype loses its imaginary part, whose gradient is then zero, as torch's)."""
    return x if dtype is None else x.to(dtype_from_numpy(dtype))


def _count(shape, dim):
    if dim is None:
        return math.prod(shape)
    return math.prod(shape[d] for d in dim)


def _extreme_grad(grad, x, dim, keepdim, result):
    """amax/amin: ties share the gradient evenly."""
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    mask = x == r
    count = mask.sum(dim, keepdim=True) if dim is not None else mask.sum()
    return g * mask / count


def _scatter_back(grad, meta, key):
    """The gradient of ``x[key]``: zeros with ``grad`` added at ``key``."""
    return call("index_put", (_zeros(meta), grad), {"key": key, "accumulate": True})


def _norm_backward(grad, x, p, dim, keepdim, result):
    """Gradient of the vector p-norm (p = 0 has none; +-inf goes to the extreme entries)."""
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    # in PyTorch's order of operations (its rounding, in half floats too); a zero norm
    # gives a zero gradient, as PyTorch's subgradient choice
    if p == 0:
        return x * 0
    if p == 1:
        return torcia.sgn(x) * g
    if p == 2:
        return g * (x / r).masked_fill(r == 0, 0)
    if math.isinf(p):
        return _extreme_grad(grad, x.abs(), dim, keepdim, result) * torcia.sgn(x)
    if p < 1:
        scaled = (torcia.sgn(x) * x.abs() ** (p - 1)).masked_fill(x == 0, 0)
        return scaled * g * r ** (1 - p)
    scaled = torcia.sgn(x) * x.abs() ** (p - 1) if p < 2 else x * x.abs() ** (p - 2)
    return scaled * (g / r ** (p - 1)).masked_fill(r == 0, 0)


# Activation, softmax and norm formulas are written with torcia ops on the input (or the
# result), so they are twice differentiable; for a first derivative alone (grad mode off
# in the backward pass, i.e. no create_graph) the rows call one fused kernel instead
# (activation_backward, softmax_backward, batch_norm_backward...).


#: whether a forward-AD level is open (set by torcia.autograd.forward_ad): tangents flow
#: through backward formulas, so they must avoid the first-order-only fused kernels
FORWARD_LEVEL_OPEN = [False]


def _differentiable_formulas() -> bool:
    """Whether backward formulas must be written with differentiable ops: a graph of the
    gradient is being built, or forward AD reads tangents through them."""
    return torcia.is_grad_enabled() or FORWARD_LEVEL_OPEN[0]


def _fused(name, grad, x, **params):
    """The first derivative of an activation in one kernel, or None when a graph of the
    gradient is being built (the formulas below then keep it differentiable)."""
    if _differentiable_formulas():
        return None
    return call("activation_backward", (grad, x), {"activation": name, **params})


# Each family registers its rows when imported, from the names above: imported last.
from torcia.autograd.derivatives import (  # noqa: E402, I001
    binary,
    complex_numbers,
    indexing,
    linalg,
    movement,
    nn,
    nn_activation,
    nn_conv,
    nn_loss,
    nn_norm,
    nn_pool,
    nn_rnn,
    pointwise,
    reduce,
    scan,
    sorting,
    special,
    spectral,
    unary,
    views,
)
