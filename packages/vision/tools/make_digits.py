"""Regenerate ``src/torcia/vision/data/digits.npz`` from scikit-learn's copy of the UCI
optdigits test set (1,797 8x8 images, pixels 0..16, CC BY 4.0).

Run once, from the repository root, with scikit-learn installed::

    python packages/vision/tools/make_digits.py

The file holds ``images`` (uint8, 1797x8x8, values 0..16 as published) and ``targets``
(uint8, 1797). The train/test split is not stored: ``torcia.vision.datasets.Digits`` draws
it from a fixed seed, so the file stays the data as published.
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

OUT = Path(__file__).resolve().parents[1] / "src" / "torcia" / "vision" / "data" / "digits.npz"


def main() -> None:
    digits = load_digits()
    images = digits.images.astype(np.uint8)
    # the source values are small integers stored as floats; check nothing was rounded away
    assert np.array_equal(images, digits.images) and images.max() == 16
    np.savez_compressed(OUT, images=images, targets=digits.target.astype(np.uint8))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(images)} images)")


if __name__ == "__main__":
    main()
