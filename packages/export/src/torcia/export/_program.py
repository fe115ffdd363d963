"""An exported program: the op records of one capture, with its sizes as polynomials of
the dynamic dimensions, that runs, prints, and saves to JSON plus arrays.

Nodes read values by number (``("v", id)``), constants (``("c", obj)``) and lists of
either (``("l", [...])``); a parameter of a node may hold a :class:`Sym`, an integer
that depends on the dynamic sizes. Running a program binds the sizes of the call's
inputs, evaluates every :class:`Sym`, and replays the nodes with torcia-compiler's
replay (one generated function, no dispatch), cached per binding.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

import torcia
from torcia import library
from torcia.compiler.graph import Graph
from torcia.compiler.graph import Node as CNode
from torcia.compiler.replay import generate
from torcia.library import Tensor


class Sym:
    """An integer polynomial of the dynamic sizes: ``sum(coef * prod(sizes[i] for i in
    monomial))``; the program's sizes that change with a :class:`~torcia.export.Dim`."""

    __slots__ = ("terms",)

    def __init__(self, terms):
        self.terms = tuple(sorted((int(c), tuple(sorted(m))) for c, m in terms if c))

    def value(self, sizes) -> int:
        return sum(c * math.prod(sizes[i] for i in m) for c, m in self.terms)

    def render(self, names) -> str:
        parts = []
        for c, m in self.terms:
            factors = [names[i] for i in m]
            if c != 1 or not factors:
                factors.insert(0, str(c))
            parts.append("*".join(factors))
        return " + ".join(parts).replace("+ -", "- ") or "0"

    def __eq__(self, other):
        return isinstance(other, Sym) and other.terms == self.terms

    def __hash__(self):
        return hash(self.terms)

    def __repr__(self):
        return f"Sym({self.render([f's{i}' for i in range(64)])})"


def evaluate(obj, sizes):
    """``obj`` with every :class:`Sym` in it replaced by its value."""
    if isinstance(obj, Sym):
        return obj.value(sizes)
    if isinstance(obj, tuple):
        return tuple(evaluate(x, sizes) for x in obj)
    if isinstance(obj, list):
        return [evaluate(x, sizes) for x in obj]
    if isinstance(obj, slice):
        return slice(evaluate(obj.start, sizes), evaluate(obj.stop, sizes),
                     evaluate(obj.step, sizes))
    return obj


def has_sym(obj) -> bool:
    if isinstance(obj, Sym):
        return True
    if isinstance(obj, (tuple, list)):
        return any(has_sym(x) for x in obj)
    if isinstance(obj, slice):
        return has_sym((obj.start, obj.stop, obj.step))
    return False


@dataclasses.dataclass
class Node:
    """One op of an exported program (what :attr:`ExportGraph.nodes` lists and
    :class:`~torcia.export.passes.Rewriter` edits): ``kind``, ``op``, ``args`` (``("v",
    value id)``, ``("c", constant)``, ``("l", [...])``), ``params``, the output value ids
    ``outs``, and ``loc``, the model line it came from. ``kind`` is ``"call"`` (the op's
    kernel on ``args`` and ``params``), ``"cast"`` (to ``params["dtype"]``), ``"copy_"``
    (``args[1]`` written into ``args[0]``), ``"full"`` or ``"arange"`` (a tensor the
    model made outside the traced ops, of a size that follows the dynamic dimensions) or
    ``"python"`` (``fn`` on the arrays of ``args``: an observer of prepare_pt2e; such a
    program runs but is not saved)."""

    kind: str
    op: str
    args: list
    params: dict
    outs: list
    tuple_out: bool = False
    loc: str = ""
    fn: Any = None  # a "python" node's function (arrays in, array out): not saved

    def value_args(self) -> list:
        """The value ids this node reads, in order."""
        found = []

        def walk(ref):
            if ref[0] == "v":
                found.append(ref[1])
            elif ref[0] == "l":
                for r in ref[1]:
                    walk(r)

        for r in [*self.args, *self.params.values()]:
            walk(r)
        return found


@dataclasses.dataclass
class ModuleCall:
    """One call of a submodule of the exported model, as the capture saw it: the
    submodule's name, the program's nodes it ran (``start`` to ``end``), its arguments
    (``("v", value id)`` for a tensor of the program, ``("c", value)`` otherwise) with
    their structure ``in_spec`` (``((args...), {})``, as :func:`flatten` makes it), and
    its outputs, referred to in the same way, with their structure ``out_spec``; ``depth``
    is how many submodule calls enclose it."""

    fqn: str
    start: int
    end: int
    args: list
    in_spec: tuple
    outs: list
    out_spec: tuple
    depth: int


def _full(shape, value, dtype):
    return np.full(shape, value, dtype)


def _arange(start, step, length, dtype):
    return (start + step * np.arange(length)).astype(dtype)


_MADE = {"full": _full, "arange": _arange}


@dataclasses.dataclass
class Program:
    """What an :class:`~torcia.export.ExportedProgram` runs."""

    nodes: list
    inputs: list  # (value id, kind, target): "user" leaf index, "parameter"/"buffer" name,
    # "constant" name
    outputs: Any
    meta: dict  # value id -> (shape: ints, Syms or None, numpy dtype)
    dim_names: list
    constants: dict = dataclasses.field(default_factory=dict)  # name -> array
    calls: list = dataclasses.field(default_factory=list)  # ModuleCall, in start order
    module_names: list = dataclasses.field(default_factory=list)  # the model's submodules
    preserved: list = dataclasses.field(default_factory=list)  # preserve_module_call_signature
    backend: Any = None  # a torcia.compile backend run on each binding's graph
    _cache: dict = dataclasses.field(default_factory=dict, repr=False)

    # -- running --------------------------------------------------------------------------

    def kernels(self) -> dict:
        """The kernel of every op, looked up by name in the "cpu" table."""
        table = library.get_backend("cpu").kernels
        found = {}
        for node in self.nodes:
            if node.kind == "call" and node.op not in found:
                try:
                    found[node.op] = table[node.op]
                except (KeyError, NotImplementedError):
                    raise RuntimeError(
                        f"the program uses op {node.op!r}, which no installed part defines "
                        f"(recorded at {node.loc.splitlines()[0] if node.loc else '?'}); "
                        "install the torcia part or plugin that provides it") from None
        return found

    def compiled(self, sizes: tuple, arrays: list | None = None):
        """The replay function for one binding of the dynamic sizes (cached); with a
        backend, ``arrays`` (the call's inputs) give it the shapes it specialises to."""
        hit = self._cache.get(sizes)
        if hit is not None:
            return hit
        kernels = self.kernels()
        graph = Graph()
        graph.inputs = [(vid, ("arg", i)) for i, (vid, _, _) in enumerate(self.inputs)]
        for node in self.nodes:
            params = {k: evaluate(r, sizes) for k, r in node.params.items()}
            args = [evaluate(r, sizes) for r in node.args]
            if node.kind in _MADE:
                fn = _MADE[node.kind]
                graph.nodes.append(CNode("call", node.kind, fn, [], params, node.outs))
            elif node.kind == "python":
                graph.nodes.append(CNode("call", node.op, node.fn, args, params, node.outs))
            else:
                fn = kernels.get(node.op) if node.kind == "call" else None
                graph.nodes.append(CNode(node.kind, node.op, fn, args, params, node.outs,
                                        node.tuple_out))
        outputs = self.outputs
        if self.backend is not None:
            graph.outputs = _with_grad_flags(self.outputs)
            graph.meta = self._shapes(graph, arrays)
            graph = self.backend(graph, arrays)
            outputs = strip_grad_flags(graph.outputs)  # CSE may have renamed them
        results = sorted(output_values(outputs))
        replay, _ = generate(graph, results)
        # a backend may drop inputs it no longer reads: each keeps its source's position
        take = [src[1] for _, src in graph.inputs]

        def run(arrays):
            return replay([arrays[i] for i in take])

        if len(self._cache) >= 16:
            self._cache.pop(next(iter(self._cache)))
        self._cache[sizes] = (run, results, outputs)
        return run, results, outputs

    def _shapes(self, graph: Graph, arrays: list) -> dict:
        """Every value's (shape, dtype) on these inputs: the graph run once, value by
        value (the backend fuses for the shapes it sees)."""
        plain, _ = generate(Graph(inputs=graph.inputs, nodes=graph.nodes),
                            [v for n in graph.nodes for v in n.outs])
        values = plain(arrays)
        meta = {vid: (tuple(np.shape(a)), np.asarray(a).dtype)
                for (vid, _), a in zip(graph.inputs, arrays)}
        for vid, a in zip([v for n in graph.nodes for v in n.outs], values):
            meta[vid] = (tuple(np.shape(a)), np.asarray(a).dtype)
        return meta

    def run(self, arrays: list, sizes: tuple):
        """The outputs (as arrays, in the returned structure) for the input arrays."""
        run, results, outputs = self.compiled(sizes, arrays)
        values = dict(zip(results, run(arrays)))
        return rebuild(outputs, lambda vid: values[vid])

    def interpret(self, tensors: list, sizes: tuple):
        """Run op by op through torcia's dispatch, so that autograd records the ops and
        the modes entered (a profiler, an exporter) see them."""
        env: dict[int, Tensor] = {vid: t for (vid, _, _), t in zip(self.inputs, tensors)}
        run_nodes(self.nodes, env, sizes)
        return rebuild(self.outputs, env.__getitem__)

    # -- printing -------------------------------------------------------------------------

    def tabular(self, input_names: dict) -> str:
        """The program as a table (``torch.fx.Graph.print_tabular``'s columns)."""
        rows = [("opcode", "name", "target", "args", "shape/dtype", "from")]
        for vid, _, target in self.inputs:
            rows.append(("placeholder", f"v{vid}", input_names.get(vid, str(target)), "",
                         self._meta(vid), ""))
        for node in self.nodes:
            target = node.op if node.kind != "cast" else f"cast:{node.params['dtype'][1]}"
            loc = node.loc.splitlines()[0] if node.loc else ""
            if loc.startswith("File "):
                file, _, rest = loc[5:].partition(", line ")
                loc = f"{file.strip(chr(34)).rsplit('/', 1)[-1]}:{rest.split(',')[0]}"
            rows.append((node.kind if node.kind != "call" else "call_function",
                         ", ".join(f"v{o}" for o in node.outs), target,
                         self._args(node), self._meta(node.outs[0]) if node.outs else "", loc))
        outs = sorted(output_values(self.outputs))
        rows.append(("output", "output", "output", ", ".join(f"v{o}" for o in outs), "", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def code(self, input_names: dict, user: list) -> str:
        """The program as Python-like source (``torch.fx.GraphModule.code``): one line
        per op, sizes written in the dynamic dimensions' names."""
        names = {}
        for vid, kind, target in self.inputs:
            names[vid] = input_names.get(vid, target) if kind == "user" else (
                f"self.{target}" if kind != "constant" else f"self._constants.{target}")

        def fmt(ref):
            kind, what = ref
            if kind == "v":
                return names.get(what, f"v{what}")
            if kind == "l":
                return "[" + ", ".join(fmt(r) for r in what) + "]"
            return _fmt_const(what, self.dim_names)

        lines = [f"def forward(self, {', '.join(user)}):"]
        for node in self.nodes:
            outs = ", ".join(f"v{o}" for o in node.outs) + ("," if node.tuple_out else "")
            if node.kind == "copy_":
                lines.append(f"    {fmt(node.args[0])}.copy_({fmt(node.args[1])})")
                continue
            if node.kind == "cast":
                call = f"{fmt(node.args[0])}.to({np.dtype(node.params['dtype'][1])})"
            else:
                parts = [fmt(r) for r in node.args]
                parts += [f"{k}={fmt(r)}" for k, r in node.params.items()]
                call = f"torcia.ops.{node.op}({', '.join(parts)})"
            lines.append(f"    {outs} = {call}")
        lines.append(f"    return {_fmt_structure(self.outputs, names)}")
        return "\n".join(lines) + "\n"

    def _meta(self, vid) -> str:
        shape, dtype = self.meta.get(vid, (None, None))
        if shape is None:
            return f"[?] {dtype}"
        dims = [s.render(self.dim_names) if isinstance(s, Sym) else str(s) for s in shape]
        return f"[{', '.join(dims)}] {dtype}"

    def _args(self, node) -> str:
        def fmt(ref):
            kind, what = ref
            if kind == "v":
                return f"v{what}"
            if kind == "l":
                return "[" + ", ".join(fmt(r) for r in what) + "]"
            return _fmt_const(what, self.dim_names)

        parts = [fmt(r) for r in node.args]
        parts += [f"{k}={fmt(r)}" for k, r in node.params.items()]
        text = ", ".join(parts)
        return text if len(text) <= 60 else text[:57] + "..."


def run_nodes(nodes: list, env: dict, sizes: tuple) -> None:
    """Run ``nodes`` op by op through torcia's dispatch, reading and writing the tensors
    of ``env`` (value id -> Tensor)."""

    def arg(ref):
        kind, what = ref
        if kind == "v":
            return env[what]
        if kind == "l":
            return [arg(r) for r in what]
        return evaluate(what, sizes)

    for node in nodes:
        if node.kind == "cast":
            env[node.outs[0]] = env[node.args[0][1]].to(
                library.dtype_from_numpy(node.params["dtype"][1]))
        elif node.kind == "copy_":
            env[node.args[0][1]].copy_(env[node.args[1][1]])
        elif node.kind in _MADE:
            params = {k: evaluate(r[1], sizes) for k, r in node.params.items()}
            env[node.outs[0]] = torcia.from_numpy(_MADE[node.kind](**params))
        elif node.kind == "python":
            arrays = [env[r[1]].detach().numpy() for r in node.args]
            env[node.outs[0]] = torcia.from_numpy(np.asarray(node.fn(*arrays)))
        else:
            out = library.call(node.op, tuple(arg(r) for r in node.args),
                               {k: arg(r) for k, r in node.params.items()})
            for vid, o in zip(node.outs, out if node.tuple_out else (out,)):
                env[vid] = o


def _fmt_const(obj, names) -> str:
    if isinstance(obj, Sym):
        return obj.render(names)
    if isinstance(obj, tuple):
        return "(" + ", ".join(_fmt_const(x, names) for x in obj) + ("," if len(obj) == 1
                                                                     else "") + ")"
    if isinstance(obj, np.ndarray):
        return f"<array {list(obj.shape)}>" if obj.ndim else repr(obj.item())
    return repr(obj)


def _fmt_structure(obj, names) -> str:
    tag = obj[0]
    if tag == "v":
        return names.get(obj[1], f"v{obj[1]}")
    if tag == "c":
        return repr(obj[1])
    if tag == "dict":
        return "{" + ", ".join(f"{k!r}: {_fmt_structure(v, names)}"
                               for k, v in obj[1].items()) + "}"
    inner = ", ".join(_fmt_structure(x, names) for x in obj[1])
    return f"({inner}{',' if len(obj[1]) == 1 else ''})" if tag == "tuple" else f"[{inner}]"


def output_values(outputs) -> set:
    found = set()

    def walk(obj):
        if obj[0] == "v":
            found.add(obj[1])
        elif obj[0] in ("tuple", "list"):
            for x in obj[1]:
                walk(x)
        elif obj[0] == "dict":
            for x in obj[1].values():
                walk(x)

    walk(outputs)
    return found


def rebuild(obj, value):
    tag = obj[0]
    if tag == "v":
        return value(obj[1])
    if tag == "c":
        return obj[1]
    if tag == "dict":
        return {k: rebuild(v, value) for k, v in obj[1].items()}
    items = [rebuild(x, value) for x in obj[1]]
    return tuple(items) if tag == "tuple" else items


def _with_grad_flags(obj):
    """A program's output structure in the compiler's form (``("v", id, False)``)."""
    tag = obj[0]
    if tag == "v":
        return ("v", obj[1], False)
    if tag == "c":
        return obj
    if tag == "dict":
        return ("dict", {k: _with_grad_flags(v) for k, v in obj[1].items()})
    return (tag, [_with_grad_flags(x) for x in obj[1]])


def strip_grad_flags(obj):
    """The compiler's output structure (``("v", id, requires_grad)``) without the flags."""
    tag = obj[0]
    if tag == "v":
        return ("v", obj[1])
    if tag == "c":
        return obj
    if tag == "dict":
        return ("dict", {k: strip_grad_flags(v) for k, v in obj[1].items()})
    return (tag, [strip_grad_flags(x) for x in obj[1]])


# ---------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------


class Unencodable(TypeError):
    """A value a saved program cannot hold (a generator, a function)."""


def encode(obj, arrays: dict):
    """``obj`` as JSON, its arrays put in ``arrays`` (name -> array)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, np.bool_):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"$": "float", "v": repr(obj)}
    if isinstance(obj, Sym):
        return {"$": "sym", "v": [[c, list(m)] for c, m in obj.terms]}
    if isinstance(obj, (tuple, list)):
        return {"$": type(obj).__name__, "v": [encode(x, arrays) for x in obj]}
    if isinstance(obj, dict):
        return {"$": "dict", "v": [[encode(k, arrays), encode(v, arrays)]
                                   for k, v in obj.items()]}
    if isinstance(obj, slice):
        return {"$": "slice", "v": [encode(x, arrays) for x in (obj.start, obj.stop,
                                                                 obj.step)]}
    if obj is Ellipsis:
        return {"$": "..."}
    if isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic)):
        return {"$": "npdtype", "v": np.dtype(obj).str, "type": isinstance(obj, type)}
    if isinstance(obj, torcia.dtype):
        return {"$": "dtype", "v": str(obj).removeprefix("torcia.")}
    if isinstance(obj, (np.ndarray, np.generic)):
        name = f"c{len(arrays)}"
        arrays[name] = np.asarray(obj)
        return {"$": "array", "v": name, "scalar": isinstance(obj, np.generic)}
    raise Unencodable(f"a {type(obj).__name__} ({obj!r:.60})")


def decode(obj, arrays: dict):
    if not isinstance(obj, dict):
        return obj
    tag, value = obj["$"], obj.get("v")
    if tag == "float":
        return float(value)
    if tag == "sym":
        return Sym((c, tuple(m)) for c, m in value)
    if tag == "tuple":
        return tuple(decode(x, arrays) for x in value)
    if tag == "list":
        return [decode(x, arrays) for x in value]
    if tag == "dict":
        return {decode(k, arrays): decode(v, arrays) for k, v in value}
    if tag == "slice":
        return slice(*(decode(x, arrays) for x in value))
    if tag == "...":
        return Ellipsis
    if tag == "npdtype":
        return np.dtype(value).type if obj["type"] else np.dtype(value)
    if tag == "dtype":
        return library.dtype_by_name(value)
    if tag == "array":
        arr = arrays[value]
        return arr[()] if obj["scalar"] else arr
    raise ValueError(f"unknown tag {tag!r} in a saved program")


def encode_ref(ref, arrays):
    kind, what = ref[0], ref[1]
    if kind == "v":
        return {"v": what}
    if kind == "l":
        return {"l": [encode_ref(r, arrays) for r in what]}
    return {"c": encode(what, arrays)}


def decode_ref(obj, arrays):
    if "v" in obj:
        return ("v", obj["v"])
    if "l" in obj:
        return ("l", [decode_ref(r, arrays) for r in obj["l"]])
    return ("c", decode(obj["c"], arrays))


def encode_structure(obj, arrays):
    tag = obj[0]
    if tag == "v":
        return {"v": obj[1]}
    if tag == "c":
        return {"c": encode(obj[1], arrays)}
    if tag == "dict":
        return {"dict": [[k, encode_structure(v, arrays)] for k, v in obj[1].items()]}
    return {tag: [encode_structure(x, arrays) for x in obj[1]]}


def decode_structure(obj, arrays):
    (tag, value), = obj.items()
    if tag == "v":
        return ("v", value)
    if tag == "c":
        return ("c", decode(value, arrays))
    if tag == "dict":
        return ("dict", {k: decode_structure(v, arrays) for k, v in value})
    return (tag, [decode_structure(x, arrays) for x in value])


def program_to_json(program: Program, arrays: dict) -> dict:
    steps = [n.op for n in program.nodes if n.kind == "python"]
    if steps:
        raise ValueError(f"the program holds Python steps ({', '.join(sorted(set(steps)))}), "
                         "which a saved program cannot hold: finish it first (convert_pt2e a "
                         "model prepared for quantization)")
    return {
        "nodes": [{"kind": n.kind, "op": n.op,
                   "args": [encode_ref(r, arrays) for r in n.args],
                   "params": {k: encode_ref(r, arrays) for k, r in n.params.items()},
                   "outs": n.outs, "tuple_out": n.tuple_out, "loc": n.loc}
                  for n in program.nodes],
        "inputs": [[vid, kind, target] for vid, kind, target in program.inputs],
        "outputs": encode_structure(program.outputs, arrays),
        "meta": [[vid, None if shape is None else [encode(s, arrays) for s in shape],
                  np.dtype(dtype).str] for vid, (shape, dtype) in program.meta.items()],
        "dim_names": program.dim_names,
        "calls": [{"fqn": c.fqn, "start": c.start, "end": c.end,
                   "args": [encode_ref(r, arrays) for r in c.args],
                   "in_spec": encode(c.in_spec, arrays),
                   "outs": [encode_ref(r, arrays) for r in c.outs],
                   "out_spec": encode(c.out_spec, arrays), "depth": c.depth}
                  for c in program.calls],
        "module_names": program.module_names,
        "preserved": program.preserved,
    }


def program_from_json(data: dict, arrays: dict, constants: dict) -> Program:
    nodes = [Node(n["kind"], n["op"], [decode_ref(r, arrays) for r in n["args"]],
                   {k: decode_ref(r, arrays) for k, r in n["params"].items()},
                   list(n["outs"]), n["tuple_out"], n["loc"]) for n in data["nodes"]]
    meta = {vid: (None if shape is None else tuple(decode(s, arrays) for s in shape),
                  np.dtype(dtype)) for vid, shape, dtype in data["meta"]}
    calls = [ModuleCall(c["fqn"], c["start"], c["end"],
                        [decode_ref(r, arrays) for r in c["args"]],
                        tuples(decode(c["in_spec"], arrays)),
                        [decode_ref(r, arrays) for r in c["outs"]],
                        tuples(decode(c["out_spec"], arrays)), c["depth"])
             for c in data.get("calls", [])]
    return Program(nodes, [tuple(i) for i in data["inputs"]],
                   decode_structure(data["outputs"], arrays), meta, list(data["dim_names"]),
                   constants, calls, list(data.get("module_names", [])),
                   list(data.get("preserved", [])))


def tuples(spec):
    """A decoded structure spec as :func:`~torcia.export._capture.flatten` builds it
    (tuples all the way down)."""
    if isinstance(spec, (list, tuple)):
        return tuple(tuples(x) for x in spec)
    return spec
