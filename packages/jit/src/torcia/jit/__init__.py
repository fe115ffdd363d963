"""torcia.jit: TorchScript's names for the deployment scripts and libraries that use them.

The decorators and predicates libraries touch at import (:func:`script`, :func:`ignore`,
:func:`unused`, :func:`export`, :func:`interface`, :func:`is_scripting`,
:func:`is_tracing`, :data:`Final`, :mod:`torcia.jit.annotations`) mark what they decorate
and answer as PyTorch's do in eager code.

Examples
--------
>>> import torcia
>>> @torcia.jit.script
... def gelu_tanh(x):
...     return 0.5 * x * (1 + torcia.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
>>> round(gelu_tanh(torcia.ones(1)).item(), 4)
0.8412
>>> torcia.jit.is_scripting(), torcia.jit.is_tracing()
(False, False)
"""

from __future__ import annotations

import builtins
import functools

from torcia import nn
from torcia.jit import annotations
from torcia.jit._markers import (
    Attribute,
    Final,
    _copy_to_script_wrapper,
    _drop,
    _get_overloads,
    _overload,
    _overload_method,
    _unwrap_optional,
    annotate,
    export,
    ignore,
    interface,
    is_scripting,
    is_tracing,
    isinstance,
    script_if_tracing,
    unused,
)

__all__ = [
    "Attribute", "Error", "Final", "ScriptFunction", "annotate", "annotations", "export",
    "ignore", "interface", "is_scripting", "is_tracing", "isinstance", "script",
    "script_if_tracing", "unused",
]

_script_if_tracing = script_if_tracing


class Error(RuntimeError):
    """What a compiled program raises (``torch.jit.Error``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.jit.Error, RuntimeError)
    True
    """


class ScriptFunction:
    """A function given to :func:`script`; calling it calls the function.

    Examples
    --------
    >>> import torcia
    >>> f = torcia.jit.script(lambda x: x + 1)
    >>> type(f).__name__, f(torcia.zeros(1)).tolist()
    ('ScriptFunction', [1.0])
    """

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self._fn = fn

    @property
    def name(self) -> str:
        return self._fn.__name__

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Compile a function or module for deployment (``torch.jit.script``).

    A function becomes a :class:`ScriptFunction`; modules and classes are returned
    as they are, so that a library scripting its helpers at import works unchanged.

    Examples
    --------
    >>> import torcia
    >>> @torcia.jit.script
    ... def swish(x, inplace: bool = False):
    ...     return x.mul_(x.sigmoid()) if inplace else x * x.sigmoid()
    >>> round(swish(torcia.ones(1)).item(), 4)
    0.7311
    """
    if builtins.isinstance(obj, (ScriptFunction, nn.Module, type)):
        return obj
    if not callable(obj):
        raise RuntimeError(f"Type '{type(obj).__name__}' cannot be compiled since it is not "
                           "a function, a class or an nn.Module")
    return ScriptFunction(obj)
