"""The integer kernels (shifts, gcd, lcm) against PyTorch 2.13 at their edges: amounts that
are negative or past the width, int min, zeros, promotion and refusals; and on the meta
device, which they reach as tensor ops (no values read on the host)."""

import operator

import numpy as np
import pytest

import torcia

torch = pytest.importorskip("torch")

DTYPES = ["uint8", "int8", "int16", "int32", "int64"]


def _edges(dtype):
    """Values of ``dtype`` with its extremes, zeros, signs and Fibonacci pairs (Euclid's
    longest runs), as an (n, n) grid of pairs."""
    info = np.iinfo(dtype)
    fib = [1, 2]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    vals = {0, 1, 2, 3, 5, 6, 12, 18, 64, info.max, info.max - 1, info.min, info.min + 1,
            *fib[-3:]}
    if info.min < 0:
        vals |= {-v for v in (1, 2, 3, 6, 12, 18, fib[-1], fib[-2])}
    v = np.array(sorted(vals), dtype=dtype)
    return np.repeat(v, len(v)), np.tile(v, len(v))


def _amounts(dtype):
    bits = np.iinfo(dtype).bits
    amounts = [0, 1, 2, bits - 2, bits - 1, bits, bits + 1, 100, 127, 128, 200, 255]
    if np.iinfo(dtype).min < 0:
        amounts += [-1, -2, -bits, -100, -128]
    return np.array(amounts, dtype=np.int64).astype(dtype)


def _check(name, a, b):
    got = getattr(torcia, name)(torcia.tensor(a), torcia.tensor(b))
    want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["bitwise_left_shift", "bitwise_right_shift"])
def test_shifts_match_torch_for_every_amount(name, dtype):
    a, _ = _edges(dtype)
    a = np.unique(a)
    s = _amounts(dtype)
    _check(name, np.repeat(a, len(s)), np.tile(s, len(a)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_and_lcm_match_torch_at_the_edges(name, dtype):
    a, b = _edges(dtype)
    if name == "lcm" and np.iinfo(dtype).bits >= 32:
        # gcd(int min, odd) is -1 there (|int min| wraps), and PyTorch's a / g then traps
        keep = (a != np.iinfo(dtype).min) | (b % 2 == 0)
        a, b = a[keep], b[keep]
    _check(name, a, b)


@pytest.mark.parametrize("expr", [
    "x << 2", "x >> 1", "x << 257", "x >> 255", "x << -1", "2 << x", "5 >> x",
    "x << m.tensor([1, 2, 3])", "m.tensor([1, 2, 3]) >> x", "m.tensor([True]) << 1",
    "m.bitwise_left_shift(2, x)", "m.bitwise_right_shift(x, m.tensor(70))",
    "m.gcd(x, m.tensor([4, 6, 8]))", "m.lcm(x, m.tensor([4], dtype=m.int16))",
])
def test_operand_forms_and_promotion_match_torch(expr):
    def run(m):
        x = m.tensor([3, -3, 100], dtype=m.int8)
        return eval(expr, {"m": m, "x": x})
    got, want = run(torcia), run(torch)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("op", [operator.ilshift, operator.irshift])
def test_in_place_shifts_match_torch(op):
    def run(m):
        x = m.tensor([3, -3, 100], dtype=m.int8)
        y = op(x, m.tensor([1, 9, -1]))
        return x, y
    (gx, gy), (wx, wy) = run(torcia), run(torch)
    assert gx is gy and wx is wy
    np.testing.assert_array_equal(gx.numpy(), wx.numpy())


@pytest.mark.parametrize("call", [
    lambda m: m.tensor([True]) >> m.tensor([True]),
    lambda m: m.tensor([1], dtype=m.int8) << 2.0,
    lambda m: m.tensor([1.5]) >> 1,
    lambda m: m.gcd(m.tensor([True]), m.tensor([True])),
    lambda m: m.lcm(m.tensor([1.0]), m.tensor([1.0])),
    lambda m: m.tensor([1], dtype=m.uint16) << 1,
    lambda m: m.gcd(m.tensor([4], dtype=m.uint32), m.tensor([6], dtype=m.uint32)),
])
def test_refusals_match_torch(call):
    with pytest.raises(NotImplementedError) as want:
        call(torch)
    with pytest.raises(NotImplementedError, match=str(want.value).replace("'", ".")
                       .replace('"', ".")):
        call(torcia)


@pytest.mark.parametrize("name", ["bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"])
def test_integer_kernels_run_on_meta_tensors(name):
    a = torcia.empty(4, 1, dtype=torcia.int16, device="meta")
    b = torcia.empty(3, dtype=torcia.int64, device="meta")
    out = getattr(torcia, name)(a, b)
    assert out.device.type == "meta"
    assert out.shape == (4, 3) and out.dtype is torcia.int64
