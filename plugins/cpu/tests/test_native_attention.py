"""The native flash attention (csrc/attention.cpp) against core's reference kernels on
shapes of many blocks, the same bit for bit on every thread count, without memory for
the (Lq, Lk) scores, and through F.scaled_dot_product_attention with gradients."""

import tracemalloc

import numpy as np
import pytest
from torcia_cpu import _native
from torcia_cpu.kernels import NativeKernels

import torcia
import torcia.nn.functional as F
from torcia.autograd import gradcheck
from torcia.library import ReferenceKernels as Reference

REF, NAT = Reference(), NativeKernels()
RNG = np.random.default_rng(0)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _qkv(b, hq, hk, lq, lk, e, ev, dtype):
    return (RNG.standard_normal(s).astype(dtype) for s in
            ((b, hq, lq, e), (b, hk, lk, e), (b, hk, lk, ev)))


# (b, hq, hk, lq, lk, e, ev, masking): several blocks each way (64 queries, 128 keys),
# causal with more keys than queries and fewer, grouped heads, masks of every kind, a
# decoding step
CASES = [(2, 4, 4, 200, 300, 32, 32, None), (1, 4, 2, 300, 200, 16, 24, "causal"),
         (1, 6, 2, 130, 520, 8, 8, "causal"), (2, 2, 1, 70, 260, 16, 16, "bool"),
         (1, 2, 2, 129, 129, 8, 4, "float"), (3, 12, 12, 1, 700, 64, 64, None)]


def _mask(masking, b, hq, lq, lk, dtype):
    if masking == "bool":
        m = RNG.random((b, 1, lq, lk)) < 0.9
        m[:, :, 5] = False  # a query with nothing to attend to
        return m
    if masking == "float":
        return np.where(RNG.random((lq, lk)) < 0.9, RNG.standard_normal((lq, lk)),
                        -np.inf).astype(dtype)
    return None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_against_the_reference(case, dtype):
    b, hq, hk, lq, lk, e, ev, masking = case
    q, k, v = _qkv(b, hq, hk, lq, lk, e, ev, dtype)
    mask = _mask(masking, b, hq, lq, lk, dtype)
    params = dict(is_causal=masking == "causal", scale=e ** -0.5)
    with np.errstate(all="ignore"):
        want = REF.flash_attention(q, k, v, mask, **params)
    got = NAT.flash_attention(q, k, v, mask, **params)
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        np.testing.assert_allclose(a, w, **TOL[dtype])
    g = RNG.standard_normal(want[0].shape).astype(dtype)
    with np.errstate(all="ignore"):
        want = REF.flash_attention_backward(g, q, k, v, *want, mask, **params)
    got = NAT.flash_attention_backward(g, q, k, v, *got, mask, **params)
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        np.testing.assert_allclose(a, w, **TOL[dtype])


def test_nan_scores_make_their_rows_nan():
    q, k, v = _qkv(1, 1, 1, 4, 200, 8, 8, np.float32)
    mask = np.zeros((4, 200), np.float32)
    mask[2, 150] = np.nan
    out, lse = NAT.flash_attention(q, k, v, mask, scale=1.0)
    assert np.isnan(out[0, 0, 2]).all() and np.isnan(lse[0, 0, 2])
    assert np.isfinite(np.delete(out[0, 0], 2, axis=0)).all()


@pytest.mark.parametrize("b, hk", [(2, 2), (1, 1)])
def test_the_same_on_every_thread_count(b, hk):
    # (1, 1): fewer key/value heads than threads, the backward's two passes; (2, 2): one
    q, k, v = _qkv(b, 2 * hk, hk, 150, 270, 16, 16, np.float32)
    g = RNG.standard_normal((b, 2 * hk, 150, 16)).astype(np.float32)
    before = _native.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            _native.set_num_threads(n)
            out, lse = NAT.flash_attention(q, k, v, None, is_causal=True, scale=0.25)
            results.append((out, lse, *NAT.flash_attention_backward(
                g, q, k, v, out, lse, None, is_causal=True, scale=0.25)))
    finally:
        _native.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(other, results[0]):
            np.testing.assert_array_equal(a, b)


def test_memory_grows_with_the_length_not_its_square():
    # 4096 queries and keys: the reference's scores alone are 64 MiB; the native kernels
    # allocate (through NumPy, which tracemalloc sees) only their inputs' and outputs' sizes
    q, k, v = _qkv(1, 1, 1, 4096, 4096, 16, 16, np.float32)
    tracemalloc.start()
    try:
        out, lse = NAT.flash_attention(q, k, v, None, is_causal=True, scale=0.25)
        NAT.flash_attention_backward(out, q, k, v, out, lse, None, is_causal=True, scale=0.25)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2 ** 20, peak  # the scores would be 64 MiB


def test_gradcheck_through_the_native_kernels():
    # float64 through F.scaled_dot_product_attention: the native forward and backward
    q, k, v = (torcia.tensor(RNG.standard_normal(s), dtype=torcia.float64, requires_grad=True)
               for s in ((1, 4, 70, 3), (1, 2, 130, 3), (1, 2, 130, 2)))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True), (q, k, v), eps=1e-6, atol=1e-6)
