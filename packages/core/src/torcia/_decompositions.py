"""Default decompositions: composite ops written with other ops.

An op with a decomposition here is *composite*; every other op is a *primitive*. A device
backend must implement the primitives; where it has no kernel for a composite op, the
dispatcher runs the op's decomposition on tensors instead (PyTorch's
CompositeImplicitAutograd): its ops are dispatched one by one, so autograd records them
and the composite's own derivative (and fused ``*_backward`` op) is not needed.

A decomposition takes the op's inputs (tensors, numbers or None) positionally and its
parameters as keywords, as a kernel does, and returns a tensor (or a tuple of tensors).
It is written with torcia ops only: it runs on any device.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

import torcia
from torcia._kernels_linalg import dot_operands, outer_operands
from torcia._kernels_nn import _pool_geometry
from torcia._numpy_backend import refusal
from torcia._tensor import DECOMPOSITIONS, _torch_name, call

# ----- linear algebra -------------------------------------------------------------------


def linear(x, w, b):
    out = x.matmul(w.transpose(0, 1))
    return out if b is None else out + b


def mm(a, b):
    return a.matmul(b)


def dot(a, b):
    dot_operands(a, b)
    return a.matmul(b)


def outer(a, b):
    outer_operands(a, b)
    return a.unsqueeze(1) * b.unsqueeze(0)


def addmm(c, a, b, beta=1, alpha=1):
    prod = a.matmul(b)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:  # c is ignored, NaN included, as in PyTorch
        return prod
    return prod + (c if beta == 1 else c * beta)


# ----- elementwise ----------------------------------------------------------------------
# Half precision computes in float32 and rounds once, as the reference kernels (and
# PyTorch's opmath) do: rounding after each step would drift by several ulps.

_HALF = (torcia.float16, torcia.bfloat16)


def _opmath(fn):
    """``fn`` computed in float32 for half-precision tensors, its result rounded back."""
    def run(a, *args, **kw):
        if isinstance(a, torcia.Tensor) and a.dtype in _HALF:
            wide = [t.float() if isinstance(t, torcia.Tensor) and t.dtype in _HALF else t
                    for t in args]
            return fn(a.float(), *wide, **kw).to(a.dtype)
        return fn(a, *args, **kw)

    run.__name__ = fn.__name__
    return run


def _zero(a):
    """A 0-dim zero of ``a``'s dtype on its device (a Python 0 would promote a bool)."""
    return torcia.zeros((), dtype=a.dtype, device=a.device)


def _one(a):
    """A 0-dim one of ``a``'s dtype on its device."""
    return torcia.ones((), dtype=a.dtype, device=a.device)


def _scalar(a, value):
    """``value`` as a 0-dim tensor of ``a``'s dtype on its device."""
    return torcia.full((), value, dtype=a.dtype, device=a.device)


@_opmath
def relu(a):
    # as PyTorch: NaN and -0.0 kept (a * 0), the gradient at 0 is 0
    return torcia.where(a > 0, a, torcia.where(a < 0, _zero(a), a * 0))


@_opmath
def leaky_relu(a, negative_slope=0.01):
    return torcia.where(a > 0, a, a * negative_slope)


@_opmath
def hardtanh(a, min_val=-1.0, max_val=1.0):
    # limits of a's dtype: an integer tensor is clamped in its dtype, as PyTorch's
    return a.clamp(_scalar(a, min_val), _scalar(a, max_val))


@_opmath
def hardsigmoid(a):
    return (a + 3).clamp(0, 6) / 6


@_opmath
def hardswish(a):
    return a * (a + 3).clamp(0, 6) / 6


@_opmath
def softsign(a):
    return a / (1 + a.abs())


@_opmath
def tanhshrink(a):
    return a - a.tanh()


@_opmath
def silu(a):
    return a * a.sigmoid()


@_opmath
def silu_backward(g, a):
    s = a.sigmoid()
    return g * s * (1 + a * (1 - s))


@_opmath
def softplus(a, beta=1.0, threshold=20.0):
    # above the threshold the value is the input itself: log1p(exp) would overflow there
    z = a * beta
    return torcia.where(z > threshold, a, z.clamp(max=threshold).exp().log1p() / beta)


@_opmath
def mish(a):
    return a * softplus(a).tanh()


@_opmath
def logsigmoid(a):
    return -softplus(-a)


@_opmath
def elu(a, alpha=1.0):
    return torcia.where(a > 0, a, alpha * a.expm1())


@_opmath
def celu(a, alpha=1.0):
    return torcia.where(a > 0, a, alpha * (a / alpha).expm1())


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


@_opmath
def selu(a):
    return _SELU_SCALE * elu(a, _SELU_ALPHA)


@_opmath
def gelu(a, approximate="none"):
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (a + 0.044715 * a * a * a)
        return 0.5 * a * (1 + inner.tanh())
    return 0.5 * a * (1 + (a * math.sqrt(0.5)).erf())


@_opmath
def gelu_backward(g, a, approximate="none"):
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        t = (k * (a + 0.044715 * a * a * a)).tanh()
        return g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * 0.044715 * a * a))
    cdf = 0.5 * (1 + (a * math.sqrt(0.5)).erf())
    pdf = (-0.5 * a * a).exp() / math.sqrt(2 * math.pi)
    return g * (cdf + a * pdf)


@_opmath
def sinc(a):
    # the zeros divide sin(pi) by pi, not 0 by 0, whose NaN would reach their gradient
    zero = a == 0
    x = torcia.where(zero, _one(a), a) * math.pi
    return torcia.where(zero, _one(a), x.sin() / x)


def trunc(a):
    _refuse("trunc", a)
    # -0.0 is not below 0: floor keeps it, as trunc does
    return torcia.where(a < 0, a.ceil(), a.floor())


@_opmath
def frac(a):
    return a - a.trunc()


@_opmath
def rsqrt(a):
    return a.sqrt().reciprocal()


@_opmath
def addcmul(a, t1, t2, value=1):
    return a + value * (t1 * t2)


@_opmath
def addcdiv(a, t1, t2, value=1):
    return a + value * (t1 / t2)


@_opmath
def lerp(start, end, weight):
    # PyTorch's two-sided form: exact at both ends (weight 0 gives start, 1 gives end)
    diff = end - start
    if not isinstance(weight, torcia.Tensor):
        return start + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)
    return torcia.where(weight.abs() < 0.5, start + weight * diff, end - diff * (1 - weight))


@_opmath
def xlogy(a, b):
    # 0 * log(y) is 0 unless y is NaN
    return torcia.where(_both(a == 0, b == b), _zero(a), a * b.log())


@_opmath
def xlog1py(a, b):
    # PyTorch's gradient in a is log1p(b) at a == 0 too: there the product a * log1p(b)
    # gives the value 0, but where log1p(b) is not finite and b not NaN (b <= -1, inf),
    # masked; + 0 makes -0.0 the reference's 0.0
    out = b.log1p()
    out = torcia.where(_both(a == 0, _either(b <= -1, b == math.inf)),
                       _zero(out), out)
    return a * out + 0


def fmax(a, b):
    return torcia.where(b.isnan(), a, torcia.where(a.isnan(), b, torcia.maximum(a, b)))


def fmin(a, b):
    return torcia.where(b.isnan(), a, torcia.where(a.isnan(), b, torcia.minimum(a, b)))


def _both(x, y):
    # bitwise on bools; ``&`` would dispatch logical_and again
    return call("bitwise_and", (x, y), {})


def _either(x, y):
    return call("bitwise_or", (x, y), {})


def logical_not(a):
    return a == 0


def logical_and(a, b):
    return _both(a != 0, b != 0)


def logical_or(a, b):
    return _either(a != 0, b != 0)


def logical_xor(a, b):
    return (a != 0) != (b != 0)


def masked_fill(a, mask, value):
    fill = value.to(a.dtype) if isinstance(value, torcia.Tensor) else _scalar(a, value)
    return torcia.where(mask, fill, a)


def _triangle(a, diagonal, lower):
    rows, cols = a.shape[-2:]
    offset = (torcia.arange(cols, device=a.device).unsqueeze(0)
              - torcia.arange(rows, device=a.device).unsqueeze(1))
    keep = offset <= diagonal if lower else offset >= diagonal
    return torcia.where(keep, a, _zero(a))


def tril(a, diagonal=0):
    return _triangle(a, diagonal, lower=True)


def triu(a, diagonal=0):
    return _triangle(a, diagonal, lower=False)


def count_nonzero(a, dim=None):
    return (a != 0).sum() if dim is None else (a != 0).sum(dim)


def nansum(a, dim=None, keepdim=False, dtype=None):
    clean = torcia.where(a.isnan(), _zero(a), a)
    if dim is None and not keepdim:
        return clean.sum(dtype=dtype)
    dims = tuple(range(a.ndim)) if dim is None else dim
    return clean.sum(dims, keepdim=keepdim, dtype=dtype)


@_opmath
def std(a, dim=None, correction=1, keepdim=False):
    return call("var", (a,), {"dim": dim, "correction": correction, "keepdim": keepdim}).sqrt()


# ----- views and movement: the views are views of the input, as the kernels' -------------


def _view(a, op, **params):
    return call(op, (a,), params, view_of=a)


def squeeze(a, dim=None):
    dims = set(range(a.ndim)) if dim is None else {d % max(a.ndim, 1) for d in dim}
    shape = tuple(n for d, n in enumerate(a.shape) if n != 1 or d not in dims)
    return _view(a, "view", shape=shape)


def unsqueeze(a, dim):
    dim %= a.ndim + 1
    return _view(a, "view", shape=tuple(a.shape[:dim]) + (1,) + tuple(a.shape[dim:]))


def transpose(a, dim0, dim1):
    dims = list(range(a.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return _view(a, "permute", dims=tuple(dims))


def _along(a, dim, key):
    """``a[..., key, ...]`` with ``key`` at ``dim``: a view."""
    return _view(a, "getitem", key=(slice(None),) * (dim % a.ndim) + (key,))


def narrow(a, dim, start, length):
    return _along(a, dim, slice(start, start + length))


def split(a, sections, dim=0):
    bounds = itertools.accumulate(sections, initial=0)
    return tuple(_along(a, dim, slice(lo, lo + n)) for lo, n in zip(bounds, sections))


def flip(a, dims):
    key = [slice(None)] * a.ndim
    for d in dims:
        key[d % a.ndim] = slice(None, None, -1)
    return _view(a, "getitem", key=tuple(key)).clone()  # a copy, as PyTorch's


def repeat(a, sizes):
    sizes = tuple(sizes)
    shape = (1,) * (len(sizes) - a.ndim) + tuple(a.shape)
    # each dim n as (1, n) expanded to (r, n), then (r * n)
    spread = a.reshape(tuple(x for n in shape for x in (1, n)))
    out = spread.expand(tuple(x for r, n in zip(sizes, shape) for x in (r, n)))
    out = out.reshape(tuple(r * n for r, n in zip(sizes, shape)))
    # a copy even where nothing repeats
    return out if any(r != 1 for r in sizes) else out.clone()


def take_along_dim(a, indices, dim=None):
    if dim is None:
        return a.reshape(-1).gather(0, indices.reshape(-1))
    dim %= a.ndim
    # both broadcast but along dim, where each keeps its size
    shape = list(torcia.broadcast_shapes(
        a.shape[:dim] + (1,) + a.shape[dim + 1:],
        indices.shape[:dim] + (1,) + indices.shape[dim + 1:]))
    expanded = []
    for t in (a, indices):
        shape[dim] = t.shape[dim]
        expanded.append(t.expand(tuple(shape)))
    return expanded[0].gather(dim, expanded[1])


def diag(a, diagonal=0):
    if a.ndim == 2:
        return call("diagonal", (a,), {"offset": diagonal, "dim1": 0, "dim2": 1}).clone()
    # a square matrix with a on the diagonal: row r holds a[r] where diagonal >= 0, column c
    # holds a[c] below it
    n = a.shape[0] + abs(diagonal)
    padded = torcia.cat([a, torcia.zeros(abs(diagonal), dtype=a.dtype, device=a.device)])
    values = padded.reshape((n, 1) if diagonal >= 0 else (1, n))
    offset = (torcia.arange(n, device=a.device).unsqueeze(0)
              - torcia.arange(n, device=a.device).unsqueeze(1))
    return torcia.where(offset == diagonal, values, _zero(a))


def tile(a, dims):
    dims = tuple(dims)
    return a.repeat(*((1,) * (a.ndim - len(dims)) + dims))


def stack(*tensors, dim=0):
    if dim < 0:
        dim += tensors[0].ndim + 1
    return torcia.cat([t.unsqueeze(dim) for t in tensors], dim)


def square(a):
    # a bool squares in int64, as PyTorch's pow(a, 2)
    if a.dtype == torcia.bool:
        a = a.to(torcia.int64)
    return a * a


def isfinite(a):
    if a.is_complex():
        return _both(isfinite(a.real), isfinite(a.imag))
    if not a.is_floating_point():
        return torcia.ones(a.shape, dtype=torcia.bool, device=a.device)
    return _both(a == a, a.abs() != math.inf)


def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    if a.is_complex():
        return torcia.complex(nan_to_num(a.real, nan, posinf, neginf),
                              nan_to_num(a.imag, nan, posinf, neginf))
    if not a.is_floating_point():
        return a.clone()
    info = torcia.finfo(a.dtype)
    out = a
    for bad, value in ((a.isnan(), nan), (a == math.inf, info.max if posinf is None else posinf),
                       (a == -math.inf, info.min if neginf is None else neginf)):
        out = torcia.where(bad, _scalar(a, value), out)
    return out


def _dims(a, dim):
    """``dim`` (None: all, an int or a sequence) as a tuple of non-negative dims."""
    if dim is None:
        return tuple(range(a.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(d % a.ndim if a.ndim else 0 for d in dims)


def mean(a, dim=None, keepdim=False, dtype=None):
    if dtype is None and a.dtype in _HALF:
        return mean(a.float(), dim, keepdim).to(a.dtype)
    dims = _dims(a, dim)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    return a.sum(dims, keepdim=keepdim, dtype=dtype) / count


@_opmath
def logsumexp(a, dim=None, keepdim=False):
    dims = _dims(a, dim)
    # shifted by the greatest real part (it sets the magnitude), 0 where that is infinite
    if a.numel():
        m = a.real.amax(dims, keepdim=True)
        m = torcia.where(m.isinf(), _zero(m), m)
    else:
        m = torcia.zeros((1,) * a.ndim, dtype=a.real.dtype, device=a.device)
    out = (a - m).exp().sum(dims, keepdim=True).log() + m
    return out if keepdim else out.squeeze(dims)


def roll(a, shifts, dims):
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return roll(a.flatten(), shifts, (0,)).reshape(a.shape)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = a.clone()
    for shift, dim in zip(shifts, dims):
        n = out.shape[dim]
        shift = shift % n if n else 0
        if shift:
            out = torcia.cat([out.narrow(dim, n - shift, shift), out.narrow(dim, 0, n - shift)],
                             dim)
    return out


def index_select(a, index, dim):
    return a.movedim(dim, 0)[index].movedim(0, dim)


def embedding(weight, indices, padding_idx=None, sparse=False):
    return weight[indices]


@_opmath
def rms_norm(x, weight, normalized_ndim, eps):
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    out = x / ((x * x).mean(dims, keepdim=True) + eps).sqrt()
    return out if weight is None else out * weight


@_opmath
def layer_norm(x, weight, bias, normalized_ndim, eps):
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    centred = x - x.mean(dims, keepdim=True)
    out = centred / ((centred * centred).mean(dims, keepdim=True) + eps).sqrt()
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


def lstm_cell(gates, c):
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c_new = f * c + i * g
    # the activated gates are the backward's workspace, not differentiated (as the kernel's)
    return o * c_new.tanh(), c_new, torcia.cat([i, f, g, o], -1).detach()


def _activation_derivative(a, activation, params):
    """f'(a) of the activation ``activation`` (real ``a``)."""
    if activation == "relu":
        return (a > 0).to(a.dtype)
    if activation == "leaky_relu":
        return torcia.where(a > 0, _one(a), _scalar(a, params["negative_slope"]))
    if activation in ("elu", "selu", "celu"):
        alpha = params.get("alpha", _SELU_ALPHA)
        below = (torcia.where(a > 0, _zero(a), a) / (alpha if activation == "celu" else 1)).exp()
        d = torcia.where(a > 0, _one(a),
                         below * (1 if activation == "celu" else alpha))
        return d * _SELU_SCALE if activation == "selu" else d
    if activation == "softplus":
        z = a * params["beta"]
        return torcia.where(z > params["threshold"], _one(a), z.sigmoid())
    if activation == "mish":
        t = softplus(a).tanh()
        return t + a * (1 - t * t) * a.sigmoid()
    if activation == "hardtanh":
        return _both(a > params["min_val"], a < params["max_val"]).to(a.dtype)
    if activation == "hardsigmoid":
        return _both(a > -3, a < 3).to(a.dtype) / 6
    if activation == "logsigmoid":
        return (-a).sigmoid()
    if activation == "softsign":
        d = 1 + a.abs()
        return 1 / (d * d)
    if activation == "tanhshrink":
        t = a.tanh()
        return t * t
    raise ValueError(f"activation_backward: unknown activation {activation!r}")


def activation_backward(g, a, activation, **params):
    if a.is_complex() and activation in ("softsign", "tanhshrink"):
        if activation == "tanhshrink":
            t = a.tanh()
            return g * (t * t).conj()  # PyTorch's convention for complex: conj(f'(z))
        mag = a.abs()
        d = 1 + mag
        # z / (1 + |z|) is not holomorphic: its |z| adds -Re(g conj(z)) sgn(z) / d^2
        sgn = a / torcia.where(mag == 0, _one(mag), mag)
        return g / d - (g * a.conj()).real * sgn / (d * d)
    if a.dtype in _HALF:
        return activation_backward(g.float(), a.float(), activation, **params).to(g.dtype)
    # zero where the slope is, whatever the gradient there (an infinite one included)
    if activation == "relu":
        return torcia.where(a <= 0, _zero(g), g)  # g where a is NaN
    if activation == "hardswish":
        return torcia.where(a < -3, _zero(g), torcia.where(a > 3, g, g * (a / 3 + 0.5)))
    return g * _activation_derivative(a, activation, params)


def sub(a, b):
    # exact: IEEE subtraction is the addition of the negation (signed zeros included), and
    # integers wrap alike
    return a + (-b)


def reciprocal(a):
    return _one(a) / a


def _refuse(op, a):
    """Raise the reference kernel's error where it refuses ``a``'s dtype."""
    error = refusal(op, a.dtype.to_numpy())
    if error is not None:
        raise error


def isnan(a):
    return a != a


def isinf(a):
    if a.is_complex():
        return _either(isinf(a.real), isinf(a.imag))
    if not a.is_floating_point():
        return torcia.zeros(a.shape, dtype=torcia.bool, device=a.device)
    return a.abs() == math.inf


def sign(a):
    _refuse("sign", a)
    if a.dtype == torcia.bool:
        return a.clone()
    # 0 for a zero of either sign and for NaN, as PyTorch's
    out = (a > 0).to(a.dtype) - (a < 0).to(a.dtype)
    if not a.is_floating_point():
        return out
    # plus a zero made of a: the result is differentiable, its gradient 0 (PyTorch's)
    return out + torcia.where(isfinite(a), a * 0, _zero(a))


def bitwise_not(a):
    if a.dtype == torcia.bool:
        return logical_not(a)
    if a.is_floating_point() or a.is_complex():
        raise NotImplementedError(
            f'"bitwise_not_cpu" not implemented for \'{_torch_name(a.dtype)}\'')
    return call("bitwise_xor", (a, _scalar(a, -1)), {})  # all ones, in two's complement


def neg(a):
    _refuse("neg", a)
    if a.is_complex():
        return torcia.complex(neg(a.real), neg(a.imag))
    # exact: a sign flip (signed zeros too), and integers wrap alike (-1 of uint8 is 255)
    return a * _scalar(a, -1)


def gt(a, b):
    return b < a


def le(a, b):
    _refuse("le", a)
    return _either(a < b, a == b)


def ge(a, b):
    return b <= a


def ne(a, b):
    return logical_not(a == b)


def _order_reversed(a):
    """``a`` mapped onto values of reversed order, ties and NaN kept: the first minimum of
    ``a`` is the first maximum of it (~ for integers and bools, where - would wrap)."""
    return -a if a.is_floating_point() else ~a


def argmin(a, dim=None, keepdim=False):
    _refuse("argmin", a)
    return call("argmax", (_order_reversed(a),), {"dim": dim, "keepdim": keepdim})


def min_dim(a, dim, keepdim=False):
    _refuse("min_dim", a)
    index = call("argmax", (_order_reversed(a),), {"dim": dim, "keepdim": True})
    values = a.gather(dim, index)
    if keepdim:
        return values, index
    return values.squeeze(dim), index.squeeze(dim)


def all_true(a, dim=None, keepdim=False):
    return _reduce_count(a == 0, dim, keepdim) == 0


def any_true(a, dim=None, keepdim=False):
    return _reduce_count(a != 0, dim, keepdim) > 0


def _reduce_count(mask, dim, keepdim):
    if dim is None and not keepdim:
        return mask.sum()
    return mask.sum(_dims(mask, dim), keepdim=keepdim)


def var(a, dim=None, correction=1, keepdim=False):
    if a.dtype in _HALF:
        return var(a.float(), dim, correction, keepdim).to(a.dtype)
    dims = _dims(a, dim)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    centred = a - a.mean(dims, keepdim=True)
    squares = (centred * centred.conj()).real if a.is_complex() else centred * centred
    # NumPy's and PyTorch's divisor: never below 0 (a zero gives inf or NaN)
    return squares.sum(dims, keepdim=keepdim) / max(count - correction, 0)


# ----- softmax and cross-entropy ---------------------------------------------------------


def softmax(a, dim):
    e = (a - a.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def log_softmax(a, dim):
    shifted = a - a.amax(dim, keepdim=True)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def softmax_backward(g, y, dim):
    return y * (g - (g * y).sum(dim, keepdim=True))


def log_softmax_backward(g, y, dim):
    return g - y.exp() * g.sum(dim, keepdim=True)


def _target_weights(x, target, weight, ignore_index):
    """(keep, safe target, per-sample weight) for x (N, C) and target (N,)."""
    keep = target != ignore_index
    safe = target * keep.to(target.dtype)
    w = keep.to(x.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe)
    return keep, safe, w


def nll_loss(logp, target, weight, reduction, ignore_index):
    _, safe, w = _target_weights(logp, target, weight, ignore_index)
    losses = -logp.gather(1, safe.unsqueeze(1)).squeeze(1) * w
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / w.sum()


def cross_entropy(x, target, weight, reduction, ignore_index, label_smoothing):
    logp = call("log_softmax", (x,), {"dim": 1})
    losses = call("nll_loss", (logp, target, weight),
                  {"reduction": "none", "ignore_index": ignore_index})
    keep, _, w = _target_weights(x, target, weight, ignore_index)
    if label_smoothing:
        c = x.shape[1]
        smooth = -(logp.sum(1) if weight is None else logp.matmul(weight))
        losses = (1 - label_smoothing) * losses + (label_smoothing / c) * smooth * keep.to(
            x.dtype)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / w.sum()


def cross_entropy_backward(g, x, target, weight, reduction, ignore_index, label_smoothing):
    n, c = x.shape
    keep, safe, w = _target_weights(x, target, weight, ignore_index)
    keep_f = keep.to(x.dtype)
    scale = g * keep_f if reduction != "mean" else (g / w.sum()) * keep_f
    ws = w * scale
    eps = label_smoothing
    p = call("softmax", (x,), {"dim": 1})
    onehot = (torcia.arange(c, device=x.device).unsqueeze(0) == safe.unsqueeze(1)).to(x.dtype)
    if not eps:
        return p * ws.unsqueeze(1) - onehot * ws.unsqueeze(1)
    wc = torcia.ones(c, dtype=x.dtype, device=x.device) if weight is None else weight
    out = p * ((1 - eps) * ws + (eps / c) * wc.sum() * scale).unsqueeze(1)
    out = out - (eps / c) * wc * scale.unsqueeze(1)
    return out - onehot * ((1 - eps) * ws).unsqueeze(1)


# ----- convolution and pooling -------------------------------------------------------------
# 1-D and 2-D windows go through im2col (1-D as 2-D of height 1); any other number of
# dimensions through _windows, one strided slice of the input per window offset.


def _as_2d(x, nd):
    return x if nd == 2 else x.unsqueeze(-2)


def _windows(x, kernel, stride, padding, dilation, out, value=0.0):
    """x (N, C, *size) padded by ``padding`` ((lo, hi) per dim) with ``value``, seen through
    its windows: (N, C, K, *out), K = prod(kernel) offsets in row-major order (the order of
    a weight's flattened kernel dims)."""
    if any(lo or hi for lo, hi in padding):
        flat = tuple(p for pair in reversed(padding) for p in pair)  # last dim first
        x = call("pad", (x,), {"pad": flat, "mode": "constant", "value": value})
    views = []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        key = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                    for o, d, n, s in zip(offsets, dilation, out, stride))
        views.append(x[(slice(None), slice(None)) + key])
    return torcia.stack(views, 2)


def _conv_out(size, kernel, stride, padding, dilation):
    return tuple((i + lo + hi - d * (k - 1) - 1) // s + 1
                 for i, k, s, (lo, hi), d in zip(size, kernel, stride, padding, dilation))


def _conv_nd(x, w, b, stride, padding, dilation, groups):
    n, o, nd = x.shape[0], w.shape[0], x.ndim - 2
    out = _conv_out(x.shape[2:], w.shape[2:], stride, padding, dilation)
    cols = _windows(x, w.shape[2:], stride, padding, dilation, out)  # (N, C, K, *out)
    cols = cols.reshape(n, groups, -1, math.prod(out))
    res = w.reshape(groups, o // groups, -1).matmul(cols)  # (N, g, O/g, L)
    res = res.reshape((n, o) + out)
    return res if b is None else res + b.reshape((1, o) + (1,) * nd)


def _conv_weight_nd(x, g, weight_shape, stride, padding, dilation, groups):
    n, o = x.shape[0], weight_shape[0]
    out = tuple(g.shape[2:])
    cols = _windows(x, weight_shape[2:], stride, padding, dilation, out)
    cols = cols.reshape(n, groups, -1, math.prod(out))
    gm = g.reshape(n, groups, o // groups, -1)  # (N, g, O/g, L)
    return gm.matmul(cols.transpose(2, 3)).sum(0).reshape(tuple(weight_shape))


def _pairs(values, nd, fill):
    return ((fill,) + tuple(values)) if nd == 1 else tuple(values)


def _columns(x, kernel, stride, padding, dilation, value=0.0):
    """im2col of x (N, C, H, W) after padding it by ``padding`` ((lo, hi) per dim) with
    ``value``: (N, C*kh*kw, L)."""
    (plo, phi), (qlo, qhi) = padding
    if plo or phi or qlo or qhi:
        x = call("pad", (x,), {"pad": (qlo, qhi, plo, phi), "mode": "constant",
                               "value": value})
    return call("im2col", (x,), {"kernel_size": tuple(kernel), "dilation": tuple(dilation),
                                  "padding": (0, 0), "stride": tuple(stride)})


def conv(x, w, b, stride, padding, dilation, groups):
    nd = x.ndim - 2
    if nd > 2:
        return _conv_nd(x, w, b, stride, padding, dilation, groups)
    x2, w2 = _as_2d(x, nd), _as_2d(w, nd)
    stride, dilation = _pairs(stride, nd, 1), _pairs(dilation, nd, 1)
    padding = _pairs(padding, nd, (0, 0))
    n, o = x2.shape[0], w2.shape[0]
    kh, kw = w2.shape[2:]
    (plo, phi), (qlo, qhi) = padding
    oh = (x2.shape[2] + plo + phi - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x2.shape[3] + qlo + qhi - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    cols = _columns(x2, (kh, kw), stride, padding, dilation)  # (N, C*K, L)
    cols = cols.reshape(n, groups, -1, oh * ow)
    out = w2.reshape(groups, o // groups, -1).matmul(cols)  # (N, g, O/g, L)
    out = out.reshape(n, o, oh, ow)
    if b is not None:
        out = out + b.reshape(1, o, 1, 1)
    return out.squeeze(-2) if nd == 1 else out


def conv_weight(x, g, weight_shape, stride, padding, dilation, groups):
    nd = x.ndim - 2
    if nd > 2:
        return _conv_weight_nd(x, g, weight_shape, stride, padding, dilation, groups)
    x2, g2 = _as_2d(x, nd), _as_2d(g, nd)
    shape2 = tuple(weight_shape) if nd == 2 else tuple(weight_shape[:2]) + (1,) + tuple(
        weight_shape[2:])
    stride, dilation = _pairs(stride, nd, 1), _pairs(dilation, nd, 1)
    padding = _pairs(padding, nd, (0, 0))
    n, o = x2.shape[0], shape2[0]
    cols = _columns(x2, shape2[2:], stride, padding, dilation)  # (N, C*K, L)
    cols = cols.reshape(n, groups, -1, cols.shape[-1])
    gm = g2.reshape(n, groups, o // groups, -1)  # (N, g, O/g, L)
    return gm.matmul(cols.transpose(2, 3)).sum(0).reshape(tuple(weight_shape))


def max_pool(x, kernel_size, stride, padding, dilation, ceil_mode):
    nd = x.ndim - 2
    if nd > 2:
        return _max_pool_nd(x, kernel_size, stride, padding, dilation, ceil_mode)
    x2 = _as_2d(x, nd)
    kernel, stride = _pairs(kernel_size, nd, 1), _pairs(stride, nd, 1)
    padding, dilation = _pairs(padding, nd, 0), _pairs(dilation, nd, 1)
    n, c, h, w = x2.shape
    (oh, ow), extra = _pool_geometry((h, w), kernel, stride, padding, dilation, ceil_mode)
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    lowest = -math.inf if x.is_floating_point() else int(np.iinfo(x.dtype.to_numpy()).min)
    cols = _columns(x2, kernel, stride, pads, dilation, lowest)  # (N, C*K, L')
    k = kernel[0] * kernel[1]
    full_w = (w + pads[1][0] + pads[1][1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    cols = cols.reshape(n, c, k, -1, full_w)[:, :, :, :oh, :ow]
    arg = cols.argmax(2, keepdim=True)  # the first maximum, as PyTorch
    values = cols.take_along_dim(arg, 2).squeeze(2)
    arg = arg.squeeze(2)
    dev = x.device
    row = (torcia.arange(oh, device=dev) * stride[0] - padding[0]).reshape(1, 1, oh, 1)
    col = (torcia.arange(ow, device=dev) * stride[1] - padding[1]).reshape(1, 1, 1, ow)
    row = row + torcia.div(arg, kernel[1], rounding_mode="floor") * dilation[0]
    col = col + torcia.remainder(arg, kernel[1]) * dilation[1]
    index = row * w + col
    if nd == 1:
        return values.squeeze(-2), index.squeeze(-2)
    return values, index


def _max_pool_nd(x, kernel, stride, padding, dilation, ceil_mode):
    nd, size = x.ndim - 2, tuple(x.shape[2:])
    out, extra = _pool_geometry(size, kernel, stride, padding, dilation, ceil_mode)
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    lowest = -math.inf if x.is_floating_point() else int(np.iinfo(x.dtype.to_numpy()).min)
    cols = _windows(x, kernel, stride, pads, dilation, out, lowest)  # (N, C, K, *out)
    arg = cols.argmax(2, keepdim=True)  # the first maximum, as PyTorch
    values = cols.take_along_dim(arg, 2).squeeze(2)
    arg = arg.squeeze(2)
    # the flat index in the input plane: each dim's window start plus its offset in arg
    index = None
    for i in range(nd):
        offset = torcia.remainder(torcia.div(arg, math.prod(kernel[i + 1:]),
                                             rounding_mode="floor"), kernel[i])
        start = torcia.arange(out[i], device=x.device) * stride[i] - padding[i]
        start = start.reshape((1, 1) + (1,) * i + (out[i],) + (1,) * (nd - i - 1))
        term = (start + offset * dilation[i]) * math.prod(size[i + 1:])
        index = term if index is None else index + term
    return values, index


def max_pool_backward(g, indices, input_shape):
    n, c = g.shape[:2]
    plane = math.prod(input_shape)
    out = torcia.zeros(n * c, plane, dtype=g.dtype, device=g.device)
    out = out.scatter_add(1, indices.reshape(n * c, -1), g.reshape(n * c, -1))
    return out.reshape((n, c) + tuple(input_shape))


# the dispatcher's table (torcia._tensor): call() runs these where a device lacks a kernel
DECOMPOSITIONS.update({
    **{fn.__name__: fn for fn in (
        relu, hardsigmoid, hardswish, softsign, tanhshrink, silu,
        silu_backward, softplus, mish, logsigmoid, gelu, gelu_backward,
        frac, addcmul, addcdiv, lerp, xlogy, xlog1py, fmax, fmin, logical_not,
        logical_and, logical_or, logical_xor, masked_fill, tril, triu, count_nonzero, nansum,
        std, tile, stack, square, isfinite, nan_to_num, mean, logsumexp, roll, index_select,
        embedding, rms_norm, layer_norm, lstm_cell, activation_backward, sub, gt, ge, ne,
        var, leaky_relu, hardtanh, elu, celu, selu, sinc, rsqrt, reciprocal, isnan, isinf,
        sign, bitwise_not, squeeze, unsqueeze, transpose, narrow, split, flip, repeat, neg, le,
        take_along_dim, argmin, min_dim, diag, trunc, nll_loss)},
    "all": all_true, "any": any_true,
    "linear": linear, "mm": mm, "bmm": mm, "dot": dot, "outer": outer, "addmm": addmm,
    "softmax": softmax, "log_softmax": log_softmax, "softmax_backward": softmax_backward,
    "log_softmax_backward": log_softmax_backward, "cross_entropy": cross_entropy,
    "cross_entropy_backward": cross_entropy_backward, "conv": conv,
    "conv_weight": conv_weight, "max_pool": max_pool, "max_pool_backward": max_pool_backward,
})
