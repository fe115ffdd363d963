"""``PixelShuffle`` and ``PixelUnshuffle``."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules.module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """Rearrange ``(*, C * r², H, W)`` into ``(*, C, H * r, W * r)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.PixelShuffle(2)(torcia.ones(1, 8, 3, 3)).shape
    torcia.Size([1, 2, 6, 6])
    """

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """The inverse of :class:`PixelShuffle`: ``(*, C, H * r, W * r)`` to
    ``(*, C * r², H, W)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.PixelUnshuffle(2)(torcia.ones(1, 2, 6, 6)).shape
    torcia.Size([1, 8, 3, 3])
    """

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Shuffle the channels of ``(N, C, *)`` inputs in ``groups`` (ShuffleNet).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(4.0).reshape(1, 4, 1, 1)
    >>> torcia.nn.ChannelShuffle(2)(x).flatten()
    tensor([0., 2., 1., 3.])
    """

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
