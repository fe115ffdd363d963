"""``Digits``: 1,797 real 8x8 handwritten digits shipped inside torcia-vision."""

from __future__ import annotations

from importlib import resources

import numpy as np

from torcia.vision.datasets.vision import ArrayImages

NUM_TEST = 360


def _load():
    with resources.files("torcia.vision").joinpath("data/digits.npz").open("rb") as f:
        with np.load(f) as data:
            return data["images"], data["targets"]


class Digits(ArrayImages):
    """The UCI optical-recognition handwritten digits (the copy scikit-learn ships).

    1,797 grey 8x8 images of the digits 0-9, drawn by 43 people; each pixel counts the ink
    in a 4x4 block of a 32x32 bitmap (0..16). They are embedded in the package, so nothing
    is read from disk or the network. Pixels are scaled to 0..255 (``round(v * 255 / 16)``)
    so that the images behave as MNIST's do under the usual transforms.

    The split is fixed: a permutation drawn from NumPy's PCG64 seeded with ``split_seed``
    sends 360 images to the test set and 1,437 to the training set, whatever torcia's own
    seed.

    Data: E. Alpaydin and C. Kaynak, UCI Machine Learning Repository, "Optical Recognition
    of Handwritten Digits", CC BY 4.0.

    Parameters
    ----------
    root : ignored
        Accepted so that every dataset is built the same way.
    train : bool
        The 1,437 training images or the 360 test images.
    transform, target_transform : callable, optional
        Applied to the PIL image (mode ``"L"``, 8x8) and to the integer label.
    split_seed : int
        Seed of the train/test split.

    Examples
    --------
    >>> from torcia.vision.datasets import Digits
    >>> train, test = Digits(train=True), Digits(train=False)
    >>> len(train), len(test)
    (1437, 360)
    >>> image, label = test[0]
    >>> image.size, image.mode
    ((8, 8), 'L')
    """

    classes = [str(i) for i in range(10)]

    def __init__(self, root=None, train=True, transform=None, target_transform=None,
                 download=False, split_seed=0):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        images, targets = _load()
        order = np.random.default_rng(split_seed).permutation(len(images))
        keep = np.sort(order[NUM_TEST:] if train else order[:NUM_TEST])
        scaled = (images[keep].astype(np.uint16) * 255 + 8) // 16
        self._images = scaled.astype(np.uint8)
        self._labels = targets[keep].astype(np.int64)
