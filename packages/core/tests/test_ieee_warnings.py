"""IEEE special values come out of torcia's ops silently, as out of PyTorch's.

The filter that silences NumPy's warnings in torcia's modules is made at ``import torcia``
and, like any filter, lives in the warnings state of its time: pytest imports a test module
inside a ``catch_warnings`` block of its own, which drops it. So a fresh process, importing
torcia as a script does, runs the checks.
"""

import subprocess
import sys

SCRIPT = r"""
import warnings
import numpy as np
import torcia

special = [0.0, -0.0, -1.0, 1e38, -1e38, float("inf"), float("-inf"), float("nan"), 2.0]
unary = ["log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "exp", "expm1",
         "exp2", "acos", "asin", "atanh", "acosh", "logit", "sinh", "cosh", "tan", "square",
         "sinc", "norm", "prod"]
binary = ["div", "mul", "pow", "fmod", "remainder", "floor_divide", "xlogy", "atan2"]
with warnings.catch_warnings(record=True) as record:
    for dtype in (torcia.float32, torcia.float64):
        x = torcia.tensor(special, dtype=dtype)
        for name in unary:
            getattr(torcia, name)(x)
        for name in binary:
            getattr(torcia, name)(x, x.flip(0))
            getattr(torcia, name)(x, 0.0)
        x.clone().div_(0.0)
        x.clone().mul_(x)
        x.int()
        x.cumsum(0), x.cumprod(0), x.nanmean(), torcia.outer(x, x)
    print("torcia", [str(w.message) for w in record])
with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    np.log(np.zeros(1))
    print("numpy", [str(w.message) for w in record])
"""


def test_ops_give_inf_and_nan_without_a_warning_and_numpy_elsewhere_keeps_its_own():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         check=True)
    assert run.stdout.splitlines() == ["torcia []", "numpy ['divide by zero encountered in log']"]
    assert run.stderr == ""


def test_a_fresh_process_prints_nothing_for_a_division_by_zero():
    code = "import torcia; x = torcia.ones(3); print((x / 0).tolist(), torcia.log(x - 1).tolist())"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert run.stderr == ""
    assert run.stdout.split() == ["[inf,", "inf,", "inf]", "[-inf,", "-inf,", "-inf]"]
