"""Fused float modules (``torch.ao.nn.intrinsic``): what
:func:`~torcia.ao.quantization.fuse_modules` makes of a convolution or linear layer
followed by BatchNorm and/or an activation, so that quantization treats the sequence as
one op (one requantization, the ReLU in the integer epilogue, BatchNorm folded into the
weights). Each checks the types of its parts, as PyTorch's do."""

from __future__ import annotations

from torcia import nn

__all__ = ["BNReLU2d", "BNReLU3d", "ConvAdd2d", "ConvAddReLU2d", "ConvBn1d", "ConvBn2d",
           "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d", "ConvReLU1d",
           "ConvReLU2d", "ConvReLU3d", "LinearBn1d", "LinearLeakyReLU", "LinearReLU",
           "LinearTanh"]


class _FusedModule(nn.Sequential):
    """A fused sequence: runs its parts in order; ``_PARTS`` names their types."""

    _PARTS: tuple = ()

    def __init__(self, *modules):
        if tuple(type(m) for m in modules) != self._PARTS:
            raise AssertionError(f"Incorrect types for input modules"
                                 f"{''.join(str(type(m)) for m in modules)}")
        super().__init__(*modules)


class ConvReLU1d(_FusedModule):
    """Conv1d then ReLU."""

    _PARTS = (nn.Conv1d, nn.ReLU)


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

    _PARTS = (nn.Conv2d, nn.ReLU)


class ConvReLU3d(_FusedModule):
    """Conv3d then ReLU."""

    _PARTS = (nn.Conv3d, nn.ReLU)


class ConvBn1d(_FusedModule):
    """Conv1d then BatchNorm1d (for quantization-aware training)."""

    _PARTS = (nn.Conv1d, nn.BatchNorm1d)


class ConvBn2d(_FusedModule):
    """Conv2d then BatchNorm2d (for quantization-aware training)."""

    _PARTS = (nn.Conv2d, nn.BatchNorm2d)


class ConvBn3d(_FusedModule):
    """Conv3d then BatchNorm3d (for quantization-aware training)."""

    _PARTS = (nn.Conv3d, nn.BatchNorm3d)


class ConvBnReLU1d(_FusedModule):
    """Conv1d, BatchNorm1d, ReLU (for quantization-aware training)."""

    _PARTS = (nn.Conv1d, nn.BatchNorm1d, nn.ReLU)


class ConvBnReLU2d(_FusedModule):
    """Conv2d, BatchNorm2d, ReLU (for quantization-aware training)."""

    _PARTS = (nn.Conv2d, nn.BatchNorm2d, nn.ReLU)


class ConvBnReLU3d(_FusedModule):
    """Conv3d, BatchNorm3d, ReLU (for quantization-aware training)."""

    _PARTS = (nn.Conv3d, nn.BatchNorm3d, nn.ReLU)


class LinearReLU(_FusedModule):
    """Linear then ReLU.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic import LinearReLU
    >>> LinearReLU(torcia.nn.Linear(2, 2), torcia.nn.ReLU())(torcia.ones(1, 2)).shape
    torcia.Size([1, 2])
    """

    _PARTS = (nn.Linear, nn.ReLU)


class LinearBn1d(_FusedModule):
    """Linear then BatchNorm1d (for quantization-aware training)."""

    _PARTS = (nn.Linear, nn.BatchNorm1d)


class LinearLeakyReLU(_FusedModule):
    """Linear then LeakyReLU."""

    _PARTS = (nn.Linear, nn.LeakyReLU)


class LinearTanh(_FusedModule):
    """Linear then Tanh."""

    _PARTS = (nn.Linear, nn.Tanh)


class BNReLU2d(_FusedModule):
    """BatchNorm2d then ReLU."""

    _PARTS = (nn.BatchNorm2d, nn.ReLU)


class BNReLU3d(_FusedModule):
    """BatchNorm3d then ReLU."""

    _PARTS = (nn.BatchNorm3d, nn.ReLU)


class ConvAdd2d(_FusedModule):
    """Conv2d whose output is added to a second input: ``add(conv(x1), x2)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic import ConvAdd2d
    >>> conv = torcia.nn.Conv2d(1, 1, 1, bias=False)
    >>> _ = conv.weight.data.fill_(2.0)
    >>> ConvAdd2d(conv, torcia.add)(torcia.ones(1, 1, 1, 1), torcia.ones(1, 1, 1, 1)).item()
    3.0
    """

    _PARTS = (nn.Conv2d,)

    def __init__(self, conv, add):
        super().__init__(conv)
        self.add = add

    def forward(self, x1, x2):
        return self.add(self[0](x1), x2)


class ConvAddReLU2d(_FusedModule):
    """Conv2d, an addition of a second input, then ReLU: ``relu(add(conv(x1), x2))``."""

    _PARTS = (nn.Conv2d, nn.ReLU)

    def __init__(self, conv, add, relu):
        super().__init__(conv, relu)
        self.add = add

    def forward(self, x1, x2):
        return self[1](self.add(self[0](x1), x2))
