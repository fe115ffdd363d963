"""torcia.autograd: define-by-run automatic differentiation for torcia tensors.

With this distribution installed, ``requires_grad=True`` makes operations record a graph;
``backward()`` and :func:`grad` run it in reverse. Derivatives live in one table,
:mod:`torcia.autograd.derivatives`.

Examples
--------
>>> import torcia
>>> x = torcia.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (x ** 2).sum()
>>> y.backward()
>>> x.grad
tensor([2., 4., 6.])
"""

from __future__ import annotations

import torcia
from torcia import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from torcia.autograd import engine as _engine
from torcia.autograd import forward_ad, functional, graph
from torcia.autograd.engine import backward, grad
from torcia.autograd.function import (
    Function,
    FunctionCtx,
    NestedIOFunction,
    once_differentiable,
)
from torcia.autograd.grad_mode import (
    enforce_grad_layout_policy,
    is_grad_layout_enforcement_enabled,
    is_multithreading_enabled,
    set_multithreading_enabled,
)
from torcia.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = [
    "Function", "FunctionCtx", "GradcheckError", "NestedIOFunction", "Variable", "backward",
    "detect_anomaly", "enable_grad", "enforce_grad_layout_policy", "forward_ad", "functional",
    "grad", "gradcheck", "gradgradcheck", "graph", "inference_mode", "is_anomaly_enabled",
    "is_grad_enabled", "is_grad_layout_enforcement_enabled", "is_multithreading_enabled",
    "no_grad", "once_differentiable", "set_detect_anomaly", "set_grad_enabled",
    "set_multithreading_enabled", "variable",
]

def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on.

    Examples
    --------
    >>> import torcia
    >>> torcia.autograd.is_anomaly_enabled()
    False
    >>> with torcia.autograd.detect_anomaly():
    ...     print(torcia.autograd.is_anomaly_enabled())
    True
    """
    return _engine.ANOMALY.enabled


class set_detect_anomaly:
    """Turn anomaly detection on or off: each node remembers the stack of the forward call
    that made it, and a backward producing NaN raises naming that forward op.

    Works as a function call and as a context manager.

    Examples
    --------
    >>> import torcia
    >>> with torcia.autograd.set_detect_anomaly(True):
    ...     torcia.autograd.is_anomaly_enabled()
    True
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        self._prev = _engine.ANOMALY.enabled
        _engine.ANOMALY.enabled = bool(mode)
        _engine.ANOMALY.check_nan = check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _engine.ANOMALY.enabled = self._prev
        return False


class detect_anomaly(set_detect_anomaly):
    """Context manager: anomaly detection on inside the block.

    Examples
    --------
    A backward that produces NaN raises, naming the forward call that recorded the op:

    >>> import torcia
    >>> x = torcia.tensor([0.0], requires_grad=True)
    >>> try:
    ...     with torcia.autograd.detect_anomaly():
    ...         (torcia.sqrt(x) * 0).sum().backward()
    ... except RuntimeError as error:
    ...     print(str(error).splitlines()[0])
    Function 'SqrtBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan: bool = True):
        super().__init__(True, check_nan)


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torcia.Tensor)


class Variable(metaclass=_VariableMeta):
    """PyTorch's pre-0.4 wrapper, kept for old code: every tensor is a Variable.

    ``Variable(tensor, requires_grad=False)`` returns a tensor sharing ``tensor``'s data
    with ``requires_grad`` set (``volatile`` is accepted and ignored, as in PyTorch).

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd import Variable
    >>> v = Variable(torcia.ones(2), requires_grad=True)
    >>> v.requires_grad, isinstance(v, Variable)
    (True, True)
    """

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            return torcia.empty(0).requires_grad_(requires_grad)
        if not isinstance(data, torcia.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)


def variable(*args, **kwargs):
    """Removed in PyTorch: raises, as ``torch.autograd.variable`` does, pointing at
    :func:`torcia.tensor` (``Variable`` itself is still there).

    Examples
    --------
    >>> import torcia
    >>> try:
    ...     torcia.autograd.variable(torcia.ones(1))
    ... except RuntimeError as e:
    ...     print(e)
    torch.autograd.variable(...) is deprecated, use torch.tensor(...) instead
    """
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) "
                       "instead")
