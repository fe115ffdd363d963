"""Host memory that other processes can map: what ``Tensor.share_memory_`` moves a tensor
into, and what :mod:`torcia.multiprocessing` sends in place of a tensor's bytes.

A segment is an anonymous file (``memfd_create`` on Linux; elsewhere a temporary file
removed at once) mapped with ``MAP_SHARED``. Its descriptor stays open while the mapping
lives, so the segment can be sent on: another process receives a duplicate of the
descriptor (through multiprocessing's own descriptor passing) and maps the same pages.
The memory is freed by the kernel once the last process unmaps it, so no name has to be
removed and a process that dies leaks nothing.
"""

from __future__ import annotations

import gc
import mmap
import os
import sys
import weakref

import numpy as np

from torcia._tensor import Tensor
from torcia.backend import CPU


class SharedMap(mmap.mmap):
    """A shared segment mapped into this process; ``fd`` is its open descriptor."""

    fd: int
    key: tuple


# the segments mapped here by (device, inode): a segment received twice (two views of one
# storage, or the same tensor sent again) maps once, so that its tensors alias here too
_MAPPED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _new_fd(size: int) -> int:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("torcia-shared", os.MFD_CLOEXEC)
    else:
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
        import tempfile  # with the first shared tensor: not a cost of import torcia

        fd, path = tempfile.mkstemp(prefix="torcia-shared-", dir=folder)
        os.unlink(path)
    os.ftruncate(fd, size)
    return fd


def map_segment(fd: int, size: int) -> SharedMap:
    """The mapping of the segment behind ``fd`` (taken over: closed with the mapping)."""
    info = os.fstat(fd)
    key = (info.st_dev, info.st_ino)
    mapped = _MAPPED.get(key)
    if mapped is not None:
        os.close(fd)
        return mapped
    mapped = SharedMap(fd, size)
    mapped.fd, mapped.key = fd, key
    weakref.finalize(mapped, os.close, fd)
    _MAPPED[key] = mapped
    return mapped


def new_segment(size: int) -> SharedMap:
    """A fresh segment of ``size`` bytes (at least one: an empty mapping is refused)."""
    size = max(int(size), 1)
    return map_segment(_new_fd(size), size)


def segment_of(arr: np.ndarray):
    """The shared segment holding ``arr``'s memory, or None."""
    owner = arr
    while owner is not None and not isinstance(owner, SharedMap):
        owner = getattr(owner, "base", None)
    return owner


def address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def offset_in(arr: np.ndarray, segment: SharedMap) -> int:
    """Where ``arr``'s first element lies in ``segment``, in bytes."""
    start = np.frombuffer(segment, dtype=np.uint8, count=0)
    return address(arr) - address(start)


def is_shared(t: Tensor) -> bool:
    if t._device is not CPU:
        return t._device.type == "cuda"  # CUDA memory is shareable as it is, as PyTorch says
    return segment_of(t._data) is not None


def share_memory_(t: Tensor) -> Tensor:
    """Move the memory under ``t`` into a shared segment, in place; see :func:`share`."""
    share([t])
    return t


def share(tensors) -> None:
    """Move the memory under each of ``tensors`` (its base's, for a view) into a shared
    segment, in place. Every tensor over that memory follows: the base, its views, and
    tensors over the same NumPy memory (a Parameter and the tensor it was made from).

    Those are found among the garbage collector's objects (NumPy arrays do not report
    their bases to it, so the tensors themselves are looked at): one scan of the heap,
    some milliseconds, for all of ``tensors`` at once (``Module.share_memory`` passes its
    parameters together), and none when nothing but the base holds the memory.
    """
    roots = {}
    for t in tensors:
        if t._device is CPU and not is_shared(t):
            root = t._base if t._base is not None else t
            roots[id(root)] = root
    followers = {key: [] for key in roots}
    crowded = [root for root in roots.values() if not _alone(root)]
    if crowded:
        owners = {id(_owner(root._data)): key for key, root in roots.items()}
        for t in gc.get_objects():
            # type(), not isinstance(): isinstance asks the object for __class__, and a
            # weakref.proxy on the heap whose referent has died raises ReferenceError
            if issubclass(type(t), Tensor):
                key = id(t._base) if id(t._base) in roots else owners.get(id(_owner(t._data)))
                if key is not None and t is not roots[key]:
                    followers[key].append(t)
    for key, root in roots.items():
        _move(root, followers[key])


def _owner(arr: np.ndarray) -> np.ndarray:
    """The array that owns ``arr``'s memory (NumPy makes a view's base the owner)."""
    return arr.base if isinstance(arr.base, np.ndarray) else arr


def _alone(root: Tensor) -> bool:
    # references to the owning array: root's own (its _data, or _data's base) and the
    # argument of getrefcount; any more is a view or another tensor over the memory
    return sys.getrefcount(_owner(root._data)) == 2


def _move(root: Tensor, followers) -> None:
    old = root._data
    if not (old.flags.c_contiguous or old.flags.f_contiguous):
        if followers:
            raise RuntimeError("share_memory_: the tensor's memory is not laid out "
                               "contiguously (a strided NumPy array given to from_numpy) "
                               "and has views; share a .contiguous() copy instead")
        old = np.ascontiguousarray(old)
    segment = new_segment(old.nbytes)
    new = np.ndarray(old.shape, old.dtype, buffer=segment, strides=old.strides)
    new[...] = old
    start, end = address(old), address(old) + old.nbytes
    for t in followers:
        arr = t._data
        if arr is root._data:
            t._data = new
        elif start <= address(arr) < end or arr.size == 0:
            t._data = np.ndarray(arr.shape, arr.dtype, buffer=segment,
                                 offset=min(address(arr) - start, old.nbytes),
                                 strides=arr.strides)
    root._data = new


def tensor_in(segment: SharedMap, dtype, shape, strides, offset) -> Tensor:
    """A CPU tensor over ``segment``'s memory."""
    arr = np.ndarray(shape, dtype.to_numpy(), buffer=segment, offset=offset, strides=strides)
    return Tensor._make(arr, CPU)
