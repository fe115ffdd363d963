"""torcia-vision: image datasets, transforms, models and utilities with torchvision's
names, defaults and state-dict keys.

Submodules: :mod:`~torcia.vision.datasets`, :mod:`~torcia.vision.transforms`,
:mod:`~torcia.vision.models`, :mod:`~torcia.vision.ops`, :mod:`~torcia.vision.io` (image
files), :mod:`~torcia.vision.utils`, and the ``torcia-train``
script in :mod:`~torcia.vision.train`. They are imported on first use, so that the plugin
manager can load torcia-vision's entry point without importing torcia-nn.

Examples
--------
>>> import torcia.vision
>>> ds = torcia.vision.datasets.Digits(train=False)
>>> len(ds)
360
>>> "resnet18" in torcia.vision.models.list_models()
True
"""

import importlib

# adds vision's hook specifications and creates its registries, so that the plugin listing
# (python -m torcia plugins) can build them
from torcia.vision import _registry  # noqa: F401

__version__ = "0.1.0"

_SUBMODULES = ("datasets", "transforms", "models", "utils", "train", "io", "ops")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"torcia.vision.{name}")
    raise AttributeError(f"module 'torcia.vision' has no attribute {name!r}")
