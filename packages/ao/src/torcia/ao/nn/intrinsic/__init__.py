"""Fused float modules (``torch.ao.nn.intrinsic``): what
:func:`~torcia.ao.quantization.fuse_modules` makes of a convolution or linear layer
followed by BatchNorm and/or ReLU, so that quantization treats the sequence as one op (one
requantization, the ReLU in the integer epilogue, BatchNorm folded into the weights)."""

from __future__ import annotations

from torcia import nn

__all__ = ["BNReLU2d", "ConvBn2d", "ConvBnReLU2d", "ConvReLU2d", "LinearReLU"]


class _FusedModule(nn.Sequential):
    """A fused sequence: runs its parts in order."""


class ConvReLU2d(_FusedModule):
    """Conv2d then ReLU.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic import ConvReLU2d
    >>> m = ConvReLU2d(torcia.nn.Conv2d(1, 2, 3), torcia.nn.ReLU())
    >>> bool((m(torcia.randn(1, 1, 5, 5)) >= 0).all())
    True
    """

    def __init__(self, conv, relu):
        super().__init__(conv, relu)


class ConvBn2d(_FusedModule):
    """Conv2d then BatchNorm2d (for quantization-aware training)."""

    def __init__(self, conv, bn):
        super().__init__(conv, bn)


class ConvBnReLU2d(_FusedModule):
    """Conv2d, BatchNorm2d, ReLU (for quantization-aware training)."""

    def __init__(self, conv, bn, relu):
        super().__init__(conv, bn, relu)


class LinearReLU(_FusedModule):
    """Linear then ReLU.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic import LinearReLU
    >>> LinearReLU(torcia.nn.Linear(2, 2), torcia.nn.ReLU())(torcia.ones(1, 2)).shape
    torcia.Size([1, 2])
    """

    def __init__(self, linear, relu):
        super().__init__(linear, relu)


class BNReLU2d(_FusedModule):
    """BatchNorm2d then ReLU."""

    def __init__(self, batch_norm, relu):
        super().__init__(batch_norm, relu)
