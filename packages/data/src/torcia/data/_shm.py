"""How a batch crosses from a worker process to the main process.

The batch is pickled with its large arrays left out: a pickle ``persistent_id`` picks out
every CPU tensor and numpy array of at least :data:`MIN_SHARED_BYTES`, and each is written
once into a shared-memory segment of its own. The message carries the pickle of the rest
and each array's dtype and shape; the segments themselves follow it as file descriptors
over the same Unix socket (``SCM_RIGHTS``). The main process maps each one, closes the
descriptor, and rebuilds the batch with tensors that are views of the mappings.

The segments never have a name anyone could leave behind: on Linux they are anonymous
(``memfd_create``); elsewhere a POSIX segment is unlinked the moment it is opened, and
only its descriptor travels. So whatever ends the main process, SIGTERM or SIGKILL with
batches in flight, the kernel frees each segment with the last descriptor or mapping of
it, and nothing stays in ``/dev/shm``. Passing descriptors was chosen over a tracker
process that removes named segments when the main process dies: a tracker can itself be
killed (a signal to the whole process group), and it is one more process per loader.

A segment per array, not per batch, so that each tensor frees its own memory: keeping the
labels of every batch must not keep every batch's images. Smaller arrays travel inside the
pickle, where a copy costs less than a segment, and so hold no mapping at all. Each live
mapping holds a file descriptor (``mmap`` keeps one), so a program that keeps thousands of
large batch tensors alive needs a matching ``ulimit -n``.

POSIX segments are made with ``_posixshmem``, the module ``multiprocessing.shared_memory``
is built on, rather than with ``SharedMemory``: in Python 3.11 that class registers every
segment with the resource tracker, which under fork starts a tracker process per worker.
"""

from __future__ import annotations

import io
import math
import mmap
import os
import pickle
import socket
from multiprocessing import reduction
from typing import NamedTuple

import numpy as np

import torcia
from torcia.backend import CPU

try:
    import _posixshmem
except ImportError:  # Windows: batches travel inside the pickle instead
    _posixshmem = None

#: Where Linux keeps POSIX shared memory (named segments; this module leaves none there).
SHM_DIR = "/dev/shm"
#: At most this many descriptors go in one message (Linux takes up to 253).
_FDS_PER_MESSAGE = 250
#: Arrays smaller than this travel inside the pickle.
MIN_SHARED_BYTES = 64 * 1024


def available() -> bool:
    return hasattr(os, "memfd_create") or (_posixshmem is not None
                                           and hasattr(socket, "CMSG_SPACE"))


class Packed(NamedTuple):
    """A batch on its way: the pickle without its large arrays, their layout, and the
    descriptors of their segments (this process's: :func:`send` and :func:`receive` move
    them across)."""

    data: bytes
    layout: list[tuple]  # per array: (dtype, shape, "tensor"|"ndarray", *flags)
    fds: list[int]


class _ArrayPickler(pickle.Pickler):
    """Pickles everything but large CPU tensors and numpy arrays, which it writes to
    shared memory."""

    def __init__(self, file, prefix: str):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.prefix = prefix
        self.layout: list[tuple] = []
        self.fds: list[int] = []

    def persistent_id(self, obj):
        if isinstance(obj, torcia.Tensor):
            if obj.device is not CPU:
                return None
            arr, kind = obj.__torcia_data__, ("tensor", obj.requires_grad)
        elif type(obj) is np.ndarray and not obj.dtype.hasobject:
            arr, kind = obj, ("ndarray",)
        else:
            return None
        if arr.nbytes < MIN_SHARED_BYTES:
            return None
        self.fds.append(_write_segment(f"{self.prefix}_{len(self.layout)}", arr))
        # the dtype itself, not its string: bfloat16's string ("<V2") would lose the type
        self.layout.append((arr.dtype, arr.shape) + kind)
        return len(self.layout) - 1


def _new_segment(name: str) -> int:
    """A descriptor of a new shared-memory segment that has no name in the file system."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create(name, os.MFD_CLOEXEC)
    fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    _posixshmem.shm_unlink("/" + name)  # the descriptor keeps the memory
    return fd


def _write_segment(name: str, arr: np.ndarray) -> int:
    try:
        fd = _new_segment(name)
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
        os.close(fd)
        raise _no_space(arr.nbytes, exc) from None
    return fd


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
        discard(Packed(b"", pickler.layout, pickler.fds))
        raise
    return Packed(buf.getvalue(), pickler.layout, pickler.fds)


def send(conn, item, message: Packed) -> None:
    """Send ``item`` (which holds ``message`` without its descriptors: see
    :meth:`Packed._replace`) on the socket connection ``conn``, then the descriptors, then
    close them here (the receiver holds its own copies from then on)."""
    try:
        conn.send(item)
        if message.fds:
            with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                for i in range(0, len(message.fds), _FDS_PER_MESSAGE):
                    reduction.sendfds(sock, message.fds[i:i + _FDS_PER_MESSAGE])
    finally:
        discard(message)


def receive(conn, message: Packed) -> Packed:
    """``message`` as :func:`send` sent it on ``conn``, with the descriptors that follow
    it; EOFError when the sender died before they came."""
    fds: list[int] = []
    if message.layout:
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            while len(fds) < len(message.layout):
                want = min(_FDS_PER_MESSAGE, len(message.layout) - len(fds))
                try:
                    fds += reduction.recvfds(sock, want)
                except (RuntimeError, OSError) as exc:
                    discard(message._replace(fds=fds))
                    raise EOFError(f"the sender of a batch ended before its arrays came: "
                                   f"{exc}") from None
    return message._replace(fds=fds)


class _ArrayUnpickler(pickle.Unpickler):
    def __init__(self, file, layout, fds):
        super().__init__(file)
        self.layout = layout
        self.fds = fds

    def persistent_load(self, pid):
        dtype, shape, kind, *flags = self.layout[pid]
        fd = self.fds[pid]
        self.fds[pid] = -1
        try:
            region = mmap.mmap(fd, dtype.itemsize * math.prod(shape))
        finally:
            os.close(fd)
        arr = np.ndarray(shape, dtype, buffer=region)
        if kind == "ndarray":
            return arr
        t = torcia.from_numpy(arr)
        return t.requires_grad_(True) if flags[0] else t


def unpack(message: Packed):
    """Rebuild the object :func:`pack` made, closing the segments' descriptors (each
    mapping keeps its segment)."""
    fds = list(message.fds)
    try:
        return _ArrayUnpickler(io.BytesIO(message.data), message.layout, fds).load()
    finally:
        discard(message._replace(fds=fds))  # the descriptors not reached


def discard(message: Packed) -> None:
    """Close the descriptors of a message that will not be unpacked: the kernel frees
    each segment with its last descriptor."""
    for fd in message.fds:
        if fd >= 0:
            os.close(fd)


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
