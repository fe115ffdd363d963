"""What ``torcia.cuda`` delegates to: devices, streams, events, graphs, memory statistics.

Core's ``torcia.cuda`` holds PyTorch's classes (``Stream``, ``Event``, ``CUDAGraph``...);
each wraps a handle this runtime makes over CuPy (:class:`StreamHandle`,
:class:`EventHandle`, :class:`GraphHandle`), so that core never touches CuPy.

Memory statistics come from CuPy's memory pool, which every CuPy allocation goes
through: the runtime installs an allocator over it that counts allocations and keeps the
peaks of the bytes in use and held, per device (CuPy's pool keeps no peak).
"""

from __future__ import annotations

import contextlib

#: PyTorch's capture_error_mode -> the name of CuPy's constant
_CAPTURE_MODES = {"global": "streamCaptureModeGlobal",
                  "thread_local": "streamCaptureModeThreadLocal",
                  "relaxed": "streamCaptureModeRelaxed"}


class _Counters:
    """One device's allocation counters (what CuPy's pool does not keep)."""

    __slots__ = ("allocated_peak", "reserved_peak", "allocations")

    def __init__(self):
        self.allocated_peak = 0
        self.reserved_peak = 0
        self.allocations = 0


class CupyRuntime:
    """The CUDA runtime services, over CuPy."""

    def __init__(self, cupy):
        self.cp = cupy
        self._counters: dict[int, _Counters] = {}
        self._pool = cupy.get_default_memory_pool()
        self._fraction: dict[int, float] = {}
        self._errors: list = []  # the errors of the checks since the device last answered
        self._failed: dict = {}  # device -> 0-d int32: the first failed check's number
        cupy.cuda.set_allocator(self.tracking(self._pool))

    def tracking(self, pool):
        """An allocator over ``pool`` that keeps the current device's counters."""
        runtime = self.cp.cuda.runtime

        def malloc(size):
            mem = pool.malloc(size)
            c = self._counter(runtime.getDevice())
            c.allocations += 1
            used, held = pool.used_bytes(), pool.total_bytes()
            if used > c.allocated_peak:
                c.allocated_peak = used
            if held > c.reserved_peak:
                c.reserved_peak = held
            return mem

        return malloc

    def _counter(self, dev) -> _Counters:
        c = self._counters.get(dev)
        if c is None:
            c = self._counters[dev] = _Counters()
        return c

    # ----- devices -------------------------------------------------------------------
    def device_count(self) -> int:
        return self.cp.cuda.runtime.getDeviceCount()

    def current_device(self) -> int:
        return self.cp.cuda.runtime.getDevice()

    def set_device(self, index: int) -> None:
        self.cp.cuda.runtime.setDevice(index)

    def device_context(self, index):
        return self.cp.cuda.Device(index) if index is not None else contextlib.nullcontext()

    def synchronize(self, index=None) -> None:
        with self.device_context(index):
            self.cp.cuda.runtime.deviceSynchronize()
        self.raise_pending()

    # ----- checks the device answers later (PyTorch's device-side asserts) -------------
    #: checks kept before the device is asked (a wait) about them
    MAX_PENDING_CHECKS = 1024

    def assert_async(self, bad, error) -> None:
        """Raise ``error()`` if the device finds ``bad`` (a 0-d boolean array) true,
        without waiting for it now: the device notes the number of the first failed
        check in a counter of its own, which the next synchronisation or copy to the
        host reads (:meth:`raise_pending`), as PyTorch's device-side asserts report."""
        cp = self.cp
        dev = self.current_device()
        failed = self._failed.get(dev)
        if failed is None:
            failed = self._failed[dev] = cp.zeros((), dtype=cp.int32)
        self._errors.append(error)
        number = len(self._errors)
        failed[...] = cp.where(bad & (failed == 0), number, failed)
        if number >= self.MAX_PENDING_CHECKS:
            self.raise_pending()

    def raise_pending(self) -> None:
        """Raise the first error of :meth:`assert_async` whose check the device failed
        (a wait for the device, which callers do anyway)."""
        if not self._errors:
            return
        errors, self._errors = self._errors, []
        first = 0
        for failed in self._failed.values():
            number = int(failed)
            if number and (not first or number < first):
                first = number
            failed.fill(0)
        if first:
            raise errors[first - 1]()

    def to_host(self, arr):
        """``arr`` copied to a NumPy array (a synchronisation: pending checks answer)."""
        out = self.cp.asnumpy(arr)
        if self._errors:
            self.raise_pending()
        return out

    def device_properties(self, index=None) -> dict:
        """PyTorch's ``_CudaDeviceProperties`` fields, from ``cudaGetDeviceProperties``."""
        dev = self.current_device() if index is None else index
        p = self.cp.cuda.runtime.getDeviceProperties(dev)
        uuid = p.get("uuid", b"")
        if isinstance(uuid, bytes) and len(uuid) == 16:
            h = uuid.hex()
            uuid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        return {
            "name": p["name"].decode() if isinstance(p["name"], bytes) else p["name"],
            "major": p.get("major", 0), "minor": p.get("minor", 0),
            "total_memory": p.get("totalGlobalMem", 0),
            "multi_processor_count": p.get("multiProcessorCount", 0),
            "is_integrated": p.get("integrated", 0),
            "is_multi_gpu_board": p.get("isMultiGpuBoard", 0),
            "max_threads_per_multi_processor": p.get("maxThreadsPerMultiProcessor", 0),
            "warp_size": p.get("warpSize", 32),
            "regs_per_multiprocessor": p.get("regsPerMultiprocessor", 0),
            "shared_memory_per_block": p.get("sharedMemPerBlock", 0),
            "shared_memory_per_block_optin": p.get("sharedMemPerBlockOptin", 0),
            "shared_memory_per_multiprocessor": p.get("sharedMemPerMultiprocessor", 0),
            "L2_cache_size": p.get("l2CacheSize", 0),
            "memory_bus_width": p.get("memoryBusWidth", 0),
            "uuid": str(uuid),
        }

    def get_device_name(self, index=None) -> str:
        return self.device_properties(index)["name"]

    def mem_get_info(self, index=None) -> tuple[int, int]:
        """(free, total) bytes of the device, as the driver counts them."""
        with self.device_context(index):
            return tuple(self.cp.cuda.runtime.memGetInfo())

    def can_device_access_peer(self, index, peer) -> bool:
        return bool(self.cp.cuda.runtime.deviceCanAccessPeer(index, peer))

    def apply_matmul_flags(self, flags) -> None:
        """``torcia.backends.cuda.matmul.allow_tf32``: CuPy's float32 GEMMs on TF32 tensor
        cores, or in full float32 (CuPy's compute-type setting, which its matmul, dot and
        tensordot read at each call)."""
        import numpy as np

        linalg = self.cp._core._routines_linalg
        kind = linalg.COMPUTE_TYPE_TF32 if flags.allow_tf32 else linalg.COMPUTE_TYPE_DEFAULT
        linalg.set_compute_type(np.float32, kind)

    # ----- random numbers: CuPy's generator (torcia's random ops draw on the host) -----
    def manual_seed(self, seed: int) -> None:
        self.cp.random.seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        for i in range(self.device_count()):
            with self.cp.cuda.Device(i):
                self.cp.random.seed(seed)

    # ----- memory --------------------------------------------------------------------
    def memory_stats(self, index=None) -> dict:
        """PyTorch's ``memory_stats`` keys that CuPy's pool can answer."""
        with self.device_context(index):
            dev = self.current_device()
            used, held = self._pool.used_bytes(), self._pool.total_bytes()
        c = self._counter(dev)
        c.allocated_peak, c.reserved_peak = max(c.allocated_peak, used), max(c.reserved_peak,
                                                                              held)
        return {"allocated_bytes.all.current": used, "allocated_bytes.all.peak": c.allocated_peak,
                "reserved_bytes.all.current": held, "reserved_bytes.all.peak": c.reserved_peak,
                "allocation.all.allocated": c.allocations}

    def reset_peak_memory_stats(self, index=None) -> None:
        with self.device_context(index):
            c = self._counter(self.current_device())
            c.allocated_peak, c.reserved_peak = self._pool.used_bytes(), self._pool.total_bytes()

    def reset_accumulated_memory_stats(self, index=None) -> None:
        with self.device_context(index):
            self._counter(self.current_device()).allocations = 0

    def empty_cache(self) -> None:
        self._pool.free_all_blocks()

    def set_per_process_memory_fraction(self, fraction: float, index=None) -> None:
        """Cap CuPy's pool at ``fraction`` of the device's memory (its ``set_limit``)."""
        with self.device_context(index):
            self._pool.set_limit(fraction=fraction)
            self._fraction[self.current_device()] = fraction

    def get_per_process_memory_fraction(self, index=None) -> float:
        with self.device_context(index):
            return self._fraction.get(self.current_device(), 1.0)

    # ----- pinned host memory --------------------------------------------------------
    def pin(self, arr):
        """A copy of NumPy array ``arr`` in page-locked host memory."""
        import cupyx

        out = cupyx.empty_pinned(arr.shape, dtype=arr.dtype)
        out[...] = arr
        return out

    def is_pinned(self, arr) -> bool:
        """Whether NumPy array ``arr`` lies in page-locked memory from :meth:`pin`."""
        base = arr
        while base is not None:
            if isinstance(base, self.cp.cuda.PinnedMemoryPointer):
                return True
            base = getattr(base, "base", None)
        return False

    # ----- streams, events, graphs ---------------------------------------------------
    def Stream(self, index=None, priority=0):  # noqa: N802 - torcia.cuda.Stream's maker
        with self.device_context(index):
            return StreamHandle(self.cp.cuda.Stream(non_blocking=True, priority=priority),
                                self.current_device(), self.cp)

    def external_stream(self, ptr: int, index=None):
        with self.device_context(index):
            return StreamHandle(self.cp.cuda.ExternalStream(ptr), self.current_device(),
                                self.cp)

    def current_stream(self, index=None):
        with self.device_context(index):
            return StreamHandle(self.cp.cuda.get_current_stream(), self.current_device(),
                                self.cp)

    def default_stream(self, index=None):
        with self.device_context(index):
            return StreamHandle(self.cp.cuda.Stream.null, self.current_device(), self.cp)

    def set_stream(self, handle) -> None:
        """Make ``handle``'s stream the current one of its device (this thread's)."""
        with self.device_context(handle.device_index):
            handle._stream.use()

    def Event(self, enable_timing=False, blocking=False):  # noqa: N802
        return EventHandle(self.cp.cuda.Event(block=blocking, disable_timing=not enable_timing),
                           self.cp)

    def Graph(self):  # noqa: N802 - torcia.cuda.CUDAGraph's maker
        return GraphHandle(self)

    def is_current_stream_capturing(self) -> bool:
        return bool(self.cp.cuda.get_current_stream().is_capturing())


class StreamHandle:
    """A CuPy stream and its device, for ``torcia.cuda.Stream``."""

    __slots__ = ("_stream", "device_index", "_cp")

    def __init__(self, stream, device_index, cupy):
        self._stream = stream
        self.device_index = device_index
        self._cp = cupy

    @property
    def ptr(self) -> int:
        return self._stream.ptr

    @property
    def priority(self) -> int:
        return getattr(self._stream, "priority", 0) or 0

    def synchronize(self) -> None:
        self._stream.synchronize()

    def query(self) -> bool:
        return self._stream.done

    def wait_event(self, event) -> None:
        self._stream.wait_event(event._event)

    def record(self, event) -> None:
        event._event.record(self._stream)


class EventHandle:
    """A CuPy event, for ``torcia.cuda.Event``."""

    __slots__ = ("_event", "_cp")

    def __init__(self, event, cupy):
        self._event = event
        self._cp = cupy

    @property
    def ptr(self) -> int:
        return self._event.ptr

    def record(self, stream=None) -> None:
        self._event.record(stream._stream if stream is not None else None)

    def synchronize(self) -> None:
        self._event.synchronize()

    def query(self) -> bool:
        return self._event.done

    def wait(self, stream=None) -> None:
        target = stream._stream if stream is not None else self._cp.cuda.get_current_stream()
        target.wait_event(self._event)

    def elapsed_time(self, end) -> float:
        """Milliseconds from this event to ``end`` (both recorded with timing enabled)."""
        return self._cp.cuda.get_elapsed_time(self._event, end._event)


class GraphHandle:
    """A CUDA graph captured from the current stream, for ``torcia.cuda.CUDAGraph``.

    While it captures, CuPy allocates from the graph's own memory pool (a private pool,
    as PyTorch's): memory the captured kernels use stays theirs for every replay, and
    nothing allocated outside the capture can land in it. Capture runs in CUDA's relaxed
    mode whatever mode is asked for: the private pool's first allocations are
    ``cudaMalloc`` calls, which the stricter modes forbid during a capture."""

    def __init__(self, runtime: CupyRuntime):
        self._rt = runtime
        self._graph = None
        self._pool = None
        self._stream = None

    def capture_begin(self, pool=None, capture_error_mode="global") -> None:
        cp = self._rt.cp
        if capture_error_mode not in _CAPTURE_MODES:
            raise RuntimeError(f"Unknown capture error mode. Expected one of "
                               f"{', '.join(map(repr, _CAPTURE_MODES))}, got "
                               f"{capture_error_mode!r}")
        if self._graph is not None or self._stream is not None:
            raise RuntimeError("This CUDAGraph instance already owns a captured graph: "
                               "call reset() before capturing again")
        stream = cp.cuda.get_current_stream()
        if stream.ptr == 0:
            raise RuntimeError("CUDA graphs must be captured on a non-default stream. "
                               "(However, after capture, it's ok to replay them on the "
                               "default stream.)")
        self._pool = pool if pool is not None else cp.cuda.MemoryPool()
        cp.cuda.set_allocator(self._rt.tracking(self._pool))
        try:
            stream.begin_capture(cp.cuda.runtime.streamCaptureModeRelaxed)
        except Exception:
            cp.cuda.set_allocator(self._rt.tracking(self._rt._pool))
            raise
        self._stream = stream

    def capture_end(self) -> None:
        cp = self._rt.cp
        if self._stream is None:
            raise RuntimeError("capture_end() without capture_begin()")
        try:
            self._graph = self._stream.end_capture()
        finally:
            self._stream = None
            cp.cuda.set_allocator(self._rt.tracking(self._rt._pool))

    def replay(self) -> None:
        if self._graph is None:
            raise RuntimeError("replay() of a CUDAGraph that has not captured anything")
        self._graph.launch()

    def reset(self) -> None:
        self._graph = None

    def pool(self):
        return self._pool

    def new_pool(self):
        return self._rt.cp.cuda.MemoryPool()
