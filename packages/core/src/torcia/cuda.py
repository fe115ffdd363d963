"""``torcia.cuda``: the CUDA device's services, as ``torch.cuda``.

Core holds only this facade; the "cuda" device itself comes from a plugin (torcia-cuda,
on CuPy) that registers a backend whose ``runtime`` does the work. Without that plugin,
or without a GPU, :func:`is_available` is False and everything else raises an error that
says why.

Examples
--------
>>> import torcia
>>> isinstance(torcia.cuda.is_available(), bool)
True
"""

from __future__ import annotations

import contextlib

from torcia import backend as _backend
from torcia._legacy import CUDA_TYPES as _LEGACY_TYPES


def _cuda_backend():
    return _backend.backends.build().get("cuda")


def _runtime():
    b = _cuda_backend()
    if b is None:
        raise RuntimeError(
            _backend.plugins.missing_message("device backend", "cuda",
                                             sorted(_backend.backends.build()))
            + ". Install torcia-cuda with the CuPy wheel for your driver "
            "(pip install 'torcia-cuda[cuda12]')"
        )
    if not b.is_available():
        raise RuntimeError(f"CUDA is not available: {b.unavailable_reason or 'no GPU found'}")
    return b.runtime


def is_available() -> bool:
    """Whether a CUDA device can be used (torcia-cuda installed, CuPy working, a GPU)."""
    b = _cuda_backend()
    return b is not None and bool(b.is_available())


def device_count() -> int:
    """How many CUDA devices there are (0 when CUDA is not available)."""
    return _cuda_backend().device_count() if is_available() else 0


def current_device() -> int:
    return _runtime().current_device()


def set_device(device) -> None:
    """Make ``device`` (an index, "cuda:N" or a torcia.device) the current one."""
    _runtime().set_device(_index(device))


def _index(device) -> int:
    if isinstance(device, int):
        return device
    d = _backend.device(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return 0 if d.index is None else d.index


def synchronize(device=None) -> None:
    """Wait for all work queued on the device to finish."""
    _runtime().synchronize(None if device is None else _index(device))


def manual_seed(seed: int) -> None:
    """Seed the current CUDA device's generator (a no-op when CUDA is not available)."""
    if is_available():
        _runtime().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every CUDA device's generator (a no-op when CUDA is not available)."""
    if is_available():
        _runtime().manual_seed_all(int(seed))


def memory_allocated(device=None) -> int:
    """Bytes held by tensors on the device (from the array module's memory pool)."""
    return _runtime().memory_allocated(None if device is None else _index(device))


def max_memory_allocated(device=None) -> int:
    """The peak of :func:`memory_allocated` since start or the last reset."""
    return _runtime().max_memory_allocated(None if device is None else _index(device))


def reset_peak_memory_stats(device=None) -> None:
    _runtime().reset_peak_memory_stats(None if device is None else _index(device))


def memory_reserved(device=None) -> int:
    """Bytes the memory pool holds, in use or cached."""
    return _runtime().memory_reserved(None if device is None else _index(device))


def empty_cache() -> None:
    """Return cached, unused blocks of the memory pool to the driver."""
    if is_available():
        _runtime().empty_cache()


def get_device_name(device=None) -> str:
    return _runtime().get_device_name(None if device is None else _index(device))


def Stream(device=None, priority=0):  # noqa: N802 - PyTorch's class-like name
    """A CUDA stream: work queued on it runs in order, concurrently with other streams."""
    return _runtime().Stream(None if device is None else _index(device), priority)


def Event(enable_timing=False, blocking=False, interprocess=False):  # noqa: N802
    """A CUDA event: a marker in a stream; ``elapsed_time`` between two in milliseconds."""
    return _runtime().Event(enable_timing, blocking)


def current_stream(device=None):
    return _runtime().current_stream(None if device is None else _index(device))


def stream(s):
    """Context manager making ``s`` the current stream."""
    return _runtime().stream_context(s)


@contextlib.contextmanager
def device(device):
    """Context manager making ``device`` current, then restoring the previous one."""
    rt = _runtime()
    prev = rt.current_device()
    rt.set_device(_index(device))
    try:
        yield
    finally:
        rt.set_device(prev)

# torcia.cuda.FloatTensor, ...: the legacy typed constructors of CUDA tensors
globals().update(_LEGACY_TYPES)
