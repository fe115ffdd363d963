"""``torch.version`` and ``torch.torch_version`` as the compat runner presents them.

A program run through :mod:`torcia.compat` sees ``torch.__version__`` as the PyTorch release
whose API torcia follows (:data:`TORCH_VERSION`), so that libraries which require a recent
PyTorch accept it; ``torcia.__version__`` stays torcia's own. The build facts are those of a
machine without CUDA or ROCm: ``cuda`` and ``hip`` are None.

Examples
--------
>>> from torcia.compat import version
>>> version.__version__ >= "2.0", version.__version__ < (3, 0), version.cuda
(True, True, None)
"""

from __future__ import annotations

import re

__all__ = ["TORCHVISION_VERSION", "TORCH_VERSION", "TorchVersion", "cuda", "debug",
           "git_version", "hip"]


class TorchVersion(str):
    """A version string that compares as a version with strings and tuples, as PyTorch's
    ``torch.torch_version.TorchVersion`` (``"2.13.0" > "2.9"``, ``>= (2, 1)``).

    Examples
    --------
    >>> from torcia.compat.version import TorchVersion
    >>> v = TorchVersion("2.13.0")
    >>> v > "2.9", v >= (2, 13), v == "2.13", str(v)
    (True, True, True, '2.13.0')
    """

    def _key(self, other) -> tuple:
        return _release(self), _release(other)

    def __gt__(self, other):
        a, b = self._key(other)
        return a > b

    def __ge__(self, other):
        a, b = self._key(other)
        return a >= b

    def __lt__(self, other):
        a, b = self._key(other)
        return a < b

    def __le__(self, other):
        a, b = self._key(other)
        return a <= b

    def __eq__(self, other):
        try:
            a, b = self._key(other)
        except ValueError:
            return str.__eq__(self, other)
        return a == b

    def __hash__(self):
        return str.__hash__(self)


def _release(v) -> tuple:
    """The release numbers of ``v`` (``"2.13.0+cpu"`` -> (2, 13)), trailing zeros dropped so
    that "2.13" equals "2.13.0"."""
    if isinstance(v, tuple):
        parts = [int(x) for x in v]
    else:
        m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(v))
        if m is None:
            raise ValueError(f"{v!r} is not a version")
        parts = [int(x) for x in m.group(1).split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


#: The PyTorch release whose API torcia follows (and its parity tests run against).
TORCH_VERSION = TorchVersion("2.13.0")

#: The torchvision release made with :data:`TORCH_VERSION`: what ``torchvision.__version__``
#: is under the compat runner (torcia-vision follows its API).
TORCHVISION_VERSION = TorchVersion("0.28.0")

__version__ = TORCH_VERSION
#: torcia is not built against CUDA or ROCm (its "cuda" device runs through CuPy)
cuda = None
hip = None
rocm = None
xpu = None
debug = False
git_version = "torcia"
