"""dtypes and PyTorch's type promotion: a hand-written table of ``promote_types``, the
three priority levels of ``result_type`` (dimensioned tensors, 0-dim tensors, Python
scalars), ``can_cast``, the default dtype, and parity with torch where it is installed."""

import itertools
import math

import numpy as np
import pytest

import torcia

ORDER = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
         "float32", "float64"]
SHORT = {"b": "bool", "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32",
         "i64": "int64", "f16": "float16", "bf16": "bfloat16", "f32": "float32",
         "f64": "float64"}
# promote_types(row, column), written out from PyTorch's documented rules
TABLE = """
b    u8   i8   i16  i32  i64  f16  bf16 f32  f64
u8   u8   i16  i16  i32  i64  f16  bf16 f32  f64
i8   i16  i8   i16  i32  i64  f16  bf16 f32  f64
i16  i16  i16  i16  i32  i64  f16  bf16 f32  f64
i32  i32  i32  i32  i32  i64  f16  bf16 f32  f64
i64  i64  i64  i64  i64  i64  f16  bf16 f32  f64
f16  f16  f16  f16  f16  f16  f16  f32  f32  f64
bf16 bf16 bf16 bf16 bf16 bf16 f32  bf16 f32  f64
f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
f64  f64  f64  f64  f64  f64  f64  f64  f64  f64
"""
EXPECTED = {
    (ORDER[i], ORDER[j]): SHORT[cell]
    for i, row in enumerate(TABLE.split("\n")[1:-1])
    for j, cell in enumerate(row.split())
}


def dt(name):
    return getattr(torcia, name)


@pytest.mark.parametrize("a, b", list(itertools.product(ORDER, ORDER)))
def test_promote_types_table(a, b):
    assert torcia.promote_types(dt(a), dt(b)) is dt(EXPECTED[a, b])


def test_table_is_symmetric():
    for a, b in itertools.product(ORDER, ORDER):
        assert EXPECTED[a, b] == EXPECTED[b, a]


@pytest.mark.parametrize("tensor_dtype, scalar, expected", [
    # a Python scalar only changes the category, never the size within one
    ("uint8", 1000, "uint8"), ("int8", 1, "int8"), ("int32", 2.5, "float32"),
    ("int64", True, "int64"), ("bool", 1, "int64"), ("bool", 1.0, "float32"),
    ("float16", 2.5, "float16"), ("float64", 1, "float64"), ("bfloat16", 2.0, "bfloat16"),
    ("bool", True, "bool"),
])
def test_tensor_and_python_scalar(tensor_dtype, scalar, expected):
    x = torcia.ones(2, dtype=dt(tensor_dtype))
    assert torcia.result_type(x, scalar) is dt(expected)
    assert (x + scalar).dtype is dt(expected)
    assert (scalar + x).dtype is dt(expected)


@pytest.mark.parametrize("dim_dtype, zero_dtype, expected", [
    # a 0-dim tensor counts like a scalar, unless its category is higher
    ("uint8", "int64", "uint8"), ("int32", "int64", "int32"), ("float16", "float64", "float16"),
    ("int64", "float64", "float64"), ("int8", "float16", "float16"), ("bool", "int32", "int32"),
    ("uint8", "bool", "uint8"), ("float32", "int64", "float32"),
])
def test_dimensioned_and_zero_dim(dim_dtype, zero_dtype, expected):
    x = torcia.ones(3, dtype=dt(dim_dtype))
    z = torcia.tensor(1, dtype=dt(zero_dtype))
    assert torcia.result_type(x, z) is dt(expected)
    assert (x * z).dtype is dt(expected)
    assert (z * x).dtype is dt(expected)


def test_zero_dim_pair_promotes_normally():
    a = torcia.tensor(1, dtype=torcia.uint8)
    b = torcia.tensor(1, dtype=torcia.int8)
    assert (a + b).dtype is torcia.int16


def test_float_op_of_integers_takes_a_zero_dim_operand_straight_to_float():
    # uint8 / tensor(-1): the result is float, and -1 goes to it as -1.0, not through
    # uint8 (255), as torch's
    x = torcia.tensor([0, 1, 2], dtype=torcia.uint8)
    minus = torcia.tensor(-1)
    assert (x / minus).tolist() == [0.0, -1.0, -2.0]
    assert (minus / x)[1:].tolist() == [-1.0, -0.5]
    assert torcia.atan2(x, minus)[0].item() == pytest.approx(math.pi)
    assert (torcia.tensor([1, 2], dtype=torcia.int8) / torcia.tensor(1000)).tolist() == \
        pytest.approx([0.001, 0.002])
    with torcia.profiler.profile():  # the dispatch modes' path
        assert (x / minus).tolist() == [0.0, -1.0, -2.0]


@pytest.mark.parametrize("name", ["bool", "uint8", "int8", "int32", "int64"])
def test_true_division_of_integers_gives_default_float(name):
    x = torcia.tensor([3, 4], dtype=dt(name)) if name != "bool" else torcia.tensor([True])
    assert (x / x).dtype is torcia.float32
    torcia.set_default_dtype(torcia.float64)
    try:
        assert (x / x).dtype is torcia.float64
        assert torcia.tensor([1.5]).dtype is torcia.float64
        assert (torcia.tensor([1]) + 1.5).dtype is torcia.float64
    finally:
        torcia.set_default_dtype(torcia.float32)


def test_default_dtype():
    assert torcia.get_default_dtype() is torcia.float32
    assert torcia.tensor(1.5).dtype is torcia.float32
    assert torcia.tensor(1).dtype is torcia.int64
    assert torcia.tensor(True).dtype is torcia.bool
    assert torcia.tensor(np.float64(1.5)).dtype is torcia.float64
    with pytest.raises(TypeError, match="only floating-point types"):
        torcia.set_default_dtype(torcia.int64)


@pytest.mark.parametrize("src, dst, ok", [
    ("float32", "int32", False), ("int32", "float16", True), ("float64", "float32", True),
    ("bool", "uint8", True), ("int8", "bool", False), ("float16", "bool", False),
    ("int64", "uint8", True), ("uint8", "int8", True),
])
def test_can_cast(src, dst, ok):
    assert torcia.can_cast(dt(src), dt(dst)) is ok


def test_inplace_refuses_a_lossy_category_change():
    x = torcia.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        x += 1.5
    y = torcia.tensor([1.0, 2.0], dtype=torcia.float16)
    y += torcia.tensor([1.0], dtype=torcia.float64)  # same category: allowed, stays float16
    assert y.dtype is torcia.float16 and y.tolist() == [2.0, 3.0]


def test_promote_types_names_a_bad_argument():
    with pytest.raises(TypeError, match="promote_types\\(\\): argument 'type2' \\(position 2\\) "
                                        "must be torcia.dtype, not str"):
        torcia.promote_types(torcia.float32, "float64")


def test_dtype_attributes():
    assert torcia.float16.is_floating_point and torcia.bfloat16.is_floating_point
    assert not torcia.int8.is_floating_point and torcia.int8.is_signed
    assert not torcia.uint8.is_signed
    assert torcia.float64.itemsize == 8 and torcia.bfloat16.itemsize == 2
    assert repr(torcia.float32) == "torcia.float32"
    assert torcia.float is torcia.float32 and torcia.double is torcia.float64
    assert torcia.long is torcia.int64 and torcia.half is torcia.float16


def test_bfloat16_tensors():
    pytest.importorskip("ml_dtypes")
    x = torcia.tensor([1.0, 2.5], dtype=torcia.bfloat16)
    assert x.dtype is torcia.bfloat16
    assert (x + x).dtype is torcia.bfloat16
    assert (x + x).tolist() == [2.0, 5.0]
    assert (x + torcia.ones(2, dtype=torcia.float16)).dtype is torcia.float32


# ----- parity with torch -------------------------------------------------------------------


@pytest.mark.torch
def test_promotion_matches_torch():
    torch = pytest.importorskip("torch")
    for a, b in itertools.product(ORDER, ORDER):
        ta, tb = getattr(torch, a), getattr(torch, b)
        assert torch.promote_types(ta, tb) == getattr(torch, EXPECTED[a, b])
        assert torch.can_cast(ta, tb) == torcia.can_cast(dt(a), dt(b)), (a, b)
        for shape_a, shape_b in (((2,), ()), ((), (2,)), ((), ())):
            expected = torch.result_type(torch.ones(shape_a, dtype=ta),
                                         torch.ones(shape_b, dtype=tb))
            got = torcia.result_type(torcia.ones(shape_a, dtype=dt(a)),
                                     torcia.ones(shape_b, dtype=dt(b)))
            assert got.name == str(expected).split(".")[1], (a, b, shape_a, shape_b)
        for scalar in (True, 3, 2.5):
            expected = torch.result_type(torch.ones(2, dtype=ta), scalar)
            got = torcia.result_type(torcia.ones(2, dtype=dt(a)), scalar)
            assert got.name == str(expected).split(".")[1], (a, scalar)


@pytest.mark.torch
@pytest.mark.parametrize("op", ["add", "mul", "sub", "div", "maximum", "eq", "remainder"])
def test_binary_result_dtypes_match_torch(op):
    torch = pytest.importorskip("torch")
    numeric = [n for n in ORDER if n != "bool"]
    for a, b in itertools.product(numeric, numeric):
        ours = getattr(torcia, op)(torcia.ones(2, dtype=dt(a)), torcia.ones(2, dtype=dt(b)))
        theirs = getattr(torch, op)(torch.ones(2, dtype=getattr(torch, a)),
                                    torch.ones(2, dtype=getattr(torch, b)))
        assert ours.dtype.name == str(theirs.dtype).split(".")[1], (op, a, b)
