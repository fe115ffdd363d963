"""The base class of the image datasets, and how they find their files."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

import torcia
from torcia.data import Dataset


class VisionDataset(Dataset):
    """A map-style dataset of images kept under ``root``.

    Parameters
    ----------
    root : str or Path or None
        The folder that holds the dataset's files (None for datasets that need none).
    transforms : callable, optional
        Takes and returns ``(image, target)``; exclusive with the two below.
    transform : callable, optional
        Applied to each image.
    target_transform : callable, optional
        Applied to each target.

    Examples
    --------
    >>> from torcia.vision.datasets import VisionDataset
    >>> class Two(VisionDataset):
    ...     def __len__(self):
    ...         return 2
    ...     def __getitem__(self, i):
    ...         return self._apply(i * 10, i)
    >>> Two(None, transform=lambda x: x + 1)[1]
    (11, 1)
    """

    def __init__(self, root=None, transforms=None, transform=None, target_transform=None):
        self.root = None if root is None else Path(root).expanduser()
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError("Only transforms or transform/target_transform can be passed "
                             "as argument")
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = transforms

    def _apply(self, image, target):
        if self.transforms is not None:
            return self.transforms(image, target)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self) -> str:
        lines = [f"Dataset {type(self).__name__}", f"    Number of datapoints: {len(self)}"]
        if self.root is not None:
            lines.append(f"    Root location: {self.root}")
        for name in ("transforms", "transform", "target_transform"):
            value = getattr(self, name)
            if value is not None:
                lines.append(f"    {name}: {value!r}")
        return "\n".join(lines)


class ArrayImages(VisionDataset):
    """A dataset held in memory: ``_images`` (uint8, (N, H, W) or (N, H, W, C)) and
    ``_labels`` (int64, (N,)), set by the subclass; samples are PIL images and int labels."""

    classes: list = []

    @property
    def data(self):
        """The images as a uint8 tensor."""
        return torcia.from_numpy(self._images)

    @property
    def targets(self):
        """The labels as an int64 tensor."""
        return torcia.from_numpy(self._labels)

    @property
    def class_to_idx(self) -> dict:
        return {c: i for i, c in enumerate(self.classes)}

    def __len__(self) -> int:
        return len(self._images)

    def __getitem__(self, index):
        return self._apply(Image.fromarray(self._images[index]), int(self._labels[index]))


def no_download(name: str, source: str) -> RuntimeError:
    """The error for ``download=True``: torcia never fetches anything at run time.

    Examples
    --------
    >>> from torcia.vision.datasets.vision import no_download
    >>> print(no_download("MNIST", "https://example.org/mnist"))
    MNIST: download=True is not supported: torcia never downloads at run time. Fetch the files
    yourself from https://example.org/mnist and pass the folder that holds them as root.
    """
    return RuntimeError(
        f"{name}: download=True is not supported: torcia never downloads at run time. Fetch "
        f"the files yourself from {source} and pass the folder that holds them as root."
    )


def find_file(name: str, folders, candidates, source: str,
              downloadable: bool = False) -> Path:
    """The first of ``folders`` x ``candidates`` (file names) that exists, or a
    FileNotFoundError that says which file, where it was looked for, and where to get it
    (``downloadable``: that ``download=True`` fetches it)."""
    folders = list(folders)
    for folder in folders:
        for candidate in candidates:
            path = Path(folder) / candidate
            if path.is_file():
                return path
    looked = ", ".join(str(f) for f in folders)
    raise FileNotFoundError(
        f"{name}: file {' or '.join(candidates)} not found; looked in {looked}. "
        + (f"Pass download=True to fetch it, or get it from {source}" if downloadable
           else f"torcia never downloads it: get it from {source}")
    )
