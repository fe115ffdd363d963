"""Replay: a graph turned into one generated Python function over arrays.

The generated function runs the kernels in order with no dispatch, no tensor objects and
no autograd recording (the backward is already in the graph), and drops each
intermediate array after its last use so that NumPy's allocator reuses its memory for the
next one. ``source`` is kept for the ``graph`` log. A program generated while a
:class:`KernelProfile` is active times each of its kernels (``kernel_profile``).
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from torcia.compiler.graph import Graph
from torcia.library import host_array


class DataGuardFailed(Exception):
    """A replay reached a graph break where the tensor Python read holds other values than
    when traced: the rest of the program may not be what Python would run.

    Examples
    --------
    >>> import torcia
    >>> from torcia.compiler.replay import DataGuardFailed
    >>> issubclass(DataGuardFailed, Exception)
    True
    """


class KernelProfile:
    """The time each kernel of the instrumented programs took, summed per op over their
    calls (``torcia.compiler.kernel_profile`` makes one active): where a compiled step
    spends its time, the rest of the step being Python (guards, the replay, the gradients
    handed to the leaves).

    ``times`` and ``calls`` map an op (a fused kernel's ops joined by ``+``, an optimizer
    call ``SGD.step``) to its seconds and calls; :meth:`table` prints them.

    Examples
    --------
    >>> from torcia.compiler.replay import KernelProfile
    >>> prof = KernelProfile()
    >>> prof.timed("sum", sum)([1, 2])
    3
    >>> prof.calls
    {'sum': 1}
    """

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.times: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def timed(self, label: str, fn):
        """``fn`` adding its time to ``label``'s."""
        clock, times, calls = self.clock, self.times, self.calls

        def run(*args, **kwargs):
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                times[label] = times.get(label, 0.0) + clock() - start
                calls[label] = calls.get(label, 0) + 1

        return run

    def clear(self) -> None:
        """Forget the times so far (after warm-up calls)."""
        self.times.clear()
        self.calls.clear()

    def table(self, steps: int = 1, top: int = 20) -> str:
        """The ops by time, per step of ``steps``, with their share of the kernels' time."""
        total = sum(self.times.values()) or 1.0
        rows = sorted(self.times.items(), key=lambda kv: -kv[1])
        lines = [f"{'op':<44}{'ms/step':>9}{'calls':>7}{'share':>7}"]
        for label, t in rows[:top]:
            lines.append(f"{label[:43]:<44}{t / steps * 1e3:9.3f}"
                         f"{self.calls[label] / steps:7.3g}{t / total:7.1%}")
        lines.append(f"{'all kernels':<44}{total / steps * 1e3:9.3f}")
        return "\n".join(lines)


_profiles: list[KernelProfile] = []  # the active ones, innermost last


@contextlib.contextmanager
def kernel_profile(clock=time.perf_counter):
    """Time the kernels of the programs traced inside the block, per op.

    The programs a compiled function traces (its first call, a retrace) while the block is
    active are generated with each kernel timed by ``clock`` (``time.process_time`` for the
    CPU time); they keep adding to the returned :class:`KernelProfile` whenever they run,
    inside the block or after it. Programs traced before run as they were: call
    ``torcia.compiler.reset()`` first to profile a function already compiled.

    Examples
    --------
    >>> import torcia
    >>> f = torcia.compile(lambda x: (x.sin() * 2).sum())
    >>> with torcia.compiler.kernel_profile() as prof:
    ...     _ = f(torcia.ones(4))  # traced: the program is instrumented
    ...     _ = f(torcia.ones(4))  # replayed
    >>> sum(prof.calls.values()) > 0
    True
    """
    profile = KernelProfile(clock)
    _profiles.append(profile)
    try:
        yield profile
    finally:
        _profiles.remove(profile)


def active_profile() -> KernelProfile | None:
    """The profile a program generated now is instrumented for, if any."""
    return _profiles[-1] if _profiles else None


def same_values(got, traced) -> bool:
    """Whether a value read at a graph break equals the one traced (NaN equal to NaN)."""
    got = host_array(got)
    return got.shape == traced.shape and bool(np.array_equal(
        got, traced, equal_nan=got.dtype.kind in "fc" and traced.dtype.kind in "fc"))


def last_uses(graph: Graph, keep: set) -> dict:
    """node index -> the value ids whose last reader it is (never ``keep``'s)."""
    last = {}
    for i, node in enumerate(graph.nodes):
        for v in node.value_args():
            last[v] = i
    by_node: dict[int, list] = {}
    for v, i in last.items():
        if v not in keep:
            by_node.setdefault(i, []).append(v)
    return by_node


def reusable_buffers(graph: Graph, keep: set) -> set:
    """Values a later fused kernel may overwrite once they are dead: made by a fused
    kernel (a fresh array nobody else holds) and read only by fused kernels (which
    return no views of their inputs), never handed back."""
    made = {n.outs[0] for n in graph.nodes if n.kind == "fused"} - keep
    for node in graph.nodes:
        if node.kind != "fused":
            made.difference_update(node.value_args())
    return made


def handed_over(graph: Graph, results: list) -> dict:
    """node index -> for each gradient an opaque node writes into a leaf, whether the
    program may hand its array over instead of a copy: made by a kernel of the program,
    read by nothing after, not returned, not handed over twice (``fresh`` checks at run
    time that the array is not a view, an input or a constant a kernel passed through)."""
    made = {o for n in graph.nodes if n.kind in ("call", "fused", "cast") for o in n.outs}
    last = {}
    for i, node in enumerate(graph.nodes):
        for v in node.value_args():
            last[v] = i
    out = {}
    for i, node in enumerate(graph.nodes):
        if node.kind != "opaque":
            continue
        refs = [r[1] if r[0] == "v" else None for r in node.args]
        out[i] = tuple(v is not None and v in made and v not in results and last[v] == i
                       and refs.count(v) == 1 for v in refs)
    return out


def fresh(arrays, mask, inputs, const_ids) -> tuple:
    """``mask`` narrowed at run time to the arrays that own their memory alone as far as
    the program knows (no view, no input, no constant)."""
    return tuple(
        # (CuPy's flags have no "writeable": its arrays always are)
        m and a.base is None and a.flags.owndata and getattr(a.flags, "writeable", True)
        and id(a) not in const_ids and not any(a is x for x in inputs)
        for a, m in zip(arrays, mask))


def generate(graph: Graph, results: list):
    """Compile ``graph`` to ``run(inputs) -> tuple of arrays`` (those of ``results``).

    Returns ``(run, source)``.
    """
    consts: list = []
    fns: list = []

    def const(obj) -> str:
        consts.append(obj)
        return f"C[{len(consts) - 1}]"

    def expr(ref) -> str:
        if ref[0] == "v":
            return f"v{ref[1]}"
        if ref[0] == "l":
            return "[" + ", ".join(expr(r) for r in ref[1]) + "]"
        c = ref[1]
        # Python's own types only: a NumPy scalar (np.float64 is a float) repr's as a call
        if c is None or c.__class__ in (bool, int, str) or (
                c.__class__ is float and math.isfinite(c)):
            return repr(c)
        return const(c)

    profile = active_profile()
    drops = last_uses(graph, set(results) | {v for v, _ in graph.inputs})
    owned = handed_over(graph, set(results))
    poolable = reusable_buffers(graph, set(results))
    pool: dict[tuple, list] = {}  # (shape, dtype) -> dead buffers to write into
    reused = 0
    lines = ["def run(I, K, C):"]
    for i, (vid, _) in enumerate(graph.inputs):
        lines.append(f"    v{vid} = I[{i}]")
    for i, node in enumerate(graph.nodes):
        if node.kind == "cast":
            lines.append(f"    v{node.outs[0]} = {expr(node.args[0])}.astype("
                         f"{const(node.params['dtype'][1])})")
        elif node.kind == "copy_":
            lines.append(f"    {expr(node.args[0])}[...] = {expr(node.args[1])}")
        elif node.kind == "guard":
            lines.append(f"    if not same({expr(node.args[0])}, "
                         f"{const(node.params['value'][1])}):")
            lines.append(f"        raise DataGuardFailed('Tensor.{node.op}() read other "
                         f"values (graph break {i})')")
        else:
            fns.append(node.fn if profile is None else profile.timed(node.op, node.fn))
            args = [expr(r) for r in node.args]
            if any(owned.get(i, ())):
                # gradients the program made and nobody reads again become the leaves'
                # .grad as they are (no copy: a fresh buffer per step, never aliased)
                args.append(f"owned=fresh(({', '.join(args)},), {owned[i]!r}, I, CI)")
            args += [f"{k}={expr(r)}" for k, r in node.params.items()]
            free = pool.get(graph.meta[node.outs[0]]) \
                if node.kind == "fused" and len(node.outs) == 1 else None
            if free:
                args.append(f"out=v{free.pop()}")
                reused += 1
            lhs = ", ".join(f"v{o}" for o in node.outs)
            if node.tuple_out:
                lhs += ","
            lhs = f"{lhs} = " if lhs else ""
            lines.append(f"    {lhs}K[{len(fns) - 1}]({', '.join(args)})  # {node.op}")
        dead = [v for v in drops.get(i, ()) if v not in poolable]
        for v in drops.get(i, ()):
            if v in poolable:
                pool.setdefault(graph.meta[v], []).append(v)
        if dead:
            lines.append(f"    del {', '.join(f'v{v}' for v in sorted(dead))}")
    lines.append("    return (" + "".join(f"v{v}, " for v in results) + ")")
    lines.insert(1, f"    # {reused} fused kernel(s) write into a dead buffer")
    source = "\n".join(lines) + "\n"
    namespace: dict = {"same": same_values, "DataGuardFailed": DataGuardFailed,
                       "fresh": fresh}
    exec(compile(source, "<torcia.compile replay>", "exec"), namespace)
    namespace["CI"] = frozenset(id(c) for c in consts)
    fn = namespace["run"]
    consts_t, fns_t = tuple(consts), tuple(fns)

    def run(inputs):
        return fn(inputs, fns_t, consts_t)

    return run, source
