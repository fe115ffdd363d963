"""The main module of a process that multiprocessing starts ("spawn") from a program run
by ``python -m torcia.compat``: it installs the import hook, then runs the parent's
script (or module) as ``__mp_main__``, as multiprocessing does with a main module, so that
the script's functions can be unpickled and its ``if __name__ == "__main__":`` block does
not run again. The parent names its script in the environment variable ``MAIN_ENV``.
"""

import os
import runpy

from torcia import compat

MAIN_ENV = "TORCIA_COMPAT_MAIN"

if __name__ != "torcia.compat._spawned":  # run by multiprocessing, not imported
    compat.install()
    _target = os.environ[MAIN_ENV]
    if _target.startswith("-m "):
        _names = runpy.run_module(_target[3:], run_name="__mp_main__")
    else:
        _names = runpy.run_path(_target, run_name="__mp_main__")
    globals().update({k: v for k, v in _names.items() if not k.startswith("__")})
