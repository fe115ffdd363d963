"""Fused modules for quantization-aware training (``torch.ao.nn.intrinsic.qat``).

:class:`ConvBn2d` (and its 1-D and 3-D forms) trains with the BatchNorm folded into the
convolution's weight as the quantized model will run it: the weight is scaled by
``gamma / sqrt(running_var + eps)`` and fake-quantized, the convolution's output divided
back by that factor, and the BatchNorm applied (batch statistics in training), so that the
running statistics keep learning while the weight sees int8's rounding. :class:`LinearBn1d`
does the same for a Linear layer.
"""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.ao.nn import intrinsic
from torcia.ao.nn.qat import Conv1d, Conv2d, Conv3d, Linear, _check_float_module
from torcia.nn import functional as F

__all__ = ["ConvBn1d", "ConvBn2d", "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d",
           "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearBn1d", "LinearReLU",
           "freeze_bn_stats", "update_bn_stats"]


def _unfused(mod):
    """The first part of fused float ``mod``, given the fused module's qconfig."""
    first = mod[0]
    first.qconfig = mod.qconfig
    return first


class LinearReLU(Linear):
    """A QAT Linear followed by ReLU."""

    _FLOAT_MODULE = intrinsic.LinearReLU

    def forward(self, input):
        return F.relu(super().forward(input))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(_unfused(mod))


class _ConvReLU:
    """A QAT convolution followed by ReLU."""

    def forward(self, input):
        return F.relu(super().forward(input))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(_unfused(mod))


class ConvReLU1d(_ConvReLU, Conv1d):
    """A QAT Conv1d followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvReLU1d


class ConvReLU2d(_ConvReLU, Conv2d):
    """A QAT Conv2d followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvReLU2d


class ConvReLU3d(_ConvReLU, Conv3d):
    """A QAT Conv3d followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvReLU3d


class _FoldedBn:
    """A QAT layer with a BatchNorm (``bn``) folded into its fake-quantized weight; the
    BatchNorm follows the layer's training mode unless its statistics are frozen."""

    def train(self, mode: bool = True):
        super().train(mode)
        if not self.freeze_bn:
            self.bn.train(mode)
        return self

    def _factor(self):
        bn = self.bn
        return bn.weight / torcia.sqrt(bn.running_var + bn.eps)

    def _per_channel(self, t, axis):
        shape = [1] * self.weight.dim()
        shape[axis] = -1
        return t.reshape(shape)

    def _folded_forward(self, input, layer):
        """``bn(layer(input, folded weight) / factor + bias)``, ``layer`` run without its
        bias on the weight scaled by the BatchNorm's factor and fake-quantized."""
        factor = self._factor()
        weight = self.weight_fake_quant(self.weight * self._per_channel(factor, 0))
        out = layer(input, weight) / self._per_channel(factor, 1)
        if self.bias is not None:
            out = out + self._per_channel(self.bias, 1)
        return self.bn(out)

    def folded(self):
        """``(weight, bias)`` with the BatchNorm's running statistics folded in: what the
        quantized layer runs."""
        bn = self.bn
        factor = self._factor()
        weight = self.weight * self._per_channel(factor, 0)
        bias = self.bias if self.bias is not None else torcia.zeros_like(bn.running_mean)
        return weight.detach(), ((bias - bn.running_mean) * factor + bn.bias).detach()


class _ConvBnNd(_FoldedBn):
    """A QAT convolution with its BatchNorm folded into the fake-quantized weight."""

    _BN: type
    _relu = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=None, padding_mode="zeros", eps=1e-5,
                 momentum=0.1, freeze_bn=False, qconfig=None):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                         padding=padding, dilation=dilation, groups=groups,
                         bias=bool(bias), padding_mode=padding_mode, qconfig=qconfig)
        self.bn = self._BN(out_channels, eps=eps, momentum=momentum)
        self.freeze_bn = freeze_bn if self.training else True

    def forward(self, input):
        self._check_input(input)
        out = self._folded_forward(input, lambda x, w: self._conv_forward(x, w, None))
        return F.relu(out) if self._relu else out

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _check_float_module(cls, mod)
        conv, bn = mod[0], mod[1]
        qat = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                  padding=conv.padding, dilation=conv.dilation, groups=conv.groups,
                  bias=conv.bias is not None, padding_mode=conv.padding_mode, eps=bn.eps,
                  momentum=bn.momentum, qconfig=mod.qconfig)
        qat.weight, qat.bias = conv.weight, conv.bias
        qat.bn = bn
        return qat


class ConvBn1d(_ConvBnNd, Conv1d):
    """Conv1d with BatchNorm1d folded into its fake-quantized weight while training."""

    _FLOAT_MODULE = intrinsic.ConvBn1d
    _BN = nn.BatchNorm1d


class ConvBn2d(_ConvBnNd, Conv2d):
    """Conv2d with BatchNorm2d folded into its fake-quantized weight while training.

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
    _BN = nn.BatchNorm2d


class ConvBn3d(_ConvBnNd, Conv3d):
    """Conv3d with BatchNorm3d folded into its fake-quantized weight while training."""

    _FLOAT_MODULE = intrinsic.ConvBn3d
    _BN = nn.BatchNorm3d


class ConvBnReLU1d(ConvBn1d):
    """:class:`ConvBn1d` followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvBnReLU1d
    _relu = True


class ConvBnReLU2d(ConvBn2d):
    """:class:`ConvBn2d` followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvBnReLU2d
    _relu = True


class ConvBnReLU3d(ConvBn3d):
    """:class:`ConvBn3d` followed by ReLU."""

    _FLOAT_MODULE = intrinsic.ConvBnReLU3d
    _relu = True


class LinearBn1d(_FoldedBn, Linear):
    """A Linear layer with BatchNorm1d folded into its fake-quantized weight while
    training (``torch.ao.nn.intrinsic.qat.LinearBn1d``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.qat import LinearBn1d
    >>> from torcia.ao.quantization import get_default_qat_qconfig
    >>> LinearBn1d(4, 3, qconfig=get_default_qat_qconfig())(torcia.randn(5, 4)).shape
    torcia.Size([5, 3])
    """

    _FLOAT_MODULE = intrinsic.LinearBn1d

    def __init__(self, in_features, out_features, bias=True, eps=1e-5, momentum=0.1,
                 freeze_bn=False, qconfig=None):
        super().__init__(in_features, out_features, bias, qconfig=qconfig)
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)
        self.freeze_bn = freeze_bn if self.training else True

    def forward(self, input):
        return self._folded_forward(input, F.linear)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _check_float_module(cls, mod)
        linear, bn = mod[0], mod[1]
        qat = cls(linear.in_features, linear.out_features, linear.bias is not None,
                  bn.eps, bn.momentum, qconfig=mod.qconfig)
        qat.weight, qat.bias = linear.weight, linear.bias
        qat.bn = bn
        return qat


def freeze_bn_stats(mod):
    """``model.apply(freeze_bn_stats)``: stop updating the BatchNorm statistics of the
    fused QAT modules (the usual last epochs of QAT)."""
    if isinstance(mod, _FoldedBn):
        mod.freeze_bn = True
        mod.bn.eval()


def update_bn_stats(mod):
    """``model.apply(update_bn_stats)``: update the BatchNorm statistics again."""
    if isinstance(mod, _FoldedBn):
        mod.freeze_bn = False
        mod.bn.train(mod.training)
