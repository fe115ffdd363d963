"""Operators of torchvision's ``torchvision.ops`` that models are built from.

Examples
--------
>>> import torcia
>>> from torcia.vision.ops import FrozenBatchNorm2d
>>> FrozenBatchNorm2d(3)(torcia.ones(1, 3, 2, 2)).shape
torcia.Size([1, 3, 2, 2])
"""

from torcia.vision.ops.misc import FrozenBatchNorm2d

__all__ = ["FrozenBatchNorm2d"]
