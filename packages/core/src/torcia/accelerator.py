"""``torcia.accelerator``: the accelerator device, whichever device plugin provides it, as
``torch.accelerator``.

The accelerator is the non-CPU device type registered by an installed plugin (``"cuda"``
from torcia-cuda first, else the first a third party registered); with none,
:func:`current_accelerator` is None and :func:`is_available` False, and with one whose
hardware is missing (torcia-cuda without a GPU) :func:`is_available` is False.
Index-level services (current device, synchronize) go to that backend's ``runtime``.

Examples
--------
>>> import torcia
>>> acc = torcia.accelerator
>>> dev = acc.current_accelerator() if acc.is_available() else torcia.device("cpu")
>>> torcia.ones(2, device=dev).device.type in ("cpu", "cuda")
True
"""

from __future__ import annotations

import contextlib

from torcia import backend as _backend

__all__ = ["current_accelerator", "current_device_idx", "current_device_index",
           "device_count", "device_index", "is_available", "set_device_idx",
           "set_device_index", "synchronize"]


def _accelerator_backend(check_available: bool = False):
    found = _backend.backends.build()
    # CUDA first when several device plugins are present, then in registration order; core's
    # "meta" device holds no data and is no accelerator, as in PyTorch
    for name in sorted(found, key=lambda n: n != "cuda"):
        if name not in ("cpu", "meta"):
            b = found[name]
            return b if not check_available or b.is_available() else None
    return None


def current_accelerator(check_available: bool = False):
    """The accelerator's device type as a :class:`torcia.device` (no index), or None.

    Parameters
    ----------
    check_available : bool
        Only answer with an accelerator whose hardware is there.

    Examples
    --------
    >>> import torcia
    >>> acc = torcia.accelerator.current_accelerator()
    >>> acc is None or acc.type != "cpu"
    True
    """
    b = _accelerator_backend(check_available)
    return None if b is None else _backend.device(b.name)


def is_available() -> bool:
    """Whether an accelerator is installed and has at least one device.

    Examples
    --------
    >>> import torcia
    >>> isinstance(torcia.accelerator.is_available(), bool)
    True
    """
    return device_count() > 0


def device_count() -> int:
    """How many devices the accelerator has (0 without one).

    Examples
    --------
    >>> import torcia
    >>> torcia.accelerator.device_count() >= 0
    True
    """
    b = _accelerator_backend(check_available=True)
    return int(b.device_count()) if b is not None else 0


def _runtime(what: str):
    b = _accelerator_backend(check_available=True)
    if b is None:
        raise RuntimeError(f"torcia.accelerator.{what}: no accelerator is available (device "
                           f"types present: {sorted(_backend.backends.build())})")
    if b.runtime is None:
        raise RuntimeError(f"torcia.accelerator.{what}: the {b.name!r} device plugin has no "
                           "runtime services")
    return b.runtime


def _index(device) -> int:
    if isinstance(device, int):
        return device
    return _backend.canonical(device).index or 0


def current_device_index() -> int:
    """The index of the current accelerator device."""
    return _runtime("current_device_index").current_device()


def set_device_index(device) -> None:
    """Make ``device`` (an index, ``"cuda:1"``, a device) the current accelerator device."""
    _runtime("set_device_index").set_device(_index(device))


current_device_idx = current_device_index
set_device_idx = set_device_index


def synchronize(device=None) -> None:
    """Wait for the accelerator's queued work (on ``device``, default the current one)."""
    _runtime("synchronize").synchronize(None if device is None else _index(device))


@contextlib.contextmanager
def device_index(device):
    """Context manager that makes ``device`` current and restores the previous one; None
    does nothing."""
    if device is None:
        yield
        return
    previous = current_device_index()
    set_device_index(device)
    try:
        yield
    finally:
        set_device_index(previous)
