"""Image transforms with torchvision's names: classes here, functions in
:mod:`torcia.vision.transforms.functional`.

Examples
--------
>>> import torcia
>>> from PIL import Image
>>> from torcia.vision import transforms as T
>>> t = T.Compose([T.RandomCrop(4, padding=1), T.ToTensor(), T.Normalize([0.5], [0.5])])
>>> _ = torcia.manual_seed(0)
>>> t(Image.new("L", (4, 4), 255)).shape
torcia.Size([1, 4, 4])
"""

from torcia.vision.transforms import functional
from torcia.vision.transforms.functional import InterpolationMode
from torcia.vision.transforms.transforms import (
    CenterCrop,
    ColorJitter,
    Compose,
    Grayscale,
    Lambda,
    Normalize,
    Pad,
    PILToTensor,
    RandomCrop,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomRotation,
    RandomVerticalFlip,
    Resize,
    ToPILImage,
    ToTensor,
)

__all__ = [
    "CenterCrop", "ColorJitter", "Compose", "Grayscale", "InterpolationMode", "Lambda",
    "Normalize", "PILToTensor", "Pad", "RandomCrop", "RandomHorizontalFlip",
    "RandomResizedCrop", "RandomRotation", "RandomVerticalFlip", "Resize", "ToPILImage",
    "ToTensor", "functional",
]
