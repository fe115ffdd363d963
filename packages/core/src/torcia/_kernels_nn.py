"""Reference kernels for the neural-network primitives (:data:`torcia.ops.NN`) but the
activations, the convolutions and pooling, the LSTM ops and attention, whose kernels are
declared with them in :mod:`torcia._ops` (``nn_activation``, ``nn_conv``, ``nn_rnn``,
``nn_attention``).

A mixin of :class:`torcia._numpy_backend.Reference`: arrays of ``self.xp`` positionally,
parameters as keywords, multi-output ops return a tuple. The public functions in
:mod:`torcia._oplib` (``nn_norm``, ``nn_loss``...) have already checked shapes and
normalised every parameter.
"""

from __future__ import annotations

import numpy as np

from torcia._ops._common import in_float32, low_precision


class NNKernels:
    """Kernels of the neural-network ops."""

    xp = np

    # ----- softmax ------------------------------------------------------------------
    def softmax(self, a, dim):
        """softmax(a, dim): exp(a) normalised along ``dim``."""
        xp = self.xp
        if a.shape[dim] == 0:
            return a.copy()  # nothing to normalise; max would have no identity
        e = xp.exp(a - a.max(axis=dim, keepdims=True))
        e /= e.sum(axis=dim, keepdims=True)
        return e

    def log_softmax(self, a, dim):
        """log_softmax(a, dim): a - logsumexp(a) along ``dim``."""
        xp = self.xp
        if a.shape[dim] == 0:
            return a.copy()
        shifted = a - a.max(axis=dim, keepdims=True)
        return shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))

    def softmax_backward(self, g, y, dim):
        """softmax_backward(g, y, dim): y * (g - sum(g * y, dim)) for y = softmax(x)
        (first order)."""
        gy = g * y
        gy -= y * gy.sum(axis=dim, keepdims=True)
        return gy

    def log_softmax_backward(self, g, y, dim):
        """log_softmax_backward(g, y, dim): g - exp(y) * sum(g, dim) for
        y = log_softmax(x) (first order)."""
        return g - self.xp.exp(y) * g.sum(axis=dim, keepdims=True)

    # ----- normalisation ------------------------------------------------------------
    def batch_norm(self, x, weight, bias, running_mean, running_var, training, eps):
        """batch_norm(x (N, C, *), weight, bias, running_mean, running_var) ->
        (out, mean, var): normalised per channel with the batch statistics (training)
        or the running ones; ``mean`` and the biased ``var`` are the statistics used."""
        if low_precision(x):
            # float16 and bfloat16 in float32, rounded once, as PyTorch's CPU kernel; the
            # statistics in the dtype they would have had
            out, mean, var = self.batch_norm(
                *in_float32(x, weight, bias, running_mean, running_var), training, eps)
            stat = x.dtype if training else running_mean.dtype
            return out.astype(x.dtype), mean.astype(stat), var.astype(stat)
        xp = self.xp
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if training:
            axes = (0,) + tuple(range(2, x.ndim))
            mean = x.mean(axis=axes)
            centred = x - mean.reshape(shape)
            var = (centred * centred).mean(axis=axes)
        else:
            # copies: outputs must not alias the running buffers, which training updates
            mean, var = running_mean.copy(), running_var.copy()
            centred = x - mean.reshape(shape)
        scale = 1 / xp.sqrt(var + eps)
        if weight is not None:
            scale = scale * weight
        out = centred * scale.reshape(shape).astype(x.dtype, copy=False)
        if bias is not None:
            out += bias.reshape(shape)
        return out, mean, var

    def batch_norm_backward(self, g, x, weight, running_mean, running_var, training, eps):
        """batch_norm_backward(g, x, weight, running_mean, running_var) -> (grad_input,
        grad_weight, grad_bias) of ``batch_norm``: batch statistics recomputed in
        training, the running ones otherwise (first order: second derivatives go through
        differentiable ops)."""
        xp = self.xp
        shape = (1, -1) + (1,) * (x.ndim - 2)
        axes = (0,) + tuple(range(2, x.ndim))
        if training:
            mean = x.mean(axis=axes)
            var = x.var(axis=axes)
        else:
            mean, var = running_mean, running_var
        invstd = (1 / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
        xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
        gb = g.sum(axis=axes)
        gw = (g * xhat).sum(axis=axes)
        scale = invstd if weight is None else invstd * weight
        if not training:
            return g * scale.reshape(shape), gw, gb
        n = x.size // x.shape[1]
        xhat *= (gw / n).reshape(shape)
        gx = g - (gb / n).reshape(shape)
        gx -= xhat
        gx *= scale.reshape(shape)
        return gx, gw, gb

    def layer_norm_backward(self, g, x, weight, normalized_ndim, eps):
        """layer_norm_backward(g, x, weight) -> (grad_input, grad_weight, grad_bias) of
        ``layer_norm`` (first order)."""
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        lead = tuple(range(x.ndim - normalized_ndim))
        centred = x - x.mean(axis=axes, keepdims=True)
        invstd = 1 / xp.sqrt((centred * centred).mean(axis=axes, keepdims=True) + eps)
        xhat = centred * invstd
        gb = g.sum(axis=lead)
        gw = (g * xhat).sum(axis=lead)
        gxhat = g if weight is None else g * weight
        gx = gxhat - gxhat.mean(axis=axes, keepdims=True)
        gx -= xhat * (gxhat * xhat).mean(axis=axes, keepdims=True)
        gx *= invstd
        return gx, gw, gb

    def layer_norm(self, x, weight, bias, normalized_ndim, eps):
        """layer_norm(x, weight, bias) -> out: normalised over the last
        ``normalized_ndim`` dims, then scaled and shifted elementwise."""
        if low_precision(x):
            # float16 and bfloat16 in float32, rounded once, as PyTorch's CPU kernel
            return self.layer_norm(*in_float32(x, weight, bias), normalized_ndim,
                                   eps).astype(x.dtype)
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(axis=axes, keepdims=True)
        out = centred / xp.sqrt(var + eps)
        if weight is not None:
            out *= weight
        if bias is not None:
            out += bias
        return out

    def rms_norm(self, x, weight, normalized_ndim, eps):
        """rms_norm(x, weight) -> out: divided by the root mean square over the last
        ``normalized_ndim`` dims, then scaled elementwise."""
        if low_precision(x):
            return self.rms_norm(*in_float32(x, weight), normalized_ndim, eps).astype(x.dtype)
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        out = x / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
        if weight is not None:
            out *= weight
        return out

    def rms_norm_backward(self, g, x, weight, normalized_ndim, eps):
        """rms_norm_backward(g, x, weight) -> (grad_input, grad_weight) of ``rms_norm``
        (first order): with r = 1 / rms(x) and xhat = x r, grad_input is
        r (gxhat - xhat mean(gxhat xhat)), gxhat the gradient scaled by ``weight``."""
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        lead = tuple(range(x.ndim - normalized_ndim))
        invrms = 1 / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
        xhat = x * invrms
        gw = (g * xhat).sum(axis=lead)
        gxhat = g if weight is None else g * weight
        gx = gxhat - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True)
        gx *= invrms
        return gx, gw

    # ----- embedding ----------------------------------------------------------------
    def embedding(self, weight, indices, padding_idx=None, sparse=False):
        """embedding(weight (V, D), indices) -> (*indices.shape, D): rows of ``weight``
        (``padding_idx`` and ``sparse`` only matter to the gradient)."""
        return self.xp.take(weight, indices, axis=0)

    def embedding_backward(self, g, indices, num_weights, padding_idx):
        """embedding_backward(g (*indices.shape, D), indices) -> (num_weights, D): rows of
        ``g`` summed into the rows they were taken from; ``padding_idx`` gets none."""
        xp = self.xp
        d = g.shape[-1]
        flat = indices.reshape(-1)
        rows = g.reshape(-1, d)
        if xp is not np:
            # on a device, one scatter-add: the sorted runs below have data-dependent
            # sizes, each a wait for the device
            out = xp.zeros((num_weights, d), dtype=np.promote_types(g.dtype, np.float32))
            if padding_idx is not None:
                rows = rows * (flat != padding_idx)[:, None].astype(rows.dtype)
            xp.add.at(out, flat, rows)
            return out.astype(g.dtype, copy=False)
        if padding_idx is not None:
            keep = flat != padding_idx
            flat, rows = flat[keep], rows[keep]
        # sort once, sum each run of equal indices: add.at without its per-element cost
        order = xp.argsort(flat, kind="stable")
        flat, rows = flat[order], rows[order]
        out = xp.zeros((num_weights, d), dtype=g.dtype)
        if flat.size:
            starts = xp.concatenate([xp.asarray([0]), xp.nonzero(flat[1:] != flat[:-1])[0] + 1])
            out[flat[starts]] = xp.add.reduceat(rows, starts, axis=0)
        return out

    # ----- losses -------------------------------------------------------------------
    def nll_loss(self, logp, target, weight, reduction, ignore_index):
        """nll_loss(logp (N, C), target (N,), weight (C,) or None) -> loss:
        -weight[t] * logp[n, t], reduced; 'mean' divides by the summed weights."""
        xp = self.xp
        keep = target != ignore_index
        safe = xp.where(keep, target, 0)
        picked = xp.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
        w = _target_weights(xp, weight, safe, keep, logp.dtype)
        losses = -picked * w
        return _reduce(xp, losses, reduction, w.sum())

    def logsumexp_rows(self, x):
        """log(sum(exp(x), 1)) of each row of x (N, C), computed stably (a helper of
        the cross-entropy kernels, not an op)."""
        m = x.max(axis=1, keepdims=True)
        return self.xp.log(self.xp.exp(x - m).sum(axis=1)) + m[:, 0]

    def cross_entropy(self, x, target, weight, reduction, ignore_index, label_smoothing):
        """cross_entropy(x (N, C) logits, target (N,) class indices, weight (C,) or None)
        -> loss: log_softmax and nll_loss fused, with label smoothing as PyTorch's."""
        xp = self.xp
        rows = xp.arange(x.shape[0])
        lse = self.logsumexp_rows(x)
        keep = target != ignore_index
        safe = xp.where(keep, target, 0)
        w = _target_weights(xp, weight, safe, keep, x.dtype)
        # only the picked log-probabilities are needed: x[n, t] - logsumexp(x[n])
        losses = (lse - x[rows, safe]) * w
        if label_smoothing:
            c = x.shape[1]
            logp = x - lse[:, None]  # the full log-probabilities, for -sum_c w_c log p_c
            smooth = -(logp.sum(axis=1) if weight is None else logp @ weight)
            losses = (1 - label_smoothing) * losses + (label_smoothing / c) * smooth * keep
        return _reduce(xp, losses.astype(x.dtype, copy=False), reduction, w.sum())

    def cross_entropy_backward(self, g, x, target, weight, reduction, ignore_index,
                               label_smoothing):
        """cross_entropy_backward(g, x (N, C), target (N,), weight) -> (N, C): the
        gradient of ``cross_entropy`` with respect to the logits, given the loss
        gradient ``g`` (a scalar, or (N,) for reduction 'none')."""
        xp = self.xp
        n, c = x.shape
        keep = target != ignore_index
        safe = xp.where(keep, target, 0)
        w = _target_weights(xp, weight, safe, keep, x.dtype)
        scale = g * keep if reduction != "mean" else (g / w.sum()) * keep
        rows = xp.arange(n)
        eps = label_smoothing
        out = self.softmax(x, 1)
        # the loss gradient's scale folded into each row's factors: one pass over (N, C)
        ws = (w * scale).astype(x.dtype, copy=False)
        if eps:
            wc = xp.ones(c, dtype=x.dtype) if weight is None else weight
            out *= ((1 - eps) * ws + (eps / c) * wc.sum() * scale)[:, None]
            out -= (eps / c) * wc * scale[:, None]
            out[rows, safe] -= (1 - eps) * ws
        else:
            out *= ws[:, None]
            out[rows, safe] -= ws
        return out

    def ctc_loss(self, log_probs, targets, input_lengths, target_lengths, blank):
        """ctc_loss(log_probs (T, N, C), targets (N, S), input_lengths (N,),
        target_lengths (N,), blank) -> (N,): the negative log likelihood of each target
        over all its alignments (forward recursion over time, in log space)."""
        alpha, _, _ = _ctc_alpha(self.xp, log_probs, targets, input_lengths,
                                 target_lengths, blank)
        nll = _ctc_nll(self.xp, alpha, input_lengths, target_lengths)
        return nll.astype(log_probs.dtype, copy=False)

    def ctc_loss_backward(self, g, log_probs, targets, input_lengths, target_lengths, nll,
                          blank):
        """ctc_loss_backward(g (N,), log_probs, targets, input_lengths, target_lengths,
        nll) -> (T, N, C): g times the derivative of each sample's loss with respect to
        its log-probabilities: minus the share of alignments through each (t, class)."""
        xp = self.xp
        t_max, n, c = log_probs.shape
        alpha, ext, lp_ext = _ctc_alpha(xp, log_probs, targets, input_lengths,
                                        target_lengths, blank)
        beta = _ctc_beta(xp, lp_ext, ext, input_lengths, target_lengths, blank)
        ab = alpha + beta  # (T, N, L'): log of paths through (t, s), y[t, s] counted twice
        grad = xp.zeros((t_max, n, c), dtype=np.float64)
        finite = xp.isfinite(nll)
        with np.errstate(invalid="ignore", over="ignore"):
            share = xp.exp(ab - lp_ext + nll[None, :, None])
        share = xp.where(xp.isfinite(share), share, 0.0)
        # positions of the extended label sequence name classes; sum shares per class
        rows = xp.broadcast_to(xp.arange(n)[None, :, None], share.shape)
        times = xp.broadcast_to(xp.arange(t_max)[:, None, None], share.shape)
        cls = xp.broadcast_to(ext[None], share.shape)
        _add_at_flat(xp, grad, (times, rows, cls), share)
        grad = -grad * (g * finite)[None, :, None]
        return grad.astype(log_probs.dtype, copy=False)


def _ctc_extended(xp, targets, target_lengths, blank):
    """Targets with blanks around every label: (N, 2S+1), and whether position s may be
    reached from s - 2 (a label differing from the one two back)."""
    n, s = targets.shape
    ext = xp.full((n, 2 * s + 1), blank, dtype=np.int64)
    ext[:, 1::2] = targets
    skip = xp.zeros(ext.shape, dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return ext, skip


def _logaddexp3(xp, a, b, c):
    with np.errstate(invalid="ignore"):
        return xp.logaddexp(xp.logaddexp(a, b), c)


def _ctc_alpha(xp, log_probs, targets, input_lengths, target_lengths, blank):
    t_max, n, _ = log_probs.shape
    lp = log_probs.astype(np.float64)
    ext, skip = _ctc_extended(xp, targets, target_lengths, blank)
    width = ext.shape[1]
    lp_ext = xp.take_along_axis(lp, xp.broadcast_to(ext[None], (t_max, n, width)), axis=2)
    valid = xp.arange(width)[None, :] < (2 * target_lengths[:, None] + 1)
    neg = -np.inf
    alpha = xp.full((t_max, n, width), neg)
    alpha[0, :, 0] = lp_ext[0, :, 0]
    alpha[0, :, 1] = xp.where(target_lengths > 0, lp_ext[0, :, 1], neg)
    for t in range(1, t_max):
        prev = alpha[t - 1]
        one = xp.concatenate([xp.full((n, 1), neg), prev[:, :-1]], axis=1)
        two = xp.concatenate([xp.full((n, 2), neg), prev[:, :-2]], axis=1)
        alpha[t] = _logaddexp3(xp, prev, one, xp.where(skip, two, neg)) + lp_ext[t]
    alpha = xp.where(valid[None], alpha, neg)
    return alpha, ext, lp_ext


def _ctc_nll(xp, alpha, input_lengths, target_lengths):
    n = alpha.shape[1]
    last = alpha[input_lengths - 1, xp.arange(n)]  # (N, L')
    end = 2 * target_lengths
    a = last[xp.arange(n), end]
    b = xp.where(target_lengths > 0, last[xp.arange(n), xp.maximum(end - 1, 0)], -np.inf)
    return -xp.logaddexp(a, b)


def _ctc_beta(xp, lp_ext, ext, input_lengths, target_lengths, blank):
    t_max, n, width = lp_ext.shape
    _, skip = _ctc_extended(xp, ext[:, 1::2], target_lengths, blank)
    # s + 2 reachable from s when s + 2 may skip back to s
    skip_ahead = xp.concatenate([skip[:, 2:], xp.zeros((n, 2), dtype=bool)], axis=1)
    neg = -np.inf
    end = 2 * target_lengths
    pos = xp.arange(width)[None, :]
    start = (pos == end[:, None]) | ((pos == end[:, None] - 1) & (target_lengths[:, None] > 0))
    beta = xp.full((t_max, n, width), neg)
    nxt = xp.full((n, width), neg)
    for t in range(t_max - 1, -1, -1):
        one = xp.concatenate([nxt[:, 1:], xp.full((n, 1), neg)], axis=1)
        two = xp.concatenate([nxt[:, 2:], xp.full((n, 2), neg)], axis=1)
        rec = _logaddexp3(xp, nxt, one, xp.where(skip_ahead, two, neg)) + lp_ext[t]
        last = (t == input_lengths - 1)[:, None]
        cur = xp.where(last, xp.where(start, lp_ext[t], neg), rec)
        cur = xp.where((t < input_lengths)[:, None], cur, neg)
        beta[t] = cur
        nxt = cur
    return beta


def _add_at_flat(xp, out, key, values):
    """``out[key] += values`` with repeated keys summed."""
    flat = xp.ravel_multi_index(tuple(k.reshape(-1) for k in key), out.shape)
    out.reshape(-1)[...] += xp.bincount(flat, weights=values.reshape(-1), minlength=out.size)


def _target_weights(xp, weight, safe, keep, dtype):
    w = xp.ones(safe.shape, dtype=dtype) if weight is None else xp.take(weight, safe)
    return w * keep


def _reduce(xp, losses, reduction, weight_sum):
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.asarray(losses.sum() / weight_sum, dtype=losses.dtype)
