"""MNIST, Fashion-MNIST and KMNIST from their IDX files (gzip-compressed or not)."""

from __future__ import annotations

import gzip
import zlib

import numpy as np

from torcia.vision.datasets.vision import ArrayImages, find_file, no_download

# IDX type codes (the third byte of the magic number) and their big-endian dtypes
_IDX_TYPES = {
    0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}


def read_idx(path) -> np.ndarray:
    """Read an IDX file (the format of MNIST's files), gzip-compressed or not.

    Raises ``RuntimeError`` naming the file when it is truncated or not an IDX file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from torcia.vision.datasets import read_idx
    >>> path = os.path.join(tempfile.mkdtemp(), "x-idx1-ubyte")
    >>> _ = open(path, "wb").write(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9]))
    >>> read_idx(path)
    array([7, 8, 9], dtype=uint8)
    """
    opener = gzip.open if _is_gzip(path) else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise RuntimeError(f"IDX file {path} is corrupt: it cannot be decompressed ({exc})") \
            from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise RuntimeError(f"{path} is not an IDX file: bad magic number {raw[:4].hex()}")
    dtype, ndim = _IDX_TYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise RuntimeError(f"IDX file {path} is truncated: its header needs {header} bytes, "
                           f"the file has {len(raw)}")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, offset=4))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise RuntimeError(
            f"IDX file {path} is truncated or corrupt: shape {list(shape)} needs {expected} "
            f"bytes of data, the file has {len(raw) - header}")
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _is_gzip(path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class MNIST(ArrayImages):
    """The MNIST handwritten digits: 60,000 training and 10,000 test images, 28x28 grey.

    Reads the four IDX files, gzip-compressed or not, from ``root/MNIST/raw`` (torchvision's
    layout), ``root/MNIST`` or ``root`` itself. Nothing is downloaded.

    Parameters
    ----------
    root : str or Path
        The folder described above.
    train : bool
        The training files (``train-*``) or the test files (``t10k-*``).
    transform, target_transform : callable, optional
        Applied to the PIL image (mode ``"L"``) and to the integer label.
    download : bool
        Must be False: torcia never downloads; the error says where to get the files.

    Examples
    --------
    >>> from torcia.vision.datasets import MNIST
    >>> MNIST("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    FileNotFoundError: MNIST: file train-images-idx3-ubyte or ...
    """

    source = "https://ossci-datasets.s3.amazonaws.com/mnist/ (or http://yann.lecun.com/exdb/mnist/)"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
               "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None,
                 download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        if download:
            raise no_download(type(self).__name__, self.source)
        self.train = train
        prefix = "train" if train else "t10k"
        images = read_idx(self._find(f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(self._find(f"{prefix}-labels-idx1-ubyte"))
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise RuntimeError(
                f"{type(self).__name__}: images of shape {list(images.shape)} do not match "
                f"labels of shape {list(labels.shape)} in {self.root}")
        self._images = images.astype(np.uint8)
        self._labels = labels.astype(np.int64)

    def _find(self, name):
        folder = type(self).__name__
        return find_file(type(self).__name__,
                         [self.root / folder / "raw", self.root / folder, self.root],
                         [name, name + ".gz"], self.source)


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: MNIST's format and sizes, ten kinds of clothing.

    Files in ``root/FashionMNIST/raw`` or ``root``; see :class:`MNIST`.

    Examples
    --------
    >>> from torcia.vision.datasets import FashionMNIST
    >>> FashionMNIST.classes[:2]
    ['T-shirt/top', 'Trouser']
    """

    source = "https://github.com/zalandoresearch/fashion-mnist"
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]


class KMNIST(MNIST):
    """Kuzushiji-MNIST: MNIST's format and sizes, ten cursive Japanese characters.

    Files in ``root/KMNIST/raw`` or ``root``; see :class:`MNIST`.

    Examples
    --------
    >>> from torcia.vision.datasets import KMNIST
    >>> len(KMNIST.classes)
    10
    """

    source = "https://github.com/rois-codh/kmnist"
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
