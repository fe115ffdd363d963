"""The engine reaches core only through its hook; op records carry its formulas."""

import os
import subprocess
import sys

import torcia
import torcia.autograd  # noqa: F401  (the engine's formulas)
from torcia import library


def test_records_carry_the_backward_formula():
    assert library.get_op("mul").backward is not None
    assert library.get_op("eq").backward is None
    assert isinstance(library.autograd_engine(), library.AutogradEngine)


def test_blocking_autograd_disables_gradients_even_when_imported():
    code = ("import torcia, torcia.autograd\n"
            "try:\n"
            "    torcia.ones(2, requires_grad=True)\n"
            "except RuntimeError as exc:\n"
            "    print(exc)\n")
    env = dict(os.environ, TORCIA_DISABLE_PLUGINS="autograd")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout
    assert "blocked by TORCIA_DISABLE_PLUGINS" in out
    assert "torcia-autograd" in out


def test_records_read_inputs_and_parameters_from_the_formulas():
    conv = library.get_op("conv")
    assert conv.inputs == ("x", "w", "b")
    assert set(conv.params) == {"stride", "padding", "dilation", "groups"}
    assert library.get_op("sum").params == {"dim": None, "keepdim": False, "dtype": None}
    assert library.get_op("cat").inputs == ("*xs",)
    assert library.get_op("add").inputs == ("input", "other")
