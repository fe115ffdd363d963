"""Modules for quantization-aware training (``torch.ao.nn.qat``): the float layers with
their weight fake-quantized on every forward (``weight_fake_quant``, from the QConfig)."""

from __future__ import annotations

from torcia import nn
from torcia.nn import functional as F

__all__ = ["Conv2d", "Linear"]


def conv2d_zeros(conv, input, weight, bias):
    """``conv``'s convolution (zero padding) with another weight and bias."""
    if conv.padding_mode != "zeros":
        raise NotImplementedError(f"quantization supports zero padding only, got "
                                  f"padding_mode={conv.padding_mode!r}")
    return F.conv2d(input, weight, bias, conv.stride, conv.padding, conv.dilation,
                    conv.groups)


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
        if qconfig is None:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
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


class Conv2d(nn.Conv2d):
    """A Conv2d layer training through int8 weights (``torch.ao.nn.qat.Conv2d``)."""

    _FLOAT_MODULE = nn.Conv2d

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", qconfig=None,
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                         padding=padding, dilation=dilation, groups=groups, bias=bias,
                         padding_mode=padding_mode)
        if qconfig is None:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        return conv2d_zeros(self, input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if getattr(mod, "qconfig", None) is None:
            raise AssertionError("Input float module must have qconfig defined")
        qat = cls(mod.in_channels, mod.out_channels, mod.kernel_size, stride=mod.stride,
                  padding=mod.padding, dilation=mod.dilation, groups=mod.groups,
                  bias=mod.bias is not None, padding_mode=mod.padding_mode,
                  qconfig=mod.qconfig)
        qat.weight, qat.bias = mod.weight, mod.bias
        return qat

    def to_float(self):
        conv = nn.Conv2d(self.in_channels, self.out_channels, self.kernel_size,
                         stride=self.stride, padding=self.padding, dilation=self.dilation,
                         groups=self.groups, bias=self.bias is not None,
                         padding_mode=self.padding_mode)
        conv.weight, conv.bias = self.weight, self.bias
        return conv
