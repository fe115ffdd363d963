"""Random images for tests and benchmarks."""

from __future__ import annotations

import torcia
from torcia.vision.datasets.vision import VisionDataset


class FakeData(VisionDataset):
    """``size`` random images with random labels; image ``i`` is the same on every access.

    Each sample is drawn from its own generator seeded with ``index + random_offset``, so
    reading the dataset neither uses nor changes torcia's default generator.

    Parameters
    ----------
    size : int
        Number of images.
    image_size : tuple of int
        ``(channels, height, width)``; 1 or 3 channels give "L" or "RGB" PIL images.
    num_classes : int
    transform, target_transform : callable, optional
    random_offset : int
        Added to the index to seed each sample.

    Examples
    --------
    >>> from torcia.vision.datasets import FakeData
    >>> ds = FakeData(size=4, image_size=(3, 8, 6))
    >>> image, label = ds[0]
    >>> image.size, image.mode, 0 <= label < 10
    ((6, 8), 'RGB', True)
    """

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.size = size
        self.image_size = tuple(image_size)
        self.num_classes = num_classes
        self.random_offset = random_offset

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):
        from torcia.vision.transforms import functional as F

        if not -self.size <= index < self.size:
            raise IndexError(f"{type(self).__name__} index out of range")
        index %= self.size
        gen = torcia.Generator().manual_seed(index + self.random_offset)
        image = torcia.randn(*self.image_size, generator=gen)
        target = int(torcia.randint(0, self.num_classes, (1,), generator=gen).item())
        return self._apply(F.to_pil_image(image), target)
