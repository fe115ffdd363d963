"""The Tensor stub (packages/core/src/torcia/_tensor.pyi) matches the runtime class:
IDEs and type checkers see every method torcia attaches at import."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import gen_stubs  # noqa: E402


def test_the_stub_matches_the_runtime():
    # a fresh interpreter: what `import torcia` alone attaches
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_stubs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_public_tensor_attribute_is_in_the_stub():
    import torcia

    tree = ast.parse(gen_stubs.STUB.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    names |= {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    public = {n for n in dir(torcia.Tensor) if not n.startswith("_")}
    assert public <= names
    assert {"sum", "matmul", "backward", "to", "shape", "__add__", "view"} <= names


def test_a_stale_stub_fails_the_check(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "_tensor.pyi"
    stale.write_text(gen_stubs.generate().replace("    def matmul(", "    def old_matmul("))
    monkeypatch.setattr(gen_stubs, "STUB", stale)
    monkeypatch.setattr(gen_stubs, "ROOT", tmp_path)
    assert gen_stubs.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert gen_stubs.main([]) == 0
    assert gen_stubs.main(["--check"]) == 0
