"""The plugin as torcia loads it: discovery registers the exporter without importing onnx."""

import subprocess
import sys

import pytest


def test_discovery_leaves_onnx_unimported_until_the_first_export(tmp_path):
    # the first op loads every plugin; onnx's import (about 0.7 s) must wait for an export
    code = (
        "import sys, torcia; torcia.ones(2) + 1; "
        "from torcia.nn import exporters; "
        "print('onnx' in exporters.names(), 'onnx' in sys.modules); "
        f"torcia.nn.exporters.export(torcia.nn.Linear(2, 1), (torcia.ones(1, 2),), "
        f"{str(tmp_path / 'm.onnx')!r}); "
        "print('onnx' in sys.modules, torcia.onnx.export.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False", "True", "export"]
    assert (tmp_path / "m.onnx").stat().st_size > 0


def test_the_package_names_its_functions_and_refuses_others():
    import torcia.onnx

    assert {"export", "UnsupportedOperatorError"} <= set(dir(torcia.onnx))
    assert issubclass(torcia.onnx.UnsupportedOperatorError, Exception)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        getattr(torcia.onnx, "nothing")  # noqa: B009 (the module's __getattr__ refuses it)
