"""How a batch crosses from a worker process to the main process.

The batch is pickled with its large arrays left out: a pickle ``persistent_id`` picks out
every CPU tensor and numpy array of at least :data:`MIN_SHARED_BYTES`, and each is written
once into a new POSIX shared-memory segment of its own. The message carries the pickle of
the rest, and each array's segment name, dtype and shape. The main process maps each
segment, unlinks its name at once (so nothing is left in ``/dev/shm`` even if the main
process dies later), and rebuilds the batch with tensors that are views of the mappings.

A segment per array, not per batch, so that each tensor frees its own memory: keeping the
labels of every batch must not keep every batch's images. Smaller arrays travel inside the
pickle, where a copy costs less than a segment, and so hold no mapping at all. Each live
mapping holds a file descriptor (``mmap`` keeps one), so a program that keeps thousands of
large batch tensors alive needs a matching ``ulimit -n``.

Segments are made with ``_posixshmem``, the module ``multiprocessing.shared_memory`` is built
on, rather than with ``SharedMemory``: in Python 3.11 that class registers every segment with
the resource tracker, which under fork starts a tracker process per worker and warns about
each segment another process unlinks. Leaks are handled here instead: every segment name
starts with a prefix owned by one DataLoader iterator, which removes what is left under that
prefix when it shuts its workers down (a worker killed half-way through a batch).
"""

from __future__ import annotations

import io
import math
import mmap
import os
import pickle
from typing import NamedTuple

import numpy as np

import torcia
from torcia.backend import CPU

try:
    import _posixshmem
except ImportError:  # Windows: batches travel inside the pickle instead
    _posixshmem = None

#: Where Linux keeps POSIX shared memory; used to find a dead worker's leftovers.
SHM_DIR = "/dev/shm"
#: Arrays smaller than this travel inside the pickle.
MIN_SHARED_BYTES = 64 * 1024


def available() -> bool:
    return _posixshmem is not None


class Packed(NamedTuple):
    """A batch on its way: the pickle without its large arrays, and where they are."""

    data: bytes
    layout: list[tuple]  # per array: (segment name, dtype, shape, "tensor"|"ndarray", *flags)


class _ArrayPickler(pickle.Pickler):
    """Pickles everything but large CPU tensors and numpy arrays, which it writes to
    shared memory."""

    def __init__(self, file, prefix: str):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.prefix = prefix
        self.layout: list[tuple] = []

    def persistent_id(self, obj):
        if isinstance(obj, torcia.Tensor):
            if obj.device is not CPU:
                return None
            arr, kind = obj._data, ("tensor", obj.requires_grad)
        elif type(obj) is np.ndarray and not obj.dtype.hasobject:
            arr, kind = obj, ("ndarray",)
        else:
            return None
        if arr.nbytes < MIN_SHARED_BYTES:
            return None
        name = f"{self.prefix}_{len(self.layout)}"
        _write_segment(name, arr)
        # the dtype itself, not its string: bfloat16's string ("<V2") would lose the type
        self.layout.append((name, arr.dtype, arr.shape) + kind)
        return len(self.layout) - 1


def _write_segment(name: str, arr: np.ndarray) -> None:
    try:
        fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    except OSError as exc:
        raise _no_space(arr.nbytes, exc) from None
    try:
        os.ftruncate(fd, arr.nbytes)
        # pwrite rather than a copy into a mapping: the kernel fills the new pages itself,
        # about twice as fast as faulting them in one by one from user space
        data = memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
        offset = 0
        while data:
            written = os.pwrite(fd, data, offset)
            data, offset = data[written:], offset + written
    except OSError as exc:
        unlink(name)
        raise _no_space(arr.nbytes, exc) from None
    finally:
        os.close(fd)


def _no_space(nbytes: int, exc: OSError) -> RuntimeError:
    return RuntimeError(
        f"DataLoader worker could not put a {nbytes}-byte array of its batch in shared "
        f"memory ({exc}). {SHM_DIR} may be too small: in a container, give it more "
        "(docker run --shm-size=...), or use fewer workers or a smaller batch_size."
    )


def pack(obj, prefix: str) -> Packed:
    """The message that carries ``obj`` out of a worker; its segments are named
    ``prefix_0``, ``prefix_1``, ..."""
    buf = io.BytesIO()
    pickler = _ArrayPickler(buf, prefix)
    try:
        pickler.dump(obj)
    except BaseException:
        discard(Packed(b"", pickler.layout))
        raise
    return Packed(buf.getvalue(), pickler.layout)


class _ArrayUnpickler(pickle.Unpickler):
    def __init__(self, file, layout):
        super().__init__(file)
        self.layout = layout

    def persistent_load(self, pid):
        name, dtype, shape, kind, *flags = self.layout[pid]
        fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
        try:
            region = mmap.mmap(fd, dtype.itemsize * math.prod(shape))
        finally:
            os.close(fd)
            _posixshmem.shm_unlink("/" + name)
        arr = np.ndarray(shape, dtype, buffer=region)
        if kind == "ndarray":
            return arr
        t = torcia.from_numpy(arr)
        return t.requires_grad_(True) if flags[0] else t


def unpack(message: Packed):
    """Rebuild the object :func:`pack` sent, unlinking its segments."""
    try:
        return _ArrayUnpickler(io.BytesIO(message.data), message.layout).load()
    except BaseException:
        discard(message)  # the segments not reached yet
        raise


def discard(message: Packed) -> None:
    """Unlink the segments of a message that will not be unpacked."""
    for name, *_ in message.layout:
        unlink(name)


def unlink(name: str) -> None:
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        pass


def leftovers(prefix: str) -> list[str]:
    """Names of segments starting with ``prefix`` (Linux only; elsewhere none can be
    listed)."""
    try:
        return [n for n in os.listdir(SHM_DIR) if n.startswith(prefix)]
    except OSError:
        return []
