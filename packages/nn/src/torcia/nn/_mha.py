"""Multi-head attention as a function of its weights, as
``torch.nn.functional.multi_head_attention_forward``; :class:`~torcia.nn.MultiheadAttention`
calls it with its parameters."""

from __future__ import annotations

import math

import torcia

__all__ = ["multi_head_attention_forward"]


def _additive(mask, dtype, name):
    """A bool (True = blocked) or float mask as a float mask to add to scores."""
    if mask is None:
        return None
    if mask.dtype is torcia.bool:
        return torcia.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask.to(dtype)


def _project(query, key, value, embed_dim, in_proj_weight, in_proj_bias, separate, wq, wk,
             wv, self_attention):
    from torcia.nn.functional import linear

    e = embed_dim
    b = in_proj_bias
    if not separate and self_attention:
        # one product for the three projections (its gradient: one concatenation)
        return linear(query, in_proj_weight, b).chunk(3, -1)
    bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
    if not separate:
        wq, wk, wv = in_proj_weight[:e], in_proj_weight[e:2 * e], in_proj_weight[2 * e:]
    elif wq is None or wk is None or wv is None:
        raise AssertionError("use_separate_proj_weight is True but q_proj_weight, "
                             "k_proj_weight or v_proj_weight is None")
    return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention of ``query`` (L, N, E) over ``key``/``value`` (S, N, E) (or
    unbatched (L, E), (S, E)) with the given projection weights; returns ``(output,
    weights)``, the weights averaged over heads unless ``average_attn_weights=False``, or
    None without ``need_weights``.

    Masks: ``attn_mask`` (L, S) or (N * num_heads, L, S) and ``key_padding_mask`` (N, S),
    bool (True blocks) or float (added to the scores); ``is_causal`` is a hint that
    ``attn_mask`` is the causal mask, which must be given, as in PyTorch. ``static_k``/``static_v``
    (N * num_heads, S, E / num_heads) replace the projected keys/values.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> mha = torcia.nn.MultiheadAttention(4, 2)
    >>> x = torcia.randn(3, 1, 4)
    >>> out, w = F.multi_head_attention_forward(
    ...     x, x, x, 4, 2, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0,
    ...     mha.out_proj.weight, mha.out_proj.bias)
    >>> bool(torcia.allclose(out, mha(x, x, x)[0])), w.shape
    (True, torcia.Size([1, 3, 3]))
    """
    batched = query.ndim == 3
    # the core works batch first, as MultiheadAttention(batch_first=True) holds its inputs:
    # (L, N, E) views of it cost nothing here
    self_attention = query is key and key is value
    if batched:
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    out, weights = _attention(
        query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
        bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
        key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
        k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal,
        self_attention)
    return (out.transpose(0, 1) if batched else out), weights


def _attention(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
               in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
               out_proj_bias, training, key_padding_mask, need_weights, attn_mask,
               use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, static_k,
               static_v, average_attn_weights, is_causal, self_attention):
    """:func:`multi_head_attention_forward` on batch-first inputs, query (N, L, E) and
    key/value (N, S, E), or unbatched (L, E), (S, E); returns the output (N, L, E) (or
    (L, E)) and the weights. ``self_attention``: query, key and value are one tensor."""
    from torcia.nn.functional import dropout, linear, pad, scaled_dot_product_attention, softmax

    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    batched = query.ndim == 3
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        kind = "batched (3-D)" if batched else "unbatched (2-D)"
        raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or "
                             f"3-D but found {attn_mask.ndim}-D tensor instead")
    # without weights the causal hint stands for the mask, unless a padding mask joins it:
    # PyTorch then neither builds nor checks the mask
    causal = is_causal and key_padding_mask is None and not need_weights
    if causal:
        attn_mask = None
    if not batched:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    n, lq, e = query.shape
    if e != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, "
                             f"but got {e}")
    h = num_heads
    d = e // h
    if d * h != e:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {h}")
    q, k, v = _project(query, key, value, e, in_proj_weight, in_proj_bias,
                       use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight,
                       self_attention)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key/value.")
        k = torcia.cat([k, bias_k.reshape(1, 1, e).expand(n, 1, e)], 1)
        v = torcia.cat([v, bias_v.reshape(1, 1, e).expand(n, 1, e)], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    def heads(t):  # (N, S, E) -> (N, heads, S, head_dim), a view
        return t.reshape(n, t.shape[1], h, d).transpose(1, 2)

    q = heads(q)
    k = heads(k) if static_k is None else static_k.reshape(n, h, -1, d)
    v = heads(v) if static_v is None else static_v.reshape(n, h, -1, d)
    if add_zero_attn:
        zeros = torcia.zeros(n, h, 1, d, dtype=k.dtype, device=k.device)
        k, v = torcia.cat([k, zeros], 2), torcia.cat([v, zeros], 2)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    s = k.shape[2]
    mask = _additive(attn_mask, q.dtype, "attn_mask")
    if mask is not None:
        expected = (lq, s) if mask.ndim == 2 else (n * h, lq, s)
        if tuple(mask.shape) != expected:
            raise RuntimeError(f"The shape of the {mask.ndim}D attn_mask is {mask.shape}, but "
                               f"should be {expected}.")
        if mask.ndim == 3:
            mask = mask.reshape(n, h, lq, s)
    padding = _additive(key_padding_mask, q.dtype, "key_padding_mask")
    if padding is not None:
        if tuple(padding.shape) != (n, s):
            raise AssertionError(f"expecting key_padding_mask shape of {(n, s)}, but got "
                                 f"{tuple(padding.shape)}")
        padding = padding.reshape(n, 1, 1, s)
        mask = padding if mask is None else mask + padding
    if need_weights:
        # the queries scaled, as PyTorch's: (L, head_dim) elements a head, not (L, S)
        scores = (q * (1.0 / math.sqrt(d))) @ k.transpose(-2, -1)  # (N, heads, L, S)
        if mask is not None:
            scores = scores + mask
        weights = softmax(scores, dim=-1)
        if dropout_p and training:
            weights = dropout(weights, dropout_p, training=True)
        out = weights @ v
    else:
        # PyTorch's path without weights: one scaled_dot_product_attention (torcia's flash
        # attention, which never holds the scores)
        weights = None
        out = scaled_dot_product_attention(q, k, v, mask, dropout_p if training else 0.0,
                                           causal)
    out = linear(out.transpose(1, 2).reshape(n, lq, e), out_proj_weight, out_proj_bias)
    if not batched:
        out = out.squeeze(0)
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = weights.mean(1)
    if not batched:
        weights = weights.squeeze(0)
    return out, weights
