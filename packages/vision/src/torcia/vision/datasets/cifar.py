"""CIFAR-10 and CIFAR-100 from their python batch files, read without running their code.

The batches are pickles. A pickle can name any importable callable and have it called
while loading, so they are read with :class:`SafeUnpickler`, which resolves only the few
names a batch of NumPy arrays needs and refuses every other one.
"""

from __future__ import annotations

import pickle

import numpy as np

from torcia.vision.datasets.utils import download_and_extract_archive
from torcia.vision.datasets.vision import ArrayImages, find_file


def _latin1_encode(text: str, encoding: str) -> bytes:
    # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(text, "latin1")
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing to encode with {encoding!r} in a data file")
    return text.encode(encoding)


def _allowed_globals() -> dict:
    # numpy 2 moved numpy.core to numpy._core; the CIFAR files (pickled by NumPy 1 under
    # Python 2) name the old module, newer pickles the new one: both map to the same objects
    core = getattr(np, "_core", None) or np.core
    allowed = {
        ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1_encode,
    }
    # protocol 2 names the builtins module as Python 2 did
    for module in ("builtins", "__builtin__"):
        for kind in (dict, list, str, bytes, int):
            allowed[(module, kind.__name__)] = kind
    for package in ("numpy.core", "numpy._core"):
        allowed[(f"{package}.multiarray", "_reconstruct")] = core.multiarray._reconstruct
        # protocol 5 rebuilds arrays from their buffer
        allowed[(f"{package}.numeric", "_frombuffer")] = core.numeric._frombuffer
    return allowed


class SafeUnpickler(pickle.Unpickler):
    """An unpickler for data files: dicts, lists, strings, bytes, numbers and NumPy arrays.

    Any other global the pickle names (a function such as ``os.system``, a class) is
    refused with ``pickle.UnpicklingError`` before it is imported or called.

    Examples
    --------
    >>> import io, os, pickle
    >>> from torcia.vision.datasets.cifar import SafeUnpickler
    >>> class Evil:
    ...     def __reduce__(self):
    ...         return (os.system, ("echo pwned",))
    >>> SafeUnpickler(io.BytesIO(pickle.dumps(Evil()))).load()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    _pickle.UnpicklingError: refusing to load global ...system...
    """

    _allowed = _allowed_globals()

    def find_class(self, module, name):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name} from a data file: only NumPy "
                f"arrays, dicts, lists, strings and numbers are allowed (the file may be "
                f"malicious or not a CIFAR batch)") from None


def load_batch(path) -> dict:
    """Load one CIFAR python batch file with :class:`SafeUnpickler`.

    Raises ``RuntimeError`` naming the file when it is truncated or corrupt.
    """
    try:
        with open(path, "rb") as f:
            # latin1 decodes the byte strings of Python 2 pickles, NumPy's buffers included
            return SafeUnpickler(f, encoding="latin1").load()
    except pickle.UnpicklingError:
        raise
    except (EOFError, ValueError, TypeError, IndexError, KeyError) as exc:
        raise RuntimeError(f"CIFAR batch {path} is truncated or corrupt: "
                           f"{type(exc).__name__}: {exc}") from exc


class CIFAR10(ArrayImages):
    """CIFAR-10: 50,000 training and 10,000 test colour images, 32x32, ten classes.

    Reads the python batches from ``root/cifar-10-batches-py`` (the folder the official
    tarball unpacks to) or ``root`` itself. With ``download=True`` and batches missing,
    the tarball ``url`` is downloaded into ``root`` (with a progress bar), checked against
    ``tgz_md5`` and unpacked.

    Parameters
    ----------
    root : str or Path
        The folder described above.
    train : bool
        ``data_batch_1`` ... ``data_batch_5``, or ``test_batch``.
    transform, target_transform : callable, optional
        Applied to the PIL image (mode ``"RGB"``) and to the integer label.
    download : bool
        Download and unpack the tarball when batches are missing (see above).

    Examples
    --------
    >>> from torcia.vision.datasets import CIFAR10
    >>> CIFAR10("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    FileNotFoundError: CIFAR10: file data_batch_1 not found; ...
    """

    base_folder = "cifar-10-batches-py"
    train_list = [f"data_batch_{i}" for i in range(1, 6)]
    test_list = ["test_batch"]
    meta = ("batches.meta", "label_names")
    labels_key = "labels"
    source = "https://www.cs.toronto.edu/~kriz/cifar.html (cifar-10-python.tar.gz)"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    tgz_md5 = "c58f30108f718f92721af3b95e74349a"

    def __init__(self, root, train=True, transform=None, target_transform=None,
                 download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        if download:
            self.download()
        self.train = train
        images, labels = [], []
        for name in self.train_list if train else self.test_list:
            path = self._find(name)
            batch = load_batch(path)
            try:
                data = np.asarray(batch["data"], dtype=np.uint8)
                images.append(data.reshape(-1, 3, 32, 32))
                labels.extend(int(v) for v in batch[self.labels_key])
            except (KeyError, ValueError, TypeError) as exc:
                raise RuntimeError(f"CIFAR batch {path} is corrupt: {type(exc).__name__}: "
                                   f"{exc}") from exc
            if len(images[-1]) != len(batch[self.labels_key]):
                raise RuntimeError(f"CIFAR batch {path} is corrupt: {len(images[-1])} images "
                                   f"but {len(batch[self.labels_key])} labels")
        self._images = np.ascontiguousarray(np.concatenate(images).transpose(0, 2, 3, 1))
        self._labels = np.asarray(labels, dtype=np.int64)
        self.classes = list(load_batch(self._find(self.meta[0]))[self.meta[1]])

    def download(self) -> None:
        """Download and unpack the tarball into ``root`` unless every batch is there."""
        try:
            for name in [*self.train_list, *self.test_list, self.meta[0]]:
                self._find(name)
        except FileNotFoundError:
            download_and_extract_archive(self.url, self.root, filename=self.filename,
                                         md5=self.tgz_md5)

    def _find(self, name):
        return find_file(type(self).__name__, [self.root / self.base_folder, self.root],
                         [name], self.source, downloadable=True)

    @property
    def data(self) -> np.ndarray:
        """The images as a uint8 array of shape (N, 32, 32, 3), as torchvision keeps them."""
        return self._images

    @property
    def targets(self) -> list:
        return self._labels.tolist()


class CIFAR100(CIFAR10):
    """CIFAR-100: CIFAR-10's format with 100 fine classes (``fine_labels``).

    Reads ``train``, ``test`` and ``meta`` from ``root/cifar-100-python`` or ``root``.

    Examples
    --------
    >>> from torcia.vision.datasets import CIFAR100
    >>> CIFAR100.base_folder
    'cifar-100-python'
    """

    base_folder = "cifar-100-python"
    train_list = ["train"]
    test_list = ["test"]
    meta = ("meta", "fine_label_names")
    labels_key = "fine_labels"
    source = "https://www.cs.toronto.edu/~kriz/cifar.html (cifar-100-python.tar.gz)"
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    filename = "cifar-100-python.tar.gz"
    tgz_md5 = "eb9058c3a382ffc7106e4002c42a8d85"

