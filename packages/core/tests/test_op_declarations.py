"""The ops declared once in torcia._ops: every table core reads by name is filled from
the declaration, and the schema says what introspection of the kernel and the derivative
formula would have said."""

import types

import numpy as np
import pytest

import torcia
from torcia import _meta, _numpy_backend, _opdef, _oprecords, _ops, amp, library, ops
from torcia._numpy_backend import Reference
from torcia._ops._common import ArrayFunction
from torcia._tensor import DECOMPOSITIONS

DECLARED = _ops.DECLARED


def test_each_list_of_ops_starts_with_its_declared_ops_in_order():
    groups = ("unary_float", "unary_same", "unary_bool", "binary", "binary_float", "compare",
              "nn")
    for group in groups:
        names = _ops.names(group)
        assert getattr(ops, group.upper())[:len(names)] == names
    # the elementwise lists are declared whole
    assert ops.UNARY_FLOAT == _ops.names("unary_float") and ops.COMPARE[0] == "eq"
    assert _ops.names("nn")[:3] == ("leaky_relu", "elu", "selu")
    assert "activation_backward" in DECLARED and "softmax" not in DECLARED


def _declared_kernel(op):
    """What the reference table holds for ``op``: the array module's function itself for
    an ArrayFunction, else the method."""
    if isinstance(op.kernel, ArrayFunction):
        return getattr(np, op.kernel.attr)
    return op.kernel


def _unwrapped(kernel):
    """The declared kernel behind a table entry (the refusing wrapper's, a bound method's
    function)."""
    kernel = getattr(kernel, "__wrapped__", kernel)
    return getattr(kernel, "__func__", kernel)


@pytest.mark.parametrize("name", list(DECLARED))
def test_each_table_holds_what_the_declaration_says(name):
    op = DECLARED[name]
    assert getattr(Reference, name) is op.kernel
    assert _unwrapped(Reference().table()[name]) is _declared_kernel(op)
    assert _meta.SHAPES[name] is op.shape
    assert DECOMPOSITIONS.get(name) is op.decomposition
    assert (name in ops.FLOATING_INPUTS) is op.floating_inputs
    assert (name in ops.NOT_DIFFERENTIABLE) is (not op.differentiable)
    for device_type in ("cpu", "cuda"):
        assert amp.op_policy(device_type, name) == op.autocast.get(device_type)
    record = library.get_op(name)
    assert (record.inputs, record.params) == (op.inputs, op.params)
    assert _unwrapped(record.kernel) is _declared_kernel(op)
    assert record.decomposition is op.decomposition
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
    if backward is not None and op.group not in _oprecords._ARITY:  # as the builder reads
        inputs, params = _oprecords._schema_from_formula(backward, inputs, params)
    assert (op.inputs, op.params) == (inputs, params)


def test_softplus_carries_its_autocast_policy():
    assert amp.op_policy("cuda", "softplus") == "float32"
    assert amp.op_policy("cpu", "softplus") is None
    assert amp.op_policy("cuda", "exp") == "float32" and amp.op_policy("cuda", "sin") is None


@pytest.mark.parametrize("name", [n for n, op in DECLARED.items() if op.refuses])
def test_the_declared_refusals_are_raised_by_kernel_and_decomposition(name):
    op = DECLARED[name]
    kernel = Reference().table()[name]
    for kind in op.refuses:
        a = np.array([1, 2], dtype={"c": np.complex64, "b": bool, "i": np.int64,
                                    "u": np.uint8}[kind])
        expected = _numpy_backend.refusal(name, a.dtype)
        assert type(expected) is op.refuses[kind][0]
        with pytest.raises(type(expected)) as raised:
            kernel(*[a] * len(op.inputs))
        assert str(raised.value) == str(expected)
        if op.decomposition is not None:
            with pytest.raises(type(expected)) as raised:
                op.decomposition(*[torcia.from_numpy(a)] * len(op.inputs))
            assert str(raised.value) == str(expected)


def test_an_array_function_reads_the_backends_array_module():
    # torcia-cuda's subclass sets xp = cupy: its kernels are CuPy's functions
    fake = types.SimpleNamespace(exp=lambda a: "fake exp", arcsin=lambda a: "fake arcsin")
    on_fake = type("OnFake", (Reference,), {"xp": fake})()
    assert on_fake.exp(None) == "fake exp" and on_fake.asin(None) == "fake arcsin"
    assert Reference().table()["exp"] is np.exp


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
