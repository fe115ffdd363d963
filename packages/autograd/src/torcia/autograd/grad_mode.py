"""Switches of the backward engine that PyTorch exposes as context managers, as
``torch.autograd.grad_mode``: each works as a call, a context manager and a decorator,
and is thread-local.

torcia's engine always runs a backward pass on the thread that called it, and always gives
a parameter a row-major (contiguous) gradient of its own shape; the switches are kept (and
read back) so that code written for PyTorch runs, with the behaviour PyTorch's
``mode=False`` / ``enable=True`` describe.
"""

from __future__ import annotations

import functools
import threading

__all__ = ["enforce_grad_layout_policy", "is_grad_layout_enforcement_enabled",
           "is_multithreading_enabled", "set_multithreading_enabled"]

_STATE = threading.local()


def _get(name: str) -> bool:
    return getattr(_STATE, name, True)


class _Switch:
    """Sets a thread-local flag at construction, restores it on exit."""

    _flag = ""

    def __init__(self, mode: bool) -> None:
        self.prev = _get(self._flag)
        self.mode = bool(mode)
        setattr(_STATE, self._flag, self.mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        setattr(_STATE, self._flag, self.prev)

    def __call__(self, fn):
        # used as a decorator: the flag applies while ``fn`` runs, not from now on
        setattr(_STATE, self._flag, self.prev)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        """A copy of this switch (setting the same mode)."""
        return self.__class__(self.mode)


class set_multithreading_enabled(_Switch):
    """Enable or disable multithreaded backward, as ``torch.autograd``.

    PyTorch runs the backward of accelerator tensors on per-device worker threads unless
    this is off; torcia's engine always runs it on the calling thread, which is what
    ``mode=False`` asks for. The setting is kept per thread and read back by
    :func:`is_multithreading_enabled`.

    Parameters
    ----------
    mode : bool
        Whether multithreaded backward is enabled.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd import set_multithreading_enabled, is_multithreading_enabled
    >>> with set_multithreading_enabled(False):
    ...     is_multithreading_enabled()
    False
    >>> is_multithreading_enabled()
    True
    """

    _flag = "multithreading"


def is_multithreading_enabled() -> bool:
    """Whether :class:`set_multithreading_enabled` is on in this thread (default True).

    Examples
    --------
    >>> import torcia
    >>> torcia.autograd.is_multithreading_enabled()
    True
    """
    return _get("multithreading")


class enforce_grad_layout_policy(_Switch):
    """Enforce (default) or relax the gradient layout contract, as ``torch.autograd``.

    The contract says an accumulated gradient has its parameter's strides. Every torcia
    tensor is row-major, so gradients always keep it and relaxing it changes nothing; the
    setting is kept per thread and read back by
    :func:`is_grad_layout_enforcement_enabled`.

    Parameters
    ----------
    enable : bool
        Whether to enforce the contract.

    Examples
    --------
    >>> import torcia
    >>> p = torcia.ones(2, 3, requires_grad=True)
    >>> with torcia.autograd.enforce_grad_layout_policy(False):
    ...     (p * 2).sum().backward()
    >>> p.grad.shape
    torcia.Size([2, 3])
    """

    _flag = "grad_layout"

    def __init__(self, enable: bool = True) -> None:
        super().__init__(enable)


def is_grad_layout_enforcement_enabled() -> bool:
    """Whether :class:`enforce_grad_layout_policy` is on in this thread (default True).

    Examples
    --------
    >>> import torcia
    >>> torcia.autograd.is_grad_layout_enforcement_enabled()
    True
    """
    return _get("grad_layout")
