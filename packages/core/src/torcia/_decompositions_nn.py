"""Decompositions of the neural-network ops: softmax and the losses, convolution and pooling
through their windows, normalisation and its fused backward ops, attention, padding and
CTC. What a decomposition is, and the rest of them: :mod:`torcia._decompositions`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _oplib
from torcia._decompositions import (
    _both,
    _either,
    _in_float32,
    _one,
    _scalar,
    _zero,
)
from torcia._kernels_nn import _avg_divisor, _check_geometry, _pool_geometry
from torcia._ops._common import HALF as _HALF
from torcia._ops.elementwise import isfinite
from torcia._ops.views import repeat_interleave
from torcia._tensor import DECOMPOSITIONS, call

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
    onehot = (C.arange(c, device=x.device).unsqueeze(0) == safe.unsqueeze(1)).to(x.dtype)
    if not eps:
        return p * ws.unsqueeze(1) - onehot * ws.unsqueeze(1)
    wc = C.ones(c, dtype=x.dtype, device=x.device) if weight is None else weight
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
    return _oplib.stack(views, 2)


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
    row = (C.arange(oh, device=dev) * stride[0] - padding[0]).reshape(1, 1, oh, 1)
    col = (C.arange(ow, device=dev) * stride[1] - padding[1]).reshape(1, 1, 1, ow)
    row = row + _oplib.div(arg, kernel[1], rounding_mode="floor") * dilation[0]
    col = col + _oplib.remainder(arg, kernel[1]) * dilation[1]
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
        offset = _oplib.remainder(_oplib.div(arg, math.prod(kernel[i + 1:]),
                                             rounding_mode="floor"), kernel[i])
        start = C.arange(out[i], device=x.device) * stride[i] - padding[i]
        start = start.reshape((1, 1) + (1,) * i + (out[i],) + (1,) * (nd - i - 1))
        term = (start + offset * dilation[i]) * math.prod(size[i + 1:])
        index = term if index is None else index + term
    return values, index


def max_pool_backward(g, indices, input_shape):
    n, c = g.shape[:2]
    plane = math.prod(input_shape)
    out = C.zeros(n * c, plane, dtype=g.dtype, device=g.device)
    out = out.scatter_add(1, indices.reshape(n * c, -1), g.reshape(n * c, -1))
    return out.reshape((n, c) + tuple(input_shape))


# ----- fused backward ops, written out ------------------------------------------------------


def _sum_over(t, dims):
    """``t`` summed over ``dims`` (none: a copy of it)."""
    return t.sum(dims) if dims else t.clone()


def batch_norm_backward(g, x, weight, running_mean, running_var, training, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        mean = x.mean(axes)
        centred = x - mean.reshape(shape)
        var = (centred * centred).mean(axes)
    else:
        mean, var = running_mean, running_var
    invstd = (var + eps).sqrt().reciprocal().to(x.dtype)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    gb = g.sum(axes)
    gw = (g * xhat).sum(axes)
    scale = invstd if weight is None else invstd * weight
    if not training:
        return g * scale.reshape(shape), gw, gb
    n = x.numel() // x.shape[1]
    gx = (g - (gb / n).reshape(shape)) - xhat * (gw / n).reshape(shape)
    return gx * scale.reshape(shape), gw, gb


def _norm_backward(g, xhat, invstd, weight, axes, centre):
    """The input's gradient of a normalisation of ``axes`` (``centre``: the mean taken
    out, as layer_norm's): invstd (gxhat [- mean(gxhat)] - xhat mean(gxhat xhat))."""
    gxhat = g if weight is None else g * weight
    gx = gxhat - gxhat.mean(axes, keepdim=True) if centre else gxhat
    return (gx - xhat * (gxhat * xhat).mean(axes, keepdim=True)) * invstd


def layer_norm_backward(g, x, weight, normalized_ndim, eps):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    centred = x - x.mean(axes, keepdim=True)
    invstd = ((centred * centred).mean(axes, keepdim=True) + eps).sqrt().reciprocal()
    xhat = centred * invstd
    gx = _norm_backward(g, xhat, invstd, weight, axes, centre=True)
    return gx, _sum_over(g * xhat, lead), _sum_over(g, lead)


def rms_norm_backward(g, x, weight, normalized_ndim, eps):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    invrms = ((x * x).mean(axes, keepdim=True) + eps).sqrt().reciprocal()
    xhat = x * invrms
    gx = _norm_backward(g, xhat, invrms, weight, axes, centre=False)
    return gx, _sum_over(g * xhat, lead)


def lstm_cell_backward(gh, gc, act, c, c_new):
    i, f, g, o = act.chunk(4, -1)
    tc = c_new.tanh()
    dc = C.zeros(c_new.shape, dtype=c_new.dtype, device=c_new.device) if gc is None \
        else gc
    if gh is None:
        go = C.zeros(o.shape, dtype=act.dtype, device=act.device)
    else:
        gho = gh * o
        dc = dc + gho * (1 - tc * tc)
        go = gho * tc * (1 - o)
    parts = [dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), go]
    return _oplib.cat([p.to(act.dtype) for p in parts], -1), dc * f


# ----- windows: their adjoint, average and adaptive pooling, transposed convolution ---------


def _add_windows(cols, size, stride, dilation):
    """The adjoint of :func:`_windows` without padding: ``cols`` (N, C, *kernel,
    *positions); each kernel offset's values added at their strided positions of zeros of
    spatial ``size``."""
    nd = len(size)
    kernel, positions = tuple(cols.shape[2:2 + nd]), tuple(cols.shape[2 + nd:])
    out = C.zeros(tuple(cols.shape[:2]) + tuple(size), dtype=cols.dtype,
                       device=cols.device)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        key = (slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (n - 1) * s + 1, s)
            for o, d, n, s in zip(offsets, dilation, positions, stride))
        out = call("index_put", (out, cols[(slice(None), slice(None)) + offsets]),
                   {"key": key, "accumulate": True})
    return out


def _inner(x, padding, size):
    """x's spatial dims cropped to ``size`` after ``padding``: its own memory."""
    key = tuple(slice(p, p + n) for p, n in zip(padding, size))
    return x[(slice(None), slice(None)) + key].contiguous()


def im2col(x, kernel_size, dilation, padding, stride):
    pads = tuple((p, p) for p in padding)
    out = _conv_out(x.shape[2:], kernel_size, stride, pads, dilation)
    cols = _windows(x, kernel_size, stride, pads, dilation, out)  # (N, C, K, *out)
    return cols.reshape(x.shape[0], -1, math.prod(out))


def col2im(cols, output_size, kernel_size, dilation, padding, stride):
    n, c = cols.shape[0], cols.shape[1] // math.prod(kernel_size)
    pads = tuple((p, p) for p in padding)
    blocks = _conv_out(output_size, kernel_size, stride, pads, dilation)
    cols = cols.reshape((n, c) + tuple(kernel_size) + blocks)
    full = tuple(o + 2 * p for o, p in zip(output_size, padding))
    return _inner(_add_windows(cols, full, stride, dilation), padding, output_size)


def _divisor(like, in_sp, out_sp, kernel, stride, padding, count_include_pad,
             divisor_override):
    """avg_pool's divisor of each window (computed on the host from the geometry) as a
    float64 tensor beside ``like``, or ``divisor_override``."""
    div = _avg_divisor(np, in_sp, out_sp, kernel, stride, padding, count_include_pad,
                       divisor_override)
    return div if divisor_override else C.tensor(div, device=like.device)


def avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    ones = (1,) * len(kernel_size)
    out, extra = _pool_geometry(tuple(x.shape[2:]), kernel_size, stride, padding, ones,
                                ceil_mode)
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    total = _windows(x, kernel_size, stride, pads, ones, out).sum(2)
    div = _divisor(x, x.shape[2:], out, kernel_size, stride, padding, count_include_pad,
                   divisor_override)
    return (total / div).to(x.dtype)


def avg_pool_backward(g, input_shape, kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override):
    nd = len(kernel_size)
    out = tuple(g.shape[2:])
    div = _divisor(g, input_shape, out, kernel_size, stride, padding, count_include_pad,
                   divisor_override)
    share = (g / div).to(g.dtype).reshape(tuple(g.shape[:2]) + (1,) * nd + out)
    cols = share.expand(tuple(g.shape[:2]) + tuple(kernel_size) + out)
    full = tuple(max(i + 2 * p, (o - 1) * s + k) for i, p, o, s, k in zip(
        input_shape, padding, out, stride, kernel_size))
    return _inner(_add_windows(cols, full, stride, (1,) * nd), padding, input_shape)


def adaptive_max_pool(x, output_size):
    # as the reference kernel: each dim gathers fixed-width windows [floor(i I / O),
    # ceil((i + 1) I / O)), a short one repeating its last element
    nd, in_sp, dev = len(output_size), tuple(x.shape[2:]), x.device
    tables = []
    g = x
    for dim, (i, o) in enumerate(zip(in_sp, output_size)):
        start = (np.arange(o) * i) // o
        end = -((-(np.arange(o) + 1) * i) // o)
        width = int((end - start).max())
        table = np.minimum(start[:, None] + np.arange(width)[None, :], end[:, None] - 1)
        tables.append(table)
        g = g.index_select(2 + 2 * dim, C.tensor(table.reshape(-1), device=dev))
        g = g.reshape(tuple(g.shape[:2 + 2 * dim]) + table.shape
                      + tuple(g.shape[3 + 2 * dim:]))
    # (N, C, O1, W1, O2, W2, ...) -> (N, C, O1, O2, ..., W1*W2*...)
    perm = (0, 1) + tuple(range(2, 2 + 2 * nd, 2)) + tuple(range(3, 3 + 2 * nd, 2))
    flat = g.permute(*perm).reshape(tuple(x.shape[:2]) + tuple(output_size) + (-1,))
    arg = flat.argmax(-1, keepdim=True)  # the first maximum, as PyTorch
    values = flat.gather(-1, arg).squeeze(-1)
    arg = arg.squeeze(-1)
    widths = [t.shape[1] for t in tables]
    index = None
    for dim, table in enumerate(tables):
        offset = _oplib.remainder(_oplib.div(arg, math.prod(widths[dim + 1:]),
                                             rounding_mode="floor"), widths[dim])
        shape = [1] * (2 + nd)
        shape[2 + dim] = output_size[dim]
        row = C.arange(output_size[dim], device=dev).reshape(tuple(shape))
        coord = C.tensor(table.reshape(-1), device=dev)[row * widths[dim] + offset]
        index = coord if index is None else index * in_sp[dim] + coord
    return values, index


def conv_transpose(x, w, b, stride, padding, output_padding, dilation, groups):
    if x.dtype in _HALF:  # in float32, rounded once, as the reference kernel
        wide = [None if t is None else t.float() for t in (x, w, b)]
        return conv_transpose(*wide, stride, padding, output_padding, dilation,
                              groups).to(x.dtype)
    _check_geometry(tuple(w.shape[2:]), stride, padding, dilation, output_padding)
    n, cin, in_sp = x.shape[0], x.shape[1], tuple(x.shape[2:])
    kernel, og = tuple(w.shape[2:]), w.shape[1]
    # each input position's contribution to each kernel offset: (N, g, O/g * K, P)
    xm = x.reshape(n, groups, cin // groups, -1)
    wm = w.reshape(groups, cin // groups, -1).transpose(1, 2)
    cols = wm.matmul(xm).reshape((n, groups * og) + kernel + in_sp)
    full = tuple((i - 1) * s + d * (k - 1) + 1 + max(op - hi, 0)
                 for i, s, d, k, op, (lo, hi) in zip(in_sp, stride, dilation, kernel,
                                                     output_padding, padding))
    size = tuple((i - 1) * s - lo - hi + d * (k - 1) + op + 1
                 for i, s, d, k, op, (lo, hi) in zip(in_sp, stride, dilation, kernel,
                                                     output_padding, padding))
    if any(sz <= 0 for sz in size):
        raise RuntimeError(f"Given input size per channel: {list(in_sp)}. Calculated "
                           f"output size per channel: {list(size)}. Output size is too small")
    out = _inner(_add_windows(cols, full, stride, dilation), [lo for lo, _ in padding], size)
    return out if b is None else out + b.reshape((1, -1) + (1,) * len(kernel))


# ----- attention and batch normalisation ----------------------------------------------------


def _attention_scores(q, k, mask, is_causal, scale):
    """q k^T scale (k's heads repeated for grouped queries), -inf where a bool mask or
    causality forbids, plus a float mask."""
    rep = q.shape[-3] // k.shape[-3]
    if rep > 1:
        k = repeat_interleave(k, rep, k.ndim - 3)
    s = q.matmul(k.transpose(-1, -2)) * _scalar(q, scale)
    lq, lk = s.shape[-2:]
    if is_causal:
        mask = (C.arange(lk, device=q.device).unsqueeze(0)
                <= C.arange(lq, device=q.device).unsqueeze(1))
    if mask is not None and mask.dtype == D.bool_:
        return _oplib.where(mask, s, _scalar(s, -math.inf))
    return s if mask is None else s + mask.to(s.dtype)


def flash_attention(q, k, v, mask, is_causal=False, scale=1.0):
    if q.dtype in _HALF:
        out = flash_attention(*_in_float32(q, k, v, mask), is_causal, scale)
        return tuple(t.to(q.dtype) for t in out)
    s = _attention_scores(q, k, mask, is_causal, scale)
    # the shift changes neither result: no gradient goes through it
    top = s.amax(-1, keepdim=True).detach()
    top = _oplib.where(top == -math.inf, _zero(top), top)
    p = (s - top).exp()
    total = p.sum(-1, keepdim=True)
    rep = q.shape[-3] // k.shape[-3]
    if rep > 1:
        v = repeat_interleave(v, rep, v.ndim - 3)
    # a query that may attend to no key: a zero output, an lse of -inf
    out = (p / _oplib.where(total == 0, _one(total), total)).matmul(v)
    # lse is saved for backward, not differentiated (as the kernel's derivative has it)
    return out, (total.log() + top).squeeze(-1).detach()


def flash_attention_backward(g, q, k, v, out, lse, mask, is_causal=False, scale=1.0):
    if q.dtype in _HALF:
        grads = flash_attention_backward(*_in_float32(g, q, k, v, out, lse, mask),
                                         is_causal, scale)
        return tuple(t.to(q.dtype) for t in grads)
    rep = q.shape[-3] // k.shape[-3]
    s = _attention_scores(q, k, mask, is_causal, scale)
    live = (lse != -math.inf).unsqueeze(-1)
    safe = _oplib.where(live, lse.unsqueeze(-1), _zero(lse))
    p = _oplib.where(live, (s - safe).exp(), _zero(s))
    kk, vv = (repeat_interleave(t, rep, t.ndim - 3) if rep > 1 else t for t in (k, v))
    dv = p.transpose(-1, -2).matmul(g)
    ds = p * (g.matmul(vv.transpose(-1, -2)) - (g * out).sum(-1, keepdim=True))
    ds = ds * _scalar(ds, scale)
    dq = ds.matmul(kk)
    dk = ds.transpose(-1, -2).matmul(q)
    if rep > 1:  # a group's query heads add into its key/value head
        shape = tuple(k.shape[:-2]) + (rep, k.shape[-2])
        dk = dk.reshape(shape + tuple(dk.shape[-1:])).sum(-3)
        dv = dv.reshape(shape + tuple(dv.shape[-1:])).sum(-3)
    return dq, dk, dv


def batch_norm(x, weight, bias, running_mean, running_var, training, eps):
    if x.dtype in _HALF:
        # in float32, rounded once; the statistics in the dtype they would have had
        out, mean, var = batch_norm(*_in_float32(x, weight, bias, running_mean, running_var),
                                    training, eps)
        stat = x.dtype if training else running_mean.dtype
        return out.to(x.dtype), mean.to(stat), var.to(stat)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        axes = (0,) + tuple(range(2, x.ndim))
        mean = x.mean(axes)
        centred = x - mean.reshape(shape)
        var = (centred * centred).mean(axes)
    else:
        # copies: outputs must not alias the running buffers, which training updates
        mean, var = running_mean.clone(), running_var.clone()
        centred = x - mean.reshape(shape)
    scale = (var + eps).sqrt().reciprocal()
    if weight is not None:
        scale = scale * weight
    out = centred * scale.reshape(shape).to(x.dtype)
    # the statistics are saved for backward and the running averages, not differentiated
    # (as the kernel's derivative has it)
    return (out if bias is None else out + bias.reshape(shape)), mean.detach(), var.detach()


# ----- padding -------------------------------------------------------------------------------


# ----- CTC: the forward recursion over time, in log space -----------------------------------


def _logaddexp(a, b):
    top = _oplib.maximum(a, b)
    live = top != -math.inf  # both -inf: -inf, not the NaN of -inf - -inf
    a, b, top = (_oplib.where(live, t, _zero(t)) for t in (a, b, top))
    return _oplib.where(live, top + (-(a - b).abs()).exp().log1p(), _scalar(top, -math.inf))


def _never(like, *shape):
    return C.full(shape, -math.inf, dtype=like.dtype, device=like.device)


def _ctc_alpha(log_probs, targets, input_lengths, target_lengths, blank):
    """The kernel's steps (float64 throughout): (alpha (T, N, L'), the targets with blanks
    around every label (N, L'), which of them are reachable from two back, their
    log-probabilities (T, N, L'))."""
    t_max, n = log_probs.shape[:2]
    lp = log_probs.to(D.float64)
    dev = log_probs.device
    blanks = C.full(tuple(targets.shape), blank, dtype=D.int64, device=dev)
    ext = _oplib.cat([_oplib.stack([blanks, targets.to(D.int64)], -1).reshape(n, -1),
                      C.full((n, 1), blank, dtype=D.int64, device=dev)], 1)
    width = ext.shape[1]
    # a label differing from the one two back may be reached from it
    skip = _oplib.cat([C.zeros((n, min(2, width)), dtype=D.bool_, device=dev),
                       _both(ext[:, 2:] != blank, ext[:, 2:] != ext[:, :-2])], 1)
    lp_ext = lp.gather(2, ext.unsqueeze(0).expand(t_max, n, width))
    never = _scalar(lp, -math.inf)
    first = _oplib.where(target_lengths > 0, lp_ext[0, :, 1], never).reshape(n, 1) if \
        width > 1 else _never(lp, n, 0)
    alpha = [_oplib.cat([lp_ext[0, :, :1], first, _never(lp, n, max(width - 2, 0))], 1)]
    for t in range(1, t_max):
        prev = alpha[-1]
        one = _oplib.cat([_never(lp, n, 1), prev[:, :width - 1]], 1)
        two = _oplib.cat([_never(lp, n, min(2, width)), prev[:, :max(width - 2, 0)]], 1)
        step = _logaddexp(_logaddexp(prev, one), _oplib.where(skip, two, never))
        alpha.append(step + lp_ext[t])
    valid = (C.arange(width, device=dev).unsqueeze(0)
             < (2 * target_lengths.to(D.int64) + 1).unsqueeze(1))
    return _oplib.where(valid.unsqueeze(0), _oplib.stack(alpha), never), ext, skip, lp_ext


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank):
    alpha, _, _, _ = _ctc_alpha(log_probs, targets, input_lengths, target_lengths, blank)
    n, width = alpha.shape[1:]
    # each sequence's last step, at the last label or the blank after it
    last = alpha.permute(1, 0, 2).gather(1, (input_lengths.to(D.int64) - 1).reshape(
        n, 1, 1).expand(n, 1, width)).squeeze(1)
    end = 2 * target_lengths.to(D.int64)
    a = last.gather(1, end.unsqueeze(1)).squeeze(1)
    b = _oplib.where(target_lengths > 0,
                     last.gather(1, (end - 1).clamp(min=0).unsqueeze(1)).squeeze(1),
                     _scalar(alpha, -math.inf))
    return (-_logaddexp(a, b)).to(log_probs.dtype)


def ctc_loss_backward(g, log_probs, targets, input_lengths, target_lengths, nll, blank):
    # minus the share of each sample's alignments through each (t, class), from alpha and
    # beta (the backward recursion), times g
    alpha, ext, skip, lp_ext = _ctc_alpha(log_probs, targets, input_lengths, target_lengths,
                                          blank)
    t_max, n, width = alpha.shape
    never = _scalar(alpha, -math.inf)
    ahead = _oplib.cat([skip[:, 2:], C.zeros((n, min(2, width)), dtype=D.bool_,
                                                  device=skip.device)], 1)
    end = (2 * target_lengths.to(D.int64)).unsqueeze(1)
    pos = C.arange(width, device=alpha.device).unsqueeze(0)
    start = _either(pos == end, _both(pos == end - 1, (target_lengths > 0).unsqueeze(1)))
    beta = [None] * t_max
    nxt = _never(alpha, n, width)
    for t in range(t_max - 1, -1, -1):
        one = _oplib.cat([nxt[:, 1:], _never(alpha, n, 1)], 1)
        two = _oplib.cat([nxt[:, min(2, width):], _never(alpha, n, min(2, width))], 1)
        rec = _logaddexp(_logaddexp(nxt, one), _oplib.where(ahead, two, never)) + lp_ext[t]
        cur = _oplib.where((input_lengths == t + 1).unsqueeze(1),
                           _oplib.where(start, lp_ext[t], never), rec)
        beta[t] = nxt = _oplib.where((input_lengths > t).unsqueeze(1), cur, never)
    # alpha + beta counts y[t, s] twice
    log_share = _oplib.stack(beta) + alpha
    live = log_share != -math.inf
    log_share = _oplib.where(live, log_share, _zero(alpha)) - lp_ext + nll.to(
        D.float64).reshape(1, n, 1)
    share = _oplib.where(live, log_share.exp(), _zero(alpha))
    share = _oplib.where(isfinite(share), share, _zero(share))
    grad = C.zeros(tuple(log_probs.shape), dtype=D.float64, device=alpha.device)
    grad = grad.scatter_add(2, ext.unsqueeze(0).expand(t_max, n, width), share)
    scale = g.to(D.float64) * isfinite(nll).to(D.float64)
    return (-grad * scale.reshape(1, n, 1)).to(log_probs.dtype)


# the dispatcher's table (torcia._tensor): call() runs these where a device lacks a kernel


DECOMPOSITIONS.update({
    **{fn.__name__: fn for fn in (
        nll_loss, batch_norm_backward, layer_norm_backward, rms_norm_backward,
        lstm_cell_backward, im2col, col2im, avg_pool, avg_pool_backward, adaptive_max_pool,
        conv_transpose, flash_attention, flash_attention_backward, batch_norm,
        ctc_loss, ctc_loss_backward)},
    "softmax": softmax, "log_softmax": log_softmax, "softmax_backward": softmax_backward,
    "log_softmax_backward": log_softmax_backward, "cross_entropy": cross_entropy,
    "cross_entropy_backward": cross_entropy_backward, "conv": conv,
    "conv_weight": conv_weight, "max_pool": max_pool, "max_pool_backward": max_pool_backward,
})
