"""torcia._speedups, the optional native ``Tensor._make``: the same tensor as the Python
one (every slot), the same errors, and ``TORCIA_PURE_PYTHON=1`` runs the Python one."""

import functools
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


# ----- the native dispatch: call, binary, unary, binary_inplace ---------------------------

dispatch = pytest.mark.skipif(not _tensor.NATIVE_DISPATCH,
                              reason="torcia._speedups is not built (or TORCIA_PURE_PYTHON)")


def _outcome(fn):
    """What ``fn()`` gives, comparable across the two paths: each result tensor's values,
    dtype, device, requires_grad and grad_fn's name, or the error's type and message."""
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - the errors are what is compared
        return ("error", type(exc).__name__, str(exc))
    outs = out if isinstance(out, tuple) else (out,)
    return tuple((type(o).__name__,
                   tuple(o.shape) if o.device.type == "meta" else o.detach().tolist(),
                   str(o.dtype), str(o.device), o.requires_grad, type(o.grad_fn).__name__)
                  if isinstance(o, torcia.Tensor) else o for o in outs)


class _Sub(torcia.Tensor):
    pass


class _Param(torcia.Tensor):  # as nn.Parameter: out of the __torch_function__ protocol
    __torch_function__ = _tensor.disabled_torch_function_impl


class _OwnData(_Param):  # a class that keeps its elements elsewhere, doubled
    @property
    def _data(self):
        return self.__dict__["elements"]

    @_data.setter
    def _data(self, value):
        self.__dict__["elements"] = value * 2


def _operands():
    f32 = torcia.tensor([1.5, -2.0, 3.0])
    return {
        "f32": f32, "f32b": torcia.tensor([0.5, 4.0, -1.0]), "f64": f32.double(),
        "i64": torcia.tensor([3, -4, 5]), "u8": torcia.tensor([0, 7, 255], dtype=torcia.uint8),
        "bool": torcia.tensor([True, False, True]), "0d": torcia.tensor(2.0),
        "row": torcia.ones(2, 3), "four": torcia.ones(4), "meta": torcia.ones(3, device="meta"),
        "bf16": f32.to(torcia.bfloat16), "c64": f32.to(torcia.complex64),
        "sub": torcia.ones(3).as_subclass(_Sub), "param": f32.as_subclass(_Param),
        "own": torcia.ones(3).as_subclass(_OwnData),
    }


BINARY_CASES = [
    ("add", "f32", "f32b", False), ("mul", "f32", "f32b", False), ("div", "f32", "f32b", True),
    ("div", "i64", "i64", True), ("add", "f64", "f64", False), ("add", "i64", "i64", False),
    ("sub", "u8", "u8", False), ("add", "f32", "f64", False), ("mul", "i64", "f32", False),
    ("add", "f32", 2.5, False), ("mul", "f32", 3, False), ("pow", "f64", 2, False),
    ("div", "f32", 0, True), ("add", "f32", True, False), ("add", "f32", 1j, False),
    ("add", "i64", 2.5, False), ("eq", "u8", -1, False), ("add", "u8", 300, False),
    ("mul", "f32", 10 ** 40, False), ("add", "f32", 2 ** 70, False), ("add", "bf16", 1.5, False),
    ("add", "f32", "0d", False), ("add", "row", "f32", False), ("add", "f32", "four", False),
    ("add", "f32", "meta", False), ("bitwise_and", "f32", "f32b", False),
    ("bitwise_and", "bool", "bool", False), ("lt", "f32", "f32b", False),
    ("add", "c64", "c64", False), ("add", "sub", "f32", False), ("add", "f32", "sub", False),
    ("add", "f32", [1.0, 2.0, 3.0], False), ("add", "f32", "text", False),
    ("mul", "param", "f32", False), ("mul", "f32", "param", False), ("add", "own", "f32", False),
    ("add", "f32", "own", False), ("div", "param", 2, True),
    ("no_such_op", "f32", "f32b", False),
]


@dispatch
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("op,a,b,float_op", BINARY_CASES)
def test_native_binary_matches_python(op, a, b, float_op, grad):
    if grad and not HAS_AUTOGRAD:
        pytest.skip("needs torcia-autograd")
    ops = _operands()
    a, b = ops[a], ops.get(b, b) if isinstance(b, str) else b
    if grad and a.dtype.is_floating_point and a.device.type == "cpu":
        a = a.detach().requires_grad_()
    assert _tensor.binary is _tensor._speedups.binary
    assert _outcome(lambda: _tensor.binary(op, a, b, float_op)) == _outcome(
        lambda: _tensor.python_binary(op, a, b, float_op))


UNARY_CASES = [("exp", "f32", False), ("exp", "i64", True), ("neg", "i64", False),
               ("sqrt", "bool", True), ("bitwise_not", "f32", False), ("exp", "sub", False),
               ("exp", "meta", False), ("no_such_op", "f32", False), ("abs", "c64", False),
               ("exp", "param", False), ("exp", "own", False)]


@dispatch
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("op,a,to_float", UNARY_CASES)
def test_native_unary_matches_python(op, a, to_float, grad):
    if grad and not HAS_AUTOGRAD:
        pytest.skip("needs torcia-autograd")
    a = _operands()[a]
    if grad and a.dtype.is_floating_point and a.device.type == "cpu":
        a = a.detach().requires_grad_()
    assert _outcome(lambda: _tensor.unary(op, a, to_float)) == _outcome(
        lambda: _tensor.python_unary(op, a, to_float))
    assert _outcome(lambda: _tensor.unary("x", 1.0)) == _outcome(
        lambda: _tensor.python_unary("x", 1.0))


def _call_cases(ops):
    row = ops["row"]
    return [
        ("sum", (ops["f32"],), {"dim": None, "keepdim": False, "dtype": None}, None),
        ("sum", (row,), {"dim": (0,), "keepdim": True, "dtype": None}, None),
        ("matmul", (row, row.t()), {}, None),
        ("matmul", (row, row), {}, None),  # the kernel refuses the shapes
        ("view", (row,), {"shape": (3, 2)}, row),
        ("max_dim", (row,), {"dim": 1, "keepdim": False}, None),  # a tuple of results
        ("bitwise_and", (ops["f32"], ops["f32b"]), {}, None),  # reworded: no float kernel
        ("add", (ops["f32"], ops["meta"]), {}, None),  # two devices
        ("add", (ops["sub"], ops["f32"]), {}, None),
        ("add", (ops["f32"], 2.0), {}, None), ("add", (None, ops["f32"]), {}, None),
        ("no_such_op", (ops["f32"],), {}, None), ("add", (), {}, None),
        ("cat", ([ops["f32"], ops["f32b"]],), {"dim": 0}, None),
        ("matmul", (ops["param"], ops["f32"]), {}, None),
        ("add", (ops["f32"], ops["own"]), {}, None),
    ]


@dispatch
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", range(16))
def test_native_call_matches_python(case, grad):
    if grad and not HAS_AUTOGRAD:
        pytest.skip("needs torcia-autograd")
    ops = _operands()
    if grad:
        ops = {k: v.detach().requires_grad_() if v.dtype.is_floating_point and (
            v.device.type == "cpu") and type(v) in (torcia.Tensor, _Param) else v
            for k, v in ops.items()}
    op, inputs, params, view_of = _call_cases(ops)[case]
    native = _outcome(lambda: _tensor.call(op, inputs, dict(params), view_of))
    assert native == _outcome(lambda: _tensor.python_call(op, inputs, dict(params), view_of))
    if op == "view":
        out = _tensor.call(op, inputs, dict(params), view_of)
        assert out._base is view_of and out._vc is view_of._vc


@dispatch
def test_native_call_rewords_a_kernel_error_from_none():
    a, b = torcia.tensor([1.0]), torcia.tensor([2.0])
    with pytest.raises(NotImplementedError, match="bitwise_and_cpu") as info:
        _tensor.call("bitwise_and", (a, b), {})
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert isinstance(info.value.__context__, TypeError)


@dispatch
@pytest.mark.parametrize("case", ["plain", "overlap", "same", "expanded", "readonly",
                                  "dtype", "shape", "grad", "div_int", "int"])
def test_native_binary_inplace_matches_python(case):
    if case == "grad" and not HAS_AUTOGRAD:
        pytest.skip("needs torcia-autograd")

    def operands():
        x = torcia.arange(4.0)
        # made for the case only: a tensor requiring grad needs torcia-autograd
        return {
            "plain": lambda: (x, torcia.ones(4)), "overlap": lambda: (x[1:], x[:-1]),
            "same": lambda: (x, x),
            "expanded": lambda: (torcia.ones(1).expand(4), torcia.ones(4)),
            "readonly": lambda: (torcia.from_numpy(_readonly()), torcia.ones(4)),
            "dtype": lambda: (x, torcia.ones(4, dtype=torcia.float64)),
            "shape": lambda: (torcia.ones(2, 4), torcia.ones(4)),
            "grad": lambda: (x, torcia.ones(4, requires_grad=True)),
            "div_int": lambda: (torcia.arange(4), torcia.ones(4, dtype=torcia.int64)),
            "int": lambda: (torcia.arange(4), torcia.arange(4)),
        }[case]()

    def run(fn):
        target, other = operands()
        version = target._version
        out = _outcome(lambda: fn("div" if case == "div_int" else "add",
                                  lambda s, o: torcia.div(s, o) if case == "div_int" else s + o,
                                  target, other, case == "div_int"))
        return out, target.detach().tolist(), target._version - version

    assert run(_tensor.binary_inplace) == run(_tensor.python_binary_inplace)


def _readonly():
    arr = np.zeros(4, np.float32)
    arr.flags.writeable = False
    return arr


@dispatch
def test_native_dispatch_joins_an_entered_mode_and_skips_other_threads_modes():
    import threading

    seen = []

    class Watch(torcia.library.DispatchMode):
        def on_result(self, op, inputs, params, result):
            seen.append(op)

    a, b = torcia.ones(3), torcia.ones(3)
    with Watch():
        _ = a + b, torcia.exp(a), a.sum(), a * 2.0
        c = a.clone()
        c += b
    assert seen == ["add", "exp", "sum", "mul", "clone", "add"]
    entered, leave = threading.Event(), threading.Event()

    def elsewhere():
        with Watch():
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    entered.wait(10)
    try:
        seen.clear()
        assert (a + b).tolist() == [2.0, 2.0, 2.0]  # the Python path: this thread has none
        assert seen == []
    finally:
        leave.set()
        thread.join()


# every mode and hook the native path must leave to Python: the same lines either way
_MODES_SCRIPT = r"""
import importlib.util
import torcia
from torcia import _tensor

print("native", bool(_tensor.NATIVE_DISPATCH))
x, y = torcia.tensor([0.5, 1.0, 2.0]), torcia.tensor([1.5, -1.0, 0.25])
m = torcia.ones(2, 2)
def ops(a, b):
    c = a.clone()
    c += b
    return [a + b, a * 2.0, torcia.exp(a), (a * b + a).sum(), torcia.cat([a, b]), c]
def show(label, values):
    print(label, [(type(v).__name__, v.dtype,
                   [round(e, 4) for e in v.detach().reshape(-1).tolist()])
                  for v in values])
show("plain", ops(x, y))
with torcia.autocast("cpu", dtype=torcia.bfloat16):
    show("autocast", ops(x, y) + [m @ m])
with torcia.profiler.profile() as prof:
    ops(x, y)
print("profiler", [e.name for e in prof.events])
class Logged(torcia.Tensor):
    names = []
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.names.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})
show("override", ops(x.as_subclass(Logged), y))
print("override calls", Logged.names)
if importlib.util.find_spec("torcia.autograd"):
    import torcia.autograd.forward_ad as fwad
    w = x.clone().requires_grad_()
    values = ops(w, y)
    values[3].backward()
    show("grad", values + [w.grad])
    with fwad.dual_level():
        d = fwad.make_dual(x, torcia.ones(3))
        show("forward_ad", [fwad.unpack_dual(v).tangent for v in ops(d, y)[:4]])
if importlib.util.find_spec("torcia.nn"):
    show("vmap", [torcia.vmap(lambda r: (r * r + r).exp().sum())(torcia.ones(2, 3))])
if importlib.util.find_spec("torcia.compiler"):
    f = torcia.compile(lambda a, b: (a * b + a).exp().sum())
    show("compile", [f(x, y), f(x, y)])
"""


@dispatch
def test_native_and_python_paths_agree_under_every_mode():
    outputs = []
    for pure in ("0", "1"):
        env = {**os.environ, "TORCIA_PURE_PYTHON": pure}
        out = subprocess.run([sys.executable, "-c", _MODES_SCRIPT], capture_output=True,
                             text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr
        outputs.append(out.stdout.splitlines())
    native, python = outputs
    assert native[0] == "native True" and python[0] == "native False"
    assert native[1:] == python[1:]
    assert any(line.startswith("override calls") and "exp" in line for line in native)
    assert any(line.startswith("override [('Logged'") for line in native)


@dispatch
def test_native_dispatch_takes_arguments_by_name_as_python():
    x, y = torcia.tensor([1.0, 4.0]), torcia.tensor([2.0, 8.0])
    cases = [
        (_tensor.call, _tensor.python_call, ("view",), {"inputs": (x,), "params": {"shape": (2,)},
                                                        "view_of": x}),
        (_tensor.call, _tensor.python_call, ("getitem", (x,), {"key": (0, Ellipsis)}),
         {"view_of": x}),
        (_tensor.binary, _tensor.python_binary, ("div", x, y), {"float_op": True}),
        (_tensor.unary, _tensor.python_unary, ("exp",), {"a": x, "to_float": False}),
        (_tensor.call, _tensor.python_call, ("add", (x, y)), {"view_of": None}),  # no params
        (_tensor.binary, _tensor.python_binary, ("add", x, y), {"op": "mul"}),  # twice
        (_tensor.unary, _tensor.python_unary, ("exp", x), {"float": True}),  # unknown
    ]
    for native, python, args, kwargs in cases:
        assert _outcome(functools.partial(native, *args, **kwargs)) == _outcome(
            functools.partial(python, *args, **kwargs))
    view = _tensor.call("getitem", (x,), {"key": (0, Ellipsis)}, view_of=x)
    assert view._base is x
