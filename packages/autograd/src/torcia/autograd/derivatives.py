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
    return grad * torcia.sgn(x)


@derivative("square")
def _(grad, x):
    return grad * 2 * _c(x)


@derivative("relu")
def _(grad, _x, *, result):
    fused = _fused("relu", grad, result)
    if fused is not None:
        return fused
    return torcia.where(result <= 0, 0.0, grad)


@derivative("exp")
def _(grad, _x, *, result):
    return grad * _c(result)


@derivative("exp2")
def _(grad, _x, *, result):
    return grad * _c(result * math.log(2.0))


@derivative("expm1")
def _(grad, _x, *, result):
    return grad * _c(result + 1)


@derivative("log")
def _(grad, x):
    return grad / _c(x)


@derivative("log2")
def _(grad, x):
    return grad / _c(x * math.log(2.0))


@derivative("log10")
def _(grad, x):
    return grad / _c(x * math.log(10.0))


@derivative("log1p")
def _(grad, x):
    return grad / _c(x + 1)


@derivative("sqrt")
def _(grad, _x, *, result):
    return grad / (2 * _c(result))


@derivative("rsqrt")
def _(grad, _x, *, result):
    return -0.5 * grad * _c(result * result * result)


@derivative("reciprocal")
def _(grad, _x, *, result):
    return -grad * _c(result * result)


@derivative("sin")
def _(grad, x):
    return grad * _c(x.cos())


@derivative("cos")
def _(grad, x):
    return -grad * _c(x.sin())


@derivative("tan")
def _(grad, _x, *, result):
    return grad * _c(1 + result * result)


@derivative("asin")
def _(grad, x):
    return grad * _c((1 - x * x).rsqrt())


@derivative("acos")
def _(grad, x):
    return -grad * _c((1 - x * x).rsqrt())


@derivative("atan")
def _(grad, x):
    return grad / _c(1 + x * x)


@derivative("sinh")
def _(grad, x):
    return grad * _c(x.cosh())


@derivative("cosh")
def _(grad, x):
    return grad * _c(x.sinh())


@derivative("tanh")
def _(grad, _x, *, result):
    return grad * _c(1 - result * result)


@derivative("asinh")
def _(grad, x):
    return grad * _c((x * x + 1).rsqrt())


@derivative("acosh")
def _(grad, x):
    return grad * _c((x * x - 1).rsqrt())


@derivative("atanh")
def _(grad, x):
    return grad / _c(1 - x * x)


@derivative("sigmoid")
def _(grad, _x, *, result):
    return grad * _c(result * (1 - result))


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


@derivative("digamma")
def _(grad, x):
    return grad * _trigamma(x)


def _trigamma(x):
    """psi'(x) from differentiable ops: the recurrence psi'(z) = psi'(z + 1) + 1/z^2 up to
    z + 10, then the asymptotic series; negative x by reflection."""
    neg = x < 0.5
    z = torcia.where(neg, 1 - x, x)
    total = torcia.zeros_like(z)
    for k in range(10):
        total = total + 1 / ((z + k) * (z + k))
    w = 1 / (z + 10)
    w2 = w * w
    total = total + w + w2 / 2 + w * w2 * (1 / 6 - w2 * (1 / 30 - w2 * (1 / 42 - w2 / 30)))
    # psi'(1 - x) + psi'(x) = pi^2 / sin^2(pi x)
    reflected = (math.pi / (math.pi * x).sin()) ** 2 - total
    return torcia.where(neg, reflected, total)


@derivative("frac")
def _(grad, _x):
    return grad


def _zero_grad(grad, _x, **params):
    """Piecewise constant ops (sign, rounding): PyTorch's gradient is zero everywhere."""
    return torcia.zeros_like(grad)


for _op in ("sign", "floor", "ceil", "trunc", "round"):
    derivative(_op)(_zero_grad)


# ----- special functions (torcia.special) ---------------------------------------------------


def _nonzero(x):
    """``x`` with its zeros replaced by 1, so a formula's 0/0 branch stays finite."""
    return x.masked_fill(x == 0, 1)


@derivative("i0")
def _(grad, x):
    return grad * torcia.special.i1(x)


@derivative("i0e")
def _(grad, x, *, result):
    return grad * (torcia.special.i1e(x) - x.sign() * result)


@derivative("i1")
def _(grad, x, *, result):
    # i1'(x) = i0(x) - i1(x) / x, with the limit 1/2 at 0
    return grad * torcia.where(x == 0, torcia.full_like(x, 0.5),
                               torcia.special.i0(x) - result / _nonzero(x))


@derivative("i1e")
def _(grad, x, *, result):
    return grad * torcia.where(
        x == 0, torcia.full_like(x, 0.5),
        torcia.special.i0e(x) - result * (x.sign() + 1 / _nonzero(x)))


@derivative("ndtr")
def _(grad, x):
    return grad * (-0.5 * x * x).exp() / math.sqrt(2 * math.pi)


@derivative("ndtri")
def _(grad, _x, *, result):
    return grad * math.sqrt(2 * math.pi) * (0.5 * result * result).exp()


@derivative("log_ndtr")
def _(grad, x, *, result):
    return grad * (-0.5 * x * x - result).exp() / math.sqrt(2 * math.pi)


@derivative("erfcx")
def _(grad, x, *, result):
    return grad * (2 * x * result - 2 / math.sqrt(math.pi))


@derivative("sinc")
def _(grad, x, *, result):
    # sinc'(x) = (cos(pi x) - sinc(x)) / x; at 0 its linear term, 0 with slope -pi^2/3, so
    # that the second derivative holds there too
    safe = _nonzero(x)
    return grad * torcia.where(x == 0, -(math.pi ** 2 / 3) * x,
                               ((math.pi * safe).cos() - result) / safe)


@derivative("entr")
def _(grad, x):
    return grad * -(x.log() + 1)


@derivative("polygamma")
def _(grad, x, *, n):
    return grad * torcia.special.polygamma(n + 1, x)


@derivative("xlog1py")
def _(grad, a, b, *, needs_input_grad):
    ga = gb = None
    if needs_input_grad[0]:
        # PyTorch's rule: log1p(b), except 0 where a == 0 and log1p(b) is not finite
        b_t = b if isinstance(b, Tensor) else torcia.full_like(a, b)
        log1p_b = b_t.log1p()
        ga = grad * torcia.where((a == 0) & (b_t <= -1), torcia.zeros_like(log1p_b), log1p_b)
    if needs_input_grad[1]:
        gb = grad * a / (b + 1)
    return ga, gb


def _no_derivative(name):
    return NotImplementedError(f"the derivative for '{name}' is not implemented.")


@derivative("zeta")
def _(grad, a, b, *, needs_input_grad):
    if needs_input_grad[0]:
        raise _no_derivative("zeta")
    return None, grad * -a * torcia.special.zeta(a + 1, b)


def _gammainc_other(grad, a, b):
    # dP(a, x)/dx = x^(a - 1) e^-x / Gamma(a)
    a = a if isinstance(a, Tensor) else torcia.full_like(b, a)
    return grad * ((a - 1) * b.log() - b - a.lgamma()).exp()


@derivative("gammainc")
def _(grad, a, b, *, needs_input_grad):
    if needs_input_grad[0]:
        raise _no_derivative("igamma: input")
    return None, _gammainc_other(grad, a, b)


@derivative("gammaincc")
def _(grad, a, b, *, needs_input_grad):
    if needs_input_grad[0]:
        raise _no_derivative("igammac: input")
    return None, -_gammainc_other(grad, a, b)


# ----- complex numbers ----------------------------------------------------------------------


@derivative("real")
def _(grad, _x):
    return grad


@derivative("imag")
def _(grad, _x):
    # x = a + ib: d imag / db = 1, and the gradient holds d/da + i d/db
    return grad * 1j


@derivative("view_as_real")
def _(grad, _x):
    return torcia.view_as_complex(grad.contiguous())


@derivative("view_as_complex")
def _(grad, _x):
    return torcia.view_as_real(grad)


@derivative("conj")
def _(grad, _x):
    return grad.conj()


@derivative("angle")
def _(grad, x):
    if not x.is_complex():
        return torcia.zeros_like(x)
    # angle = atan2(b, a): d/da = -b / |x|^2, d/db = a / |x|^2, so the gradient is
    # grad * i x / |x|^2 (0 at 0)
    size2 = (x * x.conj()).real
    return torcia.where(size2 == 0, torcia.zeros_like(x), grad * 1j * x / size2)


@derivative("complex", names={"re": "real", "im": "imag"})
def _(grad, _re, _im):
    return grad.real, grad.imag


# ----- discrete Fourier transforms ---------------------------------------------------------

# The adjoint of a transform scaled by s is the opposite-direction transform scaled by s:
# the norm mode whose scale in the other direction is the same one
_ADJOINT_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


@derivative("fft_c2c", names=_FFT_NAMES)
def _(grad, _x, *, dims, norm, forward):
    return call("fft_c2c", (grad,), {"dims": dims, "norm": _ADJOINT_NORM[norm],
                                     "forward": not forward})


@derivative("fft_r2c", names=_FFT_NAMES)
def _(grad, _x, *, dims, norm, onesided):
    # the half spectrum is the full one cut short: pad it back with zeros, then adjoin
    if onesided:
        last = dims[-1]
        missing = _x.shape[last] - grad.shape[last]
        if missing:
            zeros = torcia.zeros(*grad.shape[:last], missing, *grad.shape[last + 1:],
                                 dtype=grad.dtype, device=grad.device)
            grad = torcia.cat([grad, zeros], last)
    full = call("fft_c2c", (grad,), {"dims": dims, "norm": _ADJOINT_NORM[norm],
                                     "forward": False})
    return full.real


@derivative("fft_c2r", names=_FFT_NAMES)
def _(grad, _x, *, dims, norm, last_dim_size):
    # as PyTorch: the one-sided transform of the gradient, its bins that stand for two
    # (conjugate) bins of the full spectrum doubled
    gx = call("fft_r2c", (grad,), {"dims": dims, "norm": _ADJOINT_NORM[norm],
                                   "onesided": True})
    last = dims[-1]
    double = last_dim_size - gx.shape[last]
    if double > 0:
        scale = torcia.ones(gx.shape[last], dtype=gx.real.dtype, device=gx.device)
        scale[1:1 + double] = 2
        gx = gx * scale.reshape((-1,) + (1,) * (gx.ndim - 1 - last))
    return gx


# =======================================================================================
# elementwise, two or more inputs
# =======================================================================================


@derivative("add")
def _(grad, _a, _b):
    return grad, grad


@derivative("sub")
def _(grad, _a, _b):
    return grad, -grad


@derivative("mul", saved_only_for={"a": "b", "b": "a"})
def _(grad, a, b, *, needs_input_grad):
    return (grad * _c(b) if needs_input_grad[0] else None,
            grad * _c(a) if needs_input_grad[1] else None)


@derivative("div", saved_only_for={"a": "b"})
def _(grad, a, b, *, needs_input_grad, rounding_mode=None):
    if rounding_mode is not None:
        return None, None
    ga = grad / _c(b) if needs_input_grad[0] else None
    gb = -grad * _c(a / (b * b)) if needs_input_grad[1] else None
    return ga, gb


@derivative("pow", names={"b": "exponent"})
def _(grad, a, b, *, result, needs_input_grad):
    ga = gb = None
    if needs_input_grad[0]:
        if isinstance(b, Tensor):
            ga = grad * _c(b * torcia.where(b == 0, torcia.ones_like(a), a) ** (b - 1))
        elif b == 0:
            ga = grad * 0
        else:
            ga = grad * _c(b * a ** (b - 1))
    if needs_input_grad[1]:
        # NOTE: the a == 0 branch keeps 0 * log(0) from becoming nan where b > 0
        gb = grad * _c(torcia.where(a == 0, torcia.zeros_like(result), result * a.log()))
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
    nan_b = b.isnan() if isinstance(b, Tensor) else math.isnan(b)
    return _minmax_grad(grad, a, b, (a > b) | nan_b)


@derivative("fmin")
def _(grad, a, b):
    nan_b = b.isnan() if isinstance(b, Tensor) else math.isnan(b)
    return _minmax_grad(grad, a, b, (a < b) | nan_b)


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
    # NOTE: at a = b = 0 PyTorch's gradient is 0, not 0/0
    denom = a * a + b * b
    denom = denom.masked_fill(denom == 0, 1)
    return grad * b / denom, -grad * a / denom


@derivative("hypot")
def _(grad, a, b, *, result):
    return grad * a / result, grad * b / result


@derivative("xlogy")
def _(grad, a, b):
    log_b = b.log() if isinstance(b, Tensor) else torcia.full_like(a, b).log()
    ga = grad * torcia.where(a == 0, torcia.zeros_like(log_b), log_b)
    return ga, grad * a / b if isinstance(b, Tensor) else None


@derivative("clamp", names={"lo": "min", "hi": "max"})
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


@derivative("where", names={"cond": "condition", "a": "self", "b": "other"})
def _(grad, cond, _a, _b):
    zero = torcia.zeros_like(grad)
    return None, torcia.where(cond, grad, zero), torcia.where(cond, zero, grad)


@derivative("lerp")
def _(grad, start, end, weight):
    gw = grad * _c(end - start) if isinstance(weight, Tensor) else None
    return grad * _c(1 - weight), grad * _c(weight), gw


@derivative("addcmul", names={"t1": "tensor1", "t2": "tensor2"})
def _(grad, _x, t1, t2, *, value):
    return grad, grad * _c(value * t2), grad * _c(value * t1)


@derivative("addcdiv", names={"t1": "tensor1", "t2": "tensor2"})
def _(grad, _x, t1, t2, *, value):
    return grad, grad * _c(value / t2), -grad * _c(value * t1 / (t2 * t2))


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
    return _expand_to(_restore_dims(grad, dim, keepdim, len(_x[0])), _x[0])


@derivative("nansum")
def _(grad, x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, x.ndim).expand(x.shape)
    return g.masked_fill(x.isnan(), 0)


@derivative("mean")
def _(grad, _x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, len(_x[0]))
    return _expand_to(g, _x[0]) / _count(_x.shape, dim)


@derivative("prod")
def _(grad, x, *, dim, keepdim):
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    if dim is None:
        return g * _c(_prod_others(x.reshape(-1), 0).reshape(x.shape))
    (d,) = dim
    return g * _c(_prod_others(x, d))


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


def _picked_row(grads, x, *, dim, keepdim, result):
    return _index_grad(grads, x, dim, keepdim, result[1])


# one element chosen along ``dim``, its index the second output
for _op in ("max_dim", "min_dim", "median_dim", "mode_dim", "kthvalue"):
    derivative(_op, names=_INDICES)(_picked_row)


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
    # where all values are equal (std 0) PyTorch's gradient is 0, not 0 / 0
    return torcia.where(r == 0, 0.0, g / r) * (x - x.mean(dim, keepdim=True)) / max(
        n - correction, 0)


@derivative("norm", names={"p": "ord"})
def _(grad, x, *, p, dim, keepdim, result):
    return _norm_backward(grad, x, p, dim, keepdim, result)


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
        out.append((grad.narrow(dim, i, n - i) * _c(others.narrow(dim, i, n - i))).sum(
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
    flat = call("index_put", (flat, grad.reshape(-1)),
                {"key": (idx.__torcia_data__,), "accumulate": True})
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
def _(grad, _base, _src, *, index):
    """An in-place write into a view of ``base``: the written region (``index``: flat
    positions in the base, shaped as the view) sends its gradient to the written value,
    the rest to the base's old value."""
    flat = grad.reshape(-1)
    g_src = flat[index]
    keep = torcia.ones(_base.numel(), dtype=torcia.bool, device=grad.device)
    keep[index] = False
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


@derivative("repeat", names={"sizes": "repeats"})
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
    # tile pads short ``dims`` with leading ones; then it is repeat
    sizes = (1,) * (_x.ndim - len(dims)) + tuple(dims)
    return TABLE["repeat"].fn(grad, _x, sizes=sizes)


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


@derivative("split", names={"sections": "split_size"})
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
    gsrc = _embed(grad.gather(dim, index), src.shape) if isinstance(src, Tensor) else None
    return grad.scatter(dim, index, 0.0), None, gsrc


@derivative("scatter_add")
def _(grad, _x, index, _src, *, dim):
    return grad, None, _embed(grad.gather(dim, index), _src.shape)


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


@derivative("matmul", saved_only_for={"a": "b", "b": "a"}, names=_matmul_names)
def _(grad, a, b, *, needs_input_grad):
    ga = gb = None
    if a.ndim == 1 and b.ndim == 1:
        if needs_input_grad[0]:
            ga = grad * _c(b)
        if needs_input_grad[1]:
            gb = grad * _c(a)
        return ga, gb
    # vectors act as matrices: a row on the left, a column on the right
    g = grad.unsqueeze(-2) if a.ndim == 1 else grad
    g = g.unsqueeze(-1) if b.ndim == 1 else g
    if needs_input_grad[0]:
        ga = g @ (b.unsqueeze(-1) if b.ndim == 1 else b).mH
        if a.ndim == 1:
            ga = ga.squeeze(-2)
            if ga.ndim > 1:
                ga = ga.reshape(-1, a.shape[0]).sum(0)
    if needs_input_grad[1] and b.ndim == 2 and a.ndim > 2:
        # a weight shared across a batch: one product over all rows, rather than a
        # product per batch entry summed afterwards
        gb = a.reshape(-1, a.shape[-1]).mH @ g.reshape(-1, g.shape[-1])
    elif needs_input_grad[1]:
        gb = (a.unsqueeze(0) if a.ndim == 1 else a).mH @ g
        if b.ndim == 1:
            gb = gb.squeeze(-1)
            if gb.ndim > 1:
                gb = gb.reshape(-1, b.shape[0]).sum(0)
    return ga, gb


@derivative("mm", saved_only_for={"a": "b", "b": "a"}, names={"b": "mat2"})
def _(grad, a, b, *, needs_input_grad):
    return (grad @ b.mH if needs_input_grad[0] else None,
            a.mH @ grad if needs_input_grad[1] else None)


@derivative("sparse_mm", saved_only_for={"dense": "values"})
def _(grad, crow, col, values, dense, *, ncols, transpose, needs_input_grad):
    # out = A @ dense (A^T @ dense with transpose), A the compressed-row matrix of
    # (crow, col, values): dense gets A^H @ grad (A-bar @ grad), each stored value the
    # dot product of the grad row and the dense row its entry joins
    gv = gd = None
    if needs_input_grad[3]:
        gd = call("sparse_mm", (crow, col, _c(values), grad),
                  {"ncols": ncols, "transpose": not transpose})
    if needs_input_grad[2]:
        counts = crow[1:] - crow[:-1]
        rows = torcia.repeat_interleave(torcia.arange(crow.shape[0] - 1, device=crow.device),
                                        counts.long())
        out_rows, in_rows = (col, rows) if transpose else (rows, col)
        gv = (grad.index_select(0, out_rows.long())
              * _c(dense.index_select(0, in_rows.long()))).sum(-1)
    return None, None, gv, gd


@derivative("bmm", saved_only_for={"a": "b", "b": "a"}, names={"b": "mat2"})
def _(grad, a, b, *, needs_input_grad):
    return (grad @ b.mH if needs_input_grad[0] else None,
            a.mH @ grad if needs_input_grad[1] else None)


@derivative("dot", saved_only_for={"a": "b", "b": "a"}, names={"b": "tensor"})
def _(grad, a, b, *, needs_input_grad):
    return (grad * _c(b) if needs_input_grad[0] else None,
            grad * _c(a) if needs_input_grad[1] else None)


@derivative("outer", saved_only_for={"a": "b", "b": "a"}, names={"b": "vec2"})
def _(grad, a, b, *, needs_input_grad):
    return (grad @ _c(b) if needs_input_grad[0] else None,
            grad.mT @ _c(a) if needs_input_grad[1] else None)


@derivative("addmm", saved_only_for={"a": "b", "b": "a"},
            names={"c": "self", "a": "mat1", "b": "mat2"})
def _(grad, _c, a, b, *, beta, alpha, needs_input_grad):
    # scaling by 1 would cost a full pass (and a node under create_graph)
    gc = (grad if beta == 1 else grad * beta) if needs_input_grad[0] else None
    ga = grad @ b.mH if needs_input_grad[1] else None
    gb = a.mH @ grad if needs_input_grad[2] else None
    if alpha != 1:
        ga = ga * alpha if ga is not None else None
        gb = gb * alpha if gb is not None else None
    return gc, ga, gb


@derivative("einsum")
def _(grad, *operands, equation):
    subs, out = _einsum_letters(equation, [o.shape for o in operands])
    sizes = {}
    for sub, o in zip(subs, operands):
        sizes.update(zip(sub, o.shape))
    grads = []
    for i, sub in enumerate(subs):
        others = [s for j, s in enumerate(subs) if j != i]
        ops = [_c(o) for j, o in enumerate(operands) if j != i]
        unique = list(dict.fromkeys(sub))
        elsewhere = set(out).union(*others)
        target = "".join(c for c in unique if c in elsewhere)
        g = torcia.einsum(",".join([out] + others) + "->" + target, grad, *ops)
        # letters summed inside this operand alone: the gradient is constant along them
        for c in unique:
            if c not in elsewhere:
                g = g.unsqueeze(-1).expand(*g.shape, sizes[c])
                target += c
        grads.append(_einsum_place(g, target, sub, sizes))
    return tuple(grads)


_FRESH = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_letters(equation, shapes):
    """Operand and output subscripts with '...' spelled out as fresh letters and the
    implicit output made explicit. A broadcast (size-1) ellipsis dim gets a letter of its
    own, so that its gradient is summed."""
    equation = equation.replace(" ", "")
    lhs, out = equation.split("->") if "->" in equation else (equation, None)
    subs = lhs.split(",")
    used = set(equation)
    fresh = iter(c for c in _FRESH if c not in used)
    n_ell = max((len(shape) - len(s.replace("...", ""))
                 for s, shape in zip(subs, shapes) if "..." in s), default=0)
    ell = [next(fresh) for _ in range(n_ell)]
    ell_size = [1] * n_ell
    for s, shape in zip(subs, shapes):
        if "..." in s:
            k = len(shape) - len(s.replace("...", ""))
            for j in range(k):
                ell_size[n_ell - k + j] = max(ell_size[n_ell - k + j], shape[s.index("...") + j])
    spelled = []
    for s, shape in zip(subs, shapes):
        if "..." in s:
            k = len(shape) - len(s.replace("...", ""))
            at = s.index("...")
            mine = ""
            for j in range(k):
                pos = n_ell - k + j
                broadcast = shape[at + j] == 1 and ell_size[pos] != 1
                mine += next(fresh) if broadcast else ell[pos]
            s = s.replace("...", mine)
        spelled.append(s)
    if out is None:
        letters = "".join(subs)
        out = "".join(ell) + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1 and c != "."))
    else:
        out = out.replace("...", "".join(ell))
    return spelled, out


def _einsum_place(g, target, sub, sizes):
    """Arrange ``g`` (indexed by the distinct letters ``target``) as an operand indexed by
    ``sub``; a letter repeated in ``sub`` (a diagonal) puts ``g`` on that diagonal."""
    renamed = ""
    eyes = []
    seen = set()
    used = set(target) | set(sub)
    fresh = iter(c for c in _FRESH + "abcdefghijklmnopqrstuvwxyz" if c not in used)
    for c in sub:
        if c in seen:
            d = next(fresh)
            eyes.append((c, d))
            renamed += d
        else:
            seen.add(c)
            renamed += c
    if not eyes:
        return g.permute([target.index(c) for c in sub])
    eye_ops = [torcia.eye(sizes[c], dtype=g.dtype, device=g.device) for c, _ in eyes]
    spec = ",".join([target] + [c + d for c, d in eyes]) + "->" + renamed
    return torcia.einsum(spec, g, *eye_ops)


@derivative("tensordot")
def _(grad, a, b, *, dims):
    da, db = dims
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    na = len(free_a)
    # grad has dims free_a + free_b
    # ga's dims: free_a, then b's contracted dims in b's order (each paired with a dim of a)
    ga = torcia.tensordot(grad, _c(b), (tuple(range(na, grad.ndim)), tuple(free_b)))
    order_a = free_a + [da[list(db).index(d)] for d in sorted(db)]
    ga = ga.permute([order_a.index(d) for d in range(a.ndim)])
    gb = torcia.tensordot(_c(a), grad, (tuple(free_a), tuple(range(na))))
    order_b = [db[list(da).index(d)] for d in sorted(da)] + free_b
    gb = gb.permute([order_b.index(d) for d in range(b.ndim)])
    return ga, gb


def _embed(g, shape):
    """``g`` placed at the start of a zero tensor of ``shape`` (a ``src`` larger than its
    index gets no gradient past the index's extent)."""
    if tuple(g.shape) == tuple(shape):
        return g
    key = tuple(slice(0, s) for s in g.shape)
    zeros = torcia.zeros(shape, dtype=g.dtype, device=g.device)
    return call("index_put", (zeros, g), {"key": key, "accumulate": True})


def _backward_by_map(grad, meta, op, params):
    """Backward of an op that only moves, repeats or pads elements: run ``op`` on the
    numbers 1..n (0 marks padding) and scatter-add ``grad`` back by that map."""
    with torcia.no_grad():
        ids = torcia.arange(1, meta.numel() + 1, device=meta.device).reshape(meta.shape)
        idx = call(op, (ids,), params).reshape(-1)
    # slot 0 collects the gradient of padding, then is dropped
    flat = torcia.zeros(meta.numel() + 1, dtype=grad.dtype, device=grad.device)
    flat = call("index_put", (flat, grad.reshape(-1)),
                {"key": (idx.__torcia_data__,), "accumulate": True})
    return flat[1:].reshape(meta.shape)


# =======================================================================================
# sorting, selection and scans
# =======================================================================================


def _scatter_values_grad(grads, x, dim, indices):
    """sort/topk: each value's gradient goes back to where it was taken from."""
    g = grads[0]
    if g is None:
        return None
    if x.ndim == 0:
        return g
    return torcia.zeros(x.shape, dtype=g.dtype, device=g.device).scatter_add(dim, indices, g)


def _gathered_row(grads, _x, *, dim, result):
    return _scatter_values_grad(grads, _x, dim, result[1])


# values taken from positions along ``dim``, the positions the second output
for _op in ("sort", "topk", "cummax", "cummin"):
    derivative(_op, names=_INDICES)(_gathered_row)


@derivative("logcumsumexp")
def _(grad, x, *, dim, result):
    # d r_j / d x_i = exp(x_i - r_j) for i <= j; shifted by the total so exp stays small
    n = x.shape[dim]
    total = result.narrow(dim, n - 1, 1)
    tail = (grad * (total - result).exp()).flip((dim,)).cumsum(dim).flip((dim,))
    return tail * (x - total).exp()


# =======================================================================================
# gathering, padding, diagonals
# =======================================================================================


@derivative("repeat_interleave")
def _(grad, _x, *, repeats, dim):
    return _backward_by_map(grad, _x, "repeat_interleave", {"repeats": repeats, "dim": dim})


@derivative("pad")
def _(grad, _x, *, pad, mode, value):
    return _backward_by_map(grad, _x, "pad", {"pad": pad, "mode": mode, "value": 0})


@derivative("diag")
def _(grad, _x, *, diagonal):
    return _backward_by_map(grad, _x, "diag", {"diagonal": diagonal})


@derivative("diag_embed")
def _(grad, _x, *, offset, dim1, dim2):
    return _backward_by_map(grad, _x, "diag_embed", {"offset": offset, "dim1": dim1,
                                                     "dim2": dim2})


@derivative("masked_select")
def _(grad, _x, mask):
    shape = torcia.broadcast_shapes(_x.shape, mask.shape)
    zeros = torcia.zeros(shape, dtype=grad.dtype, device=grad.device)
    key = (mask.expand(shape).__torcia_data__,)
    return call("index_put", (zeros, grad), {"key": key, "accumulate": True}), None


@derivative("scatter_reduce")
def _(grad, x, index, src, *, dim, reduce, include_self, result):
    idx_src = src[tuple(slice(0, s) for s in index.shape)]
    hit = torcia.zeros(x.shape, dtype=torcia.bool, device=x.device).scatter(dim, index, True)
    if reduce == "sum":
        gx = grad if include_self else grad.masked_fill(hit, 0)
        gsrc = grad.gather(dim, index)
    elif reduce == "mean":
        count = torcia.zeros(x.shape, dtype=grad.dtype, device=grad.device).scatter_add(
            dim, index, torcia.ones_like(idx_src)) + int(include_self)
        share = grad / count.clamp(min=1)
        gx = share if include_self else share.masked_fill(hit, 0)
        gsrc = share.gather(dim, index)
    elif reduce in ("amax", "amin"):
        # ties share the gradient evenly, as in PyTorch
        x_wins = x == result if include_self else torcia.zeros_like(hit)
        src_wins = idx_src == result.gather(dim, index)
        count = x_wins.to(grad.dtype).scatter_add(dim, index, src_wins.to(grad.dtype))
        share = grad / count.clamp(min=1)
        gx = torcia.where(hit, share * x_wins, grad) if include_self else grad.masked_fill(
            hit, 0)
        gsrc = share.gather(dim, index) * src_wins
    else:  # prod
        gx, gsrc = _scatter_prod_grad(grad, x, index, idx_src, dim, include_self, hit, result)
    return gx, None, _embed(gsrc, src.shape)


def _scatter_prod_grad(grad, x, index, src, dim, include_self, hit, result):
    """Gradient of a scatter product, exact where factors are zero and differentiable
    again: a factor's gradient is the product of the other factors. With ``n`` zero
    factors at a place, a nonzero factor gets ``result / f`` (n = 0) or the product of the
    nonzero ones, divided by f, times the zero one (n = 1); a zero factor gets the product
    of the nonzero ones (n = 1) times the other zero (n = 2). The zero values are kept as
    factors so that the second derivative sees them."""
    x_zero = x == 0 if include_self else torcia.zeros_like(hit)
    src_zero = src == 0
    base = x.masked_fill(x_zero, 1) if include_self else torcia.ones_like(x)
    nonzero_prod = base.scatter_reduce(dim, index, src.masked_fill(src_zero, 1), "prod")
    n_zero = x_zero.to(grad.dtype).scatter_add(dim, index, src_zero.to(grad.dtype))
    zero_sum = (x * x_zero).scatter_add(dim, index, src * src_zero)

    def others(value, is_zero, n, prod_nz, zsum, res):
        none = torcia.zeros_like(res)
        safe = value.masked_fill(is_zero, 1)
        if_nonzero = torcia.where(n == 0, res / safe,
                                  torcia.where(n == 1, prod_nz / safe * zsum, none))
        if_zero = torcia.where(n == 1, prod_nz,
                               torcia.where(n == 2, prod_nz * (zsum - value), none))
        return torcia.where(is_zero, if_zero, if_nonzero)

    def at_src(t):
        return t.gather(dim, index)

    gsrc = at_src(grad) * others(src, src_zero, at_src(n_zero), at_src(nonzero_prod),
                                 at_src(zero_sum), at_src(result))
    if include_self:
        gx = torcia.where(hit, grad * others(x, x_zero, n_zero, nonzero_prod, zero_sum, result),
                          grad)
    else:
        gx = grad.masked_fill(hit, 0)
    return gx, gsrc


# =======================================================================================
# linear algebra: inverses, determinants, decompositions, norms
# =======================================================================================


def _eye_like(n, like):
    return torcia.eye(n, dtype=like.dtype, device=like.device)


@derivative("linalg_inv", names={"a": "A", "result": "inverse"})
def _(grad, _a, *, result):
    return -(result.mH @ grad @ result.mH)


@derivative("linalg_solve", names={"a": "A", "b": "B"})
def _(grad, a, _b, *, left, result, needs_input_grad):
    # left: A X = B, so gB = A^-T g and gA = -gB X^T; right: X A = B, gB = g A^-T
    gb = torcia.linalg.solve(a.mH, grad, left=left)
    ga = None
    if needs_input_grad[0]:
        ga = -(gb @ result.mH) if left else -(result.mH @ gb)
    return ga, gb


@derivative("linalg_det", names={"a": "A"})
def _(grad, a, *, result):
    # NOTE: well defined for invertible matrices only; a singular one raises in inv
    return (grad * _c(result)).unsqueeze(-1).unsqueeze(-1) * torcia.linalg.inv(a).mH


@derivative("linalg_slogdet", differentiable_outputs=(False, True), names={"a": "A"})
def _(grads, a):
    g = grads[1]
    if g is None:
        return None
    return g.unsqueeze(-1).unsqueeze(-1) * torcia.linalg.inv(a).mH


@derivative("linalg_cholesky", names={"result": "L"})
def _(grad, _a, *, upper, result):
    # A = L L^T gives L^-1 dA L^-T = X + X^T with X = L^-1 dL lower triangular, so
    # dL = L phi(L^-1 dA L^-T) (phi: lower triangle, halved diagonal). An upper factor is
    # the transpose of the lower one, and so is its gradient.
    low, g = (result.mH, grad.mH) if upper else (result, grad)
    p = (low.mH @ g).tril()
    p = p - 0.5 * torcia.diag_embed(p.diagonal(0, -2, -1))
    linv = torcia.linalg.inv(low)
    return linv.mH @ ((p + p.mH) / 2) @ linv


@derivative("linalg_qr", names={"a": "A", "result0": "Q", "result1": "R"})
def _(grads, _a, *, mode, result):
    q, r = result
    m, n = q.shape[-2], r.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if m < n:
        raise NotImplementedError("The derivative of linalg.qr is not implemented when "
                                  "the input has more columns than rows")
    if mode == "complete" and m > n:
        # the extra columns of Q are arbitrary: no gradient is defined through them
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    gq = grads[0] if grads[0] is not None else torcia.zeros_like(q)
    gr = grads[1] if grads[1] is not None else torcia.zeros_like(r)
    # M = R gR^T - gQ^T Q; gA = (gQ + Q copyltu(M)) R^-T, copyltu mirrors M's lower part
    big_m = r @ gr.mH - gq.mH @ q
    low = big_m.tril(-1)
    diag = big_m.diagonal(0, -2, -1)
    copyltu = low + low.mH + torcia.diag_embed(diag.real if diag.is_complex() else diag)
    rhs = gq + q @ copyltu
    return torcia.linalg.solve(r.mH, rhs, left=False)


def _check_gauge(phases, what, op, scale):
    """PyTorch's error for a loss that depends on the arbitrary phases of complex
    eigen-/singular vectors (``phases``: d loss / d phase of each vector)."""
    if bool((phases.abs() > 1e-6 * (1 + scale)).any()):
        raise RuntimeError(
            f"{op}: The {what} in the complex case are specified up to multiplication by "
            f"e^{{i phi}}. The specified loss function depends on this quantity, so it is "
            f"ill-defined.")


def _gap_inverse(values):
    """F[i, j] = 1 / (values[j] - values[i]) off the diagonal, 0 on it."""
    diff = values.unsqueeze(-2) - values.unsqueeze(-1)
    n = values.shape[-1]
    eye = _eye_like(n, values).to(torcia.bool)
    return torcia.where(eye, torcia.zeros_like(diff), 1 / diff.masked_fill(eye, 1))


@derivative("linalg_eigh", names=_EIGEN_NAMES)
def _(grads, _a, *, result, UPLO="L"):
    vals, vecs = result
    gl, gv = grads
    if gv is not None and gv.is_complex():
        _check_gauge((vecs.mH @ gv).diagonal(0, -2, -1).imag, "eigenvectors",
                     "linalg_eigh_backward", float(gv.abs().max()) if gv.numel() else 0.0)
    inner = torcia.zeros_like(vecs) if gv is None else (
        _gap_inverse(vals) * (vecs.mH @ gv - gv.mH @ vecs) / 2)
    if gl is not None:
        inner = inner + torcia.diag_embed(gl)
    return vecs @ inner @ vecs.mH


@derivative("linalg_eig", names=_EIGEN_NAMES)
def _(grads, _a, *, result):
    # A = V diag(L) V^-1 with unit eigenvectors (PyTorch's formula): the gradient is
    # V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(L_j - L_i)) V^H; the removed
    # diagonal is the part a loss that depends on the eigenvectors' phases would see
    vals, vecs = result
    gl, gv = grads
    n = vals.shape[-1]
    eye = _eye_like(n, vals.real).to(torcia.bool)
    if gv is None:
        inner = torcia.diag_embed(gl)
    else:
        vhgv = vecs.mH @ gv
        _check_gauge(vhgv.diagonal(0, -2, -1).imag, "eigenvectors", "linalg_eig_backward",
                     float(gv.abs().max()) if gv.numel() else 0.0)
        inner = vhgv - vecs.mH @ (vecs * vhgv.diagonal(0, -2, -1).real.unsqueeze(-2))
        gaps = (vals.unsqueeze(-2) - vals.unsqueeze(-1)).conj()
        inner = torcia.where(eye, torcia.zeros_like(inner), inner / gaps.masked_fill(eye, 1))
        if gl is not None:
            inner = inner + torcia.diag_embed(gl)
    return torcia.linalg.solve(vecs.mH, inner @ vecs.mH)


@derivative("linalg_eigvals")
def _(grad, a):
    vecs = torcia.linalg.eig(a).eigenvectors
    return torcia.linalg.solve(vecs.mH, torcia.diag_embed(grad) @ vecs.mH)


@derivative("linalg_eigvalsh")
def _(grad, a, *, UPLO="L"):
    vecs = torcia.linalg.eigh(a, UPLO=UPLO).eigenvectors
    return (vecs * grad.unsqueeze(-2)) @ vecs.mH


@derivative("linalg_svd",
            names={"a": "A", "result0": "U", "result1": "S", "result2": "Vh"})
def _(grads, a, *, full_matrices, result):
    u, s, vh = result
    k = s.shape[-1]
    if full_matrices:
        # the extra singular vectors are arbitrary: only the first k carry a gradient
        u, vh = u.narrow(-1, 0, k), vh.narrow(-2, 0, k)
    gu, gs, gvh = grads
    if gu is not None and full_matrices:
        gu = gu.narrow(-1, 0, k)
    if gvh is not None and full_matrices:
        gvh = gvh.narrow(-2, 0, k)
    if u.is_complex() and (gu is not None or gvh is not None):
        # the phase shared by u_i and v_i: d loss / d phase must vanish
        phases = 0
        if gu is not None:
            phases = phases + (u.mH @ gu).diagonal(0, -2, -1).imag
        if gvh is not None:
            phases = phases + (vh @ gvh.mH).diagonal(0, -2, -1).imag
        scale = max(float(g.abs().max()) for g in (gu, gvh) if g is not None and g.numel())
        _check_gauge(phases, "singular vectors", "svd_backward", scale)
    return _svd_backward(a, u, s, vh, gu, gs, gvh)


def _svd_backward(a, u, s, vh, gu, gs, gvh):
    """SVD backward for distinct nonzero singular values (Townsend's formula; for complex
    input, with the term of the singular vectors' phases as PyTorch's)."""
    m, n = a.shape[-2], a.shape[-1]
    v = vh.mH
    inner = torcia.diag_embed(gs) if gs is not None else torcia.zeros_like(
        torcia.diag_embed(s))
    if u.is_complex():
        inner = inner.to(u.dtype)
    out = None
    if gu is not None or gvh is not None:
        f = _gap_inverse(s * s)
        s_mat = torcia.diag_embed(s).to(u.dtype)
        s_inv = torcia.diag_embed(1 / s).to(u.dtype)
        if gu is not None:
            utgu = u.mH @ gu
            inner = inner + (f * (utgu - utgu.mH)) @ s_mat
            if utgu.is_complex():
                inner = inner + torcia.diag_embed(1j * utgu.diagonal(0, -2, -1).imag / s)
            if m > s.shape[-1]:
                out = (gu - u @ utgu) @ s_inv @ vh
        if gvh is not None:
            gv = gvh.mH
            vtgv = v.mH @ gv
            inner = inner + s_mat @ (f * (vtgv - vtgv.mH))
            if vtgv.is_complex() and gu is None:
                inner = inner - torcia.diag_embed(1j * vtgv.diagonal(0, -2, -1).imag / s)
            if n > s.shape[-1]:
                extra = u @ s_inv @ (gv.mH - vtgv.mH @ v.mH)
                out = extra if out is None else out + extra
    core = u @ inner @ vh
    return core if out is None else core + out


@derivative("linalg_pinv")
def _(grad, a, *, rtol, hermitian, result):
    return _pinv_backward(grad, a, result)


def _pinv_backward(grad, a, p):
    """The gradient through ``p = pinv(a)`` at constant rank:
    dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P."""
    eye_m = _eye_like(a.shape[-2], grad)
    eye_n = _eye_like(a.shape[-1], grad)
    return (-(p.mH @ grad @ p.mH) + (eye_m - a @ p) @ grad.mH @ p @ p.mH
            + p.mH @ p @ grad.mH @ (eye_n - p @ a))


@derivative("linalg_lu_factor", differentiable_outputs=(True, False, False),
            names={"a": "A", "result0": "LU", "result1": "pivots"})
def _(grads, a, *, result):
    # A = P L U (square): gA = P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H, with gL and gU
    # the strictly lower and upper parts of the packed factors' gradient
    if a.shape[-1] != a.shape[-2]:
        raise NotImplementedError("the derivative of linalg.lu_factor is implemented for "
                                  "square matrices only")
    lu, pivots, _ = result
    g = grads[0]
    p, low, up = torcia.linalg.lu_unpack(lu, pivots)
    phi = (low.mH @ g.tril(-1)).tril(-1) + (g.triu() @ up.mH).triu()
    x = torcia.linalg.solve_triangular(low.mH, phi, upper=True, unitriangular=True)
    return p @ torcia.linalg.solve_triangular(up.mH, x, upper=False, left=False)


@derivative("linalg_solve_triangular", names={"b": "B"})
def _(grad, a, _b, *, upper, left, unitriangular, result, needs_input_grad):
    # left: A X = B gives gB = A^-T g, gA = -gB X^T; right: X A = B, gB = g A^-T,
    # gA = -X^T gB; gA keeps A's triangle (strictly, for a unit diagonal)
    gb = torcia.linalg.solve_triangular(a.mH, grad, upper=not upper, left=left,
                                        unitriangular=unitriangular)
    ga = None
    if needs_input_grad[0]:
        ga = -(gb @ result.mH) if left else -(result.mH @ gb)
        shift = 1 if unitriangular else 0
        ga = ga.triu(shift) if upper else ga.tril(-shift)
    return ga, gb


@derivative("linalg_matrix_exp")
def _(grad, a):
    # the Frechet derivative's adjoint: the upper-right block of exp([[A^T, G], [0, A^T]])
    n = a.shape[-1]
    at = a.mH
    top = torcia.cat([at, grad], -1)
    bottom = torcia.cat([torcia.zeros_like(at), at], -1)
    block = torcia.linalg.matrix_exp(torcia.cat([top, bottom], -2))
    return block[..., :n, n:]


@derivative("linalg_lstsq", differentiable_outputs=(True, True, False, False),
            names={"b": "b"})
def _(grads, a, b, *, rcond, driver, result):
    # solution = pinv(A) B; residuals = min ||A X - B||^2, whose gradients need only the
    # residual A X - B at the optimum
    gx, gres = grads[0], grads[1]
    x = result[0]
    p = torcia.linalg.pinv(a)
    ga = gb = None
    if gx is not None:
        gb = p.mH @ gx
        ga = _pinv_backward(gx @ b.mH, a, p)
    if gres is not None and gres.numel():
        r = (a @ x - b) * gres.unsqueeze(-2)
        ga = 2 * r @ x.mH if ga is None else ga + 2 * r @ x.mH
        gb = -2 * r if gb is None else gb - 2 * r
    return ga, gb


@derivative("linalg_ldl_factor", differentiable_outputs=(True, False, False))
def _(grads, _a, *, hermitian):
    raise NotImplementedError("the derivative for 'linalg_ldl_factor_ex' is not implemented.")


@derivative("linalg_geqrf", differentiable_outputs=(True, True))
def _(grads, _a):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


@derivative("linalg_ldl_solve", names={"ld": "LD", "b": "B"})
def _(grad, _ld, _pivots, _b, *, hermitian):
    raise NotImplementedError("the derivative for 'linalg_ldl_solve' is not implemented.")


def _norm_backward(grad, x, p, dim, keepdim, result):
    """Gradient of the vector p-norm (p = 0 has none; +-inf goes to the extreme entries)."""
    g = _restore_dims(grad, dim, keepdim, x.ndim)
    r = _restore_dims(result, dim, keepdim, x.ndim)
    if p == 0:
        return x * 0
    if p == 1:
        return g * torcia.sgn(x)
    if p == 2:
        # NOTE: a zero norm gives a zero gradient, as PyTorch's subgradient choice
        return g * x / r.masked_fill(r == 0, 1)
    if math.isinf(p):
        return _extreme_grad(grad, x.abs(), dim, keepdim, result) * torcia.sgn(x)
    safe = r.masked_fill(r == 0, 1)
    return g * x * x.abs() ** (p - 2) / safe ** (p - 1)


@derivative("linalg_vector_norm")
def _(grad, x, *, ord, dim, keepdim, result):
    return _norm_backward(grad, x, ord, dim, keepdim, result)


def _matrix_norm_backward(grad, a, ord, dim, keepdim, result):
    d0, d1 = dim
    g = _restore_dims(grad, tuple(sorted(dim)), keepdim, a.ndim)
    if ord == "fro":
        r = _restore_dims(result, tuple(sorted(dim)), keepdim, a.ndim)
        return g * a / r.masked_fill(r == 0, 1)
    if ord in ("nuc", 2, -2):
        moved = a.movedim((d0, d1), (-2, -1))
        u, s, vh = torcia.linalg.svd(moved, full_matrices=False)
        if ord == "nuc":
            d = u @ vh
        else:
            j = 0 if ord == 2 else s.shape[-1] - 1
            d = u.narrow(-1, j, 1) @ vh.narrow(-2, j, 1)
        return g * d.movedim((-2, -1), (d0, d1))
    # 1 / -1: extreme column of the column sums; inf / -inf: extreme row of the row sums
    sum_dim, pick_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = a.abs().sum(sum_dim, keepdim=True)
    pick = _restore_dims(result, tuple(sorted(dim)), keepdim, a.ndim)
    mask = sums == pick
    share = g * mask / mask.sum(pick_dim, keepdim=True)
    return share * torcia.sgn(a)


@derivative("linalg_matrix_norm")
def _(grad, a, *, ord, dim, keepdim, result):
    return _matrix_norm_backward(grad, a, ord, dim, keepdim, result)


@derivative("linalg_norm")
def _(grad, a, *, ord, dim, keepdim, result):
    if dim is not None and len(dim) == 2:
        return _matrix_norm_backward(grad, a, "fro" if ord is None else ord, dim, keepdim,
                                     result)
    return _norm_backward(grad, a, 2.0 if ord is None else ord, dim, keepdim, result)


# =======================================================================================
# === neural-network primitives ===
# =======================================================================================
# Activation, softmax and norm formulas are written with torcia ops on the input (or the
# result), so they are twice differentiable; for a first derivative alone (grad mode off
# in the backward pass, i.e. no create_graph) the rows call one fused kernel instead
# (activation_backward, softmax_backward, batch_norm_backward...). The window ops (conv,
# conv_transpose, conv_weight; avg_pool and avg_pool_backward; im2col and col2im) are each
# other's adjoints, so their rows close over those ops and any order of derivative works.


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


@derivative("leaky_relu")
def _(grad, x, *, negative_slope):
    fused = _fused("leaky_relu", grad, x, negative_slope=negative_slope)
    if fused is not None:
        return fused
    return torcia.where(x > 0, grad, grad * negative_slope)


@derivative("elu")
def _(grad, x, *, alpha):
    fused = _fused("elu", grad, x, alpha=alpha)
    if fused is not None:
        return fused
    return torcia.where(x > 0, grad, grad * alpha * x.exp())


@derivative("selu")
def _(grad, x):
    fused = _fused("selu", grad, x)
    if fused is not None:
        return fused
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return torcia.where(x > 0, grad * scale, grad * (scale * alpha) * x.exp())


@derivative("celu")
def _(grad, x, *, alpha):
    fused = _fused("celu", grad, x, alpha=alpha)
    if fused is not None:
        return fused
    return torcia.where(x > 0, grad, grad * (x / alpha).exp())


@derivative("gelu")
def _(grad, x, *, approximate):
    return call("gelu_backward", (grad, x), {"approximate": approximate})


@derivative("gelu_backward")
def _(grad, g, x, *, approximate, needs_input_grad):
    gg = call("gelu_backward", (grad, x), {"approximate": approximate}) \
        if needs_input_grad[0] else None
    if not needs_input_grad[1]:
        return gg, None
    if approximate == "tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = (k * (x + c * x * x * x)).tanh()
        du = k * (1 + 3 * c * x * x)
        second = (1 - t * t) * (du - x * t * du * du + 3 * k * c * x * x)
    else:
        pdf = (-0.5 * x * x).exp() * (1 / math.sqrt(2 * math.pi))
        second = pdf * (2 - x * x)
    return gg, grad * g * second


@derivative("silu")
def _(grad, x):
    return call("silu_backward", (grad, x), {})


@derivative("silu_backward")
def _(grad, g, x, *, needs_input_grad):
    gg = call("silu_backward", (grad, x), {}) if needs_input_grad[0] else None
    if not needs_input_grad[1]:
        return gg, None
    s = x.sigmoid()
    return gg, grad * g * s * (1 - s) * (2 + x * (1 - 2 * s))


@derivative("mish")
def _(grad, x):
    fused = _fused("mish", grad, x)
    if fused is not None:
        return fused
    t = call("softplus", (x,), {"beta": 1.0, "threshold": 20.0}).tanh()
    return grad * (t + x * (1 - t * t) * x.sigmoid())


@derivative("softplus")
def _(grad, x, *, beta, threshold):
    fused = _fused("softplus", grad, x, beta=beta, threshold=threshold)
    if fused is not None:
        return fused
    z = x * beta
    return torcia.where(z > threshold, grad, grad * z.sigmoid())


@derivative("hardtanh")
def _(grad, x, *, min_val, max_val):
    fused = _fused("hardtanh", grad, x, min_val=min_val, max_val=max_val)
    if fused is not None:
        return fused
    # NOTE: strict bounds, as PyTorch: no gradient at the clipping points themselves
    return grad * ((x > min_val) & (x < max_val))


@derivative("hardswish")
def _(grad, x):
    fused = _fused("hardswish", grad, x)
    if fused is not None:
        return fused
    mid = torcia.where(x < -3, torcia.zeros_like(x), x / 3 + 0.5)
    return grad * torcia.where(x > 3, torcia.ones_like(x), mid)


@derivative("hardsigmoid")
def _(grad, x):
    fused = _fused("hardsigmoid", grad, x)
    if fused is not None:
        return fused
    return grad * ((x > -3) & (x < 3)) / 6


@derivative("logsigmoid")
def _(grad, x):
    fused = _fused("logsigmoid", grad, x)
    if fused is not None:
        return fused
    return grad * (-x).sigmoid()


@derivative("softsign")
def _(grad, x):
    fused = _fused("softsign", grad, x)
    if fused is not None:
        return fused
    d = 1 + x.abs()
    return grad / (d * d)


@derivative("tanhshrink")
def _(grad, x):
    fused = _fused("tanhshrink", grad, x)
    if fused is not None:
        return fused
    t = x.tanh()
    return grad * t * t


@derivative("softmax")
def _(grad, _x, *, dim, result):
    if not _differentiable_formulas():
        return call("softmax_backward", (grad, result), {"dim": dim})
    return result * (grad - (grad * result).sum(dim, keepdim=True))


@derivative("log_softmax")
def _(grad, _x, *, dim, result):
    if not _differentiable_formulas():
        return call("log_softmax_backward", (grad, result), {"dim": dim})
    return grad - result.exp() * grad.sum(dim, keepdim=True)


@derivative("linear", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, w, _b, *, needs_input_grad):
    gx = gw = gb = None
    rows = grad.reshape(-1, w.shape[0])
    if needs_input_grad[0]:
        gx = grad @ _c(w)
    if needs_input_grad[1]:
        gw = rows.mT @ _c(x.reshape(-1, w.shape[1]))
    if needs_input_grad[2]:
        gb = rows.sum(0)
    return gx, gw, gb


def _conv_params(stride, padding, dilation, groups):
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


def _conv_input_grad(grad, weight, input_shape, stride, padding, dilation, groups):
    """conv's gradient for its input: conv_transpose with the output padding that gives
    back the input's size (the rows and columns the strides skipped)."""
    out_pad = tuple(
        i - ((o - 1) * s - lo - hi + d * (k - 1) + 1)
        for i, o, s, (lo, hi), d, k in zip(input_shape[2:], grad.shape[2:], stride, padding,
                                           dilation, weight.shape[2:])
    )
    return call("conv_transpose", (grad, weight, None),
                {**_conv_params(stride, padding, dilation, groups),
                 "output_padding": out_pad})


def _crop_to(t, shape):
    """``t`` narrowed to ``shape`` in its spatial dims (a conv may see more positions
    than a conv_transpose's input had)."""
    for d in range(2, t.ndim):
        if t.shape[d] != shape[d]:
            t = t.narrow(d, 0, shape[d])
    return t


@derivative("conv", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, w, _b, *, stride, padding, dilation, groups, needs_input_grad):
    params = _conv_params(stride, padding, dilation, groups)
    gx = _conv_input_grad(grad, w, x.shape, stride, padding, dilation,
                          groups) if needs_input_grad[0] else None
    gw = call("conv_weight", (x, grad), {"weight_shape": tuple(w.shape),
                                         **params}) if needs_input_grad[1] else None
    gb = grad.sum((0,) + tuple(range(2, grad.ndim))) if needs_input_grad[2] else None
    return gx, gw, gb


@derivative("conv_transpose", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, w, _b, *, stride, padding, output_padding, dilation, groups,
      needs_input_grad):
    params = _conv_params(stride, padding, dilation, groups)
    gx = _crop_to(call("conv", (grad, w, None), params),
                  x.shape) if needs_input_grad[0] else None
    gw = call("conv_weight", (grad, x), {"weight_shape": tuple(w.shape),
                                         **params}) if needs_input_grad[1] else None
    gb = grad.sum((0,) + tuple(range(2, grad.ndim))) if needs_input_grad[2] else None
    return gx, gw, gb


@derivative("conv_weight")
def _(grad, x, g, *, weight_shape, stride, padding, dilation, groups, needs_input_grad):
    # conv_weight is bilinear in (x, g): each gradient is conv's other derivative with
    # ``grad`` as the weight
    params = _conv_params(stride, padding, dilation, groups)
    gx = _conv_input_grad(g, grad, x.shape, stride, padding, dilation,
                          groups) if needs_input_grad[0] else None
    gg = _crop_to(call("conv", (x, grad, None), params), g.shape) if needs_input_grad[1] \
        else None
    return gx, gg


@derivative("im2col")
def _(grad, _x, *, kernel_size, dilation, padding, stride):
    return call("col2im", (grad,), {"output_size": tuple(_x.shape[2:]),
                                    "kernel_size": kernel_size, "dilation": dilation,
                                    "padding": padding, "stride": stride})


@derivative("col2im")
def _(grad, _cols, *, output_size, kernel_size, dilation, padding, stride):
    return call("im2col", (grad,), {"kernel_size": kernel_size, "dilation": dilation,
                                    "padding": padding, "stride": stride})


def _max_pool_grad(grads, x, result):
    """Scatter the gradient to where each window's maximum came from. Only the indices
    are kept (``saved_outputs``), as PyTorch keeps them, so that writing into the pooled
    values in place (a ReLU after pooling) leaves backward valid."""
    g = grads[0]
    if g is None:
        return None
    return call("max_pool_backward", (g, result[1]), {"input_shape": tuple(x.shape[2:])})


@derivative("max_pool", saved_outputs=(1,))
def _(grads, _x, *, result):
    return _max_pool_grad(grads, _x, result)


@derivative("adaptive_max_pool", saved_outputs=(1,))
def _(grads, _x, *, result):
    return _max_pool_grad(grads, _x, result)


@derivative("max_pool_backward")
def _(grad, _g, indices, *, input_shape):
    # the adjoint of a scatter by indices is a gather by the same indices
    n, c = grad.shape[:2]
    flat = grad.reshape(n, c, -1).gather(2, indices.reshape(n, c, -1))
    return flat.reshape(_g.shape), None


def _avg_params(kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    return {"kernel_size": kernel_size, "stride": stride, "padding": padding,
            "ceil_mode": ceil_mode, "count_include_pad": count_include_pad,
            "divisor_override": divisor_override}


@derivative("avg_pool")
def _(grad, _x, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
      divisor_override):
    params = _avg_params(kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override)
    return call("avg_pool_backward", (grad,), {"input_shape": tuple(_x.shape[2:]), **params})


@derivative("avg_pool_backward")
def _(grad, _g, *, input_shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
      divisor_override):
    params = _avg_params(kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override)
    return call("avg_pool", (grad,), params)


def _normalized(x, dims, eps):
    """(x - mean) / sqrt(var + eps) over ``dims``, recomputed with ops so that second
    derivatives flow through the statistics."""
    mean = x.mean(dims, keepdim=True)
    centred = x - mean
    invstd = ((centred * centred).mean(dims, keepdim=True) + eps).rsqrt()
    return centred * invstd, invstd


def _norm_input_grad(gxhat, xhat, invstd, dims):
    """The gradient through (x - mean(x)) * invstd(x), given the one for its output."""
    return invstd * (gxhat - gxhat.mean(dims, keepdim=True)
                     - xhat * (gxhat * xhat).mean(dims, keepdim=True))


@derivative("batch_norm", names=_INPUT_WEIGHT_BIAS)
def _(grads, x, weight, _bias, running_mean, running_var, *, training, eps,
      needs_input_grad):
    g = grads[0]
    if g is None:
        return None, None, None, None, None
    if not _differentiable_formulas():
        # first order only: one fused kernel (it recomputes the batch statistics: saving
        # the outputs would forbid an in-place ReLU on the normalised values)
        gx, gw, gb = call("batch_norm_backward", (g, x, weight, running_mean, running_var),
                          {"training": training, "eps": eps})
        return (gx if needs_input_grad[0] else None, gw if needs_input_grad[1] else None,
                gb if needs_input_grad[2] else None, None, None)
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        xhat, invstd = _normalized(x, dims, eps)
    else:
        invstd = (running_var + eps).rsqrt().reshape(shape)
        xhat = (x - running_mean.reshape(shape)) * invstd
    gxhat = g if weight is None else g * weight.reshape(shape)
    gx = gw = gb = None
    if needs_input_grad[0]:
        gx = _norm_input_grad(gxhat, xhat, invstd, dims) if training else gxhat * invstd
    if needs_input_grad[1]:
        gw = (g * xhat).sum(dims)
    if needs_input_grad[2]:
        gb = g.sum(dims)
    return gx, gw, gb, None, None


@derivative("layer_norm", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, weight, _bias, *, normalized_ndim, eps, needs_input_grad):
    if not _differentiable_formulas():
        gx, gw, gb = call("layer_norm_backward", (grad, x, weight),
                          {"normalized_ndim": normalized_ndim, "eps": eps})
        return (gx if needs_input_grad[0] else None, gw if needs_input_grad[1] else None,
                gb if needs_input_grad[2] else None)
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    xhat, invstd = _normalized(x, dims, eps)
    gxhat = grad if weight is None else grad * weight
    gx = _norm_input_grad(gxhat, xhat, invstd, dims) if needs_input_grad[0] else None
    gw = (grad * xhat).sum(lead) if needs_input_grad[1] and lead else (
        grad * xhat if needs_input_grad[1] else None)
    gb = (grad.sum(lead) if lead else grad) if needs_input_grad[2] else None
    return gx, gw, gb


@derivative("rms_norm", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, weight, *, normalized_ndim, eps, needs_input_grad):
    if not _differentiable_formulas():
        gx, gw = call("rms_norm_backward", (grad, x, weight),
                      {"normalized_ndim": normalized_ndim, "eps": eps})
        return gx if needs_input_grad[0] else None, gw if needs_input_grad[1] else None
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    invrms = ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    xhat = x * invrms
    gx = gw = None
    if needs_input_grad[0]:
        gxhat = grad if weight is None else grad * weight
        gx = invrms * (gxhat - xhat * (gxhat * xhat).mean(dims, keepdim=True))
    if needs_input_grad[1]:
        gw = (grad * xhat).sum(lead) if lead else grad * xhat
    return gx, gw


@derivative("embedding")
def _(grad, _weight, indices, *, padding_idx, sparse=False):
    if sparse:
        # PyTorch's sparse gradient: one entry per looked-up row (not coalesced), the
        # padding row's left out
        rows, flat = indices.reshape(-1), grad.reshape(-1, grad.shape[-1])
        if padding_idx is not None:
            keep = rows != padding_idx
            rows, flat = rows[keep], flat[keep]
        return torcia.sparse_coo_tensor(rows.long().unsqueeze(0), flat,
                                        tuple(_weight.shape)), None
    return call("embedding_backward", (grad, indices),
                {"num_weights": _weight.shape[0], "padding_idx": padding_idx}), None


@derivative("embedding_backward")
def _(grad, _g, indices, *, num_weights, padding_idx):
    if padding_idx is not None:
        keep = torcia.ones(num_weights, dtype=grad.dtype, device=grad.device)
        keep[padding_idx] = 0
        grad = grad * keep.unsqueeze(1)
    return call("embedding", (grad, indices), {"padding_idx": padding_idx}), None


@derivative("lstm_cell", differentiable_outputs=(True, True, False))
def _(grads, gates, c, *, result):
    gh, gc, _ = grads
    if not _differentiable_formulas():
        _, c_new, act = result
        return call("lstm_cell_backward", (gh, gc, act, c, c_new), {})
    return _lstm_cell_grads(gh, gc, gates, c)


def _lstm_cell_grads(gh, gc, gates, c):
    """lstm_cell's (grad_gates, grad_c) in differentiable ops, for higher orders."""
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    tc = (f * c + i * g).tanh()
    dc = gc if gc is not None else torcia.zeros_like(tc)
    if gh is not None:
        dc = dc + gh * o * (1 - tc * tc)
        go = gh * tc * o * (1 - o)
    else:
        go = torcia.zeros_like(tc)
    g_gates = torcia.cat([dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), go],
                         -1)
    return g_gates, dc * f


@derivative("lstm_layer", differentiable_outputs=(True, True, False))
def _(grads, x_gates, h0, c0, w_hh_t, *, result):
    g_out, g_cs, _ = grads
    out, cs, acts = result
    if not _differentiable_formulas():
        return call("lstm_layer_backward", (g_out, g_cs, acts, cs, out, h0, c0, w_hh_t), {})
    # higher orders: back through time in differentiable ops, from the recomputed gates
    h_prev = torcia.cat([h0.unsqueeze(0), out[:-1]])
    dh, dc = torcia.zeros_like(h0), torcia.zeros_like(c0)
    g_steps = []
    for t in range(x_gates.shape[0] - 1, -1, -1):
        gh = dh if g_out is None else dh + g_out[t]
        gc = dc if g_cs is None else dc + g_cs[t]
        gates = x_gates[t] + h_prev[t] @ w_hh_t
        g_gates, dc = _lstm_cell_grads(gh, gc, gates, c0 if t == 0 else cs[t - 1])
        g_steps.append(g_gates)
        dh = g_gates @ w_hh_t.mT
    g_gates = torcia.stack(g_steps[::-1])
    g_w = h_prev.reshape(-1, h0.shape[-1]).mT @ g_gates.reshape(-1, g_gates.shape[-1])
    return g_gates, dh, dc, g_w


@derivative("flash_attention", differentiable_outputs=(True, False))
def _(grads, q, k, v, mask, *, is_causal, scale, result, needs_input_grad):
    g = grads[0]
    out, lse = result
    float_mask = needs_input_grad[3]
    if not _differentiable_formulas() and not float_mask:
        dq, dk, dv = call("flash_attention_backward", (g, q, k, v, out, lse, mask),
                          {"is_causal": is_causal, "scale": scale})
        return dq, dk, dv, None
    # higher orders and a float mask's gradient (the scores' own): the softmax recomputed
    # in differentiable ops, the (Lq, Lk) scores held
    rep = q.shape[-3] // k.shape[-3]
    kk, vv = (t.repeat_interleave(rep, dim=-3) if rep > 1 else t for t in (k, v))
    s = (q @ kk.mT) * scale
    if is_causal:
        allowed = torcia.ones(s.shape[-2:], dtype=torcia.bool, device=s.device).tril()
        s = s.masked_fill(allowed.logical_not(), -math.inf)
    elif mask is not None and mask.dtype is torcia.bool:
        s = s.masked_fill(mask.logical_not(), -math.inf)
    elif mask is not None:
        s = s + mask
    # a query that may attend to no key: zero weights, and no NaN in any derivative
    dead = s.isneginf().all(-1, keepdim=True)
    p = torcia.where(dead, 0.0, torcia.where(dead, 0.0, s).softmax(-1))
    dv = p.mT @ g
    dp = g @ vv.mT
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = (ds @ kk) * scale
    dk = (ds.mT @ q) * scale
    if rep > 1:
        group = k.shape[:-3] + (k.shape[-3], rep)
        dk = dk.reshape(group + dk.shape[-2:]).sum(-3)
        dv = dv.reshape(group + dv.shape[-2:]).sum(-3)
    return dq, dk, dv, ds if float_mask else None


def _loss_coefficients(grad, target, weight, reduction, ignore_index, dtype):
    """Per-sample factors of a class-index loss's gradient: the output gradient, the
    target's class weight, zero for ignored targets, over the mean's denominator.
    Returns them with the targets made safe to index with."""
    keep = target != ignore_index
    safe = target.masked_fill(keep.logical_not(), 0)
    w = keep.to(dtype)
    if weight is not None:
        w = w * weight.detach()[safe]
    scale = grad
    if reduction == "mean":
        scale = grad / w.sum()
    return scale * w, safe


def _no_weight_grad(needs_input_grad):
    if needs_input_grad[2]:
        raise RuntimeError("the derivative for 'weight' is not implemented.")


@derivative("nll_loss")
def _(grad, _logp, target, weight, *, reduction, ignore_index, needs_input_grad):
    _no_weight_grad(needs_input_grad)
    coef, safe = _loss_coefficients(grad, target, weight, reduction, ignore_index,
                                    _logp.dtype)
    gx = torcia.zeros(_logp.shape, dtype=grad.dtype, device=grad.device)
    return gx.scatter(1, safe.unsqueeze(1), (-coef).unsqueeze(1)), None, None


@derivative("cross_entropy")
def _(grad, x, target, weight, *, reduction, ignore_index, label_smoothing,
      needs_input_grad):
    _no_weight_grad(needs_input_grad)
    return call("cross_entropy_backward", (grad, x, target, weight), {
        "reduction": reduction, "ignore_index": ignore_index,
        "label_smoothing": label_smoothing}), None, None


@derivative("cross_entropy_backward")
def _(grad, g, x, target, weight, *, reduction, ignore_index, label_smoothing,
      needs_input_grad):
    # the first gradient is scale_n(g) * (mass_n * softmax(x)_n - T_n), linear in g;
    # written here with differentiable ops so that further orders come free
    n, c = x.shape
    keep = (target != ignore_index).to(x.dtype)
    safe = target.masked_fill(target == ignore_index, 0)
    w_t = keep if weight is None else keep * weight.detach()[safe]
    per_row = keep / w_t.sum() if reduction == "mean" else keep
    eps = label_smoothing
    onehot = torcia.zeros((n, c), dtype=x.dtype, device=x.device).scatter(
        1, safe.unsqueeze(1), 1.0)
    wc = torcia.ones(c, dtype=x.dtype, device=x.device) if weight is None \
        else weight.detach()
    mass = ((1 - eps) * w_t + (eps / c) * wc.sum()).unsqueeze(1)
    target_dist = (1 - eps) * w_t.unsqueeze(1) * onehot + (eps / c) * wc
    p = call("softmax", (x,), {"dim": 1})
    gg = gx = None
    if needs_input_grad[0]:
        h = ((mass * p - target_dist) * grad).sum(1) * per_row
        gg = h if reduction == "none" else h.sum()
    if needs_input_grad[1]:
        scale = (g * per_row).unsqueeze(1)
        v = scale * mass * grad
        gx = p * (v - (v * p).sum(1, keepdim=True))
    return gg, gx, None, None


@derivative("ctc_loss")
def _(grad, log_probs, targets, input_lengths, target_lengths, *, blank, result):
    # first order only: ctc_loss_backward (the forward-backward recursion) has no row
    return call("ctc_loss_backward", (grad, log_probs, targets, input_lengths, target_lengths,
                                      result), {"blank": blank}), None, None, None
