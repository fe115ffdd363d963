"""Gradient-recording mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled``,
``inference_mode``.

They live in core, not in torcia-autograd, so that inference code written for PyTorch
(``with torch.no_grad():``) runs where autograd is not installed. The flag is a one-element
thread-local attribute read on every operation.
"""

from __future__ import annotations

import functools
import threading


class _State(threading.local):
    # Per-thread, like PyTorch: a DataLoader thread must not see the trainer's no_grad.
    enabled = True


STATE = _State()


def is_grad_enabled() -> bool:
    """Whether operations are recorded for gradients now.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_grad_enabled()
    True
    >>> with torcia.no_grad():
    ...     print(torcia.is_grad_enabled())
    False
    """
    return STATE.enabled


class _Mode:
    """Base of the context managers; each also works as a decorator."""

    enabled = True

    def __enter__(self):
        self._prev = STATE.enabled
        STATE.enabled = self.enabled
        return self

    def __exit__(self, *exc):
        STATE.enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args()):
                return fn(*args, **kwargs)

        return wrapper

    def _args(self):
        return ()


class _BareDecorator(_Mode):
    """A mode that also decorates without parentheses (``@no_grad``), as in PyTorch."""

    def __new__(cls, *args):
        if len(args) == 1 and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)


class no_grad(_BareDecorator):
    """Context manager and decorator that stops recording operations for gradients.

    Examples
    --------
    >>> import torcia
    >>> with torcia.no_grad():
    ...     torcia.is_grad_enabled()
    False
    """

    enabled = False


class enable_grad(_BareDecorator):
    """Context manager and decorator that turns recording back on inside ``no_grad``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(2, requires_grad=True)
    >>> with torcia.no_grad():
    ...     with torcia.enable_grad():
    ...         y = x * 2
    >>> y.requires_grad
    True
    """

    enabled = True


class set_grad_enabled(_Mode):
    """Turn recording on or off; takes effect at once, and as a context manager until exit.

    Examples
    --------
    >>> import torcia
    >>> with torcia.set_grad_enabled(False):
    ...     torcia.is_grad_enabled()
    False
    """

    def __init__(self, mode: bool):
        self.enabled = bool(mode)
        self._prev = STATE.enabled
        STATE.enabled = self.enabled

    def __enter__(self):
        return self

    def _args(self):
        return (self.enabled,)


class inference_mode(_BareDecorator):
    """Like ``no_grad``: torcia has no separate inference tensors, so this is ``no_grad``
    with PyTorch's signature (``mode=True``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(2, requires_grad=True)
    >>> with torcia.inference_mode():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    def __init__(self, mode: bool = True):
        self.enabled = not mode

    def _args(self):
        return (not self.enabled,)


def is_inference_mode_enabled() -> bool:
    """Whether an :class:`inference_mode` block is active.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_inference_mode_enabled()
    False
    >>> with torcia.inference_mode():
    ...     print(torcia.is_inference_mode_enabled())
    True
    """
    return not STATE.enabled
