"""Datasets of files sorted into one folder per class: ``DatasetFolder`` and ``ImageFolder``."""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image

from torcia.vision.datasets.vision import VisionDataset

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def find_classes(directory) -> tuple[list[str], dict[str, int]]:
    """The class folders of ``directory``, sorted, and their indices.

    Examples
    --------
    >>> import os, tempfile
    >>> from torcia.vision.datasets.folder import find_classes
    >>> root = tempfile.mkdtemp()
    >>> for c in ("dog", "cat"):
    ...     os.mkdir(os.path.join(root, c))
    >>> find_classes(root)
    (['cat', 'dog'], {'cat': 0, 'dog': 1})
    """
    classes = sorted(e.name for e in os.scandir(directory) if e.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    return classes, {c: i for i, c in enumerate(classes)}


def make_dataset(directory, class_to_idx, extensions=None, is_valid_file=None,
                 allow_empty=False) -> list[tuple[str, int]]:
    """Every ``(path, class_index)`` under the class folders, in sorted order.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from torcia.vision.datasets.folder import make_dataset
    >>> with tempfile.TemporaryDirectory() as root:
    ...     for name in ('cat/a.png', 'cat/b.png', 'dog/c.png', 'dog/notes.txt'):
    ...         path = pathlib.Path(root, name)
    ...         path.parent.mkdir(exist_ok=True)
    ...         path.touch()
    ...     found = make_dataset(root, {'cat': 0, 'dog': 1}, extensions=('.png',))
    ...     [(pathlib.Path(p).name, c) for p, c in found]
    [('a.png', 0), ('b.png', 0), ('c.png', 1)]
    """
    if (extensions is None) == (is_valid_file is None):
        raise ValueError("Both extensions and is_valid_file cannot be None or not None at "
                         "the same time")
    if is_valid_file is None:
        def is_valid_file(path):
            return path.lower().endswith(tuple(extensions))
    samples, found = [], set()
    for name in sorted(class_to_idx):
        for base, _, files in sorted(os.walk(Path(directory) / name, followlinks=True)):
            for file in sorted(files):
                path = os.path.join(base, file)
                if is_valid_file(path):
                    samples.append((path, class_to_idx[name]))
                    found.add(name)
    empty = sorted(set(class_to_idx) - found)
    if empty and not allow_empty:
        msg = f"Found no valid file for the classes {', '.join(empty)}. "
        if extensions is not None:
            msg += f"Supported extensions are: {', '.join(extensions)}"
        raise FileNotFoundError(msg)
    return samples


class DatasetFolder(VisionDataset):
    """Samples stored as ``root/<class>/**/<file>``, read by ``loader``.

    Parameters
    ----------
    root : str or Path
        The folder of class folders.
    loader : callable
        Reads one file from its path.
    extensions : tuple of str, optional
        File endings to keep (exclusive with ``is_valid_file``).
    transform, target_transform : callable, optional
    is_valid_file : callable, optional
        Takes a path and says whether to keep it.
    allow_empty : bool
        Whether a class folder with no valid file is allowed.

    Examples
    --------
    >>> import os, tempfile
    >>> from torcia.vision.datasets import DatasetFolder
    >>> root = tempfile.mkdtemp()
    >>> os.mkdir(os.path.join(root, "a"))
    >>> _ = open(os.path.join(root, "a", "x.txt"), "w").write("hello")
    >>> ds = DatasetFolder(root, loader=lambda p: open(p).read(), extensions=(".txt",))
    >>> ds[0], ds.classes
    (('hello', 0), ['a'])
    """

    def __init__(self, root, loader, extensions=None, transform=None, target_transform=None,
                 is_valid_file=None, allow_empty=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.classes, self.class_to_idx = find_classes(self.root)
        self.samples = make_dataset(self.root, self.class_to_idx, extensions, is_valid_file,
                                    allow_empty)
        self.loader = loader
        self.extensions = extensions
        self.targets = [t for _, t in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        return self._apply(self.loader(path), target)


def pil_loader(path) -> Image.Image:
    """Open an image file as RGB (a clear error names a file Pillow cannot read).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from PIL import Image
    >>> from torcia.vision.datasets.folder import pil_loader
    >>> with tempfile.TemporaryDirectory() as root:
    ...     path = pathlib.Path(root, 'grey.png')
    ...     Image.new('L', (4, 2), 7).save(path)
    ...     image = pil_loader(path)
    >>> image.mode, image.size, image.getpixel((0, 0))
    ('RGB', (4, 2), (7, 7, 7))
    """
    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except (OSError, SyntaxError, ValueError) as exc:
        raise RuntimeError(f"cannot read image file {path}: {exc}") from exc


class ImageFolder(DatasetFolder):
    """Images stored as ``root/<class>/**/<image>``, opened with Pillow as RGB.

    Examples
    --------
    >>> import os, tempfile
    >>> from PIL import Image
    >>> from torcia.vision.datasets import ImageFolder
    >>> root = tempfile.mkdtemp()
    >>> os.mkdir(os.path.join(root, "red"))
    >>> Image.new("RGB", (4, 3), (255, 0, 0)).save(os.path.join(root, "red", "1.png"))
    >>> image, label = ImageFolder(root)[0]
    >>> image.size, label
    ((4, 3), 0)
    """

    def __init__(self, root, transform=None, target_transform=None, loader=pil_loader,
                 is_valid_file=None, allow_empty=False):
        super().__init__(root, loader, None if is_valid_file else IMG_EXTENSIONS, transform,
                         target_transform, is_valid_file, allow_empty)
        self.imgs = self.samples
