"""Every name docs/coverage.rst counts as present really works: each is called again here
with the sample arguments tools/api_coverage.py found PyTorch to accept (recorded in
tools/api_coverage.json, so no PyTorch is needed)."""

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = json.loads((ROOT / "tools" / "api_coverage.json").read_text())
_spec = importlib.util.spec_from_file_location("api_coverage", ROOT / "tools" / "api_coverage.py")
api_coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(api_coverage)

CASES = [(ns, name, key) for ns, names in sorted(DATA["namespaces"].items())
         for name, key in sorted(names.items())]


def test_coverage_page_is_in_the_docs():
    index = (ROOT / "docs" / "index.rst").read_text()
    page = (ROOT / "docs" / "coverage.rst").read_text()
    assert "coverage" in index.split(".. toctree::", 1)[1]
    assert ".. list-table::" in page and DATA["torch"] in page


@pytest.mark.parametrize("ns,name,key", CASES, ids=[f"{n}.{m}" for n, m, _ in CASES])
def test_present_name_works(ns, name, key):
    import torcia

    target = api_coverage.torcia_target(ns)
    if target is None:
        pytest.skip(f"the part serving {ns} is not installed")
    assert hasattr(target, name), f"{ns}.{name} is counted present but torcia lacks it"
    if key != "attr":
        api_coverage.call_with(torcia, target, name, key, seconds=120)
