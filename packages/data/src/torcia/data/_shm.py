"""How a batch crosses from a worker process to the main process.

The batch is pickled with every CPU tensor and numpy array left out of the pickle: a
``persistent_id`` records each array, the arrays are then copied once into one new POSIX
shared-memory segment, and the message carries only the pickle of the structure, the
segment's name and each array's offset, dtype and shape. The main process maps the segment,
unlinks its name at once (so nothing is left in ``/dev/shm`` even if the main process dies
later), and rebuilds the batch with tensors that are views of the mapping; the memory is
freed when the last of those tensors is.

Segments are made with ``_posixshmem``, the module ``multiprocessing.shared_memory`` is built
on, rather than with ``SharedMemory``: in Python 3.11 that class registers every segment with
the resource tracker, which under fork starts a tracker process per worker and warns about
each segment another process unlinks. Leaks are handled here instead: every segment name
starts with a prefix owned by one DataLoader iterator, which removes what is left under that
prefix when it shuts its workers down (a worker killed half-way through a batch).
"""

from __future__ import annotations

import io
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
_ALIGN = 64


def available() -> bool:
    return _posixshmem is not None


class Packed(NamedTuple):
    """A batch on its way: the pickle without its arrays, their segment and layout."""

    data: bytes
    segment: tuple[str, int] | None  # (name, size); None when there are no array bytes
    layout: list[tuple]  # per array: (offset, dtype, shape, "tensor"|"ndarray", *flags)


class _ArrayPickler(pickle.Pickler):
    """Pickles everything but CPU tensors and plain numpy arrays, which it collects."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.arrays: list[np.ndarray] = []
        self.metas: list[tuple] = []

    def persistent_id(self, obj):
        if isinstance(obj, torcia.Tensor):
            if obj.device is not CPU:
                return None
            arr, kind = obj._data, ("tensor", obj.requires_grad)
        elif type(obj) is np.ndarray and not obj.dtype.hasobject:
            arr, kind = obj, ("ndarray",)
        else:
            return None
        self.arrays.append(arr)
        self.metas.append((arr.dtype.str, arr.shape) + kind)
        return len(self.arrays) - 1


def pack(obj, name: str) -> Packed:
    """The message that carries ``obj`` out of a worker, its arrays in segment ``name``."""
    buf = io.BytesIO()
    pickler = _ArrayPickler(buf)
    pickler.dump(obj)
    offsets, size = [], 0
    for arr in pickler.arrays:
        offsets.append(size)
        size += -(-arr.nbytes // _ALIGN) * _ALIGN
    if size == 0:
        return Packed(buf.getvalue(), None, [(0, *m) for m in pickler.metas])
    fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    try:
        os.ftruncate(fd, size)
        for arr, off in zip(pickler.arrays, offsets):
            _write(fd, arr, off)
    finally:
        os.close(fd)
    layout = [(off, *m) for off, m in zip(offsets, pickler.metas)]
    return Packed(buf.getvalue(), (name, size), layout)


def _write(fd: int, arr: np.ndarray, offset: int) -> None:
    # pwrite rather than a copy into a mapping: the kernel fills the new pages itself,
    # about twice as fast as faulting them in one by one from user space
    data = memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


class _ArrayUnpickler(pickle.Unpickler):
    def __init__(self, file, region, layout):
        super().__init__(file)
        self.region = region
        self.layout = layout

    def persistent_load(self, pid):
        offset, dtype, shape, kind, *flags = self.layout[pid]
        if self.region is None:  # only empty arrays travel without a segment
            arr = np.empty(shape, dtype)
        else:
            arr = np.ndarray(shape, dtype, buffer=self.region, offset=offset)
        if kind == "ndarray":
            return arr
        t = torcia.from_numpy(arr)
        return t.requires_grad_(True) if flags[0] else t


def unpack(message: Packed):
    """Rebuild the object :func:`pack` sent, unlinking its segment."""
    data, segment, layout = message
    region = None
    if segment is not None:
        name, size = segment
        fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
        try:
            region = mmap.mmap(fd, size)
        finally:
            os.close(fd)
            _posixshmem.shm_unlink("/" + name)
    return _ArrayUnpickler(io.BytesIO(data), region, layout).load()


def discard(message: Packed) -> None:
    """Unlink the segment of a message that will not be unpacked."""
    if message.segment is not None:
        unlink(message.segment[0])


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
