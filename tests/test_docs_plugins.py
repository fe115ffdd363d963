"""The plugin pages say what the code does: every hook of every installed part is in the
plugin guide's table and the architecture's, and the counts the architecture states are the
code's (substituted at build time), never a number written by hand that drifts."""

import importlib
import importlib.metadata
import importlib.util
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _hooks() -> set[str]:
    """Every hook specification of the installed parts."""
    found = set()
    modules = ["torcia.hookspecs"] + sorted({
        ep.module.rpartition(".")[0] + ".hookspecs"
        for ep in importlib.metadata.entry_points(group="torcia")
        if ep.module.startswith("torcia.")})
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue  # a part without hooks of its own
        found |= {n for n, f in vars(module).items()
                  if n.startswith("torcia_") and hasattr(f, "torcia_spec")}
    return found


def test_every_hook_is_in_the_plugin_guide_and_the_architecture():
    hooks = _hooks()
    assert "torcia_register_compile_backends" in hooks or not importlib.util.find_spec(
        "torcia.compiler")
    for page in ("plugin_guide.rst", "architecture.rst"):
        text = (DOCS / page).read_text()
        assert [h for h in sorted(hooks) if f"``{h}(" not in text] == [], page


def test_the_architecture_states_no_count_by_hand():
    text = (DOCS / "architecture.rst").read_text()
    assert re.findall(r"\b\d+ primitives", text) == []
    assert "|primitives| primitives" in text
    assert "|primitives| replace:: {len(library.primitives())}" in (DOCS / "conf.py").read_text()
