"""Modules for quantization-aware training (``torch.ao.nn.qat``): the float layers with
their weight fake-quantized on every forward (``weight_fake_quant``, from the QConfig)."""

from __future__ import annotations

from torcia import nn
from torcia.ao._qtensor import per_channel_affine_float_qparams
from torcia.nn import functional as F

__all__ = ["Conv1d", "Conv2d", "Conv3d", "Embedding", "EmbeddingBag", "Linear"]


def _require_qconfig(qconfig):
    if qconfig is None:
        raise AssertionError("qconfig must be provided for QAT module")
    return qconfig


def _check_float_module(cls, mod):
    if type(mod) is not cls._FLOAT_MODULE:
        raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                             f"{cls._FLOAT_MODULE.__name__}")
    if getattr(mod, "qconfig", None) is None:
        raise AssertionError("Input float module must have qconfig defined")


class Linear(nn.Linear):
    """A Linear layer training through int8 weights (``torch.ao.nn.qat.Linear``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.qat import Linear
    >>> from torcia.ao.quantization import get_default_qat_qconfig
    >>> m = Linear(4, 2, qconfig=get_default_qat_qconfig())
    >>> m(torcia.randn(3, 4)).shape
    torcia.Size([3, 2])
    """

    _FLOAT_MODULE = nn.Linear

    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None,
                 dtype=None):
        super().__init__(in_features, out_features, bias)
        self.qconfig = _require_qconfig(qconfig)
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT version of float ``mod`` (its ``qconfig`` set), sharing its weights."""
        if getattr(mod, "qconfig", None) is None:
            raise AssertionError("Input float module must have qconfig defined")
        qat = cls(mod.in_features, mod.out_features, mod.bias is not None,
                  qconfig=mod.qconfig)
        qat.weight, qat.bias = mod.weight, mod.bias
        return qat

    def to_float(self):
        lin = nn.Linear(self.in_features, self.out_features, self.bias is not None)
        lin.weight, lin.bias = self.weight, self.bias
        return lin


class _ConvNd:
    """What the QAT convolutions share: the float convolution's padding and geometry
    (``_conv_forward``) run with the fake-quantized weight."""

    _FLOAT_MODULE: type

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", qconfig=None,
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                         padding=padding, dilation=dilation, groups=groups, bias=bias,
                         padding_mode=padding_mode)
        self.qconfig = _require_qconfig(qconfig)
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        self._check_input(input)
        return self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)

    @staticmethod
    def _geometry(conv) -> dict:
        return {"stride": conv.stride, "padding": conv.padding, "dilation": conv.dilation,
                "groups": conv.groups, "bias": conv.bias is not None,
                "padding_mode": conv.padding_mode}

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT version of float ``mod`` (its ``qconfig`` set), sharing its weights."""
        if getattr(mod, "qconfig", None) is None:
            raise AssertionError("Input float module must have qconfig defined")
        qat = cls(mod.in_channels, mod.out_channels, mod.kernel_size, qconfig=mod.qconfig,
                  **cls._geometry(mod))
        qat.weight, qat.bias = mod.weight, mod.bias
        return qat

    def to_float(self):
        conv = self._FLOAT_MODULE(self.in_channels, self.out_channels, self.kernel_size,
                                  **self._geometry(self))
        conv.weight, conv.bias = self.weight, self.bias
        return conv


class Conv1d(_ConvNd, nn.Conv1d):
    """A Conv1d layer training through int8 weights (``torch.ao.nn.qat.Conv1d``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.qat import Conv1d
    >>> from torcia.ao.quantization import get_default_qat_qconfig
    >>> Conv1d(2, 4, 3, padding=1, qconfig=get_default_qat_qconfig())(
    ...     torcia.randn(1, 2, 8)).shape
    torcia.Size([1, 4, 8])
    """

    _FLOAT_MODULE = nn.Conv1d


class Conv2d(_ConvNd, nn.Conv2d):
    """A Conv2d layer training through int8 weights (``torch.ao.nn.qat.Conv2d``)."""

    _FLOAT_MODULE = nn.Conv2d


class Conv3d(_ConvNd, nn.Conv3d):
    """A Conv3d layer training through int8 weights (``torch.ao.nn.qat.Conv3d``)."""

    _FLOAT_MODULE = nn.Conv3d


def _embedding_weight_fake_quant(qconfig):
    fake_quant = qconfig.weight()
    if fake_quant.qscheme is not per_channel_affine_float_qparams:
        raise AssertionError(f"Embedding weights requires a qscheme of "
                             f"torch.per_channel_affine_float_qparams Got {fake_quant.qscheme}")
    return fake_quant


class Embedding(nn.Embedding):
    """An Embedding training through its rows' 8-bit float-qparams quantization
    (``torch.ao.nn.qat.Embedding``); convert makes it a quantized Embedding.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.qat import Embedding
    >>> from torcia.ao.quantization import QConfig, NoopObserver
    >>> from torcia.ao.quantization.fake_quantize import default_embedding_fake_quant
    >>> qconfig = QConfig(activation=NoopObserver.with_args(dtype=torcia.float32),
    ...                   weight=default_embedding_fake_quant)
    >>> Embedding(10, 4, qconfig=qconfig)(torcia.tensor([1, 3])).shape
    torcia.Size([2, 4])
    """

    _FLOAT_MODULE = nn.Embedding

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 device=None, dtype=None, qconfig=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight)
        self.qconfig = _require_qconfig(qconfig)
        self.weight_fake_quant = _embedding_weight_fake_quant(qconfig)

    def forward(self, input):
        return F.embedding(input, self.weight_fake_quant(self.weight), self.padding_idx,
                           self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _check_float_module(cls, mod)
        return cls(mod.num_embeddings, mod.embedding_dim, mod.padding_idx, mod.max_norm,
                   mod.norm_type, mod.scale_grad_by_freq, mod.sparse, mod.weight,
                   qconfig=mod.qconfig)

    def to_float(self):
        return nn.Embedding(self.num_embeddings, self.embedding_dim, self.padding_idx,
                            self.max_norm, self.norm_type, self.scale_grad_by_freq,
                            self.sparse, self.weight.detach())


class EmbeddingBag(nn.EmbeddingBag):
    """An EmbeddingBag training through its rows' 8-bit float-qparams quantization
    (``torch.ao.nn.qat.EmbeddingBag``)."""

    _FLOAT_MODULE = nn.EmbeddingBag

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, qconfig=None, device=None,
                 dtype=None):
        super().__init__(num_embeddings, embedding_dim, max_norm, norm_type,
                         scale_grad_by_freq, mode, sparse, _weight, include_last_offset,
                         padding_idx)
        self.qconfig = _require_qconfig(qconfig)
        self.weight_fake_quant = _embedding_weight_fake_quant(qconfig)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight_fake_quant(self.weight), offsets,
                               self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights,
                               self.include_last_offset, self.padding_idx)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _check_float_module(cls, mod)
        return cls(mod.num_embeddings, mod.embedding_dim, mod.max_norm, mod.norm_type,
                   mod.scale_grad_by_freq, mod.mode, mod.sparse, mod.weight,
                   mod.include_last_offset, mod.padding_idx, qconfig=mod.qconfig)

    def to_float(self):
        return nn.EmbeddingBag(self.num_embeddings, self.embedding_dim, self.max_norm,
                               self.norm_type, self.scale_grad_by_freq, self.mode,
                               self.sparse, self.weight.detach(), self.include_last_offset,
                               self.padding_idx)
