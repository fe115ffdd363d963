"""DLPack import: :func:`from_dlpack` of protocol objects and of raw capsules (the
public module is :mod:`torcia.utils.dlpack`; ``Tensor.__dlpack__`` is the export)."""

from __future__ import annotations

import ctypes

import numpy as np

from torcia import _dtype as D
from torcia import backend
from torcia._tensor import Tensor, canonical_device
from torcia.backend import CPU

#: DLPack device codes whose memory the host reads (CPU, CUDA-pinned host memory) and
#: those a CUDA device holds (device memory, managed memory)
_HOST_KINDS = (1, 3)
_CUDA_KINDS = (2, 13)


class _Capsule:
    """A DLPack capsule dressed as an object of the protocol, which is what the array
    modules' ``from_dlpack`` take: the capsule itself, and the device its ``DLTensor``
    names."""

    def __init__(self, capsule):
        self._capsule = capsule
        self._device = capsule_device(capsule)

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return self._device


_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype, _get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                ctypes.c_char_p]
#: where ``DLTensor.device`` sits in the struct a capsule points to: after the data pointer
#: of the ``DLTensor`` that opens a ``DLManagedTensor``, and after the version, manager
#: context, deleter and flags that precede it in a ``DLManagedTensorVersioned``
_DEVICE_OFFSET = {b"dltensor": ctypes.sizeof(ctypes.c_void_p),
                  b"dltensor_versioned": 8 + 3 * ctypes.sizeof(ctypes.c_void_p) + 8}


def capsule_device(capsule) -> tuple[int, int]:
    """The ``(device_type, device_id)`` of an unconsumed DLPack capsule."""
    name = _get_name(capsule)
    if name not in _DEVICE_OFFSET:
        raise RuntimeError("from_dlpack received an invalid capsule. Note that DLTensor "
                           "capsules can be consumed only once, so you might have already "
                           "constructed a tensor from it once.")
    base = _get_pointer(capsule, name)
    device = (ctypes.c_int32 * 2).from_address(base + _DEVICE_OFFSET[name])
    return int(device[0]), int(device[1])


def _writable(arr: np.ndarray) -> np.ndarray:
    """A writable array over the memory of ``arr``, which NumPy made read-only because
    an unversioned capsule cannot say whether its memory may be written; PyTorch takes
    such memory as writable, and so does torcia. The new array keeps ``arr`` (and so the
    capsule's memory) alive."""
    if arr.flags.writeable or arr.size == 0:
        return arr
    extent = [(n - 1) * st for n, st in zip(arr.shape, arr.strides)]
    low = sum(e for e in extent if e < 0)
    span = sum(e for e in extent if e > 0) - low + arr.itemsize
    buffer = (ctypes.c_char * span).from_address(arr.ctypes.data + low)
    buffer.owner = arr
    return np.ndarray(arr.shape, arr.dtype, buffer=buffer, offset=-low, strides=arr.strides)


def from_dlpack(ext, *, device=None, copy=None) -> Tensor:
    """A tensor sharing memory with ``ext``: an object implementing the DLPack protocol
    (NumPy or CuPy array, PyTorch tensor...) or a DLPack capsule.

    Parameters
    ----------
    ext : object with ``__dlpack__``, or a capsule
        The memory to wrap; a capsule is consumed.
    device : torcia.device or str, optional
        Where the result goes (a copy when that is not where ``ext`` lives).
    copy : bool, optional
        True: always copy; False: never (an error if a copy is needed); None: only when
        ``device`` needs it.

    Examples
    --------
    >>> import torcia
    >>> import numpy as np
    >>> a = np.arange(3.0)
    >>> t = torcia.from_dlpack(a)
    >>> a[0] = 5.0
    >>> t
    tensor([5., 1., 2.], dtype=torcia.float64)
    """
    if isinstance(ext, Tensor):
        out = ext
    else:
        legacy = False
        if type(ext).__name__ == "PyCapsule":
            legacy = _get_name(ext) == b"dltensor"
            ext = _Capsule(ext)
        elif not hasattr(ext, "__dlpack__"):
            raise TypeError(f"from_dlpack: expected an object implementing __dlpack__ or a "
                            f"DLPack capsule, got {type(ext).__name__}")
        kind, index = ext.__dlpack_device__() if hasattr(ext, "__dlpack_device__") else (1, 0)
        kind = int(kind)
        if kind in _HOST_KINDS:
            arr = np.from_dlpack(ext)
            out = Tensor._make(D.native_array(_writable(arr) if legacy else arr), CPU)
        elif kind in _CUDA_KINDS:
            dev = backend.device("cuda", int(index))
            out = Tensor._make(dev.backend.xp.from_dlpack(ext), dev)
        else:
            raise RuntimeError(f"from_dlpack: memory of DLPack device type {kind} is not "
                               "supported (CPU and CUDA are)")
    target = out._device if device is None else canonical_device(device)
    if target is not out._device:
        if copy is False:
            raise ValueError(f"from_dlpack: copy=False, but the memory is on "
                             f"{out._device} and device={target} was asked for")
        return out.to(target)
    return out.clone() if copy else out
