"""torcia.library: the one interface between torcia-core and everything built on it.

Other torcia distributions (autograd, nn, optim, the device plugins...) and third-party
plugins import from core only the user API (``torcia.tensor``, ``torcia.no_grad``...) and
this module; core's underscored modules are private and ``tools/check_deps.py`` rejects
any import of them from outside torcia-core.

What is here:

- **Op records** (:class:`OpDef`, :func:`op_records`, :func:`get_op`): one record per op
  with its group, inputs and parameters, reference kernel, backward formula and
  docstring. The built-in records are *derived* from the op lists of :mod:`torcia.ops`,
  the NumPy reference kernels and the derivative table of the autograd engine, so an op
  added the old way (a name in ``ops.py``, a kernel, a derivative row) is a record at
  once.
- **Primitives and composites** (:func:`primitives`, :attr:`OpDef.decomposition`): a
  device backend owes the primitives only; composites run through their decomposition
  where it has no kernel of its own.
- **The dispatch entry points** ops are written with: :func:`call`, :func:`binary`,
  :func:`unary`, :func:`inplace`, and the :class:`Tensor` they return.
- **Typed contracts**: :class:`AutogradEngine`, :class:`BackendProtocol` and
  :class:`KernelRegistryProtocol` (``typing.Protocol``), one :class:`Registry` base, one
  :class:`~torcia.utils.hooks.RemovableHandle`.
- **Dispatch modes** (:class:`DispatchMode`, :func:`active_modes`): features that join
  every op of the thread that entered them, in a fixed order (:class:`ModeOrder`, whose
  built-in places are also :data:`AUTOCAST_ORDER`, :data:`PROFILE_ORDER`,
  :data:`TRACE_ORDER`, :data:`AUTOGRAD_ORDER`: the kernel, then autograd recording, last);
  autocast, the profiler and the ONNX exporter are modes entered in a thread, autograd's
  recording an :class:`AutogradMode` registered for all threads
  with :func:`register_autograd_mode`. :func:`autocast_as` makes a
  function written with several ops one op for the modes (its autocast policy).
- **One fallback** for device plugins: a device declares what runs the ops it has no
  kernel for (``Backend(fallback="host" | "reference" | "decompose")``), a kernel that
  covers only some inputs hands the rest to :func:`fallback`, and :func:`device_ops`
  says how the device runs each op; :func:`host_fallback` is the host round trip itself
  (PyTorch's boxed CPU fallback).
- **Custom ops** as ``torch.library`` makes them (:func:`custom_op`, :func:`register_fake`,
  :func:`register_autograd`, :func:`register_kernel`): a program's own op, with a record,
  kernels, derivative and meta shape put where a plugin's would be.
- **A tensor's internals** as other parts may use them: :func:`array` (the array),
  :func:`wrap` and :func:`tensor_of` (an array as a tensor), :func:`alias`,
  :func:`bump_version`, :func:`set_grad_mode`, :func:`add_seed_callback`, and for per-op
  paths the published field names of :data:`TENSOR_FIELDS` (``t.__torcia_data__``, the
  version counter, the one autograd-meta slot...), which cost what an attribute costs.
- **The functional forms** of core's NN ops (:data:`functional`: ``functional.conv2d``,
  ``functional.gelu``...), which :mod:`torcia.nn.functional` re-exports.
- Small shared helpers: :func:`parse_to` (the arguments of ``.to()``), :func:`ntuple`,
  :func:`dtype_from_numpy`, :func:`pool_geometry`, :func:`check_geometry`,
  :func:`add_thread_callback`.

Examples
--------
>>> import torcia
>>> from torcia import library
>>> rec = library.get_op("mul")
>>> rec.group, rec.inputs
('binary', ('input', 'other'))
>>> library.call("exp", (torcia.zeros(2),), {})
tensor([1., 1.])
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from torcia import _dtype, _shared_memory, random
from torcia._autocast import autocast_as
from torcia._autograd_mode import AutogradEngine, register_autograd_mode
from torcia._custom_ops import (
    CustomOpDef,
    OpNamespace,
    custom_op,
    infer_schema,
    register_autograd,
    register_fake,
    register_kernel,
)
from torcia._grad_mode import STATE as GRAD_MODE
from torcia._methods import parse_to
from torcia._numpy_backend import Reference as ReferenceKernels
from torcia._opdef import OpDef
from torcia._oplib import nn as _nn
from torcia._oplib import runtime as _runtime
from torcia._oprecords import (
    OpRegistry,
    device_ops,
    fallback,
    get_op,
    host_fallback,
    op_records,
    plugin_ops,
    primitives,
)
from torcia._ops import linalg as _linalg
from torcia._ops import movement as _movement
from torcia._ops import nn_activation as _nn_activation
from torcia._ops import nn_conv as _nn_conv
from torcia._ops import nn_loss as _nn_loss
from torcia._ops import nn_norm as _nn_norm
from torcia._ops import nn_pool as _nn_pool
from torcia._ops.movement import pad
from torcia._ops.nn_conv import batched, check_geometry, ntuple, unbatch
from torcia._ops.nn_pool import pool_geometry
from torcia._tensor import (
    AUTOCAST_ORDER,
    AUTOGRAD_ORDER,
    PROFILE_ORDER,
    TRACE_ORDER,
    AutogradMode,
    DispatchMode,
    ModeOrder,
    Size,
    Tensor,
    _make,
    active_modes,
    binary,
    call,
    disabled_torch_function_impl,
    inplace,
    unary,
)
from torcia._tensor import PUBLISHED_FIELDS as _PUBLISHED_FIELDS
from torcia._tensor import _wrap_dim as wrap_dim
from torcia._tensor import load_autograd as _load_autograd
from torcia.backend import (
    Backend,
    KernelRegistry,
    canonical,
    check_async,
    get_backend,
    host_array,
)
from torcia.plugins import Registry, hookimpl, lent
from torcia.utils.hooks import RemovableHandle

__all__ = [
    "AUTOCAST_ORDER", "AUTOGRAD_ORDER", "AutogradEngine", "AutogradMode", "Backend",
    "BackendProtocol", "DispatchMode",
    "GRAD_MODE", "KernelRegistry", "KernelRegistryProtocol", "ModeOrder", "OpDef", "OpRegistry",
    "PROFILE_ORDER", "ReferenceKernels", "Registry", "RemovableHandle", "Size", "TRACE_ORDER",
    "Tensor", "active_modes", "add_thread_callback", "autocast_as", "autograd_engine", "batched",
    "binary", "call", "check_geometry", "device_ops", "disabled_torch_function_impl",
    "dtype_by_name", "dtype_from_numpy",
    "fallback", "get_backend",
    "get_op", "hookimpl", "host_array", "host_fallback", "inplace", "lent", "ntuple",
    "op_records",
    "pad", "parse_to", "plugin_ops", "pool_geometry", "primitives", "register_autograd_mode",
    "check_async", "share_memory", "tensor_of", "unary", "unbatch",
    "wrap_dim", "zero_grad",
]
# a tensor's internals (see TENSOR_FIELDS)
__all__ += ["TENSOR_FIELDS", "add_seed_callback", "alias", "array", "bump_version",
            "set_grad_mode", "wrap"]

# torch.library's custom ops, defined by a program rather than a plugin (torcia._custom_ops)
__all__ += ["CustomOpDef", "OpNamespace", "custom_op", "infer_schema", "register_autograd",
            "register_fake", "register_kernel"]

# the functional forms of the NN ops (checks, batching), which torcia.nn.functional re-exports
__all__ += ["functional"]


_FUNCTIONAL_DOC = """The functional forms of core's NN ops, which :mod:`torcia.nn.functional`
re-exports (``functional.conv2d``, ``functional.gelu``...): their argument checks, batching
and dispatch. Each op family of core names its own (its ``FUNCTIONAL``); the activations'
are made from their declarations (:mod:`torcia._ops.nn_activation`). ``__all__`` lists them.

Examples
--------
>>> import torcia
>>> from torcia.library import functional
>>> functional.softplus(torcia.tensor([0.0]))
tensor([0.6931])
"""


def _functional() -> types.ModuleType:
    """The module :data:`functional`: each NN family's ``FUNCTIONAL`` forms."""
    module = types.ModuleType(f"{__name__}.functional", _FUNCTIONAL_DOC)
    forms = {name: getattr(family, name)
             for family in (_movement, _linalg, _nn_activation, _nn_conv, _nn_pool, _nn_norm,
                            _nn_loss, _nn)
             for name in family.FUNCTIONAL}
    vars(module).update(forms, __all__=sorted(forms))
    return module


#: The functional forms of core's NN ops (a module: ``functional.conv2d``,
#: ``functional.gelu``...), which :mod:`torcia.nn.functional` re-exports. Importable as
#: ``torcia.library.functional`` (as ``os.path`` is), so that it star-imports them.
functional = _functional()
sys.modules[functional.__name__] = functional


# ---------------------------------------------------------------------------------------
# typed contracts
# ---------------------------------------------------------------------------------------


@runtime_checkable
class BackendProtocol(Protocol):
    """A device type as core uses it (``torcia.library.Backend`` implements it)."""

    name: str
    xp: Any
    kernels: dict

    def to_host(self, array): ...

    def from_host(self, array, index=None): ...

    def is_available(self) -> bool: ...

    def device_count(self) -> int: ...


@runtime_checkable
class KernelRegistryProtocol(Protocol):
    """What ``torcia_register_kernels`` receives."""

    def add(self, op: str, device_type: str, fn: Callable, priority: int = 0) -> None: ...


# ---------------------------------------------------------------------------------------
# autograd, threads, dtypes, helpers
# ---------------------------------------------------------------------------------------


def autograd_engine() -> AutogradEngine:
    """The autograd engine (provided by a plugin through ``torcia_autograd_engine``), or a
    RuntimeError naming the distribution to install or the blocklist that blocks it.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> engine = library.autograd_engine()
    >>> isinstance(engine, library.AutogradEngine)
    True
    """
    return _load_autograd()


def add_thread_callback(fn: Callable[[int], None]) -> RemovableHandle:
    """Call ``fn(n)`` whenever :func:`torcia.set_num_threads` sets ``n`` threads.

    Example: a native backend follows torcia's thread count with
    ``library.add_thread_callback(native.set_num_threads)``.
    """
    callbacks = _runtime._thread_callbacks
    callbacks.append(fn)
    return RemovableHandle(callbacks, hook=fn)


def dtype_from_numpy(np_dtype) -> _dtype.dtype:
    """The torcia dtype of a NumPy dtype (``numpy.dtype("float32")`` -> ``torcia.float32``).

    Examples
    --------
    >>> import torcia
    >>> import numpy as np
    >>> torcia.library.dtype_from_numpy(np.dtype("int16"))
    torcia.int16
    """
    return _dtype.from_numpy_dtype(np_dtype)


# ---------------------------------------------------------------------------------------
# a tensor's internals: what other parts may use of them
# ---------------------------------------------------------------------------------------
#
# Other parts use a tensor's internals through the functions below and, on their per-op
# paths, through the published field names of TENSOR_FIELDS, which cost what an attribute
# read costs (a function call per access would cost autograd's recording a fifth of its
# time). tools/check_deps.py rejects any other private name of a core object outside core.

#: The fields of a :class:`Tensor` published to other parts, ``{name: what it holds}``:
#: ``t.__torcia_data__`` is the array, ``t.__torcia_version__`` the version counter...
#: Each is read and written at the cost of a plain attribute (docs/architecture.rst).
TENSOR_FIELDS = {name: doc for name, (_, doc) in _PUBLISHED_FIELDS.items()}


def array(t: Tensor):
    """The array holding ``t``'s elements (of its device's array module: NumPy on "cpu"),
    shared, not copied: a write into it is a write into ``t`` that autograd does not see
    (call :func:`bump_version` after one).

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> library.array(torcia.arange(3))
    array([0, 1, 2])
    """
    return t._data


#: ``wrap(array, device, base=None)``: a tensor over ``array``, an array of the array
#: module of ``device`` (a :class:`torcia.device` as a tensor carries it, e.g. another
#: tensor's ``__torcia_device__``), sharing its memory, with no autograd history; with
#: ``base``, a view of that tensor (sharing its version counter). The constructor itself,
#: for per-op paths; :func:`tensor_of` takes any device specification.
wrap = _make


def tensor_of(array, device) -> Tensor:
    """A tensor over ``array``, an array of ``device``'s array module (NumPy on "cpu",
    CuPy on "cuda"), sharing its memory, with no autograd history: how a program that
    ran kernels itself (torcia.compile's replay) hands back their results.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.library import tensor_of
    >>> a = np.zeros(2, dtype=np.float32)
    >>> t = tensor_of(a, "cpu"); a[0] = 3
    >>> t
    tensor([3., 0.])
    """
    return _make(array, canonical(device))


def alias(t: Tensor) -> Tensor:
    """A new tensor over ``t``'s array, on its device, sharing its version counter, with
    no autograd history: what autograd saves of an op's output without a reference cycle,
    and what a ``Parameter`` is made of.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> x = torcia.zeros(2, requires_grad=True)
    >>> a = library.alias(x)
    >>> a.requires_grad, a._version
    (False, 0)
    >>> with torcia.no_grad():
    ...     _ = x.add_(1)
    >>> a, a._version
    (tensor([1., 1.]), 1)
    """
    out = _make(t._data, t._device)
    out._vc = t._vc
    return out


def bump_version(t: Tensor) -> None:
    """Count a write into ``t``'s array made outside torcia's ops (a collective's result
    copied in, an optimizer's native step): autograd then refuses a backward through a
    saved older value, as for any in-place op.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> x = torcia.zeros(2)
    >>> library.array(x)[0] = 5; library.bump_version(x)
    >>> x._version
    1
    """
    t._vc[0] += 1


def set_grad_mode(enabled: bool) -> bool:
    """Turn gradient recording on or off in this thread; returns the mode it was in (as
    ``torcia.set_grad_enabled``, without making a context manager): how an autograd
    engine runs a backward pass with ``create_graph``.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> before = library.set_grad_mode(False)
    >>> torcia.is_grad_enabled()
    False
    >>> library.set_grad_mode(before)
    False
    """
    before = GRAD_MODE.enabled
    GRAD_MODE.enabled = bool(enabled)
    return before


def add_seed_callback(fn: Callable[[int], None]) -> RemovableHandle:
    """Call ``fn(seed)`` whenever :func:`torcia.manual_seed` seeds the default generator:
    a device backend seeds its own generators with it.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> seen = []
    >>> handle = library.add_seed_callback(seen.append)
    >>> _ = torcia.manual_seed(7); handle.remove(); _ = torcia.manual_seed(8)
    >>> seen
    [7]
    """
    callbacks = random._seed_callbacks
    callbacks.append(fn)
    return RemovableHandle(callbacks, hook=fn)


def dtype_by_name(name: str) -> _dtype.dtype:
    """A dtype by its name: ``"float32"``, ``"float"``, ``"bfloat16"``...; a KeyError
    naming the known names otherwise.

    Examples
    --------
    >>> import torcia.library
    >>> torcia.library.dtype_by_name("float")
    torcia.float32
    """
    try:
        return _dtype._by_name(name)
    except KeyError:
        known = ", ".join(sorted(_dtype._NAMES))
        raise KeyError(f"no dtype named {name!r}; known: {known}") from None


def zero_grad(parameters, set_to_none: bool = True) -> None:
    """Reset the gradients of ``parameters``: to None (the default), or to zeros in place
    (detached from any graph first), as ``Module.zero_grad`` and ``Optimizer.zero_grad``.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.ones(2, requires_grad=True); w.sum().backward()
    >>> torcia.library.zero_grad([w], set_to_none=False); w.grad
    tensor([0., 0.])
    """
    for p in parameters:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            if p.grad.grad_fn is not None:
                p.grad.detach_()
            else:
                p.grad.requires_grad_(False)
            p.grad.zero_()


def share_memory(tensors) -> None:
    """Move the memory of ``tensors`` into shared memory in place, as ``share_memory_()``
    on each but in one pass (``Module.share_memory`` uses it for all its tensors).

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.ones(2), torcia.zeros(3)
    >>> torcia.library.share_memory([a, b]); a.is_shared(), b.is_shared()
    (True, True)
    """
    _shared_memory.share(list(tensors))
