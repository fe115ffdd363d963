"""Default decompositions: composite ops written with other ops.

An op with a decomposition here is *composite*; every other op is a *primitive*. A device
backend must implement the primitives; where it has no kernel for a composite op, the
dispatcher runs the op's decomposition on tensors instead (PyTorch's
CompositeImplicitAutograd): its ops are dispatched one by one, so autograd records them
and the composite's own derivative (and fused ``*_backward`` op) is not needed.

A decomposition takes the op's inputs (tensors, numbers or None) positionally and its
parameters as keywords, as a kernel does, and returns a tensor (or a tuple of tensors).
It is written with torcia ops only: it runs on any device. The neural-network ops'
decompositions (softmax and the losses, convolution and pooling, normalisation, attention,
padding, CTC) are in :mod:`torcia._decompositions_nn`.
"""

from __future__ import annotations

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _opdef, _oplib
from torcia._grad_mode import STATE as _GRAD
from torcia._numpy_backend import refusal
from torcia._ops import DECLARED
from torcia._ops._common import opmath as _opmath
from torcia._ops._common import widened
from torcia._ops.reduce import sorted_at
from torcia._tensor import AUTOGRAD, DECOMPOSITIONS, Tensor, active_modes, call

# ----- linear algebra -------------------------------------------------------------------


def linear(x, w, b):
    out = x.matmul(w.transpose(0, 1))
    return out if b is None else out + b


# ----- helpers -----------------------------------------------------------------------------


def _in_float32(*tensors):
    """Half-precision ``tensors`` in float32 (the reference kernels' opmath), others as
    they are."""
    return tuple(map(widened, tensors))


def _zero(a):
    """A 0-dim zero of ``a``'s dtype on its device (a Python 0 would promote a bool)."""
    return C.zeros((), dtype=a.dtype, device=a.device)


def _one(a):
    """A 0-dim one of ``a``'s dtype on its device."""
    return C.ones((), dtype=a.dtype, device=a.device)


def _scalar(a, value):
    """``value`` as a 0-dim tensor of ``a``'s dtype on its device."""
    return C.full((), value, dtype=a.dtype, device=a.device)


def _both(x, y):
    # bitwise on bools; ``&`` would dispatch logical_and again
    return call("bitwise_and", (x, y), {})


def _either(x, y):
    return call("bitwise_or", (x, y), {})


# ----- embedding, norms, the LSTM cell -----------------------------------------------------


def embedding(weight, indices, padding_idx=None, sparse=False):
    if padding_idx is not None:
        # the padding row's values, without a gradient (as the kernel's derivative)
        rows = weight.shape[0]
        pad = C.arange(rows, device=weight.device) == padding_idx % rows
        weight = _oplib.where(pad.unsqueeze(1), weight.detach(), weight)
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
    return o * c_new.tanh(), c_new, _oplib.cat([i, f, g, o], -1).detach()


def _refuse(op, a):
    """Raise the reference kernel's error where it refuses ``a``'s dtype."""
    error = refusal(op, a.dtype.to_numpy())
    if error is not None:
        raise error


# ----- selection along a dim: sort's order -------------------------------------------------


def kthvalue(a, k, dim=-1, keepdim=False):
    return sorted_at(a, k - 1, dim, keepdim)


def topk(a, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's name
    values, index = call("sort", (a,), {"dim": dim, "descending": largest})
    return values.narrow(dim, 0, k).clone(), index.narrow(dim, 0, k).clone()


# ----- indexing ----------------------------------------------------------------------------


def embedding_backward(g, indices, num_weights, padding_idx):
    flat = indices.reshape(-1)
    rows = g.reshape(-1, g.shape[-1])
    if padding_idx is not None:
        rows = _oplib.where((flat != padding_idx).unsqueeze(1), rows, _zero(rows))
    out = C.zeros(num_weights, g.shape[-1], dtype=g.dtype, device=g.device)
    return call("index_add", (out, flat, rows), {"dim": 0})


# ----- repeating and counting ---------------------------------------------------------------


def searchsorted(seq, values, right=False, out_int32=False):
    _refuse("searchsorted", seq)
    # exact for a sorted sequence: the insertion point is the number of its elements before
    # the value (left) or not after it (right), in NumPy's order, which puts NaN last
    s = seq if seq.ndim == 1 else seq.unsqueeze(-2)  # (..., 1, n) against (..., m, 1)
    v = values.unsqueeze(-1)
    if right:
        before = v < s
        if s.is_floating_point():
            before = before.bitwise_or((s != s).bitwise_and(v == v))
        before = before.logical_not()
    else:
        before = s < v
        if s.is_floating_point():
            before = before.bitwise_or((v != v).bitwise_and(s == s))
    return before.sum(-1).to(D.int32 if out_int32 else D.int64)


def bincount(a, weights=None, minlength=0):
    size = max(int(a.amax()) + 1 if a.numel() else 0, minlength)
    if weights is None:
        dtype, src = D.int64, C.ones(a.shape, dtype=D.int64, device=a.device)
    else:
        if not isinstance(weights, Tensor):  # given as a parameter: an array
            weights = C.tensor(weights, device=a.device)
        dtype = weights.dtype if weights.dtype == D.float32 else D.float64
        src = weights.to(dtype)
    return C.zeros(size, dtype=dtype, device=a.device).scatter_add(0, a, src)


# ----- recurrences and counting -------------------------------------------------------------


def lstm_layer(x_gates, h0, c0, w_hh_t):
    h, c = h0, c0
    outs, cells, acts = [], [], []
    for t in range(x_gates.shape[0]):
        h, c, act = call("lstm_cell", (x_gates[t] + h.matmul(w_hh_t), c), {})
        outs.append(h)
        cells.append(c)
        acts.append(act)
    # the activated gates are the backward's workspace, not differentiated (as the kernel's)
    return _oplib.stack(outs), _oplib.stack(cells), _oplib.stack(acts).detach()


def lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t):
    # back through time; the recurrent weight's gradient is one product over all steps
    dh = C.zeros(h0.shape, dtype=h0.dtype, device=h0.device)
    dc = C.zeros(c0.shape, dtype=c0.dtype, device=c0.device)
    steps = []
    for t in range(acts.shape[0] - 1, -1, -1):
        gh = dh if g_out is None else dh + g_out[t]
        gc = dc if g_cs is None else dc + g_cs[t]
        g_gates, dc = call("lstm_cell_backward",
                           (gh, gc, acts[t], c0 if t == 0 else cs[t - 1], cs[t]), {})
        steps.append(g_gates)
        dh = g_gates.matmul(w_hh_t.transpose(0, 1))
    g_gates = _oplib.stack(steps[::-1])
    h_prev = _oplib.cat([h0.unsqueeze(0), out[:-1]]).reshape(-1, h0.shape[-1])
    g_w = h_prev.transpose(0, 1).matmul(g_gates.reshape(-1, g_gates.shape[-1]))
    return g_gates, dh, dc, g_w


def histc(a, bins=100, min=0.0, max=0.0):  # noqa: A002 - PyTorch's names
    lo, hi = float(min), float(max)
    if lo == hi and a.numel():
        lo, hi = float(a.amin()), float(a.amax())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    # NumPy's histogram: bin i holds edges[i] <= x < edges[i + 1], the last one hi too;
    # its edges in its dtype (a's, or float64 where a is an integer)
    kind = np.result_type(lo, hi, np.empty(0, a.dtype.to_numpy()))
    edges = C.tensor(np.linspace(lo, hi, bins + 1, dtype=kind), device=a.device)
    x = a.reshape(-1).to(edges.dtype)
    index = (x.unsqueeze(-1) >= edges).sum(-1) - 1
    index = index.clamp(0, bins - 1)
    inside = _both(x >= edges[0], x <= edges[-1]).to(a.dtype)
    return C.zeros(bins, dtype=a.dtype, device=a.device).scatter_add(0, index, inside)


def ran(op, inputs, params, result):
    """What :func:`torcia._tensor.call` does with a kernel's ``result`` of ``op`` on
    ``inputs``: the dispatch modes' ``on_result`` (forward AD's tangents...) and autograd's
    record. For a decomposition that computes the kernel's result itself (a view through
    as_strided of its detached input), so that the op is seen as the op it is."""
    for mode in active_modes():
        mode.on_result(op, inputs, params, result)
    if _GRAD.enabled and any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        AUTOGRAD.record(op, inputs, params, result)
    return result


# the declared decompositions (torcia._ops) run ops by name, and stand for one, with these
_opdef.CALL, _opdef.RAN = call, ran
DECOMPOSITIONS.update({
    **{name: op.decomposition for name, op in DECLARED.items() if op.decomposition},
    **{fn.__name__: fn for fn in (
        embedding, rms_norm, layer_norm, lstm_cell,
        kthvalue, topk, embedding_backward, bincount, lstm_layer,
        lstm_layer_backward, histc, searchsorted,)},
    "linear": linear,
})
