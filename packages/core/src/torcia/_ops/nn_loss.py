"""The embedding lookup and the losses of :data:`torcia.ops.NN` (``nll_loss``,
``cross_entropy``, ``ctc_loss``) with their fused backward ops, each declared once:
schema, reference kernel, meta shape, decomposition, autocast policy.

A kernel here is written as a method of the reference backend: ``self.xp`` is the array
module (NumPy, or CuPy for torcia-cuda's subclass) and ``self.softmax`` and
``self.logsumexp_rows`` (the rows of the cross-entropy, which torcia-cpu runs natively) its
other kernels; arrays come positionally, parameters as keywords. A decomposition is written
with Tensor methods and, where no method does, the public functions of the loaded package
(:data:`torcia._opdef.PUBLIC`), this module being below the Tensor class. The losses'
public functions are ``torcia.nn.functional``'s; written below are ``embedding``'s (with
``torch.embedding``'s argument order and ``embedding_renorm_``) and the losses PyTorch also
has at ``torch.*`` (``torch.ctc_loss``, ``torch.kl_div``...: torcia-nn's forms, the
reduction given as PyTorch's enum), which reach dispatch late-bound
(:data:`torcia._opdef.CALL`, :data:`torcia._opdef.PUBLIC`): ``torcia`` exports ``__all__``
and ``TOP_LEVEL``, :data:`torcia.library.functional` the ``FUNCTIONAL`` forms. The
derivatives are torcia-autograd's; the ``*_backward`` ops are fused first derivatives
(``ctc_loss_backward`` has no derivative row: CTC is first order only).
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._grad_mode import no_grad
from torcia._opdef import define
from torcia._ops._common import check_tensor, functional, low_precision, op, random_floats
from torcia._ops._common import where as _where
from torcia._ops.linalg_functions import vector_norm
from torcia._ops.unary import decomposed_isfinite

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels, methods of the reference backend (see the module's doc)."""

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

    def nll_loss(self, logp, target, weight, reduction, ignore_index):
        """nll_loss(logp (N, C), target (N,), weight (C,) or None) -> loss:
        -weight[t] * logp[n, t], reduced; 'mean' divides by the summed weights."""
        xp = self.xp
        keep = target != ignore_index
        safe = xp.where(keep, target, 0)
        picked = xp.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
        w = _target_weights(xp, weight, safe, keep, logp.dtype)
        if reduction != "none" and low_precision(logp) and xp is np:
            # PyTorch subtracts each term from the sum: a - b is a + (-b), bit for bit
            loss = _half_cascade_sum(-picked if weight is None else -(picked * w), keep)
            if reduction == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):  # all ignored: NaN
                    loss = loss / _half_divisor(w, keep, weight is not None)
            return np.asarray(loss, logp.dtype)
        # an ignored target's loss is 0, not -0
        losses = xp.where(keep, -picked * w, 0).astype(logp.dtype, copy=False)
        return _reduce(xp, losses, reduction, w.sum())

    def cross_entropy(self, x, target, weight, reduction, ignore_index, label_smoothing):
        """cross_entropy(x (N, C) logits, target (N,) class indices, weight (C,) or None)
        -> loss: log_softmax and nll_loss fused, with label smoothing as PyTorch's."""
        xp = self.xp
        if low_precision(x) and not label_smoothing and xp is np:
            # PyTorch's composite, whose rounding in half floats the fused form misses
            return self.nll_loss(self.log_softmax(x, 1), target, weight, reduction,
                                 ignore_index)
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
        if low_precision(x) and not label_smoothing and xp is np:
            # through PyTorch's composite, in the dtype: nll_loss's gradient (-g, divided
            # by the forward's divisor for 'mean', times the target's weight, each
            # rounded), then log_softmax's
            if reduction == "none":
                coef = -w * g
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    scale = -(g / _half_divisor(w, keep, weight is not None)) \
                        if reduction == "mean" else -g
                coef = w * scale if weight is not None else xp.broadcast_to(scale, w.shape)
            grad = xp.zeros(x.shape, x.dtype)
            grad[xp.arange(n)[keep], safe[keep]] = coef[keep]
            return self.log_softmax_backward(grad, self.log_softmax(x, 1), 1)
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


# ----- the kernels' steps ----------------------------------------------------------------


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


def _half_cascade_sum(terms, keep):
    """The sum of the float16/bfloat16 ``terms`` that ``keep`` holds, as PyTorch's CPU
    nll_loss adds its losses and weights: in the dtype, each addition rounded, in a cascade
    of 8 partial sums (the first level over runs of 16 targets, each level's sum passed up
    to the next when the target's index has that level's bits clear). NumPy's sums in
    bfloat16 stopped counting at 256: a mean loss 2.5x too large."""
    scalar = terms.dtype.type
    levels, n = 8, len(terms)
    power = max(4, (max(n - 1, 2)).bit_length() // levels)
    partial = [scalar(0)] * levels
    for b in range(n):
        if not keep[b]:
            continue
        partial[0] = partial[0] + terms[b]
        for j in range(levels - 1):
            if b & (((1 << power) - 1) << (j * power)):
                break
            partial[j + 1], partial[j] = partial[j + 1] + partial[j], scalar(0)
    return functools.reduce(operator.add, partial, scalar(0))


def _half_divisor(w, keep, weighted):
    """A float16/bfloat16 nll_loss 'mean''s divisor, as PyTorch's kernel takes it: the
    targets' weights summed by :func:`_half_cascade_sum`, or without weights the count of
    targets kept, rounded to the dtype."""
    return _half_cascade_sum(w, keep) if weighted else w.dtype.type(int(keep.sum()))


def _reduce(xp, losses, reduction, weight_sum):
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.asarray(losses.sum() / weight_sum, dtype=losses.dtype)


# ----- meta shapes -----------------------------------------------------------------------


def _embedding_shape(weight, indices, padding_idx=None, **params):
    return indices.shape + weight.shape[1:], weight.dtype


def _embedding_backward_shape(g, indices, num_weights, padding_idx=None, **params):
    return (num_weights, g.shape[-1]), g.dtype


def _loss_shape(x, target, weight=None, reduction="mean", *rest, **params):
    """``nll_loss`` and ``cross_entropy`` over (N, C): one loss a sample or their reduction."""
    return (x.shape[:1] if reduction == "none" else ()), x.dtype


def _cross_entropy_backward_shape(g, x, *rest, **params):
    return x.shape, x.dtype


def _ctc_loss_shape(log_probs, targets, input_lengths, target_lengths, blank=0, **params):
    """One loss per sample of ``log_probs`` (T, N, C)."""
    return log_probs.shape[1:2], log_probs.dtype


def _ctc_loss_backward_shape(g, log_probs, *rest, **params):
    return log_probs.shape, log_probs.dtype


# ----- decompositions --------------------------------------------------------------------


def rows_looked_up(weight, indices, padding_idx=None, sparse=False):
    if padding_idx is not None:
        # the padding row's values, without a gradient (as the kernel's derivative)
        rows = weight.shape[0]
        pad = _opdef.PUBLIC.arange(rows, device=weight.device) == padding_idx % rows
        weight = _where(pad.unsqueeze(1), weight.detach(), weight)
    return weight[indices]


def embedding_backward(g, indices, num_weights, padding_idx):
    flat = indices.reshape(-1)
    rows = g.reshape(-1, g.shape[-1])
    if padding_idx is not None:
        rows = _where((flat != padding_idx).unsqueeze(1), rows, rows.new_zeros(()))
    out = g.new_zeros((num_weights, g.shape[-1]))
    return op("index_add", out, flat, rows, dim=0)


def _kept_and_weights(x, target, weight, ignore_index):
    """(keep, safe target, per-sample weight) for x (N, C) and target (N,)."""
    keep = target != ignore_index
    safe = target * keep.to(target.dtype)
    w = keep.to(x.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe)
    return keep, safe, w


def nll_loss(logp, target, weight, reduction, ignore_index):
    keep, safe, w = _kept_and_weights(logp, target, weight, ignore_index)
    # an ignored target's loss is 0, not -0
    losses = _where(keep, -logp.gather(1, safe.unsqueeze(1)).squeeze(1) * w, 0.0)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / w.sum()


def cross_entropy(x, target, weight, reduction, ignore_index, label_smoothing):
    logp = op("log_softmax", x, dim=1)
    losses = op("nll_loss", logp, target, weight, reduction="none", ignore_index=ignore_index)
    keep, _, w = _kept_and_weights(x, target, weight, ignore_index)
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
    keep, safe, w = _kept_and_weights(x, target, weight, ignore_index)
    keep_f = keep.to(x.dtype)
    scale = g * keep_f if reduction != "mean" else (g / w.sum()) * keep_f
    ws = w * scale
    eps = label_smoothing
    p = op("softmax", x, dim=1)
    classes = _opdef.PUBLIC.arange(c, device=x.device)
    onehot = (classes.unsqueeze(0) == safe.unsqueeze(1)).to(x.dtype)
    if not eps:
        return p * ws.unsqueeze(1) - onehot * ws.unsqueeze(1)
    wc = x.new_ones((c,)) if weight is None else weight
    out = p * ((1 - eps) * ws + (eps / c) * wc.sum() * scale).unsqueeze(1)
    out = out - (eps / c) * wc * scale.unsqueeze(1)
    return out - onehot * ((1 - eps) * ws).unsqueeze(1)


# CTC: the forward recursion over time, in log space


def _logaddexp(a, b):
    top = a.maximum(b)
    live = top != -math.inf  # both -inf: -inf, not the NaN of -inf - -inf
    a, b, top = (_where(live, t, t.new_zeros(())) for t in (a, b, top))
    return _where(live, top + (-(a - b).abs()).exp().log1p(), top.new_full((), -math.inf))


def _never(like, *shape):
    return like.new_full(shape, -math.inf)


def _ctc_forward(log_probs, targets, input_lengths, target_lengths, blank):
    """The kernel's steps (float64 throughout): (alpha (T, N, L'), the targets with blanks
    around every label (N, L'), which of them are reachable from two back, their
    log-probabilities (T, N, L'))."""
    tc = _opdef.PUBLIC
    t_max, n = log_probs.shape[:2]
    lp = log_probs.to(D.float64)
    dev = log_probs.device
    blanks = tc.full(tuple(targets.shape), blank, dtype=D.int64, device=dev)
    ext = tc.cat([tc.stack([blanks, targets.to(D.int64)], -1).reshape(n, -1),
                  tc.full((n, 1), blank, dtype=D.int64, device=dev)], 1)
    width = ext.shape[1]
    # a label differing from the one two back may be reached from it
    skip = tc.cat([tc.zeros((n, min(2, width)), dtype=D.bool_, device=dev),
                   (ext[:, 2:] != blank).bitwise_and(ext[:, 2:] != ext[:, :-2])], 1)
    lp_ext = lp.gather(2, ext.unsqueeze(0).expand(t_max, n, width))
    never = lp.new_full((), -math.inf)
    first = _where(target_lengths > 0, lp_ext[0, :, 1], never).reshape(n, 1) if \
        width > 1 else _never(lp, n, 0)
    alpha = [tc.cat([lp_ext[0, :, :1], first, _never(lp, n, max(width - 2, 0))], 1)]
    for t in range(1, t_max):
        prev = alpha[-1]
        one = tc.cat([_never(lp, n, 1), prev[:, :width - 1]], 1)
        two = tc.cat([_never(lp, n, min(2, width)), prev[:, :max(width - 2, 0)]], 1)
        step = _logaddexp(_logaddexp(prev, one), _where(skip, two, never))
        alpha.append(step + lp_ext[t])
    valid = (tc.arange(width, device=dev).unsqueeze(0)
             < (2 * target_lengths.to(D.int64) + 1).unsqueeze(1))
    return _where(valid.unsqueeze(0), tc.stack(alpha), never), ext, skip, lp_ext


def ctc_alignments_nll(log_probs, targets, input_lengths, target_lengths, blank):
    alpha, _, _, _ = _ctc_forward(log_probs, targets, input_lengths, target_lengths, blank)
    n, width = alpha.shape[1:]
    # each sequence's last step, at the last label or the blank after it
    last = alpha.permute(1, 0, 2).gather(1, (input_lengths.to(D.int64) - 1).reshape(
        n, 1, 1).expand(n, 1, width)).squeeze(1)
    end = 2 * target_lengths.to(D.int64)
    a = last.gather(1, end.unsqueeze(1)).squeeze(1)
    b = _where(target_lengths > 0,
               last.gather(1, (end - 1).clamp(min=0).unsqueeze(1)).squeeze(1),
               alpha.new_full((), -math.inf))
    return (-_logaddexp(a, b)).to(log_probs.dtype)


def ctc_loss_backward(g, log_probs, targets, input_lengths, target_lengths, nll, blank):
    # minus the share of each sample's alignments through each (t, class), from alpha and
    # beta (the backward recursion), times g
    tc = _opdef.PUBLIC
    alpha, ext, skip, lp_ext = _ctc_forward(log_probs, targets, input_lengths,
                                            target_lengths, blank)
    t_max, n, width = alpha.shape
    never = alpha.new_full((), -math.inf)
    ahead = tc.cat([skip[:, 2:], skip.new_zeros((n, min(2, width)))], 1)
    end = (2 * target_lengths.to(D.int64)).unsqueeze(1)
    pos = tc.arange(width, device=alpha.device).unsqueeze(0)
    start = (pos == end).bitwise_or((pos == end - 1).bitwise_and(
        (target_lengths > 0).unsqueeze(1)))
    beta = [None] * t_max
    nxt = _never(alpha, n, width)
    for t in range(t_max - 1, -1, -1):
        one = tc.cat([nxt[:, 1:], _never(alpha, n, 1)], 1)
        two = tc.cat([nxt[:, min(2, width):], _never(alpha, n, min(2, width))], 1)
        rec = _logaddexp(_logaddexp(nxt, one), _where(ahead, two, never)) + lp_ext[t]
        cur = _where((input_lengths == t + 1).unsqueeze(1), _where(start, lp_ext[t], never),
                     rec)
        beta[t] = nxt = _where((input_lengths > t).unsqueeze(1), cur, never)
    # alpha + beta counts y[t, s] twice
    log_share = tc.stack(beta) + alpha
    live = log_share != -math.inf
    zero = alpha.new_zeros(())
    log_share = _where(live, log_share, zero) - lp_ext + nll.to(D.float64).reshape(1, n, 1)
    share = _where(live, log_share.exp(), zero)
    share = _where(decomposed_isfinite(share), share, share.new_zeros(()))
    grad = alpha.new_zeros(tuple(log_probs.shape))
    grad = grad.scatter_add(2, ext.unsqueeze(0).expand(t_max, n, width), share)
    scale = g.to(D.float64) * decomposed_isfinite(nll).to(D.float64)
    return (-grad * scale.reshape(1, n, 1)).to(log_probs.dtype)


# ----- the declarations ------------------------------------------------------------------


#: in :data:`torcia.ops.NN`'s order. The arguments a kernel takes without a default stay
#: inputs of the op's record, as they were before the declaration (``nll`` and ``blank`` of
#: ctc_loss_backward); the other ops' parameters are keywords without a default of their
#: own (their public functions pass every one). PyTorch runs the losses in float32 under
#: autocast, on the CPU as on CUDA.
_LOSS = {"cpu": "float32", "cuda": "float32"}
def _nll_loss_samples(rng):
    logp = np.log(np.full((3, 4), 0.25, dtype=np.float32))
    return [((logp, np.array([0, 3, 1]), None), {"reduction": "mean", "ignore_index": -100}),
            ((logp, np.array([0, 3, 1]), random_floats(rng, 4) + 2),
             {"reduction": "sum", "ignore_index": 3})]


def _ctc_loss_samples(rng):
    log_probs = np.log(np.full((5, 1, 3), 1 / 3, dtype=np.float32))
    return [((log_probs, np.array([[1, 2]]), np.array([5]), np.array([2])), {"blank": 0})]


DECLARED = (
    define("embedding(Tensor weight, Tensor indices, *, int? padding_idx=None, "
           "bool sparse=False) -> Tensor", Kernels.embedding, shape=_embedding_shape,
           decomposition=rows_looked_up, group="nn"),
    define("embedding_backward(Tensor g, Tensor indices, *, int num_weights=None, "
           "int? padding_idx=None) -> Tensor", Kernels.embedding_backward,
           shape=_embedding_backward_shape, decomposition=embedding_backward, group="nn"),
    define("nll_loss(Tensor logp, Tensor target, Tensor? weight, *, str reduction=None, "
           "int ignore_index=None) -> Tensor", Kernels.nll_loss, shape=_loss_shape,
           decomposition=nll_loss, autocast=_LOSS, group="nn", samples=_nll_loss_samples),
    define("cross_entropy(Tensor x, Tensor target, Tensor? weight, *, str reduction=None, "
           "int ignore_index=None, float label_smoothing=None) -> Tensor",
           Kernels.cross_entropy, shape=_loss_shape, decomposition=cross_entropy,
           autocast=_LOSS, group="nn"),
    define("cross_entropy_backward(Tensor g, Tensor x, Tensor target, Tensor? weight, *, "
           "str reduction=None, int ignore_index=None, float label_smoothing=None) -> Tensor",
           Kernels.cross_entropy_backward, shape=_cross_entropy_backward_shape,
           decomposition=cross_entropy_backward, group="nn"),
    define("ctc_loss(Tensor log_probs, Tensor targets, Tensor input_lengths, "
           "Tensor target_lengths, *, int blank=None) -> Tensor", Kernels.ctc_loss,
           shape=_ctc_loss_shape, decomposition=ctc_alignments_nll, autocast=_LOSS,
           group="nn", samples=_ctc_loss_samples),
    define("ctc_loss_backward(Tensor g, Tensor log_probs, Tensor targets, "
           "Tensor input_lengths, Tensor target_lengths, Tensor nll, int blank) -> Tensor",
           Kernels.ctc_loss_backward, shape=_ctc_loss_backward_shape,
           decomposition=ctc_loss_backward, group="nn"),
)


# ----- public functions (torcia.embedding, torcia.ctc_loss...): checks, then the ops -----


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` (num_embeddings, dim) picked by the integer ``input``; the row
    ``padding_idx`` gets no gradient; with ``max_norm``, looked-up rows whose
    ``norm_type``-norm exceeds it are rescaled in place first; with ``sparse``, the
    gradient of ``weight`` is a sparse COO tensor of the looked-up rows (for
    :class:`torcia.optim.SparseAdam`).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([[0.0, 0.0], [1.0, 2.0]])
    >>> from torcia._ops.nn_loss import embedding
    >>> embedding(torcia.tensor([1, 0, 1]), w)
    tensor([[1., 2.],
            [0., 0.],
            [1., 2.]])
    """
    check_tensor(input, "input", "embedding")
    if input.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got "
                           f"{_torch_tensor_type(input)} instead (while checking arguments "
                           "for embedding)")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    v = weight.shape[0]
    if padding_idx is not None:
        if not -v <= padding_idx < v:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = int(padding_idx) % v
    idx = input._data
    if idx.size:
        _opdef.PUBLIC.backend.check_async(input.device, (idx.min() < 0) | (idx.max() >= v),
                                          lambda: IndexError("index out of range in self"))
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq is not supported")
    if max_norm is not None:
        _renorm_rows(weight, input, float(max_norm), float(norm_type))
    params = {"padding_idx": padding_idx}
    if sparse:
        # the gradient of weight becomes a sparse COO tensor of the rows looked up
        params["sparse"] = True
    return _opdef.CALL("embedding", (weight, input), params)


def _torch_tensor_type(t) -> str:
    return {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor"}.get(
        t.dtype.name, f"torcia.{t.dtype.name}")


def _renorm_rows(weight, input, max_norm, norm_type):
    with no_grad():
        xp = weight.device.backend.xp
        rows = xp.unique(input._data.reshape(-1))
        w = weight._data
        norms = (xp.abs(w[rows]) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
        scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        w[rows] = w[rows] * scale[:, None].astype(w.dtype)
        weight._vc[0] += 1


def _torch_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False,
                     sparse=False):
    """``torch.embedding``: weight first, and -1 for "no padding row".

    Examples
    --------
    >>> import torcia
    >>> weight = torcia.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> torcia.embedding(weight, torcia.tensor([2, 1]))
    tensor([[3., 4.],
            [1., 2.]])
    """
    return embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                     scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def embedding_renorm_(weight, indices, max_norm, norm_type):
    """Rescale, in place, the rows of ``weight`` named in ``indices`` whose ``norm_type``
    norm exceeds ``max_norm`` to norm ``max_norm`` (as ``nn.Embedding(max_norm=...)``);
    not recorded by autograd.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> torcia.embedding_renorm_(w, torcia.tensor([0, 1]), 1.0, 2.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if weight.ndim != 2:
        raise RuntimeError(f"embedding_renorm_(): expected weight to be a 2-D tensor, got "
                           f"{weight.ndim}-D")
    if indices.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"embedding_renorm_(): Expected dtype int32/int64 for indices but "
                           f"got: {indices.dtype}")
    if weight.device.type == "meta":
        return weight  # no values to rescale: the shape is all there is, and it stays
    with no_grad():
        rows = _opdef.PUBLIC.tensor(np.unique(indices.cpu().numpy().reshape(-1)),
                                    device=weight.device)
        picked = weight.index_select(0, rows)
        norms = vector_norm(picked, norm_type, dim=1)
        scale = _where(norms > max_norm, max_norm / (norms + 1e-7),
                       _opdef.PUBLIC.ones_like(norms))
        weight.index_copy_(0, rows, picked * scale.unsqueeze(1))
    return weight


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value) -> str:
    if isinstance(value, str):
        return value
    if value not in _REDUCTIONS:
        raise ValueError(f"{value} is not a valid value for reduction")
    return _REDUCTIONS[value]


def kl_div(input, target, reduction=0, log_target=False):
    """``torch.kl_div``: :func:`torcia.nn.functional.kl_div`.

    Examples
    --------
    >>> import torcia
    >>> p = torcia.tensor([0.5, 0.5])
    >>> torcia.kl_div(p.log(), p)
    tensor([0., 0.])
    """
    return functional().kl_div(input, target, reduction=_reduction(reduction),
                               log_target=log_target)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """``torch.hinge_embedding_loss``.

    Examples
    --------
    >>> import torcia
    >>> torcia.hinge_embedding_loss(torcia.tensor([0.25, 2.0]), torcia.tensor([-1.0, 1.0]))
    tensor([0.7500, 2.0000])
    """
    return functional().hinge_embedding_loss(input, target, margin=margin,
                                             reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.cosine_embedding_loss``.

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.tensor([[1.0, 0.0]]), torcia.tensor([[0.0, 1.0]])
    >>> torcia.cosine_embedding_loss(a, b, torcia.tensor([1.0]))
    tensor([1.])
    """
    return functional().cosine_embedding_loss(input1, input2, target, margin=margin,
                                              reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.margin_ranking_loss``.

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.tensor([1.0, 0.0]), torcia.tensor([0.0, 1.0])
    >>> torcia.margin_ranking_loss(a, b, torcia.tensor([1.0, 1.0]))
    tensor([0., 1.])
    """
    return functional().margin_ranking_loss(input1, input2, target, margin=margin,
                                            reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``torch.poisson_nll_loss`` (every argument required, as ATen's).

    Examples
    --------
    >>> import torcia
    >>> torcia.poisson_nll_loss(torcia.tensor([0.0]), torcia.tensor([1.0]), True, False, 1e-8, 1)
    tensor(1.)
    """
    return functional().poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                                         reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=0):
    """``torch.triplet_margin_loss``.

    Examples
    --------
    >>> import torcia
    >>> a, p, n = torcia.tensor([[0.0]]), torcia.tensor([[1.0]]), torcia.tensor([[1.5]])
    >>> torcia.triplet_margin_loss(a, p, n)
    tensor([0.5000])
    """
    return functional().triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps,
                                            swap=swap, reduction=_reduction(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=0):
    """``torch.binary_cross_entropy_with_logits`` (``pos_weight`` before ``reduction``).

    Examples
    --------
    >>> import torcia
    >>> torcia.binary_cross_entropy_with_logits(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor([0.6931])
    """
    return functional().binary_cross_entropy_with_logits(input, target, weight=weight,
                                                         reduction=_reduction(reduction),
                                                         pos_weight=pos_weight)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    """``torch.ctc_loss``.

    Examples
    --------
    >>> import torcia
    >>> log_probs = torcia.zeros(2, 1, 2).log_softmax(-1)
    >>> targets = torcia.tensor([[1]])
    >>> torcia.ctc_loss(log_probs, targets, torcia.tensor([2]), torcia.tensor([1]))
    tensor([0.2877])
    """
    return functional().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                                 reduction=_reduction(reduction), zero_infinity=zero_infinity)


#: PyTorch's top-level names here whose signatures differ from ``torch.nn.functional``'s
TOP_LEVEL = {"embedding": _torch_embedding}

#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = ("embedding",)

#: the names ``torcia`` exports from here
__all__ = [
    "binary_cross_entropy_with_logits", "cosine_embedding_loss", "ctc_loss",
    "embedding_renorm_", "hinge_embedding_loss", "kl_div", "margin_ranking_loss",
    "poisson_nll_loss", "triplet_margin_loss",
]
