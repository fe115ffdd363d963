"""``Fold`` and ``Unfold``: sliding blocks to columns and back."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules.module import Module

__all__ = ["Fold", "Unfold"]


class _Blocks(Module):
    """The sliding-block geometry that Fold and Unfold share."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(_Blocks):
    """Extract sliding ``kernel_size`` blocks of ``(N, C, H, W)`` as columns of
    ``(N, C * kH * kW, L)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Unfold(2)(torcia.ones(1, 3, 4, 4)).shape
    torcia.Size([1, 12, 9])
    """

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(_Blocks):
    """Sum columns of ``(N, C * kH * kW, L)`` back into ``(N, C, *output_size)`` (the
    adjoint of :class:`Unfold`).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Fold((3, 3), 2)(torcia.ones(1, 4, 4))
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, " + super().extra_repr()
