"""The native elementwise ops and sums (csrc/elementwise.cpp) against core's reference
kernels: the arithmetic bit for bit, the sums against float64 and the same for every
thread count, the cases the native code does not cover handed to the reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torcia_cpu import _native, kernels
from torcia_cpu.kernels import ELEMENTWISE

import torcia
from torcia import library

GRAIN = _native.ELEMENTWISE_GRAIN
RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64]
EDGES = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, 3.0, -7.5]


@pytest.fixture(autouse=True)
def _native_arithmetic(monkeypatch):
    """The arithmetic natively from the grain on, whatever this machine's thread count
    (on one thread it stays on NumPy)."""
    monkeypatch.setattr(kernels, "_arithmetic_from", GRAIN)


def _ref(op):
    return library.fallback(op, "cpu")


def _array(shape, dtype, contiguous=True):
    """Normal values times 3 with the EDGES scattered through them; not contiguous: every
    other column of an array twice as wide."""
    wide = shape if contiguous else shape[:-1] + (2 * shape[-1],)
    x = np.asarray(RNG.standard_normal(wide) * 3, dtype=dtype)
    flat = x.reshape(-1)
    at = RNG.choice(flat.size, min(len(EDGES), flat.size), replace=False)
    flat[at] = EDGES[:len(at)]
    return x if contiguous else x[..., ::2]


def _same(got, want):
    """Bit for bit: values (NaN where NaN, signs of zero), dtype and shape."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def _same_but_nan_signs(got, want):
    """As :func:`_same`, but a NaN's sign and payload (which IEEE leaves open: an FMA's
    invalid operation and NumPy's two passes make NaNs of either sign)."""
    got, want = np.asarray(got), np.asarray(want)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    _same(np.where(nan, 0, got).astype(got.dtype), np.where(nan, 0, want).astype(want.dtype))


# (a's shape, b's shape): same shapes of one span and of several, a row repeated along
# either operand, a row with leading ones, one element of either side, and shapes the
# native code does not cover (a column, an outer product): all against the reference
PAIRS = [((3, 7), (3, 7)), ((GRAIN + 5,), (GRAIN + 5,)), ((9, 4099), (9, 4099)),
         ((40, 1000), (1000,)), ((1000,), (40, 1000)), ((8, 30, 200), (1, 1, 200)),
         ((2, 3, GRAIN), (3, GRAIN)), ((1, 50000), (50000,)), ((50000,), (1, 1, 50000)),
         ((50000,), ()), ((), (50000,)), ((1, 1), (3, 20000)), ((3, 20000), (3, 1)),
         ((300, 1), (1, 300)), ((GRAIN + 1,), (1,))]
OPS = ["add", "sub", "mul", "div"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", PAIRS, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_binary_matches_the_reference_bit_for_bit(op, shapes, dtype):
    a, b = _array(shapes[0], dtype), _array(shapes[1], dtype)
    with np.errstate(all="ignore"):
        _same(ELEMENTWISE[op](a, b), _ref(op)(a, b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("scalar", [0.1, -3, 0.0, 1e300, 2 ** 60 + 1, True, np.inf])
def test_binary_with_a_python_number(op, dtype, scalar):
    # float32 with a Python float rounds it to float32 first (1e300: inf), as NumPy does;
    # an int beyond 2^53 or a bool goes to the reference
    a = _array((3, GRAIN + 3), dtype)
    with np.errstate(all="ignore"):
        _same(ELEMENTWISE[op](a, scalar), _ref(op)(a, scalar))


@pytest.mark.parametrize("op", OPS)
def test_binary_fallbacks(op):
    with np.errstate(all="ignore"):
        # a transposed view, mixed dtypes, integers: the reference
        a = _array((300, 400), np.float32, contiguous=False)
        b = _array((300, 400), np.float32)
        _same(ELEMENTWISE[op](a, b), _ref(op)(a, b))
        _same(ELEMENTWISE[op](b, a.astype(np.float64)), _ref(op)(b, a.astype(np.float64)))
        ints = RNG.integers(1, 9, (200, 300))
        _same(ELEMENTWISE[op](ints, ints), _ref(op)(ints, ints))
    # a broadcasting error stays NumPy's, which core rewords
    with pytest.raises(ValueError):
        ELEMENTWISE[op](b, _array((401,), np.float32))


def test_div_with_a_rounding_mode_goes_to_the_reference():
    a, b = _array((200, 300), np.float64), _array((300,), np.float64)
    with np.errstate(all="ignore"):
        for mode in (None, "trunc", "floor"):
            _same(ELEMENTWISE["div"](a, b, rounding_mode=mode), _ref("div")(a, b, mode))


UNARY_EXACT = ["neg", "abs", "sqrt", "rsqrt", "reciprocal", "square"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5,), (GRAIN,), (3, GRAIN + 17)], ids=str)
@pytest.mark.parametrize("op", UNARY_EXACT + ["exp"])
def test_unary(op, shape, dtype):
    x = _array(shape, dtype)
    with np.errstate(all="ignore"):
        got, want = ELEMENTWISE[op](x), _ref(op)(x)
        if op != "exp" or dtype == np.float64:
            _same(got, want)
            return
        # float32's exp is a polynomial (about 1 ulp), checked against float64's
        wide = np.exp(x.astype(np.float64)).astype(np.float32)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, wide, rtol=3e-7, atol=3e-45)  # subnormals: their ulp
    tails = np.array([88.5, 88.72, 88.73, 200.0, -87.5, -100.0, -103.9, -104.0, -1e30],
                     np.float32)
    x = np.concatenate([x.reshape(-1), np.repeat(tails, GRAIN // 8)])
    with np.errstate(all="ignore"):
        wide = np.exp(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(ELEMENTWISE[op](x), wide, rtol=3e-7, atol=3e-45)


@pytest.mark.parametrize("op", UNARY_EXACT + ["exp"])
def test_unary_fallbacks(op):
    x = _array((300, 400), np.float32, contiguous=False)
    with np.errstate(all="ignore"):
        _same(ELEMENTWISE[op](x), _ref(op)(x))
        if op in ("neg", "abs", "square"):
            ints = RNG.integers(-9, 9, (200, 300))
            _same(ELEMENTWISE[op](ints), _ref(op)(ints))


# (shape, dim): all, one dim (first, middle, last), adjacent dims, non-adjacent dims (the
# reference), a reduction to one row of many, an empty reduced dim; sums of few columns
# over many rows (a bias gradient), whose rows split into pieces: just below and above
# two grains, many pieces, more than the most pieces (uneven ones), a few leading rows
REDUCTIONS = [((1024, 384), (0,)), ((511, 128), (0,)), ((513, 128), (0,)),
              ((40001, 64), (0,)), ((3, 4000, 100), (1,)), ((2, 700, 2100), (1,)),
              ((GRAIN * 3 + 11,), None), ((40, 1000), None), ((40, 1000), (0,)),
              ((40, 1000), (1,)), ((7, 300, 50), (1,)), ((7, 300, 50), (0, 1)),
              ((7, 300, 50), (1, 2)), ((7, 300, 50), (0, 2)), ((2, 3000, 1100), (2,)),
              ((1, 200000), (1,)), ((50000, 0), (1,)), ((GRAIN, 3), (0,)),
              ((1031, 1000), (0,)), ((4099, 384), (0,)), ((9, 2, 5000), (0,))]


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape, dim", REDUCTIONS, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_reductions(op, shape, dim, keepdim, dtype):
    x = np.asarray(RNG.standard_normal(shape), dtype=dtype)
    with np.errstate(all="ignore"):
        got = ELEMENTWISE[op](x, dim, keepdim)
        want = _ref(op)(x, dim, keepdim)
        wide = _ref(op)(x.astype(np.float64), dim, keepdim)
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    # accumulated in double: closer to float64's sum than the float32 reference's
    tol = dict(rtol=1e-6, atol=1e-6 * np.sqrt(x.size)) if dtype == np.float32 else dict(
        rtol=1e-12, atol=1e-12 * np.sqrt(x.size))
    np.testing.assert_allclose(got, wide.astype(dtype), equal_nan=True, **tol)


def test_reductions_with_a_dtype_or_a_view_go_to_the_reference():
    x = np.asarray(RNG.standard_normal((300, 400)), np.float32)
    _same(ELEMENTWISE["sum"](x, None, False, np.float64), _ref("sum")(x, None, False,
                                                                       np.float64))
    _same(ELEMENTWISE["sum"](x.T, (0,), False), _ref("sum")(x.T, (0,), False))
    _same(ELEMENTWISE["mean"](x[:, ::2], (1,), True), _ref("mean")(x[:, ::2], (1,), True))


@pytest.mark.parametrize("shape, dim", [((GRAIN * 5 + 3,), None), ((64, 3000), (0,)),
                                        ((64, 3000), (1,)), ((1, GRAIN * 4), (1,)),
                                        ((1024, 384), (0,)), ((40001, 64), (0,)),
                                        ((3, 4000, 100), (1,)), ((1031, 1000), (0,)),
                                        ((4099, 128), (0,))], ids=str)
def test_sums_are_the_same_on_every_thread_count(shape, dim):
    # fixed spans, added in their order: the thread count does not change a bit
    x = np.asarray(RNG.standard_normal(shape), np.float32)
    before = _native.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            _native.set_num_threads(n)
            results.append(ELEMENTWISE["sum"](x, dim, False))
    finally:
        _native.set_num_threads(before)
    for other in results[1:]:
        _same(other, results[0])


def _columns_hard_to_sum(rows, cols):
    """Columns that a float32 sum in row order rounds badly: large values beside small
    ones, a constant that is not a float32 sum of itself, and both signs cancelling."""
    x = np.asarray(RNG.standard_normal((rows, cols)), np.float32)
    x[::3, 0::4] *= 1e6
    x[:, 1::4] = 0.1
    x[0, 2::4] = 1e8
    x[1::2, 3::4] = -x[0::2, 3::4][:rows // 2]
    return x


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shape", [(4096, 128), (2051, 1000), (40, 1000)], ids=str)
def test_column_sums_stay_within_a_few_roundings_of_float64(shape, threads):
    # a bias gradient's sum over the rows adds eight rows pairwise in float32, their sum
    # in double: within 3 eps of the column's sum of |x|, plus the result's own rounding
    x = _columns_hard_to_sum(*shape)
    before = _native.get_num_threads()
    try:
        _native.set_num_threads(threads)
        got = ELEMENTWISE["sum"](x, (0,), False)
    finally:
        _native.set_num_threads(before)
    wide = x.astype(np.float64)
    want, scale = wide.sum(0), np.abs(wide).sum(0)
    eps = np.finfo(np.float32).eps
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.all(np.abs(got - want) <= 3 * eps * scale + eps / 2 * np.abs(want))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(rows=st.integers(1, 40), cols=st.sampled_from([1, 3, 1000, 1 << 12, GRAIN + 1]),
       op=st.sampled_from(OPS), dtype=st.sampled_from(DTYPES),
       layout=st.sampled_from(["same", "row", "row_first", "scalar", "scalar_first"]))
def test_binary_fuzz(rows, cols, op, dtype, layout):
    a = _array((rows, cols), dtype)
    b = {"same": lambda: _array((rows, cols), dtype), "row": lambda: _array((cols,), dtype),
         "row_first": lambda: _array((cols,), dtype), "scalar": lambda: _array((), dtype),
         "scalar_first": lambda: _array((1, 1), dtype)}[layout]()
    if layout.endswith("_first"):
        a, b = b, a
    with np.errstate(all="ignore"):
        _same(ELEMENTWISE[op](a, b), _ref(op)(a, b))


def test_one_thread_keeps_the_arithmetic_on_numpy(monkeypatch):
    calls = []
    monkeypatch.setattr(_native, "binary", lambda op, a, b: calls.append(op) or a + b)
    kernels.follow_threads(1)
    try:
        a = _array((3, GRAIN), np.float32)
        _same(ELEMENTWISE["add"](a, a), a + a)
        assert not calls
    finally:
        kernels.follow_threads(2)
    ELEMENTWISE["add"](a, a)
    assert len(calls) == 1


def test_through_torcia_with_gradients():
    # (x * y + x).sum() by hand: d/dx = y + 1, d/dy = x; row-broadcast bias: its gradient
    # sums the rows
    x = torcia.randn(64, 1024, dtype=torcia.float64, requires_grad=True)
    y = torcia.randn(64, 1024, dtype=torcia.float64, requires_grad=True)
    bias = torcia.randn(1024, dtype=torcia.float64, requires_grad=True)
    ((x * y + x) / 2.0 - bias).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.detach().numpy() + 1) / 2, rtol=1e-15)
    np.testing.assert_allclose(y.grad.numpy(), x.detach().numpy() / 2, rtol=1e-15)
    np.testing.assert_allclose(bias.grad.numpy(), np.full(1024, -64.0), rtol=1e-15)
    m = torcia.randn(3, GRAIN + 7).mean(dim=1)
    assert m.shape == (3,) and m.dtype is torcia.float32


# (shapes, dim): joined along the first, a middle and the last dim, a negative dim, an
# empty piece, rows narrower than a span and pieces wider than one
CATS = [([(3000, 7), (500, 7)], 0), ([(40, 300, 5), (40, 1, 5), (40, 0, 5)], 1),
        ([(16, 64, 128)] * 3, 2), ([(2, 3, 9000), (2, 3, 20000)], -1),
        ([(GRAIN + 3,), (GRAIN,)], 0)]


LAYOUTS = {"c": lambda a: a, "f": np.asfortranarray,
           "reversed": lambda a: np.flip(np.flip(a).copy()),
           "transposed": lambda a: a if a.ndim < 2 else
           np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2),
           "strided": lambda a: np.repeat(a, 2, axis=-1)[..., ::2],
           "broadcast": lambda a: np.broadcast_to(a[..., :1], a.shape)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.complex64,
                                   np.complex128, np.float16, np.int8])
@pytest.mark.parametrize("shapes, dim", CATS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cat_is_the_reference_on_every_thread_count(shapes, dim, dtype, layout):
    # the second piece in the layout, the others C-ordered
    arrays = [np.asarray(RNG.standard_normal(s) * 3).astype(dtype) for s in shapes]
    arrays[1] = LAYOUTS[layout](arrays[1])
    np.testing.assert_array_equal(arrays[1], np.ascontiguousarray(arrays[1]))
    want = _ref("cat")(*arrays, dim=dim)
    before = _native.get_num_threads()
    try:
        for n in (1, 2, 3):
            _native.set_num_threads(n)
            got = kernels.NativeKernels().cat(*arrays, dim=dim)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()
    finally:
        _native.set_num_threads(before)


def test_cat_hands_other_joins_to_the_reference(monkeypatch):
    calls = []
    monkeypatch.setattr(_native, "cat",
                        lambda arrays, dim: calls.append(dim) or np.concatenate(arrays, dim))
    big = np.zeros((GRAIN, 2), np.float32)
    cat = kernels.NativeKernels().cat
    # small, mixed dtypes, objects, sizes that differ, a dim out of range, 0-d
    for arrays, dim in (([np.zeros(3), np.ones(2)], 0), ([big, big.astype(np.float64)], 0),
                        ([big.astype(object)] * 2, 0)):
        got, want = cat(*arrays, dim=dim), np.concatenate(arrays, dim)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    for arrays, dim in (([big, np.zeros((GRAIN, 3), np.float32)], 0), ([big, big], 2),
                        ([np.zeros(()), np.zeros(())], 0)):
        with pytest.raises((ValueError, IndexError, RuntimeError)):
            cat(*arrays, dim=dim)
    assert not calls
    _same(cat(big, big, dim=1), np.concatenate([big, big], 1))
    assert calls == [1]


def test_blocked_plugin_gives_the_same_arithmetic(with_and_without_plugin):
    script = (
        "import numpy as np, torcia\n"
        "torcia.manual_seed(0)\n"
        "x, r = torcia.randn(64, 2000), torcia.randn(2000)\n"
        "y = ((x * 3.0 - r) / (x.abs() + 1.0)).neg().sqrt()\n"
        "np.save({out!r}, y.numpy())\n"
        "print(torcia.library.device_ops('cpu')['add'])\n")
    res = with_and_without_plugin(script)
    assert res["native"][0] == "native"
    _same(res["native"][1], res["numpy"][1])


# (a's shape, b's shape, which array out is): the result written over a, over b (the
# longer one), over both (a op a), or into an array of its own
INTO = [((3, GRAIN + 7), (3, GRAIN + 7), "a"), ((3, GRAIN + 7), (3, GRAIN + 7), "b"),
        ((3, GRAIN + 7), None, "both"), ((40, 1000), (1000,), "a"),
        ((1000,), (40, 1000), "b"), ((40, 1000), (40, 1000), "new"),
        ((50000,), (), "a"), ((1, 1), (3, 20000), "b"), ((300, 1), (1, 300), "new")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", INTO, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_binary_into_out_is_the_reference_bit_for_bit(op, case, dtype):
    a = _array(case[0], dtype)
    b = a if case[1] is None else _array(case[1], dtype)
    with np.errstate(all="ignore"):
        want = _ref(op)(a, b)
        out = {"a": a, "b": b, "both": a, "new": np.empty(want.shape, dtype)}[case[2]]
        assert ELEMENTWISE[op](a, b, out=out) is out
    _same(out, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("scalar", [0.1, -3, 1e300, 2 ** 60 + 1])
def test_binary_with_a_python_number_into_out(op, dtype, scalar):
    a = _array((3, GRAIN + 3), dtype)
    with np.errstate(all="ignore"):
        want = _ref(op)(a, scalar)
        assert ELEMENTWISE[op](a, scalar, out=a) is a
    _same(a, want)


def test_binary_into_out_hands_other_outs_to_the_reference():
    # a read-only, strided or mistyped out goes to NumPy's ufunc, which refuses or writes it
    a, b = _array((4, GRAIN), np.float32), _array((4, GRAIN), np.float32)
    frozen = a.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ELEMENTWISE["add"](frozen, b, out=frozen)
    wide = np.zeros((4, 2 * GRAIN), np.float32)
    with np.errstate(all="ignore"):
        assert ELEMENTWISE["div"](a, b, out=wide[:, ::2]) is not None
        _same(wide[:, ::2], _ref("div")(a, b))
    with pytest.raises(ValueError):
        ELEMENTWISE["mul"](a, b, out=np.empty((2, GRAIN), np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", ["add_", "sub_", "mul_", "div_", "add_alpha", "iadd",
                                  "mul_float", "add_row", "add_self"])
def test_inplace_through_torcia_is_the_out_of_place_bits_on_every_thread_count(call, dtype):
    # a.add_(b) and a += b write natively into a's memory: the bits of a + b, on 1-3 threads
    x = _array((3, GRAIN + 11), dtype)
    y = _array((3, GRAIN + 11), dtype)
    row = _array((GRAIN + 11,), dtype)
    before = torcia.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            torcia.set_num_threads(n)
            kernels.follow_threads(2)  # native even on one thread
            a, b = torcia.from_numpy(x.copy()), torcia.from_numpy(y.copy())
            other = {"add_row": torcia.from_numpy(row), "add_self": a,
                     "mul_float": 0.37}.get(call, b)
            name = {"iadd": "add_", "mul_float": "mul_", "add_row": "add_", "add_self": "add_",
                    "add_alpha": "add_"}.get(call, call)
            kwargs = {"alpha": -0.3} if call == "add_alpha" else {}
            with np.errstate(all="ignore"):
                want = getattr(torcia, name[:-1])(a, other, **kwargs)
                data = a.numpy()
                if call == "iadd":
                    a += other
                else:
                    assert getattr(a, name)(other, **kwargs) is a
            assert a.numpy() is data or np.shares_memory(a.numpy(), data)
            _same(a.numpy(), want.numpy())
            assert a._version == 1
            results.append(a.numpy())
    finally:
        torcia.set_num_threads(before)
    for other in results[1:]:
        _same(other, results[0])


def test_inplace_through_torcia_does_not_allocate_the_result(monkeypatch, registered):
    # the native kernel gets self's array as its out: no result array to copy back (torcia
    # dispatches to the native kernel only where the plugin is loaded)
    seen = []
    real = _native.binary

    def spy(op, a, b, out=None):
        seen.append(out)
        return real(op, a, b, out)

    monkeypatch.setattr(_native, "binary", spy)
    a, b = torcia.randn(3, GRAIN), torcia.randn(3, GRAIN)
    a.add_(b)
    assert len(seen) == 1 and np.shares_memory(seen[0], a.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [0.1, -3, 1e300, 2 ** 60 + 1, 0.5])
@pytest.mark.parametrize("case", [((3, GRAIN + 7), (3, GRAIN + 7), "a"),
                                  ((3, GRAIN + 7), None, "both"),
                                  ((40, 1000), (1000,), "a"), ((40, 1000), (1, 1000), "new"),
                                  ((5, 7), (5, 7), "a")], ids=str)
@pytest.mark.parametrize("op", ["add", "sub"])
def test_alpha_is_one_fused_multiply_add_as_the_reference_bit_for_bit(op, case, alpha, dtype):
    # a op b * alpha in one pass, one rounding (std::fma), as the reference kernel (whose
    # results test_fused_multiply_add.py checks against exact fractions)
    a = _array(case[0], dtype)
    b = a if case[1] is None else _array(case[1], dtype)
    with np.errstate(all="ignore"):
        want = _ref(op)(a, b, alpha=alpha)
        if case[2] == "new":
            _same(ELEMENTWISE[op](a, b, alpha=alpha), want)
        out = np.empty(want.shape, dtype) if case[2] == "new" else a
        assert ELEMENTWISE[op](a, b, out=out, alpha=alpha) is out
    _same(out, want)


def test_alpha_is_add_and_subs():
    a = _array((4,), np.float32)
    with pytest.raises(RuntimeError, match="alpha is add's and sub's, not mul's"):
        _native.binary("mul", a, a, None, 2.0)
    assert not torcia.backend.takes_param(np.add, "alpha")
    assert torcia.backend.takes_param(library.fallback("add", "cpu"), "alpha")
    assert torcia.backend.takes_param(ELEMENTWISE["sub"], "alpha")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight", [0.1, -0.3, 0.5, 0.7, 1.5, np.nan, np.inf])
@pytest.mark.parametrize("shape", [(0,), (7,), (3, GRAIN + 5)], ids=str)
def test_lerp_with_a_number_weight_is_the_references_bit_for_bit(shape, weight, dtype):
    a, b = _array(shape, dtype), _array(shape, dtype)
    w = np.asarray(weight, dtype)[()]
    with np.errstate(all="ignore"):
        _same_but_nan_signs(ELEMENTWISE["lerp"](a, b, w), _ref("lerp")(a, b, w))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [1, 0.3, -2.5, np.inf])
@pytest.mark.parametrize("shape", [(0,), (7,), (3, GRAIN + 5)], ids=str)
def test_addcmul_is_the_references_bit_for_bit(shape, value, dtype):
    x, t1, t2 = (_array(shape, dtype) for _ in range(3))
    v = np.asarray(value, dtype)[()]
    with np.errstate(all="ignore"):
        _same_but_nan_signs(ELEMENTWISE["addcmul"](x, t1, t2, value=v),
                            _ref("addcmul")(x, t1, t2, value=v))


def test_lerp_and_addcmul_hand_other_layouts_to_the_reference():
    a = _array((40, 30), np.float32)
    t = a.T  # not contiguous
    w = np.full((40, 30), 0.25, np.float32)  # a tensor weight
    with np.errstate(all="ignore"):
        quarter = np.float32(0.25)
        _same(ELEMENTWISE["lerp"](t, t + 1, quarter), _ref("lerp")(t, t + 1, quarter))
        _same(ELEMENTWISE["lerp"](a, a * 2, w), _ref("lerp")(a, a * 2, w))
        _same(ELEMENTWISE["addcmul"](a, a[0], a, value=np.float32(0.5)),
              _ref("addcmul")(a, a[0], a, value=np.float32(0.5)))


def test_fused_refuses_what_it_cannot_take():
    a = _array((4,), np.float32)
    with pytest.raises(RuntimeError, match="unknown op 'mul'"):
        _native.fused("mul", a, a, None, 1.0)
    with pytest.raises(RuntimeError, match="b has shape"):
        _native.fused("lerp", a, a[:3].copy(), None, 0.5)
    with pytest.raises(RuntimeError, match="b has dtype"):
        _native.fused("lerp", a, a.astype(np.float64), None, 0.5)
    with pytest.raises(RuntimeError, match="C-contiguous"):
        _native.fused("addcmul", a, a, a[::-1], 0.5)
    with pytest.raises(RuntimeError, match="addcmul needs c"):
        _native.fused("addcmul", a, a, None, 0.5)
    with pytest.raises(RuntimeError, match="must be float32 or float64"):
        _native.fused("lerp", a.astype(np.int32), a.astype(np.int32), None, 0.5)
