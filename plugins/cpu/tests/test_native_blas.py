"""Products on the extension's own OpenBLAS (scipy-openblas32): batched matmul against
NumPy's, the LSTM layer's loop against core's reference kernels."""

import numpy as np
import pytest
from torcia_cpu import _native, kernels
from torcia_cpu.kernels import NativeKernels

from torcia.library import ReferenceKernels as Reference

REF_TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
NAT = NativeKernels()
RNG = np.random.default_rng(0)


def _views(dtype):
    """(a, b) pairs in the layouts attention and users make."""
    qkv = RNG.standard_normal((3, 17, 3 * 20)).astype(dtype)
    q = qkv[..., :20].reshape(3, 17, 4, 5).transpose(0, 2, 1, 3)
    k = qkv[..., 20:40].reshape(3, 17, 4, 5).transpose(0, 2, 1, 3)
    yield q, k.swapaxes(-1, -2)                                       # q @ k^T, no copy
    yield RNG.standard_normal((6, 7, 9)).astype(dtype), RNG.standard_normal((6, 9, 5)).astype(dtype)
    yield (RNG.standard_normal((2, 3, 1, 4)).astype(dtype),           # a row per matrix
           RNG.standard_normal((2, 3, 4, 1)).astype(dtype))           # and a column
    yield (RNG.standard_normal((5, 8, 3)).astype(dtype)[:, ::2],      # strided rows
           RNG.standard_normal((5, 3, 6)).astype(dtype))
    yield (RNG.standard_normal((4, 6, 8)).astype(dtype)[..., ::2],    # no unit stride: copied
           RNG.standard_normal((4, 4, 3)).astype(dtype))
    yield (RNG.standard_normal((2, 1, 3, 4)).astype(dtype),           # broadcast batch
           RNG.standard_normal((5, 4, 2)).astype(dtype))
    yield np.ones((0, 3, 4), dtype), np.ones((0, 4, 2), dtype)        # empty batch
    yield np.ones((2, 3, 0), dtype), np.ones((2, 0, 2), dtype)        # empty sum: zeros


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_products_match_numpy(dtype):
    for a, b in _views(dtype):
        got = NAT.matmul(a, b)
        want = np.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **REF_TOL[dtype])


@pytest.mark.parametrize("threads", [1, 3])
def test_strided_batches_split_over_threads_match_numpy(threads):
    # batches with one stride per operand go to BLAS's strided batch call, a range of the
    # batch per thread: a broadcast operand (stride 0), a transposed one, and a batch of 7
    # (uneven over 3 threads)
    a = RNG.standard_normal((7, 64, 32)).astype(np.float32)
    b = RNG.standard_normal((7, 64, 32)).astype(np.float32).swapaxes(-1, -2)
    w = np.broadcast_to(RNG.standard_normal((32, 48)).astype(np.float32), (7, 32, 48))
    before = _native.get_num_threads()
    _native.set_num_threads(threads)
    try:
        got = [_native.matmul_batched(a, b), _native.matmul_batched(a, w),
               _native.matmul_batched(a[:, ::2], w)]
    finally:
        _native.set_num_threads(before)
    for g, want in zip(got, (a @ b, a @ w, a[:, ::2] @ w)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("blas_threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_single_products_on_blas_threads_match_numpy(dtype, blas_threads):
    # a batch of one (a linear layer's backward, a's rows times b) is one plain call on the
    # threads set_blas_threads gives: every layout of each operand, a row and a column
    def operand(rows, cols, transposed):
        x = RNG.standard_normal((cols, rows) if transposed else (rows, cols)).astype(dtype)
        return x.T if transposed else x

    _native.set_blas_threads(blas_threads)
    try:
        for m, k, n in [(96, 80, 72), (1, 33, 40), (40, 33, 1), (3, 1, 5)]:
            for ta in (False, True):
                for tb in (False, True):
                    a, b = operand(m, k, ta), operand(k, n, tb)
                    np.testing.assert_allclose(_native.matmul_batched(a, b), a @ b,
                                               **REF_TOL[dtype])
    finally:
        _native.set_blas_threads(1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_single_products_in_panels_match_numpy_on_any_team(dtype):
    # a product cut into panels of C's columns (more columns than rows) or of its rows,
    # every layout of each operand, for 2 and 3 threads: the same bits whether the whole
    # team or the calling thread alone runs the panels; beside a bias too (linear)
    def operand(rows, cols, transposed):
        x = RNG.standard_normal((cols, rows) if transposed else (rows, cols)).astype(dtype)
        return x.T if transposed else x

    bias = RNG.standard_normal(300).astype(dtype)
    for m, k, n in [(96, 40, 300), (300, 40, 96), (70, 33, 129)]:
        for ta in (False, True):
            for tb in (False, True):
                a, b = operand(m, k, ta), operand(k, n, tb)
                for threads in (2, 3):
                    got = _native.matmul_batched(a, b, threads, threads)
                    np.testing.assert_allclose(got, a @ b, **REF_TOL[dtype])
                    np.testing.assert_array_equal(_native.matmul_batched(a, b, threads, 1), got)
                    lin = _native.linear(a, b.T, bias[:n], threads, threads)
                    np.testing.assert_allclose(lin, a @ b + bias[:n], **REF_TOL[dtype])
                    np.testing.assert_array_equal(_native.linear(a, b.T, bias[:n], threads, 1),
                                                  lin)


def test_products_check_their_thread_counts():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(RuntimeError, match="threads and team must be at least 1"):
        _native.matmul_batched(a, a, 0, 1)
    with pytest.raises(RuntimeError, match="threads and team must be at least 1"):
        _native.linear(a, a, None, 2, 0)


def test_the_native_product_reads_transposed_views_in_place():
    a = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    b = RNG.standard_normal((3, 6, 4)).astype(np.float32).swapaxes(-1, -2)
    np.testing.assert_allclose(_native.matmul_batched(a.swapaxes(-1, -2).swapaxes(-1, -2), b),
                               a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_native.matmul_batched(b.swapaxes(-1, -2), a.swapaxes(-1, -2)),
                               np.matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2)), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("a, b, message", [
    (np.ones(3, np.float32), np.ones(3, np.float32), "a must have at least 2 dims"),
    (np.ones((2, 3, 4)), np.ones((4, 5)), "b has 2 dims, a has 3"),
    (np.ones((2, 3, 4), np.int64), np.ones((2, 4, 5), np.int64), "a must be float32 or float64"),
    (np.ones((2, 3, 4)), np.ones((2, 4, 5), np.float32), "b has dtype float32, a has float64"),
    (np.ones((2, 3, 4)), np.ones((3, 4, 5)), "leading dims must be equal"),
    (np.ones((2, 3, 4)), np.ones((2, 5, 5)), "a's last dim must be b's second last"),
    (np.ones((2, 3, 8))[..., ::2], np.ones((2, 4, 5)), "a has no unit stride"),
    (np.ones((2, 3, 4))[::-1], np.ones((2, 4, 5)), "a has a negative or unaligned stride"),
])
def test_batched_product_checks_its_arguments(a, b, message):
    with pytest.raises(RuntimeError, match=message):
        _native.matmul_batched(a, b)


LSTM_SIZES = [(7, 5, 6), (1, 1, 1), (3, 2, 33), (12, 9, 17)]  # (steps, batch, hidden)


def _lstm_inputs(dtype, steps, batch, hidden):
    xg = RNG.standard_normal((steps, batch, 4 * hidden)).astype(dtype)
    h0, c0 = (RNG.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    w = (RNG.standard_normal((4 * hidden, hidden)) * 0.5).astype(dtype).T  # as nn.LSTM's
    return xg, h0, c0, w


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", LSTM_SIZES)
def test_lstm_layer_and_backward_match_the_reference(dtype, sizes):
    ref = Reference()
    xg, h0, c0, w = _lstm_inputs(dtype, *sizes)
    want = ref.lstm_layer(xg, h0, c0, w)
    got = NAT.lstm_layer(xg, h0, c0, w)
    for g, r in zip(got, want):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, **REF_TOL[dtype])
    out, cs, acts = want
    g_out, g_cs = (RNG.standard_normal(out.shape).astype(dtype) for _ in range(2))
    for grads in ((g_out, g_cs), (g_out, None), (None, g_cs), (g_out[::-1], None)):
        expected = ref.lstm_layer_backward(*grads, acts, cs, out, h0, c0, w)
        for g, r in zip(NAT.lstm_layer_backward(*grads, acts, cs, out, h0, c0, w), expected):
            assert g.shape == r.shape and g.dtype == r.dtype
            np.testing.assert_allclose(g, r, **REF_TOL[dtype])


# (steps, batch, hidden): a step of at least 2^17 multiply-adds, split over the threads'
# hidden units, evenly and not (50 units on 3 threads: 16, 16, 18)
THREADED_LSTM_SIZES = [(4, 16, 48), (3, 20, 50), (2, 1, 192)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", THREADED_LSTM_SIZES)
def test_lstm_layer_on_threads_matches_the_reference_run_after_run(dtype, sizes, on_threads):
    ref = Reference()
    xg, h0, c0, w = _lstm_inputs(dtype, *sizes)
    out, cs, acts = ref.lstm_layer(xg, h0, c0, w)
    g_out, g_cs = (RNG.standard_normal(out.shape).astype(dtype) for _ in range(2))
    want = (*ref.lstm_layer(xg, h0, c0, w),
            *ref.lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w),
            *ref.lstm_layer_backward(None, g_cs, acts, cs, out, h0, c0, w))

    def run():
        return (*NAT.lstm_layer(xg, h0, c0, w),
                *NAT.lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w),
                *NAT.lstm_layer_backward(None, g_cs, acts, cs, out, h0, c0, w))

    results = on_threads(run, (1, 2, 3))
    for got in results:
        for g, r in zip(got, want, strict=True):
            assert g.shape == r.shape and g.dtype == r.dtype
            np.testing.assert_allclose(g, r, **REF_TOL[dtype])
    # twice on each count: the same bits
    for first, again in zip(results[::2], results[1::2]):
        for a, b in zip(first, again, strict=True):
            np.testing.assert_array_equal(a, b)


def _has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not _has_avx512(), reason="the packed products run on AVX-512 alone")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", [(5, 32, 64), (3, 20, 50), *THREADED_LSTM_SIZES])
def test_lstm_layer_is_the_same_bits_on_any_thread_count(dtype, sizes, on_threads):
    # row groups (a batch of 16 rows or more) and unit slices (fewer) both compute each
    # element as one thread does, on the packed products (csrc/packed_gemm.h); the weight's
    # gradient is BLAS's, in column slices, whose rounding BLAS may choose by their width
    xg, h0, c0, w = (np.ascontiguousarray(a) for a in _lstm_inputs(dtype, *sizes))
    g_out = RNG.standard_normal(xg.shape[:-1] + h0.shape[-1:]).astype(dtype)

    def run():
        out, cs, acts = _native.lstm_layer(xg, h0, c0, w)
        return (out, cs, acts,
                *_native.lstm_layer_backward(g_out, None, acts, cs, out, h0, c0, w))

    results = on_threads(run, (1, 2, 3))
    for got in results[1:]:
        for a, b in zip(results[0][:-1], got[:-1], strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(got[-1], results[0][-1], **REF_TOL[dtype])


def _lstm_call(**change):
    xg, h0, c0, w = (np.ascontiguousarray(a) for a in _lstm_inputs(np.float64, 3, 2, 4))
    args = dict(x_gates=xg, h0=h0, c0=c0, w_hh_t=w)
    args.update(change)
    return lambda: _native.lstm_layer(**args)


def _lstm_backward_call(**change):
    xg, h0, c0, w = (np.ascontiguousarray(a) for a in _lstm_inputs(np.float64, 3, 2, 4))
    out, cs, acts = _native.lstm_layer(xg, h0, c0, w)
    args = dict(g_out=np.ones_like(out), g_cs=None, acts=acts, cs=cs, out=out, h0=h0, c0=c0,
                w_hh_t=w)
    args.update(change)
    return lambda: _native.lstm_layer_backward(**args)


@pytest.mark.parametrize("call, message", [
    (_lstm_call(x_gates=np.ones((3, 2, 15))), r"x_gates must be \(L, N, 4H\)"),
    (_lstm_call(x_gates=np.ones((3, 2, 16), np.int32)), "x_gates must be float32 or float64"),
    (_lstm_call(h0=np.ones((2, 4), np.float32)), "h0 has dtype float32"),
    (_lstm_call(c0=np.ones((3, 4))), r"c0 has shape \(3, 4\), expected \(2, 4\)"),
    (_lstm_call(w_hh_t=np.ones((16, 4))), r"w_hh_t has shape \(16, 4\), expected \(4, 16\)"),
    (_lstm_call(w_hh_t=np.ones((16, 4)).T), "w_hh_t must be C-contiguous"),
    (_lstm_backward_call(g_out=np.ones((3, 2, 5))), r"g_out has shape \(3, 2, 5\)"),
    (_lstm_backward_call(g_cs=[1.0]), "g_cs must be an array or None"),
    (_lstm_backward_call(cs=np.ones((3, 2, 5))), r"cs has shape \(3, 2, 5\), expected"),
])
def test_lstm_layer_checks_its_arguments(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_lstm_layer_takes_the_native_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("fell back to the reference kernel")

    monkeypatch.setattr(kernels, "fallback", refuse)  # the one way to the reference
    xg, h0, c0, w = _lstm_inputs(np.float32, 3, 2, 4)
    out, cs, acts = NAT.lstm_layer(xg, h0, c0, w)
    NAT.lstm_layer_backward(out, None, acts, cs, out, h0, c0, w)
    NAT.lstm_layer_backward(None, cs, acts, cs, out, h0, c0, w)


def test_two_dim_products_return_arrays_that_own_their_memory():
    # a view would make the autograd engine copy a weight's gradient into .grad instead of
    # taking its buffer, and add gradients into new arrays instead of in place
    a, b, w, bias = (RNG.standard_normal(s).astype(np.float32)
                     for s in ((6, 5), (5, 4), (4, 5), (4,)))
    for out, ref in ((NAT.matmul(a, b), a @ b), (NAT.matmul(a.T.T, b), a @ b),
                     (NAT.linear(a, w, bias), a @ w.T + bias),
                     (NAT.linear(a, w, None), a @ w.T)):
        assert out.flags.owndata and out.flags.c_contiguous
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # more leading dims are still folded into the rows of one product
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(NAT.linear(x, w, bias), x @ w.T + bias, rtol=1e-5, atol=1e-5)

