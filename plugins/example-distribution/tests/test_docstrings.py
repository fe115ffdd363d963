"""The plugin's docstring examples run and print what they show."""

import doctest

import torcia_example_distribution


def test_docstring_examples():
    result = doctest.testmod(torcia_example_distribution)
    assert result.failed == 0 and result.attempted > 0
