"""docs/ops.rst, the reference of every op a device backend can implement, is generated
from the op records (tools/gen_ops_doc.py) and current."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import gen_ops_doc  # noqa: E402


def test_the_page_matches_the_op_records():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_ops_doc.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_page_lists_every_op_with_what_a_backend_needs():
    from torcia import library, ops

    text = gen_ops_doc.render()
    for name in ops.ALL:
        assert f"``{name}(" in text, name
    # a primitive with its signature and traits; a composite with its decomposition
    assert "``add(input, other, *, alpha=1)``\n   primitive, derivative, shape function." in text
    conv = text.split("``conv(", 1)[1].split("\n``", 1)[0]
    assert "composite" in conv and "Default decomposition:" in conv and "def conv(" in conv
    assert text.count("Default decomposition:") == len(ops.ALL) - len(library.primitives())
    assert ":doc:`plugin_guide`" in text


def test_the_page_is_valid_restructuredtext():
    docutils = pytest.importorskip("docutils.core")
    text = gen_ops_doc.PAGE.read_text().replace(":doc:`plugin_guide`", "the plugin guide")
    # raises on the first warning: markup that a nitpicky Sphinx build would reject
    docutils.publish_doctree(text, settings_overrides={"report_level": 2, "halt_level": 2})


def test_a_stale_page_fails_the_check(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "ops.rst"
    stale.write_text(gen_ops_doc.render().replace("``add(", "``old_add("))
    monkeypatch.setattr(gen_ops_doc, "PAGE", stale)
    monkeypatch.setattr(gen_ops_doc, "ROOT", tmp_path)
    assert gen_ops_doc.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
