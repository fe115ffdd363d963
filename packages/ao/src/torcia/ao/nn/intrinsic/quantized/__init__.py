"""Fused quantized modules (``torch.ao.nn.intrinsic.quantized``): a quantized
convolution, linear layer or BatchNorm whose ReLU runs before the output is rounded (the
output clamped at its zero point, which is what quantizing ``relu(y)`` gives)."""

from __future__ import annotations

from torcia.ao.nn import intrinsic
from torcia.ao.nn import quantized as nnq
from torcia.ao.nn.intrinsic import qat as nniqat
from torcia.nn import functional as F

__all__ = ["BNReLU2d", "BNReLU3d", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU"]


class ConvReLU1d(nnq.Conv1d):
    """Quantized Conv1d + ReLU."""

    _FLOAT_MODULE = (intrinsic.ConvReLU1d, nniqat.ConvReLU1d, nniqat.ConvBnReLU1d)
    _relu = True


class ConvReLU2d(nnq.Conv2d):
    """Quantized Conv2d + ReLU: the output clamped at its zero point before rounding.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.quantized import ConvReLU2d
    >>> m = ConvReLU2d(1, 2, 3)
    >>> x = torcia.quantize_per_tensor(torcia.randn(1, 1, 5, 5), 0.05, 128, torcia.quint8)
    >>> bool((m(x).int_repr() >= m.zero_point).all())
    True
    """

    _FLOAT_MODULE = (intrinsic.ConvReLU2d, nniqat.ConvReLU2d, nniqat.ConvBnReLU2d)
    _relu = True


class ConvReLU3d(nnq.Conv3d):
    """Quantized Conv3d + ReLU."""

    _FLOAT_MODULE = (intrinsic.ConvReLU3d, nniqat.ConvReLU3d, nniqat.ConvBnReLU3d)
    _relu = True


class LinearReLU(nnq.Linear):
    """Quantized Linear + ReLU."""

    _FLOAT_MODULE = (intrinsic.LinearReLU, nniqat.LinearReLU)
    _relu = True


class BNReLU2d(nnq.BatchNorm2d):
    """Quantized BatchNorm2d + ReLU in eval mode.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.quantized import BNReLU2d
    >>> m = BNReLU2d(2, scale=0.05, zero_point=100)
    >>> x = torcia.quantize_per_tensor(torcia.randn(1, 2, 3, 3), 0.05, 128, torcia.quint8)
    >>> bool((m(x).int_repr() >= 100).all())
    True
    """

    def _float(self, x):
        return F.relu(self.bn(x))


class BNReLU3d(nnq.BatchNorm3d):
    """Quantized BatchNorm3d + ReLU in eval mode."""

    def _float(self, x):
        return F.relu(self.bn(x))
