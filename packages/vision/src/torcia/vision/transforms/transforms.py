"""Transforms as callable objects, with torchvision's names, arguments and defaults.

Random transforms draw from torcia's default generator, so ``torcia.manual_seed(s)``
reproduces them; in DataLoader workers, each worker's generator is seeded from the loader's.
"""

from __future__ import annotations

import math
import numbers

import torcia
from torcia.vision.transforms import functional as F
from torcia.vision.transforms.functional import InterpolationMode


def _uniform(low: float, high: float) -> float:
    return float(torcia.empty(1).uniform_(low, high).item())


def _randint(low: int, high: int) -> int:
    return int(torcia.randint(low, high, (1,)).item())


def _coin(p: float) -> bool:
    return float(torcia.rand(1).item()) < p


def _pair(size, name: str = "size") -> tuple[int, int]:
    return F._pair(size, name)


class Compose:
    """Apply transforms one after another.

    Examples
    --------
    >>> from torcia.vision import transforms as T
    >>> T.Compose([T.Lambda(lambda x: x + 1), T.Lambda(lambda x: x * 2)])(3)
    8
    """

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({body}\n)"


class _Transform:
    """Shared ``__repr__`` from the attributes ``__init__`` stored."""

    _repr_keys: tuple = ()

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._repr_keys)
        return f"{type(self).__name__}({args})"


class ToTensor(_Transform):
    """PIL image or HWC array -> CHW float tensor; uint8 values are scaled to [0, 1].

    Examples
    --------
    >>> from PIL import Image
    >>> from torcia.vision import transforms as T
    >>> T.ToTensor()(Image.new("L", (2, 2), 255)).tolist()
    [[[1.0, 1.0], [1.0, 1.0]]]
    """

    def __call__(self, pic):
        return F.to_tensor(pic)


class PILToTensor(_Transform):
    """PIL image -> CHW tensor of the image's own dtype, values unchanged.

    Examples
    --------
    >>> from PIL import Image
    >>> from torcia.vision import transforms as T
    >>> T.PILToTensor()(Image.new("L", (1, 1), 9)).tolist()
    [[[9]]]
    """

    def __call__(self, pic):
        return F.pil_to_tensor(pic)


class ToPILImage(_Transform):
    """CHW tensor or HWC array -> PIL image.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import transforms as T
    >>> T.ToPILImage()(torcia.zeros(1, 2, 3)).mode
    'L'
    """

    _repr_keys = ("mode",)

    def __init__(self, mode=None):
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)


class Normalize(_Transform):
    """``(x - mean) / std`` per channel of a float tensor.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import transforms as T
    >>> T.Normalize([0.5], [0.5])(torcia.ones(1, 1, 2)).tolist()
    [[[1.0, 1.0]]]
    """

    _repr_keys = ("mean", "std")

    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor):
        return F.normalize(tensor, self.mean, self.std, self.inplace)


class Resize(_Transform):
    """Resize to ``size`` (``(h, w)``, or an int that the smaller edge is matched to).

    Examples
    --------
    >>> from PIL import Image
    >>> from torcia.vision import transforms as T
    >>> T.Resize(4)(Image.new("RGB", (16, 8))).size
    (8, 4)
    """

    _repr_keys = ("size", "interpolation", "max_size", "antialias")

    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
                 antialias=True):
        if not isinstance(size, (int, list, tuple)) or (
                isinstance(size, (list, tuple)) and len(size) not in (1, 2)):
            raise TypeError(f"Size should be int or sequence. Got {type(size)}")
        self.size, self.max_size, self.antialias = size, max_size, antialias
        self.interpolation = InterpolationMode(interpolation)

    def __call__(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)


class CenterCrop(_Transform):
    """Crop the centre to ``size`` (padding with 0 if the image is smaller).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision import transforms as T
    >>> T.CenterCrop(1)(np.arange(9).reshape(3, 3))
    array([[4]])
    """

    _repr_keys = ("size",)

    def __init__(self, size):
        self.size = _pair(size)

    def __call__(self, img):
        return F.center_crop(img, self.size)


class Pad(_Transform):
    """Pad the borders; see :func:`torcia.vision.transforms.functional.pad`.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision import transforms as T
    >>> T.Pad(1, fill=7)(np.array([[1]]))
    array([[7, 7, 7],
           [7, 1, 7],
           [7, 7, 7]])
    """

    _repr_keys = ("padding", "fill", "padding_mode")

    def __init__(self, padding, fill=0, padding_mode="constant"):
        F._parse_padding(padding)
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError("Padding mode should be either constant, edge, reflect or "
                             "symmetric")
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def __call__(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)


class Lambda(_Transform):
    """Apply a user function.

    Examples
    --------
    >>> from torcia.vision import transforms as T
    >>> T.Lambda(str.upper)("ok")
    'OK'
    """

    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError(f"Argument lambd should be callable, got "
                            f"{type(lambd).__name__!r}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)


class RandomCrop(_Transform):
    """Crop a random ``size`` region, after optional padding.

    Parameters
    ----------
    size : int or (h, w)
    padding : int or sequence, optional
        Padding added first (see :class:`Pad`).
    pad_if_needed : bool
        Pad an image smaller than ``size`` up to it.
    fill, padding_mode
        As in :class:`Pad`.

    Examples
    --------
    >>> import numpy as np, torcia
    >>> from torcia.vision import transforms as T
    >>> _ = torcia.manual_seed(0)
    >>> T.RandomCrop(2, padding=1)(np.ones((3, 3), np.uint8)).shape
    (2, 2)
    """

    _repr_keys = ("size", "padding")

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0,
                 padding_mode="constant"):
        self.size = _pair(size)
        self.padding, self.pad_if_needed = padding, pad_if_needed
        self.fill, self.padding_mode = fill, padding_mode

    @staticmethod
    def get_params(img, output_size) -> tuple[int, int, int, int]:
        """A random ``(top, left, height, width)`` of ``output_size`` inside ``img``."""
        _, h, w = F.get_dimensions(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size "
                             f"{(h, w)}")
        if (h, w) == (th, tw):
            return 0, 0, h, w
        return _randint(0, h - th + 1), _randint(0, w - tw + 1), th, tw

    def __call__(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, h, w = F.get_dimensions(img)
        th, tw = self.size
        if self.pad_if_needed and (w < tw or h < th):
            img = F.pad(img, [max(tw - w, 0), max(th - h, 0)], self.fill, self.padding_mode)
        return F.crop(img, *self.get_params(img, self.size))


class RandomResizedCrop(_Transform):
    """Crop a random region of random area and aspect ratio, resized to ``size``.

    Examples
    --------
    >>> import torcia
    >>> from PIL import Image
    >>> from torcia.vision import transforms as T
    >>> _ = torcia.manual_seed(0)
    >>> T.RandomResizedCrop(4)(Image.new("RGB", (10, 12))).size
    (4, 4)
    """

    _repr_keys = ("size", "scale", "ratio", "interpolation")

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias=True):
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError("Scale and ratio should be of kind (min, max)")
        self.size = _pair(size)
        self.scale, self.ratio = tuple(scale), tuple(ratio)
        self.interpolation, self.antialias = InterpolationMode(interpolation), antialias

    @staticmethod
    def get_params(img, scale, ratio) -> tuple[int, int, int, int]:
        """A random ``(top, left, height, width)``: ten tries at a region of the drawn area
        and ratio that fits, then the centre crop with the ratio clamped into range."""
        _, height, width = F.get_dimensions(img)
        area = height * width
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            target_area = area * _uniform(scale[0], scale[1])
            aspect = math.exp(_uniform(*log_ratio))
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return _randint(0, height - h + 1), _randint(0, width - w + 1), h, w
        in_ratio = width / height
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        top, left, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resized_crop(img, top, left, h, w, self.size, self.interpolation,
                              self.antialias)


class RandomHorizontalFlip(_Transform):
    """Flip left to right with probability ``p``.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision import transforms as T
    >>> T.RandomHorizontalFlip(p=1.0)(np.array([[1, 2]]))
    array([[2, 1]])
    """

    _repr_keys = ("p",)

    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return F.hflip(img) if _coin(self.p) else img


class RandomVerticalFlip(RandomHorizontalFlip):
    """Flip top to bottom with probability ``p``.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision import transforms as T
    >>> T.RandomVerticalFlip(p=0.0)(np.array([[1], [2]]))
    array([[1],
           [2]])
    """

    def __call__(self, img):
        return F.vflip(img) if _coin(self.p) else img


def _range(value, name: str, center: float = 0.0, bound=None) -> tuple[float, float] | None:
    """A jitter argument as ``(min, max)``: one number ``v`` means
    ``[center - v, center + v]`` (clipped at 0 for factors)."""
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be non negative.")
        low, high = center - value, center + value
        if center == 1.0:
            low = max(low, 0.0)
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        low, high = float(value[0]), float(value[1])
    else:
        raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
    if bound is not None and not bound[0] <= low <= high <= bound[1]:
        raise ValueError(f"{name} values should be between {bound}, but got {[low, high]}.")
    return None if low == high == center else (low, high)


class ColorJitter(_Transform):
    """Randomly change brightness, contrast, saturation and hue, in a random order.

    A number ``v`` means a factor drawn from ``[max(0, 1 - v), 1 + v]`` (``[-v, v]`` for
    hue, with ``0 <= v <= 0.5``); a pair gives the range itself.

    Examples
    --------
    >>> import torcia
    >>> from PIL import Image
    >>> from torcia.vision import transforms as T
    >>> _ = torcia.manual_seed(0)
    >>> T.ColorJitter(brightness=0.5)(Image.new("RGB", (2, 2), (100, 100, 100))).size
    (2, 2)
    """

    _repr_keys = ("brightness", "contrast", "saturation", "hue")

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness = _range(brightness, "brightness", 1.0, (0, float("inf")))
        self.contrast = _range(contrast, "contrast", 1.0, (0, float("inf")))
        self.saturation = _range(saturation, "saturation", 1.0, (0, float("inf")))
        self.hue = _range(hue, "hue", 0.0, (-0.5, 0.5))

    @staticmethod
    def get_params(brightness, contrast, saturation, hue):
        """The order (a permutation of 0..3) and the four factors (None where unused)."""
        order = torcia.randperm(4).tolist()
        factors = [None if r is None else _uniform(r[0], r[1])
                   for r in (brightness, contrast, saturation, hue)]
        return (order, *factors)

    def __call__(self, img):
        order, *factors = self.get_params(self.brightness, self.contrast, self.saturation,
                                          self.hue)
        adjust = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)
        for i in order:
            if factors[i] is not None:
                img = adjust[i](img, factors[i])
        return img


class RandomRotation(_Transform):
    """Rotate by an angle drawn from ``[-degrees, degrees]`` (or the given range).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision import transforms as T
    >>> T.RandomRotation((90, 90))(np.array([[1, 2], [3, 4]], np.uint8))
    array([[2, 4],
           [1, 3]], dtype=uint8)
    """

    _repr_keys = ("degrees", "interpolation", "expand", "center", "fill")

    def __init__(self, degrees, interpolation=InterpolationMode.NEAREST, expand=False,
                 center=None, fill=0):
        if isinstance(degrees, numbers.Number):
            if degrees < 0:
                raise ValueError("If degrees is a single number, it must be positive.")
            degrees = (-float(degrees), float(degrees))
        elif not (isinstance(degrees, (list, tuple)) and len(degrees) == 2):
            raise ValueError("If degrees is a sequence, it must be of len 2.")
        self.degrees = (float(degrees[0]), float(degrees[1]))
        self.interpolation = InterpolationMode(interpolation)
        self.expand, self.center, self.fill = expand, center, fill

    @staticmethod
    def get_params(degrees) -> float:
        return _uniform(degrees[0], degrees[1])

    def __call__(self, img):
        angle = self.get_params(self.degrees)
        return F.rotate(img, angle, self.interpolation, self.expand, self.center, self.fill)


class Grayscale(_Transform):
    """Convert to grey with 1 or 3 output channels.

    Examples
    --------
    >>> from PIL import Image
    >>> from torcia.vision import transforms as T
    >>> T.Grayscale(3)(Image.new("RGB", (1, 1), (255, 0, 0))).getpixel((0, 0))
    (76, 76, 76)
    """

    _repr_keys = ("num_output_channels",)

    def __init__(self, num_output_channels=1):
        self.num_output_channels = num_output_channels

    def __call__(self, img):
        return F.rgb_to_grayscale(img, self.num_output_channels)
