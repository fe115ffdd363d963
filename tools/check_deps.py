"""Check the dependencies between torcia's parts.

1. Every requirement on a torcia distribution names one in this repository, is an explicit
   range with a lower and an upper bound (``torcia-core>=0.1,<0.2``), and admits the version
   the repository holds.
2. No part imports another part that it does not list in its dependencies: the modules of
   each part's ``src`` and ``tests`` are read with ``ast`` and every ``import torcia.<x>``
   (or ``from torcia.<x> import ...``, or a plugin's top-level module) is matched with the
   part that ships it. Tests may also import the parts of the ``test`` extra
   (``[project.optional-dependencies] test = ["torcia-autograd>=0.1,<0.2"]``), which
   ``tools/install_parts.py --with-tests`` installs beside the part; the code may import
   the parts of its other extras, the optional features they name (torcia-cuda's
   ``nccl = ["torcia-distributed>=0.1,<0.2"]``), which it must import only where they are
   installed (from the optional part's own hook, or after a guarded import).

3. The arrows of ``architecture.toml`` (the one place the allowed dependencies between
   parts are written) hold: every part is listed there, and each torcia distribution it
   depends on (or uses in an optional feature) is reachable through its arrows.
4. Nothing outside torcia-core imports or reaches into one of core's private modules
   (``torcia._tensor``, ``from torcia import _dtype``, ``torcia._thread_callbacks``),
   nor into the private names of core's modules (``torcia.random._seed_callbacks``,
   ``plugins._state``) or of its Tensor (``t._data``, ``Tensor._make``: the names with one
   leading underscore that ``class Tensor`` defines, its slots included): other parts use
   ``torcia.library`` (``library.array(t)``, the published fields ``t.__torcia_data__``...)
   and the user API.
5. A module named by a string (``importlib.import_module("torcia.nn")``, also an f-string's
   constant head, ``f"torcia.vision.{name}"``) in a part's code is an import like any
   other: rule 2 holds for it, so a part cannot reach a part it may not use by naming it
   (a test may load a sample plugin by name).

Run ``python tools/check_deps.py``; it prints each problem and exits 1 if there is one.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import parts as repo
from packaging.specifiers import InvalidSpecifier, SpecifierSet

_LOWER = {">=", ">", "~=", "=="}
_UPPER = {"<", "<=", "~=", "=="}


def range_problems(part: repo.Part, parts: dict[str, repo.Part]) -> list[str]:
    """What is wrong with ``part``'s requirements on other torcia distributions."""
    problems = []
    for requirement in (part.torcia_requires + part.torcia_feature_requires
                        + part.torcia_test_requires):
        name = repo.requirement_name(requirement)
        where = f"{part.name}: {requirement!r}"
        if name not in parts:
            problems.append(f"{where} names a distribution that is not in this repository")
            continue
        try:
            spec = SpecifierSet(requirement[len(name):].split(";")[0].strip())
        except InvalidSpecifier as exc:
            problems.append(f"{where} cannot be read: {exc}")
            continue
        operators = {s.operator for s in spec}
        if not (operators & _LOWER and operators & _UPPER):
            problems.append(f"{where} needs a lower and an upper bound, e.g. '{name}>=0.1,<0.2'")
        elif not spec.contains(parts[name].version, prereleases=True):
            problems.append(f"{where} excludes {name} {parts[name].version}, the version here")
    return problems


def module_owners(parts: dict[str, repo.Part]) -> dict[str, str]:
    """Top-level import path -> distribution: ``torcia.nn`` -> ``torcia-nn``, ``torcia`` and
    core's own modules -> ``torcia-core``, ``torcia_example`` -> ``torcia-example-plugin``."""
    owners = {}
    for part in parts.values():
        src = part.path / "src"
        for entry in src.glob("*"):
            if entry.name == "torcia":
                if (entry / "__init__.py").exists():
                    owners["torcia"] = part.name
                for sub in entry.iterdir():
                    if sub.name != "__init__.py" and (sub.suffix == ".py" or sub.is_dir()):
                        owners[f"torcia.{sub.name.removesuffix('.py')}"] = part.name
            elif (entry / "__init__.py").exists() or entry.suffix == ".py":
                owners[entry.name.removesuffix(".py")] = part.name
    return owners


_BY_NAME = {"import_module", "__import__"}


def _named_module(node: ast.Call) -> str | None:
    """The module a call of ``import_module``/``__import__`` names by a constant string,
    or by an f-string's constant head up to its last full component; None otherwise."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in _BY_NAME or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if (isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant)
            and "." in arg.values[0].value):
        return arg.values[0].value.rpartition(".")[0]
    return None


def imported_modules(path: Path, by_name: bool = False) -> set[str]:
    """The absolute module names a Python file imports; with ``by_name``, those it
    imports by a string (``importlib.import_module("torcia.nn")``) instead."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if by_name:
            if isinstance(node, ast.Call) and (module := _named_module(node)):
                names.add(module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            # ``from torcia import nn`` imports the part torcia.nn
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def owner_of(module: str, owners: dict[str, str]) -> str | None:
    parts = module.split(".")
    for n in (2, 1):
        owner = owners.get(".".join(parts[:n]))
        if owner is not None:
            return owner
    return None


def import_problems(part: repo.Part, owners: dict[str, str]) -> list[str]:
    """Imports in ``part`` of torcia distributions it does not depend on."""
    deps = {part.name} | {repo.requirement_name(r)
                          for r in part.torcia_requires + part.torcia_feature_requires}
    test_deps = deps | {repo.requirement_name(r) for r in part.torcia_test_requires}
    problems = []
    for folder, allowed, where in (("src", deps, "dependencies or extras"),
                                   ("tests", test_deps, "dependencies or its 'test' extra")):
        for path in sorted((part.path / folder).rglob("*.py")):
            # a test may load a plugin by name from its folder, as a sample of a plugin
            ways = ((False, "imports"),) if folder == "tests" else (
                (False, "imports"), (True, "imports by name"))
            for by_name, how in ways:
                reported = set()
                # sorted, so that ``torcia.nn`` is named rather than ``torcia.nn.Linear``
                for module in sorted(imported_modules(path, by_name)):
                    owner = owner_of(module, owners)
                    if owner is None or owner in allowed or owner in reported:
                        continue
                    reported.add(owner)
                    rel = path.relative_to(part.path.parent.parent)
                    problems.append(
                        f"{rel} {how} {module} from {owner}, which {part.name} does not "
                        f"list in its {where}"
                    )
    return problems


ARCHITECTURE = "architecture.toml"


def load_arrows(root: Path) -> dict[str, dict] | None:
    """``architecture.toml``'s parts table (distribution -> {"uses": [...], "optional":
    [...]}), or None where the repository has no such file."""
    path = root / ARCHITECTURE
    if not path.is_file():
        return None
    return tomllib.loads(path.read_text()).get("parts", {})


def reachable(arrows: dict[str, dict], start: list[str]) -> set[str]:
    """The parts ``start`` names and everything their ``uses`` arrows lead to."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(arrows.get(name, {}).get("uses", []))
    return seen


def arrow_problems(part: repo.Part, arrows: dict[str, dict]) -> list[str]:
    """Dependencies of ``part`` that the arrows of ``architecture.toml`` do not allow."""
    entry = arrows.get(part.name)
    if entry is None:
        return [f"{part.name} is not in {ARCHITECTURE}: add the parts it may use there"]
    allowed = reachable(arrows, entry.get("uses", []))
    optional = allowed | reachable(arrows, entry.get("optional", []))
    problems = []
    for requirements, may, what in ((part.torcia_requires, allowed, "depends on"),
                                    (part.torcia_feature_requires, optional,
                                     "has an optional feature using")):
        for requirement in requirements:
            name = repo.requirement_name(requirement)
            if name not in may:
                problems.append(
                    f"{part.name} {what} {name}, which {ARCHITECTURE} does not allow "
                    f"(allowed: {', '.join(sorted(may)) or 'nothing'})"
                )
    return problems


def _private(module: str) -> bool:
    head = module.split(".")
    return (len(head) > 1 and head[0] == "torcia" and head[1].startswith("_")
            and not head[1].startswith("__"))


def _one_underscore(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# names with one leading underscore that PyTorch's Tensor has as API (``t._version``)
TENSOR_API = {"_version"}


def tensor_private_names(core_src: Path) -> set[str]:
    """The private names of core's ``class Tensor`` (its slots and attributes with one
    leading underscore, but PyTorch's own), read from core's sources."""
    for path in sorted(core_src.rglob("*.py")):
        text = path.read_text()
        if "class Tensor" not in text:
            continue
        for node in ast.parse(text, str(path)).body:
            if isinstance(node, ast.ClassDef) and node.name == "Tensor":
                break
        else:
            continue
        names = set()
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.Assign):
                for target in item.targets:
                    if isinstance(target, ast.Name) and target.id == "__slots__":
                        names.update(e.value for e in ast.walk(item.value)
                                     if isinstance(e, ast.Constant) and isinstance(e.value, str))
                    elif isinstance(target, ast.Name):
                        names.add(target.id)
        return {n for n in names if _one_underscore(n)} - TENSOR_API
    return set()


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def private_uses(path: Path, core_modules: frozenset[str] = frozenset(),
                 tensor_names: frozenset[str] = frozenset()) -> set[str]:
    """The private core names a file imports or reaches: ``torcia._x``, a private name of
    one of ``core_modules`` (``torcia.random._seed_callbacks``, also through a local name
    of the module), a private name of the Tensor (``x._data``; on ``self``/``cls`` only
    inside a subclass of the Tensor)."""
    tree = ast.parse(path.read_text(), str(path))
    found = {".".join(m.split(".")[:2]) for m in imported_modules(path) if _private(m)}
    local = {}  # a local name bound to one of core's modules -> the module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in core_modules:
                    local[alias.asname or alias.name] = full
                elif node.module in core_modules and _one_underscore(alias.name):
                    found.add(full)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in core_modules:
                    local[alias.asname] = alias.name
    on_tensor = _tensor_self_attributes(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _one_underscore(node.attr):
            continue
        owner = _dotted(node.value)
        if owner is not None:
            head, _, rest = owner.partition(".")
            owner = local.get(head, head) + (f".{rest}" if rest else "")
        if owner == "torcia" and _private(f"torcia.{node.attr}"):
            found.add(f"torcia.{node.attr}")
        elif owner in core_modules:
            found.add(f"{owner}.{node.attr}")
        elif node.attr in tensor_names and (owner not in ("self", "cls")
                                            or id(node) in on_tensor):
            found.add(f"Tensor.{node.attr}")
    return found


# the classes whose instances are tensors, by the last name of a base
_TENSOR_CLASSES = {"Tensor", "Parameter", "Buffer"}


def _tensor_self_attributes(tree: ast.AST) -> set[int]:
    """The ids of the ``self.x``/``cls.x`` nodes inside a class that derives from a
    tensor class (``Tensor``, ``nn.Parameter``, or such a class of the same file): there
    ``self._data`` is a Tensor's private field like any other tensor's."""
    tensor_classes, ids = set(_TENSOR_CLASSES), set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        bases = {(_dotted(b) or "").rpartition(".")[2] for b in cls.bases}
        if not bases & tensor_classes:
            continue
        tensor_classes.add(cls.name)
        ids.update(id(n) for n in ast.walk(cls) if isinstance(n, ast.Attribute)
                   and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
    return ids


def core_modules(core: repo.Part | None) -> frozenset[str]:
    """The dotted names of core's modules and packages (``torcia``, ``torcia.random``...)."""
    if core is None:
        return frozenset()
    src = core.path / "src"
    names = set()
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return frozenset(names)


def private_problems(part: repo.Part, core: repo.Part | None) -> list[str]:
    """Uses of core's private modules and names in a part other than core."""
    if core is None or part.name == core.name:
        return []
    modules = core_modules(core)
    tensor_names = frozenset(tensor_private_names(core.path / "src"))
    problems = []
    for folder in ("src", "tests"):
        for path in sorted((part.path / folder).rglob("*.py")):
            for name in sorted(private_uses(path, modules, tensor_names)):
                rel = path.relative_to(part.path.parent.parent)
                problems.append(
                    f"{rel} uses {name}, which is private to torcia-core: use "
                    "torcia.library or the public API"
                )
    return problems


def check(root: Path = repo.ROOT) -> list[str]:
    """Every problem found in the repository at ``root``."""
    parts = repo.discover(root)
    owners = module_owners(parts)
    arrows = load_arrows(root)
    problems = []
    for part in parts.values():
        problems += range_problems(part, parts)
        if arrows is not None:
            problems += arrow_problems(part, arrows)
        problems += import_problems(part, owners)
        problems += private_problems(part, parts.get(owners.get("torcia", "")))
    return problems


def main() -> int:
    problems = check()
    for problem in problems:
        print(problem)
    count = len(repo.discover())
    print(f"check_deps: {count} distributions, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
