"""The examples in the public docstrings run and give what they show."""

import doctest
import importlib

import pytest

MODULES = ["torcia.data", "torcia.data.dataset", "torcia.data.sampler",
           "torcia.data.distributed", "torcia.data._collate", "torcia.data.dataloader",
           "torcia.data._worker", "torcia.data.datapipes", "torcia.data._fetch"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
