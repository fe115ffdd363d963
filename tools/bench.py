"""Run torcia's benchmarks: every ``benchmarks/bench_*.py`` script, or those named.

Each script times one workload in torcia and, where it is installed, in PyTorch, and prints
its own table; this runner runs them one after the other with the current Python and fails
if any of them fails. ``tox -e bench`` runs it in an environment with every package, the
C++ plugin where the checkout has it, and PyTorch.

Examples
--------
::

    python tools/bench.py                     # every benchmark
    python tools/bench.py dataloader          # benchmarks/bench_dataloader.py only
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def scripts(names: list[str]) -> list[Path]:
    """The benchmark scripts ``names`` means (every one when empty)."""
    if not names:
        return sorted(BENCHMARKS.glob("bench_*.py"))
    found = []
    for name in names:
        path = BENCHMARKS / f"bench_{name.removeprefix('bench_').removesuffix('.py')}.py"
        if not path.exists():
            known = ", ".join(p.stem.removeprefix("bench_") for p in scripts([]))
            raise SystemExit(f"no benchmark {name!r}; known: {known}")
        found.append(path)
    return found


def main(argv: list[str]) -> int:
    failed = []
    for script in scripts(argv):
        print(f"== {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
