"""Run one case and save what it returns: ``python run_case.py MODULE CASE OUT.npz``.

Run as is, it runs on PyTorch; under ``python -m torcia.compat`` on torcia. Exit status 0:
ran (OUT.npz written); 1: raised (traceback on stderr); 3: skipped (the reason on stdout).
"""

import importlib
import importlib.util
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "cases")]


def main(module_name: str, case_name: str, out: str) -> int:
    import numpy as np

    module = importlib.import_module(module_name)
    fn = getattr(module, "case_" + case_name)
    on_torcia = "torcia.compat" in sys.modules and sys.modules["torcia.compat"].installed()
    for need in getattr(fn, "needs", ()):
        if on_torcia and importlib.util.find_spec(need) is None:
            print(f"skipped: needs {need}, which is not installed")
            return 3
    try:
        result = fn()
    except Exception:
        traceback.print_exc()
        return 1
    arrays = {}
    for key, value in result.items():
        arrays[key] = np.asarray(value)
    meta = {"rtol": getattr(fn, "rtol", 1e-4), "atol": getattr(fn, "atol", 1e-5)}
    np.savez(out, __meta__=np.asarray(json.dumps(meta)), **arrays)
    return 0


def describe() -> None:
    """Print every case as JSON: module, case, library, known failure."""
    cases = []
    for name in sorted(os.listdir(os.path.join(HERE, "cases"))):
        if not name.endswith("_cases.py"):
            continue
        module = importlib.import_module(name[:-3])
        for attr in dir(module):
            if attr.startswith("case_"):
                fn = getattr(module, attr)
                cases.append({"module": name[:-3], "case": attr[5:],
                              "library": getattr(fn, "library", None) or name[:-9],
                              "known_failure": getattr(fn, "known_failure", None)})
    print(json.dumps(cases))


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        describe()
    else:
        sys.exit(main(*sys.argv[1:4]))
