"""torcia._speedups, the optional native ``Tensor._make``: the same tensor as the Python
one (every slot), the same errors, and ``TORCIA_PURE_PYTHON=1`` runs the Python one."""

import gc
import importlib.util
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import torcia
from torcia import _tensor

SLOTS = ("_data", "_device", "_requires_grad", "_grad", "grad_fn", "_vc", "_base", "_out_nr",
         "_hooks", "_retains_grad")

HAS_AUTOGRAD = importlib.util.find_spec("torcia.autograd") is not None
native = pytest.mark.skipif(_tensor._NATIVE_MAKE is None,
                            reason="torcia._speedups is not built (or TORCIA_PURE_PYTHON)")


def _slots(t, arr, base):
    out = {}
    for name in SLOTS:
        value = getattr(t, name)
        if name == "_data":
            value = (value is arr, value.shape, value.dtype, type(value))
        elif name == "_vc":
            value = (value, base is not None and value is base._vc)
        elif name == "_base":
            value = "none" if value is None else "base" if value is base else (
                "root" if base is not None and value is base._base else value)
        out[name] = value
    return out


@native
@pytest.mark.parametrize("case", ["array", "scalar", "view", "view_of_view", "0-d"])
def test_native_make_builds_the_python_tensor(case):
    dev = torcia.ones(1).device
    root = torcia.arange(6.0)
    mid = root[1:]
    arr, base = {
        "array": (np.ones(3, np.float32), None),
        "scalar": (np.float32(2.5), None),  # a full reduction's NumPy scalar: a 0-d array
        "view": (root._data[2:], root),
        "view_of_view": (mid._data[1:], mid),
        "0-d": (np.array(1.0), None),
    }[case]
    ours = _tensor._NATIVE_MAKE(arr, dev, base) if base is not None else _tensor._NATIVE_MAKE(
        arr, dev)
    reference = _tensor.python_make(arr, dev, base)
    assert type(ours) is torcia.Tensor
    assert _slots(ours, arr, base) == _slots(reference, arr, base)
    if case == "scalar":
        assert ours._data.shape == () and ours._data.dtype == np.float32
    if base is not None:
        assert ours._base is root and ours._vc is root._vc  # the storage root, shared counter


@native
def test_native_make_tensors_are_plain_tensors():
    t = _tensor._NATIVE_MAKE(np.zeros(2), torcia.ones(1).device)
    if HAS_AUTOGRAD:  # core is tested alone too
        t.requires_grad_()
        (t * 2).sum().backward()
        assert t.grad.tolist() == [2.0, 2.0]
    t.custom = 1  # the instance dict, as a Python-made tensor's
    assert t.__dict__ == {"custom": 1}
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


@native
def test_native_make_errors():
    dev = torcia.ones(1).device
    with pytest.raises(TypeError, match="2 or 3 arguments"):
        _tensor._NATIVE_MAKE(np.zeros(1))
    with pytest.raises(AttributeError):
        _tensor._NATIVE_MAKE(np.zeros(1), dev, object())  # a base without _vc, as in Python
    with pytest.raises(AttributeError):
        _tensor.python_make(np.zeros(1), dev, object())


def test_pure_python_environment_runs_the_python_make():
    code = ("import torcia, torcia._tensor as T; "
            "assert T._NATIVE_MAKE is None and torcia.Tensor._make is T.python_make; "
            + ("x = torcia.ones(3, requires_grad=True); (x * x).sum().backward(); "
               "print(x.grad.tolist())" if HAS_AUTOGRAD
               else "print((torcia.ones(3) * 2).tolist())"))
    env = {**os.environ, "TORCIA_PURE_PYTHON": "1", "TORCIA_DISABLE_PLUGINS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 2.0, 2.0]"
