"""``Upsample``: resize by a size or a scale factor."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules.module import Module

__all__ = ["Upsample"]


class Upsample(Module):
    """Resize ``(N, C, ...)`` inputs to ``size`` or by ``scale_factor`` with ``mode``
    (``"nearest"``, ``"linear"``, ``"bilinear"``...).

    Examples
    --------
    >>> import torcia
    >>> up = torcia.nn.Upsample(scale_factor=2)
    >>> up
    Upsample(scale_factor=2.0, mode='nearest')
    >>> up(torcia.tensor([[[[1.0, 2.0]]]]))
    tensor([[[[1., 1., 2., 2.],
              [1., 1., 2., 2.]]]])
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour 2-D upsampling (``Upsample(mode="nearest")``).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.UpsamplingNearest2d(scale_factor=2)(torcia.ones(1, 1, 2, 2)).shape
    torcia.Size([1, 1, 4, 4])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear 2-D upsampling with ``align_corners=True``, as PyTorch's.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.UpsamplingBilinear2d(size=3)(torcia.tensor([[[[0.0, 2.0]]]]))[0, 0, 0]
    tensor([0., 1., 2.])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
