"""The native C-contiguous copy (csrc/elementwise.cpp's contiguous, issue #42) against
NumPy's ``ascontiguousarray``: byte for byte on every layout (permuted, stepped, flipped,
broadcast) and dtype of numbers, the same on every thread count, and through torcia's
``contiguous``, ``reshape`` (where it copies) and the kernels' ``_c``."""

import itertools

import numpy as np
import pytest
from torcia_cpu import _native, kernels

import torcia

RNG = np.random.default_rng(42)
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.float16, np.int32, np.float32,
          np.int64, np.float64, np.complex64, np.complex128]
SHAPES = [(), (0,), (1,), (7,), (3000,), (0, 5), (1, 1), (3, 1), (17, 33), (64, 96),
          (200, 800), (2, 0, 3), (1, 9, 1), (5, 6, 7), (40, 1, 37), (3, 4, 5, 6),
          (2, 1, 33, 17), (2, 3, 4, 5, 6), (3, 1, 40, 1, 19)]


def _values(shape, dtype):
    x = RNG.standard_normal(shape) * 100
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.asarray(x).astype(dtype)


def _layouts(a):
    """(name, view of a's values in another layout) for each layout worth a copy."""
    yield "c", a
    for perm in itertools.islice(itertools.permutations(range(a.ndim)), 1, 8):
        yield f"permute{perm}", a.transpose(perm)
    if a.ndim:
        yield "stepped", a[tuple(slice(None, None, 2) for _ in range(a.ndim))]
        yield "flipped", a[tuple(slice(None, None, -1) for _ in range(a.ndim))]
        yield "flipped last, transposed", np.flip(a, -1).T
        yield "stepped back, transposed", a[..., ::-3].T
        yield "broadcast", np.broadcast_to(a[..., :1], a.shape)
        four = 4 if a.shape[-1] else 0
        yield "expanded", np.broadcast_to(a[None, ..., :1], (3, *a.shape[:-1], four))
        yield "wider, every other column", np.repeat(a, 2, axis=-1)[..., ::2]
    if a.ndim >= 2:
        yield "row broadcast, transposed", np.broadcast_to(a[:1], a.shape).swapaxes(0, -1)


CASES = [(shape, dtype, name) for shape in SHAPES for dtype in DTYPES
         for name, _ in _layouts(np.zeros(shape))]


def _case(shape, dtype, name):
    return dict(_layouts(_values(shape, dtype)))[name]


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.flags.c_contiguous and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("shape, dtype, name", CASES, ids=str)
def test_copy_is_numpys_byte_for_byte(shape, dtype, name):
    a = _case(shape, dtype, name)
    got = _native.contiguous(a)
    _same(got, np.ascontiguousarray(a).reshape(a.shape))
    assert got.size == 0 or not np.shares_memory(got, a)


@pytest.mark.parametrize("shape, strided", [
    ((512, 512), lambda a: a.T), ((2048, 600), lambda a: a.T),
    ((64, 4096), lambda a: a.T[::-1]), ((16, 64, 4, 32), lambda a: a.transpose(0, 2, 1, 3)),
    ((16, 4, 64, 32), lambda a: a.transpose(3, 1, 2, 0)), ((35, 20, 200), lambda a: a[::2]),
    ((300, 70, 3), lambda a: a.transpose(2, 1, 0)[:, ::-1])], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.complex128])
def test_large_copies_are_the_same_on_every_thread_count(shape, strided, dtype):
    a = strided(_values(shape, dtype))
    want = np.ascontiguousarray(a)
    before = _native.get_num_threads()
    try:
        for n in (1, 2, 3):
            _native.set_num_threads(n)
            _same(_native.contiguous(a), want)
    finally:
        _native.set_num_threads(before)


def test_byte_swapped_and_unaligned_arrays():
    # bytes moved as they are: a big-endian float32's, and an array at an odd address
    # (the AVX blocks load and store unaligned)
    x = _values((96, 80), np.float32)
    swapped = x.astype(">f4").T
    _same(_native.contiguous(swapped), np.ascontiguousarray(swapped))
    raw = np.zeros(x.nbytes + 1, np.uint8)
    odd = raw[1:].view(np.float32).reshape(x.shape)
    odd[...] = x
    assert not odd.flags.aligned
    for a in (odd.T, odd[::-1].T, odd[:, ::2].T):
        _same(_native.contiguous(a), np.ascontiguousarray(a))


@pytest.mark.parametrize("a", [np.zeros(8, object), np.zeros(8, "U3"), np.zeros(8, "i4,f4"),
                               np.zeros(8, "V4"), np.zeros(8, "M8[s]")], ids=str)
def test_other_dtypes_are_refused(a):
    with pytest.raises(RuntimeError, match="contiguous: a of .*: expected bool, integer, "
                                           "float or complex numbers"):
        _native.contiguous(a[::2])


def test_kernels_copy_natively_from_the_threshold_only(monkeypatch):
    calls = []
    monkeypatch.setattr(_native, "contiguous", lambda a: calls.append(a.shape) or a.copy())
    big = np.zeros((kernels._COPY_FROM // 64, 64), np.float32)
    small = np.zeros((4, 8))
    for c in (kernels._c, kernels._cc, kernels.NativeKernels().contiguous):
        # contiguous, small, objects, a subclass: NumPy's copies (ascontiguousarray makes
        # a 0-d array 1-d, _cc keeps it)
        for a in (big, small.T, big.astype(object).T, np.ma.masked_array(big).T,
                  np.float32(2.0), np.zeros(())):
            got = c(a)
            if c is kernels._cc:
                want = a if a.flags.c_contiguous else a.copy()
            else:
                want = np.ascontiguousarray(a)
            assert type(got) is type(want) and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
        assert not calls
        assert c(big.T).shape == (64, kernels._COPY_FROM // 64) and calls == [big.T.shape]
        calls.clear()
    assert kernels._c(big) is big and kernels._cc(big) is big


def test_contiguous_through_torcia():
    x = torcia.randn(800, 200)
    for y, want in ((x.t(), x.numpy().T), (x.reshape(16, 50, 200).permute(2, 0, 1),
                                           x.numpy().reshape(16, 50, 200).transpose(2, 0, 1)),
                    (x[::3], x.numpy()[::3])):
        assert not y.is_contiguous()
        z = y.contiguous()
        assert z.is_contiguous() and z.shape == y.shape
        _same(z.numpy(), np.ascontiguousarray(want))
        assert not np.shares_memory(z.numpy(), x.numpy())
    r = x.t().reshape(-1)
    np.testing.assert_array_equal(r.numpy(), x.numpy().T.reshape(-1))
    assert r.is_contiguous() and not np.shares_memory(r.numpy(), x.numpy())
    # a reshape that can be a view stays one (PyTorch's), of the tensor's memory
    v = x.t().reshape(2, 100, 800)
    assert np.shares_memory(v.numpy(), x.numpy())
    i = torcia.arange(60000).reshape(200, 300).t().contiguous()
    _same(i.numpy(), np.ascontiguousarray(np.arange(60000).reshape(200, 300).T))


def test_reshape_copies_natively_where_it_copies(monkeypatch):
    calls = []
    copy = _native.contiguous
    monkeypatch.setattr(_native, "contiguous", lambda a: calls.append(a.shape) or copy(a))
    reshape = kernels.NativeKernels().reshape
    x = _values((64, 96), np.float32)
    # views: of a C-contiguous array, of a transposed one split along a dim, of a slice
    for a, shape in ((x, (96, 64)), (x.T, (2, 48, 64)), (x[:, :48], (64, 4, 12))):
        got = reshape(a, shape)
        assert np.shares_memory(got, a) and got.shape == shape
        np.testing.assert_array_equal(got, np.reshape(a, shape))
    assert not calls
    for a, shape in ((x.T, (-1,)), (x[::-1], (96, 64)), (x.T, (64, 96))):
        got = reshape(a, shape)
        _same(got, np.ascontiguousarray(np.reshape(a, shape)))
        assert not np.shares_memory(got, a)
    assert calls == [(96, 64), (64, 96), (96, 64)]
    with pytest.raises(ValueError, match="cannot reshape array of size 6144"):
        reshape(x.T, (7,))
    small = np.zeros((4, 8)).T
    np.testing.assert_array_equal(reshape(small, (-1,)), small.reshape(-1))
    assert len(calls) == 4


def test_contiguous_and_reshape_gradients_flow():
    w = torcia.randn(200, 800, dtype=torcia.float64, requires_grad=True)
    g = torcia.randn(800, 200, dtype=torcia.float64)
    (w.t().contiguous() * g).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), g.numpy().T)
    w.grad = None
    (w.t().reshape(-1) * g.reshape(-1)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), g.numpy().T)
