"""Decompositions of the neural-network ops: softmax and the losses, normalisation and its
fused backward ops, padding and CTC (the convolutions and pooling, the LSTM ops and
attention declare theirs in :mod:`torcia._ops`). What a decomposition is, and the rest of
them: :mod:`torcia._decompositions`.
"""

from __future__ import annotations

import math

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _oplib
from torcia._decompositions import (
    _HALF,
    _both,
    _either,
    _in_float32,
    _scalar,
    _zero,
    isfinite,
)
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


# ----- attention and batch normalisation ----------------------------------------------------


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
        batch_norm,
        ctc_loss, ctc_loss_backward)},
    "softmax": softmax, "log_softmax": log_softmax, "softmax_backward": softmax_backward,
    "log_softmax_backward": log_softmax_backward, "cross_entropy": cross_entropy,
    "cross_entropy_backward": cross_entropy_backward,
})
