"""``torcia.profiler``: where the time of a piece of code goes, per op and backward node.

A :class:`profile` is a dispatch mode (``torcia.library.DispatchMode``, at
``PROFILE_ORDER``): while it is entered, the ops and backward nodes of *its thread* are
timed; the kernel tables stay untouched, and other threads run unprofiled.

Examples
--------
>>> import torcia
>>> from torcia.profiler import profile, record_function
>>> with profile() as prof:
...     with record_function("my_block"):
...         y = (torcia.ones(8, 8) @ torcia.ones(8, 8)).sum()
>>> "matmul" in prof.key_averages().table(sort_by="cpu_time_total")
True
"""

from __future__ import annotations

import enum
import gzip
import json
import os
import socket
import threading
import time
import traceback
import warnings
from contextlib import ContextDecorator, contextmanager

from torcia._switches import Switches
from torcia._tensor import PROFILE_ORDER, DispatchMode


class ProfilerActivity(enum.Enum):
    """The kinds of activity a profiler can record, with PyTorch's values (torcia times
    every device's kernels on the host: CPU covers them).

    Examples
    --------
    >>> from torcia.profiler import ProfilerActivity
    >>> ProfilerActivity(2)
    <ProfilerActivity.CUDA: 2>
    """

    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5


class Event:
    """One timed call: an op's kernel, a backward node, or a ``record_function`` block."""

    __slots__ = ("name", "kind", "device", "provider", "start", "end", "shapes", "stack",
                 "children_time", "thread")

    def __init__(self, name, kind, device, provider, start, shapes=None, stack=None):
        self.name = name
        self.kind = kind
        self.device = device
        self.provider = provider
        self.start = start
        self.end = start
        self.shapes = shapes
        self.stack = stack
        self.children_time = 0
        self.thread = threading.get_ident()

    @property
    def duration_us(self) -> float:
        return (self.end - self.start) / 1e3

    @property
    def self_us(self) -> float:
        return (self.end - self.start - self.children_time) / 1e3


class FunctionEventAvg:
    """Statistics of all events of one name (and input shapes, when grouped by them).

    Examples
    --------
    >>> import torcia
    >>> with torcia.profiler.profile() as prof:
    ...     y = torcia.ones(2) + 1
    ...     y = y + 1
    >>> add = next(e for e in prof.key_averages() if e.key == 'add')
    >>> isinstance(add, torcia.profiler.FunctionEventAvg), add.count
    (True, 2)
    """

    def __init__(self, key, kind, device, provider, shapes=None):
        self.key = key
        self.kind = kind
        self.device = device
        self.provider = provider
        self.input_shapes = shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)


class EventList(list):
    """What :meth:`profile.key_averages` returns: a list with :meth:`table`.

    Examples
    --------
    >>> import torcia
    >>> with torcia.profiler.profile() as prof:
    ...     y = torcia.ones(2) + 1
    >>> averages = prof.key_averages()
    >>> isinstance(averages, torcia.profiler.EventList), any(e.key == 'add' for e in averages)
    (True, True)
    """

    def table(self, sort_by="self_cpu_time_total", row_limit=20, header=None) -> str:
        """A text table like PyTorch's, sorted by ``sort_by`` (``cpu_time_total``,
        ``self_cpu_time_total``, ``count``...), at most ``row_limit`` rows."""
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"sort_by must be one of {sorted(_SORT_KEYS)}, got {sort_by!r}")
        rows = sorted(self, key=lambda e: getattr(e, _SORT_KEYS[sort_by]), reverse=True)
        rows = rows[: row_limit if row_limit > 0 else None]
        total_self = sum(e.self_cpu_time_total for e in self) or 1.0
        shapes = any(e.input_shapes for e in rows)
        name_w = max([len("Name")] + [len(e.key) for e in rows]) + 2
        cols = ["Self CPU %", "Self CPU", "CPU total", "CPU time avg", "# of Calls", "Kind",
                "Backend"] + (["Input Shapes"] if shapes else [])
        widths = [12, 12, 12, 14, 12, 10, 10] + ([30] if shapes else [])
        line = "-" * (name_w + sum(widths))
        out = [line, "Name".ljust(name_w) + "".join(c.rjust(w) for c, w in zip(cols, widths)),
               line]
        if header:
            out.insert(0, header)
        for e in rows:
            cells = [f"{100 * e.self_cpu_time_total / total_self:.2f}%",
                     _fmt(e.self_cpu_time_total), _fmt(e.cpu_time_total), _fmt(e.cpu_time),
                     str(e.count), e.kind, e.provider or "-"]
            if shapes:
                cells.append(str(e.input_shapes or ""))
            out.append(e.key.ljust(name_w) + "".join(c.rjust(w) for c, w in zip(cells, widths)))
        out += [line, f"Self CPU time total: {_fmt(total_self)}"]
        return "\n".join(out)


_SORT_KEYS = {"self_cpu_time_total": "self_cpu_time_total", "cpu_time_total": "cpu_time_total",
              "cpu_time": "cpu_time", "count": "count",
              # CUDA columns sort by the host time: kernels are timed on the host here
              "self_cuda_time_total": "self_cpu_time_total",
              "cuda_time_total": "cpu_time_total"}


def _fmt(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class _Recorder(Switches):
    active = None  # the profile being recorded, in this thread
    stack = None


_REC = _Recorder()


class ProfilerAction(enum.Enum):
    """What a :func:`schedule` asks of the profiler at a step.

    Examples
    --------
    >>> from torcia.profiler import ProfilerAction
    >>> ProfilerAction.RECORD_AND_SAVE.value
    3
    """

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class DeviceType(enum.Enum):
    """The device kinds of profiled events, with PyTorch's values.

    Examples
    --------
    >>> from torcia.profiler import DeviceType
    >>> DeviceType.CUDA.value
    1
    """

    CPU = 0
    CUDA = 1
    MKLDNN = 2
    OPENGL = 3
    OPENCL = 4
    IDEEP = 5
    HIP = 6
    FPGA = 7
    MAIA = 8
    XLA = 9
    Vulkan = 10
    Metal = 11
    XPU = 12
    MPS = 13
    Meta = 14
    HPU = 15
    VE = 16
    Lazy = 17
    IPU = 18
    MTIA = 19
    PrivateUse1 = 20


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0):
    """The profiler's plan over training steps: after ``skip_first`` steps, cycles of
    ``wait`` idle steps, ``warmup`` steps and ``active`` recorded ones (the last of which
    saves the trace), ``repeat`` times (0: forever). ``skip_first_wait`` skips the wait
    of the first cycle.

    Examples
    --------
    >>> from torcia.profiler import schedule
    >>> plan = schedule(wait=1, warmup=1, active=2, repeat=1)
    >>> [plan(step).name for step in range(5)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE', 'NONE']
    """
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name=None, use_gzip=False,
                              use_python_export=False):
    """An ``on_trace_ready`` handler writing each trace to ``dir_name`` as
    ``<worker_name>.<time in ns>.pt.trace.json`` (gzipped with ``use_gzip``), the files
    TensorBoard's profiler plugin reads; ``worker_name`` defaults to ``<host>_<pid>``.

    Examples
    --------
    >>> import os, tempfile
    >>> import torcia
    >>> from torcia.profiler import profile, tensorboard_trace_handler
    >>> with tempfile.TemporaryDirectory() as logdir:
    ...     with profile(on_trace_ready=tensorboard_trace_handler(logdir, "worker0")):
    ...         y = torcia.ones(4) * 2
    ...     [name.split(".")[0] for name in os.listdir(logdir)]
    ['worker0']
    """

    def handler_fn(prof) -> None:
        nonlocal worker_name
        try:
            os.makedirs(dir_name, exist_ok=True)
        except OSError as exc:
            raise RuntimeError("Can't create directory: " + dir_name) from exc
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler_fn


def supported_activities() -> set:
    """The activities the profiler records: the host's (torcia times every device's
    kernels on the host, when they return).

    Examples
    --------
    >>> import torcia
    >>> torcia.profiler.supported_activities()
    {<ProfilerActivity.CPU: 0>}
    """
    return {ProfilerActivity.CPU}


def kineto_available() -> bool:
    """False: torcia's profiler is its own dispatch mode, not PyTorch's Kineto library.

    Examples
    --------
    >>> import torcia
    >>> torcia.profiler.kineto_available()
    False
    """
    return False


class profile:
    """Context manager recording the time of every op and backward node inside it.

    Parameters
    ----------
    activities : iterable of ProfilerActivity, optional
        Accepted for PyTorch compatibility; torcia times every device's kernels on the host.
    record_shapes : bool
        Keep the input shapes of each op (and group ``key_averages`` by them on request).
    with_stack : bool
        Keep the Python stack of each op's call (shown in the Chrome trace).
    schedule : callable, optional
        ``schedule(step) -> ProfilerAction`` (see :func:`schedule`), advanced by
        :meth:`step`: only the RECORD steps are recorded, and each cycle's trace is handed
        to ``on_trace_ready`` at its RECORD_AND_SAVE step. Without it, everything inside
        the block is recorded.
    on_trace_ready : callable, optional
        ``on_trace_ready(prof)`` when a trace is complete (at the end of a scheduled
        cycle, or of the block): :func:`tensorboard_trace_handler`, or your own.

    Examples
    --------
    >>> import torcia
    >>> model = torcia.nn.Linear(8, 4)
    >>> with torcia.profiler.profile() as prof:
    ...     model(torcia.randn(16, 8)).sum().backward()
    >>> "linear" in {e.key for e in prof.key_averages()}
    True

    Profiling steps 2 and 3 of a loop:

    >>> traces = []
    >>> plan = torcia.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    >>> with torcia.profiler.profile(schedule=plan,
    ...                              on_trace_ready=lambda p: traces.append(p.step_num)) as p:
    ...     for step in range(6):
    ...         y = torcia.ones(2) + step
    ...         p.step()
    >>> traces
    [4]
    """

    def __init__(self, activities=None, record_shapes=False, with_stack=False,
                 profile_memory=False, schedule=None, on_trace_ready=None,
                 with_flops=False, with_modules=False, experimental_config=None,
                 execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None):
        self.activities = set(activities) if activities else supported_activities()
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.schedule = schedule if schedule is not None else _always_record
        self.on_trace_ready = on_trace_ready
        self.acc_events = acc_events
        self.events: list[Event] = []
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._recording = False

    # ----- the mode ---------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self) -> None:
        """Begin profiling (at step 0 of the schedule)."""
        if _REC.active is not None:
            raise RuntimeError("a torcia profiler is already active in this thread")
        _REC.active = self
        _REC.stack = []
        self._start = time.perf_counter_ns()
        self._mode = _ProfileMode().__enter__()
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._recording = self.current_action in _RECORDING

    def stop(self) -> None:
        """End profiling; a trace being recorded is handed to ``on_trace_ready``."""
        self._mode.__exit__(None, None, None)
        _REC.active = None
        if self._recording:
            self._recording = False
            self._trace_ready()

    def step(self) -> None:
        """Mark the end of a training step: the schedule moves on; a finished cycle's
        trace goes to ``on_trace_ready``."""
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        if previous is ProfilerAction.RECORD_AND_SAVE or (
                self._recording and self.current_action not in _RECORDING):
            if previous is not ProfilerAction.RECORD_AND_SAVE:
                warnings.warn("Incorrect schedule: RECORD followed by "
                              f"{self.current_action.name}", stacklevel=2)
            self._recording = False
            self._trace_ready()
        if self.current_action in _RECORDING and not self._recording:
            if not self.acc_events:
                self.events = []
            self._start = time.perf_counter_ns()
            self._recording = True

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def events_list(self) -> EventList:
        return EventList(self.events)

    # ----- results --------------------------------------------------------------------
    def key_averages(self, group_by_input_shape=False) -> EventList:
        """Events grouped by name (and input shapes), with totals and self times."""
        groups: dict = {}
        for e in self.events:
            key = (e.name, e.kind, str(e.shapes) if group_by_input_shape else None)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(
                    e.name, e.kind, e.device, e.provider,
                    e.shapes if group_by_input_shape else None)
            avg.count += 1
            avg.cpu_time_total += e.duration_us
            avg.self_cpu_time_total += e.self_us
        return EventList(groups.values())

    def export_chrome_trace(self, path) -> None:
        """Write the events in the Chrome trace format (chrome://tracing, Perfetto,
        TensorBoard's profiler plugin); gzipped when ``path`` ends in ``.gz``."""
        pid = os.getpid()
        trace = []
        for e in self.events:
            args = {"kind": e.kind, "device": e.device, "backend": e.provider}
            if e.shapes is not None:
                args["input_shapes"] = e.shapes
            if e.stack:
                args["stack"] = e.stack
            trace.append({"name": e.name, "cat": e.kind, "ph": "X", "pid": pid,
                          "tid": e.thread, "ts": (e.start - self._start) / 1e3,
                          "dur": e.duration_us, "args": args})
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "wt") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)

    def table(self, **kwargs) -> str:
        return self.key_averages().table(**kwargs)


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


@contextmanager
def _span(name, kind, device, provider, shapes=None):
    prof = _REC.active
    if prof is None or not prof._recording:
        yield
        return
    stack = "".join(traceback.format_stack(limit=12)[:-3]) if prof.with_stack else None
    event = Event(name, kind, device, provider, time.perf_counter_ns(), shapes, stack)
    _REC.stack.append(event)
    try:
        yield
    finally:
        event.end = time.perf_counter_ns()
        _REC.stack.pop()
        if _REC.stack:
            _REC.stack[-1].children_time += event.end - event.start
        prof.events.append(event)


class _ProfileMode(DispatchMode):
    """Times each kernel and backward node of the profiling thread."""

    order = PROFILE_ORDER

    def around_kernel(self, op, kernel, device):
        backend = device.backend
        return _timed_kernel(op, device.type, backend.kernel_providers.get(op), kernel)

    def around_backward(self, node, run):
        with _span(node.name(), "backward", None, None):
            return run()


def _timed_kernel(op, device, provider, fn):
    def kernel(*args, **params):
        prof = _REC.active
        shapes = [list(getattr(a, "shape", ())) for a in args] if prof.record_shapes else None
        with _span(op, "op", device, provider, shapes):
            return fn(*args, **params)

    return kernel


class record_function(ContextDecorator):  # noqa: N801 - PyTorch's name
    """Mark a block of code (or, as a decorator, each call of a function): it appears in
    the profile as one event named ``name``.

    Examples
    --------
    >>> import torcia
    >>> with torcia.profiler.profile() as prof:
    ...     with torcia.profiler.record_function("scale"):
    ...         y = torcia.ones(3) * 2
    >>> "scale" in [e.key for e in prof.key_averages()]
    True
    >>> @torcia.profiler.record_function("double")
    ... def double(x):
    ...     return x * 2
    >>> with torcia.profiler.profile() as prof:
    ...     _ = double(torcia.ones(2))
    >>> "double" in [e.key for e in prof.key_averages()]
    True
    """

    def __init__(self, name: str, args=None):
        self.name = name
        self.args = args
        self._spans = []

    def __enter__(self):
        span = _span(self.name, "user", None, None)
        span.__enter__()
        self._spans.append(span)
        return self

    def __exit__(self, *exc):
        self._spans.pop().__exit__(*exc)
        return False
