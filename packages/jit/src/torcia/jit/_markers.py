"""What libraries touch of ``torch.jit`` at import: decorators that mark functions and
methods, the predicates ``is_scripting``/``is_tracing``, and typing helpers.

They only mark or answer; :func:`torcia.jit.script` (and tracing, ``torch.jit.trace``) reads
the marks when it compiles a module (an ``@ignore``d method stays a Python call, an
``@unused`` one raises when the compiled program reaches it).
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import functools
import threading
import types
import typing


class FunctionModifiers:
    """How :func:`script` treats a marked function: the strings ``torch._jit_internal``
    puts in a function's ``_torchscript_modifier``, so that code comparing them works."""

    UNUSED = "unused (ignored and replaced with raising of an exception)"
    IGNORE = "ignore (leave as a call to Python, cannot be torch.jit.save'd)"
    EXPORT = "export (compile this function even if nothing calls it)"
    DEFAULT = "default (compile if called from a exported function / forward)"
    COPY_TO_SCRIPT_WRAPPER = "if this method is not scripted, copy the python method onto " \
        "the scripted model"
    _DROP = "_drop (function is fully ignored, declaration can be unscriptable)"


class _State(threading.local):
    scripting = 0  # depth of script captures running in this thread
    tracing = 0  # depth of trace captures running in this thread


_state = _State()


@contextlib.contextmanager
def capturing(kind: str):
    """Mark this thread as running a ``"script"`` or ``"trace"`` capture (what
    :func:`is_scripting` and :func:`is_tracing` answer)."""
    flag = {"script": "scripting", "trace": "tracing"}[kind]
    setattr(_state, flag, getattr(_state, flag) + 1)
    try:
        yield
    finally:
        setattr(_state, flag, getattr(_state, flag) - 1)


def is_scripting() -> bool:
    """Whether the code runs inside :func:`torcia.jit.script`'s capture.

    Eager code gets False, as in PyTorch; a library branches on it to keep Python-only
    features (hooks, checkpointing) out of compiled programs.

    Examples
    --------
    >>> import torcia
    >>> torcia.jit.is_scripting()
    False
    """
    return _state.scripting > 0


def is_tracing() -> bool:
    """Whether the code runs inside a trace's capture (``torch.jit.trace``).

    Examples
    --------
    >>> import torcia
    >>> torcia.jit.is_tracing()
    False
    """
    return _state.tracing > 0


def get_torchscript_modifier(fn) -> str:
    """The mark a decorator of this module put on ``fn`` (``DEFAULT`` without one)."""
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "_torchscript_modifier", FunctionModifiers.DEFAULT)


def export(fn):
    """Compile this method with the module even when ``forward`` does not call it.

    Examples
    --------
    >>> import torcia
    >>> class M(torcia.nn.Module):
    ...     @torcia.jit.export
    ...     def scale(self, x):
    ...         return 2 * x
    >>> M.scale._torchscript_modifier
    'export (compile this function even if nothing calls it)'
    """
    fn._torchscript_modifier = FunctionModifiers.EXPORT
    return fn


def unused(fn):
    """Leave this method (or property) out of compiled programs: a compiled program that
    reaches it raises instead. Eager calls run it as written.

    Examples
    --------
    >>> import torcia
    >>> @torcia.jit.unused
    ... def debug(x):
    ...     return x
    >>> debug._torchscript_modifier, debug(3)
    ('unused (ignored and replaced with raising of an exception)', 3)
    """
    if isinstance(fn, property):
        for accessor in (fn.fget, fn.fset):
            if accessor is not None:
                accessor._torchscript_modifier = FunctionModifiers.UNUSED
        return fn
    fn._torchscript_modifier = FunctionModifiers.UNUSED
    return fn


def ignore(drop=False, **kwargs):
    """Keep this function a Python call in compiled programs (``@ignore``), or, with
    ``@ignore(drop=True)``, leave it out as :func:`unused` does.

    Examples
    --------
    >>> import torcia
    >>> @torcia.jit.ignore
    ... def log_shape(x):
    ...     return tuple(x.shape)
    >>> log_shape._torchscript_modifier
    "ignore (leave as a call to Python, cannot be torch.jit.save'd)"
    >>> @torcia.jit.ignore(drop=True)
    ... def checkpointed(x):
    ...     return x
    >>> checkpointed._torchscript_modifier
    'unused (ignored and replaced with raising of an exception)'
    """
    if callable(drop):
        drop._torchscript_modifier = FunctionModifiers.IGNORE
        return drop
    if not builtins.isinstance(drop, bool):
        raise RuntimeError("Argument to @torch.jit.ignore must be a bool or a function but "
                           f"got {drop}")
    drop_on_export = kwargs.pop("drop_on_export", None)
    if kwargs:
        raise TypeError(f"ignore() got unexpected keyword arguments {sorted(kwargs)}")
    drop = drop or bool(drop_on_export)

    def decorator(fn):
        fn._torchscript_modifier = FunctionModifiers.UNUSED if drop \
            else FunctionModifiers.IGNORE
        return fn

    return decorator


def _drop(fn):
    fn._torchscript_modifier = FunctionModifiers._DROP
    return fn


def _copy_to_script_wrapper(fn):
    fn._torchscript_modifier = FunctionModifiers.COPY_TO_SCRIPT_WRAPPER
    return fn


_overloads: dict[str, list] = collections.defaultdict(list)


def _overload(fn):
    """Declare one typed signature of a function defined again below it (TorchScript's
    overloads); eager Python calls the last definition."""
    _overloads[f"{fn.__module__}.{fn.__qualname__}"].append(fn)
    return fn


def _overload_method(fn):
    """:func:`_overload` for methods."""
    return _overload(fn)


def _get_overloads(fn) -> list:
    return list(_overloads.get(f"{fn.__module__}.{fn.__qualname__}", ()))


def interface(obj):
    """Declare a class as an interface that modules may implement (TorchScript's module
    interfaces); the class is returned marked.

    Examples
    --------
    >>> import torcia
    >>> @torcia.jit.interface
    ... class Scorer(torcia.nn.Module):
    ...     def forward(self, x: torcia.Tensor) -> torcia.Tensor: ...
    >>> Scorer.__torch_script_interface__
    True
    """
    if not builtins.isinstance(obj, type):
        raise RuntimeError("interface must be applied to a class")
    obj.__torch_script_interface__ = True
    return obj


def annotate(the_type, the_value):
    """Give ``the_value`` a type for the compiler; eager code gets the value back.

    Examples
    --------
    >>> import torcia
    >>> torcia.jit.annotate(list[int], [])
    []
    """
    return the_value


def _unwrap_optional(x):
    if x is None:
        raise AssertionError("Unwrapping null optional")
    return x


_Attribute = collections.namedtuple("Attribute", ["value", "type"])


def Attribute(value, type):  # noqa: A002, N802  (torch.jit.Attribute's name and arguments)
    """A module attribute with the type the compiler is to give it:
    ``self.names = torcia.jit.Attribute([], list[str])``; eager modules read ``.value``
    (a named tuple of ``value`` and ``type``, as PyTorch's).

    Examples
    --------
    >>> import torcia
    >>> torcia.jit.Attribute([], list[str]).value
    []
    """
    return _Attribute(value, type)


#: ``torch.jit.Final``: a constant attribute (``typing.Final``).
Final = typing.Final


def _matches(obj, target) -> bool:
    origin = typing.get_origin(target)
    if target is typing.Any:
        return True
    if origin is None:
        if target is None or target is type(None):
            return obj is None
        return builtins.isinstance(obj, target)
    args = typing.get_args(target)
    if origin is typing.Union or origin is types.UnionType:
        return any(_matches(obj, a) for a in args)
    if origin is list:
        return builtins.isinstance(obj, list) and all(_matches(x, args[0]) for x in obj)
    if origin is tuple:
        if not builtins.isinstance(obj, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(x, args[0]) for x in obj)
        return len(obj) == len(args) and all(_matches(x, a) for x, a in zip(obj, args))
    if origin is dict:
        return builtins.isinstance(obj, dict) and all(
            _matches(k, args[0]) and _matches(v, args[1]) for k, v in obj.items())
    return builtins.isinstance(obj, origin)


def isinstance(obj, target_type) -> bool:
    """``isinstance`` that also checks container element types: ``List[int]``,
    ``Dict[str, Tensor]``, ``Tuple[int, str]``, ``Optional[Tensor]``.

    Examples
    --------
    >>> import torcia
    >>> from typing import Dict, List, Optional
    >>> torcia.jit.isinstance([1, 2], List[int]), torcia.jit.isinstance([1, "a"], List[int])
    (True, False)
    >>> torcia.jit.isinstance({"w": torcia.ones(1)}, Dict[str, torcia.Tensor])
    True
    >>> torcia.jit.isinstance(None, Optional[int])
    True
    """
    return _matches(obj, target_type)


def script_if_tracing(fn):
    """Mark ``fn`` to be compiled only when it is called while a trace
    (``torch.jit.trace``) runs. torcia's :func:`~torcia.jit.script` captures what tracing
    captures, so the trace records ``fn``'s ops as it records any other code; eager calls
    run it as written.

    Examples
    --------
    >>> import torcia
    >>> @torcia.jit.script_if_tracing
    ... def double(x):
    ...     return x * 2
    >>> double(torcia.ones(2)).tolist()
    [2.0, 2.0]
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    wrapper.__original_fn = fn
    wrapper.__script_if_tracing_wrapper = True
    return wrapper
