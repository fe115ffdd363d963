"""Backward formulas of the losses (declared in ``_ops/nn_loss.py``)."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import derivative
from torcia.library import call


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
