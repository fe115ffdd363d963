"""``torcia.cuda``: the CUDA device's services, as ``torch.cuda``.

Core holds only this facade; the "cuda" device itself comes from a plugin (torcia-cuda,
on CuPy) that registers a backend whose ``runtime`` does the work: PyTorch's classes here
(:class:`Stream`, :class:`Event`, :class:`CUDAGraph`) each wrap a handle the runtime
makes. Without that plugin, or without a GPU, :func:`is_available` is False and
everything else raises an error that says why.

Random numbers: torcia's random ops on "cuda" draw from torcia's default generator on the
host and copy the numbers to the device (so a seed gives the same numbers on CPU and GPU):
:func:`get_rng_state` and :func:`set_rng_state` save and restore that generator, which is
what makes the random ops of "cuda" tensors repeat.

Examples
--------
>>> import torcia
>>> isinstance(torcia.cuda.is_available(), bool)
True
"""

from __future__ import annotations

import dataclasses

from torcia import backend as _backend
from torcia import random as _random
from torcia._legacy import CUDA_TYPES as _LEGACY_TYPES
from torcia._oplib.runtime import Event as _Event
from torcia._oplib.runtime import Stream as _Stream
from torcia.backend import _cuda_backend
from torcia.backend import _cuda_runtime as _runtime


def is_available() -> bool:
    """Whether a CUDA device can be used (torcia-cuda installed, CuPy working, a GPU)."""
    b = _cuda_backend()
    return b is not None and bool(b.is_available())


def is_initialized() -> bool:
    """Whether CUDA is set up for this process: torcia-cuda sets it up on first use, so
    this is :func:`is_available`.

    Examples
    --------
    >>> import torcia
    >>> torcia.cuda.is_initialized() == torcia.cuda.is_available()
    True
    """
    return is_available()


def init() -> None:
    """Set CUDA up now rather than at first use; raises where it cannot be used."""
    _runtime()


def device_count() -> int:
    """How many CUDA devices there are (0 when CUDA is not available)."""
    return _cuda_backend().device_count() if is_available() else 0


def current_device() -> int:
    return _runtime().current_device()


def set_device(device) -> None:
    """Make ``device`` (an index, "cuda:N" or a torcia.device) the current one."""
    _runtime().set_device(_index(device))


def _index(device) -> int:
    if isinstance(device, int):
        return device
    d = _backend.device(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return 0 if d.index is None else d.index


def _optional(device):
    """The device index of ``device``, or None for the current device."""
    return None if device is None else _index(device)


def synchronize(device=None) -> None:
    """Wait for all work queued on the device to finish."""
    _runtime().synchronize(_optional(device))


# ----- device properties ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _CudaDeviceProperties:
    """What :func:`get_device_properties` returns (PyTorch's field names)."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    is_integrated: int = 0
    is_multi_gpu_board: int = 0
    max_threads_per_multi_processor: int = 0
    warp_size: int = 32
    regs_per_multiprocessor: int = 0
    shared_memory_per_block: int = 0
    shared_memory_per_block_optin: int = 0
    shared_memory_per_multiprocessor: int = 0
    L2_cache_size: int = 0  # noqa: N815 - PyTorch's name
    memory_bus_width: int = 0
    uuid: str = ""

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count}, uuid={self.uuid}, "
                f"L2_cache_size={self.L2_cache_size // (1 << 20)}MB)")


def get_device_properties(device=None) -> _CudaDeviceProperties:
    """The device's name, compute capability (``major``, ``minor``), memory and
    multiprocessors, as ``torch.cuda.get_device_properties``."""
    return _CudaDeviceProperties(**_runtime().device_properties(_optional(device)))


def get_device_name(device=None) -> str:
    return _runtime().get_device_name(_optional(device))


def get_device_capability(device=None) -> tuple[int, int]:
    """The device's compute capability, ``(major, minor)``: ``(9, 0)`` on a Hopper GPU."""
    p = get_device_properties(device)
    return p.major, p.minor


def get_arch_list() -> list[str]:
    """The architectures torcia's CUDA kernels are built for: CuPy compiles each kernel
    for the GPU it runs on, so the list names the devices' own (``["sm_90"]``); empty
    without CUDA.

    Examples
    --------
    >>> import torcia
    >>> isinstance(torcia.cuda.get_arch_list(), list)
    True
    """
    if not is_available():
        return []
    return sorted({"sm_{}{}".format(*get_device_capability(i)) for i in range(device_count())})


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 can be used on the current device (natively from compute
    capability 8.0, Ampere; emulated in float32 arithmetic before); False without CUDA.

    Examples
    --------
    >>> import torcia
    >>> torcia.cuda.is_bf16_supported() in (True, False)
    True
    """
    if not is_available():
        return False
    return including_emulation or get_device_capability()[0] >= 8


def is_tf32_supported() -> bool:
    """Whether the current device has TF32 tensor cores (compute capability 8.0 and up).

    Examples
    --------
    >>> import torcia
    >>> torcia.cuda.is_tf32_supported() in (True, False)
    True
    """
    return is_available() and get_device_capability()[0] >= 8


def mem_get_info(device=None) -> tuple[int, int]:
    """``(free, total)`` bytes of the device's memory, as the driver counts them."""
    return _runtime().mem_get_info(_optional(device))


def can_device_access_peer(device, peer_device) -> bool:
    """Whether ``device`` can read ``peer_device``'s memory directly."""
    return _runtime().can_device_access_peer(_index(device), _index(peer_device))


# ----- random numbers -------------------------------------------------------------------


def manual_seed(seed: int) -> None:
    """Seed the current CUDA device's generator (a no-op when CUDA is not available)."""
    if is_available():
        _runtime().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every CUDA device's generator (a no-op when CUDA is not available)."""
    if is_available():
        _runtime().manual_seed_all(int(seed))


def get_rng_state(device="cuda"):
    """The state of the generator random ops on "cuda" draw from (torcia's default
    generator; see the module's notes), a uint8 tensor for :func:`set_rng_state`.

    Examples
    --------
    >>> import torcia
    >>> state = torcia.cuda.get_rng_state()
    >>> a = torcia.rand(2)
    >>> torcia.cuda.set_rng_state(state)
    >>> torcia.equal(a, torcia.rand(2))
    True
    """
    _index(device)
    return _random.get_rng_state()


def set_rng_state(new_state, device="cuda") -> None:
    """Restore the generator of "cuda"'s random ops from :func:`get_rng_state`."""
    _index(device)
    _random.set_rng_state(new_state)


def get_rng_state_all() -> list:
    """:func:`get_rng_state` of every device (one generator serves them all).

    Examples
    --------
    >>> import torcia
    >>> len(torcia.cuda.get_rng_state_all()) == torcia.cuda.device_count()
    True
    """
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    """Restore from :func:`get_rng_state_all`."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def seed() -> int:
    """Seed the generator of "cuda"'s random ops from fresh entropy (see the module's
    notes: the default generator)."""
    return _random.seed()


def seed_all() -> int:
    """:func:`seed` (one generator serves every device)."""
    return _random.seed()


def initial_seed() -> int:
    """The seed the generator of "cuda"'s random ops was last seeded with.

    Examples
    --------
    >>> import torcia
    >>> state = torcia.cuda.get_rng_state()
    >>> _ = torcia.manual_seed(3)
    >>> torcia.cuda.initial_seed()
    3
    >>> torcia.cuda.set_rng_state(state)
    """
    return _random.initial_seed()


# ----- memory ---------------------------------------------------------------------------


def memory_stats(device=None) -> dict:
    """The memory pool's statistics under PyTorch's keys (``"allocated_bytes.all.current"``,
    ``"allocated_bytes.all.peak"``, ``"reserved_bytes.all.current"``,
    ``"reserved_bytes.all.peak"``, ``"allocation.all.allocated"``): those CuPy's pool
    can answer; an empty dict without CUDA, as PyTorch.

    Examples
    --------
    >>> import torcia
    >>> isinstance(torcia.cuda.memory_stats(), dict)
    True
    """
    if not is_available():
        return {}
    return dict(sorted(_runtime().memory_stats(_optional(device)).items()))


def memory_allocated(device=None) -> int:
    """Bytes held by tensors on the device (from the memory pool)."""
    return _runtime().memory_stats(_optional(device))["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    """The peak of :func:`memory_allocated` since start or the last reset."""
    return _runtime().memory_stats(_optional(device))["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    """Bytes the memory pool holds, in use or cached."""
    return _runtime().memory_stats(_optional(device))["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    """The peak of :func:`memory_reserved` since start or the last reset."""
    return _runtime().memory_stats(_optional(device))["reserved_bytes.all.peak"]


def memory_cached(device=None) -> int:
    """:func:`memory_reserved` (PyTorch's older name)."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """:func:`max_memory_reserved` (PyTorch's older name)."""
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks of :func:`memory_stats` afresh from the current values."""
    _runtime().reset_peak_memory_stats(_optional(device))


def reset_max_memory_allocated(device=None) -> None:
    """:func:`reset_peak_memory_stats` (PyTorch's older name)."""
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    """:func:`reset_peak_memory_stats` (PyTorch's older name)."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    """Set the counters of :func:`memory_stats` that only grow back to zero."""
    _runtime().reset_accumulated_memory_stats(_optional(device))


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A readable table of :func:`memory_stats`, as ``torch.cuda.memory_summary``."""
    stats = _runtime().memory_stats(_optional(device))
    index = current_device() if device is None else _index(device)

    def size(n):
        for unit in ("B ", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:7.1f} {unit}" if unit != "B " else f"{n:7d} B  "
            n /= 1024
        return ""

    rule = "|" + "=" * 60 + "|"
    lines = [rule, f"| {'torcia.cuda memory summary, device ID ' + str(index):<58} |", rule,
             f"| {'Metric':<24}{'Cur Usage':>17}{'Peak Usage':>17} |", rule]
    for what, key in (("Allocated memory", "allocated_bytes"),
                      ("Reserved memory", "reserved_bytes")):
        cur, peak = stats[f"{key}.all.current"], stats[f"{key}.all.peak"]
        lines.append(f"| {what:<24}{size(cur):>17}{size(peak):>17} |")
    lines.append(f"| {'Allocations (count)':<24}{stats['allocation.all.allocated']:>17}"
                 f"{'':>17} |")
    lines.append(rule)
    return "\n".join(lines) + "\n"


def empty_cache() -> None:
    """Return cached, unused blocks of the memory pool to the driver."""
    if is_available():
        _runtime().empty_cache()


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Cap this process's memory pool at ``fraction`` (0 to 1) of the device's memory:
    allocations past it raise an out-of-memory error."""
    if not isinstance(fraction, float) or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _runtime().set_per_process_memory_fraction(fraction, _optional(device))


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction :func:`set_per_process_memory_fraction` set (1.0 until then)."""
    return _runtime().get_per_process_memory_fraction(_optional(device))


# ----- streams and events ---------------------------------------------------------------


class Stream(_Stream):
    """A CUDA stream: work queued on it runs in order, concurrently with other streams
    (``torch.cuda.Stream``). ``with stream:`` makes it current, as :func:`stream`."""

    def __new__(cls, device=None, priority=0, **kwargs):
        return object.__new__(cls)

    def __init__(self, device=None, priority=0, **kwargs):
        self._handle = _runtime().Stream(_optional(device), priority)
        self._context = []

    @classmethod
    def _of(cls, handle) -> Stream:
        self = object.__new__(cls)
        self._handle = handle
        self._context = []
        return self

    @property
    def device(self):
        return _backend.device("cuda", self._handle.device_index)

    @property
    def device_type(self) -> str:
        return "cuda"

    @property
    def device_index(self) -> int:
        return self._handle.device_index

    @property
    def cuda_stream(self) -> int:
        """The ``cudaStream_t`` address (0 for the legacy default stream)."""
        return self._handle.ptr

    @property
    def stream_id(self) -> int:
        return self._handle.ptr

    @property
    def priority(self) -> int:
        return self._handle.priority

    def query(self) -> bool:
        """Whether all work queued on the stream is done."""
        return self._handle.query()

    def synchronize(self) -> None:
        """Wait for the stream's work to finish."""
        self._handle.synchronize()

    def wait_event(self, event) -> None:
        """Make work queued on this stream from now on wait for ``event``."""
        self._handle.wait_event(event._handle)

    def wait_stream(self, stream) -> None:
        """Make work queued on this stream from now on wait for ``stream``'s work so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Record ``event`` (a new one by default) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __enter__(self):
        context = StreamContext(self)
        self._context.append(context)
        context.__enter__()
        return self

    def __exit__(self, *exc):
        self._context.pop().__exit__(*exc)
        return False

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.device_index, self.cuda_stream) == (
            other.device_index, other.cuda_stream)

    def __hash__(self):
        return hash(("cuda", self.device_index, self.cuda_stream))

    def __repr__(self):
        return (f"<torcia.cuda.Stream device=cuda:{self.device_index} "
                f"cuda_stream={self.cuda_stream:#x}>")


class ExternalStream(Stream):
    """A stream made elsewhere (another library's ``cudaStream_t``), as
    ``torch.cuda.ExternalStream``: torcia queues work on it, never destroys it."""

    def __init__(self, stream_ptr: int, device=None, **kwargs):
        self._handle = _runtime().external_stream(int(stream_ptr), _optional(device))
        self._context = []


class Event(_Event):
    """A CUDA event: a marker in a stream, to wait for or to time between
    (``elapsed_time`` in milliseconds), as ``torch.cuda.Event``."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise RuntimeError("torcia.cuda.Event: interprocess events are not supported "
                               "(torcia-cuda shares no CUDA handles between processes)")
        self.enable_timing = enable_timing
        self.device_type = "cuda"
        self._handle = _runtime().Event(enable_timing, blocking)

    @property
    def device(self):
        return _backend.device("cuda", current_device())

    @property
    def cuda_event(self) -> int:
        """The ``cudaEvent_t`` address."""
        return self._handle.ptr

    def record(self, stream=None) -> None:
        """Mark the point ``stream`` (the current stream by default) has reached."""
        self._handle.record(stream._handle if stream is not None else None)

    def query(self) -> bool:
        """Whether the work before the record is done."""
        return self._handle.query()

    def synchronize(self) -> None:
        """Wait until the work before the record is done."""
        self._handle.synchronize()

    def wait(self, stream=None) -> None:
        """Make ``stream`` (the current one by default) wait for this event."""
        self._handle.wait(stream._handle if stream is not None else None)

    def elapsed_time(self, end_event) -> float:
        """Milliseconds from this event to ``end_event`` (both timed and recorded)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        return self._handle.elapsed_time(end_event._handle)

    def __repr__(self):
        return f"<torcia.cuda.Event {self.cuda_event:#x}>"


class StreamContext:
    """Make ``stream`` the current stream of its device for a ``with`` block, and restore
    the previous one after it (``torch.cuda.StreamContext``); None does nothing."""

    def __init__(self, stream):
        self.stream = stream
        self._previous = None

    def __enter__(self):
        if self.stream is None:
            return self.stream
        self._previous = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self._previous)
        return False


def stream(stream) -> StreamContext:
    """Context manager making ``stream`` the current stream (None: no change)."""
    return StreamContext(stream)


def set_stream(stream) -> None:
    """Make ``stream`` the current stream of its device."""
    if stream is not None:
        _runtime().set_stream(stream._handle)


def current_stream(device=None) -> Stream:
    """The stream work on ``device`` (the current device by default) is queued on."""
    return Stream._of(_runtime().current_stream(_optional(device)))


def default_stream(device=None) -> Stream:
    """The device's default (legacy null) stream."""
    return Stream._of(_runtime().default_stream(_optional(device)))


# ----- graphs ---------------------------------------------------------------------------


class CUDAGraph:
    """A CUDA graph: the kernels queued on the current stream between
    :meth:`capture_begin` and :meth:`capture_end`, replayed as one launch by
    :meth:`replay` (``torch.cuda.CUDAGraph``). The graph reads and writes the memory the
    captured work used: change its inputs in place, read its outputs after a replay.
    Memory the capture allocates comes from the graph's own pool (shared with another
    graph through ``pool``, :func:`graph_pool_handle`). Capture what does not wait for
    the device: work that copies to the host (``.item()``, printing) fails the capture."""

    def __init__(self, keep_graph: bool = False):
        self._handle = _runtime().Graph()

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        """Start capturing the current stream (a non-default one)."""
        self._handle.capture_begin(pool, capture_error_mode)

    def capture_end(self) -> None:
        """Stop capturing; the graph can be replayed."""
        self._handle.capture_end()

    def replay(self) -> None:
        """Launch the captured work on the current stream."""
        self._handle.replay()

    def reset(self) -> None:
        """Forget the captured graph (its memory pool stays with tensors still using it)."""
        self._handle.reset()

    def pool(self):
        """The graph's memory pool, to share with another graph's capture."""
        return self._handle.pool()


_capture_streams: dict = {}


class graph:  # noqa: N801 - PyTorch's name
    """Capture the ``with`` block into ``cuda_graph`` (``torch.cuda.graph``): the device
    is synchronised, the block runs on a side stream (``stream``, or one kept per device
    for captures) while it is captured, and the previous stream is current again after.

    Run the block once or more before capturing it (on a side stream), so that lazily
    made state (the memory pool's blocks, compiled kernels) exists before the capture."""

    def __init__(self, cuda_graph: CUDAGraph, pool=None, stream=None,
                 capture_error_mode: str = "global"):
        if stream is None:
            index = current_device()
            stream = _capture_streams.get(index)
            if stream is None:
                stream = _capture_streams[index] = Stream()
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self._context = StreamContext(stream)

    def __enter__(self):
        synchronize()
        self._context.__enter__()
        self.cuda_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *exc):
        try:
            self.cuda_graph.capture_end()
        finally:
            self._context.__exit__(*exc)
        return False


def graph_pool_handle():
    """A new memory pool for captures to share (``pool=`` of :class:`graph`)."""
    return _runtime().Graph().new_pool()


def is_current_stream_capturing() -> bool:
    """Whether the current stream is being captured into a graph (False without CUDA).

    Examples
    --------
    >>> import torcia
    >>> torcia.cuda.is_current_stream_capturing()
    False
    """
    return is_available() and _runtime().is_current_stream_capturing()


class device:  # noqa: N801 - PyTorch's name
    """Context manager making ``device`` current, then restoring the previous one
    (``torch.cuda.device``); an index, "cuda:N" or a torcia.device."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self._previous = None

    def __enter__(self):
        if self.idx < 0:
            return self
        rt = _runtime()
        self._previous = rt.current_device()
        rt.set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            _runtime().set_device(self._previous)
        return False


class device_of(device):  # noqa: N801 - PyTorch's name
    """:class:`device` of a tensor's device; does nothing for a CPU tensor."""

    def __init__(self, obj):
        dev = obj.device
        super().__init__(dev if dev.type == "cuda" else None)


# torcia.cuda.FloatTensor, ...: the legacy typed constructors of CUDA tensors
globals().update(_LEGACY_TYPES)

from torcia.cuda import amp  # noqa: E402 - torch.cuda.amp is there without an import

