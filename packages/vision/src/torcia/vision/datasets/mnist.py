"""MNIST, Fashion-MNIST and KMNIST from their IDX files (gzip-compressed or not)."""

from __future__ import annotations

import gzip
import zlib

import numpy as np

from torcia.vision.datasets.utils import download_resources
from torcia.vision.datasets.vision import ArrayImages, find_file

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
    layout), ``root/MNIST`` or ``root`` itself. With ``download=True``, files missing there
    are downloaded into ``root/MNIST/raw`` from ``mirrors`` (with a progress bar) and
    checked against the MD5 sums in ``resources``.

    Parameters
    ----------
    root : str or Path
        The folder described above.
    train : bool
        The training files (``train-*``) or the test files (``t10k-*``).
    transform, target_transform : callable, optional
        Applied to the PIL image (mode ``"L"``) and to the integer label.
    download : bool
        Download the files that are not there yet (see above).

    Examples
    --------
    >>> from torcia.vision.datasets import MNIST
    >>> MNIST("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    FileNotFoundError: MNIST: file train-images-idx3-ubyte or ...
    """

    source = "https://ossci-datasets.s3.amazonaws.com/mnist/ (or http://yann.lecun.com/exdb/mnist/)"
    mirrors = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
               "http://yann.lecun.com/exdb/mnist/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
               "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None,
                 download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        if download:
            self.download()
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

    @property
    def raw_folder(self):
        return self.root / type(self).__name__ / "raw"

    def download(self) -> None:
        """Download into :attr:`raw_folder` the files that are in none of the folders
        searched."""
        missing = []
        for filename, md5 in self.resources:
            try:
                self._find(filename.removesuffix(".gz"))
            except FileNotFoundError:
                missing.append((filename, md5))
        if missing:
            download_resources(type(self).__name__, self.raw_folder, self.mirrors, missing)

    def _find(self, name):
        folder = type(self).__name__
        return find_file(type(self).__name__,
                         [self.root / folder / "raw", self.root / folder, self.root],
                         [name, name + ".gz"], self.source, downloadable=True)


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
    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ]
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
    mirrors = ["http://codh.rois.ac.jp/kmnist/dataset/kmnist/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "bdb82020997e1d708af4cf47b453dcf7"),
        ("train-labels-idx1-ubyte.gz", "e144d726b3acfaa3e44228e80efcd344"),
        ("t10k-images-idx3-ubyte.gz", "5c965bf0a639b31b8f53240b1b52f4d7"),
        ("t10k-labels-idx1-ubyte.gz", "7320c461ea6c1c855c0b718fb2a4b134"),
    ]
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
