"""The autograd mode that records every thread's ops: the engine contract
(:class:`AutogradEngine`) and :func:`register_autograd_mode`, published by
:mod:`torcia.library`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from torcia._tensor import AUTOGRAD, AutogradMode, Tensor
from torcia.utils.hooks import RemovableHandle

#: Called with each mode registered, after it is active: torcia._oprecords gives it the
#: derivatives of the ops plugins define.
ON_REGISTER: list[Callable] = []


@runtime_checkable
class AutogradEngine(Protocol):
    """What the object returned by ``torcia_autograd_engine`` provides to core.

    Core calls ``record`` after an op ran on a tensor that requires grad (grad mode on),
    ``check_inplace``/``rebase_inplace`` around an in-place op, ``record_transfer`` for a
    device copy, and forwards ``Tensor.backward``, ``register_hook`` and friends.
    ``derivative(op)`` returns the backward formula of an op (None when it has none),
    ``define_derivative(op, fn)`` adds one for an op defined by a plugin.
    :func:`register_autograd_mode` requires every method declared here; an engine may
    also have ``forward_derivative(op)`` and ``define_forward_derivative(op, fn)``
    (forward mode, read by :func:`op_records` and :class:`OpRegistry` where present) and
    ``ANOMALY`` (an object with ``enabled`` and ``check_nan``, read and set by
    :func:`torcia.set_anomaly_enabled`).
    """

    def record(self, op: str, inputs: tuple, params: dict, out) -> None: ...

    def record_transfer(self, src: Tensor, out: Tensor) -> None: ...

    def check_inplace(self, t: Tensor) -> None: ...

    def rebase_inplace(self, t: Tensor, out: Tensor) -> None: ...

    def backward(self, tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                 inputs=None) -> None: ...

    def grad(self, outputs, inputs, grad_outputs=None, retain_graph=None,
             create_graph=False, allow_unused=None): ...

    def derivative(self, op: str) -> Callable | None: ...

    def define_derivative(self, op: str, fn: Callable) -> None: ...

    def register_hook(self, t: Tensor, hook: Callable) -> RemovableHandle: ...

    def register_post_accumulate_grad_hook(self, t: Tensor,
                                           hook: Callable) -> RemovableHandle: ...

    def retain_grad(self, t: Tensor) -> None: ...


# what registration requires: the methods the Protocol declares
_ENGINE_METHODS = tuple(name for name, value in vars(AutogradEngine).items()
                        if callable(value) and not name.startswith("_"))


class _EngineAsMode(AutogradMode):
    """An engine of hook API 0.2 (an object with the :class:`AutogradEngine` functions,
    not an :class:`AutogradMode`) registered as the autograd mode."""

    def __init__(self, engine):
        self.engine = engine
        for name in _ENGINE_METHODS:
            if hasattr(engine, name):
                setattr(self, name, getattr(engine, name))


def register_autograd_mode(mode) -> RemovableHandle:
    """Make ``mode`` (an :class:`AutogradMode`) record the ops of every thread for gradients.

    The last mode registered records; removing its handle gives recording back to the one
    before (no mode: ``requires_grad`` loads torcia-autograd's through its hook again). An
    object with :class:`AutogradEngine`'s functions that is not an :class:`AutogradMode`
    (hook API 0.2) is wrapped in one.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> engine = library.autograd_engine()
    >>> class Counting(library.AutogradMode):
    ...     ops = []
    ...     def __getattr__(self, name):  # the rest of the engine's functions
    ...         return getattr(engine, name)
    ...     def record(self, op, inputs, params, out):
    ...         self.ops.append(op)
    ...         engine.record(op, inputs, params, out)
    >>> counting = Counting()
    >>> with library.register_autograd_mode(counting):
    ...     y = (torcia.ones(2, requires_grad=True) * 3).sum()
    >>> counting.ops, y.grad_fn.name()
    (['mul', 'sum'], 'SumBackward0')
    """
    if not isinstance(mode, AutogradMode):
        mode = _EngineAsMode(mode)
    missing = [name for name in _ENGINE_METHODS if not callable(getattr(mode, name, None))]
    if missing:
        raise TypeError(f"an autograd mode must implement {', '.join(missing)} "
                        f"(see torcia.library.AutogradEngine); {type(mode).__name__} does not")
    AUTOGRAD.modes.append(mode)
    _activate_autograd_mode()
    for fn in ON_REGISTER:
        fn(mode)
    return _AutogradModeHandle(AUTOGRAD.modes, hook=mode)


def _activate_autograd_mode() -> None:
    top = AUTOGRAD.modes[-1] if AUTOGRAD.modes else None
    AUTOGRAD.engine = top
    AUTOGRAD.record = None if top is None else top.record


class _AutogradModeHandle(RemovableHandle):
    def remove(self) -> None:
        super().remove()
        _activate_autograd_mode()


# load_autograd (in torcia._tensor, below this module) registers the engine it loads here
AUTOGRAD.register = register_autograd_mode
