"""Every example in torcia-distributions' docstrings runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import torcia
import torcia.distributions

MODULES = sorted(["torcia.distributions"] + [
    f"torcia.distributions.{m.name}"
    for m in pkgutil.iter_modules(torcia.distributions.__path__)])


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    torcia.manual_seed(0)
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
