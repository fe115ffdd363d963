"""Every example in torcia-nn's docstrings runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest

import torcia
import torcia.nn

MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(torcia.nn.__path__, "torcia.nn.")
    if name != "torcia.nn.functional"  # its examples are tested with it
) + ["torcia.nn", "torcia.serialization"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    torcia.manual_seed(0)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
