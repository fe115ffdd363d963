"""The repository's distributions: every ``packages/*`` and ``plugins/*`` folder that has a
``pyproject.toml``, with its name, version and the torcia distributions it depends on.

Standard library only, so that the tools built on it run with a bare Python 3.11.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ("packages", "plugins")

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requirement_name(requirement: str) -> str:
    """The normalized distribution name a PEP 508 requirement string starts with."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


@dataclasses.dataclass
class Part:
    """One distribution of the repository."""

    name: str  # the distribution name, e.g. "torcia-nn"
    version: str
    path: Path  # its folder, e.g. ROOT / "packages" / "nn"
    requires: list[str]  # every requirement string of [project].dependencies
    test_requires: list[str]  # the "test" extra: what the part's tests need beyond it
    build_requires: list[str]
    build_backend: str
    # the other extras: optional features, e.g. torcia-cuda's "nccl" = torcia-distributed
    feature_requires: list[str] = dataclasses.field(default_factory=list)

    @property
    def short(self) -> str:
        """The folder name, e.g. ``nn`` or ``cpu``."""
        return self.path.name

    @property
    def torcia_requires(self) -> list[str]:
        """The requirement strings on other torcia distributions."""
        return _torcia(self.requires)

    @property
    def torcia_feature_requires(self) -> list[str]:
        """The torcia distributions the part's optional features use (its extras other
        than ``test``): imported only when installed, e.g. from a hook of theirs."""
        return _torcia(self.feature_requires)

    @property
    def torcia_test_requires(self) -> list[str]:
        """The torcia distributions the part's tests need beyond its dependencies (declared
        in its ``test`` extra, e.g. torcia-autograd to gradcheck a plugin's kernels)."""
        return _torcia(self.test_requires)

    @property
    def other_test_requires(self) -> list[str]:
        """The rest of the ``test`` extra: third-party requirements of the part's tests
        (``mpich`` for torcia-mpi's ``mpiexec``, ``onnxruntime`` for torcia-onnx's)."""
        return [r for r in self.test_requires if r not in self.torcia_test_requires]


def _torcia(requirements: list[str]) -> list[str]:
    return [r for r in requirements if requirement_name(r).startswith("torcia")]


def discover(root: Path = ROOT) -> dict[str, Part]:
    """Every distribution under ``root``'s families, by distribution name."""
    parts = {}
    for family in FAMILIES:
        for pyproject in sorted((root / family).glob("*/pyproject.toml")):
            data = tomllib.loads(pyproject.read_text())
            project, build = data["project"], data.get("build-system", {})
            extras = project.get("optional-dependencies", {})
            part = Part(
                name=requirement_name(project["name"]),
                version=project["version"],
                path=pyproject.parent,
                requires=list(project.get("dependencies", [])),
                test_requires=list(extras.get("test", [])),
                feature_requires=[r for name, reqs in extras.items() if name != "test"
                                  for r in reqs],
                build_requires=list(build.get("requires", [])),
                build_backend=build.get("build-backend", "setuptools.build_meta:__legacy__"),
            )
            parts[part.name] = part
    return parts


def lookup(parts: dict[str, Part], key: str) -> list[Part]:
    """The parts a command-line name means: a distribution (``torcia-nn``), a folder name
    (``nn``), a path (``packages/nn``), or a whole family (``packages``, ``plugins``)."""
    if key in FAMILIES:
        return [p for p in parts.values() if p.path.parent.name == key]
    path = (Path.cwd() / key).resolve()
    found = [
        p for p in parts.values()
        if key in (p.name, p.short) or requirement_name(key) == p.name or p.path == path
    ]
    if len(found) != 1:
        known = ", ".join(sorted(p.short for p in parts.values()))
        what = "is ambiguous" if found else "is not a part of this repository"
        raise SystemExit(f"{key!r} {what}; parts: {known}")
    return found


def has_source(part: Part) -> bool:
    """Whether the part has any Python source yet (a declared part may not)."""
    return any((part.path / "src").rglob("*.py"))


def has(parts: dict[str, Part], key: str) -> bool:
    """Whether ``key`` names a part of this checkout (see :func:`lookup`)."""
    try:
        lookup(parts, key)
    except SystemExit:
        return False
    return True


def closure(parts: dict[str, Part], selected: list[Part], tests=False) -> list[Part]:
    """``selected`` and every torcia distribution they need, each after its dependencies;
    with ``tests``, also what the tests of ``selected`` need."""
    if tests:
        wanted = {requirement_name(r) for part in selected for r in part.torcia_test_requires}
        selected = selected + [parts[name] for name in sorted(wanted) if name in parts]
    order: list[Part] = []
    visiting: set[str] = set()

    def visit(part: Part) -> None:
        if part in order:
            return
        if part.name in visiting:
            raise SystemExit(f"dependency cycle through {part.name}")
        visiting.add(part.name)
        for requirement in part.torcia_requires:
            name = requirement_name(requirement)
            if name not in parts:
                raise SystemExit(f"{part.name} requires {name}, which is not in this repository")
            visit(parts[name])
        visiting.discard(part.name)
        order.append(part)

    for part in selected:
        visit(part)
    return order



def copy_sources(selected: list[Part], into: Path) -> dict[str, Path]:
    """Copies of the ``selected`` parts' folders in ``into``, by distribution name.

    A setuptools build writes ``build/`` and ``*.egg-info`` into the folder it builds;
    built from copies, a checkout keeps no metadata that another environment, whose
    editable installs put the parts' source folders on ``sys.path``, would find as a
    second installed copy of each part.
    """
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    return {p.name: Path(shutil.copytree(p.path, into / p.path.name, ignore=ignore))
            for p in selected}
