"""The ops declared once in torcia._ops: every table core reads by name is filled from
the declaration, and the schema says what introspection of the kernel and the derivative
formula would have said."""

import types

import numpy as np
import pytest

import torcia
from torcia import _meta, _numpy_backend, _opdef, _oprecords, _ops, amp, backend, library, ops
from torcia._numpy_backend import Reference
from torcia._ops._common import ArrayFunction
from torcia._tensor import DECOMPOSITIONS

DECLARED = _ops.DECLARED


def test_each_list_of_ops_starts_with_its_declared_ops_in_order():
    groups = ("unary_float", "unary_same", "unary_bool", "binary", "binary_float", "compare",
              "reduce", "reduce_index", "scan", "nn", "view", "movement")
    for group in groups:
        names = _ops.names(group)
        assert getattr(ops, group.upper())[:len(names)] == names
    # the elementwise lists are declared whole
    assert ops.UNARY_FLOAT == _ops.names("unary_float") and ops.COMPARE[0] == "eq"
    # the reductions and scans too
    assert ops.REDUCE[:3] == ("sum", "mean", "prod") and ops.SCAN[-1] == "logcumsumexp"
    assert ops.REDUCE_INDEX == _ops.names("reduce_index")
    assert _ops.names("nn")[:3] == ("leaky_relu", "elu", "selu")
    assert "activation_backward" in DECLARED
    # softmax and the norms keep PyTorch's float32 under CUDA autocast
    assert all(DECLARED[name].autocast == {"cuda": "float32"}
               for name in ("softmax", "log_softmax", "layer_norm", "rms_norm"))
    # the views and movement are declared whole too
    assert ops.VIEW == _ops.names("view") and ops.MOVEMENT == _ops.names("movement")


def _declared_kernel(op):
    """What the reference table holds for ``op``: the array module's function itself for
    an ArrayFunction, else the method."""
    if isinstance(op.kernel, ArrayFunction):
        return getattr(np, op.kernel.attr)
    return op.kernel


def _unwrapped(kernel):
    """The declared kernel behind a table entry (the refusing wrapper's, a bound method's
    function: a kernel's own decorator, linalg's half_in_float32, stays)."""
    if not hasattr(kernel, "__func__"):
        kernel = getattr(kernel, "__wrapped__", kernel)
    return getattr(kernel, "__func__", kernel)


@pytest.mark.parametrize("name", list(DECLARED))
def test_each_table_holds_what_the_declaration_says(name):
    op = DECLARED[name]
    assert getattr(Reference, name) is op.kernel
    assert _unwrapped(Reference().table()[name]) is _declared_kernel(op)
    assert _meta.SHAPES.get(name) is op.shape  # None: data-dependent (masked_select)
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
    assert record.random is op.random and (name in ops.RANDOM) is op.random


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
    if op.group in _oprecords._ARITY:
        # a family's arity: the schema may name the inputs as PyTorch does (pow's exponent)
        inputs = op.inputs[:len(inputs)]
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
            dim = {"dim": 0} if name in ("max_dim", "min_dim", "cummax", "cummin") else {}
            with pytest.raises(type(expected)) as raised:
                op.decomposition(*[torcia.from_numpy(a)] * len(op.inputs), **dim)
            assert str(raised.value) == str(expected)


@pytest.mark.parametrize("name", [n for n, op in DECLARED.items() if op.answers_early])
def test_what_pytorch_answers_early_is_not_refused(name):
    # a scan of an empty complex tensor, the extreme over a dim of one: PyTorch answers
    # before it looks for the dtype's kernel, so the refusal lets them through
    op = DECLARED[name]
    empty = np.zeros((0, 2), dtype=np.complex64)
    assert op.answers_early(empty) and not op.answers_early(np.zeros(2, np.complex64))
    assert name in _numpy_backend._ANSWERED_EARLY
    with pytest.raises(NotImplementedError):
        Reference().table()[name](np.zeros(2, np.complex64), dim=0)
    try:
        Reference().table()[name](empty, dim=0)
    except NotImplementedError:
        pytest.fail(f"{name} refused an input PyTorch answers early")
    except ValueError:  # NumPy's own answer (an empty reduction): not the refusal
        pass


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
    # several returns: the arguments end before the arrow
    assert _opdef.parse_schema("m(Tensor x, *, int dim=-1) -> (Tensor, Tensor)") == (
        "m", ("x",), {"dim": -1})
    with pytest.raises(ValueError, match="has no default"):
        _opdef.parse_schema("h(Tensor x, *, float eps) -> Tensor")
    with pytest.raises(ValueError, match="expected 'name"):
        _opdef.parse_schema("not a schema")


def test_define_refuses_an_unknown_autocast_policy():
    with pytest.raises(ValueError, match="autocast policy 'fast'"):
        _opdef.define("f(Tensor x) -> Tensor", lambda self, a: a, autocast={"cuda": "fast"})


def test_the_random_ops_are_told_by_their_declarations():
    # one list, made from the declarations: what the check of overriding kernels leaves out
    # and what the conformance kit checks by what the values may be (each declares them)
    assert ops.RANDOM == {"rand", "randn", "randint", "randperm", "normal", "uniform",
                          "bernoulli", "multinomial", "dropout_mask"}
    assert {n for n, r in library.op_records().items() if r.random} == ops.RANDOM
    assert not ops.RANDOM & backend._checkable() and "zeros" in backend._checkable()
    assert all(library.op_records()[n].draws is not None for n in ops.RANDOM)
    assert ops.CREATION == _ops.names("creation") and ops.CREATION[:3] == ("zeros", "ones",
                                                                           "full")


def _seeded():
    return np.random.default_rng(1234)


_DRAWS = [("uniform", {"low": -2.0, "high": 3.0}), ("uniform", {"low": -0.0, "high": 0.0}),
          ("normal", {"mean": 1.0, "std": 2.0}), ("normal", {"mean": 0.0, "std": 1.0}),
          ("dropout_mask", {"p": 0.3}), ("dropout_mask", {"p": 0.0})]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(3, 4), (), (0,)])
def test_the_random_decompositions_draw_the_reference_kernels_numbers(dtype, shape):
    # the same generator, the same draws, the same float64 operations, one rounding: equal
    # bit for bit (signed zeros too), and the generator left in the same state
    dt = getattr(torcia, dtype).to_numpy()
    reference = Reference().table()
    for op, params in _DRAWS:
        want_rng, got_rng = _seeded(), _seeded()
        want = reference[op](shape=shape, dtype=dt, rng=want_rng, **params)
        got = DECOMPOSITIONS[op](shape=shape, dtype=dt, rng=got_rng, device="cpu", **params)
        assert got.numpy().dtype == want.dtype and got.shape == want.shape, op
        assert got.numpy().tobytes() == want.tobytes(), (op, params)
        assert want_rng.random() == got_rng.random(), op
    p = np.random.default_rng(0).random(shape).astype(dt)
    want = reference["bernoulli"](p, rng=_seeded())
    got = DECOMPOSITIONS["bernoulli"](torcia.from_numpy(p), rng=_seeded())
    assert got.numpy().dtype == want.dtype and got.numpy().tobytes() == want.tobytes()


def test_a_large_draw_decomposes_to_the_reference_kernels_blocks():
    # the float32 kernel draws in blocks of 2**20; the decomposition in one float64 draw
    shape, dt = ((1 << 20) + 7,), np.dtype(np.float32)
    want = Reference().table()["uniform"](shape=shape, low=-1.0, high=1.0, dtype=dt,
                                           rng=_seeded())
    got = DECOMPOSITIONS["uniform"](shape=shape, low=-1.0, high=1.0, dtype=dt, rng=_seeded(),
                                    device="cpu")
    assert got.numpy().tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8, np.float16])
@pytest.mark.parametrize("shapes", [((7,), (5,)), ((7,), ()), ((7,), (2, 3)), ((3, 6), (3, 4)),
                                    ((2, 3, 5), (2, 3, 4)), ((0,), (3,)), ((4,), (0,))])
def test_the_searchsorted_decomposition_is_the_reference_kernel_on_sorted_sequences(dtype,
                                                                                   shapes):
    # NaN sorts last, as NumPy's (and -0.0 equals 0.0)
    rng = np.random.default_rng(0)
    reference, decomposition = Reference().table()["searchsorted"], DECOMPOSITIONS[
        "searchsorted"]
    for trial in range(6):
        seq = rng.integers(-4, 5, shapes[0]).astype(np.float64)
        values = rng.integers(-5, 6, shapes[1]).astype(np.float64)
        if trial % 2 and np.dtype(dtype).kind == "f":
            seq.reshape(-1)[: min(seq.size, 1)] = np.nan
            values.reshape(-1)[: min(values.size, 2)] = (np.nan, -0.0)[:min(values.size, 2)]
        seq, values = np.sort(seq.astype(dtype), -1), values.astype(dtype)
        for right in (False, True):
            for out_int32 in (False, True):
                want = reference(seq, values, right=right, out_int32=out_int32)
                got = decomposition(torcia.from_numpy(seq), torcia.from_numpy(values),
                                    right=right, out_int32=out_int32).numpy()
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_array_equal(got, want)
