"""``scaled_dot_product_attention``."""

from __future__ import annotations

import math

import numpy as np

import torcia
from torcia.library import autocast_as, call
from torcia.library.functional import dropout, softmax
from torcia.nn.attention import SDPBackend as _SDPBackend
from torcia.nn.attention import _enabled as _sdpa_enabled
from torcia.nn.attention import check_viable


def _fusable_attention(q, k, v, mask, is_causal, enable_gqa) -> bool:
    """Whether ``flash_attention`` computes this attention: floating tensors (half
    precision computed in float32, rounded once, as PyTorch's CPU kernel) of one dtype and
    device with (*, H, L, E) shapes of the same leading dims, keys and
    values of one length, the query heads a multiple of the key heads (equal without
    ``enable_gqa``), and a mask (not with ``is_causal``) that broadcasts to the scores'
    shape. Whatever else goes the composite way, errors included."""
    if not all(isinstance(t, torcia.Tensor) for t in (q, k, v)) or q.dtype not in (
            torcia.float16, torcia.bfloat16, torcia.float32, torcia.float64) or not (
            q.dtype is k.dtype and k.dtype is v.dtype):
        return False
    if q.device != k.device or q.device != v.device or min(q.ndim, k.ndim, v.ndim) < 3 \
            or not q.ndim == k.ndim == v.ndim or q.shape[:-3] != k.shape[:-3] \
            or k.shape[:-3] != v.shape[:-3]:
        return False
    hq, lq, e = q.shape[-3:]
    hk, lk, ek = k.shape[-3:]
    if e != ek or v.shape[-3:-1] != (hk, lk) or 0 in (lq, lk, hk) or hq % hk \
            or (hq != hk and not enable_gqa):
        return False
    if mask is None:
        return True
    if is_causal or not isinstance(mask, torcia.Tensor) or mask.device != q.device or (
            mask.dtype is not torcia.bool and mask.dtype is not q.dtype):
        return False
    scores = q.shape[:-1] + (lk,)
    try:
        return mask.ndim <= q.ndim and np.broadcast_shapes(mask.shape, scores) == scores
    except ValueError:
        return False


@autocast_as("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key.T * scale + mask) @ value`` over the last two dims; a bool
    ``attn_mask`` marks the positions that may attend, a float one is added;
    ``is_causal`` masks the future; ``scale`` defaults to ``1 / sqrt(E)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> q = k = v = torcia.eye(2).unsqueeze(0)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, 0]
    tensor([1., 0.])
    """
    check_viable(query.device.type)
    if query.is_nested:
        return torcia.nested.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    e = query.shape[-1]
    lq, lk = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(e) if scale is None else scale
    if dropout_p == 0 and _sdpa_enabled(_SDPBackend.FLASH_ATTENTION) and _fusable_attention(
            query, key, value, attn_mask, is_causal, enable_gqa):
        # one op (flash_attention), whose native kernels need not hold the scores; with
        # sdpa_kernel(SDPBackend.MATH) the composite below, PyTorch's math path
        return call("flash_attention", (query, key, value, attn_mask),
                    {"is_causal": bool(is_causal), "scale": float(scale)})[0]
    if enable_gqa and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(rep, dim=-3)
        value = value.repeat_interleave(rep, dim=-3)
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not "
                               "be set when is_causal=True")
        allowed = torcia.ones(lq, lk, dtype=torcia.bool, device=query.device).tril()
        scores = scores.masked_fill(allowed.logical_not(), float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype is torcia.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if is_causal or attn_mask is not None:
        # a query that may attend to no key: PyTorch's safe softmax gives it zero weights
        # (and a zero output) where softmax over -inf alone would give NaN
        weights = torcia.where(scores.isneginf().all(-1, keepdim=True), 0.0, weights)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value
