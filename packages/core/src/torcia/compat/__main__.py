"""``python -m torcia.compat script.py [args]`` (or ``-m module [args]``): run a PyTorch
program on torcia, unmodified, as ``python script.py [args]`` would run it on PyTorch."""

from __future__ import annotations

import runpy
import sys

from torcia import compat

_USAGE = "usage: python -m torcia.compat (script.py | -m module) [args ...]"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE)
        print(__doc__)
        raise SystemExit(0 if argv else 2)
    compat.install()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit(_USAGE)
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        # the script's folder comes first on sys.path, as with ``python script.py``
        sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
