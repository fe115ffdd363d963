"""The native index_add (kernels.cpp's index_add_rows) against core's reference kernel
(NumPy's add.at): the same bits, whatever the thread count, torch's values where it is
installed, and clear errors for arguments the native entry point refuses."""

import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torcia_cpu import _native
from torcia_cpu.kernels import NativeKernels

import torcia
from torcia import library

NAT = NativeKernels()
REF = library.fallback("index_add", "cpu")
RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64]
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _same(got, want):
    """Bit for bit: values (NaN where NaN, signs of zero), dtype and shape."""
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def _case(shape, dim, m, dtype, contiguous=True):
    """a, index (repeated values), source for index_add along ``dim``; not contiguous:
    every other element of the last dim of wider arrays."""
    def values(s):
        if contiguous or not s:
            return (RNG.standard_normal(s) * 3).astype(dtype)
        return (RNG.standard_normal(s[:-1] + (2 * s[-1],)) * 3).astype(dtype)[..., ::2]

    a = values(shape)
    index = RNG.integers(0, shape[dim], m) if shape[dim] else np.zeros(0, np.int64)
    source = values(shape[:dim] + (len(index),) + shape[dim + 1:])
    return a, index, source


# (shape, dim, indices): an embedding bag's rows, a middle and a last dim, sizes around
# the work from which threads run (1 << 16 elements), an empty index, an empty dim with
# no index, one row, narrow rows (one block of columns) and rows ending in a part-block
CASES = [((64, 64), 0, 3200), ((5, 40, 30), 1, 77), ((6, 50, 9), 2, 20),
         ((255, 128), 0, 256), ((256, 128), 0, 257), ((10, 33), 0, 0), ((0, 7), 0, 0),
         ((1, 3), 0, 5), ((300, 5), 0, 1000), ((40, 1000), 0, 90), ((8,), 0, 30)]


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, dim, m", CASES, ids=str)
def test_the_reference_bits_on_every_thread_count(shape, dim, m, dtype, contiguous,
                                                  on_threads):
    a, index, source = _case(shape, dim, m, dtype, contiguous)
    want = REF(a, index, source, dim)
    for got in on_threads(lambda: NAT.index_add(a, index, source, dim)):
        _same(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [2.5, -1, 0, 3, 0.3, -1e-3])
@pytest.mark.parametrize("shape, dim", [((200, 300), 0), ((7, 60, 33), 1), ((500,), 0)])
def test_alpha_scales_as_the_reference(alpha, dtype, shape, dim, on_threads):
    # fused into each term for more than one dim, the product rounded first for a vector
    a, index, source = _case(shape, dim, 400, dtype)
    want = REF(a, index, source, dim, alpha)
    for got in on_threads(lambda: NAT.index_add(a, index, source, dim, alpha)):
        _same(got, want)


def test_special_values_and_int32_indices():
    a, index, source = _case((100, 700), 0, 300, np.float32)
    source.reshape(-1)[:6] = [np.inf, -np.inf, np.nan, -0.0, 1e38, 1e38]
    _same(NAT.index_add(a, index.astype(np.int32), source, 0), REF(a, index, source, 0))


def test_what_it_does_not_cover_goes_to_the_reference():
    a, index, source = _case((50, 40), 0, 30, np.float32)
    # a NumPy float64 alpha widens the scaled source: the reference rounds it back
    _same(NAT.index_add(a, index, source, 0, np.float64(0.1)),
          REF(a, index, source, 0, np.float64(0.1)))
    ints = RNG.integers(-9, 9, (50, 40))
    _same(NAT.index_add(ints, index, ints[:30], 0), REF(ints, index, ints[:30], 0))
    _same(NAT.index_add(a, index, source.astype(np.float64), 0),
          REF(a, index, source.astype(np.float64), 0))
    # out of range: the reference's error, not the native one
    with pytest.raises(IndexError):
        NAT.index_add(a, np.array([0, 50]), source[:2], 0)


# the fixture holds no state between examples
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(0, 300), cols=st.sampled_from([1, 15, 16, 17, 64, 1000]),
       m=st.integers(0, 600), dtype=st.sampled_from(DTYPES))
def test_fuzz_rows(rows, cols, m, dtype, on_threads):
    a, index, source = _case((rows, cols), 0, m if rows else 0, dtype)
    want = REF(a, index, source, 0)
    for got in on_threads(lambda: NAT.index_add(a, index, source, 0)):
        _same(got, want)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, dim, m", CASES[:5] + CASES[-1:], ids=str)
@pytest.mark.parametrize("alpha", [1, 2, 0.3])
def test_matches_torch(shape, dim, m, dtype, alpha):
    import torch

    a, index, source = _case(shape, dim, m, dtype)
    want = torch.from_numpy(a).index_add(dim, torch.from_numpy(index),
                                         torch.from_numpy(source), alpha=alpha).numpy()
    _same(NAT.index_add(a, index, source, dim, alpha), want)


def test_through_torcia():
    # embedding_bag's bags add their rows with index_add: the means by hand
    w = torcia.randn(20, 64, dtype=torcia.float64)
    tokens = torcia.randint(0, 20, (3000,))
    offsets = torcia.arange(0, 3000, 100)
    out = torcia.nn.functional.embedding_bag(tokens, w, offsets, mode="mean")
    rows = w.numpy()[tokens.numpy()].reshape(30, 100, 64)
    np.testing.assert_allclose(out.numpy(), rows.mean(1), rtol=1e-12, atol=1e-12)
    assert library.device_ops("cpu")["index_add"] == "native"
    # 0-d: one element, as PyTorch's
    zero = torcia.tensor(2.0).index_add(0, torcia.tensor([0]), torcia.tensor(3.0), alpha=2)
    assert zero.shape == () and zero.item() == 8.0


F32 = np.zeros((4, 3), np.float32)


@pytest.mark.parametrize("args, message", [
    ((F32.astype(np.int64), np.array([0]), F32[:1], 1, 4, 3), "a must be float32 or float64"),
    ((F32, np.array([0]), F32[:1].astype(np.float64), 1, 4, 3), "source has dtype float64"),
    ((F32.T, np.array([0]), F32[:1], 1, 4, 3), "a must be C-contiguous"),
    ((F32, np.array([0], np.int32), F32[:1], 1, 4, 3), "index must be a 1-D C-contiguous int64"),
    ((F32, np.array([[0]]), F32[:1], 1, 4, 3), "index must be a 1-D C-contiguous int64"),
    ((F32, np.array([4]), F32[:1], 1, 4, 3), "index holds 4, out of range for size 4"),
    ((F32, np.array([-1]), F32[:1], 1, 4, 3), "index holds -1, out of range for size 4"),
    ((F32, np.array([0]), F32[:1], 1, 5, 3), "a has 12 elements, not (1, 5, 3)"),
    ((F32, np.array([0, 1]), F32[:1], 1, 4, 3), "source has 3 elements, not (1, 2, 3)"),
    ((F32, np.array([0]), F32[:1], -1, 4, 3), "outer must be at least 0"),
    ((F32, np.array([0]), F32[:1], 1, 4, 2**62), "sizes overflow"),
    ((F32, np.array([0]), F32[:1], 1, 4, 3, 1e300), "alpha is outside float32's range"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_native_entry_refuses_bad_arguments(args, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _native.index_add_rows(*args)
