"""Multi-head attention and the Transformer layers, with PyTorch's parameters and masks.

Masks follow PyTorch: a bool mask is True where attention is NOT allowed (the opposite of
``scaled_dot_product_attention``'s bool mask); a float mask is added to the scores.
``key_padding_mask`` (N, S) marks padded keys.
"""

from __future__ import annotations

import copy

import torcia
from torcia.nn import functional as F
from torcia.nn import init
from torcia.nn._mha import _attention
from torcia.nn.modules.container import ModuleList
from torcia.nn.modules.dropout import Dropout
from torcia.nn.modules.linear import Linear, NonDynamicallyQuantizableLinear
from torcia.nn.modules.module import Module
from torcia.nn.modules.normalization import LayerNorm
from torcia.nn.parameter import Parameter


class MultiheadAttention(Module):
    """Attention from ``query`` to ``key``/``value`` in ``num_heads`` parallel heads.

    Examples
    --------
    >>> import torcia
    >>> mha = torcia.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = torcia.randn(3, 5, 8)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    (torcia.Size([3, 5, 8]), torcia.Size([3, 5, 5]))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kw = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(torcia.empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(torcia.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(torcia.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(torcia.empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(torcia.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(torcia.empty(1, 1, embed_dim, **kw))
            self.bias_v = Parameter(torcia.empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batch_first = query.ndim == 3 and self.batch_first
        if is_causal and attn_mask is None:
            # the layer builds the causal mask the functional form needs
            lq, s = query.shape[-2 if batch_first else 0], key.shape[-2 if batch_first else 0]
            attn_mask = torcia.ones(lq, s, dtype=torcia.bool, device=query.device).triu(1)
        args = (query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
                self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
                self.out_proj.weight, self.out_proj.bias)
        kwargs = {"training": self.training, "key_padding_mask": key_padding_mask,
                  "need_weights": need_weights, "attn_mask": attn_mask,
                  "use_separate_proj_weight": not self._qkv_same_embed_dim,
                  "q_proj_weight": self.q_proj_weight, "k_proj_weight": self.k_proj_weight,
                  "v_proj_weight": self.v_proj_weight,
                  "average_attn_weights": average_attn_weights, "is_causal": is_causal}
        if not batch_first:
            return F.multi_head_attention_forward(*args, **kwargs)
        # batch-first inputs as they are: the functional form's (L, N, E) layout would cost
        # a copy of each transposed input and output, forward and backward
        return _attention(*args, static_k=None, static_v=None,
                          self_attention=query is key and key is value, **kwargs)


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual and LayerNorm
    (before the block with ``norm_first``, after it otherwise).

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> layer = torcia.nn.TransformerEncoderLayer(
    ...     d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    >>> layer(torcia.randn(2, 5, 8)).shape
    torcia.Size([2, 5, 8])
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory, and a feed-forward block.

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> layer = torcia.nn.TransformerDecoderLayer(
    ...     d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    >>> layer(torcia.randn(2, 5, 8), torcia.randn(2, 7, 8)).shape
    torcia.Size([2, 5, 8])
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x, mask, pad, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=pad, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, mask, pad, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=mask, key_padding_mask=pad,
                                need_weights=False, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x


def _clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer, then an optional final norm.

    Examples
    --------
    >>> import torcia
    >>> layer = torcia.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    >>> torcia.nn.TransformerEncoder(layer, 2)(torcia.randn(2, 7, 16)).shape
    torcia.Size([2, 7, 16])
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """``num_layers`` copies of a decoder layer, then an optional final norm.

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> layer = torcia.nn.TransformerDecoderLayer(
    ...     d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    >>> decoder = torcia.nn.TransformerDecoder(layer, num_layers=2)
    >>> decoder(torcia.randn(2, 5, 8), torcia.randn(2, 7, 8)).shape
    torcia.Size([2, 5, 8])
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """An encoder-decoder Transformer, as in "Attention Is All You Need".

    Examples
    --------
    >>> import torcia
    >>> model = torcia.nn.Transformer(16, 4, 1, 1, 32, batch_first=True)
    >>> src, tgt = torcia.randn(2, 5, 16), torcia.randn(2, 3, 16)
    >>> mask = torcia.nn.Transformer.generate_square_subsequent_mask(3)
    >>> model(src, tgt, tgt_mask=mask).shape
    torcia.Size([2, 3, 16])
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        common = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                      layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                      norm_first=norm_first, bias=bias, **kw)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **common), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **common), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A float mask with ``-inf`` above the diagonal: position i sees 0..i only."""
        return torcia.full((sz, sz), float("-inf"), dtype=dtype or torcia.float32,
                           device=device).triu(1)
