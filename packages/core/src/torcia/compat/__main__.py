"""``python -m torcia.compat script.py [args]`` (or ``-m module [args]``): run a PyTorch
program on torcia, unmodified, as ``python script.py [args]`` would run it on PyTorch."""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import runpy
import sys
import types

from torcia import compat
from torcia.compat import _spawned

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
        os.environ[_spawned.MAIN_ENV] = f"-m {argv[1]}"
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        # the script's folder comes first on sys.path, as with ``python script.py``
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        os.environ[_spawned.MAIN_ENV] = os.path.abspath(argv[0])
        _run_script(argv[0])


def _run_script(path: str) -> None:
    """Run the script at ``path`` as ``__main__``, as ``runpy.run_path`` does, in a module
    whose ``__spec__`` names :mod:`torcia.compat._spawned`: processes that multiprocessing
    starts with "spawn" import the parent's main module by that name, and so run the
    script with the hook installed (under the script's own name they would import the
    real ``torch``)."""
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None,
                           __package__=None, __builtins__=builtins,
                           __spec__=importlib.machinery.ModuleSpec(_spawned.__name__, None))
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        sys.modules["__main__"] = saved


if __name__ == "__main__":
    main()
