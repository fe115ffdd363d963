"""Build a wheelhouse of torcia parts, with a requirements file that pins them by hash.

torcia's parts are not published on a package index, so a deployment installs them from a
folder of wheels built here. Each wheel is built from a copy of its part, in pip's isolated
build environment (neither the checkout nor this environment keeps build output or build
tools), and ``requirements.txt`` next to the wheels pins every one of them by version and
sha256, for pip's ``--require-hashes`` mode.

Examples
--------
The wheels of torcia-nn and the parts it needs, with their third-party dependencies::

    python tools/build_wheels.py nn --with-deps --out wheelhouse

Then, on the machine to deploy to (no index needed)::

    pip install --no-index --find-links wheelhouse --require-hashes \\
        -r wheelhouse/requirements.txt
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import parts as repo


def wheel_commands(selected, out, python=sys.executable, with_deps=False, pip_args=(),
                   sources=None):
    """The pip commands that fill ``out``: one ``pip wheel`` of the parts (their torcia
    dependencies are among them; built from ``sources``, copies of the parts, when given),
    and with ``with_deps`` one ``pip download`` of the third-party wheels they need."""
    paths = sources or [p.path for p in selected]
    commands = [[python, "-m", "pip", "wheel", *pip_args, "--no-deps", "-w", str(out),
                 *[str(p) for p in paths]]]
    if with_deps:
        others = sorted({r for p in selected for r in p.requires
                         if not repo.requirement_name(r).startswith("torcia")})
        if others:
            commands.append([python, "-m", "pip", "download", *pip_args, "--only-binary",
                             ":all:", "-d", str(out), *others])
    return commands


def _wheel_name(path: Path) -> tuple[str, str]:
    """(distribution, version) of a wheel file, as its name spells them."""
    name, version = path.name.split("-")[:2]
    return re.sub(r"[-_.]+", "-", name).lower(), version


def requirements(wheels) -> str:
    """A requirements file pinning each wheel by version and sha256."""
    lines = []
    for wheel in sorted(wheels, key=lambda w: _wheel_name(w)):
        name, version = _wheel_name(wheel)
        digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="+",
                        help="a folder name (nn, cpu), distribution, path, or 'packages'")
    parser.add_argument("--out", default="wheelhouse", help="the folder of wheels")
    parser.add_argument("--with-deps", action="store_true",
                        help="also download the third-party wheels the parts need")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs pip")
    parser.add_argument("--dry-run", action="store_true", help="print the pip commands only")
    parser.add_argument("--pip-arg", action="append", default=[], help="passed on to pip")
    args = parser.parse_args(argv)

    found = repo.discover()
    named = [p for key in args.parts for p in repo.lookup(found, key)]
    selected = repo.closure(found, named)
    out = Path(args.out).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        sources = (None if args.dry_run
                   else list(repo.copy_sources(selected, Path(tmp)).values()))
        for command in wheel_commands(selected, out, args.python, args.with_deps,
                                      args.pip_arg, sources):
            print("+", shlex.join(map(str, command)), flush=True)
            if not args.dry_run:
                returncode = subprocess.run(command).returncode
                if returncode:
                    return returncode
    if not args.dry_run:
        wheels = sorted(out.glob("*.whl"))
        (out / "requirements.txt").write_text(requirements(wheels))
        print(f"wrote {out / 'requirements.txt'}: {len(wheels)} wheel(s) pinned by sha256")
    return 0


if __name__ == "__main__":
    sys.exit(main())
