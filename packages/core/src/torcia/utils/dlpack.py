"""DLPack, the array-interchange protocol, both ways, as ``torch.utils.dlpack``.

:func:`from_dlpack` makes a tensor over the memory of any object with ``__dlpack__``
(NumPy and CuPy arrays, PyTorch tensors, JAX arrays...) or of a DLPack capsule, without a
copy; ``Tensor.__dlpack__`` (and :func:`to_dlpack`, its capsule) hands a torcia tensor's
memory to another library the same way. A capsule can be consumed once.

Examples
--------
>>> import numpy as np
>>> import torcia
>>> from torcia.utils.dlpack import from_dlpack, to_dlpack
>>> a = np.zeros(3)
>>> t = from_dlpack(a)
>>> t[0] = 7.0
>>> a
array([7., 0., 0.])
>>> from_dlpack(to_dlpack(torcia.arange(3)))
tensor([0, 1, 2])
>>> np.from_dlpack(torcia.ones(2))
array([1., 1.], dtype=float32)
"""

from __future__ import annotations

import enum

from torcia._dlpack import from_dlpack

__all__ = ["DLDeviceType", "from_dlpack", "to_dlpack"]


class DLDeviceType(enum.IntEnum):
    """The device codes of the DLPack standard (``dlpack.h``'s ``DLDeviceType``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.dlpack import DLDeviceType
    >>> DLDeviceType(torcia.ones(1).__dlpack_device__()[0])
    <DLDeviceType.kDLCPU: 1>
    """

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


def to_dlpack(tensor):
    """A DLPack capsule over ``tensor``'s memory (no copy), for a library that takes
    capsules (``torch.utils.dlpack.from_dlpack``, ``cupy.from_dlpack``...).

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.dlpack import to_dlpack
    >>> to_dlpack(torcia.ones(2))
    <capsule object "dltensor" at 0x...>
    """
    return tensor.__dlpack__()
