"""Scaled-dot-product attention in :data:`torcia.ops.NN`, declared once: schema, reference
kernel, meta shape, decomposition. ``flash_attention`` gives (out, lse) in one op, so that a
backend need not hold the (Lq, Lk) scores (flash attention); ``flash_attention_backward``
is its fused first derivative (higher orders go through differentiable ops, so it has no
derivative row). The query heads come in groups sharing a key/value head (grouped-query
attention); float16 and bfloat16 compute in float32 and are rounded once, as PyTorch's CPU
kernel.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy): torcia-cpu has native kernels of both and is tested against these. A decomposition
is written with Tensor methods (this module is below the Tensor class). The public
function (``scaled_dot_product_attention``) is torcia-nn's, the derivative
torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import HALF, in_float32, low_precision, widened
from torcia._ops._common import where as _where
from torcia._ops.movement import repeated_by_index

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels of attention (see the module's doc)."""

    def flash_attention(self, q, k, v, mask, is_causal=False, scale=1.0):
        """flash_attention(q (*, Hq, Lq, E), k (*, Hk, Lk, E), v (*, Hk, Lk, Ev), mask or
        None) -> (out (*, Hq, Lq, Ev), lse (*, Hq, Lq)): ``softmax(q k^T scale + mask) v``
        and the log of each softmax's denominator (with the scores' maximum), the query
        heads in Hk groups of Hq / Hk sharing a key/value head. A bool ``mask`` (broadcast
        to (*, Hq, Lq, Lk)) marks the keys a query may attend to, a float one is added;
        ``is_causal`` lets query i attend to keys j <= i (no mask then). A query that may
        attend to no key gets a zero output and an lse of -inf (PyTorch's safe softmax).
        This kernel holds the (Lq, Lk) scores; a native one need not."""
        if low_precision(q):
            # float16 and bfloat16 in float32, rounded once, as PyTorch's CPU kernel
            out = self.flash_attention(*in_float32(q, k, v, mask), is_causal, scale)
            return tuple(t.astype(q.dtype) for t in out)
        xp = self.xp
        s = _scores(xp, q, k, mask, is_causal, scale)
        top = s.max(axis=-1, keepdims=True)
        top = xp.where(xp.isneginf(top), xp.zeros((), dtype=s.dtype), top)
        p = xp.exp(s - top)
        total = p.sum(axis=-1, keepdims=True)
        rep = q.shape[-3] // k.shape[-3]
        if rep > 1:
            v = xp.repeat(v, rep, axis=-3)
        out = (p / xp.where(total == 0, xp.ones((), dtype=s.dtype), total)) @ v
        with np.errstate(divide="ignore"):
            lse = (xp.log(total) + top)[..., 0]
        return out.astype(q.dtype, copy=False), lse.astype(q.dtype, copy=False)

    def flash_attention_backward(self, g, q, k, v, out, lse, mask, is_causal=False,
                                 scale=1.0):
        """flash_attention_backward(g, q, k, v, out, lse, mask) -> (grad_q, grad_k,
        grad_v) of ``flash_attention``'s output (first order): with P the softmax
        recomputed from the scores and ``lse``, dV = P^T g, dS = P (g V^T - rowsum(g out)),
        dQ = dS K scale, dK = dS^T Q scale; a group's query heads add into its key/value
        head."""
        if low_precision(q):
            grads = self.flash_attention_backward(*in_float32(g, q, k, v, out, lse, mask),
                                                  is_causal, scale)
            return tuple(t.astype(q.dtype) for t in grads)
        xp = self.xp
        rep = q.shape[-3] // k.shape[-3]
        s = _scores(xp, q, k, mask, is_causal, scale)
        live = ~xp.isneginf(lse)[..., None]
        safe = xp.where(live, lse[..., None], xp.zeros((), dtype=lse.dtype))
        p = xp.where(live, xp.exp(s - safe), xp.zeros((), dtype=s.dtype))
        kk, vv = (xp.repeat(t, rep, axis=-3) if rep > 1 else t for t in (k, v))
        dv = xp.swapaxes(p, -1, -2) @ g
        ds = p * (g @ xp.swapaxes(vv, -1, -2) - (g * out).sum(axis=-1, keepdims=True))
        ds *= xp.asarray(scale, dtype=ds.dtype)
        dq = ds @ kk
        dk = xp.swapaxes(ds, -1, -2) @ q
        if rep > 1:
            shape = k.shape[:-3] + (k.shape[-3], rep) + k.shape[-2:]
            dk = dk.reshape(shape[:-1] + dk.shape[-1:]).sum(axis=-3)
            dv = dv.reshape(shape[:-1] + dv.shape[-1:]).sum(axis=-3)
        return tuple(t.astype(q.dtype, copy=False) for t in (dq, dk, dv))


def _scores(xp, q, k, mask, is_causal, scale):
    """The masked scores of ``flash_attention``: ``q k^T scale`` (k's heads repeated for
    grouped queries) plus a float mask, -inf where a bool mask or causality forbids."""
    rep = q.shape[-3] // k.shape[-3]
    if rep > 1:
        k = xp.repeat(k, rep, axis=-3)
    s = (q @ xp.swapaxes(k, -1, -2)) * xp.asarray(scale, dtype=q.dtype)
    lq, lk = s.shape[-2:]
    if is_causal:
        s = xp.where(xp.tri(lq, lk, dtype=bool), s, xp.asarray(-xp.inf, dtype=s.dtype))
    elif mask is not None and mask.dtype == bool:
        s = xp.where(mask, s, xp.asarray(-xp.inf, dtype=s.dtype))
    elif mask is not None:
        s = s + mask.astype(s.dtype, copy=False)
    return s


# ----- decompositions --------------------------------------------------------------------


def _attention_scores(q, k, mask, is_causal, scale):
    """q k^T scale (k's heads repeated for grouped queries), -inf where a bool mask or
    causality forbids, plus a float mask."""
    rep = q.shape[-3] // k.shape[-3]
    if rep > 1:
        k = repeated_by_index(k, rep, k.ndim - 3)
    s = q.matmul(k.transpose(-1, -2)) * q.new_full((), scale)
    lq, lk = s.shape[-2:]
    if is_causal:
        arange = _opdef.PUBLIC.arange
        mask = (arange(lk, device=q.device).unsqueeze(0)
                <= arange(lq, device=q.device).unsqueeze(1))
    if mask is not None and mask.dtype == D.bool_:
        return _where(mask, s, s.new_full((), -math.inf))
    return s if mask is None else s + mask.to(s.dtype)


def flash_attention(q, k, v, mask, is_causal=False, scale=1.0):
    if q.dtype in HALF:
        out = flash_attention(*map(widened, (q, k, v, mask)), is_causal, scale)
        return tuple(t.to(q.dtype) for t in out)
    s = _attention_scores(q, k, mask, is_causal, scale)
    # the shift changes neither result: no gradient goes through it
    top = s.amax(-1, keepdim=True).detach()
    top = _where(top == -math.inf, top.new_zeros(()), top)
    p = (s - top).exp()
    total = p.sum(-1, keepdim=True)
    rep = q.shape[-3] // k.shape[-3]
    if rep > 1:
        v = repeated_by_index(v, rep, v.ndim - 3)
    # a query that may attend to no key: a zero output, an lse of -inf
    out = (p / _where(total == 0, total.new_ones(()), total)).matmul(v)
    # lse is saved for backward, not differentiated (as the kernel's derivative has it)
    return out, (total.log() + top).squeeze(-1).detach()


def flash_attention_backward(g, q, k, v, out, lse, mask, is_causal=False, scale=1.0):
    if q.dtype in HALF:
        grads = flash_attention_backward(*map(widened, (g, q, k, v, out, lse, mask)),
                                         is_causal, scale)
        return tuple(t.to(q.dtype) for t in grads)
    rep = q.shape[-3] // k.shape[-3]
    s = _attention_scores(q, k, mask, is_causal, scale)
    live = (lse != -math.inf).unsqueeze(-1)
    safe = _where(live, lse.unsqueeze(-1), lse.new_zeros(()))
    p = _where(live, (s - safe).exp(), s.new_zeros(()))
    kk, vv = (repeated_by_index(t, rep, t.ndim - 3) if rep > 1 else t for t in (k, v))
    dv = p.transpose(-1, -2).matmul(g)
    ds = p * (g.matmul(vv.transpose(-1, -2)) - (g * out).sum(-1, keepdim=True))
    ds = ds * ds.new_full((), scale)
    dq = ds.matmul(kk)
    dk = ds.transpose(-1, -2).matmul(q)
    if rep > 1:  # a group's query heads add into its key/value head
        shape = tuple(k.shape[:-2]) + (rep, k.shape[-2])
        dk = dk.reshape(shape + tuple(dk.shape[-1:])).sum(-3)
        dv = dv.reshape(shape + tuple(dv.shape[-1:])).sum(-3)
    return dq, dk, dv


# ----- shapes ----------------------------------------------------------------------------


def _flash_attention_shape(q, k, v, mask, **params):
    """``(out, lse)``: ``out`` (*, Hq, Lq, Ev), ``lse`` (*, Hq, Lq)."""
    return (q.shape[:-1] + v.shape[-1:], q.dtype), (q.shape[:-1], q.dtype)


def _flash_attention_backward_shape(g, q, k, v, out, lse, mask, **params):
    return (q.shape, q.dtype), (k.shape, k.dtype), (v.shape, v.dtype)


# ----- the declarations ------------------------------------------------------------------

_OPTIONS = "bool is_causal=False, float scale=1.0"

#: in :data:`torcia.ops.NN`'s order
DECLARED = (
    define(f"flash_attention(Tensor q, Tensor k, Tensor v, Tensor? mask, *, {_OPTIONS}) "
           "-> (Tensor, Tensor)", Kernels.flash_attention, shape=_flash_attention_shape,
           decomposition=flash_attention, group="nn"),
    define("flash_attention_backward(Tensor g, Tensor q, Tensor k, Tensor v, Tensor out, "
           f"Tensor lse, Tensor? mask, *, {_OPTIONS}) -> (Tensor, Tensor, Tensor)",
           Kernels.flash_attention_backward, shape=_flash_attention_backward_shape,
           decomposition=flash_attention_backward, group="nn"),
)
