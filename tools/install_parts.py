"""Install torcia parts from this checkout, each with the torcia parts it depends on.

The parts are not on a package index, so pip must be given the local folder of every torcia
distribution a part needs; this tool reads each part's ``pyproject.toml`` to find them and
hands pip one command. Third-party dependencies (numpy, pluggy, pillow...) come from the
index or the pip cache as usual.

Examples
--------
Install torcia-nn into the running Python, with torcia-core and torcia-autograd::

    python tools/install_parts.py nn

Every package, and the C++ plugin where the checkout has it::

    python tools/install_parts.py packages --optional cpu

Every package and plugin, editable, into another environment::

    python tools/install_parts.py --editable --python .venv-test/bin/python packages plugins

Nothing is written into the checkout. A plain install builds each part from a temporary copy
of its folder, and the target environment gets the parts and their dependencies, nothing
else: a part whose build requirements (setuptools) the environment already has is built
there without build isolation, which is quick; the others are built in pip's isolated build
environment, so no build tool is installed as a side effect (``--isolated`` isolates every
build). An editable install must build the folder itself, and setuptools, built in pip's
isolated environment, leaves the part's ``*.egg-info`` there, on the ``sys.path`` of every
environment that installs the checkout editable, where it reads as a second copy of the
part; so editable parts built with setuptools are always built in the target environment,
which gets setuptools first if it lacks it.

``--link`` installs without pip, for a machine with no package index and no build
backend (a GPU machine off the network, ``tools/gpu_check``): each pure-Python part gets
its metadata (name, version, requirements, entry points) in the environment's
``site-packages`` and its ``src`` folder on ``sys.path`` through one ``.pth`` file, as an
editable install would. Third-party requirements are not installed, only listed::

    python tools/install_parts.py --link --python .venv-gpu/bin/python packages cuda
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import parts as repo


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def satisfied(python, requirements) -> set[str]:
    """The normalised names of those ``requirements`` that ``python``'s environment meets,
    version included: a venv's bundled setuptools 65 is present but cannot build a
    pyproject with a PEP 639 license string, which needs setuptools 77."""
    script = (
        "import importlib.metadata as m, json, sys\n"
        "try:\n    from packaging.requirements import Requirement\n"
        "except ImportError:\n    from pip._vendor.packaging.requirements import Requirement\n"
        "ok = []\n"
        "for text in json.loads(sys.argv[1]):\n"
        "    r = Requirement(text)\n"
        "    try:\n        version = m.version(r.name)\n"
        "    except m.PackageNotFoundError:\n        continue\n"
        "    if r.specifier.contains(version, prereleases=True):\n        ok.append(text)\n"
        "print(json.dumps(ok))\n")
    out = subprocess.run([python, "-c", script, json.dumps(sorted(requirements))],
                         capture_output=True, text=True, check=True)
    return {_name(r) for r in json.loads(out.stdout)}


def _split_extras(key: str) -> tuple[str, str]:
    """``cpu[mkl]`` -> ``("cpu", "mkl")``; ``nn`` -> ``("nn", "")``."""
    match = re.fullmatch(r"([^\[\]]+)(?:\[([\w,\s-]*)\])?", key)
    if match is None:
        raise SystemExit(f"{key!r}: expected a part, optionally with extras in brackets")
    return match.group(1), (match.group(2) or "").replace(" ", "")


def pip_commands(selected, python, editable=False, isolated=False, pip_args=(),
                 present=frozenset(), extras=None, sources=None) -> list[list]:
    """The pip commands that install ``selected`` (and nothing else) with ``python``.

    Parts built with setuptools whose build requirements are ``present`` (met) in the target
    environment are built there without isolation; the others (and the C++ plugin's
    scikit-build-core) keep pip's isolation, which brings what their backend asks for
    into a throw-away environment. Editable setuptools parts are the exception: they are
    always built without isolation (see the module's docstring), after a command that
    installs their missing build requirements. The isolated ones are installed last: they
    are plugins, and what they depend on is installed by then. ``extras`` maps a part's name
    to the extras to install it with (``{"torcia-cpu": "mkl"}``); ``sources`` maps it to
    the folder a plain install builds (a copy of the part's, ``parts.copy_sources``).
    """
    pip = [python, "-m", "pip", "install", *pip_args]
    extras = extras or {}
    sources = sources or {}

    def target(p):
        folder = str(p.path if editable else sources.get(p.name, p.path))
        return f"{folder}[{extras[p.name]}]" if p.name in extras else folder

    def targets(parts):
        return [arg for p in parts for arg in (["-e", target(p)] if editable else [target(p)])]

    setuptools_parts = [p for p in selected
                        if p.build_backend.startswith("setuptools.build_meta")]
    commands = []
    if editable:
        quick = setuptools_parts
        missing = sorted({r for p in quick for r in p.build_requires if _name(r) not in present})
        if missing:
            commands.append(pip + missing)
    elif isolated:
        return [pip + targets(selected)]
    else:
        quick = [p for p in setuptools_parts
                 if all(_name(r) in present for r in p.build_requires)]
    rest = [p for p in selected if p not in quick]
    if quick:
        commands.append(pip + ["--no-build-isolation"] + targets(quick))
    if rest:
        commands.append(pip + targets(rest))
    return commands


LINK_FILE = "_torcia_parts_linked.pth"


def link(selected, site: Path) -> list[str]:
    """Install ``selected`` into ``site`` (a ``site-packages`` folder) without pip: a
    ``.dist-info`` folder per part and one ``.pth`` file putting their ``src`` folders on
    ``sys.path``. Returns the third-party requirements the parts declare (not installed).

    A part that needs building (another backend than setuptools over ``src``, as the C++
    plugin) cannot be linked: SystemExit names it."""
    unlinkable = [p.name for p in selected
                  if not p.build_backend.startswith("setuptools") or not (p.path / "src").is_dir()]
    if unlinkable:
        raise SystemExit(f"--link installs pure-Python parts only; build these with pip: "
                         f"{', '.join(unlinkable)}")
    site.mkdir(parents=True, exist_ok=True)
    others = set()
    for part in selected:
        project = tomllib.loads((part.path / "pyproject.toml").read_text())["project"]
        info = site / f"{part.name.replace('-', '_')}-{part.version}.dist-info"
        info.mkdir(exist_ok=True)
        metadata = ["Metadata-Version: 2.1", f"Name: {part.name}", f"Version: {part.version}"]
        metadata += [f"Requires-Dist: {r}" for r in part.requires]
        (info / "METADATA").write_text("\n".join(metadata) + "\n")
        groups = dict(project.get("entry-points", {}))
        if "scripts" in project:
            groups["console_scripts"] = project["scripts"]
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
            for group, points in groups.items()))
        (info / "INSTALLER").write_text("torcia-install-parts-link\n")
        (info / "RECORD").write_text("".join(f"{info.name}/{name},,\n" for name in
                                             ("METADATA", "entry_points.txt", "INSTALLER",
                                              "RECORD")))
        others.update(r for r in part.requires if r not in part.torcia_requires)
    pth = site / LINK_FILE
    lines = pth.read_text().splitlines() if pth.exists() else []
    lines += [str(p.path / "src") for p in selected if str(p.path / "src") not in lines]
    pth.write_text("\n".join(lines) + "\n")
    return sorted(others)


def _site_packages(python) -> Path:
    script = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    out = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "parts", nargs="*",
        help="a folder name (nn, cpu), distribution (torcia-nn), path, or 'packages'/'plugins'; "
             "extras in brackets as pip takes them (cpu[mkl])",
    )
    parser.add_argument(
        "--optional", action="append", default=[], metavar="PART",
        help="also install PART, if this checkout has it (e.g. the C++ plugin 'cpu')",
    )
    parser.add_argument(
        "--with-tests", action="store_true",
        help="also install what the parts' 'test' extra names: torcia parts, and others",
    )
    parser.add_argument("--editable", "-e", action="store_true", help="editable installs")
    parser.add_argument("--python", default=sys.executable, help="the environment's Python")
    parser.add_argument("--isolated", action="store_true", help="keep pip's build isolation")
    parser.add_argument("--link", action="store_true",
                        help="no pip: metadata and a .pth file (pure-Python parts; offline)")
    parser.add_argument("--dry-run", action="store_true", help="print the pip commands only")
    parser.add_argument("--pip-arg", action="append", default=[], help="passed on to pip")
    args = parser.parse_args(argv)

    parts = repo.discover()
    wanted = [_split_extras(key) for key in args.parts]
    wanted += [(key, ex) for key, ex in map(_split_extras, args.optional) if repo.has(parts, key)]
    named = [p for key, _ in wanted for p in repo.lookup(parts, key)]
    extras = {p.name: ex for key, ex in wanted if ex for p in repo.lookup(parts, key)}
    selected = repo.closure(parts, named, tests=args.with_tests)
    if args.link:
        site = _site_packages(args.python)
        others = link(selected, site)
        print(f"linked into {site}: {', '.join(p.name for p in selected)}"
              + (f"; not installed (needed): {', '.join(others)}" if others else ""))
        return 0
    present = frozenset() if args.isolated and not args.editable else satisfied(
        args.python, {r for p in selected for r in p.build_requires})
    with tempfile.TemporaryDirectory() as tmp:
        sources = ({} if args.editable or args.dry_run
                   else repo.copy_sources(selected, Path(tmp)))
        commands = pip_commands(selected, args.python, args.editable, args.isolated,
                                args.pip_arg, present, extras, sources)
        if args.with_tests:
            # the third-party test requirements (mpich, onnxruntime...), from the index
            others = sorted({r for part in named for r in part.other_test_requires})
            if others:
                commands.insert(0, [args.python, "-m", "pip", "install", *args.pip_arg,
                                    *others])
        for command in commands:
            print("+", shlex.join(map(str, command)), flush=True)
            if not args.dry_run:
                returncode = subprocess.run(command).returncode
                if returncode:
                    return returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
