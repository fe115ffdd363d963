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


def test_every_converter_table_builds_against_the_installed_op_records():
    pytest.importorskip("onnx")
    from torcia import library
    from torcia.onnx import _export

    # torcia-ao (the test extra) defines the quantized ops: every converter then has its op
    pytest.importorskip("torcia.ao")
    records = library.op_records()
    assert _export.converters() == _export.CONVERTERS
    assert all(name in records for name in (*_export.converters(), *_export._creation()))
    assert _export._PLUGIN_OPS < set(_export.CONVERTERS)


def test_a_plugin_op_without_its_plugin_is_left_out_and_a_stale_name_refused(monkeypatch):
    pytest.importorskip("onnx")
    from torcia.onnx import _export

    monkeypatch.setitem(_export.CONVERTERS, "plugin_op", _export.CONVERTERS["add"])
    monkeypatch.setattr(_export, "_PLUGIN_OPS", {*_export._PLUGIN_OPS, "plugin_op"})
    _export.converters.cache_clear()
    try:
        assert "plugin_op" not in _export.converters()
        monkeypatch.setattr(_export, "_PLUGIN_OPS", _export._PLUGIN_OPS - {"plugin_op"})
        _export.converters.cache_clear()
        with pytest.raises(KeyError, match="torcia.onnx._export.CONVERTERS: no op named "
                                           "'plugin_op'"):
            _export.converters()
        monkeypatch.setattr(_export, "_CREATION", (*_export._CREATION, "zeross"))
        _export._creation.cache_clear()
        with pytest.raises(KeyError, match="torcia.onnx._export._CREATION: no op named "
                                           "'zeross'"):
            _export._creation()
    finally:
        monkeypatch.undo()
        _export.converters.cache_clear()
        _export._creation.cache_clear()
