"""Numeric type information, global switches and device-level names:
``finfo``/``iinfo``, the constants (``inf``, ``pi``...), deterministic algorithms, thread
counts, default device, layouts and memory formats, ``Stream``/``Event``, anomaly mode.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia._legacy import CPU_TYPES, CUDA_TYPES
from torcia._ops._common import THREADS
from torcia._tensor import AUTOGRAD, Tensor, load_autograd
from torcia.backend import _cuda_backend, canonical, get_default_device, set_default_device
from torcia.backend import device as _device

inf = math.inf


nan = math.nan


pi = math.pi


e = math.e


newaxis = None


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating dtype: ``bits``, ``eps``, ``max``, ``min``, ``tiny``
    (``smallest_normal``), ``resolution``, ``dtype``.

    Examples
    --------
    >>> import torcia
    >>> torcia.finfo(torcia.float32).eps
    1.1920928955078125e-07
    >>> torcia.finfo().dtype
    'float32'
    """

    def __init__(self, type=None):  # noqa: A002 - PyTorch's argument name
        dt = D.get_default_dtype() if type is None else type
        if not dt.is_floating_point:
            raise TypeError(f"torcia.finfo() requires a floating point input type. Use "
                            f"torcia.iinfo to handle '{dt}'")
        info = np.finfo(dt.np) if dt.np is not None and dt.name != "bfloat16" else None
        if info is None:
            self.bits, self.eps, self.max, self.tiny, self.resolution = (
                16, 0.0078125, 3.3895313892515355e38, 1.1754943508222875e-38, 0.01)
        else:
            self.bits = info.bits
            self.eps = float(info.eps)
            self.max = float(info.max)
            self.tiny = float(info.tiny)
            self.resolution = 10.0 ** -info.precision
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = dt.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: ``bits``, ``max``, ``min``, ``dtype``.

    Examples
    --------
    >>> import torcia
    >>> torcia.iinfo(torcia.int8).min
    -128
    """

    def __init__(self, type):  # noqa: A002 - PyTorch's argument name
        if type.is_floating_point or type.name == "bool":
            raise TypeError(f"torcia.iinfo() requires an integer input type. Use "
                            f"torcia.finfo to handle '{type}'")
        info = np.iinfo(type.np)
        self.bits, self.max, self.min, self.dtype = info.bits, int(info.max), int(info.min), \
            type.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def typename(obj) -> str:
    """``"torcia.FloatTensor"`` for a tensor (as ``Tensor.type()``), else the class path.

    Examples
    --------
    >>> import torcia
    >>> torcia.typename(torcia.zeros(1))
    'torcia.FloatTensor'
    """
    if isinstance(obj, Tensor):
        return obj.type()
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


# process-wide switches PyTorch offers; torcia's kernels are deterministic already, so the
# determinism switches are recorded and reported back
_SWITCHES = {"deterministic": False, "warn_only": False, "warn_always": False,
             "interop_threads": 1}


def use_deterministic_algorithms(mode, *, warn_only=False) -> None:
    """Record the determinism switch (torcia's kernels are deterministic either way).

    Examples
    --------
    >>> import torcia
    >>> torcia.use_deterministic_algorithms(True)
    >>> torcia.are_deterministic_algorithms_enabled()
    True
    >>> torcia.use_deterministic_algorithms(False)
    """
    _SWITCHES["deterministic"] = bool(mode)
    _SWITCHES["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """The switch set by :func:`use_deterministic_algorithms`.

    Examples
    --------
    >>> import torcia
    >>> torcia.are_deterministic_algorithms_enabled()
    False
    """
    return _SWITCHES["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was given ``warn_only=True``.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_deterministic_algorithms_warn_only_enabled()
    False
    """
    return _SWITCHES["warn_only"]


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default", 1/"warn", 2/"error", as PyTorch: sets the determinism switch.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_deterministic_debug_mode("warn")
    >>> torcia.get_deterministic_debug_mode(), torcia.are_deterministic_algorithms_enabled()
    (1, True)
    >>> torcia.set_deterministic_debug_mode(0)
    >>> torcia.get_deterministic_debug_mode()
    0
    """
    modes = {"default": 0, "warn": 1, "error": 2}
    level = modes[debug_mode] if isinstance(debug_mode, str) else int(debug_mode)
    if level not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode() -> int:
    """The determinism switch as a number: 0 (off), 1 (warn only) or 2 (on).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_deterministic_debug_mode()
    0
    """
    if not _SWITCHES["deterministic"]:
        return 0
    return 1 if _SWITCHES["warn_only"] else 2


def set_warn_always(b: bool) -> None:
    """Record whether warnings that PyTorch issues once should repeat.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_warn_always(True)
    >>> torcia.is_warn_always_enabled()
    True
    >>> torcia.set_warn_always(False)
    """
    _SWITCHES["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    """Whether :func:`set_warn_always` switched repeated warnings on.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_warn_always_enabled()
    False
    """
    return _SWITCHES["warn_always"]


def get_num_interop_threads() -> int:
    """Threads for inter-op parallelism: torcia runs ops one at a time, so 1 unless set.

    Examples
    --------
    >>> import torcia
    >>> torcia.get_num_interop_threads() >= 1
    True
    """
    return _SWITCHES["interop_threads"]


def set_num_interop_threads(n: int) -> None:
    """Set the number of inter-op threads :func:`get_num_interop_threads` reports (torcia
    runs ops one at a time, so the value is only recorded).

    Examples
    --------
    >>> import torcia
    >>> before = torcia.get_num_interop_threads()
    >>> torcia.set_num_interop_threads(2)
    >>> torcia.get_num_interop_threads()
    2
    >>> torcia.set_num_interop_threads(before)
    """
    if n < 1:
        raise RuntimeError(f"Expected positive number of threads, got {n}")
    _SWITCHES["interop_threads"] = int(n)


def set_flush_denormal(mode: bool) -> bool:
    """Flushing denormals to zero is not supported (NumPy computes them): returns False,
    as PyTorch does on CPUs without the feature.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_flush_denormal(True)
    False
    """
    return False


#: Called with the count set_num_threads sets (torcia.library.add_thread_callback adds them)
_thread_callbacks: list = []


def get_num_threads() -> int:
    """Threads the CPU kernels use (set by ``set_num_threads``; backends read it).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_num_threads() >= 1
    True
    """
    return THREADS[0]


def set_num_threads(n: int) -> None:
    """Set the threads CPU kernels use; plugins with native kernels follow it.

    Examples
    --------
    >>> import torcia
    >>> n = torcia.get_num_threads()
    >>> torcia.set_num_threads(1)
    >>> torcia.get_num_threads()
    1
    >>> torcia.set_num_threads(n)
    """
    if n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n}")
    THREADS[0] = n
    for callback in _thread_callbacks:
        callback(n)


def init_num_threads() -> None:
    """Pass the thread count set by :func:`torcia.set_num_threads` on to the kernels of the
    calling thread (native plugins keep it per thread).

    Examples
    --------
    >>> import torcia
    >>> torcia.init_num_threads()
    >>> torcia.get_num_threads() >= 1
    True
    """
    set_num_threads(get_num_threads())


def set_default_tensor_type(t) -> None:
    """PyTorch's older way to set the default floating dtype (and device): ``t`` is a
    legacy type (``torcia.DoubleTensor``, ``torcia.cuda.FloatTensor``) or its name.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_default_tensor_type(torcia.DoubleTensor)
    >>> torcia.zeros(1).dtype
    torcia.float64
    >>> torcia.set_default_tensor_type("torch.FloatTensor")
    """
    if isinstance(t, str):
        parts = t.split(".")
        table = CUDA_TYPES if "cuda" in parts[:-1] else CPU_TYPES
        if parts[0] not in ("torch", "torcia") or parts[-1] not in table:
            raise TypeError(f"invalid type: '{t}'")
        t = table[parts[-1]]
    dt = getattr(t, "dtype", None)
    if not isinstance(dt, D.dtype) or not isinstance(getattr(t, "device_type", None), str):
        raise TypeError(f"invalid type: '{t}'")
    if not dt.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(dt)
    set_default_device(t.device_type)


class layout(str):  # noqa: N801 - PyTorch's name
    """A tensor memory layout: :data:`torcia.strided` (dense), :data:`torcia.sparse_coo`,
    :data:`torcia.sparse_csr` or :data:`torcia.sparse_csc` (the block layouts
    :data:`torcia.sparse_bsr` and :data:`torcia.sparse_bsc` are named, and refused by the
    conversions). Equal to its name string (``"torcia.strided"``).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(1).layout is torcia.strided, isinstance(torcia.strided, torcia.layout)
    (True, True)
    """

    __slots__ = ()

    def __repr__(self):
        return str.__str__(self)


strided = layout("torcia.strided")


sparse_coo = layout("torcia.sparse_coo")


sparse_csr = layout("torcia.sparse_csr")


sparse_csc = layout("torcia.sparse_csc")


sparse_bsr = layout("torcia.sparse_bsr")


sparse_bsc = layout("torcia.sparse_bsc")


jagged = layout("torcia.jagged")


class memory_format(str):  # noqa: N801 - PyTorch's name
    """How a dense tensor asks to be laid out (``memory_format=`` of ``contiguous``,
    ``empty_like``, ``to``...): :data:`torcia.contiguous_format`,
    :data:`torcia.channels_last`, :data:`torcia.channels_last_3d` or
    :data:`torcia.preserve_format`.

    Examples
    --------
    >>> import torcia
    >>> torcia.channels_last
    torcia.channels_last
    """

    __slots__ = ()

    def __repr__(self):
        return str.__str__(self)


contiguous_format = memory_format("torcia.contiguous_format")


channels_last = memory_format("torcia.channels_last")


channels_last_3d = memory_format("torcia.channels_last_3d")


preserve_format = memory_format("torcia.preserve_format")


class Stream:
    """A device-generic stream, as ``torch.Stream``. The CPU runs each op to completion
    before the next starts, so a CPU stream is always idle (``query()`` is True) and
    waiting on it returns at once; ``Stream(device="cuda")`` gives the CUDA plugin's
    stream (:func:`torcia.cuda.Stream`).

    Examples
    --------
    >>> import torcia
    >>> s = torcia.Stream()
    >>> s.query(), s.device_type
    (True, 'cpu')
    """

    def __new__(cls, device=None, *, priority=0, **kwargs):
        dev = canonical(device) if device is not None else get_default_device()
        if dev.type == "cuda":
            # torcia.cuda, a module of the layer above, loads with its first use
            return get_device_module(dev).Stream(dev, priority)
        if dev.type not in ("cpu", "meta"):
            raise RuntimeError(f"torcia.Stream: no stream for device type {dev.type!r}")
        self = object.__new__(cls)
        self.device = dev
        self.device_type = dev.type
        self.device_index = -1 if dev.index is None else dev.index
        self.stream_id = 0
        self.priority = priority
        return self

    def query(self) -> bool:
        """Whether all work on the stream is done: always, on the CPU."""
        return True

    def synchronize(self) -> None:
        """Wait for the stream's work: none is pending on the CPU."""

    def wait_event(self, event) -> None:
        """Make later work wait for ``event``: CPU events complete when recorded."""

    def wait_stream(self, stream) -> None:
        """Make later work wait for ``stream``'s current work (done at once on the CPU)."""

    def record_event(self, event=None):
        """Record ``event`` (a new one by default) on this stream; returns it."""
        event = Event(self.device) if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.device, self.stream_id) == (
            other.device, other.stream_id)

    def __hash__(self):
        return hash((self.device_type, self.device_index, self.stream_id))

    def __repr__(self):
        return (f"torcia.Stream device_type={self.device_type}, "
                f"device_index={self.device_index}, stream_id={self.stream_id}")


class Event:
    """A device-generic event, as ``torch.Event``: on the CPU an event completes when it
    is recorded, and with ``enable_timing=True`` it keeps the time it was recorded, for
    :meth:`elapsed_time` (milliseconds).

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.Event(enable_timing=True), torcia.Event(enable_timing=True)
    >>> a.record(); b.record()
    >>> a.elapsed_time(b) >= 0.0
    True
    """

    def __init__(self, device=None, *, enable_timing=False, blocking=False, interprocess=False):
        self.device = canonical(device) if device is not None else get_default_device()
        if self.device.type not in ("cpu", "meta"):
            raise RuntimeError(f"torcia.Event: use the {self.device.type} plugin's events "
                               f"(torcia.{self.device.type}.Event) for that device")
        self.device_type = self.device.type
        self.enable_timing = enable_timing
        self._time = None

    def record(self, stream=None) -> None:
        """Mark the point reached on ``stream``: now, on the CPU."""
        import time

        self._time = time.perf_counter()

    def query(self) -> bool:
        """Whether the work before the record is done: always, on the CPU."""
        return True

    def synchronize(self) -> None:
        """Wait until the event completes (it has, on the CPU)."""

    def wait(self, stream=None) -> None:
        """Make ``stream`` wait for this event (nothing to wait for on the CPU)."""

    def elapsed_time(self, end_event) -> float:
        """Milliseconds from this event's record to ``end_event``'s."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0

    def __repr__(self):
        return f"torcia.Event device_type={self.device_type}"


def get_device_module(device=None):
    """The module of a device type's services: ``torcia.cuda`` for "cuda", ``torcia.cpu``
    for "cpu"; without ``device``, the current accelerator's (CUDA when available) or the
    CPU's.

    Examples
    --------
    >>> import torcia
    >>> torcia.get_device_module("cpu").device_count()
    1
    """
    import importlib

    if device is None:
        cuda = _cuda_backend()
        name = "cuda" if cuda is not None and cuda.is_available() else "cpu"
    else:
        name = device if isinstance(device, str) else _device(device).type
        name = name.split(":")[0]
    if name not in ("cpu", "cuda"):
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered "
                           f"as 'torcia.{name}'.")
    return importlib.import_module(f"torcia.{name}")


def is_anomaly_enabled() -> bool:
    """Whether autograd's anomaly detection is on (``torcia.autograd.set_detect_anomaly``);
    False while no autograd engine is loaded.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_anomaly_enabled()
    False
    """
    engine = AUTOGRAD.engine
    return bool(engine is not None and engine.ANOMALY.enabled)


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection also checks backward results for NaN (the default when
    it is on).

    Examples
    --------
    >>> import torcia
    >>> torcia.set_anomaly_enabled(True, check_nan=False)
    >>> torcia.is_anomaly_enabled(), torcia.is_anomaly_check_nan_enabled()
    (True, False)
    >>> torcia.set_anomaly_enabled(False)
    """
    engine = AUTOGRAD.engine
    return bool(engine is not None and engine.ANOMALY.enabled and engine.ANOMALY.check_nan)


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn autograd's anomaly detection on or off (the function form of
    ``torcia.autograd.set_detect_anomaly``); needs torcia-autograd.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_anomaly_enabled(True)
    >>> torcia.is_anomaly_enabled()
    True
    >>> torcia.set_anomaly_enabled(False)
    >>> torcia.is_anomaly_enabled()
    False
    """
    anomaly = load_autograd().ANOMALY
    anomaly.enabled = bool(enabled)
    anomaly.check_nan = bool(check_nan)


class OutOfMemoryError(RuntimeError):
    """A device ran out of memory (PyTorch's ``torch.OutOfMemoryError``, also
    ``torch.cuda.OutOfMemoryError``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.OutOfMemoryError, RuntimeError)
    True
    """


class AcceleratorError(RuntimeError):
    """An accelerator reported an error (PyTorch's ``torch.AcceleratorError``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.AcceleratorError, RuntimeError)
    True
    """


#: the names ``torcia`` exports from here
__all__ = [
    "AcceleratorError", "Event", "OutOfMemoryError", "Stream",
    "are_deterministic_algorithms_enabled", "channels_last", "channels_last_3d",
    "contiguous_format", "e", "finfo", "get_default_device", "get_deterministic_debug_mode",
    "get_device_module", "get_num_interop_threads", "get_num_threads", "iinfo", "inf",
    "init_num_threads",
    "is_anomaly_check_nan_enabled", "is_anomaly_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "is_warn_always_enabled", "jagged",
    "layout", "memory_format", "nan", "newaxis", "pi", "preserve_format",
    "set_anomaly_enabled", "set_default_device", "set_default_tensor_type",
    "set_deterministic_debug_mode", "set_flush_denormal", "set_num_interop_threads",
    "set_num_threads",
    "set_warn_always", "sparse_bsc", "sparse_bsr", "sparse_coo", "sparse_csc", "sparse_csr",
    "strided", "typename", "use_deterministic_algorithms",
]
