"""The ops declared once in torcia._ops: every table core reads by name is filled from
the declaration, and the schema says what introspection of the kernel and the derivative
formula would have said."""

import pytest

from torcia import _meta, _opdef, _oprecords, _ops, amp, library, ops
from torcia._numpy_backend import Reference
from torcia._tensor import DECOMPOSITIONS

DECLARED = _ops.DECLARED


def test_the_activations_are_declared_in_the_order_of_the_nn_list():
    names = list(DECLARED)
    assert names[:3] == ["leaky_relu", "elu", "selu"]
    assert ops.NN[:len(names)] == tuple(names)
    assert "activation_backward" in names and "softmax" not in names


@pytest.mark.parametrize("name", list(DECLARED))
def test_each_table_holds_what_the_declaration_says(name):
    op = DECLARED[name]
    assert getattr(Reference, name) is op.kernel
    assert Reference().table()[name].__func__ is op.kernel
    assert _meta.SHAPES[name] is op.shape
    assert DECOMPOSITIONS.get(name) is op.decomposition
    assert (name in ops.FLOATING_INPUTS) is op.floating_inputs
    assert (name in ops.NOT_DIFFERENTIABLE) is (not op.differentiable)
    for device_type in ("cpu", "cuda"):
        assert amp.op_policy(device_type, name) == op.autocast.get(device_type)
    record = library.get_op(name)
    assert (record.inputs, record.params) == (op.inputs, op.params)
    assert record.kernel.__func__ is op.kernel and record.decomposition is op.decomposition
    assert record.group == op.group and record.primitive is (op.decomposition is None)


@pytest.mark.parametrize("name", list(DECLARED))
def test_the_schema_agrees_with_the_kernel_and_the_derivative_formula(name):
    # what the record builder reads for an undeclared op: a schema that drifted from the
    # kernel's signature or the formula's argument names fails here
    pytest.importorskip("torcia.autograd")  # the formulas are torcia-autograd's
    op = DECLARED[name]
    kernel = Reference().table()[name]
    inputs, params = _oprecords._signature(kernel, op.group)
    backward = library.autograd_engine().derivative(name)
    if backward is not None:
        inputs, params = _oprecords._schema_from_formula(backward, inputs, params)
    assert (op.inputs, op.params) == (inputs, params)


def test_softplus_carries_its_autocast_policy():
    assert amp.op_policy("cuda", "softplus") == "float32"
    assert amp.op_policy("cpu", "softplus") is None


def test_parse_schema():
    assert _opdef.parse_schema("f(Tensor a, Tensor? b, str how, **params) -> Tensor") == (
        "f", ("a", "b", "how"), {})
    assert _opdef.parse_schema("g(Tensor x, *, float eps=1e-5, int[] dims=(1, 2)) -> Tensor") \
        == ("g", ("x",), {"eps": 1e-5, "dims": (1, 2)})
    with pytest.raises(ValueError, match="has no default"):
        _opdef.parse_schema("h(Tensor x, *, float eps) -> Tensor")
    with pytest.raises(ValueError, match="expected 'name"):
        _opdef.parse_schema("not a schema")


def test_define_refuses_an_unknown_autocast_policy():
    with pytest.raises(ValueError, match="autocast policy 'fast'"):
        _opdef.define("f(Tensor x) -> Tensor", lambda self, a: a, autocast={"cuda": "fast"})
