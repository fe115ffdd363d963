"""The derivative table: one backward formula per differentiable core op.

Convention. A formula is registered with ``@derivative("op")`` and receives:

- ``grad`` (the gradient of the op's single output) or ``grads`` (a list, one per output,
  ``None`` where no gradient flowed), then
- the op's inputs, positionally, in the op's order. An input named with a leading
  underscore is not kept alive by the graph: the formula gets its :class:`Meta` (shape,
  dtype, device) instead of its value. A ``*args`` parameter takes variadic inputs.
- keyword-only: the op's parameters by name, ``result`` (the output, or the tuple of
  outputs), and ``needs_input_grad`` (which inputs want a gradient).

It returns one gradient per input (or a single tensor for a one-input op), ``None`` for
inputs that get none. Gradients may have the broadcast shape or a promoted dtype: the
engine reduces and casts them to each input's shape and dtype. Formulas are written with
differentiable torcia ops, so second derivatives come free (``create_graph=True``).

Ops that are not differentiable are listed in :data:`torcia.ops.NOT_DIFFERENTIABLE`.
"""

from __future__ import annotations

import inspect
import math

import torcia
from torcia._tensor import Tensor, call
from torcia.autograd.graph import Meta


class Entry:
    """A formula with what it needs, read once from its signature."""

    __slots__ = ("op", "fn", "multi", "saved_flags", "variadic_saved", "meta_positions",
                 "param_names", "uses_result", "wants_needs", "n_positional")

    def __init__(self, op, fn):
        self.op = op
        self.fn = fn
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        self.multi = params[0].name == "grads"
        flags = []
        self.variadic_saved = None
        self.param_names = []
        self.uses_result = False
        self.wants_needs = False
        for p in params[1:]:
            if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.POSITIONAL_ONLY:
                flags.append(not p.name.startswith("_"))
            elif p.kind is p.VAR_POSITIONAL:
                self.variadic_saved = not p.name.startswith("_")
            elif p.kind is p.KEYWORD_ONLY:
                if p.name == "result":
                    self.uses_result = True
                elif p.name == "needs_input_grad":
                    self.wants_needs = True
                else:
                    self.param_names.append(p.name)
        self.saved_flags = tuple(flags)
        self.n_positional = len(flags)

    def _saves(self, i):
        if i < self.n_positional:
            return self.saved_flags[i]
        return bool(self.variadic_saved)

    def pack(self, inputs):
        """What the graph keeps of the inputs: saved tensors with versions, metadata."""
        args = []
        versions = []
        metas = []
        for i, x in enumerate(inputs):
            if isinstance(x, Tensor):
                metas.append((x._data.shape, x._data.dtype, x._device))
                if self._saves(i):
                    args.append(x)
                    versions.append((i, x._vc[0]))
                else:
                    args.append(None)
            else:
                metas.append(None)
                args.append(x)
        return tuple(args), tuple(versions), tuple(metas)

    def backward(self, node, grads, create_graph):
        args = node.unpack(create_graph)
        n = len(node.next_functions)
        inputs = list(args[:n])
        for i, m in enumerate(node.metas):
            if m is not None and inputs[i] is None:
                inputs[i] = _meta(m)
        kwargs = {name: node.params[name] for name in self.param_names if name in node.params}
        if self.uses_result:
            result = args[n:]
            if create_graph:
                result = tuple(_reattach(r, node, i) for i, r in enumerate(result))
            kwargs["result"] = result if len(result) > 1 else result[0]
        if self.wants_needs:
            kwargs["needs_input_grad"] = tuple(e is not None for e in node.next_functions)
        out = self.fn(grads if self.multi else grads[0], *inputs, **kwargs)
        if not isinstance(out, tuple):
            out = (out,)
        return tuple(
            _fit(g, m) if g is not None and e is not None else None
            for g, m, e in zip(out, node.metas, node.next_functions)
        )


def _meta(m):
    meta = Meta.__new__(Meta)
    meta.shape = torcia.Size(m[0])
    meta.dtype = torcia._dtype.FROM_NUMPY[m[1]]
    meta.device = m[2]
    meta.ndim = len(m[0])
    return meta


def _reattach(alias, node, i):
    """A saved output seen as the node's output again, so double backward reaches it."""
    t = Tensor._make(alias._data, alias._device)
    t._vc = alias._vc
    t._requires_grad = True
    t.grad_fn = node
    t._out_nr = i
    return t


def _sum_to(g: Tensor, shape) -> Tensor:
    """Reduce a broadcast gradient back to ``shape``."""
    gs = g._data.shape
    lead = len(gs) - len(shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and gs[i + lead] != 1
    )
    if dims:
        g = g.sum(dims, keepdim=True)
    if lead or tuple(g._data.shape) != tuple(shape):
        g = g.reshape(tuple(shape))
    return g


def _fit(g, meta) -> Tensor:
    """A formula's gradient made to match its input's shape and dtype."""
    shape, dtype, _ = meta
    if not isinstance(g, Tensor):
        raise TypeError(f"a derivative formula returned {type(g).__name__}, not a Tensor")
    if g._data.shape != shape:
        g = _sum_to(g, shape)
    if g._data.dtype is not dtype:
        g = g.to(torcia._dtype.FROM_NUMPY[dtype])
    return g


TABLE: dict[str, Entry] = {}


def derivative(op: str):
    """Register the backward formula of ``op`` (see the module docstring)."""

    def register(fn):
        if op in TABLE:
            raise ValueError(f"a derivative for {op!r} is already registered")
        TABLE[op] = Entry(op, fn)
        return fn

    return register


def _zeros(meta):
    return torcia.zeros(meta.shape, dtype=meta.dtype, device=meta.device)


def _restore_dims(g, dim, keepdim, ndim):
    """Re-insert reduced dims (size 1) so ``g`` broadcasts against the input."""
    if keepdim or dim is None:
        return g
    for d in dim:
        g = g.unsqueeze(d)
    return g


def _count(shape, dim):
    if dim is None:
        return math.prod(shape)
    return math.prod(shape[d] for d in dim)


# =======================================================================================
# elementwise, one input
# =======================================================================================


@derivative("neg")
def _(grad, _x):
    return -grad


@derivative("abs")
def _(grad, x):
    return grad * x.sign()


@derivative("square")
def _(grad, x):
    return grad * 2 * x


@derivative("relu")
def _(grad, _x, *, result):
    return grad * (result > 0)


@derivative("exp")
def _(grad, _x, *, result):
    return grad * result


@derivative("exp2")
def _(grad, _x, *, result):
    return grad * result * math.log(2.0)


@derivative("expm1")
def _(grad, _x, *, result):
    return grad * (result + 1)


@derivative("log")
def _(grad, x):
    return grad / x


@derivative("log2")
def _(grad, x):
    return grad / (x * math.log(2.0))


@derivative("log10")
def _(grad, x):
    return grad / (x * math.log(10.0))


@derivative("log1p")
def _(grad, x):
    return grad / (x + 1)


@derivative("sqrt")
def _(grad, _x, *, result):
    return grad / (2 * result)


@derivative("rsqrt")
def _(grad, _x, *, result):
    return -0.5 * grad * result * result * result


@derivative("reciprocal")
def _(grad, _x, *, result):
    return -grad * result * result


@derivative("sin")
def _(grad, x):
    return grad * x.cos()


@derivative("cos")
def _(grad, x):
    return -grad * x.sin()


@derivative("tan")
def _(grad, _x, *, result):
    return grad * (1 + result * result)


@derivative("asin")
def _(grad, x):
    return grad * (1 - x * x).rsqrt()


@derivative("acos")
def _(grad, x):
    return -grad * (1 - x * x).rsqrt()


@derivative("atan")
def _(grad, x):
    return grad / (1 + x * x)


@derivative("sinh")
def _(grad, x):
    return grad * x.cosh()


@derivative("cosh")
def _(grad, x):
    return grad * x.sinh()


@derivative("tanh")
def _(grad, _x, *, result):
    return grad * (1 - result * result)


@derivative("asinh")
def _(grad, x):
    return grad * (x * x + 1).rsqrt()


@derivative("acosh")
def _(grad, x):
    return grad * (x * x - 1).rsqrt()


@derivative("atanh")
def _(grad, x):
    return grad / (1 - x * x)


@derivative("sigmoid")
def _(grad, _x, *, result):
    return grad * result * (1 - result)


@derivative("erf")
def _(grad, x):
    return grad * (2 / math.sqrt(math.pi)) * (-(x * x)).exp()


@derivative("erfc")
def _(grad, x):
    return grad * (-2 / math.sqrt(math.pi)) * (-(x * x)).exp()


@derivative("erfinv")
def _(grad, _x, *, result):
    return grad * (math.sqrt(math.pi) / 2) * (result * result).exp()


@derivative("lgamma")
def _(grad, x):
    return grad * x.digamma()


@derivative("frac")
def _(grad, _x):
    return grad


# =======================================================================================
# elementwise, two or more inputs
# =======================================================================================


@derivative("add")
def _(grad, _a, _b):
    return grad, grad


@derivative("sub")
def _(grad, _a, _b):
    return grad, -grad


@derivative("mul")
def _(grad, a, b, *, needs_input_grad):
    return (grad * b if needs_input_grad[0] else None,
            grad * a if needs_input_grad[1] else None)


@derivative("div")
def _(grad, a, b, *, needs_input_grad, rounding_mode=None):
    if rounding_mode is not None:
        return None, None
    ga = grad / b if needs_input_grad[0] else None
    gb = -grad * a / (b * b) if needs_input_grad[1] else None
    return ga, gb


@derivative("pow")
def _(grad, a, b, *, result, needs_input_grad):
    ga = gb = None
    if needs_input_grad[0]:
        if isinstance(b, Tensor):
            ga = grad * b * torcia.where(b == 0, torcia.ones_like(a), a) ** (b - 1)
        elif b == 0:
            ga = grad * 0
        else:
            ga = grad * b * a ** (b - 1)
    if needs_input_grad[1]:
        # NOTE: the a == 0 branch keeps 0 * log(0) from becoming nan where b > 0
        gb = grad * torcia.where(a == 0, torcia.zeros_like(result), result * a.log())
    return ga, gb


def _minmax_grad(grad, a, b, pick_a):
    """maximum/minimum: the chosen side gets the gradient; ties split it evenly."""
    if not isinstance(b, Tensor):
        return torcia.where(a == b, grad / 2, grad * pick_a), None
    tie = a == b
    half = grad / 2
    return (torcia.where(tie, half, grad * pick_a),
            torcia.where(tie, half, grad * pick_a.logical_not()))


@derivative("maximum")
def _(grad, a, b):
    return _minmax_grad(grad, a, b, a > b)


@derivative("minimum")
def _(grad, a, b):
    return _minmax_grad(grad, a, b, a < b)


@derivative("fmax")
def _(grad, a, b):
    return _minmax_grad(grad, a, b, (a > b) | b.isnan())


@derivative("fmin")
def _(grad, a, b):
    return _minmax_grad(grad, a, b, (a < b) | b.isnan())


@derivative("remainder")
def _(grad, a, b):
    gb = -grad * (a / b).floor() if isinstance(b, Tensor) else None
    return grad, gb


@derivative("fmod")
def _(grad, a, b):
    gb = -grad * (a / b).trunc() if isinstance(b, Tensor) else None
    return grad, gb


@derivative("atan2")
def _(grad, a, b):
    denom = a * a + b * b
    return grad * b / denom, -grad * a / denom


@derivative("hypot")
def _(grad, a, b, *, result):
    return grad * a / result, grad * b / result


@derivative("xlogy")
def _(grad, a, b):
    ga = grad * torcia.where(a == 0, torcia.zeros_like(b), b.log())
    return ga, grad * a / b


@derivative("clamp")
def _(grad, x, lo, hi):
    keep = torcia.ones_like(x, dtype=torcia.bool)
    if lo is not None:
        keep = keep & (x >= lo)
    if hi is not None:
        keep = keep & (x <= hi)
    zero = torcia.zeros_like(grad)
    glo = torcia.where(x < lo, grad, zero) if isinstance(lo, Tensor) else None
    ghi = torcia.where(x > hi, grad, zero) if isinstance(hi, Tensor) else None
    if isinstance(lo, Tensor) and isinstance(hi, Tensor):
        # PyTorch gives the gradient to max when min > max
        glo = torcia.where((x < lo) & (lo <= hi), grad, zero)
        ghi = torcia.where((x > hi) | (lo > hi), grad, zero)
        keep = keep & (lo <= hi)
    return torcia.where(keep, grad, zero), glo, ghi


@derivative("where")
def _(grad, cond, _a, _b):
    zero = torcia.zeros_like(grad)
    return None, torcia.where(cond, grad, zero), torcia.where(cond, zero, grad)


@derivative("lerp")
def _(grad, start, end, weight):
    gw = grad * (end - start) if isinstance(weight, Tensor) else None
    return grad * (1 - weight), grad * weight, gw


@derivative("addcmul")
def _(grad, _x, t1, t2, *, value):
    return grad, grad * value * t2, grad * value * t1


@derivative("addcdiv")
def _(grad, _x, t1, t2, *, value):
    return grad, grad * value / t2, -grad * value * t1 / (t2 * t2)


@derivative("masked_fill")
def _(grad, _x, mask):
    return grad.masked_fill(mask, 0), None


@derivative("cast")
def _(grad, _x):
    return grad


@derivative("to_device")
def _(grad, _x, *, device):
    return grad.to(device)


@derivative("nan_to_num")
def _(grad, x):
    return grad * x.isfinite()


# =======================================================================================
# reductions
# =======================================================================================


@derivative("sum")
def _(grad, _x, *, dim, keepdim):
    return _restore_dims(grad, dim, keepdim, _x.ndim).expand(_x.shape)


@derivative("nansum")
def _(grad, x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, x.ndim).expand(x.shape)
    return g.masked_fill(x.isnan(), 0)


@derivative("mean")
def _(grad, _x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, _x.ndim)
    return g.expand(_x.shape) / _count(_x.shape, dim)


@derivative("prod")
def _(grad, x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    if dim is None:
        return g * _prod_others(x.reshape(-1), 0).reshape(x.shape)
    (d,) = dim
    return g * _prod_others(x, d)


def _prod_others(x, d):
    """For each position along ``d``: the product of every other element. Computed from
    prefix and suffix products rather than by division, so zeros in ``x`` are exact."""
    ones = torcia.ones_like(x.narrow(d, 0, 1))
    n = x.shape[d]
    before = torcia.cat([ones, x.narrow(d, 0, n - 1)], d).cumprod(d)
    after = torcia.cat([x.narrow(d, 1, n - 1), ones], d).flip((d,)).cumprod(d).flip((d,))
    return before * after


def _extreme_grad(grad, x, dim, keepdim, result):
    """amax/amin: ties share the gradient evenly."""
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    mask = x == r
    count = mask.sum(dim, keepdim=True) if dim is not None else mask.sum()
    return g * mask / count


@derivative("amax")
def _(grad, x, *, dim, keepdim, result):
    return _extreme_grad(grad, x, dim, keepdim, result)


@derivative("amin")
def _(grad, x, *, dim, keepdim, result):
    return _extreme_grad(grad, x, dim, keepdim, result)


def _index_grad(grads, x, dim, keepdim, indices):
    """max/min/median/mode along a dim: the gradient goes to the chosen element."""
    g = grads[0]
    if g is None:
        return None
    if not keepdim:
        g = g.unsqueeze(dim)
        indices = indices.unsqueeze(dim)
    return torcia.zeros_like(x).scatter(dim, indices, g)


@derivative("max_dim")
def _(grads, x, *, dim, keepdim, result):
    return _index_grad(grads, x, dim, keepdim, result[1])


@derivative("min_dim")
def _(grads, x, *, dim, keepdim, result):
    return _index_grad(grads, x, dim, keepdim, result[1])


@derivative("var")
def _(grad, x, *, dim, correction, keepdim):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    n = _count(x.shape, dim)
    return g * 2 * (x - x.mean(dim, keepdim=True)) / max(n - correction, 0)


@derivative("std")
def _(grad, x, *, dim, correction, keepdim, result):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    n = _count(x.shape, dim)
    return g * (x - x.mean(dim, keepdim=True)) / (max(n - correction, 0) * r)


@derivative("norm")
def _(grad, x, *, p, dim, keepdim, result):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    if p == 0:
        return x * 0
    if p == 1:
        return g * x.sign()
    if p == 2:
        # NOTE: a zero norm gives a zero gradient, as PyTorch's subgradient choice
        return g * x / r.masked_fill(r == 0, 1)
    if math.isinf(p):
        return _extreme_grad(grad, x.abs(), dim, keepdim, result) * x.sign()
    safe = r.masked_fill(r == 0, 1)
    return g * x * x.abs() ** (p - 2) / safe ** (p - 1)


@derivative("logsumexp")
def _(grad, x, *, dim, keepdim, result):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    return g * (x - r).exp()


@derivative("cumsum")
def _(grad, _x, *, dim, dtype=None):
    return grad.flip((dim,)).cumsum(dim).flip((dim,))


@derivative("cumprod")
def _(grad, x, *, dim, result, dtype=None):
    # d out_j / d x_i = prod_{k<=j, k!=i} x_k, summed over j >= i
    n = x.shape[dim]
    out = []
    for i in range(n):
        xi = x.narrow(dim, i, 1)
        others = torcia.cat([x.narrow(dim, 0, i), torcia.ones_like(xi),
                             x.narrow(dim, i + 1, n - i - 1)], dim).cumprod(dim)
        out.append((grad.narrow(dim, i, n - i) * others.narrow(dim, i, n - i)).sum(
            dim, keepdim=True))
    return torcia.cat(out, dim)


# =======================================================================================
# views and movement
# =======================================================================================


@derivative("view")
def _(grad, _x, *, shape):
    return grad.reshape(_x.shape)


@derivative("reshape")
def _(grad, _x, *, shape):
    return grad.reshape(_x.shape)


@derivative("detach_view")
def _(grad, _x):
    return grad


@derivative("permute")
def _(grad, _x, *, dims):
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return grad.permute(inverse)


@derivative("transpose")
def _(grad, _x, *, dim0, dim1):
    return grad.transpose(dim0, dim1)


@derivative("squeeze")
def _(grad, _x, *, dim=None):
    return grad.reshape(_x.shape)


@derivative("unsqueeze")
def _(grad, _x, *, dim):
    return grad.squeeze(dim)


@derivative("expand")
def _(grad, _x, *, shape):
    return grad  # the engine sums the broadcast dims back


@derivative("contiguous")
def _(grad, _x):
    return grad


@derivative("clone")
def _(grad, _x):
    return grad


def _scatter_back(grad, meta, key):
    """The gradient of ``x[key]``: zeros with ``grad`` added at ``key``."""
    return call("index_put", (_zeros(meta), grad), {"key": key, "accumulate": True})


@derivative("getitem")
def _(grad, _x, *, key):
    return _scatter_back(grad, _x, key)


@derivative("narrow")
def _(grad, _x, *, dim, start, length):
    key = (slice(None),) * dim + (slice(start, start + length),)
    return _scatter_back(grad, _x, key)


def _index_map(meta, op, params):
    """Where each element of a view comes from, as flat indices into its base."""
    with torcia.no_grad():
        flat = torcia.arange(meta.numel(), device=meta.device).reshape(meta.shape)
        return call(op, (flat,), params)


def _view_backward_by_index(grad, meta, op, params):
    """Backward of any view op, overlapping windows included: scatter-add by index map."""
    idx = _index_map(meta, op, params).reshape(-1)
    flat = torcia.zeros(meta.numel(), dtype=grad.dtype, device=grad.device)
    flat = call("index_put", (flat, grad.reshape(-1)), {"key": (idx._data,), "accumulate": True})
    return flat.reshape(meta.shape)


@derivative("unfold")
def _(grad, _x, *, dimension, size, step):
    return _view_backward_by_index(grad, _x, "unfold",
                                   {"dimension": dimension, "size": size, "step": step})


@derivative("diagonal")
def _(grad, _x, *, offset, dim1, dim2):
    return _view_backward_by_index(grad, _x, "diagonal",
                                   {"offset": offset, "dim1": dim1, "dim2": dim2})


@derivative("as_strided")
def _(grad, _x, *, size, stride, storage_offset):
    return _view_backward_by_index(grad, _x, "as_strided",
                                   {"size": size, "stride": stride,
                                    "storage_offset": storage_offset})


@derivative("copy_slices")
def _(grad, _base, _src, *, size, stride, storage_offset):
    """An in-place write into a view of ``base``: the written region's gradient goes to
    the written value, the rest to the base's old value."""
    params = {"size": size, "stride": stride, "storage_offset": storage_offset}
    idx = _index_map(_base, "as_strided", params).reshape(-1)
    flat = grad.reshape(-1)
    g_src = flat[idx].reshape(size)
    keep = torcia.ones(_base.numel(), dtype=torcia.bool, device=grad.device)
    keep[idx] = False
    return (flat * keep).reshape(_base.shape), g_src


@derivative("index_put")
def _(grad, _x, _values, *, key, accumulate):
    gx = grad if accumulate else call(
        "index_put", (grad, torcia.zeros((), dtype=grad.dtype, device=grad.device)),
        {"key": key, "accumulate": False})
    gv = call("getitem", (grad,), {"key": key})
    return gx, gv


@derivative("flip")
def _(grad, _x, *, dims):
    return grad.flip(dims)


@derivative("roll")
def _(grad, _x, *, shifts, dims):
    if dims is None:
        return grad.reshape(-1).roll(-shifts).reshape(_x.shape)
    return grad.roll(tuple(-s for s in shifts), dims)


@derivative("repeat")
def _(grad, _x, *, sizes):
    extra = len(sizes) - _x.ndim
    shape = (1,) * extra + tuple(_x.shape)
    split = []
    for r, s in zip(sizes, shape):
        split += [r, s]
    g = grad.reshape(split).sum(tuple(range(0, len(split), 2)))
    return g.reshape(_x.shape)


@derivative("tile")
def _(grad, _x, *, dims):
    return TABLE["repeat"].fn(grad, _x, sizes=tuple(dims))


@derivative("tril")
def _(grad, _x, *, diagonal):
    return grad.tril(diagonal)


@derivative("triu")
def _(grad, _x, *, diagonal):
    return grad.triu(diagonal)


@derivative("cat")
def _(grad, *_xs, dim):
    return tuple(grad.split([m.shape[dim] for m in _xs], dim))


@derivative("stack")
def _(grad, *_xs, dim):
    return tuple(grad.unbind(dim))


@derivative("split")
def _(grads, _x, *, sections, dim):
    parts = []
    for g, n in zip(grads, sections):
        if g is None:
            shape = list(_x.shape)
            shape[dim] = n
            g = torcia.zeros(shape, dtype=_x.dtype, device=_x.device)
        parts.append(g)
    return torcia.cat(parts, dim)


@derivative("gather")
def _(grad, _x, index, *, dim):
    return torcia.zeros(_x.shape, dtype=grad.dtype, device=grad.device).scatter_add(
        dim, index, grad), None


@derivative("scatter")
def _(grad, _x, index, src, *, dim):
    gsrc = grad.gather(dim, index) if isinstance(src, Tensor) else None
    return grad.scatter(dim, index, 0.0), None, gsrc


@derivative("scatter_add")
def _(grad, _x, index, _src, *, dim):
    return grad, None, grad.gather(dim, index)


@derivative("index_select")
def _(grad, _x, index, *, dim):
    return torcia.zeros(_x.shape, dtype=grad.dtype, device=grad.device).index_add(
        dim, index, grad), None


@derivative("index_add")
def _(grad, _x, index, _source, *, dim, alpha):
    return grad, None, grad.index_select(dim, index) * alpha


@derivative("index_copy")
def _(grad, _x, index, _source, *, dim):
    cleared = grad.index_copy(dim, index, torcia.zeros(_source.shape, dtype=grad.dtype,
                                                       device=grad.device))
    return cleared, None, grad.index_select(dim, index)


@derivative("take_along_dim")
def _(grad, _x, indices, *, dim):
    zeros = torcia.zeros(_x.shape, dtype=grad.dtype, device=grad.device)
    if dim is None:
        return zeros.reshape(-1).scatter_add(0, indices.reshape(-1), grad.reshape(-1)).reshape(
            _x.shape), None
    return zeros.scatter_add(dim, indices, grad), None


# =======================================================================================
# linear algebra
# =======================================================================================


@derivative("matmul")
def _(grad, a, b, *, needs_input_grad):
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g = grad
    if a.ndim == 1:
        g = g.unsqueeze(-2)
    if b.ndim == 1:
        g = g.unsqueeze(-1)
    ga = g @ b2.mT if needs_input_grad[0] else None
    gb = a2.mT @ g if needs_input_grad[1] else None
    if ga is not None and a.ndim == 1:
        ga = ga.squeeze(-2)
        if ga.ndim > 1:
            ga = ga.reshape(-1, a.shape[0]).sum(0)
    if gb is not None and b.ndim == 1:
        gb = gb.squeeze(-1)
        if gb.ndim > 1:
            gb = gb.reshape(-1, b.shape[0]).sum(0)
    return ga, gb


@derivative("mm")
def _(grad, a, b, *, needs_input_grad):
    return (grad @ b.mT if needs_input_grad[0] else None,
            a.mT @ grad if needs_input_grad[1] else None)


@derivative("bmm")
def _(grad, a, b, *, needs_input_grad):
    return (grad @ b.mT if needs_input_grad[0] else None,
            a.mT @ grad if needs_input_grad[1] else None)


@derivative("dot")
def _(grad, a, b):
    return grad * b, grad * a


@derivative("outer")
def _(grad, a, b):
    return grad @ b, grad.mT @ a


@derivative("addmm")
def _(grad, _c, a, b, *, beta, alpha, needs_input_grad):
    gc = grad * beta if needs_input_grad[0] else None
    ga = (grad @ b.mT) * alpha if needs_input_grad[1] else None
    gb = (a.mT @ grad) * alpha if needs_input_grad[2] else None
    return gc, ga, gb


@derivative("einsum")
def _(grad, *operands, equation):
    lhs, out = equation.split("->") if "->" in equation else (equation, None)
    subs = lhs.split(",")
    if out is None:
        letters = "".join(subs)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c != "."))
    if "." in equation:
        raise NotImplementedError("einsum backward with '...' is not supported yet")
    grads = []
    for i, sub in enumerate(subs):
        others = [s for j, s in enumerate(subs) if j != i]
        ops = [o for j, o in enumerate(operands) if j != i]
        missing = [c for c in dict.fromkeys(sub) if c not in out and all(c not in s for s in others)]
        target = "".join(c for c in dict.fromkeys(sub) if c not in missing)
        g = torcia.einsum(",".join([out] + others) + "->" + target, grad, *ops)
        if missing or len(set(sub)) != len(sub):
            g = _einsum_expand(g, target, sub, operands[i])
        grads.append(g)
    return tuple(grads)


def _einsum_expand(g, target, sub, x):
    """Broadcast ``g`` (indexed by ``target``) back to operand ``x`` (indexed by ``sub``)."""
    if len(set(sub)) != len(sub):
        raise NotImplementedError(
            "einsum backward for a subscript repeated within one operand (a diagonal) is not "
            "supported"
        )
    for c in sub:
        if c not in target:
            g = g.unsqueeze(-1)
            target += c
    return g.permute([target.index(c) for c in sub]).expand(x.shape)


@derivative("tensordot")
def _(grad, a, b, *, dims):
    da, db = dims
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    na = len(free_a)
    # grad has dims free_a + free_b
    ga = torcia.tensordot(grad, b, (tuple(range(na, grad.ndim)), tuple(free_b)))
    # ga dims: free_a + db order -> permute to a's order
    order_a = free_a + list(da)
    ga = ga.permute([order_a.index(d) for d in range(a.ndim)])
    gb = torcia.tensordot(a, grad, (tuple(free_a), tuple(range(na))))
    order_b = list(db) + free_b
    gb = gb.permute([order_b.index(d) for d in range(b.ndim)])
    return ga, gb
