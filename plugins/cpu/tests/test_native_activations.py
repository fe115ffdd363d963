"""The native activations, LayerNorm and BatchNorm, against core's reference kernels."""

import math

import numpy as np
import pytest
from torcia_cpu import _native, kernels
from torcia_cpu.kernels import NativeKernels

import torcia
import torcia.nn.functional as F
from torcia.autograd import gradcheck, gradgradcheck
from torcia.library import ReferenceKernels as Reference

REF, NAT = Reference(), NativeKernels()
RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64]
# float32: the native kernels are closer to the truth than the reference in the tails
# (GELU's 1 + erf(x) cancels there), so both are compared with the float64 reference
TOL = {np.float32: dict(rtol=1e-5, atol=2e-6), np.float64: dict(rtol=1e-9, atol=1e-12)}
EDGES = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 0.6, -0.6, 15.0,
         -15.0, 60.0, -60.0, 100.0, -100.0, 1e30, -1e30]

FORWARD = [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("sigmoid", {}),
           ("tanh", {}), ("softplus", {"beta": 1.0, "threshold": 20.0}),
           ("softplus", {"beta": 2.5, "threshold": 3.0}), ("elu", {"alpha": 1.0}),
           ("elu", {"alpha": 0.3}), ("leaky_relu", {"negative_slope": 0.01}),
           ("leaky_relu", {"negative_slope": 2.0}), ("relu", {})]
BACKWARD = [("gelu_backward", {}), ("gelu_backward", {"approximate": "tanh"}),
            ("silu_backward", {})]
FUSED = [("elu", {"alpha": 1.0}), ("elu", {"alpha": 0.3}),
         ("softplus", {"beta": 1.0, "threshold": 20.0}),
         ("softplus", {"beta": 0.5, "threshold": 2.0}), ("leaky_relu", {"negative_slope": 0.2}),
         ("relu", {}), ("sigmoid", {}), ("tanh", {})]


def _ref(op, *arrays, **kw):
    if op == "tanh":
        return np.tanh(*arrays)
    return getattr(REF, op)(*arrays, **kw)


def _inputs(shape, dtype, contiguous):
    x = np.asarray(RNG.standard_normal(shape) * 4, dtype=dtype)
    flat = x.reshape(-1)
    k = min(len(EDGES), flat.size)
    flat[:k] = EDGES[:k]
    if not contiguous:
        x = np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    return x


def _close(got, x_dtype, op, *arrays, **kw):
    """got against the reference in the same dtype and in float64."""
    with np.errstate(all="ignore"):
        same = _ref(op, *arrays, **kw)
        wide = _ref(op, *(a.astype(np.float64) for a in arrays), **kw)
    assert got.shape == same.shape and got.dtype == same.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(same))
    # where the input's dtype overflows (x^3 of 1e30 in float32), float64 does not
    finite = ~np.isnan(same)
    np.testing.assert_allclose(got[finite], wide.astype(x_dtype)[finite], **TOL[x_dtype])
    if x_dtype == np.float32:
        np.testing.assert_allclose(got, same, rtol=1e-5, atol=1e-5)
    # assert_allclose takes -0 for +0; torch keeps the sign (elu(-0) is -0)
    zero = (got == 0) & (same == 0)
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(same[zero]))


SHAPES = [(), (1,), (7,), (3, 33, 17), (5, 70001)]
# (shape, contiguous): 0-d, tiny, odd, several OpenMP chunks, transposed views
LAYOUTS = [(s, True) for s in SHAPES] + [((3, 33, 17), False), ((70001, 5), False)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, contiguous", LAYOUTS)
@pytest.mark.parametrize("op, kw", FORWARD)
def test_activation_forward(dtype, shape, contiguous, op, kw):
    x = _inputs(shape, dtype, contiguous)
    with np.errstate(all="ignore"):
        got = getattr(NAT, op)(x, **kw)
    _close(got, dtype, op, x, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op, kw", BACKWARD)
def test_activation_backward(dtype, shape, op, kw):
    x = _inputs(shape, dtype, contiguous=len(shape) < 2)
    g = np.asarray(RNG.standard_normal(shape), dtype=dtype)
    _close(getattr(NAT, op)(g, x, **kw), dtype, op, g, x, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation, kw", FUSED)
def test_fused_activation_backward(dtype, activation, kw):
    x = _inputs((4, 1001), dtype, contiguous=False)
    g = RNG.standard_normal(x.shape).astype(dtype)
    got = NAT.activation_backward(g, x, activation, **kw)
    _close(got, dtype, "activation_backward", g, x, activation=activation, **kw)


def _gelu_exact(x):
    """Phi(x) and x phi(x) in float64, from the C library's erfc and exp (math's)."""
    xd = x.astype(np.float64)
    cdf = 0.5 * np.vectorize(math.erfc)(-xd / math.sqrt(2))
    return xd, cdf, xd * np.exp(-xd * xd / 2) / math.sqrt(2 * math.pi)


def test_gelu_float32_within_7_ulp_of_the_exact_values():
    """The float32 kernel's own erfc fit, forward and backward, on a dense grid over
    |x| <= 13 (beyond, Phi(-|x|) is subnormal) and powers of two down to subnormals: the
    forward within 7 ulp of x Phi(x) (6.6 measured where the CPU has FMA), the backward within 7 ulp
    of its larger term (Phi or x phi, which cancel near x = -0.75) times g; below FLT_MIN
    and past 13, off by less than 1e-37."""
    pow2 = np.float32(2) ** np.arange(-149, 5, dtype=np.float32)
    x = np.concatenate([np.linspace(-13, 13, 260_001, dtype=np.float32), pow2, -pow2,
                        np.linspace(13, 40, 1001, dtype=np.float32),
                        np.linspace(-40, -13, 1001, dtype=np.float32)])
    xd, cdf, xpdf = _gelu_exact(x)
    y = NAT.gelu(x)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    dx = NAT.gelu_backward(g, x)
    tiny = np.finfo(np.float32).tiny
    inner = np.abs(xd) <= 13

    def ulps(err, scale):
        return err / np.spacing(np.abs(scale).astype(np.float32)).astype(np.float64)

    want = xd * cdf
    ok = inner & (np.abs(want) >= tiny)
    assert ulps(np.abs(y - want), want)[ok].max() <= 7
    assert np.abs(y - want)[~ok].max() < 1e-37
    want = g * (cdf + xpdf)
    scale = np.abs(g) * np.maximum(cdf, np.abs(xpdf))
    ok = inner & (scale >= tiny)
    # one more rounding than the forward: the product with g
    assert ulps(np.abs(dx - want), scale)[ok].max() <= 8
    assert np.abs(dx - want)[~ok].max() < 1e-37


def test_gelu_float64_matches_erfc():
    """float64 stays on the C library's erfc and exp: to the rounding of x / sqrt 2, which
    the tail's exp(-x^2 / 2) magnifies (to 2e-13 at |x| = 40)."""
    x = np.concatenate([np.linspace(-40, 40, 40_001), [0.0, -0.0, 1e-300, -1e-300]])
    xd, cdf, xpdf = _gelu_exact(x)
    np.testing.assert_allclose(NAT.gelu(x), xd * cdf, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(NAT.gelu_backward(np.ones_like(x), x), cdf + xpdf,
                               rtol=1e-12, atol=1e-300)


MASK_CASES = [((16, 4, 64, 64), (64, 64)), ((16, 4, 64, 64), (1, 1, 64, 64)),
              ((3, 5, 7), (5, 7)), ((3, 5, 7), (7,)), ((9,), (9,)), ((2, 3), (1, 2, 3)),
              ((4, 6), (4, 1)), ((4, 6), ()), ((0, 6), (6,)), ((3, 70001), (70001,))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape, mask_shape", MASK_CASES)
@pytest.mark.parametrize("value", [float("-inf"), np.nan, 2.5, 1e300, -3])
def test_masked_fill_matches_the_reference(dtype, a_shape, mask_shape, value):
    """Masks repeated over leading dims run natively; the others (inner broadcasting, a
    0-d mask, a mask of more dims than the input) go to the reference: the same values,
    shape and dtype either way, NaN inputs kept where the mask is False, 1e300 cast to
    float32's inf as the reference casts it."""
    a = _inputs(a_shape, dtype, contiguous=len(a_shape) < 2)
    mask = RNG.random(mask_shape) < 0.4
    with np.errstate(all="ignore"):
        want = REF.masked_fill(a, mask, value)
        got = NAT.masked_fill(a, mask, value)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_masked_fill_repeated_mask_takes_the_native_path(monkeypatch):
    calls = []
    native = _native.masked_fill_rows
    monkeypatch.setattr(_native, "masked_fill_rows", lambda *a: calls.append(1) or native(*a))
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    NAT.masked_fill(a[:, ::-1], np.ones((1, 3, 4), bool), 0.0)
    assert calls == [1]


def test_masked_fill_gradient_passes_gradcheck():
    x = torcia.randn(2, 3, 4, dtype=torcia.float64, requires_grad=True)
    mask = torcia.tensor(RNG.random((3, 4)) < 0.5)
    gradcheck(lambda x: x.masked_fill(mask, -1.5).sin(), (x,))


def test_relu_gradient_is_zero_where_the_input_is_not_positive():
    """As PyTorch's threshold_backward: a NaN or infinite gradient does not leak through the
    positions ReLU cut, whichever kernel runs, and an input of NaN gives NaN forward."""
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, 0.0, 2.0, np.nan, -np.inf, np.inf], np.float32)
    g = np.array([np.nan, np.inf, 3.0, 1.0, np.nan, 2.0], np.float32)
    want = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(x), 0.0).numpy()
    for kernels_ in (NAT, REF):
        np.testing.assert_array_equal(kernels_.activation_backward(g, x, "relu"), want)
    np.testing.assert_array_equal(NAT.relu(x), torch.relu(torch.tensor(x)).numpy())
    t = torcia.tensor(x, requires_grad=True)
    t.relu().backward(torcia.tensor(g))
    np.testing.assert_array_equal(t.grad.numpy(), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ["offset", "outlier_first", "constant"])
@pytest.mark.parametrize("d", [45, 300])
def test_layer_norm_backward_rows_far_from_zero(dtype, rows, d):
    """The backward's one-pass statistics (sums about each row's first element) against
    the reference's two-pass ones: rows with a mean 1e4 standard deviations from zero, a
    first element far from the rest, a constant row (variance 0), 16-row blocks and a
    tail of rows; rows short enough for the column-strip pass and long ones."""
    x = RNG.standard_normal((37, d))
    if rows == "offset":
        x = 1e4 + x
    elif rows == "outlier_first":
        x[:, 0] = 300.0
    else:
        x[:] = 2.5
    x = x.astype(dtype)
    g = RNG.standard_normal(x.shape).astype(dtype)
    w = RNG.standard_normal(d).astype(dtype)
    wide = REF.layer_norm_backward(g.astype(np.float64), x.astype(np.float64),
                                   w.astype(np.float64), 1, 1e-5)
    tol = dict(rtol=1e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-8, atol=1e-9)
    for got, want in zip(NAT.layer_norm_backward(g, x, w, 1, 1e-5), wide):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first", [3.0, 30.0, 300.0, -1e4, np.inf])
@pytest.mark.parametrize("d", [45, 300, 1024])
def test_layer_norm_backward_first_elements_far_from_the_mean(dtype, first, d, on_threads):
    """Rows whose first element lies far from their mean (every other row, the rest
    normal) take their sums again about the mean: the gradients stay within a few
    roundings of float64's (about the first element alone, rows of 300 after a 300 missed
    float64's weight gradient by 2.5e-4 of its largest value), with the same bits on 1-3
    threads; an infinite first element gives NaN rows as the reference does."""
    rng = np.random.default_rng(d)
    x = rng.standard_normal((37, d))
    x[::2, 0] = first
    x = x.astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    w = rng.standard_normal(d).astype(dtype)
    results = on_threads(lambda: NAT.layer_norm_backward(g, x, w, 1, 1e-5), (1, 2, 3))
    bits = f"u{np.dtype(dtype).itemsize}"
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            np.testing.assert_array_equal(got.view(bits), want.view(bits))
    with np.errstate(invalid="ignore"):
        wide = REF.layer_norm_backward(g.astype(np.float64), x.astype(np.float64),
                                       w.astype(np.float64), 1, 1e-5)
    bound = 1e-5 if dtype == np.float32 else 1e-13
    for got, want in zip(results[0], wide):
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        got, want = got[~np.isnan(want)], want[~np.isnan(want)]
        if want.size:
            np.testing.assert_allclose(got, want, rtol=0, atol=bound * np.abs(want).max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", ["offset", "outlier_first", "constant"])
@pytest.mark.parametrize("shape", [(5, 3, 7, 3), (40, 130)])
def test_batch_norm_backward_channels_far_from_zero(dtype, channels, shape):
    """Training's channel statistics and sums against the reference's, in float64:
    channels with a mean 1e4 standard deviations from zero, a first element far from the
    rest, a constant channel; channels of planes (one pass about each channel's first
    element) and the columns of (N, C) (blocks of columns, across the blocks' edge)."""
    x = RNG.standard_normal(shape)
    if channels == "offset":
        x = 1e4 + x
    elif channels == "outlier_first":
        x[(0, slice(None)) + (0,) * (len(shape) - 2)] = 300.0
    else:
        x[:, 1] = 2.5
    x = x.astype(dtype)
    g = RNG.standard_normal(x.shape).astype(dtype)
    w = RNG.standard_normal(shape[1]).astype(dtype)
    wide = REF.batch_norm_backward(g.astype(np.float64), x.astype(np.float64),
                                   w.astype(np.float64), None, None, True, 1e-5)
    tol = dict(rtol=1e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-8, atol=1e-9)
    for got, want in zip(NAT.batch_norm_backward(g, x, w, None, None, True, 1e-5), wide):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **tol)


def test_other_dtypes_and_activations_fall_back_to_the_reference():
    x = RNG.standard_normal((3, 4)).astype(np.float16)
    np.testing.assert_array_equal(NAT.gelu(x), REF.gelu(x))
    np.testing.assert_array_equal(NAT.tanh(x), np.tanh(x))
    g = np.ones((3, 4))
    y = RNG.standard_normal((3, 4))
    np.testing.assert_array_equal(NAT.activation_backward(g, y, "selu"),
                                  REF.activation_backward(g, y, "selu"))
    # a broadcast gradient is not the native kernels' case
    ones = np.ones(4)
    # (the reference's inner sigmoid runs natively: equal to the last bits only)
    np.testing.assert_allclose(NAT.silu_backward(ones, y), REF.silu_backward(ones, y),
                               rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, ndim", [((7, 33), 1), ((3, 5, 129), 2), ((2, 3, 4, 5), 3),
                                         ((1, 1), 1), ((0, 8), 1), ((4, 2049), 1)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_and_backward(dtype, shape, ndim, affine):
    x = (RNG.standard_normal(shape) * 3 + 1).astype(dtype)
    x = np.ascontiguousarray(x.swapaxes(0, -1)).swapaxes(0, -1)  # non-contiguous
    norm = shape[len(shape) - ndim:]
    w = RNG.standard_normal(norm).astype(dtype) if affine != "none" else None
    b = RNG.standard_normal(norm).astype(dtype) if affine == "both" else None
    g = RNG.standard_normal(shape).astype(dtype)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    out = NAT.layer_norm(x, w, b, ndim, 1e-5)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, REF.layer_norm(x, w, b, ndim, 1e-5), **tol)
    for got, want in zip(NAT.layer_norm_backward(g, x, w, ndim, 1e-5),
                         REF.layer_norm_backward(g, x, w, ndim, 1e-5)):
        assert got.shape == want.shape and got.dtype == dtype
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, ndim", [((7, 33), 1), ((3, 5, 129), 2), ((2, 3, 4, 5), 3),
                                         ((1, 1), 1), ((0, 8), 1), ((4, 2049), 1)])
@pytest.mark.parametrize("weighted", [True, False])
def test_rms_norm_and_backward(dtype, shape, ndim, weighted):
    x = (RNG.standard_normal(shape) * 3 + 1).astype(dtype)
    x = np.ascontiguousarray(x.swapaxes(0, -1)).swapaxes(0, -1)  # non-contiguous
    w = RNG.standard_normal(shape[len(shape) - ndim:]).astype(dtype) if weighted else None
    g = RNG.standard_normal(shape).astype(dtype)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    out = NAT.rms_norm(x, w, ndim, 1e-6)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, REF.rms_norm(x, w, ndim, 1e-6), **tol)
    for got, want in zip(NAT.rms_norm_backward(g, x, w, ndim, 1e-6),
                         REF.rms_norm_backward(g, x, w, ndim, 1e-6)):
        assert got.shape == want.shape and got.dtype == dtype
        np.testing.assert_allclose(got, want, **tol)


def test_rms_norm_of_zero_rows_and_nan():
    x = np.array([[0.0, 0.0, 0.0], [1.0, np.nan, 3.0]], dtype=np.float32)
    g = np.ones_like(x)
    with np.errstate(all="ignore"):
        want, want_g = REF.rms_norm(x, None, 1, 1e-6), REF.rms_norm_backward(g, x, None, 1, 1e-6)
    np.testing.assert_allclose(NAT.rms_norm(x, None, 1, 1e-6), want)
    np.testing.assert_allclose(NAT.rms_norm_backward(g, x, None, 1, 1e-6)[0], want_g[0],
                               rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:Degrees of freedom")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3, 5, 7), (2, 5), (7, 150), (3, 2, 9), (1, 4, 1, 1),
                                   (0, 3, 2), (0, 70)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_and_backward(dtype, shape, training, affine):
    x = (RNG.standard_normal(shape) * 2 + 0.5).astype(dtype)
    if len(shape) > 2:
        x = np.ascontiguousarray(x.swapaxes(0, -1)).swapaxes(0, -1)  # non-contiguous
    c = shape[1]
    w = RNG.standard_normal(c).astype(dtype) if affine else None
    b = RNG.standard_normal(c).astype(dtype) if affine else None
    rm, rv = RNG.standard_normal(c).astype(dtype), RNG.random(c).astype(dtype) + 0.5
    g = RNG.standard_normal(shape).astype(dtype)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    args = (rm, rv, training, 1e-5)
    with np.errstate(all="ignore"):
        want = REF.batch_norm(x, w, b, *args)
        want_g = REF.batch_norm_backward(g, x, w, *args)
    for got, ref in zip(NAT.batch_norm(x, w, b, *args), want):
        assert got.shape == ref.shape and got.dtype == dtype
        np.testing.assert_allclose(got, ref, **tol)
    for got, ref in zip(NAT.batch_norm_backward(g, x, w, *args), want_g):
        assert got.shape == ref.shape and got.dtype == dtype
        np.testing.assert_allclose(got, ref, **tol)


def test_layer_norm_of_constant_rows_and_nan():
    x = np.array([[2.0, 2.0, 2.0], [1.0, np.nan, 3.0]], dtype=np.float32)
    with np.errstate(all="ignore"):
        want = REF.layer_norm(x, None, None, 1, 1e-5)
    np.testing.assert_allclose(NAT.layer_norm(x, None, None, 1, 1e-5), want)


@pytest.mark.parametrize("call, message", [
    (lambda: _native.activation("gelu", np.ones(3, np.int64)), "x must be float32 or float64"),
    (lambda: _native.masked_fill_rows(np.ones((2, 3), np.int64), np.ones(3, bool), 0.0),
     "a must be float32 or float64"),
    (lambda: _native.masked_fill_rows(np.ones(3), np.ones(3, bool), 0.0), "a must be 2-D"),
    (lambda: _native.masked_fill_rows(np.ones((2, 3)), np.ones(3), 0.0),
     "mask must be a C-contiguous bool array"),
    (lambda: _native.masked_fill_rows(np.ones((2, 3)), np.ones(4, bool), 0.0),
     r"mask has shape \(4,\), expected \(3,\)"),
    (lambda: _native.activation("gelu", np.ones((3, 4), np.float32).T),
     "x must be C-contiguous"),
    (lambda: _native.activation("swish", np.ones(3, np.float32)), "unknown activation"),
    (lambda: _native.activation("softplus", np.ones(3), 0.0, 20.0), "beta must not be 0"),
    (lambda: _native.activation_backward("silu", np.ones(4), np.ones(3)),
     r"g has shape \(4,\), x has \(3,\)"),
    (lambda: _native.activation_backward("silu", np.ones(3, np.float32), np.ones(3)),
     "g has dtype float32, x has float64"),
    (lambda: _native.layer_norm(np.ones((2, 3)), None, None, 4, 1e-5),
     "not a multiple of d = 4"),
    (lambda: _native.layer_norm(np.ones((2, 3)), None, None, 0, 1e-5), "d must be positive"),
    (lambda: _native.layer_norm(np.ones((2, 3)), np.ones(2), None, 3, 1e-5),
     "weight has 2 elements, expected 3"),
    (lambda: _native.layer_norm(np.ones((2, 3)), None, np.ones(3, np.float32), 3, 1e-5),
     "bias has dtype float32"),
    (lambda: _native.layer_norm(np.ones((2, 3)), [1.0, 2.0, 3.0], None, 3, 1e-5),
     "weight must be an array or None"),
    (lambda: _native.layer_norm_backward(np.ones((3, 2)), np.ones((2, 3)), None, 3, 1e-5),
     r"g has shape \(3, 2\), x has \(2, 3\)"),
    (lambda: _native.rms_norm(np.ones((2, 3)), None, 4, 1e-5), "not a multiple of d = 4"),
    (lambda: _native.rms_norm(np.ones((2, 3), np.int64), None, 3, 1e-5),
     "x must be float32 or float64"),
    (lambda: _native.rms_norm(np.ones((2, 3)), np.ones(3, np.float32), 3, 1e-5),
     "weight has dtype float32"),
    (lambda: _native.rms_norm_backward(np.ones((2, 3)), np.ones((2, 3)), np.ones(2), 3, 1e-5),
     "weight has 2 elements, expected 3"),
    (lambda: _native.rms_norm_backward(np.ones((3, 2)), np.ones((2, 3)), None, 3, 1e-5),
     r"g has shape \(3, 2\), x has \(2, 3\)"),
    (lambda: _native.batch_norm(np.ones(3), None, None, None, None, 1e-5),
     r"x must be \(N, C, \*\)"),
    (lambda: _native.batch_norm(np.ones((2, 3)), None, None, np.ones(3), None, 1e-5),
     "mean and var must both be given"),
    (lambda: _native.batch_norm(np.ones((2, 3)), np.ones(4), None, None, None, 1e-5),
     "weight has 4 elements, expected 3"),
    (lambda: _native.batch_norm_backward(np.ones((2, 3)), np.ones((2, 3)), None,
                                         np.ones(3, np.float32), np.ones(3), 1e-5),
     "mean has dtype float32"),
    (lambda: _native.batch_norm_backward(np.ones((2, 4)), np.ones((2, 3)), None, None, None,
                                         1e-5), r"g has shape \(2, 4\)"),
])
def test_native_entry_points_check_their_arguments(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_gradients_through_native_activations_and_layer_norm_pass_gradcheck():
    x = torcia.randn(3, 7, dtype=torcia.float64, requires_grad=True)
    for fn in (F.gelu, lambda z: F.gelu(z, approximate="tanh"), F.silu, torcia.sigmoid,
               torcia.tanh, lambda z: F.softplus(z, beta=2.0, threshold=1.0),
               lambda z: F.elu(z, alpha=0.7), lambda z: F.leaky_relu(z, 0.2), F.relu):
        gradcheck(fn, (x,))
    w = torcia.randn(7, dtype=torcia.float64, requires_grad=True)
    b = torcia.randn(7, dtype=torcia.float64, requires_grad=True)
    gradcheck(lambda x, w, b: F.layer_norm(x, (7,), w, b).sin(), (x, w, b))
    gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True).sin(), (x, w, b))
    # through the backward too: gelu_backward and silu_backward are differentiable ops
    for fn in (F.gelu, lambda z: F.gelu(z, approximate="tanh"), F.silu, F.relu):
        gradgradcheck(fn, (x,))


_SCRIPT = """
import numpy as np
import torcia
import torcia.nn.functional as F
from torcia.backend import get_backend

print(get_backend("cpu").kernel_providers["gelu"])
torcia.manual_seed(0)
outs = []
for dtype in (torcia.float32, torcia.float64):
    x = (torcia.randn(5, 300, dtype=dtype) * 3).requires_grad_()
    w = torcia.randn(300, dtype=dtype, requires_grad=True)
    y = F.layer_norm(x, (300,), w, None)
    y = (F.gelu(y) + F.gelu(y, approximate="tanh") + F.silu(y) + y.sigmoid() + y.tanh()
         + F.softplus(y) + F.elu(y) + F.leaky_relu(y) + y.relu())
    y.sum().backward()
    outs += [y.detach().numpy().ravel(), x.grad.numpy().ravel(), w.grad.numpy().ravel()]
np.save({out!r}, np.concatenate([o.astype(np.float64) for o in outs]))
"""


def test_blocking_the_plugin_gives_the_same_activations_and_norms(with_and_without_plugin):
    results = with_and_without_plugin(_SCRIPT)
    assert results["native"][0] == "cpu" and results["numpy"][0] == "core"
    np.testing.assert_allclose(results["native"][1], results["numpy"][1], rtol=1e-5, atol=1e-5)


def test_supported_cases_take_the_native_path(monkeypatch):
    """The overrides above must not quietly fall back to the reference for their own case."""
    def refuse(*args, **kwargs):
        raise AssertionError("fell back to the reference kernel")

    monkeypatch.setattr(kernels, "fallback", refuse)  # the one way to the reference
    x = RNG.standard_normal((6, 10)).astype(np.float32)
    w, b = np.ones(10, np.float32), np.zeros(10, np.float32)
    NAT.gelu(x), NAT.gelu(x, approximate="tanh"), NAT.gelu_backward(x, x)
    NAT.silu(x), NAT.silu_backward(x, x), NAT.sigmoid(x), NAT.softplus(x), NAT.elu(x)
    NAT.leaky_relu(x), NAT.activation_backward(x, x, "elu", alpha=1.0)
    NAT.relu(x), NAT.activation_backward(x, x, "relu")
    NAT.layer_norm(x, w, b, 1, 1e-5), NAT.layer_norm_backward(x, x, w, 1, 1e-5)
    NAT.layer_norm(x, None, None, 1, 1e-5), NAT.layer_norm_backward(x, x, None, 1, 1e-5)
    for training in (True, False):
        NAT.batch_norm(x, w, b, w, w, training, 1e-5)
        NAT.batch_norm_backward(x, x, w, w, w, training, 1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, d", [(100, 1024), (513, 300), (4096, 64), (17, 5000),
                                     (2000, 1)])
def test_layer_norm_gradients_have_the_same_bits_on_every_thread_count(dtype, rows, d,
                                                                      on_threads):
    # the weight and bias gradients sum runs of rows fixed by the row count, added in run
    # order: neither the thread count nor which thread finishes first changes a bit
    x = (RNG.standard_normal((rows, d)) * 3 + 1).astype(dtype)
    w, g = RNG.standard_normal(d).astype(dtype), RNG.standard_normal((rows, d)).astype(dtype)
    results = on_threads(lambda: NAT.layer_norm_backward(g, x, w, 1, 1e-5), (1, 2, 3, 4))
    bits = f"u{np.dtype(dtype).itemsize}"
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            np.testing.assert_array_equal(got.view(bits), want.view(bits))
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-9)
    for got, want in zip(results[0], REF.layer_norm_backward(g, x, w, 1, 1e-5)):
        np.testing.assert_allclose(got, want, **tol)
