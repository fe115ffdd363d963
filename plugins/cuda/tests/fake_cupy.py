"""A NumPy stand-in for the parts of CuPy torcia-cuda uses, injected as ``cupy`` in
``sys.modules`` so that the plugin's own probe, backend, kernels and runtime run unchanged.

Device memory is emulated by copying on every transfer; the memory pool counts the bytes of
the arrays made through ``asarray`` while they are alive.
"""

from __future__ import annotations

import contextlib
import sys
import types
import weakref

import numpy as np


class _Pool:
    def __init__(self):
        self._live = weakref.WeakValueDictionary()

    def track(self, arr):
        self._live[id(arr)] = arr
        return arr

    def used_bytes(self):
        return sum(a.nbytes for a in self._live.values())

    def total_bytes(self):
        return self.used_bytes()

    def malloc(self, size):
        return size

    def free_all_blocks(self):
        return None


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
        return {"name": f"Fake GPU {index}".encode()}


class _Stream:
    def __init__(self, non_blocking=False, priority=0):
        self.done = True

    def synchronize(self):
        return None

    def wait_event(self, event):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Event:
    def __init__(self, block=False, disable_timing=False):
        self.done = True
        self.time = 0.0

    def record(self, stream=None):
        import time

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
    cp.asnumpy = lambda a: np.array(a, copy=True)
    cp.get_default_memory_pool = lambda: pool
    cp.random = types.SimpleNamespace(seed=lambda s: None)
    cp.cuda = types.SimpleNamespace(
        runtime=runtime, set_allocator=lambda fn: None, Stream=_Stream, Event=_Event,
        Device=lambda index: contextlib.nullcontext(),
        get_current_stream=lambda: _Stream(),
        get_elapsed_time=lambda a, b: (b.time - a.time) * 1e3,
    )
    for name in ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
                 "full_like", "arange", "eye", "linspace"):
        setattr(cp, name, _tracked(pool, getattr(np, name)))
    cp.__getattr__ = lambda name: getattr(np, name)  # the rest of the array API is NumPy's
    return cp


def _tracked(pool, fn):
    """``fn`` with its result counted by the pool, as CuPy allocates through its pool."""

    def allocate(*args, **kwargs):
        return pool.track(fn(*args, **kwargs))

    return allocate


def install(monkeypatch, count=2):
    """Put a fake ``cupy`` (and ``cupyx.scipy.special`` as SciPy's) in ``sys.modules``."""
    cp = make(count)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    try:
        import scipy.special as special

        cupyx = types.ModuleType("cupyx")
        cupyx.scipy = types.SimpleNamespace(special=special)
        monkeypatch.setitem(sys.modules, "cupyx", cupyx)
        monkeypatch.setitem(sys.modules, "cupyx.scipy", cupyx.scipy)
        monkeypatch.setitem(sys.modules, "cupyx.scipy.special", special)
    except ImportError:
        pass
    return cp
