"""Measure how torcia-core is laid out: the figures issue #35 asks to drive down.

Prints, for the checkout:

- import circles among core's modules (every import counted, function-local ones too: a
  local import that breaks a circle at import time still ties the two modules together);
- upward imports: a module of one of core's layers (:data:`LAYERS`) importing a module of a
  layer above it, or any module of core importing :mod:`torcia.library`, the facade;
- the modules of core in no layer (the upward check does not see them);
- function-local imports in core;
- uses of core objects' private fields (a Tensor's ``_data``, ``_vc``...) outside core;
- source files over 1,500 lines;
- the op records: how many, how many are primitives;
- for each op, the source files that declare something of it: a ``def`` of its name or its
  name as a string (the keys of name-keyed tables: kernels, shapes, derivatives, vmap,
  compiler and ONNX rules), in every part, and in torcia-core alone (``core_files_*``: the
  issue's "one core file" per op; the other parts' rule files are allowed); counted on the
  text, and again on the code alone (``declaring_*``: a docstring's example or a comment
  that names an op declares nothing of it).

Standard library only; ``--json`` prints the figures as JSON, ``--check`` exits 1 where a
figure is over the limit given for it (``--max NAME=N``), so CI can hold a figure once it
is down.

    python tools/core_layout.py
    python tools/core_layout.py --check --max circles=0 --max local_imports=10
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "packages" / "core" / "src" / "torcia"
# a Tensor's private slots: what other parts reach into when they bypass torcia.library
PRIVATE_FIELDS = {"_data", "_device", "_requires_grad", "_grad", "_vc", "_base", "_out_nr",
                  "_hooks", "_retains_grad"}
LONG_FILE = 1500
#: Core's layers, bottom first (docs/architecture.rst): a module imports from its own layer
#: and those below, never from one above; each layer is named by module prefixes. The
#: package ``torcia`` itself (its ``__init__``, :data:`PACKAGE`) gathers the public API and
#: is named alone, not as a prefix: a module below it reaches the public functions through
#: what the package hands down (``_opdef.PUBLIC``, ``_foreach.namespace``); a module above
#: it imports it: the services, the command line (``__main__``), ``version``, and the
#: tensor subclasses ``masked`` and ``nested``, which call the public functions as a user
#: does (through ``__torch_function__`` once dispatch is on). A module none names is held
#: to one rule only: :mod:`torcia.library`, the facade over all of core, is imported by no
#: module of core.
LAYERS = (
    ("_core", ("torcia._dtype", "torcia._grad_mode", "torcia._mode_order", "torcia._opdef",
               "torcia._policy", "torcia._print", "torcia._size", "torcia._switches",
               "torcia._tensor", "torcia._storage", "torcia._dlpack", "torcia._shared_memory",
               "torcia._wrapped", "torcia._legacy", "torcia._autocast", "torcia._autograd_mode",
               "torcia.backend", "torcia.plugins", "torcia.hookspecs", "torcia.ops",
               "torcia.random", "torcia.utils.hooks", "torcia.utils",
               "torcia._ops")),
    ("ops", ("torcia._oplib", "torcia._creation", "torcia._kernels_", "torcia._numpy_backend",
             "torcia._meta", "torcia._decompositions",
             "torcia._custom_ops", "torcia._sparse", "torcia._oprecords")),
    ("public API", ("torcia.linalg", "torcia.fft", "torcia.special", "torcia.sparse",
                    "torcia.signal", "torcia.overrides", "torcia.accelerator", "torcia.cpu",
                    "torcia._methods", "torcia.backends", "torcia.multiprocessing",
                    "torcia.futures", "torcia.utils.pytree", "torcia.utils.dlpack",
                    "torcia._foreach")),
    ("package", ("torcia",)),
    ("services", ("torcia.serialization", "torcia.hub", "torcia.amp", "torcia.profiler",
                  "torcia.compat", "torcia.testing", "torcia.utils.safetensors",
                  "torcia.utils.benchmark", "torcia.utils.tensorboard", "torcia.cuda",
                  "torcia.masked", "torcia.nested", "torcia.version", "torcia.__main__")),
    ("facade", ("torcia.library",)),
)
FACADE = "torcia.library"
PACKAGE = "torcia"


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "tests" not in p.parts)


def _module_name(path: Path) -> str:
    rel = path.relative_to(CORE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool, modules):
    """(imported modules, inside a function, line) for each import statement of ``tree``.

    ``from pkg import sub`` imports the submodule ``pkg.sub``, not what ``pkg/__init__.py``
    defines, so it counts as an edge to ``pkg.sub`` alone; ``pkg`` is a target only where a
    name imported from it is not a submodule."""
    package = module if is_package else module.rpartition(".")[0]

    def walk(node, local):
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda))
            if isinstance(child, ast.Import):
                yield [alias.name for alias in child.names], inner, child.lineno
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                subs = [f"{base}.{alias.name}" for alias in child.names]
                targets = [t for t in subs if t in modules]
                if len(targets) < len(subs):
                    targets.append(base)
                yield targets, inner, child.lineno
            yield from walk(child, inner)

    yield from walk(tree, False)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def core_imports() -> tuple[dict[str, set[str]], list[str]]:
    """The import graph among core's modules, and each function-local import's place: one
    per module and target, however many functions of the module import it."""
    modules = {_module_name(p): p for p in _sources(CORE)}
    # C extensions (torcia._speedups) are submodules too: ``from torcia import _speedups``
    # loads the extension, not what the package's __init__ imports; they import no module
    # of core, so they are known names without edges
    known = set(modules) | {_module_name(p) for p in CORE.rglob("*.c")}
    graph, local = {}, set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = set()
        for targets, inside, _line in _imports(tree, name, path.name == "__init__.py", known):
            inner = sorted(t for t in targets if t in modules and t != name)
            edges.update(inner)
            if inside:
                local.update(f"{path.relative_to(ROOT)}: {t}" for t in inner)
        graph[name] = edges
    return graph, sorted(local)


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module``'s layer (the longest prefix naming it),
    or None."""
    best, found = -1, None
    for i, (_name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if len(prefix) > best and (module == prefix or prefix != PACKAGE
                                       and module.startswith(prefix)
                                       and (prefix.endswith("_")
                                            or module[len(prefix)] == ".")):
                best, found = len(prefix), i
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of core that runs against the layers: ``module (layer) -> target
    (layer)``."""
    def name(layer):
        return LAYERS[layer][0] if layer is not None else "no layer"

    out = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module)
        for target in sorted(targets):
            there = layer_of(target)
            if target == FACADE and module != FACADE or (
                    here is not None and there is not None and there > here):
                out.append(f"{module} ({name(here)}) -> {target} ({name(there)})")
    return out


def unlayered(graph: dict[str, set[str]]) -> list[str]:
    """The modules of core that no layer names: only the facade rule holds for them."""
    return sorted(m for m in graph if layer_of(m) is None)


def private_field_uses() -> list[str]:
    """``obj._field`` for a Tensor's private fields in every part and plugin except core."""
    uses = []
    for family in ("packages", "plugins"):
        for src in sorted((ROOT / family).glob("*/src")):
            if src.parent.name == "core" and family == "packages":
                continue
            for path in _sources(src):
                tree = ast.parse(path.read_text(), str(path))
                for node in ast.walk(tree):
                    if (isinstance(node, ast.Attribute) and node.attr in PRIVATE_FIELDS
                            and not (isinstance(node.value, ast.Name)
                                     and node.value.id in ("self", "cls"))):
                        uses.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    return uses


def long_files() -> list[str]:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    out = []
    for rel in tracked:
        path = ROOT / rel
        if path.exists():
            n = len(path.read_text(errors="replace").splitlines())
            if n > LONG_FILE:
                out.append(f"{rel}: {n}")
    return out


def _declaring(tree: ast.AST) -> set[str]:
    """The names a module's code (not its docstrings or comments) could declare an op by:
    those of its functions and its string constants (a table's keys and entries, a
    declaration's name, a call by name)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings):
            names.add(node.value)
    return names


def ops() -> tuple[int, int, dict[str, int], dict[str, int], dict[str, int], dict[str, int]]:
    """(op records, primitives, {op: source files that mention it}, the same in torcia-core
    only, {op: source files that declare something of it}, the same in torcia-core only);
    needs torcia importable.

    A mention is ``def NAME`` or ``"NAME"`` anywhere in the text, docstrings and comments
    included (the first measure, kept for comparison); a declaration is a function named
    NAME or the string constant NAME in the code: a doctest of a docstring or a comment
    that names an op declares nothing of it."""
    import torcia.library as library

    records = library.op_records()
    paths = [p for family in ("packages", "plugins")
             for src in sorted((ROOT / family).glob("*/src")) for p in _sources(src)]
    sources = [(p.is_relative_to(CORE), p.read_text(), p) for p in paths]
    declared_in = [(core, _declaring(ast.parse(text, str(p)))) for core, text, p in sources]
    touched, in_core, declaring, declaring_core = {}, {}, {}, {}
    for name in records:
        n = re.escape(name)
        mention = re.compile(rf"""def {n}\b|["']{n}["']""")
        found = [core for core, text, _ in sources if mention.search(text)]
        touched[name], in_core[name] = len(found), sum(found)
        found = [core for core, names in declared_in if name in names]
        declaring[name], declaring_core[name] = len(found), sum(found)
    return (len(records), len(library.primitives()), touched, in_core, declaring,
            declaring_core)


def figures() -> dict:
    graph, local = core_imports()
    circles = _circles(graph)
    n_ops, n_prims, touched, in_core, declaring, declaring_core = ops()
    worst = sorted(touched.items(), key=lambda kv: -kv[1])[:5]
    worst_core = sorted(declaring_core.items(), key=lambda kv: -kv[1])[:5]
    return {
        "circles": len(circles),
        "largest_circle": len(circles[0]) if circles else 0,
        "upward_imports": len(upward_imports(graph)),
        "unlayered_modules": len(unlayered(graph)),
        "local_imports": len(local),
        "private_field_uses": len(private_field_uses()),
        "long_files": len(long_files()),
        "ops": n_ops,
        "primitives": n_prims,
        "files_per_op_median": statistics.median(touched.values()) if touched else 0,
        "files_per_op_max": max(touched.values(), default=0),
        "files_of_softplus": touched.get("softplus", 0),
        "core_files_per_op_median": statistics.median(in_core.values()) if in_core else 0,
        "core_files_per_op_max": max(in_core.values(), default=0),
        "core_files_of_softplus": in_core.get("softplus", 0),
        "most_spread_ops": dict(worst),
        "declaring_files_per_op_median": statistics.median(declaring.values()) if declaring
        else 0,
        "declaring_core_files_per_op_median": statistics.median(declaring_core.values())
        if declaring_core else 0,
        "declaring_core_files_per_op_max": max(declaring_core.values(), default=0),
        "declaring_core_files_of_softplus": declaring_core.get("softplus", 0),
        "most_spread_ops_in_core": dict(worst_core),
        "core_files": len(_sources(CORE)),
        "core_lines": sum(len(p.read_text().splitlines()) for p in _sources(CORE)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 where a figure is over its --max")
    parser.add_argument("--max", action="append", default=[], metavar="NAME=N",
                        help="the limit of a figure for --check, e.g. circles=0")
    parser.add_argument("--list", choices=("circles", "upward_imports", "unlayered_modules",
                                           "local_imports", "private_field_uses",
                                           "long_files"),
                        help="list the places behind one figure")
    args = parser.parse_args(argv)
    if args.list:
        graph, local = core_imports()
        places = {"circles": lambda: [" ".join(c) for c in _circles(graph)],
                  "upward_imports": lambda: upward_imports(graph),
                  "unlayered_modules": lambda: unlayered(graph),
                  "local_imports": lambda: local, "private_field_uses": private_field_uses,
                  "long_files": long_files}[args.list]()
        print("\n".join(places))
        return 0
    found = figures()
    if args.json:
        print(json.dumps(found, indent=2))
    else:
        width = max(map(len, found))
        for key, value in found.items():
            print(f"{key:<{width}}  {value}")
    over = []
    for limit in args.max:
        key, _, value = limit.partition("=")
        if key not in found:
            raise SystemExit(f"--max {limit}: no figure named {key!r}")
        if found[key] > float(value):
            over.append(f"{key} is {found[key]}, at most {value} allowed")
    if args.check and over:
        print("\n".join(over), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
