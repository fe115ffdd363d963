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


def _torchvision_without_its_extension() -> None:
    """Make PyPI's torchvision importable beside a CPU PyTorch.

    PyPI has no CPU build of torchvision 0.28 (the release made with PyTorch 2.13): the
    extension of its wheel needs CUDA's libraries, which a CPU PyTorch lacks, so it does
    not load. The Python part (models, transforms, FrozenBatchNorm2d: what timm imports)
    runs without it, but its import registers fake kernels for two of the extension's ops
    whether or not the extension loaded; declared here first, as the extension would
    declare them, the import succeeds. No case calls those ops."""
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    try:
        torch.ops.load_library(os.path.join(spec.submodule_search_locations[0], "_C.so"))
    except OSError:
        for name in ("nms", "qnms"):
            torch.library.define(f"torchvision::{name}",
                                 "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def main(module_name: str, case_name: str, out: str) -> int:
    import numpy as np

    on_torcia = "torcia.compat" in sys.modules and sys.modules["torcia.compat"].installed()
    if not on_torcia:
        _torchvision_without_its_extension()
    module = importlib.import_module(module_name)
    fn = getattr(module, "case_" + case_name)
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
