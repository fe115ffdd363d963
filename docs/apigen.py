"""Generate the API reference from the public names of the installed torcia parts.

``conf.py`` runs :func:`write` before each build, so a name that a part adds to its public
namespace gets a page without anyone editing the docs; ``tests/test_docs_coverage.py``
checks the written reference against the public names of the installed parts.

The pages are lean ``.rst`` stubs written here, one autodoc directive each, rather than
autosummary's generated ones: a page per part with a table of its modules' names, a page
per class and function (and per member of ``torcia.Tensor``, as PyTorch's reference has),
and the values and aliases on their part's page.

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
import re
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


def installed() -> dict[str, importlib.metadata.Distribution]:
    """The installed torcia distributions by name, each once.

    ``importlib.metadata.distributions()`` yields one entry per metadata folder on
    ``sys.path``: a ``*.egg-info`` left in a part's source folder by a build, on the path of
    an editable install, is a second entry for the same part. As ``entry_points()`` and the
    import system do, the first one on the path is the installed one.
    """
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.startswith("torcia"):
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), dist)
    return found


def parts() -> list[tuple[str, str]]:
    """The installed parts as ``(distribution, root module)``, core first."""
    found = {}
    for dist in installed().values():
        name = dist.metadata["Name"]
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
    # dir(), not vars(): a module may bind some names on first use (torcia.save)
    for name in declared if declared is not None else sorted(dir(module)):
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


#: Modules that re-export other modules' objects for plugin authors: an object they share
#: with another public module is documented there (``torcia.Tensor``, not
#: ``torcia.library.Tensor``), and here only what they alone make public.
LAST = ("torcia.library",)


def _entries(module, modname: str, root: str, others: set[str], seen: dict) -> list[Entry]:
    entries = []
    names = public_names(module, root, others)
    # the name an object calls itself first, so that Tensor, not its alias FloatTensor,
    # gets the page
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
    return entries


def plan() -> list[Part]:
    """What the reference documents, part by part and module by module."""
    found = parts()
    roots = {root for _, root in found}
    modules_of = []
    for _dist, root in found:
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
            modules.append((modname, module))
        modules_of.append((root, others, modules))
    seen: dict[int, str] = {}
    entries = {}
    order = [(root, others, name, module) for root, others, modules in modules_of
             for name, module in modules]
    for root, others, name, module in sorted(order, key=lambda m: m[2] in LAST):
        entries[name] = _entries(module, name, root, others, seen)
    result = []
    for (dist, root), (_, _, modules) in zip(found, modules_of, strict=True):
        kept = [Module(name, entries[name]) for name, _ in modules
                if entries[name] or name == root]
        summary = importlib.metadata.metadata(dist)["Summary"] or ""
        result.append(Part(dist, root, summary, kept))
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
    # a trailing underscore (torcia.abs_) would make the title a hyperlink reference
    text = text.replace("_", "\\_")
    return f"{text}\n{char * len(text)}\n"


#: Classes whose members each get a page, as PyTorch's reference gives ``torch.Tensor.add``
#: one; any other class documents its members on its own page.
SPLIT_CLASSES = ("torcia.Tensor",)


def _resolve(path: str):
    owner, _, short = path.rpartition(".")
    return getattr(importlib.import_module(owner), short)


def class_members(path: str) -> list[tuple[str, str]]:
    """The public members of the class at ``path`` as ``(name, directive)``, in source order:
    what a page per member documents."""
    out = []
    for name, value in vars(_resolve(path)).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            out.append((name, "autoproperty"))
        elif callable(value) or isinstance(value, (classmethod, staticmethod)):
            out.append((name, "automethod"))
        else:
            out.append((name, "autoattribute"))
    return out


def _summary(obj) -> str:
    """The first paragraph of ``obj``'s docstring, as one line of reStructuredText that
    stands alone in a table cell ("" where it would not)."""
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, property):
        doc = inspect.getdoc(obj.fget) or ""
    lines = []
    for line in doc.strip().splitlines():
        if not line.strip():
            break
        lines.append(line.strip())
    text = " ".join(lines)
    # outside literals, a | starts a substitution and ]_ ends a footnote reference: neither
    # resolves out of the docstring
    bare = re.sub(r"``.*?``", "", text)
    if text.startswith((".. ", ">>>", "::")) or "|" in bare or "]_" in bare:
        return ""
    if text.endswith("::"):
        text = text[:-1]
    return text


def _table(rows: list[tuple[str, str]]) -> list[str]:
    """A two-column table: a link to each name's page and its docstring's first paragraph."""
    lines = [".. list-table::", "   :widths: 30 70", ""]
    for link, summary in rows:
        lines += [f"   * - {link}", f"     - {summary}" if summary else "     -"]
    return lines + [""]


def _data_directive(entry: Entry) -> list[str]:
    short = entry.name.rsplit(".", 1)[1]
    if entry.kind == "alias":
        return [f".. py:data:: {short}", "", f"   Another name for :obj:`{entry.target}`.", ""]
    module_name = entry.name.rsplit(".", 1)[0]
    value = getattr(sys.modules[module_name], short)
    text = repr(value)
    if len(text) > 80 or "\n" in text:
        # a table (torcia.autograd.derivatives.TABLE) is summarised by its type
        return [f".. py:data:: {short}", f"   :type: {type(value).__name__}", ""]
    return [f".. py:data:: {short}", f"   :value: {text}", ""]


def page_name(path: str) -> str:
    """The document of the page of the class or function at public ``path``."""
    return f"generated/{path}"


def _name_page(entry: Entry) -> str:
    """The page of one class or function: its signature and docstring under its public
    path; a split class's page lists its members, each on a page of its own."""
    module, _, short = entry.name.rpartition(".")
    lines = [":orphan:", "", _title(entry.name, "="), f".. currentmodule:: {module}", ""]
    if entry.kind == "function":
        return "\n".join([*lines, f".. autofunction:: {short}", ""])
    options = ["   :show-inheritance:", "   :special-members: __call__"]
    if entry.name in SPLIT_CLASSES:
        cls = _resolve(entry.name)
        lines += [f".. autoclass:: {short}", *options, "", _title("Members", "-")]
        rows = [(f":obj:`~{entry.name}.{name}`", _summary(vars(cls)[name]))
                for name, _ in class_members(entry.name)]
        return "\n".join([*lines, *_table(rows)])
    return "\n".join([*lines, f".. autoclass:: {short}", "   :members:", "   :undoc-members:",
                      *options, ""])


def _member_page(cls_path: str, name: str, directive: str) -> str:
    module, _, cls = cls_path.rpartition(".")
    return "\n".join([":orphan:", "", _title(f"{cls_path}.{name}", "="),
                      f".. currentmodule:: {module}", "", f".. {directive}:: {cls}.{name}", ""])


def _module_section(module: Module) -> str:
    lines = [_title(module.name, "-"), f".. automodule:: {module.name}", "   :no-members:", ""]
    paged = [e for e in module.entries if e.kind in ("class", "function")]
    grouped = [e for e in module.entries if e.kind not in ("class", "function")]
    if paged:
        rows = [(f":obj:`~{e.name}`", _summary(_resolve(e.name))) for e in paged]
        lines += _table(rows)
    # values and aliases are a line each: documented here rather than on pages of their own
    for entry in grouped:
        lines += _data_directive(entry)
    return "\n".join(lines) + "\n"


def pages(parts_: list[Part]) -> dict[str, str]:
    """Every page of the reference, as ``{document name: reStructuredText}``."""
    out = {}
    toc = []
    for part in parts_:
        page = part.dist.removeprefix("torcia-")
        toc.append(page)
        text = _title(part.dist, "=") + "\n"
        if part.summary:
            text += part.summary.rstrip(".") + ". "
        text += f"``pip install {part.dist}``; its public namespace is ``{part.root}``.\n\n"
        text += "".join(_module_section(m) for m in part.modules)
        out[page] = text
        for module in part.modules:
            for entry in module.entries:
                if entry.kind not in ("class", "function"):
                    continue
                out[page_name(entry.name)] = _name_page(entry)
                if entry.name in SPLIT_CLASSES:
                    for name, directive in class_members(entry.name):
                        out[page_name(f"{entry.name}.{name}")] = _member_page(
                            entry.name, name, directive)
    out["index"] = _title("API reference", "=") + (
        "\nOne page per installed part (a distribution named ``torcia-*``), generated at "
        "build time from its public names: core first, then the other packages and the "
        "plugins. Each part's page lists its modules, and every class and function has a page "
        "of its own under its public path (``torcia.nn.Module``, ``torcia.zeros``, and each "
        "member of ``torcia.Tensor``, such as ``torcia.Tensor.add``); values and aliases are "
        "documented on the part's page.\n\n"
        ".. toctree::\n   :maxdepth: 1\n\n"
    ) + "".join(f"   {page}\n" for page in toc)
    return out


def write(outdir: Path) -> list[Part]:
    """Write the reference into ``outdir``: ``index.rst``, a page per part (each public
    module of the part in a section, with a table linking to the pages of its names) and,
    under ``generated/``, a page per class and function.

    The name pages are orphans, outside any toctree: the theme renders the navigation tree
    into every page, and with two thousand pages in it that rendering dominated the build.
    A page whose text is unchanged is left alone, so an incremental build rereads nothing.
    """
    parts_ = plan()
    written = set()
    for doc, text in pages(parts_).items():
        path = outdir / f"{doc}.rst"
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_if_changed(path, text)
        written.add(path)
    for stale in {*outdir.glob("*.rst"), *outdir.glob("generated/*.rst")} - written:
        stale.unlink()
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
