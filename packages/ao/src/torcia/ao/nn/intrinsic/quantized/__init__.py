"""Fused quantized modules (``torch.ao.nn.intrinsic.quantized``): a quantized
convolution or linear layer whose ReLU runs in the integer epilogue."""

from __future__ import annotations

from torcia.ao.nn import intrinsic
from torcia.ao.nn import quantized as nnq
from torcia.ao.nn.intrinsic import qat as nniqat

__all__ = ["ConvReLU2d", "LinearReLU"]


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


class LinearReLU(nnq.Linear):
    """Quantized Linear + ReLU."""

    _FLOAT_MODULE = (intrinsic.LinearReLU, nniqat.LinearReLU)
    _relu = True
