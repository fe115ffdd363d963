"""Backward formulas of ``linear``, ``embedding`` and attention (declared in ``_ops/nn_conv.py``,
``_ops/nn_loss.py`` and ``_ops/nn_attention.py``)."""

from __future__ import annotations

import math

import torcia
from torcia.autograd.derivatives import _INPUT_WEIGHT_BIAS, _c, _differentiable_formulas, derivative
from torcia.library import call


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
