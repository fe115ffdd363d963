"""A NumPy stand-in for the parts of CuPy torcia-cuda uses, injected as ``cupy`` in
``sys.modules`` so that the plugin's own probe, backend, kernels and runtime run unchanged.

Device memory is emulated by copying on every transfer; the memory pool counts the bytes of
the arrays made through ``asarray`` while they are alive.

``cupy.cuda.nccl`` is there too, with communicators that really exchange data between
processes (through a TCPStore that ``get_unique_id`` starts, as NCCL's bootstrap does).
Their operations run in order on one worker thread, this fake device's stream, and read
and write the arrays through their addresses, as NCCL does device memory; events recorded
after them are done when the worker has got there, so a peer that never answers leaves
them pending, as on a GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import queue
import struct
import sys
import threading
import traceback
import types
import weakref

import numpy as np


class _Pool:
    def __init__(self):
        self._live = weakref.WeakValueDictionary()
        self.limit_fraction = None
        self.mallocs = 0

    def track(self, arr):
        self._live[id(arr)] = arr
        return arr

    def used_bytes(self):
        return sum(a.nbytes for a in self._live.values())

    def total_bytes(self):
        return self.used_bytes()

    def malloc(self, size):
        self.mallocs += 1
        return size

    def free_all_blocks(self):
        return None

    def set_limit(self, size=None, fraction=None):
        self.limit_fraction = fraction


class _Runtime:
    def __init__(self, count):
        self.count = count
        self.current = 0
        self.synchronized = 0

    def getDeviceCount(self):  # noqa: N802 - CUDA's names
        return self.count

    def getDevice(self):  # noqa: N802
        return self.current

    def setDevice(self, index):  # noqa: N802
        if not 0 <= index < self.count:
            raise RuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {index}")
        self.current = index

    def deviceSynchronize(self):  # noqa: N802
        self.synchronized += 1

    def getDeviceProperties(self, index):  # noqa: N802
        return {"name": f"Fake GPU {index}".encode(), "major": 9, "minor": 0,
                "totalGlobalMem": 80 << 30, "multiProcessorCount": 132, "l2CacheSize": 50 << 20,
                "warpSize": 32, "uuid": bytes(range(16))}

    def memGetInfo(self):  # noqa: N802
        return 70 << 30, 80 << 30

    def deviceCanAccessPeer(self, device, peer):  # noqa: N802
        return int(device != peer)

    streamCaptureModeGlobal, streamCaptureModeThreadLocal, streamCaptureModeRelaxed = 0, 1, 2


class _DeviceQueue:
    """The fake device's stream: jobs run in order on a worker thread."""

    def __init__(self):
        self.jobs = queue.Queue()
        self.enqueued = 0
        self.completed = 0
        self.lock = threading.Lock()
        self.thread = None

    def submit(self, job):
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="fake-stream", daemon=True)
                self.thread.start()
            self.enqueued += 1
        self.jobs.put(job)

    def _run(self):
        while True:
            job = self.jobs.get()
            try:
                job()
            except Exception:  # noqa: BLE001 - a failed job stalls the stream, as a hung kernel
                traceback.print_exc()
                return
            self.completed += 1


_DEVICE = _DeviceQueue()


class _Stream:
    """A stream of the fake device: its work runs on the one worker (``_DEVICE``); the
    current stream is per fake module (``_CURRENT``), as CuPy's is per thread."""

    _made = itertools.count(1)

    def __init__(self, null=False, non_blocking=False, priority=0, ptr=None):
        self.ptr = 0 if null else (ptr if ptr is not None else 0x1000 + next(self._made))
        self.priority = priority
        self.capturing = False

    @property
    def done(self):
        return _DEVICE.completed >= _DEVICE.enqueued

    def synchronize(self):
        return None

    def wait_event(self, event):
        return None

    def use(self):
        _CURRENT[0] = self
        return self

    def is_capturing(self):
        return self.capturing

    def begin_capture(self, mode=None):
        if self.ptr == 0:
            raise RuntimeError("cudaErrorStreamCaptureUnsupported: the legacy stream cannot "
                               "be captured")
        self.capturing = True
        self.capture_mode = mode

    def end_capture(self):
        self.capturing = False
        return _Graph()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_Stream.null = _Stream(null=True)
_CURRENT = [_Stream.null]


class _Graph:
    """What a capture returns: here it only counts its launches (NumPy ran the captured
    work at once; the real replay is checked on a GPU, tests/test_cupy.py)."""

    def __init__(self):
        self.launches = 0

    def launch(self, stream=None):
        self.launches += 1


class _Event:
    _made = itertools.count(1)

    def __init__(self, block=False, disable_timing=False):
        self.ptr = 0x9000 + next(self._made)
        self.mark = 0
        self.time = 0.0

    @property
    def done(self):
        return _DEVICE.completed >= self.mark

    def record(self, stream=None):
        import time

        self.mark = _DEVICE.enqueued
        self.time = time.perf_counter()

    def synchronize(self):
        return None


def make(count=2):
    """A fresh fake ``cupy`` module with ``count`` devices."""
    cp = types.ModuleType("cupy")
    pool = _Pool()
    runtime = _Runtime(count)

    def asarray(a, dtype=None):
        return pool.track(np.array(a, dtype=dtype, copy=True))

    cp.ndarray = np.ndarray
    cp.asarray = asarray
    def asnumpy(a, stream=None, order="C", out=None, blocking=True):
        if out is None:
            return np.array(a, copy=True)
        out[...] = a
        return out

    cp.asnumpy = asnumpy
    cp.get_default_memory_pool = lambda: pool
    cp.random = types.SimpleNamespace(seed=lambda s: None)
    allocator = [None]

    def set_allocator(fn):
        allocator[0] = fn

    _CURRENT[0] = _Stream.null
    cp.cuda = types.SimpleNamespace(
        runtime=runtime, set_allocator=set_allocator, allocator=allocator, Stream=_Stream,
        Event=_Event, Device=lambda index: contextlib.nullcontext(), MemoryPool=_Pool,
        ExternalStream=lambda ptr: _Stream(ptr=ptr),
        get_current_stream=lambda: _CURRENT[0],
        get_elapsed_time=lambda a, b: (b.time - a.time) * 1e3, nccl=_nccl_module(),
        PinnedMemoryPointer=PinnedMemoryPointer,
    )
    # CuPy's GEMM compute type, which the runtime sets from allow_tf32
    compute = {}
    cp._core = types.SimpleNamespace(_routines_linalg=types.SimpleNamespace(
        COMPUTE_TYPE_DEFAULT="default", COMPUTE_TYPE_TF32="tf32", compute=compute,
        set_compute_type=lambda dtype, kind: compute.__setitem__(np.dtype(dtype), kind)))
    for name in ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
                 "full_like", "arange", "eye", "linspace"):
        setattr(cp, name, _tracked(pool, getattr(np, name)))
    cp.__getattr__ = lambda name: getattr(np, name)  # the rest of the array API is NumPy's
    return cp


class PinnedMemoryPointer(bytearray):
    """Page-locked host memory: here ordinary memory, owned as CuPy's is by an object of
    this type at the end of the array's ``base`` chain."""


def empty_pinned(shape, dtype=np.float64):
    """``cupyx.empty_pinned``: a NumPy array over a :class:`PinnedMemoryPointer`."""
    dtype = np.dtype(dtype)
    mem = PinnedMemoryPointer(int(np.prod(shape)) * dtype.itemsize)
    return np.ndarray(shape, dtype, mem)  # as CuPy makes it: the memory is the base


def _tracked(pool, fn):
    """``fn`` with its result counted by the pool, as CuPy allocates through its pool."""

    def allocate(*args, **kwargs):
        return pool.track(fn(*args, **kwargs))

    return allocate


def install(monkeypatch=None, count=2):
    """Put a fake ``cupy`` (with ``cupy.cuda.nccl``), and ``cupyx`` (``empty_pinned``, and
    ``cupyx.scipy.special`` as SciPy's) in ``sys.modules``: through ``monkeypatch`` in
    tests, for good in a worker process."""
    setitem = monkeypatch.setitem if monkeypatch is not None else dict.__setitem__
    cp = make(count)
    setitem(sys.modules, "cupy", cp)
    setitem(sys.modules, "cupy.cuda", cp.cuda)
    setitem(sys.modules, "cupy.cuda.nccl", cp.cuda.nccl)
    cupyx = types.ModuleType("cupyx")
    cupyx.empty_pinned = empty_pinned
    setitem(sys.modules, "cupyx", cupyx)
    try:
        import scipy.special as special

        cupyx.scipy = types.SimpleNamespace(special=special)
        setitem(sys.modules, "cupyx.scipy", cupyx.scipy)
        setitem(sys.modules, "cupyx.scipy.special", special)
    except ImportError:
        pass
    return cp


# ---------------------------------------------------------------------------------------
# cupy.cuda.nccl
# ---------------------------------------------------------------------------------------

_OPS = {0: np.add, 1: np.multiply, 2: np.maximum, 3: np.minimum}
_TYPE_NAMES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
               "float64", "bfloat16")
_STORES = []  # the bootstrap stores this process serves, kept alive
_GROUP = {"depth": 0, "jobs": []}  # the jobs of open groupStart()s, as (phase, job)


def _dtype(code):
    if _TYPE_NAMES[code] == "bfloat16":
        import torcia

        return torcia.bfloat16.to_numpy()
    return np.dtype(_TYPE_NAMES[code])


def _read(ptr, count, code):
    dtype = _dtype(code)
    return np.frombuffer(ctypes.string_at(ptr, count * dtype.itemsize), dtype=dtype)


def _write(ptr, arr):
    data = np.ascontiguousarray(arr).tobytes()
    ctypes.memmove(ptr, data, len(data))


def _get_unique_id():
    from torcia.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=60)
    _STORES.append(store)
    return struct.unpack("128b", f"127.0.0.1:{store.port}".encode().ljust(128, b"\0"))


def _group_start():
    _GROUP["depth"] += 1


def _group_end():
    _GROUP["depth"] -= 1
    if _GROUP["depth"]:
        return
    # NCCL runs a group's calls together; one stream can by posting every send, then
    # receiving, then waiting for the sends to be taken (sorted is stable within a phase)
    jobs = [job for _, job in sorted(_GROUP["jobs"], key=lambda j: j[0])]
    _GROUP["jobs"] = []
    _DEVICE.submit(lambda: [job() for job in jobs])


class _Communicator:
    """NCCL's communicator, over a TCPStore: each rank posts its data under the
    operation's sequence number and reads the others'. The process that serves the store
    finishes an operation only once every rank has read, so that it cannot exit (taking
    the store along) while a peer still needs it, as NCCL's peers cannot lose data that
    a finished rank has sent."""

    def __init__(self, ndev, commId, rank):  # noqa: N803 - CuPy's names
        from torcia.distributed import TCPStore

        host, port = struct.pack("128b", *commId).rstrip(b"\0").decode().rsplit(":", 1)
        self.store = TCPStore(host, int(port), timeout=60)
        self.serves = any(s.port == int(port) for s in _STORES)
        self.rank, self.size = rank, ndev
        self.calls = itertools.count()
        self.messages = {}
        self.aborted = False

    def _submit(self, job, phase=1):
        if _GROUP["depth"]:
            _GROUP["jobs"].append((phase, job))
        else:
            _DEVICE.submit(job)

    def _exchange(self, payload, combine):
        """Post ``payload()`` and hand every rank's to ``combine``, when the job runs."""
        seq = next(self.calls)

        def job():
            self.store.set(f"{seq}/{self.rank}", payload())
            combine([self.store.get(f"{seq}/{r}") for r in range(self.size)])
            if self.store.add(f"{seq}/read", 1) == self.size:
                self.store.set(f"{seq}/all read", b"")
            if self.serves:
                self.store.get(f"{seq}/all read")

        self._submit(job)

    def _reduced(self, parts, code, op):
        return functools.reduce(_OPS[op], [np.frombuffer(p, dtype=_dtype(code)) for p in parts])

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):  # noqa: N802
        self._exchange(lambda: _read(sendbuf, count, datatype).tobytes(),
                       lambda parts: _write(recvbuf, self._reduced(parts, datatype, op)))

    def reduce(self, sendbuf, recvbuf, count, datatype, op, root, stream):
        def combine(parts):
            if self.rank == root:
                _write(recvbuf, self._reduced(parts, datatype, op))

        self._exchange(lambda: _read(sendbuf, count, datatype).tobytes(), combine)

    def bcast(self, buff, count, datatype, root, stream):
        self.broadcast(buff, buff, count, datatype, root, stream)

    def broadcast(self, sendbuff, recvbuff, count, datatype, root, stream):
        self._exchange(
            lambda: _read(sendbuff, count, datatype).tobytes() if self.rank == root else b"",
            lambda parts: ctypes.memmove(recvbuff, parts[root], len(parts[root])))

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):  # noqa: N802
        def combine(parts):
            data = b"".join(parts)
            ctypes.memmove(recvbuf, data, len(data))

        self._exchange(lambda: _read(sendbuf, count, datatype).tobytes(), combine)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):  # noqa: N802
        mine = slice(self.rank * recvcount, (self.rank + 1) * recvcount)
        self._exchange(
            lambda: _read(sendbuf, recvcount * self.size, datatype).tobytes(),
            lambda parts: _write(recvbuf, self._reduced(parts, datatype, op)[mine]))

    def _key(self, src, dst):
        n = self.messages.get((src, dst), 0)
        self.messages[(src, dst)] = n + 1
        return f"p2p/{src}/{dst}/{n}"

    def send(self, sendbuf, count, datatype, peer, stream):
        # as NCCL's, a send is done when its receiver has the data
        key = self._key(self.rank, peer)
        self._submit(lambda: self.store.set(key, _read(sendbuf, count, datatype).tobytes()),
                     phase=0)
        self._submit(lambda: self.store.get(f"{key}/taken"), phase=2)

    def recv(self, recvbuf, count, datatype, peer, stream):
        key = self._key(peer, self.rank)

        def job():
            ctypes.memmove(recvbuf, self.store.get(key), count * _dtype(datatype).itemsize)
            self.store.set(f"{key}/taken", b"")

        self._submit(job)

    def abort(self):
        self.aborted = True

    def destroy(self):
        return None


def _nccl_module():
    nccl = types.ModuleType("cupy.cuda.nccl")
    nccl.available = True
    for code, name in enumerate(("SUM", "PROD", "MAX", "MIN", "AVG")):
        setattr(nccl, f"NCCL_{name}", code)
    for code, name in enumerate(_TYPE_NAMES):
        setattr(nccl, f"NCCL_{name.upper()}", code)
    nccl.get_unique_id = _get_unique_id
    nccl.groupStart = _group_start
    nccl.groupEnd = _group_end
    nccl.NcclCommunicator = _Communicator
    return nccl
