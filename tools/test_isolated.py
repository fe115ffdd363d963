"""Run each part's tests in an environment that holds only that part, the torcia parts it
declares (with those its ``test`` extra names), and the test tools: a part whose tests pass
here does not lean on a part it fails to declare.

For each part, ``.venv-iso/<part>`` is created afresh (so nothing stays from an earlier
run), the part is installed with :mod:`install_parts` and its fast tests are run. It is what
``tox -e <part>`` does, for every part whatever its name (tox cannot take every folder name
as an environment name: ``focal-loss`` would be read as two factors).

Examples
--------
::

    python tools/test_isolated.py               # every part that has source
    python tools/test_isolated.py nn example    # those two
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import parts as repo

TOOLS = Path(__file__).resolve().parent
VENVS = repo.ROOT / ".venv-iso"


def run_part(part: repo.Part, python: str) -> tuple[int, float]:
    """Create the part's environment, install it and run its tests: (exit status, seconds)."""
    start = time.monotonic()
    venv = VENVS / part.short
    steps = [
        [python, "-m", "venv", "--clear", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "-r", str(TOOLS / "requirements-test.txt")],
        [str(venv / "bin" / "python"), str(TOOLS / "install_parts.py"), "--editable",
         "--with-tests", "--pip-arg=-q", part.short],
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-m", "not slow",
         str(part.path / "tests")],
    ]
    for step in steps:
        returncode = subprocess.run(step, cwd=repo.ROOT).returncode
        if returncode:
            return returncode, time.monotonic() - start
    return 0, time.monotonic() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", help="folder or distribution names (default: all)")
    parser.add_argument("--python", default=sys.executable, help="the Python to create venvs")
    args = parser.parse_args(argv)

    found = repo.discover()
    if args.parts:
        selected = [p for key in args.parts for p in repo.lookup(found, key)]
    else:
        selected = []
        for part in found.values():
            if repo.has_source(part):
                selected.append(part)
            else:
                print(f"test_isolated: {part.name} has no source yet; skipped", flush=True)

    results = {}
    for part in selected:
        print(f"\n== {part.name} alone", flush=True)
        results[part.name] = run_part(part, args.python)

    print("\n== each part alone")
    for name, (returncode, seconds) in results.items():
        # pytest's 5 means it collected no test, which counts as a failure here
        verdict = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
        print(f"{name:28} {verdict:20} {seconds:6.1f}s")
    failed = [name for name, (returncode, _) in results.items() if returncode]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
