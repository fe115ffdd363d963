"""Elementwise math: unary functions, binary ops with broadcasting, operators (reflected
and in-place), and the integer rules, against NumPy/SciPy, hand values and torch."""

import math
import operator

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import torcia
from torcia import ops

X = np.array([-2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7], dtype=np.float64)
POS = np.array([0.1, 0.5, 1.0, 2.0, 7.5], dtype=np.float64)
UNIT = np.array([-0.9, -0.5, 0.0, 0.3, 0.8], dtype=np.float64)

UNARY_TRUTH = {
    "exp": (np.exp, X), "exp2": (np.exp2, X), "log": (np.log, POS), "log2": (np.log2, POS),
    "log10": (np.log10, POS), "log1p": (np.log1p, POS), "expm1": (np.expm1, X),
    "sqrt": (np.sqrt, POS), "rsqrt": (lambda a: 1 / np.sqrt(a), POS),
    "reciprocal": (lambda a: 1 / a, POS), "sin": (np.sin, X), "cos": (np.cos, X),
    "tan": (np.tan, X), "asin": (np.arcsin, UNIT), "acos": (np.arccos, UNIT),
    "atan": (np.arctan, X), "sinh": (np.sinh, X), "cosh": (np.cosh, X), "tanh": (np.tanh, X),
    "asinh": (np.arcsinh, X), "acosh": (np.arccosh, POS + 1), "atanh": (np.arctanh, UNIT),
    "sigmoid": (lambda a: 1 / (1 + np.exp(-a)), X), "erf": (sp.erf, X), "erfc": (sp.erfc, X),
    "erfinv": (sp.erfinv, UNIT), "lgamma": (sp.gammaln, POS), "digamma": (sp.digamma, POS),
    "neg": (np.negative, X), "abs": (np.abs, X), "sign": (np.sign, X), "square": (np.square, X),
    "floor": (np.floor, X), "ceil": (np.ceil, X), "trunc": (np.trunc, X),
    "frac": (lambda a: a - np.trunc(a), X), "relu": (lambda a: np.maximum(a, 0), X),
}


def test_every_unary_float_and_same_op_has_a_truth_here():
    assert set(ops.UNARY_FLOAT + ops.UNARY_SAME) - {"bitwise_not"} == set(UNARY_TRUTH)


@pytest.mark.parametrize("name", sorted(UNARY_TRUTH))
@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64])
def test_unary_against_numpy(name, dtype):
    fn, data = UNARY_TRUTH[name]
    x = torcia.tensor(data, dtype=dtype)
    out = getattr(torcia, name)(x)
    assert out.dtype is dtype
    rtol = 1e-6 if dtype is torcia.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), fn(data), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(getattr(x, name)().numpy(), out.numpy())


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "sigmoid", "log1p"])
def test_unary_float_promotes_integers(name):
    out = getattr(torcia, name)(torcia.tensor([1, 2]))
    assert out.dtype is torcia.float32
    np.testing.assert_allclose(out.numpy(), UNARY_TRUTH[name][0](np.array([1.0, 2.0])),
                               rtol=1e-6)


def test_unary_same_keeps_integer_dtype():
    x = torcia.tensor([-3, 0, 2], dtype=torcia.int32)
    assert torcia.abs(x).tolist() == [3, 0, 2] and torcia.abs(x).dtype is torcia.int32
    assert torcia.neg(x).tolist() == [3, 0, -2]
    assert torcia.sign(x).tolist() == [-1, 0, 1]
    assert torcia.bitwise_not(x).tolist() == [2, -1, -3]
    assert (~torcia.tensor([True, False])).tolist() == [False, True]


def test_sigmoid_is_stable_at_extremes():
    out = torcia.sigmoid(torcia.tensor([-1000.0, 1000.0]))
    assert out.tolist() == [0.0, 1.0]


def test_bool_predicates():
    x = torcia.tensor([1.0, math.nan, math.inf, -math.inf, -0.0])
    assert torcia.isnan(x).tolist() == [False, True, False, False, False]
    assert torcia.isinf(x).tolist() == [False, False, True, True, False]
    assert torcia.isfinite(x).tolist() == [True, False, False, False, True]
    assert torcia.signbit(x).tolist() == [False, False, False, True, True]
    assert torcia.logical_not(torcia.tensor([0, 2])).tolist() == [True, False]


# ----- binary ------------------------------------------------------------------------------

BINARY_TRUTH = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "maximum": np.maximum, "minimum": np.minimum, "fmax": np.fmax, "fmin": np.fmin,
    "atan2": np.arctan2, "hypot": np.hypot, "pow": np.power, "remainder": np.remainder,
    "fmod": np.fmod, "floor_divide": np.floor_divide, "eq": np.equal, "ne": np.not_equal,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "xlogy": lambda a, b: sp.xlogy(a, b),
}
SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((), (2, 2)), ((4, 1, 3), (5, 1))]


@pytest.mark.parametrize("name", sorted(BINARY_TRUTH))
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_broadcasting_against_numpy(name, shapes):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 3, shapes[0])
    b = rng.uniform(0.5, 3, shapes[1])
    out = getattr(torcia, name)(torcia.tensor(a), torcia.tensor(b))
    expected = BINARY_TRUTH[name](a, b)
    assert tuple(out.shape) == np.broadcast_shapes(a.shape, b.shape)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


def test_operators_and_reflected_operators():
    a = torcia.tensor([1.0, 2.0, 4.0])
    assert (a + 1).tolist() == [2, 3, 5] and (1 + a).tolist() == [2, 3, 5]
    assert (a - 1).tolist() == [0, 1, 3] and (1 - a).tolist() == [0, -1, -3]
    assert (a * 2).tolist() == [2, 4, 8] and (2 * a).tolist() == [2, 4, 8]
    assert (a / 2).tolist() == [0.5, 1, 2] and (2 / a).tolist() == [2, 1, 0.5]
    assert (a // 3).tolist() == [0, 0, 1] and (7 // a).tolist() == [7, 3, 1]
    assert (a % 3).tolist() == [1, 2, 1] and (7 % a).tolist() == [0, 1, 3]
    assert (a ** 2).tolist() == [1, 4, 16] and (2 ** a).tolist() == [2, 4, 16]
    assert (-a).tolist() == [-1, -2, -4] and (+a) is a and abs(-a).tolist() == [1, 2, 4]
    assert (a @ a).item() == 21.0
    assert (np.float64(2.0) * a).tolist() == [2, 4, 8]
    assert (a == 2).tolist() == [False, True, False]
    assert (2 < a).tolist() == [False, False, True]
    assert (a != torcia.tensor([1.0, 0.0, 4.0])).tolist() == [False, True, False]
    i = torcia.tensor([6, 3])
    assert (i & 5).tolist() == [4, 1] and (i | 1).tolist() == [7, 3] and (i ^ 2).tolist() == [4, 1]
    t, f = torcia.tensor([True, True]), torcia.tensor([True, False])
    assert (t & f).tolist() == [True, False] and (t ^ f).tolist() == [False, True]


def test_in_place_operators_keep_identity_and_bump_version():
    a = torcia.tensor([1.0, 2.0])
    ident = id(a)
    for op, value, expected in ((operator.iadd, 1, [2, 3]), (operator.isub, 0.5, [1.5, 2.5]),
                                (operator.imul, 2, [3, 5]), (operator.itruediv, 2, [1.5, 2.5]),
                                (operator.ipow, 2, [2.25, 6.25]), (operator.imod, 2,
                                                                   [0.25, 0.25])):
        a = op(a, value)
        assert a.tolist() == expected and id(a) == ident
    assert a._version == 6
    b = torcia.tensor([1.0, 2.0])
    b.mul_(3).add_(1)
    assert b.tolist() == [4.0, 7.0]
    b.clamp_(max=5).neg_().exp_()
    np.testing.assert_allclose(b.numpy(), np.exp([-4.0, -5.0]), rtol=1e-6)


def test_in_place_broadcast_must_fit_self():
    a = torcia.zeros(3)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the "
                                           r"broadcast shape \[2, 3\]"):
        a.add_(torcia.ones(2, 3))


def test_broadcast_mismatch_message():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                                           r"tensor b \(2\) at non-singleton dimension 1"):
        torcia.ones(2, 3) + torcia.ones(3, 2)


def test_integer_division_rules():
    a = torcia.tensor([7, -7, 7, -7])
    b = torcia.tensor([2, 2, -2, -2])
    assert (a / b).tolist() == [3.5, -3.5, -3.5, 3.5]
    assert torcia.div(a, b, rounding_mode="trunc").tolist() == [3, -3, -3, 3]
    assert torcia.div(a, b, rounding_mode="floor").tolist() == [3, -4, -4, 3]
    assert (a // b).tolist() == [3, -4, -4, 3]
    assert torcia.remainder(a, b).tolist() == [1, 1, -1, -1]  # the divisor's sign
    assert torcia.fmod(a, b).tolist() == [1, -1, 1, -1]  # the dividend's sign
    assert torcia.div(a, b, rounding_mode="floor").dtype is torcia.int64
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        torcia.tensor([2]) ** -1
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        torcia.tensor([True]) - torcia.tensor([False])
    with pytest.raises(ValueError, match="rounding_mode"):
        torcia.div(a, b, rounding_mode="round")


def test_clamp_lerp_round_and_friends():
    x = torcia.tensor([-2.0, 0.5, 3.0])
    assert torcia.clamp(x, -1, 1).tolist() == [-1.0, 0.5, 1.0]
    assert x.clamp(min=0).tolist() == [0.0, 0.5, 3.0]
    assert x.clamp(max=torcia.tensor([0.0, 0.0, 5.0])).tolist() == [-2.0, 0.0, 3.0]
    assert torcia.clamp(torcia.tensor([1, 5]), 0, 3).tolist() == [1, 3]
    assert torcia.clamp(torcia.tensor([1, 5]), 0.5, 3).dtype is torcia.float32
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        torcia.clamp(x)
    assert torcia.lerp(torcia.zeros(2), torcia.tensor([10.0, 20.0]), 0.25).tolist() == [2.5, 5.0]
    assert torcia.round(torcia.tensor([0.5, 1.5, 2.5, -0.5])).tolist() == [0, 2, 2, -0.0]
    assert torcia.round(torcia.tensor([1.2345]), decimals=2).item() == pytest.approx(1.23)
    assert torcia.maximum(x, torcia.zeros(3)).tolist() == [0.0, 0.5, 3.0]
    assert torcia.minimum(x, torcia.zeros(3)).tolist() == [-2.0, 0.0, 0.0]
    assert torcia.addcmul(torcia.ones(2), torcia.tensor([2.0, 3.0]), torcia.tensor([4.0, 5.0]),
                          value=0.5).tolist() == [5.0, 8.5]
    assert torcia.addcdiv(torcia.ones(1), torcia.tensor([3.0]), torcia.tensor([2.0]),
                          value=2).tolist() == [4.0]
    nan = torcia.tensor([math.nan, math.inf, -math.inf, 1.0])
    assert torcia.nan_to_num(nan, nan=0.0, posinf=9.0, neginf=-9.0).tolist() == [0, 9, -9, 1]
    assert torcia.maximum(torcia.tensor([1.0]), torcia.tensor([math.nan])).isnan().item()
    assert torcia.fmax(torcia.tensor([1.0]), torcia.tensor([math.nan])).item() == 1.0
    assert torcia.pow(2, torcia.tensor([1, 3])).tolist() == [2, 8]
    assert torcia.float_power(torcia.tensor([2]), 2).dtype is torcia.float64


@settings(max_examples=60, deadline=None)
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       st.sampled_from(["add", "mul", "sub", "maximum"]), st.sampled_from(["int32", "float64"]))
def test_broadcasting_property(shapes, name, dtype):
    rng = np.random.default_rng(len(shapes.result_shape))
    a = rng.integers(-5, 5, shapes.input_shapes[0]).astype(dtype)
    b = rng.integers(-5, 5, shapes.input_shapes[1]).astype(dtype)
    out = getattr(torcia, name)(torcia.from_numpy(a), torcia.from_numpy(b))
    assert tuple(out.shape) == shapes.result_shape
    np.testing.assert_array_equal(out.numpy(), BINARY_TRUTH[name](a, b))


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=5),
                  elements=st.floats(-1e3, 1e3)))
def test_algebraic_identities(arr):
    x = torcia.from_numpy(arr)
    np.testing.assert_allclose((x - x).numpy(), 0)
    np.testing.assert_allclose((x * 2 - x).numpy(), arr)
    np.testing.assert_allclose(torcia.abs(x).numpy(), (x * torcia.sign(x)).numpy())
    np.testing.assert_allclose(torcia.clamp(x, -1, 1).numpy(), np.clip(arr, -1, 1))


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(UNARY_TRUTH))
def test_unary_matches_torch(name):
    torch = pytest.importorskip("torch")
    data = UNARY_TRUTH[name][1]
    for dtype in ("float32", "float64"):
        ours = getattr(torcia, name)(torcia.tensor(data, dtype=getattr(torcia, dtype)))
        theirs = getattr(torch, name)(torch.tensor(data, dtype=getattr(torch, dtype)))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-6, atol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "remainder", "fmod",
                                  "floor_divide", "pow", "maximum", "atan2", "eq", "lt"])
def test_binary_with_mixed_dtypes_matches_torch(name):
    torch = pytest.importorskip("torch")
    values = [[7, -7, 3], [2.5, -1.5, 0.5]]
    for a_dtype in ("int32", "int64", "float32"):
        for b in ([2, 3, -2], 2, 1.5, [1.5, -0.5, 2.0]):
            a_ours = torcia.tensor(values[0], dtype=getattr(torcia, a_dtype))
            a_theirs = torch.tensor(values[0], dtype=getattr(torch, a_dtype))
            b_ours = torcia.tensor(b) if isinstance(b, list) else b
            b_theirs = torch.tensor(b) if isinstance(b, list) else b
            if name == "pow" and not isinstance(b, float) and a_dtype != "float32":
                continue
            if name in ("maximum", "atan2") and not isinstance(b, list):
                continue  # tensors only, in PyTorch too
            with np.errstate(invalid="ignore"):  # a negative base to a fractional power
                ours = getattr(torcia, name)(a_ours, b_ours)
            theirs = getattr(torch, name)(a_theirs, b_theirs)
            assert ours.dtype.name == str(theirs.dtype).split(".")[1], (name, a_dtype, b)
            np.testing.assert_allclose(ours.numpy().astype(float),
                                       theirs.numpy().astype(float), rtol=1e-6)


def test_nextafter_of_bfloat16_steps_one_bit_pattern():
    bf = torcia.bfloat16
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(36)
    x = np.concatenate([rng.normal(0, 10, 40), [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 3e38]])
    y = np.concatenate([rng.normal(0, 10, 40), [1.0, -1.0, 1.0, -2.0, 0.0, 0.0, np.inf]])
    got = torcia.nextafter(torcia.tensor(x, dtype=bf), torcia.tensor(y, dtype=bf))
    assert got.dtype is bf
    a = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    b = y.astype(ml_dtypes.bfloat16).astype(np.float64)
    g = got.float().numpy().astype(np.float64)
    # one step towards y: strictly between a and y no bfloat16 lies, so g rounds back to g
    # and sits on y's side of a (or is y when they are equal)
    moved = a != b
    assert (np.sign(g - a)[moved] == np.sign(b - a)[moved]).all()
    assert (g[~moved] == b[~moved]).all()
    step = np.abs(g - a)[moved & (a != 0) & np.isfinite(a)]
    ulp = np.abs(a)[moved & (a != 0) & np.isfinite(a)] * 2.0 ** -7
    assert (step <= ulp).all() and (step >= ulp / 2 ** 2).all()
    # from zero, the smallest subnormal (2^-133) of y's sign; NaN in, NaN out
    zero = torcia.nextafter(torcia.zeros(2, dtype=bf), torcia.tensor([1.0, -1.0], dtype=bf))
    assert zero.float().tolist() == [2.0 ** -133, -(2.0 ** -133)]
    assert torcia.nextafter(torcia.tensor([math.nan], dtype=bf),
                            torcia.tensor([1.0], dtype=bf)).isnan().all()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nextafter_matches_numpy_and_runs_on_meta_tensors(dtype):
    rng = np.random.default_rng(36)
    fin = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, float(fin.max), float(-fin.max),
               float(fin.smallest_normal), float(fin.smallest_subnormal),
               -float(fin.smallest_subnormal), 2.0 ** -3, -(2.0 ** 5)]
    x = np.concatenate([rng.normal(0, 10, 60), 2.0 ** rng.integers(-10, 10, 20), special])
    x = x.astype(dtype)
    for y in (rng.permutation(x), np.full_like(x, np.inf), np.full_like(x, -np.inf),
              np.zeros_like(x), x):
        got = torcia.nextafter(torcia.tensor(x), torcia.tensor(y)).numpy()
        # C's nextafter (and PyTorch's) gives y when x == y (+0 from -0 towards +0), where
        # NumPy's float16 loop gives x
        want = np.where(x == y, y, np.nextafter(x, y))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()
    meta = torcia.nextafter(torcia.empty(3, 1, dtype=getattr(torcia, dtype), device="meta"),
                            torcia.empty(4, dtype=getattr(torcia, dtype), device="meta"))
    assert meta.device.type == "meta" and meta.shape == (3, 4)
