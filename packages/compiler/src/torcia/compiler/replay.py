"""Replay: a graph turned into one generated Python function over arrays.

The generated function runs the kernels in order with no dispatch, no tensor objects and
no autograd recording (the backward is already in the graph), and drops each
intermediate array after its last use so that NumPy's allocator reuses its memory for the
next one. ``source`` is kept for the ``graph`` log.
"""

from __future__ import annotations

import math

from torcia.compiler.graph import Graph


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
        if c is None or isinstance(c, (bool, int, str)) or (
                isinstance(c, float) and math.isfinite(c)):
            return repr(c)
        return const(c)

    drops = last_uses(graph, set(results) | {v for v, _ in graph.inputs})
    lines = ["def run(I, K, C):"]
    for i, (vid, _) in enumerate(graph.inputs):
        lines.append(f"    v{vid} = I[{i}]")
    for i, node in enumerate(graph.nodes):
        if node.kind == "cast":
            lines.append(f"    v{node.outs[0]} = {expr(node.args[0])}.astype("
                         f"{const(node.params['dtype'][1])})")
        elif node.kind == "copy_":
            lines.append(f"    {expr(node.args[0])}[...] = {expr(node.args[1])}")
        else:
            fns.append(node.fn)
            args = [expr(r) for r in node.args]
            args += [f"{k}={expr(r)}" for k, r in node.params.items()]
            lhs = ", ".join(f"v{o}" for o in node.outs)
            if node.tuple_out:
                lhs += ","
            lines.append(f"    {lhs} = K[{len(fns) - 1}]({', '.join(args)})  # {node.op}")
        dead = drops.get(i)
        if dead:
            lines.append(f"    del {', '.join(f'v{v}' for v in sorted(dead))}")
    lines.append("    return (" + "".join(f"v{v}, " for v in results) + ")")
    source = "\n".join(lines) + "\n"
    namespace: dict = {}
    exec(compile(source, "<torcia.compile replay>", "exec"), namespace)
    fn = namespace["run"]
    consts_t, fns_t = tuple(consts), tuple(fns)

    def run(inputs):
        return fn(inputs, fns_t, consts_t)

    return run, source
