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

from torcia._oplib.runtime import Event, Stream

__all__ = ["Event", "Stream", "StreamContext", "current_device", "current_stream",
           "device_count", "is_available", "is_initialized", "set_device", "stream",
           "synchronize"]

_DEFAULT_STREAM = Stream("cpu")


def is_available() -> bool:
    """Always True: the CPU is there.

    Examples
    --------
    >>> import torcia
    >>> torcia.cpu.is_available()
    True
    """
    return True


def is_initialized() -> bool:
    """Always True: the CPU needs no initialisation.

    Examples
    --------
    >>> import torcia
    >>> torcia.cpu.is_initialized()
    True
    """
    return True


def device_count() -> int:
    """How many CPU devices torcia uses: 1.

    Examples
    --------
    >>> import torcia
    >>> torcia.cpu.device_count()
    1
    """
    return 1


def current_device() -> str:
    """The current CPU device's name, ``"cpu"`` (as PyTorch).

    Examples
    --------
    >>> import torcia
    >>> torcia.cpu.current_device()
    'cpu'
    """
    return "cpu"


def set_device(device) -> None:
    """Accepts "cpu" (or a CPU device): there is only one.

    Examples
    --------
    >>> import torcia
    >>> torcia.cpu.set_device("cpu")
    >>> torcia.cpu.current_device()
    'cpu'
    """
    name = device if isinstance(device, str) else getattr(device, "type", str(device))
    if name.split(":")[0] != "cpu":
        raise ValueError(f"torcia.cpu.set_device: expected a CPU device, got {device!r}")


def synchronize(device=None) -> None:
    """Wait for the CPU's work to finish: it already has when this is called.

    Examples
    --------
    >>> import torcia
    >>> y = torcia.ones(2) + 1
    >>> torcia.cpu.synchronize()
    >>> y
    tensor([2., 2.])
    """


def current_stream(device=None) -> Stream:
    """The CPU's stream.

    Examples
    --------
    >>> import torcia
    >>> torcia.cpu.current_stream() is torcia.cpu.current_stream()
    True
    """
    return _DEFAULT_STREAM


class StreamContext:
    """Context manager that makes a stream current; on the CPU there is one stream, so
    entering and leaving change nothing.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.cpu.current_stream()
    >>> with torcia.cpu.StreamContext(s):
    ...     torcia.cpu.current_stream() is s
    True
    """

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def stream(stream) -> StreamContext:
    """``with torcia.cpu.stream(s):`` (see :class:`StreamContext`).

    Examples
    --------
    >>> import torcia
    >>> with torcia.cpu.stream(torcia.cpu.current_stream()):
    ...     y = torcia.ones(2) * 2
    >>> y
    tensor([2., 2.])
    """
    return StreamContext(stream)
