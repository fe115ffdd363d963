"""The graph IR of torcia.compile: a straight-line list of op records over arrays.

A :class:`Graph` is what the tracing dispatch mode captured from one run of a function:
its inputs (tensors the function read, and gradients it accumulated into), the kernels
that ran in order (the forward and, when the function called ``backward()``, the
backward too, as AOTAutograd's joint graph), the in-place writes, and its outputs.
Values are numbered; every value has the shape and dtype it had when traced.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Node:
    """One op of a graph.

    ``kind`` is ``"call"`` (run ``fn``, a device kernel, on ``args`` and ``params``),
    ``"cast"`` (the promotion torcia's dispatch applies before a kernel), ``"copy_"``
    (an in-place write of ``args[1]`` into ``args[0]``), ``"fused"`` (a generated kernel
    standing for several elementwise ops), ``"guard"`` (a graph break: Python read the
    values of ``args[0]``, and what follows holds while they equal ``params["value"]``) or
    ``"opaque"`` (a Python call replayed as is, e.g. ``opt.step()``, after writing the
    gradients in ``args`` into their leaves).
    ``args`` holds references: ``("v", id)`` for a value, ``("c", obj)`` for a constant,
    ``("l", [refs])`` for a list of them.

    Examples
    --------
    >>> import torcia
    >>> graphs = []
    >>> def keep(graph, example_inputs):
    ...     graphs.append(graph)
    ...     return graph
    >>> f = torcia.compile(lambda x: (x + 1) * (x + 1) + 0 * x, backend=keep)
    >>> f(torcia.tensor([1.0, 2.0]))
    tensor([4., 9.])
    >>> graph = graphs[0]
    >>> node = graph.nodes[0]
    >>> isinstance(node, torcia.compiler.Node), node.kind, node.op
    (True, 'call', 'add')
    """

    kind: str
    op: str
    fn: Any
    args: list
    params: dict
    outs: list
    tuple_out: bool = False
    source: str = ""  # a fused kernel's generated code

    def value_args(self):
        """The value ids this node reads, in order."""
        found = []

        def walk(ref):
            if ref[0] == "v":
                found.append(ref[1])
            elif ref[0] == "l":
                for r in ref[1]:
                    walk(r)

        for r in self.args:
            walk(r)
        for r in self.params.values():
            walk(r)
        return found


@dataclasses.dataclass
class Graph:
    """A captured graph.

    ``inputs`` lists ``(value id, source)`` where a source is ``("arg", i)`` (the i-th
    tensor argument, flattened), ``("tensor", t)`` (a tensor the function read: a
    parameter, a buffer, a constant it made) or ``("grad", t)`` (``t.grad`` when traced).
    ``grads`` lists ``(t, value id)``: gradient accumulated into leaf ``t`` as the eager
    engine does. ``meta`` maps a value id to its ``(shape, dtype)``; ``device`` is the
    device every kernel of the graph ran on (one per graph).

    Examples
    --------
    >>> import torcia
    >>> graphs = []
    >>> def keep(graph, example_inputs):
    ...     graphs.append(graph)
    ...     return graph
    >>> f = torcia.compile(lambda x: (x + 1) * (x + 1) + 0 * x, backend=keep)
    >>> f(torcia.tensor([1.0, 2.0]))
    tensor([4., 9.])
    >>> graph = graphs[0]
    >>> isinstance(graph, torcia.compiler.Graph), [node.op for node in graph.nodes]
    (True, ['add', 'add', 'mul', 'mul', 'add'])
    """

    inputs: list = dataclasses.field(default_factory=list)
    nodes: list = dataclasses.field(default_factory=list)
    outputs: Any = None  # the returned structure, tensors replaced by ("v", id)/("c", x)
    grads: list = dataclasses.field(default_factory=list)
    meta: dict = dataclasses.field(default_factory=dict)
    n_values: int = 0
    device: Any = None  # the torcia.device its kernels ran on (None: none ran)

    def new_value(self, arr) -> int:
        vid = self.n_values
        self.n_values += 1
        self.meta[vid] = (tuple(getattr(arr, "shape", ())), getattr(arr, "dtype", None))
        return vid

    def output_values(self) -> set:
        """The value ids the graph hands back (returned, accumulated or written)."""
        used = {v for _, v in self.grads}

        def walk(obj):
            if isinstance(obj, tuple) and len(obj) == 3 and obj[0] == "v":
                used.add(obj[1])
            elif isinstance(obj, (list, tuple)):
                for x in obj:
                    walk(x)
            elif isinstance(obj, dict):
                for x in obj.values():
                    walk(x)

        walk(self.outputs)
        return used

    def tabular(self) -> str:
        """The graph as a table, like ``torch.fx.Graph.print_tabular()``."""
        rows = [("opcode", "name", "target", "args", "shape/dtype")]
        for vid, src in self.inputs:
            shape, dtype = self.meta[vid]
            what = src[0] if src[0] != "arg" else f"arg{src[1]}"
            rows.append(("placeholder", f"v{vid}", what, "", f"{list(shape)} {dtype}"))
        for node in self.nodes:
            target = node.op if node.kind != "cast" else f"cast:{node.params['dtype'][1]}"
            names = ", ".join(f"v{o}" for o in node.outs)
            shape, dtype = self.meta[node.outs[0]] if node.outs else ((), "")
            rows.append((node.kind if node.kind != "call" else "call_function", names, target,
                         _fmt_args(node.args), f"{list(shape)} {dtype}"))
        outs = sorted(self.output_values())
        rows.append(("output", "output", "output", ", ".join(f"v{o}" for o in outs), ""))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def print_tabular(self) -> None:
        """Print :meth:`tabular`."""
        print(self.tabular())


def _fmt_args(args) -> str:
    out = []
    for ref in args:
        if ref[0] == "v":
            out.append(f"v{ref[1]}")
        elif ref[0] == "l":
            out.append("[" + _fmt_args(ref[1]) + "]")
        else:
            c = ref[1]
            out.append(f"<array {list(c.shape)}>" if hasattr(c, "shape") and c.ndim else repr(c))
    return "(" + ", ".join(out) + ")" if len(out) != 1 else out[0]
