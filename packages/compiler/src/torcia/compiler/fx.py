"""The names of ``torch.fx`` that libraries touch at import (``torcia.fx``).

torcia captures programs by running them (:func:`torcia.compiler.compile` records the kernels a call
runs) rather than by symbolic tracing, so it has no ``symbolic_trace``, ``GraphModule`` or
proxies of its own. Libraries still mark functions for PyTorch's symbolic tracer at import
time (``@torch.fx.wrap``) and test values against ``torch.fx.Proxy``; those two work here:
:func:`wrap` records the function and returns it unchanged, and no value is ever a
:class:`Proxy`.

Examples
--------
>>> import torcia.fx
>>> @torcia.fx.wrap
... def scale(x):
...     return x * 2
>>> scale(3), isinstance(3, torcia.fx.Proxy)
(6, False)
"""

from __future__ import annotations

import sys

__all__ = ["Proxy", "wrap", "wrapped_functions"]

_wrapped: list = []


def wrap(fn_or_name):
    """Mark a function (or the name of a function of the calling module) to be kept whole by
    a symbolic tracer, as ``torch.fx.wrap``; it is returned unchanged.

    As in PyTorch, a name must be given at the top level of a module, where the function
    it names is looked up later.

    Examples
    --------
    >>> import torcia.fx
    >>> torcia.fx.wrap(len) is len
    True
    >>> "len" in [getattr(f, "__name__", f) for f in torcia.fx.wrapped_functions()]
    True
    """
    if not callable(fn_or_name) and not isinstance(fn_or_name, str):
        raise TypeError("Unsupported type for global function! Must be either a callable or "
                        "string name")
    if isinstance(fn_or_name, str):
        caller = sys._getframe(1)
        if caller.f_code.co_name != "<module>":
            raise NotImplementedError("wrap must be called at the top level of a module")
    _wrapped.append(fn_or_name)
    return fn_or_name


def wrapped_functions() -> list:
    """The functions and names given to :func:`wrap`, in order."""
    return list(_wrapped)


class Proxy:
    """The value type of PyTorch's symbolic tracer. torcia does not trace symbolically,
    so no value is a ``Proxy``: ``isinstance(x, torcia.fx.Proxy)`` is False for every
    ``x``, which is what code that checks for tracing wants to know."""

    __slots__ = ()
