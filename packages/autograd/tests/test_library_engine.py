"""The engine reaches core only through its hook; op records carry its formulas."""

import os
import subprocess
import sys

import pytest

import torcia
import torcia.autograd  # noqa: F401  (the engine's formulas)
from torcia import library


def test_records_carry_the_backward_formula():
    assert library.get_op("mul").backward is not None
    assert library.get_op("eq").backward is None
    assert isinstance(library.autograd_engine(), library.AutogradEngine)


def test_blocking_autograd_disables_gradients_even_when_imported():
    """No autograd mode is registered: requires_grad, backward() and the engine raise
    naming the blocklist and the distribution."""
    code = ("import torcia, torcia.autograd\n"
            "from torcia import library\n"
            "y = (torcia.ones(2) * 2).sum()\n"
            "assert y.grad_fn is None\n"
            "for call in (lambda: torcia.ones(2, requires_grad=True), lambda: y.backward(),\n"
            "             lambda: library.autograd_engine()):\n"
            "    try:\n"
            "        call()\n"
            "    except RuntimeError as exc:\n"
            "        print(exc)\n")
    env = dict(os.environ, TORCIA_DISABLE_PLUGINS="autograd")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.splitlines()
    assert len(out) == 3
    assert all("blocked by TORCIA_DISABLE_PLUGINS" in line and "torcia-autograd" in line
               for line in out)


def test_records_read_inputs_and_parameters_from_the_formulas():
    conv = library.get_op("conv")
    assert conv.inputs == ("x", "w", "b")
    assert set(conv.params) == {"stride", "padding", "dilation", "groups"}
    assert library.get_op("sum").params == {"dim": None, "keepdim": False, "dtype": None}
    assert library.get_op("cat").inputs == ("*xs",)
    assert library.get_op("add").inputs == ("input", "other")


class _Spy(library.AutogradMode):
    """Records through the engine, keeping what the dispatcher handed it."""

    def __init__(self, engine):
        self.engine = engine
        self.seen = []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def record(self, op, inputs, params, out):
        self.seen.append((op, tuple(getattr(x, "dtype", None) for x in inputs)))
        self.engine.record(op, inputs, params, out)


def test_the_engine_is_the_registered_autograd_mode_and_records_last():
    engine = library.autograd_engine()
    assert isinstance(engine, library.AutogradMode)
    assert library.AUTOGRAD_ORDER > max(library.AUTOCAST_ORDER, library.PROFILE_ORDER,
                                        library.TRACE_ORDER)
    spy = _Spy(engine)
    a = torcia.ones(2, 2, requires_grad=True)
    with library.register_autograd_mode(spy):
        with torcia.autocast("cpu", dtype=torcia.bfloat16):
            y = a @ a  # autocast (order 100) casts before the recording mode sees the op
        (y.float().sum()).backward()
    assert ("matmul", (torcia.bfloat16, torcia.bfloat16)) in spy.seen
    assert a.grad.tolist() == [[4.0, 4.0], [4.0, 4.0]]  # ones @ a.T + a.T @ ones
    # the handle gave recording back to the engine
    assert library.autograd_engine() is engine
    spy.seen.clear()
    (a * 2).sum()
    assert spy.seen == []


def test_ops_without_grad_do_not_reach_the_autograd_mode():
    spy = _Spy(library.autograd_engine())
    with library.register_autograd_mode(spy):
        x = torcia.ones(3)
        (x * 2 + x).exp().sum()
        with torcia.no_grad():
            (torcia.ones(3, requires_grad=True) * 2).sum()
    assert spy.seen == []


def test_an_engine_object_of_hook_api_0_2_is_wrapped_in_a_mode():
    engine = library.autograd_engine()
    calls = []

    class OldStyle:
        def __getattr__(self, name):
            return getattr(engine, name)

        def record(self, op, inputs, params, out):
            calls.append(op)
            engine.record(op, inputs, params, out)

    with library.register_autograd_mode(OldStyle()):
        assert isinstance(library.autograd_engine(), library.AutogradMode)
        torcia.ones(2, requires_grad=True).exp()
    assert calls == ["exp"]


def test_an_autograd_mode_is_registered_not_entered_and_must_be_complete():
    with pytest.raises(RuntimeError, match="register_autograd_mode"):
        with library.autograd_engine():
            pass

    class Partial(library.AutogradMode):
        def record(self, op, inputs, params, out):
            return None

    with pytest.raises(TypeError, match="backward"):
        library.register_autograd_mode(Partial())
    assert isinstance(library.autograd_engine(), library.AutogradMode)
