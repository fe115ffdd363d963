"""PyTorch's ``__torch_function__`` protocol: classes that take over torcia's functions.

A class (a :class:`torcia.Tensor` subclass, or any type, a "tensor-like") that defines
``__torch_function__(cls, func, types, args=(), kwargs=None)`` is asked to run every torcia
function and Tensor method that one of its instances is passed to, as in PyTorch. A Tensor
subclass inherits :meth:`torcia.Tensor.__torch_function__`, which runs the op and gives its
tensor results the subclass's type, so subclasses keep their type through ops. A
:class:`TorchFunctionMode` entered with ``with`` sees every call in its thread.

The protocol costs nothing until it can matter: torcia's functions and Tensor methods are
routed through it from the first time a Tensor subclass that does not opt out is defined, a
mode is entered, or :func:`has_torch_function` / :func:`handle_torch_function` is called (as
code defining its own tensor-likes does), or :func:`switch_on` says so.
``nn.Parameter`` opts out (``__torch_function__ = disabled_torch_function_impl``): ops on a
parameter give plain tensors.

Examples
--------
>>> import torcia
>>> class Tagged(torcia.Tensor):
...     pass
>>> x = torcia.ones(2).as_subclass(Tagged)
>>> type(x + 1).__name__, type(torcia.exp(x)).__name__, type(x.sum()).__name__
('Tagged', 'Tagged', 'Tagged')
>>> class Logged(torcia.overrides.TorchFunctionMode):
...     def __torch_function__(self, func, types, args=(), kwargs=None):
...         print(func.__name__)
...         return func(*args, **(kwargs or {}))
>>> x = torcia.ones(1)
>>> with Logged():
...     _ = torcia.mul(x, 2)
mul
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
import threading
import types as _types

from torcia._dtype import dtype as _dtype
from torcia._ops import creation
from torcia._tensor import Size, Tensor, _torch_function_of, disabled_torch_function_impl
from torcia.backend import device as _device

__all__ = [
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "TorchFunctionMode",
    "disabled_torch_function_impl", "handle_torch_function",
    "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
    "is_tensor_like", "is_tensor_method_or_property", "switch_on",
]


class _State(threading.local):
    def __init__(self):
        self.modes: list = []  # entered modes, innermost last
        self.subclass_off = 0  # DisableTorchFunctionSubclass depth
        self.all_off = 0  # DisableTorchFunction depth


_STATE = _State()

# what never takes over a call: skipped at once when looking for overloaded arguments
_PLAIN = frozenset({Tensor, int, float, bool, complex, str, bytes, type(None), slice,
                    type(Ellipsis), _dtype, _device, Size})


def _overloaded_type(t) -> bool:
    if t in _PLAIN:
        return False
    fn = _torch_function_of(t)
    if fn is None or fn is disabled_torch_function_impl:
        return False
    # a real PyTorch tensor (handed to from_dlpack, say) is data here, not a tensor-like:
    # its default __torch_function__ runs PyTorch's functions, not the one it is given
    return getattr(fn, "__module__", None) != "torch._tensor"


def _collect(value, found: list) -> None:
    t = type(value)
    if t is list or t is tuple:
        for v in value:
            if type(v) not in _PLAIN:
                _collect(v, found)
    elif _overloaded_type(t) and all(v is not value for v in found):
        # by identity: ``in`` would compare tensors with their own (routed) __eq__
        found.append(value)


def _overloaded_args(args, kwargs) -> list:
    """The arguments whose types take over the call, subclasses before their bases and
    otherwise in order (PyTorch's ``_get_overloaded_args``)."""
    found: list = []
    for a in args:
        if type(a) not in _PLAIN:
            _collect(a, found)
    if kwargs:
        for a in kwargs.values():
            if type(a) not in _PLAIN:
                _collect(a, found)
    ordered: list = []
    for a in found:
        t = type(a)
        if any(type(b) is t for b in ordered):
            continue
        at = len(ordered)
        for i, b in enumerate(ordered):
            if issubclass(t, type(b)):
                at = i
                break
        ordered.insert(at, a)
    return ordered


def has_torch_function(relevant_args) -> bool:
    """Whether any of ``relevant_args`` (or a mode) would take over a call.

    Examples
    --------
    >>> import torcia
    >>> torcia.overrides.has_torch_function((torcia.ones(1), 2))
    False
    """
    switch_on()
    if _STATE.all_off:
        return False
    return bool(_STATE.modes) or bool(_subclass_args(_overloaded_args(relevant_args, None)))


def has_torch_function_unary(arg) -> bool:
    """:func:`has_torch_function` of one argument."""
    return has_torch_function((arg,))


def has_torch_function_variadic(*args) -> bool:
    """:func:`has_torch_function` of the arguments."""
    return has_torch_function(args)


def _subclass_args(overloaded: list) -> list:
    if _STATE.subclass_off:
        # only tensor-likes that are not Tensor subclasses still take over
        return [a for a in overloaded if not isinstance(a, Tensor)]
    return overloaded


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Run ``public_api(*args, **kwargs)`` through the innermost mode and the
    ``__torch_function__`` of the overloaded ``relevant_args`` (PyTorch's protocol): the
    first that does not return ``NotImplemented`` answers.

    Examples
    --------
    >>> import torcia
    >>> from torcia.overrides import handle_torch_function, has_torch_function
    >>> class Scalar:
    ...     def __init__(self, v):
    ...         self.v = v
    ...     @classmethod
    ...     def __torch_function__(cls, func, types, args=(), kwargs=None):
    ...         return "handled " + func.__name__
    >>> def double(x):
    ...     if has_torch_function((x,)):
    ...         return handle_torch_function(double, (x,), x)
    ...     return x * 2
    >>> double(Scalar(1)), double(torcia.ones(1))
    ('handled double', tensor([2.]))
    """
    switch_on()
    overloaded = _subclass_args(_overloaded_args(relevant_args, None))
    return _handle(public_api, overloaded, args, kwargs)


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))


def is_tensor_like(inp) -> bool:
    """Whether ``inp`` is a Tensor or a tensor-like (its type defines
    ``__torch_function__``).

    Examples
    --------
    >>> import torcia
    >>> torcia.overrides.is_tensor_like(torcia.ones(1)), torcia.overrides.is_tensor_like(1)
    (True, False)
    """
    return isinstance(inp, Tensor) or hasattr(type(inp), "__torch_function__")


def is_tensor_method_or_property(func) -> bool:
    """Whether ``func`` is a method of :class:`torcia.Tensor` or a property's getter.

    Examples
    --------
    >>> import torcia
    >>> from torcia.overrides import is_tensor_method_or_property
    >>> is_tensor_method_or_property(torcia.Tensor.add), is_tensor_method_or_property(len)
    (True, False)
    """
    for value in vars(Tensor).values():
        if value is func or (isinstance(value, property) and (
                value.fget is func or value.__get__ == func)):
            return True
    return False


class TorchFunctionMode:
    """Base of the modes that see every torcia function and Tensor method call made in
    their thread while entered; ``__torch_function__`` runs with the mode itself taken off,
    so calling ``func`` there runs the op (or the next mode out).

    Examples
    --------
    >>> import torcia
    >>> from torcia.overrides import TorchFunctionMode
    >>> class Double(TorchFunctionMode):
    ...     def __torch_function__(self, func, types, args=(), kwargs=None):
    ...         out = func(*args, **(kwargs or {}))
    ...         return out * 2 if func is torcia.add else out
    >>> with Double():
    ...     torcia.add(torcia.ones(1), 1)
    tensor([4.])
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        switch_on()
        _STATE.modes.append(self)
        return self

    def __exit__(self, *exc):
        _STATE.modes.remove(self)
        return False


class DisableTorchFunctionSubclass:
    """Within it, Tensor subclasses' ``__torch_function__`` is not called (modes and
    non-Tensor tensor-likes still are): what the default implementation runs ops in."""

    def __enter__(self):
        _STATE.subclass_off += 1
        return self

    def __exit__(self, *exc):
        _STATE.subclass_off -= 1
        return False


class DisableTorchFunction:
    """Within it, no ``__torch_function__`` and no mode is called."""

    def __enter__(self):
        _STATE.all_off += 1
        return self

    def __exit__(self, *exc):
        _STATE.all_off -= 1
        return False


# ---------------------------------------------------------------------------------------
# Tensor's default __torch_function__
# ---------------------------------------------------------------------------------------


def default_torch_function(cls, func, types, args=(), kwargs=None):
    """What :meth:`torcia.Tensor.__torch_function__` does: run ``func`` with subclass
    dispatch off and give its tensor results the type ``cls``."""
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        result = func(*args, **(kwargs or {}))
    if func in _NO_WRAP:
        return result
    return _convert(result, cls, args)


def _convert(result, cls, args):
    if isinstance(result, Tensor) and not isinstance(result, cls):
        if any(result is a for a in args) or not _layout_compatible(type(result), cls):
            # an input handed back, or a class with slots of its own: an alias
            return result.as_subclass(cls)
        result.__class__ = cls  # a fresh result: retyped in place, its graph kept
        return result
    if type(result) in (tuple, list):
        return type(result)(_convert(r, cls, args) for r in result)
    return result


@functools.cache
def _layout_compatible(a, b) -> bool:
    probe = creation.empty(0)
    try:
        probe.__class__ = a
        probe.__class__ = b
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------------------
# routing torcia's functions and Tensor methods through the protocol
# ---------------------------------------------------------------------------------------

#: modules whose public functions take part (those loaded when dispatch is switched on)
NAMESPACES = ("torcia", "torcia.linalg", "torcia.fft", "torcia.special", "torcia.nn.functional")

# Tensor attributes that stay out of dispatch: object protocol, construction, conversion
_SKIP = frozenset({
    "__new__", "__init__", "__init_subclass__", "__torch_function__", "__getattribute__",
    "__getattr__", "__setattr__", "__delattr__", "__class__", "__dict__", "__weakref__",
    "__slots__", "__module__", "__doc__", "__hash__", "__reduce_ex__", "__reduce__",
    "__deepcopy__", "__array__", "__array_priority__", "__dlpack__", "__dlpack_device__",
    "__repr__", "__format__", "__class_getitem__", "__sizeof__", "__dir__", "__bool__",
    "__index__", "__int__", "__float__", "__complex__", "__len__", "__iter__", "numpy",
    "item", "tolist", "as_subclass", "data_ptr",
})
_NO_WRAP: set = set()  # results not retyped (PyTorch's get_default_nowrap_functions)
_wrapped: dict = {}  # id(wrapper) -> original, so that nothing is wrapped twice
_wrappers: dict = {}  # id(original) -> its wrapper: one function object wherever it is named


def _dispatching(impl, public=None):
    """``impl`` routed through the protocol: a call with no overloaded argument and no
    mode runs ``impl`` directly."""

    @functools.wraps(impl)
    def dispatch(*args, **kwargs):
        if _STATE.all_off or not (_STATE.modes or _any_overloaded(args, kwargs)):
            return impl(*args, **kwargs)
        overloaded = _subclass_args(_overloaded_args(args, kwargs))
        if not overloaded and not _STATE.modes:
            return impl(*args, **kwargs)
        return _handle(public or dispatch, overloaded, args, kwargs)

    _wrapped[id(dispatch)] = impl
    _wrappers[id(impl)] = dispatch
    return dispatch


def _any_overloaded(args, kwargs) -> bool:
    for a in args:
        t = type(a)
        if t in _PLAIN:
            continue
        if t is list or t is tuple:
            if any(type(b) not in _PLAIN and _overloaded_type(type(b)) for b in a):
                return True
        elif _overloaded_type(t):
            return True
    if kwargs:
        return _any_overloaded(tuple(kwargs.values()), None)
    return False


def _handle(public, overloaded, args, kwargs):
    kinds = tuple(dict.fromkeys(type(a) for a in overloaded))
    if _STATE.modes:
        mode = _STATE.modes.pop()
        try:
            result = mode.__torch_function__(public, kinds, args, kwargs)
        finally:
            _STATE.modes.append(mode)
        if result is not NotImplemented:
            return result
    for arg in overloaded:
        result = type(arg).__torch_function__(public, kinds, args, kwargs)
        if result is not NotImplemented:
            return result
    names = ", ".join(f"'{t.__module__}.{t.__qualname__}'" for t in kinds)
    raise TypeError(f"no implementation found for '{_name(public)}' on types that "
                    f"implement __torch_function__: [{names}]")


def _route_module(module) -> None:
    for name, value in list(vars(module).items()):
        if name.startswith("_") or not isinstance(value, _types.FunctionType):
            continue
        if id(value) in _wrapped or value.__module__ in (__name__, "typing"):
            continue
        setattr(module, name, _wrappers.get(id(value)) or _dispatching(value))


def _route_tensor() -> None:
    for name, value in list(vars(Tensor).items()):
        if name in _SKIP or (name.startswith("_") and not name.startswith("__")):
            continue
        if isinstance(value, _types.FunctionType) and id(value) not in _wrapped:
            setattr(Tensor, name, _dispatching(value))
        elif isinstance(value, property) and value.fget is not None and (
                id(value.fget) not in _wrapped):
            getter = _dispatching(value.fget)
            prop = property(getter, value.fset, value.fdel, value.__doc__)
            setattr(Tensor, name, prop)
            if name in ("grad", "data"):  # the tensors themselves, never retyped
                _NO_WRAP.add(getter)


_on = [False]


def switch_on() -> None:
    """Route torcia's functions and Tensor methods through the protocol from now on (done
    when a Tensor subclass that takes part is defined, a mode is entered, or one of this
    module's functions is called; idempotent)."""
    if _on[0]:
        return
    _on[0] = True
    _route_tensor()
    _bind_lazy(sys.modules)
    for name in NAMESPACES:
        module = sys.modules.get(name)
        if module is not None:
            _route_module(module)
    # a namespace imported later (torcia.fft, torcia.nn.functional are imported on first
    # use) is routed as it finishes loading, as if it had been there now
    sys.meta_path.insert(0, _RouteOnImport())
    _one_object()


class _RouteOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a namespace of :data:`NAMESPACES`, it takes the spec the
    other finders give and routes the module's functions once the module has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in NAMESPACES and fullname not in _lazy_modules():
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _RoutingLoader(spec.loader)
                return spec
        return None


class _RoutingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        if module.__name__ in NAMESPACES:
            _route_module(module)
        else:
            _bind_lazy((module.__name__,))
            _route_module(sys.modules["torcia"])
        _one_object()


def _lazy_modules():
    return frozenset(sys.modules["torcia"]._LAZY.values())


def _bind_lazy(loaded) -> None:
    # torcia binds save, load and the autocast functions on first use; bound only then, a
    # module's own name (torch.serialization.save) read earlier would stay the unrouted
    # function while torcia.save became the routed one
    top = sys.modules["torcia"]
    for name, module in top._LAZY.items():
        if module in loaded and name not in vars(top):
            setattr(top, name, getattr(sys.modules[module], name))

    def __getattr__(self, name):  # get_source, is_package... for inspect and linecache
        return getattr(self.loader, name)


def routed(value):
    """``value``, a public function of torcia's namespace that is bound with its first use
    (``torcia.save``), as :func:`switch_on` would have left it had the name been bound then:
    routed through the protocol once dispatch is on, under each of its public names.

    Examples
    --------
    >>> import torcia
    >>> from torcia import overrides
    >>> overrides.routed(torcia.save) is torcia.save
    True
    """
    if not _on[0] or not isinstance(value, _types.FunctionType) or id(value) in _wrapped or (
            value.__module__ in (__name__, "typing")):
        return value
    wrapper = _wrappers.get(id(value)) or _dispatching(value)
    _one_object()
    return wrapper


def _one_object() -> None:
    # a function is one object under every public name (torcia.save is
    # torcia.serialization.save; library re-exports nn.functional's), routed or not
    for name, module in list(sys.modules.items()):
        if name != "torcia" and not name.startswith("torcia.") or any(
                part.startswith("_") for part in name.split(".")):
            continue
        for attr, value in list(vars(module).items()):
            wrapper = _wrappers.get(id(value))
            if wrapper is not None and _wrapped.get(id(wrapper)) is value:
                setattr(module, attr, wrapper)
