"""What ``torcia.cuda`` delegates to: devices, streams, events, memory statistics."""

from __future__ import annotations

import contextlib


class CupyRuntime:
    """The CUDA runtime services, over CuPy."""

    def __init__(self, cupy):
        self.cp = cupy
        self._peak: dict[int, int] = {}
        pool = cupy.get_default_memory_pool()
        self._pool = pool

        def tracking_malloc(size):
            # CuPy's pool does not record a peak; sample used bytes after each allocation
            mem = pool.malloc(size)
            dev = cupy.cuda.runtime.getDevice()
            used = pool.used_bytes()
            if used > self._peak.get(dev, 0):
                self._peak[dev] = used
            return mem

        cupy.cuda.set_allocator(tracking_malloc)

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

    def manual_seed(self, seed: int) -> None:
        self.cp.random.seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        for i in range(self.device_count()):
            with self.cp.cuda.Device(i):
                self.cp.random.seed(seed)

    def memory_allocated(self, index=None) -> int:
        return self._pool.used_bytes()

    def max_memory_allocated(self, index=None) -> int:
        dev = self.current_device() if index is None else index
        return max(self._peak.get(dev, 0), self._pool.used_bytes())

    def reset_peak_memory_stats(self, index=None) -> None:
        self._peak[self.current_device() if index is None else index] = self._pool.used_bytes()

    def memory_reserved(self, index=None) -> int:
        return self._pool.total_bytes()

    def empty_cache(self) -> None:
        self._pool.free_all_blocks()

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

    def get_device_name(self, index=None) -> str:
        dev = self.current_device() if index is None else index
        return self.cp.cuda.runtime.getDeviceProperties(dev)["name"].decode()

    def Stream(self, index=None, priority=0):  # noqa: N802 - torcia.cuda.Stream's factory
        with self.device_context(index):
            return Stream(self.cp.cuda.Stream(non_blocking=True, priority=priority), self.cp)

    def Event(self, enable_timing=False, blocking=False):  # noqa: N802
        return Event(self.cp.cuda.Event(block=blocking, disable_timing=not enable_timing), self.cp)

    def current_stream(self, index=None):
        with self.device_context(index):
            return Stream(self.cp.cuda.get_current_stream(), self.cp)

    def stream_context(self, stream):
        return stream._stream if stream is not None else contextlib.nullcontext()


class Stream:
    """A CUDA stream (``torcia.cuda.Stream``); usable as a context manager."""

    def __init__(self, stream, cupy):
        self._stream = stream
        self._cp = cupy

    def synchronize(self) -> None:
        self._stream.synchronize()

    def query(self) -> bool:
        return self._stream.done

    def wait_event(self, event) -> None:
        self._stream.wait_event(event._event)

    def wait_stream(self, other) -> None:
        self._stream.wait_event(other.record_event()._event)

    def record_event(self, event=None):
        event = event or Event(self._cp.cuda.Event(), self._cp)
        event._event.record(self._stream)
        return event

    def __enter__(self):
        self._stream.__enter__()
        return self

    def __exit__(self, *exc):
        return self._stream.__exit__(*exc)


class Event:
    """A CUDA event (``torcia.cuda.Event``): record, wait, time."""

    def __init__(self, event, cupy):
        self._event = event
        self._cp = cupy

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
