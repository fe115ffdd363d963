"""The examples of the documentation run: the hand-written pages' and every docstring's.

Each ``>>>`` example in docs/*.rst and docs/notes/*.rst, and in the docstring of every name
the API reference documents (classes with their methods), runs as a doctest, so an
example that no longer works fails the test suite rather than misleading a reader.
"""

import doctest
import importlib
import inspect
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS))
apigen = importlib.import_module("apigen")

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
PAGES = sorted(p for p in [*DOCS.glob("*.rst"), *DOCS.glob("notes/*.rst")]
               if ">>>" in p.read_text())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page):
    result = doctest.testfile(str(page), module_relative=False, optionflags=FLAGS, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} example(s) of {page.name} failed; see above"


def _docstring_tests():
    import torcia

    finder = doctest.DocTestFinder(recurse=False)
    for part in apigen.plan():
        for module in part.modules:
            for entry in module.entries:
                if entry.kind not in ("class", "function"):
                    continue
                owner, _, short = entry.name.rpartition(".")
                obj = getattr(importlib.import_module(owner), short)
                members = [(entry.name, obj)]
                if inspect.isclass(obj):
                    members += [(f"{entry.name}.{k}", v) for k, v in vars(obj).items()
                                if not k.startswith("_")
                                and (callable(v) or isinstance(v, property))]
                for name, member in members:
                    target = member.fget if isinstance(member, property) else member
                    for test in finder.find(target, name, globs={"torcia": torcia}):
                        if test.examples:
                            yield test


def test_docstring_examples_run():
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    failures, reports = [], []
    attempted = 0
    for test in _docstring_tests():
        report = []
        result = runner.run(test, out=report.append)
        attempted += result.attempted
        if result.failed:
            failures.append(test.name)
            reports.append("".join(report))
    assert attempted > 1000
    assert not failures, f"docstring examples that fail: {failures}\n" + "\n".join(reports)
