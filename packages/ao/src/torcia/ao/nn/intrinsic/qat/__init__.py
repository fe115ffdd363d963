"""Fused modules for quantization-aware training (``torch.ao.nn.intrinsic.qat``).

:class:`ConvBn2d` trains with the BatchNorm folded into the convolution's weight as the
quantized model will run it: the weight is scaled by ``gamma / sqrt(running_var + eps)``
and fake-quantized, the convolution's output divided back by that factor, and the
BatchNorm applied (batch statistics in training), so that the running statistics keep
learning while the weight sees int8's rounding.
"""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.ao.nn import intrinsic
from torcia.ao.nn.qat import Conv2d, Linear
from torcia.nn import functional as F

__all__ = ["ConvBn2d", "ConvBnReLU2d", "ConvReLU2d", "LinearReLU", "freeze_bn_stats",
           "update_bn_stats"]


class LinearReLU(Linear):
    """A QAT Linear followed by ReLU."""

    _FLOAT_MODULE = intrinsic.LinearReLU

    def forward(self, input):
        return F.relu(super().forward(input))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        linear = mod[0]
        linear.qconfig = mod.qconfig
        return super().from_float(linear)


class ConvReLU2d(Conv2d):
    """A QAT Conv2d followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvReLU2d

    def forward(self, input):
        return F.relu(super().forward(input))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        conv = mod[0]
        conv.qconfig = mod.qconfig
        return super().from_float(conv)


class ConvBn2d(Conv2d):
    """Conv2d with BatchNorm folded into its fake-quantized weight while training.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.qat import ConvBn2d
    >>> from torcia.ao.quantization import get_default_qat_qconfig
    >>> m = ConvBn2d(1, 4, 3, qconfig=get_default_qat_qconfig())
    >>> m(torcia.randn(2, 1, 6, 6)).shape
    torcia.Size([2, 4, 4, 4])
    """

    _FLOAT_MODULE = intrinsic.ConvBn2d
    _relu = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=None, padding_mode="zeros", eps=1e-5,
                 momentum=0.1, freeze_bn=False, qconfig=None):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                         padding=padding, dilation=dilation, groups=groups,
                         bias=bool(bias), padding_mode=padding_mode, qconfig=qconfig)
        self.bn = nn.BatchNorm2d(out_channels, eps=eps, momentum=momentum)
        self.freeze_bn = freeze_bn if self.training else True

    def _folded_forward(self, input):
        bn = self.bn
        running_std = torcia.sqrt(bn.running_var + bn.eps)
        factor = bn.weight / running_std
        weight = self.weight_fake_quant(self.weight * factor.reshape(-1, 1, 1, 1))
        out = self._conv_forward(input, weight, None) / factor.reshape(1, -1, 1, 1)
        if self.bias is not None:
            out = out + self.bias.reshape(1, -1, 1, 1)
        return self.bn(out)

    def forward(self, input):
        out = self._folded_forward(input)
        return F.relu(out) if self._relu else out

    def train(self, mode: bool = True):
        super().train(mode)
        if not self.freeze_bn:
            self.bn.train(mode)
        return self

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        conv, bn = mod[0], mod[1]
        qat = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                  padding=conv.padding, dilation=conv.dilation, groups=conv.groups,
                  bias=conv.bias is not None, padding_mode=conv.padding_mode, eps=bn.eps,
                  momentum=bn.momentum, qconfig=mod.qconfig)
        qat.weight, qat.bias = conv.weight, conv.bias
        qat.bn = bn
        return qat

    def folded(self):
        """``(weight, bias)`` with the BatchNorm's running statistics folded in: what the
        quantized convolution runs."""
        bn = self.bn
        factor = bn.weight / torcia.sqrt(bn.running_var + bn.eps)
        weight = self.weight * factor.reshape(-1, 1, 1, 1)
        bias = self.bias if self.bias is not None else torcia.zeros_like(bn.running_mean)
        return weight.detach(), ((bias - bn.running_mean) * factor + bn.bias).detach()


class ConvBnReLU2d(ConvBn2d):
    """:class:`ConvBn2d` followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvBnReLU2d
    _relu = True


def freeze_bn_stats(mod):
    """``model.apply(freeze_bn_stats)``: stop updating the BatchNorm statistics of the
    fused QAT modules (the usual last epochs of QAT)."""
    if isinstance(mod, ConvBn2d):
        mod.freeze_bn = True
        mod.bn.eval()


def update_bn_stats(mod):
    """``model.apply(update_bn_stats)``: update the BatchNorm statistics again."""
    if isinstance(mod, ConvBn2d):
        mod.freeze_bn = False
        mod.bn.train(mod.training)
