"""Conversions to float16 and bfloat16 round as PyTorch's: from float64 and 32/64-bit
integers through float32 (c10::Half and c10::BFloat16 are built from a float), so a value
just off a midpoint rounds twice where NumPy rounds once."""

import numpy as np
import pytest

import torcia

ml_dtypes = pytest.importorskip("ml_dtypes")

# just above the midpoint between 1 and the next float16 (1 + 2**-10): float32 rounds it
# onto the midpoint, which then goes to the even neighbour, 1
ABOVE_MIDPOINT = 1 + 2 ** -11 + 2 ** -30
# 2**24 + 2**16 + 1: float32 gives 2**24 + 2**16, bfloat16's midpoint, which ties to 2**24
INT_ABOVE_MIDPOINT = 2 ** 24 + 2 ** 16 + 1


@pytest.mark.parametrize("make", [
    lambda x, dt: torcia.tensor([x], dtype=dt),
    lambda x, dt: torcia.tensor(np.array([x]), dtype=dt),
    lambda x, dt: torcia.tensor([x], dtype=torcia.float64).to(dt),
    lambda x, dt: torcia.as_tensor(np.array([x]), dtype=dt),
    lambda x, dt: torcia.zeros(1, dtype=dt).copy_(torcia.tensor([x], dtype=torcia.float64)),
], ids=["list", "array", "to", "as_tensor", "copy_"])
def test_values_by_hand(make):
    assert make(ABOVE_MIDPOINT, torcia.float16).item() == 1.0
    assert np.float16(ABOVE_MIDPOINT) == 1 + 2 ** -10  # NumPy's single rounding
    assert torcia.tensor([INT_ABOVE_MIDPOINT]).to(torcia.bfloat16).item() == 2 ** 24
    # float32 sources round once, as before
    assert torcia.tensor([ABOVE_MIDPOINT], dtype=torcia.float32).to(torcia.float16).item() == 1


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # 2**40 to float16: inf
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    # ~100 of 2e6 normal float64 values sit close enough to a float16 midpoint to differ
    x = rng.standard_normal(2_000_000)
    big = rng.integers(-2 ** 40, 2 ** 40, 200_000)
    small = rng.integers(-2 ** 31, 2 ** 31 - 1, 200_000).astype(np.int32)
    ours_dt, theirs_dt = getattr(torcia, name), getattr(torch, name)
    for data in (x, big, small):
        want = torch.tensor(data).to(theirs_dt).float().numpy()
        np.testing.assert_array_equal(torcia.tensor(data).to(ours_dt).float().numpy(), want)
        np.testing.assert_array_equal(torcia.tensor(data, dtype=ours_dt).float().numpy(), want)
    values = x[:2000].tolist()
    np.testing.assert_array_equal(torcia.tensor(values, dtype=ours_dt).float().numpy(),
                                  torch.tensor(values, dtype=theirs_dt).float().numpy())
