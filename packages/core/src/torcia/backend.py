"""Devices and device backends.

A backend is an array module (``xp``: numpy, cupy...), transfers to and from host memory,
and a kernel table (op name -> function on arrays) filled through
:func:`torcia.hookspecs.torcia_register_kernels`. The tables are built once; an operation
looks its kernel up in ``device.kernels``, a plain dict.
"""

from __future__ import annotations

import functools
import inspect
import threading

import numpy as np

from torcia import ops, plugins

#: The values of ``Backend(fallback=...)``.
FALLBACKS = ("decompose", "host", "reference")

#: The provider name of the kernels a device's declared fallback supplies.
FALLBACK_PROVIDER = "<fallback>"


class KernelTable(dict):
    """A device's op -> kernel dict; a missing op raises an error naming the device."""

    def __init__(self, device_type):
        super().__init__()
        self.device_type = device_type

    def __missing__(self, op):
        raise NotImplementedError(
            f"op {op!r} has no kernel for device type {self.device_type!r}: no installed "
            "plugin registers one"
        )


class Backend:
    """A device type: its array module and how its arrays cross to and from the host.

    Parameters
    ----------
    name : str
        The device type, e.g. ``"cpu"`` or ``"cuda"``.
    xp : module
        The array module whose arrays this device's tensors hold.
    to_host, from_host : callable, optional
        ``to_host(array) -> numpy.ndarray`` and ``from_host(ndarray, index) -> array``;
        identity for the host itself.
    is_available, device_count : callable, optional
        Whether the hardware is there, and how many devices.
    device_context : callable, optional
        ``device_context(index)`` returns a context manager that makes ``index`` current.
    runtime : object, optional
        Device-specific services behind ``torcia.<name>`` (streams, memory statistics,
        seeding), e.g. what ``torcia.cuda`` delegates to.
    unavailable_reason : str, optional
        Why the hardware cannot be used, when ``is_available()`` is False; tensors on the
        device then raise an error quoting it.
    fallback : {"decompose", "host", "reference"}
        What runs an op the device has no kernel of its own for (see
        :func:`torcia.library.fallback`): ``"decompose"`` (the default) runs a composite
        op through its decomposition into primitives and raises for a missing primitive;
        ``"host"`` runs the NumPy reference kernel on the host and copies the result back
        (PyTorch's boxed CPU fallback); ``"reference"`` runs the reference kernel on the
        device's own array module, for an ``xp`` that follows NumPy's API (CuPy).

    Examples
    --------
    >>> import torcia
    >>> from torcia import backend
    >>> cpu = backend.get_backend("cpu")
    >>> isinstance(cpu, backend.Backend), cpu.name
    (True, 'cpu')
    """

    def __init__(self, name, xp, to_host=None, from_host=None, is_available=None,
                 device_count=None, device_context=None, plugin=None, runtime=None,
                 unavailable_reason=None, fallback="decompose"):
        if fallback not in FALLBACKS:
            raise ValueError(f"Backend({name!r}): fallback must be one of "
                             f"{', '.join(map(repr, FALLBACKS))}, got {fallback!r}")
        self.name = name
        self.xp = xp
        self.to_host = to_host or (lambda a: a)
        self.from_host = from_host or (lambda a, index=None: a)
        self.is_available = is_available or (lambda: True)
        self.device_count = device_count or (lambda: 1)
        self.device_context = device_context
        self.plugin = plugin
        self.runtime = runtime
        self.unavailable_reason = unavailable_reason
        self.fallback = fallback
        self.kernels = KernelTable(name)
        self.kernel_providers: dict = {}
        self._ranked: dict = {}  # op -> [(priority, order, fn, plugin, setup)], best first
        self._first_use: dict = {}  # op -> (stand-in, kernel) until its setup has run
        self._fallbacks: dict = {}  # op -> the declared fallback's kernel (see library)

    def __repr__(self):
        return f"<Backend {self.name!r} xp={self.xp.__name__} from plugin {self.plugin!r}>"


class BackendRegistry(plugins.Registry):
    """Filled by ``torcia_register_backends``; ``registry.add(backend)``."""

    def add(self, backend, obj=None):  # noqa: D401 - keeps Registry.add's shape
        backend.plugin = self.current_plugin
        super().add(backend.name, backend)


class KernelRegistry:
    """Filled by ``torcia_register_kernels``: ``registry.add(op, device_type, fn, priority=0)``.

    A kernel from a plugin that is not one of torcia's own is checked as it runs: the
    shape and dtype of its result must be those of the kernel it overrides (computed once
    per input signature), or the op raises instead of returning a wrong answer.
    """

    def __init__(self, backends: dict):
        self.backends = backends
        self.current_plugin = None

    def add(self, op: str, device_type: str, fn, priority: int = 0, *, setup=None) -> None:
        """Make ``fn`` the kernel of ``op`` on ``device_type`` unless a higher ``priority``
        one is registered.

        ``setup``, a callable without arguments, runs once before the first call of any
        kernel registered with it, not at registration: a native library applies its
        process-wide settings (threads, allocator) there, so that discovering a plugin
        (``python -m torcia plugins``) changes nothing.
        """
        backend = self.backends.get(device_type)
        if backend is None:
            known = {name.lower(): name for name in self.backends}
            if device_type.lower() in known:
                raise ValueError(f"kernel {op!r} is for device type {device_type!r}, which "
                                 f"does not exist; device types are lower case: "
                                 f"{known[device_type.lower()]!r}")
            # a plugin may ship kernels for a device whose backend is absent or blocked
            info = plugins._state.infos.get(self.current_plugin or "")
            if info is not None:
                note = f"kernels for device type {device_type!r} ignored: no such backend"
                if note not in info.notes:
                    info.notes.append(note)
            return
        ranked = backend._ranked.setdefault(op, [])
        # among equal priorities the later registration wins, as before
        ranked.append((priority, len(ranked), fn, self.current_plugin, setup))
        ranked.sort(key=lambda r: (-r[0], -r[1]))
        if ranked[0][2] is not fn:
            return
        self._install(backend, op)
        info = plugins._state.infos.get(self.current_plugin or "")
        if info is not None:
            info.provides.append(f"kernel:{op}@{device_type}")

    @staticmethod
    def _install(backend, op):
        ranked = backend._ranked.get(op)
        if not ranked:
            backend.kernels.pop(op, None)
            backend.kernel_providers.pop(op, None)
            return
        _, _, fn, plugin, setup = ranked[0]
        info = plugins._state.infos.get(plugin or "")
        below = ranked[1][2] if len(ranked) > 1 else None
        if info is not None and not info.own and below is not None and op in _checkable():
            fn = _checked(op, backend.name, plugin, fn, below)
        backend._first_use.pop(op, None)
        backend.kernels[op] = fn if setup is None or setup in _SETUP_DONE else _first_use(
            backend, op, fn, setup)
        backend.kernel_providers[op] = plugin

    def rollback(self, plugin: str) -> None:
        """Forget the kernels of ``plugin`` (it failed), restoring those it overrode."""
        for backend in self.backends.values():
            for op, ranked in list(backend._ranked.items()):
                kept = [r for r in ranked if r[3] != plugin]
                if len(kept) != len(ranked):
                    backend._ranked[op] = kept
                    self._install(backend, op)


@functools.cache
def _checkable() -> frozenset:
    """The ops whose overriding kernels are checked: core's pure ops. Running the
    overridden kernel once more must change nothing, so random ops (they would draw from
    the generator) and ops outside core's list (optimizer steps update in place) are not."""
    return frozenset(ops.ALL) - ops.RANDOM


def _signature(args, params):
    key = []
    for a in args:
        shape = getattr(a, "shape", None)
        key.append((shape, str(a.dtype)) if shape is not None else a)
    return (tuple(key), tuple(sorted(params.items())))


def _meta(out):
    if isinstance(out, tuple):
        return tuple(_meta(o) for o in out)
    shape = getattr(out, "shape", None)
    return (tuple(shape), str(out.dtype)) if shape is not None else None


def _checked(op, device_type, plugin, fn, reference):
    """``fn`` checked against ``reference``: same result shapes and dtypes."""
    expected: dict = {}

    def kernel(*args, **params):
        out = fn(*args, **params)
        try:
            key = _signature(args, params)
            hash(key)
        except TypeError:
            return out  # unhashable parameters: nothing to remember the answer by
        want = expected.get(key)
        if want is None:
            want = expected[key] = _meta(reference(*args, **params))
        got = _meta(out)
        if got != want:
            raise RuntimeError(
                f"the {op!r} kernel of plugin {plugin!r} on {device_type!r} returned "
                f"{_describe(got)} where torcia expects {_describe(want)}: the plugin's "
                "kernel is wrong (block the plugin to fall back to the kernel it overrides)")
        return out

    kernel.__wrapped__ = fn
    return kernel


def _describe(meta):
    if isinstance(meta, tuple) and meta and isinstance(meta[0], tuple) and len(meta) == 2 \
            and isinstance(meta[1], str):
        return f"shape {meta[0]} of {meta[1]}"
    return repr(meta)


_SETUP_DONE: set = set()
_setup_lock = threading.Lock()


def _first_use(backend, op, fn, setup):
    """A stand-in for ``fn`` that runs ``setup`` on its first call and then puts every
    kernel waiting for that setup in its place, so later calls cost nothing extra."""

    def kernel(*args, **params):
        with _setup_lock:
            if setup not in _SETUP_DONE:
                setup()
                _SETUP_DONE.add(setup)
                for b in backends.build().values():
                    for name, (waiting, real) in list(b._first_use.items()):
                        if waiting.setup is setup:
                            if b.kernels.get(name) is waiting:
                                b.kernels[name] = real
                            del b._first_use[name]
        return fn(*args, **params)

    kernel.setup = setup
    backend._first_use[op] = (kernel, fn)
    return kernel


backends = BackendRegistry("device backend", "torcia_register_backends")
_kernels_built = threading.Event()
_build_lock = threading.RLock()

#: What the modules above the dispatcher add to each kernel table it builds, filled as they
#: load (``torcia._oprecords``): each step is called with the :class:`KernelRegistry`,
#: before the plugins register their kernels (the kernels of the ops plugins define, so
#: that any plugin can override them) or after them (each device's declared fallback for
#: the ops no plugin gave it a kernel for).
BEFORE_PLUGIN_KERNELS: list = []
AFTER_PLUGIN_KERNELS: list = []


def _build():
    with _build_lock:
        if _kernels_built.is_set():
            return
        with plugins.building("the device and kernel tables"):
            table = backends.build()
            registry = KernelRegistry(table)
            for step in BEFORE_PLUGIN_KERNELS:
                step(registry)
            registry.current_plugin = None
            plugins.call_each("torcia_register_kernels", registry=registry)
            for step in AFTER_PLUGIN_KERNELS:
                step(registry)
        _kernels_built.set()


def reset_kernels() -> None:
    """Forget the kernel tables: the next op builds them again from the plugins registered
    then (a test that registered a plugin object with ``plugins.manager().register``).

    Examples
    --------
    >>> import torcia
    >>> torcia.backend.reset_kernels()
    >>> torcia.ones(2).add(1)
    tensor([2., 2.])
    """
    _kernels_built.clear()
    # forget every registration, so that a plugin unregistered since is not ranked again
    for backend in (backends._entries or {}).values():
        backend._ranked.clear()
        backend._first_use.clear()
        backend._fallbacks = {}
        backend.kernels.clear()
        backend.kernel_providers.clear()
    for dev in device._interned.values():
        dev.kernels = None


class _KernelTables:
    """Lets ``plugins.plugin_infos`` and ``plugins.reset`` reach the kernel tables."""

    build = staticmethod(_build)
    reset = staticmethod(reset_kernels)

    @staticmethod
    def rollback(plugin):
        KernelRegistry(backends._entries or {}).rollback(plugin)


plugins._state.registries["torcia_register_kernels"] = _KernelTables()


def get_backend(device_type: str) -> Backend:
    """The backend of a device type, or a clear error when no installed plugin provides it.

    Examples
    --------
    >>> import torcia
    >>> from torcia import backend
    >>> cpu = backend.get_backend("cpu")
    >>> isinstance(cpu, backend.Backend), cpu.name
    (True, 'cpu')
    """
    if not _kernels_built.is_set():
        _build()
    table = backends.build()
    backend = table.get(device_type)
    if backend is None:
        hint = {"cuda": "torcia-cuda (and CuPy)"}.get(device_type, f"a plugin for {device_type!r}")
        msg = plugins.missing_message("device backend", device_type, sorted(table))
        if "blocked" not in msg.split(";")[0]:
            msg += f". Install {hint}"
        raise RuntimeError(msg)
    return backend


def _cuda_backend() -> Backend | None:
    """The "cuda" backend torcia-cuda registers, or None (what ``torcia.cuda`` and the
    pinned-memory methods of a CPU tensor ask about)."""
    return backends.build().get("cuda")


def _cuda_runtime():
    """The runtime of the "cuda" backend, or an error that says what to install or why
    CUDA is not available."""
    b = _cuda_backend()
    if b is None:
        raise RuntimeError(
            plugins.missing_message("device backend", "cuda", sorted(backends.build()))
            + ". Install torcia-cuda with the CuPy wheel for your driver "
            "(pip install 'torcia-cuda[cuda12]')"
        )
    if not b.is_available():
        raise RuntimeError(f"CUDA is not available: {b.unavailable_reason or 'no GPU found'}")
    return b.runtime


# ---------------------------------------------------------------------------------------
# torcia.device
# ---------------------------------------------------------------------------------------


_DEVICE_CONTEXTS: list = []  # the default devices that ``with device(...)`` blocks replaced


class device:
    """A device: a type (``"cpu"``, ``"cuda"``...) and an optional index.

    Examples
    --------
    >>> import torcia
    >>> torcia.device("cuda:1")
    device(type='cuda', index=1)
    >>> torcia.device("cpu") == torcia.device("cpu")
    True
    """

    __slots__ = ("type", "index", "kernels", "_backend")
    _interned: dict = {}

    def __new__(cls, type_or_str, index=None):
        if isinstance(type_or_str, device):
            return type_or_str
        key = (type_or_str, index)
        dev = cls._interned.get(key)
        if dev is not None:
            return dev
        if isinstance(type_or_str, int):
            raise ValueError(
                "a bare integer device is ambiguous without a default device type; "
                f"use 'cuda:{type_or_str}'"
            )
        if not isinstance(type_or_str, str):
            raise TypeError("device() expected a string or device, got "
                            f"{type(type_or_str).__name__}")
        text = type_or_str.strip()
        dtype_, _, idx = text.partition(":")
        if idx:
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was "
                                   f"passed explicitly: {text}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{text}'")
            index = int(idx)
        if not dtype_.isidentifier():
            raise RuntimeError(f"Invalid device string: '{text}'")
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative, got {index}")
        canon = (dtype_, index)
        dev = cls._interned.get(canon)
        if dev is None:
            dev = object.__new__(cls)
            dev.type = dtype_
            dev.index = index
            dev.kernels = None
            dev._backend = None
            cls._interned[canon] = dev
        cls._interned[key] = dev
        return dev

    @property
    def backend(self) -> Backend:
        """The backend; building kernel tables on first use."""
        if self.kernels is None:
            backend = get_backend(self.type)
            if not backend.is_available():
                raise RuntimeError(
                    f"device '{self}' is not available: {backend.unavailable_reason or 'no device'}"
                )
            if self.index is not None and self.index >= backend.device_count():
                raise RuntimeError(
                    f"invalid device ordinal: {self} requested, but {backend.device_count()} "
                    f"{self.type} device(s) are available"
                )
            self._backend = backend
            self.kernels = backend.kernels
        return self._backend

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __enter__(self):
        """``with torcia.device("meta"):`` makes this the device that factory functions use
        when given none, until the block ends (PyTorch's device context).

        Examples
        --------
        >>> import torcia
        >>> with torcia.device("meta"):
        ...     torcia.ones(2).device
        device(type='meta')
        >>> torcia.ones(2).device
        device(type='cpu')
        """
        _DEVICE_CONTEXTS.append(get_default_device())
        set_default_device(self)
        return self

    def __exit__(self, *exc):
        set_default_device(_DEVICE_CONTEXTS.pop())
        return False

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))


CPU = device("cpu")

#: The device factory functions use when given none (``torcia.set_default_device``).
DEFAULT_DEVICE = [CPU]


def set_default_device(device) -> None:
    """The device that factory functions (``torcia.tensor``, ``zeros``, ``arange``,
    ``randn``...) use when given none; None restores the CPU. Ops on existing tensors
    keep their inputs' device.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_default_device("meta")
    >>> torcia.zeros(2).device
    device(type='meta')
    >>> torcia.set_default_device(None)
    """
    DEFAULT_DEVICE[0] = CPU if device is None else canonical(device)


def get_default_device():
    """The device factory functions use when given none (see :func:`set_default_device`).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_default_device()
    device(type='cpu')
    """
    return DEFAULT_DEVICE[0]


def canonical(dev) -> device:
    """The device tensors live on: ``"cuda"`` means the current CUDA device.

    Examples
    --------
    >>> import torcia
    >>> from torcia import backend
    >>> backend.canonical("cpu")
    device(type='cpu')
    >>> backend.canonical(torcia.device("cpu")) is backend.canonical("cpu")
    True
    """
    dev = device(dev) if not isinstance(dev, device) else dev
    if dev.type == "cpu":
        return CPU
    if dev.type == "meta":
        return dev  # no data, so no device to pick, as PyTorch's meta device
    if dev.index is None:
        runtime = dev.backend.runtime
        return device(dev.type, runtime.current_device() if runtime is not None else 0)
    return dev


def check_async(device, bad, error) -> None:
    """Raise ``error()`` where ``bad`` (a boolean of ``device``'s array module: a check of
    an op's inputs, as an index in range) is true. On the host at once; on a device whose
    runtime has ``assert_async`` (torcia-cuda's) without waiting for the device: the
    runtime raises at a later synchronisation (``.item()``, ``.cpu()``,
    ``torcia.cuda.synchronize()``), as PyTorch's device-side asserts do.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.library import check_async
    >>> check_async("cpu", np.bool_(False), lambda: IndexError("out of range"))
    >>> check_async("cpu", np.bool_(True), lambda: IndexError("out of range"))
    Traceback (most recent call last):
    ...
    IndexError: out of range
    """
    kind = canonical(device).type
    if kind != "cpu":
        defer = getattr(get_backend(kind).runtime, "assert_async", None)
        if defer is not None:
            defer(bad, error)
            return
    if bad:
        raise error()


def host_array(arr) -> np.ndarray:
    """Any backend's array as a NumPy array on the host.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia import backend
    >>> backend.host_array(np.array([1.0, 2.0], dtype=np.float32))
    array([1., 2.], dtype=float32)
    """
    if isinstance(arr, np.ndarray):
        return arr
    for backend in backends.build().values():
        if isinstance(arr, backend.xp.ndarray):
            return backend.to_host(arr)
    return np.asarray(arr)


#: (kernel, parameter name) -> whether the kernel's signature names it (takes_param)
_PARAMS: dict = {}


def takes_param(kernel, name: str) -> bool:
    """Whether ``kernel``'s signature names the parameter ``name`` (not through ``**``):
    how core finds the kernels that take an optional parameter of a kernel contract
    (add's and sub's ``alpha=``, :func:`torcia.hookspecs.torcia_register_kernels`)."""
    key = (kernel, name)
    takes = _PARAMS.get(key)
    if takes is None:
        try:
            takes = name in inspect.signature(kernel).parameters
        except (TypeError, ValueError):  # no signature: a builtin, NumPy's ufuncs
            takes = False
        _PARAMS[key] = takes
    return takes
