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

import json
import os
import threading
import time
import traceback
from contextlib import contextmanager

from torcia._tensor import PROFILE_ORDER, DispatchMode


class ProfilerActivity:
    CPU = "cpu"
    CUDA = "cuda"


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


class _Recorder(threading.local):
    active = None  # the profile being recorded, in this thread
    stack = None


_REC = _Recorder()


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

    Examples
    --------
    >>> import torcia
    >>> model = torcia.nn.Linear(8, 4)
    >>> with torcia.profiler.profile() as prof:
    ...     model(torcia.randn(16, 8)).sum().backward()
    >>> "linear" in {e.key for e in prof.key_averages()}
    True
    """

    def __init__(self, activities=None, record_shapes=False, with_stack=False,
                 profile_memory=False, schedule=None, on_trace_ready=None):
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.events: list[Event] = []

    # ----- the mode ---------------------------------------------------------------------
    def __enter__(self):
        if _REC.active is not None:
            raise RuntimeError("a torcia profiler is already active in this thread")
        _REC.active = self
        _REC.stack = []
        self._start = time.perf_counter_ns()
        self._mode = _ProfileMode().__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        _REC.active = None
        return False

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
        """Write the events in the Chrome trace format (chrome://tracing, Perfetto)."""
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
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)

    def table(self, **kwargs) -> str:
        return self.key_averages().table(**kwargs)


@contextmanager
def _span(name, kind, device, provider, shapes=None):
    prof = _REC.active
    if prof is None:
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


@contextmanager
def record_function(name: str):
    """Mark a block of code: it appears in the profile as one event named ``name``.

    Examples
    --------
    >>> import torcia
    >>> with torcia.profiler.profile() as prof:
    ...     with torcia.profiler.record_function("scale"):
    ...         y = torcia.ones(3) * 2
    >>> "scale" in [e.key for e in prof.key_averages()]
    True
    """
    with _span(name, "user", None, None):
        yield
