"""Image datasets. Each reads files the user provides (:class:`Digits` is embedded in the
package); the MNIST family and CIFAR also download them with ``download=True`` (see
:mod:`torcia.vision.datasets.utils`).

Examples
--------
>>> from torcia.vision import datasets
>>> ds = datasets.get_dataset("digits", None, train=False)
>>> len(ds), "mnist" in datasets.list_datasets()
(360, True)
"""

from torcia.vision import _registry
from torcia.vision.datasets import utils
from torcia.vision.datasets.cifar import CIFAR10, CIFAR100
from torcia.vision.datasets.digits import Digits
from torcia.vision.datasets.fakedata import FakeData
from torcia.vision.datasets.folder import IMG_EXTENSIONS, DatasetFolder, ImageFolder
from torcia.vision.datasets.mnist import KMNIST, MNIST, FashionMNIST, read_idx
from torcia.vision.datasets.vision import VisionDataset


def list_datasets() -> list[str]:
    """The names of every registered dataset, torcia-vision's and plugins' alike.

    Examples
    --------
    >>> import torcia
    >>> "mnist" in torcia.vision.datasets.list_datasets()
    True
    """
    return _registry.datasets.names()


def get_dataset(name: str, root, **kwargs):
    """Build the dataset registered as ``name`` (see :func:`list_datasets`).

    Examples
    --------
    >>> from torcia.vision.datasets import get_dataset
    >>> test = get_dataset("digits", None, train=False)
    >>> len(test), test[0][0].size
    (360, (8, 8))
    """
    return _registry.datasets.get(name)(root, **kwargs)


__all__ = [
    "CIFAR10", "CIFAR100", "DatasetFolder", "Digits", "FakeData", "FashionMNIST",
    "IMG_EXTENSIONS", "ImageFolder", "KMNIST", "MNIST", "VisionDataset", "get_dataset",
    "list_datasets", "read_idx", "utils",
]
