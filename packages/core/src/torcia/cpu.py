"""``torcia.cpu``: the CPU device's services, as ``torch.cpu``.

The CPU runs each op to completion before the next starts, so its streams are always
idle and synchronising returns at once; there is one CPU device.

Examples
--------
>>> import torcia
>>> torcia.cpu.is_available(), torcia.cpu.device_count(), torcia.cpu.current_device()
(True, 1, 'cpu')
"""

from __future__ import annotations

from torcia._ops_compat_more import Event, Stream

__all__ = ["Event", "Stream", "StreamContext", "current_device", "current_stream",
           "device_count", "is_available", "is_initialized", "set_device", "stream",
           "synchronize"]

_DEFAULT_STREAM = Stream("cpu")


def is_available() -> bool:
    """Always True: the CPU is there."""
    return True


def is_initialized() -> bool:
    """Always True: the CPU needs no initialisation."""
    return True


def device_count() -> int:
    """How many CPU devices torcia uses: 1."""
    return 1


def current_device() -> str:
    """The current CPU device's name, ``"cpu"`` (as PyTorch)."""
    return "cpu"


def set_device(device) -> None:
    """Accepts "cpu" (or a CPU device): there is only one."""
    name = device if isinstance(device, str) else getattr(device, "type", str(device))
    if name.split(":")[0] != "cpu":
        raise ValueError(f"torcia.cpu.set_device: expected a CPU device, got {device!r}")


def synchronize(device=None) -> None:
    """Wait for the CPU's work to finish: it already has when this is called."""


def current_stream(device=None) -> Stream:
    """The CPU's stream."""
    return _DEFAULT_STREAM


class StreamContext:
    """Context manager that makes a stream current; on the CPU there is one stream, so
    entering and leaving change nothing."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def stream(stream) -> StreamContext:
    """``with torcia.cpu.stream(s):`` (see :class:`StreamContext`)."""
    return StreamContext(stream)
