"""Autograd's tables of ops name op records: a row for a name no op has would never be read
(the records take their backward and forward formulas from the derivative tables, and
op_records() loads autograd to build them, so these tables are resolved here rather than
when they are built)."""

from __future__ import annotations

import pytest

from torcia import library
from torcia.autograd import checkpoint, derivatives, forward_derivatives, graph

# the nodes the engine records itself, not ops: copies into a view, moves between devices
ENGINE_NODES = forward_derivatives._ENGINE_OPS

TABLES = {
    "torcia.autograd.derivatives.TABLE": derivatives.TABLE,
    "torcia.autograd.forward_derivatives.JVP": forward_derivatives.JVP,
    "torcia.autograd.forward_derivatives.PIECEWISE_CONSTANT":
        dict.fromkeys(forward_derivatives.PIECEWISE_CONSTANT),
    # PyTorch's names of the nodes (grad_fn.name())
    "torcia.autograd.graph._NAMES": graph._NAMES,
    "torcia.autograd.graph._SECOND_FORM": dict.fromkeys(graph._SECOND_FORM),
    "torcia.autograd.graph._TENSOR_FORM": graph._TENSOR_FORM,
    "torcia.autograd.checkpoint.SAC_IGNORED_OPS": dict.fromkeys(checkpoint.SAC_IGNORED_OPS),
}


def _resolved(name, table):
    """``table`` (an autograd table) with its names resolved to the op records."""
    return library.op_table(name, {op: row for op, row in table.items()
                                   if op not in ENGINE_NODES})


def _autograds_own(table):
    """The rows autograd writes itself. An op a plugin defines gets its formulas in the
    tables when the engine meets it, and they stay after the plugin is unregistered (as
    the tests that define ops in this process do): those rows name no op then."""
    def own(row):
        fn = getattr(row, "fn", row)
        if not callable(fn):
            # a name or a flag is the row itself; a plugin op's row without gradients
            # holds fn None
            return fn is row
        return fn.__module__.startswith("torcia.autograd.")
    return {op: row for op, row in table.items() if own(row)}


@pytest.mark.parametrize("name", TABLES)
def test_every_autograd_table_builds_against_the_installed_op_records(name):
    table = _autograds_own(TABLES[name])
    assert _resolved(name, table).keys() == table.keys() - ENGINE_NODES


def test_the_engine_nodes_are_rows_and_no_op():
    assert ENGINE_NODES <= set(derivatives.TABLE)
    assert not ENGINE_NODES & set(library.op_records())


@pytest.mark.parametrize("name", TABLES)
def test_a_stale_name_in_an_autograd_table_is_refused(name):
    with pytest.raises(KeyError, match=f"{name}: no op named 'no_such_op'"):
        _resolved(name, {**_autograds_own(TABLES[name]), "no_such_op": None})
