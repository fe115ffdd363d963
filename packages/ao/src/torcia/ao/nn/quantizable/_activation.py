"""The quantizable MultiheadAttention (``torch.ao.nn.quantizable.MultiheadAttention``):
the projections as separate Linear layers and the points where values enter and leave
the quantized domain as stubs, so that ``prepare`` and ``convert`` can reach them."""

from __future__ import annotations

import warnings

import torcia
from torcia import nn
from torcia.ao._qtensor import QTensor, cat, quantize_per_tensor
from torcia.ao.nn.quantized._modules import FloatFunctional


def _zero_column(t):
    # one more key (or value) of zeros along dimension 1, quantized as ``t`` where it is
    zeros = torcia.zeros((t.size(0), 1) + tuple(t.size())[2:])
    if isinstance(t, QTensor):
        zeros = quantize_per_tensor(zeros, t.q_scale(), t.q_zero_point(), t.dtype)
    return cat([t, zeros], 1)


def _check_mask(attn_mask, bsz, num_heads, tgt_len, src_len):
    if attn_mask.dtype == torcia.uint8:
        warnings.warn("Byte tensor for `attn_mask` in `nn.MultiheadAttention` is deprecated. "
                      "Use bool tensor instead.", stacklevel=4)
        attn_mask = attn_mask.to(torcia.bool)
    if not attn_mask.is_floating_point() and attn_mask.dtype != torcia.bool:
        raise AssertionError("Only float and bool types are supported for attn_mask, not "
                             f"{attn_mask.dtype}")
    if attn_mask.dim() == 2:
        attn_mask = attn_mask.unsqueeze(0)
        if list(attn_mask.size()) != [1, tgt_len, src_len]:
            raise RuntimeError("The size of the 2D attn_mask is not correct.")
    elif attn_mask.dim() == 3:
        if list(attn_mask.size()) != [bsz * num_heads, tgt_len, src_len]:
            raise RuntimeError("The size of the 3D attn_mask is not correct.")
    else:
        raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    return attn_mask


class MultiheadAttention(nn.MultiheadAttention):
    """A quantizable multi-head attention (``torch.ao.nn.quantizable.MultiheadAttention``):
    ``nn.MultiheadAttention`` with its query, key, value and output projections as the
    Linear layers ``linear_Q``, ``linear_K``, ``linear_V``, ``out_proj``, the query's
    scaling as a FloatFunctional, and the attention itself (float: matrix products and
    softmax) between DeQuantStubs and QuantStubs. Eager static quantization makes an
    ``nn.MultiheadAttention`` one of these in ``prepare`` and a
    :class:`torcia.ao.nn.quantized.MultiheadAttention` in ``convert``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantizable import MultiheadAttention
    >>> mha = MultiheadAttention(8, 2)
    >>> x = torcia.randn(5, 3, 8)
    >>> out, weights = mha(x, x, x)
    >>> tuple(out.shape), tuple(weights.shape)
    ((5, 3, 8), (3, 5, 5))
    """

    _FLOAT_MODULE = nn.MultiheadAttention

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim=None, vdim=None, batch_first: bool = False, device=None, dtype=None):
        super().__init__(embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn,
                         kdim, vdim, batch_first, device=device, dtype=dtype)
        kw = {"bias": bias, "device": device, "dtype": dtype}
        self.linear_Q = nn.Linear(self.embed_dim, self.embed_dim, **kw)
        self.linear_K = nn.Linear(self.kdim, self.embed_dim, **kw)
        self.linear_V = nn.Linear(self.vdim, self.embed_dim, **kw)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, **kw)
        self.q_scaling_product = FloatFunctional()
        # torcia.ao.quantization imports the quantized modules, which import this one
        stubs = torcia.ao.quantization
        self.quant_attn_output = stubs.QuantStub()
        self.quant_attn_output_weights = stubs.QuantStub()
        self.dequant_q = stubs.DeQuantStub()
        self.dequant_k = stubs.DeQuantStub()
        self.dequant_v = stubs.DeQuantStub()

    def _get_name(self):
        return "QuantizableMultiheadAttention"

    @classmethod
    def from_float(cls, other):
        """The observed attention of a float ``nn.MultiheadAttention`` with a qconfig: the
        packed input projection split into ``linear_Q``/``K``/``V``, prepared."""
        if type(other) is not cls._FLOAT_MODULE:
            raise AssertionError(f"Expected type {cls._FLOAT_MODULE}, got {type(other)}")
        if not hasattr(other, "qconfig"):
            raise AssertionError("The float module must have 'qconfig'")
        observed = cls(other.embed_dim, other.num_heads, other.dropout,
                       other.in_proj_bias is not None, other.bias_k is not None,
                       other.add_zero_attn, other.kdim, other.vdim, other.batch_first)
        observed.bias_k = other.bias_k
        observed.bias_v = other.bias_v
        observed.qconfig = other.qconfig
        observed.out_proj.weight = other.out_proj.weight
        observed.out_proj.bias = other.out_proj.bias
        e = other.embed_dim
        if other._qkv_same_embed_dim:
            weights = [other.in_proj_weight[i * e:(i + 1) * e] for i in range(3)]
        else:
            weights = [other.q_proj_weight, other.k_proj_weight, other.v_proj_weight]
        for i, linear in enumerate((observed.linear_Q, observed.linear_K, observed.linear_V)):
            linear.weight = nn.Parameter(weights[i].detach(), weights[i].requires_grad)
            bias = other.in_proj_bias
            linear.bias = None if bias is None else nn.Parameter(
                bias[i * e:(i + 1) * e].detach(), bias.requires_grad)
        observed.eval()
        return torcia.ao.quantization.prepare(observed, inplace=True)

    def dequantize(self):
        """The float ``nn.MultiheadAttention`` of a quantized one: weights dequantized, the
        projections packed back. (PyTorch 2.13's builds its own ``_FLOAT_MODULE``, for the
        quantized class the quantizable one, whose fresh projections it leaves unset.)"""
        fp = nn.MultiheadAttention(self.embed_dim, self.num_heads, self.dropout,
                                self.linear_Q.bias() is not None, self.bias_k is not None,
                                self.add_zero_attn, self.kdim, self.vdim, self.batch_first)
        if self.bias_k is not None:
            fp.bias_k = nn.Parameter(self.bias_k.dequantize())
            fp.bias_v = nn.Parameter(self.bias_v.dequantize())
        fp.out_proj.weight = nn.Parameter(self.out_proj.weight().dequantize())
        if self.out_proj.bias() is not None:
            fp.out_proj.bias = nn.Parameter(self.out_proj.bias())
        linears = (self.linear_Q, self.linear_K, self.linear_V)
        ws = [m.weight().dequantize() for m in linears]
        with torcia.no_grad():
            if fp._qkv_same_embed_dim:
                fp.in_proj_weight.copy_(torcia.cat(ws, 0))
            else:
                fp.q_proj_weight, fp.k_proj_weight, fp.v_proj_weight = (
                    nn.Parameter(w) for w in ws)
            if fp.in_proj_bias is not None:
                fp.in_proj_bias.copy_(torcia.cat([m.bias() for m in linears], 0))
        return fp

    @classmethod
    def from_observed(cls, other):
        raise NotImplementedError("It looks like you are trying to prepare an MHA module. "
                                  "Please, see the examples on quantizable MHAs.")

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        """Attention as ``nn.MultiheadAttention``'s, on float or quantized inputs (then the
        output and the weights come quantized); a causal mask is not supported. With
        ``batch_first`` and several heads the result is the float module's, where PyTorch
        2.13's quantizable attention mixes the heads up."""
        if attn_mask is not None and is_causal:
            raise AssertionError("Only allow causal mask or attn_mask")
        if is_causal:
            raise AssertionError("causal mask not supported by AO MHA module")
        if self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        tgt_len, bsz, embed_dim = query.size()
        if embed_dim != self.embed_dim:
            raise AssertionError(f"embed_dim mismatch: {self.embed_dim} != {embed_dim}")
        if key.size(0) != value.size(0) or key.size(1) != value.size(1):
            raise AssertionError(f"key and value size mismatch: key.size()={key.size()}, "
                                 f"value.size()={value.size()}")
        heads = self.num_heads
        head_dim = self.embed_dim // heads
        if head_dim * heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        q = self.q_scaling_product.mul_scalar(self.linear_Q(query), float(head_dim) ** -0.5)
        k = self.linear_K(key)
        v = self.linear_V(value)
        if attn_mask is not None:
            attn_mask = _check_mask(attn_mask, bsz, heads, query.size(0), key.size(0))
        if key_padding_mask is not None and key_padding_mask.dtype == torcia.uint8:
            warnings.warn("Byte tensor for `key_padding_mask` in `nn.MultiheadAttention` is "
                          "deprecated. Use bool tensor instead.", stacklevel=3)
            key_padding_mask = key_padding_mask.to(torcia.bool)
        if (self.bias_k is None) != (self.bias_v is None):
            raise AssertionError("bias_k and bias_v must both be set or both be None")
        pad = nn.functional.pad
        if self.bias_k is not None:
            k = cat([k, self.bias_k.repeat(1, bsz, 1)])
            v = cat([v, self.bias_v.repeat(1, bsz, 1)])
            attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask,
                                                                         (0, 1))
        q = q.contiguous().view(tgt_len, bsz * heads, head_dim).transpose(0, 1)
        k = k.contiguous().view(-1, bsz * heads, head_dim).transpose(0, 1)
        v = v.contiguous().view(-1, bsz * heads, head_dim).transpose(0, 1)
        src_len = k.size(1)
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"key_padding_mask must be of size {(bsz, src_len)}, got "
                                 f"{tuple(key_padding_mask.shape)}")
        if self.add_zero_attn:
            src_len += 1
            k, v = _zero_column(k), _zero_column(v)
            attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask,
                                                                         (0, 1))
        q, k, v = self.dequant_q(q), self.dequant_k(k), self.dequant_v(v)
        weights = torcia.bmm(q, k.transpose(1, 2))
        if attn_mask is not None:
            weights = (weights.masked_fill(attn_mask, float("-inf"))
                       if attn_mask.dtype == torcia.bool else weights + attn_mask)
        if key_padding_mask is not None:
            weights = weights.view(bsz, heads, tgt_len, src_len).masked_fill(
                key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
            weights = weights.view(bsz * heads, tgt_len, src_len)
        weights = nn.functional.softmax(weights, dim=-1)
        weights = nn.functional.dropout(weights, p=self.dropout, training=self.training)
        out = torcia.bmm(weights, v).transpose(0, 1).contiguous().view(tgt_len, bsz,
                                                                        self.embed_dim)
        if self.batch_first:
            # torch 2.13 views the heads' outputs as (batch, target, embedding) here, which
            # interleaves the heads wrongly where there are several; the float module's
            # layout is kept instead
            out = out.transpose(0, 1)
        out = self.out_proj(self.quant_attn_output(out))
        weights = self.quant_attn_output_weights(weights)
        if not need_weights:
            return out, None
        weights = weights.view(bsz, heads, tgt_len, src_len)
        return out, weights.mean(dim=1) if average_attn_weights else weights
