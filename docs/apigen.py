"""Generate the API reference from the public names of the installed torcia parts.

``conf.py`` runs :func:`write` before each build, so a name that a part adds to its public
namespace gets a page without anyone editing the docs; ``tests/test_docs_coverage.py``
checks that every public name is planned.

A *part* is an installed distribution named ``torcia-*``. Its root module comes from its
``torcia`` entry point (``torcia.nn._plugin`` gives ``torcia.nn``; ``torcia_lion`` gives
``torcia_lion``); torcia-core's root is ``torcia``. Every module under a root whose dotted
path has no component starting with ``_`` is public. A module's public names are its
``__all__`` where it has one, otherwise the classes, functions and instances of its own
part's classes and
its UPPER_CASE constants bound to a name without a leading underscore. Each object is documented
once, under the shortest public path that reaches it: ``torcia.nn.Module``, not
``torcia.nn.modules.module.Module``.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
import pkgutil
import sys
import types
from pathlib import Path

CORE = "torcia-core"


@dataclasses.dataclass
class Entry:
    """One documented name: its public path and what kind of page it gets."""

    name: str
    kind: str  # "class", "function", "data" or "alias"
    target: str = ""  # for an alias, the name it is another name for


@dataclasses.dataclass
class Module:
    name: str
    entries: list[Entry]


@dataclasses.dataclass
class Part:
    dist: str
    root: str
    summary: str
    modules: list[Module]


def parts() -> list[tuple[str, str]]:
    """The installed parts as ``(distribution, root module)``, core first."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name or not name.startswith("torcia"):
            continue
        if name == CORE:
            found[name] = "torcia"
            continue
        for ep in dist.entry_points:
            if ep.group != "torcia":
                continue
            path = []
            for comp in ep.value.split(":")[0].split("."):
                if comp.startswith("_"):
                    break
                path.append(comp)
            if path and path[0] != "torcia":
                path = path[:1]
            found[name] = ".".join(path)
            break
    return sorted(found.items(), key=lambda item: (item[0] != CORE, item[0]))


def _public_modules(root: str, other_roots: set[str]) -> list[str]:
    mod = importlib.import_module(root)
    names = [root]
    if hasattr(mod, "__path__"):
        for info in pkgutil.walk_packages(mod.__path__, root + ".", onerror=lambda _: None):
            if any(comp.startswith("_") for comp in info.name.split(".")):
                continue
            if any(info.name == r or info.name.startswith(r + ".") for r in other_roots):
                continue
            names.append(info.name)
    return names


def _under(name: str, root: str) -> bool:
    return name == root or name.startswith(root + ".")


def _own(obj, root: str, other_roots: set[str]) -> bool:
    owner = getattr(obj, "__module__", None) or ""
    return _under(owner, root) and not any(_under(owner, r) for r in other_roots)


def public_names(module: types.ModuleType, root: str = "", other_roots=frozenset()) -> dict:
    """The public names of ``module`` and what they are bound to.

    Without ``__all__``, a name counts when what it is bound to was defined in the part
    (under ``root``, outside ``other_roots``): a module's own imports are not its API.
    """
    top = root or module.__name__.split(".")[0]
    declared = getattr(module, "__all__", None)
    out = {}
    for name in declared if declared is not None else sorted(vars(module)):
        if name.startswith("_") or not hasattr(module, name):
            continue
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType):
            continue
        if declared is None:
            if inspect.isclass(obj) or callable(obj):
                if not _own(obj, top, other_roots):
                    continue
            elif not _own(type(obj), top, other_roots) and not name.isupper():
                # a module's own UPPER_CASE constants (torcia.ops.NOT_DIFFERENTIABLE) count
                continue
        out[name] = obj
    return out


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def plan() -> list[Part]:
    """What the reference documents, part by part and module by module."""
    found = parts()
    roots = {root for _, root in found}
    seen: dict[int, str] = {}
    result = []
    for dist, root in found:
        others = {r for r in roots if r != root and r.startswith(root + ".")}
        modules = []
        for modname in _public_modules(root, others):
            try:
                module = importlib.import_module(modname)
            except ImportError:
                # a plugin module that needs its optional library (CuPy, mpi4py)
                continue
            parent, _, last = modname.rpartition(".")
            if parent and getattr(sys.modules.get(parent), last, module) is not module:
                # shadowed by a name of its package (torcia.onnx.export is a function)
                continue
            entries = []
            names = public_names(module, root, others)
            # the name an object calls itself first, so that Tensor, not its alias
            # FloatTensor, gets the page
            order = sorted(names, key=lambda n: getattr(names[n], "__name__", None) != n)
            for name in order:
                obj = names[name]
                path = f"{modname}.{name}"
                kind = _kind(obj)
                if kind != "data" and id(obj) in seen:
                    if seen[id(obj)].rpartition(".")[0] == modname:
                        entries.append(Entry(path, "alias", seen[id(obj)]))
                    # else a re-export, documented where first seen
                    continue
                if kind != "data":
                    seen[id(obj)] = path
                entries.append(Entry(path, kind))
            if entries or modname == root:
                modules.append(Module(modname, entries))
        summary = importlib.metadata.metadata(dist)["Summary"] or ""
        result.append(Part(dist, root, summary, modules))
    return result


def documented_names(parts_: list[Part] | None = None) -> set[str]:
    """Every public path that has a page or an entry in the reference."""
    names = set()
    for part in parts_ if parts_ is not None else plan():
        for module in part.modules:
            names.add(module.name)
            names.update(entry.name for entry in module.entries)
    return names


def _title(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def _object_directive(entry: Entry) -> list[str]:
    short = entry.name.rsplit(".", 1)[1]
    if entry.kind == "class":
        return [f".. autoclass:: {short}", "   :members:", "   :undoc-members:",
                "   :show-inheritance:", "   :special-members: __call__", ""]
    if entry.kind == "function":
        return [f".. autofunction:: {short}", ""]
    if entry.kind == "alias":
        return [f".. py:data:: {short}", "", f"   Another name for :obj:`{entry.target}`.", ""]
    module_name = entry.name.rsplit(".", 1)[0]
    value = getattr(sys.modules[module_name], short)
    text = repr(value)
    if len(text) > 80 or "\n" in text:
        # a table (torcia.autograd.derivatives.TABLE) is summarised by its type
        return [f".. py:data:: {short}", f"   :type: {type(value).__name__}", ""]
    return [f".. py:data:: {short}", f"   :value: {text}", ""]


def _module_section(module: Module) -> str:
    lines = [_title(module.name, "-"), f".. automodule:: {module.name}", "   :no-members:", ""]
    if module.entries:
        # links only: autosummary's one-line summaries cut docstrings at the first period,
        # which breaks any ``literal`` that holds one
        lines += [".. hlist::", "   :columns: 3", ""]
        lines += [f"   * :obj:`~{e.name}`" for e in module.entries]
        lines.append("")
    for entry in module.entries:
        lines += _object_directive(entry)
    return "\n".join(lines) + "\n"


def write(outdir: Path) -> list[Part]:
    """Write ``outdir/index.rst`` and a page per part: each public module of the part in a
    section, with a summary table and every class, function and value under its public path.

    A page whose text is unchanged is left alone, so an incremental build rereads nothing.
    (One page per part rather than per name: the theme renders the whole navigation into
    every page, and a thousand pages took this 2-core machine minutes.)
    """
    parts_ = plan()
    outdir.mkdir(parents=True, exist_ok=True)
    toc = []
    for part in parts_:
        page = part.dist.removeprefix("torcia-")
        toc.append(page)
        text = _title(part.dist, "=") + "\n"
        if part.summary:
            text += part.summary.rstrip(".") + ". "
        text += f"``pip install {part.dist}``; its public namespace is ``{part.root}``.\n\n"
        text += "".join(_module_section(m) for m in part.modules)
        _write_if_changed(outdir / f"{page}.rst", text)
    pages = {outdir / f"{p}.rst" for p in toc} | {outdir / "index.rst"}
    for stale in set(outdir.glob("*.rst")) - pages:
        stale.unlink()
    index = _title("API reference", "=") + (
        "\nOne page per installed part (a distribution named ``torcia-*``), generated at build "
        "time from its public names: core first, then the other packages and the plugins. "
        "Every class, function and value appears under its public path "
        "(``torcia.nn.Module``, ``torcia.Tensor.add``).\n\n"
        ".. toctree::\n   :maxdepth: 1\n\n"
    )
    index += "".join(f"   {page}\n" for page in toc)
    _write_if_changed(outdir / "index.rst", index)
    _write_if_changed(outdir / "hooks.inc", _hook_reference(parts_))
    return parts_


def _hook_reference(parts_: list[Part]) -> str:
    """A list of every installed part's hooks, for the plugin notes to include."""
    lines = []
    for part in parts_:
        for module in part.modules:
            if module.name.rsplit(".", 1)[-1] != "hookspecs":
                continue
            hooks = ", ".join(f":func:`~{e.name}`" for e in module.entries if e.kind == "function")
            lines.append(f"- {part.dist} (:mod:`{module.name}`): {hooks}")
    return "\n".join(lines) + "\n"


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
