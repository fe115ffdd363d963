"""Differential fuzzing: every op the plugin overrides, native kernel against core's NumPy
reference, over random shapes, memory layouts, dtypes and window geometries (hypothesis).

Valid inputs must agree to float tolerance (indices exactly); invalid ones (bad geometry,
mismatched shapes) must raise the same error class from both. The example counts are fixed
and derandomized, so a run is reproducible and bounded: TORCIA_FUZZ_EXAMPLES (default 40)
examples per test; tools/sanitize_cpu.sh runs this file under ASan and UBSan too.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torcia_cpu import kernels as native_kernels
from torcia_cpu.kernels import OVERRIDES, NativeKernels

from torcia.library import ReferenceKernels as Reference
from torcia.library import pool_geometry as _pool_geometry

REF, NAT = Reference(), NativeKernels()
EXAMPLES = int(os.environ.get("TORCIA_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TOL = {np.dtype(np.float32): dict(rtol=1e-4, atol=1e-4),
       np.dtype(np.float64): dict(rtol=1e-10, atol=1e-10),
       np.dtype(np.float16): dict(rtol=1e-3, atol=1e-3)}  # the reference on both sides

dtypes = st.sampled_from([np.float32, np.float64])


@st.composite
def arrays(draw, shape, dtype):
    """Normal values in one of three layouts: C order, Fortran order, or every other
    element of a wider array (a strided view)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    layout = draw(st.sampled_from(["c", "f", "step"]))
    if layout == "step" and shape:
        return rng.standard_normal(tuple(shape[:-1]) + (2 * shape[-1],)).astype(dtype)[..., ::2]
    a = rng.standard_normal(shape).astype(dtype)
    return np.asfortranarray(a) if layout == "f" else a


def _same(native, reference):
    if isinstance(reference, tuple):
        assert len(native) == len(reference)
        for a, b in zip(native, reference):
            _same(a, b)
        return
    assert native.shape == reference.shape and native.dtype == reference.dtype
    if reference.dtype.kind in "iub":
        np.testing.assert_array_equal(native, reference)
    else:
        np.testing.assert_allclose(native, reference, **TOL[reference.dtype])


def _both(op, *args, **kwargs):
    """Run ``op`` natively and by the reference: equal results, or the same error class."""
    outcomes = []
    for kernels in (NAT, REF):
        try:
            outcomes.append(getattr(kernels, op)(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            outcomes.append(e)
    native, reference = outcomes
    if isinstance(reference, Exception) or isinstance(native, Exception):
        assert type(native) is type(reference), (op, native, reference)
        return None
    _same(native, reference)
    return reference


# ----- convolution ----------------------------------------------------------------------

@st.composite
def conv_cases(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    # up to 12 samples: a 9x9 output makes chunks of 7 samples (512 positions), the last short
    n, h, w = draw(st.integers(1, 12)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(2))
    for size, k, d, (lo, hi) in zip((h, w), (kh, kw), dilation, padding):
        assume(size + lo + hi >= d * (k - 1) + 1)
    dtype = draw(dtypes)
    x = draw(arrays((n, cg * groups, h, w), dtype))
    weight = draw(arrays((og * groups, cg, kh, kw), dtype))
    bias = draw(st.none() | arrays((og * groups,), dtype))
    return x, weight, bias, dict(stride=stride, padding=padding, dilation=dilation,
                                 groups=groups)


@FUZZ
@given(conv_cases(), st.data())
def test_conv_weight_gradient_and_transpose(case, data):
    x, w, b, args = case
    out = _both("conv", x, w, b, **args)
    g = data.draw(arrays(out.shape, x.dtype))
    _both("conv_weight", x, g, weight_shape=w.shape, **args)
    # the transpose with the same weight maps conv's output back to its input's channels
    op = tuple(data.draw(st.integers(0, max(s, d) - 1))
               for s, d in zip(args["stride"], args["dilation"]))
    sym = tuple((lo, lo) for lo, _ in args["padding"])
    _both("conv_transpose", g, w, None, stride=args["stride"], padding=sym,
          output_padding=op, dilation=args["dilation"], groups=args["groups"])


BAD_GEOMETRY = st.sampled_from([
    dict(stride=(0, 1)), dict(stride=(1, -2)), dict(stride=(2**62, 1)),
    dict(padding=((-1, -1), (0, 0))), dict(dilation=(0, 1)), dict(output_padding=(-1, 0)),
])


@FUZZ
@given(conv_cases(), BAD_GEOMETRY)
def test_invalid_conv_geometry_fails_alike(case, bad):
    x, w, b, args = case
    conv_args = {**args, **{k: v for k, v in bad.items() if k != "output_padding"}}
    if "output_padding" not in bad:
        _both("conv", x, w, b, **conv_args)
        with pytest.raises(RuntimeError):
            NAT.conv(x, w, b, **conv_args)
    t_args = dict(conv_args, padding=tuple((lo, lo) for lo, _ in conv_args["padding"]),
                  output_padding=bad.get("output_padding", (0, 0)))
    g = np.ones((x.shape[0], w.shape[0], 3, 3), x.dtype)
    _both("conv_transpose", g, w, None, **t_args)
    with pytest.raises(RuntimeError):
        NAT.conv_transpose(g, w, None, **t_args)


# ----- pooling ----------------------------------------------------------------------------

@st.composite
def pool_geometries(draw, valid=True):
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, (d * (k - 1) + 1) // 2))
                    for k, d in zip(kernel, dilation))
    geometry = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                    ceil_mode=draw(st.booleans()))
    if not valid:
        geometry.update(draw(st.sampled_from([
            dict(padding=(-1, 0)), dict(stride=(0, 1)), dict(stride=(1, 2**62)),
            dict(dilation=(0, 1)), dict(padding=(kernel[0] + 1, 0)),
        ])))
    return geometry


@FUZZ
@given(pool_geometries(), st.integers(1, 2), st.integers(1, 3), st.integers(1, 10),
       st.integers(1, 10), dtypes, st.data())
def test_max_pool_and_backward(geometry, n, c, h, w, dtype, data):
    x = data.draw(arrays((n, c, h, w), dtype))
    try:
        out, _ = _pool_geometry((h, w), geometry["kernel_size"], geometry["stride"],
                                geometry["padding"], geometry["dilation"],
                                geometry["ceil_mode"])
    except RuntimeError:
        # a dilated window on padding only: refused by both
        with pytest.raises(RuntimeError):
            NAT.max_pool(x, **geometry)
        assert _both("max_pool", x, **geometry) is None
        return
    assume(min(out) > 0)
    if data.draw(st.booleans()):
        x = np.round(x)  # ties: the first maximum must win in both
    values, indices = _both("max_pool", x, **geometry)
    g = data.draw(arrays(values.shape, dtype))
    _both("max_pool_backward", g, indices, input_shape=(h, w))


@FUZZ
@given(pool_geometries(valid=False), dtypes)
def test_invalid_pool_geometry_fails_alike(geometry, dtype):
    x = np.ones((1, 2, 8, 8), dtype)
    _both("max_pool", x, **geometry)
    with pytest.raises(RuntimeError):
        NAT.max_pool(x, **geometry)


# ----- softmax, cross-entropy, embedding ----------------------------------------------

@FUZZ
@given(st.lists(st.integers(0, 12), min_size=1, max_size=3), dtypes, st.data())
def test_softmax_family(shape, dtype, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(arrays(tuple(shape), dtype)) * 8
    g = data.draw(arrays(tuple(shape), dtype))
    for op in ("softmax", "log_softmax"):
        y = _both(op, x, dim)
        _both(op + "_backward", g, y, dim)
    # a gradient of another shape is refused by both
    _both("softmax_backward", np.ones(tuple(shape) + (2,), dtype), y, dim)


@FUZZ
@given(st.integers(1, 12), st.integers(1, 12), dtypes, st.booleans(),
       st.sampled_from(["mean", "sum", "none"]), st.sampled_from([0.0, 0.1]), st.data())
def test_cross_entropy_and_backward(rows, classes, dtype, weighted, reduction, smoothing,
                                    data):
    x = data.draw(arrays((rows, classes), dtype)) * 4
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    target = rng.integers(0, classes, rows)
    target[rng.random(rows) < 0.2] = -100
    assume(reduction != "mean" or (target != -100).any())
    weight = rng.uniform(0.5, 2, classes).astype(dtype) if weighted else None
    args = dict(weight=weight, reduction=reduction, ignore_index=-100,
                label_smoothing=smoothing)
    _both("cross_entropy", x, target, **args)
    g = np.asarray(1.5, dtype) if reduction != "none" else rng.standard_normal(rows).astype(
        dtype)
    _both("cross_entropy_backward", g, x, target, **args)


@FUZZ
@given(st.lists(st.integers(0, 6), min_size=1, max_size=2), st.integers(1, 8),
       st.integers(1, 9), st.sampled_from([None, 0, 3]), dtypes, st.data())
def test_embedding_backward(index_shape, dim, num_weights, padding_idx, dtype, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    idx = rng.integers(0, num_weights, index_shape)
    g = data.draw(arrays(tuple(index_shape) + (dim,), dtype))
    _both("embedding_backward", g, idx, num_weights=num_weights, padding_idx=padding_idx)


@FUZZ
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3), st.integers(0, 2),
       st.integers(0, 7), st.sampled_from([1, 2.5, -1]), dtypes, st.data())
def test_index_add(shape, dim, m, alpha, dtype, data):
    dim = dim % len(shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = data.draw(arrays(tuple(shape), dtype))
    # repeated indices; out of range ones where the dim is empty: both refuse them
    idx = rng.integers(0, max(shape[dim], 1), m)
    source = data.draw(arrays(tuple(shape[:dim]) + (m,) + tuple(shape[dim + 1:]), dtype))
    _both("index_add", a, idx, source, dim, alpha)


# ----- LSTM -------------------------------------------------------------------------------

@FUZZ
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 9), dtypes, st.data())
def test_lstm_cell_and_layer(steps, batch, hidden, dtype, data):
    gates = data.draw(arrays((batch, 4 * hidden), dtype))
    c = data.draw(arrays((batch, hidden), dtype))
    h, c_new, act = _both("lstm_cell", gates, c)
    gh, gc = (data.draw(st.none() | arrays((batch, hidden), dtype)) for _ in range(2))
    _both("lstm_cell_backward", gh, gc, act, c, c_new)
    # a cell state that does not match the gates: both refuse it
    _both("lstm_cell", gates, np.ones((batch + 1, hidden), dtype))
    x_gates = data.draw(arrays((steps, batch, 4 * hidden), dtype))
    h0, c0 = (data.draw(arrays((batch, hidden), dtype)) for _ in range(2))
    w_hh_t = data.draw(arrays((hidden, 4 * hidden), dtype)) * 0.5
    out, cs, acts = _both("lstm_layer", x_gates, h0, c0, w_hh_t)
    g_out = data.draw(st.none() | arrays(out.shape, dtype))
    g_cs = data.draw(st.none() | arrays(cs.shape, dtype))
    assume(g_out is not None or g_cs is not None)
    _both("lstm_layer_backward", g_out, g_cs, acts, cs, out, h0, c0, w_hh_t)


# ----- matrix products --------------------------------------------------------------------

@FUZZ
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), dtypes, st.data())
def test_matrix_products(m, k, n, dtype, data):
    a, b = data.draw(arrays((m, k), dtype)), data.draw(arrays((k, n), dtype))
    c = data.draw(arrays((n,), dtype))
    for op in ("matmul", "mm"):
        _both(op, a, b)
    _both("bmm", a[None], b[None])
    _both("addmm", c, a, b, 0.5, 2.0)
    _both("linear", a, np.ascontiguousarray(b.T), c)
    _both("matmul", a, np.ones((k + 1, n), dtype))  # mismatched: both refuse


@FUZZ
@given(st.integers(1, 4), st.booleans(), st.integers(1, 9), st.integers(1, 9),
       st.integers(1, 9), dtypes, st.data())
def test_batched_matrix_products(batch, broadcast, m, k, n, dtype, data):
    # a batch of small products: the native batched GEMM, with a broadcast batch of one
    a = data.draw(arrays((batch, m, k), dtype))
    b = data.draw(arrays((1 if broadcast else batch, k, n), dtype))
    for op in ("matmul", "bmm"):
        _both(op, a, b)
    _both("matmul", a[None], b)
    _both("matmul", a, np.ones((batch, k + 1, n), dtype))  # mismatched: both refuse
    _both("matmul", a, np.ones((batch + 1, k, n), dtype))  # batches that do not broadcast


# ----- activations ------------------------------------------------------------------------

# name: (forward op, its keyword parameters, the activation_backward name or the backward op)
ACTIVATIONS = {
    "gelu": dict(approximate=st.just("none")),
    "gelu(tanh)": dict(approximate=st.just("tanh")),
    "silu": {}, "sigmoid": {}, "tanh": {},
    "softplus": dict(beta=st.sampled_from([0.5, 1.0, 2.0, -1.0, 0.0]),
                     threshold=st.sampled_from([20.0, 1.0, -2.0])),
    "elu": dict(alpha=st.sampled_from([1.0, 0.3, 2.5, 0.0])),
    "leaky_relu": dict(negative_slope=st.sampled_from([0.01, 0.2, -0.5, 0.0])),
    "relu": {},
}


@FUZZ
@given(st.sampled_from(sorted(ACTIVATIONS)), st.lists(st.integers(0, 9), max_size=3), dtypes,
       st.sampled_from([1, 8]), st.data())
def test_activations_and_backward(name, shape, dtype, scale, data):
    # softplus with beta 0 divides by it, in the reference on both sides
    with np.errstate(divide="ignore", invalid="ignore"):
        _activation_case(name, shape, dtype, scale, data)


def _activation_case(name, shape, dtype, scale, data):
    op = name.split("(")[0]
    params = {k: data.draw(v) for k, v in ACTIVATIONS[name].items()}
    # scaled by 8 too: the tails, where exp under- and overflows
    x = np.asarray(data.draw(arrays(tuple(shape), dtype)) * dtype(scale))
    g = data.draw(arrays(tuple(shape), dtype))
    if op == "tanh":
        # core has no tanh kernel (it is the backend's ufunc): NumPy's is the reference
        _same(NAT.tanh(x), np.tanh(x))
        _same(NAT.tanh(x.astype(np.float16)), np.tanh(x.astype(np.float16)))
        return
    _both(op, x, **params)
    if op in ("gelu", "silu"):
        _both(op + "_backward", g, x, **params)
        # a gradient of another shape: both refuse it
        _both(op + "_backward", np.ones(tuple(shape) + (2,), dtype), x, **params)
    elif op in ("softplus", "elu", "leaky_relu", "relu"):
        _both("activation_backward", g, x, op, **params)
        _both("activation_backward", np.ones(tuple(shape) + (2,), dtype), x, op, **params)
    # another dtype than float32/float64: the native code falls back to the reference
    _both(op, x.astype(np.float16), **params)


def test_activation_special_values():
    # NaN and the infinities through every native activation, both dtypes
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 90.0, -90.0, 800.0,
                  -800.0])
    for dtype in (np.float32, np.float64):
        a = x.astype(dtype)
        for op, params in (("gelu", {}), ("gelu", dict(approximate="tanh")), ("silu", {}),
                           ("sigmoid", {}), ("tanh", {}), ("softplus", {}), ("elu", {}),
                           ("leaky_relu", {}), ("relu", {})):
            reference = np.tanh if op == "tanh" else getattr(REF, op)
            with np.errstate(all="ignore"):
                native, reference = getattr(NAT, op)(a, **params), reference(a, **params)
            np.testing.assert_allclose(native, reference, **TOL[np.dtype(dtype)],
                                       err_msg=f"{op} {params} {dtype}")


# ----- normalisation ----------------------------------------------------------------------

@FUZZ
@given(st.lists(st.integers(1, 7), min_size=1, max_size=4), dtypes, st.booleans(),
       st.booleans(), st.data())
def test_layer_norm_and_backward(shape, dtype, weighted, biased, data):
    nd = data.draw(st.integers(1, len(shape)))
    trailing = tuple(shape[len(shape) - nd:])
    x = data.draw(arrays(tuple(shape), dtype)) * dtype(3) + dtype(data.draw(
        st.sampled_from([0, 5])))
    weight = data.draw(arrays(trailing, dtype)) if weighted else None
    bias = data.draw(arrays(trailing, dtype)) if biased else None
    eps = data.draw(st.sampled_from([1e-5, 1e-2]))
    _both("layer_norm", x, weight, bias, nd, eps)
    g = data.draw(arrays(tuple(shape), dtype))
    _both("layer_norm_backward", g, x, weight, nd, eps)
    # a weight of the wrong shape: both refuse it
    bad = np.ones(trailing[:-1] + (trailing[-1] + 1,), dtype)
    _both("layer_norm", x, bad, None, nd, eps)
    _both("layer_norm_backward", g, x, bad, nd, eps)


@FUZZ
@given(st.lists(st.integers(1, 7), min_size=1, max_size=4), dtypes, st.booleans(), st.data())
def test_rms_norm_and_backward(shape, dtype, weighted, data):
    nd = data.draw(st.integers(1, len(shape)))
    trailing = tuple(shape[len(shape) - nd:])
    x = data.draw(arrays(tuple(shape), dtype)) * dtype(3) + dtype(data.draw(
        st.sampled_from([0, 5])))
    weight = data.draw(arrays(trailing, dtype)) if weighted else None
    eps = data.draw(st.sampled_from([1e-6, 1e-2]))
    _both("rms_norm", x, weight, nd, eps)
    g = data.draw(arrays(tuple(shape), dtype))
    _both("rms_norm_backward", g, x, weight, nd, eps)
    bad = np.ones(trailing[:-1] + (trailing[-1] + 1,), dtype)
    _both("rms_norm", x, bad, nd, eps)
    _both("rms_norm_backward", g, x, bad, nd, eps)


@FUZZ
@given(st.integers(1, 5), st.integers(1, 4), st.lists(st.integers(1, 5), max_size=2), dtypes,
       st.booleans(), st.booleans(), st.data())
def test_batch_norm_and_backward(n, c, spatial, dtype, training, affine, data):
    shape = (n, c, *spatial)
    assume(not training or np.prod(shape) // c > 1)
    x = data.draw(arrays(shape, dtype)) * dtype(2) + dtype(1)
    weight, bias = ((data.draw(arrays((c,), dtype)), data.draw(arrays((c,), dtype)))
                    if affine else (None, None))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    mean = rng.standard_normal(c).astype(dtype)
    var = rng.uniform(0.2, 3, c).astype(dtype)
    eps = data.draw(st.sampled_from([1e-5, 1e-1]))
    _both("batch_norm", x, weight, bias, mean, var, training, eps)
    g = data.draw(arrays(shape, dtype))
    _both("batch_norm_backward", g, x, weight, mean, var, training, eps)
    # channel parameters of the wrong length: both refuse them
    bad = np.ones(c + 1, dtype)
    _both("batch_norm", x, bad, None, mean, var, training, eps)
    _both("batch_norm_backward", g, x, bad, mean, var, training, eps)


@FUZZ
@given(st.lists(st.integers(0, 6), min_size=1, max_size=4), dtypes, st.data())
def test_masked_fill(shape, dtype, data):
    """Masks of the input's trailing dims (with or without leading ones: the native path),
    inner broadcasting, more dims than the input (the reference's), any layout."""
    x = data.draw(arrays(tuple(shape), dtype))
    keep = data.draw(st.integers(0, len(shape)))
    mask_shape = [data.draw(st.sampled_from([1, n])) if i == 0 else n
                  for i, n in enumerate(shape[keep:])]
    mask_shape = [1] * data.draw(st.integers(0, 2)) + mask_shape
    mask = np.random.default_rng(data.draw(st.integers(0, 99))).random(mask_shape) < 0.5
    if data.draw(st.booleans()) and mask.ndim:
        mask = np.asfortranarray(mask)
    value = data.draw(st.sampled_from([0.0, -np.inf, np.nan, 3.5, -7]))
    _both("masked_fill", x, mask, value)


@FUZZ
@given(st.integers(1, 2), st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)]), st.integers(1, 140),
       st.integers(1, 140), st.integers(1, 9), st.integers(1, 9), dtypes,
       st.sampled_from(["none", "causal", "bool", "bool_rows", "float"]), st.data())
def test_flash_attention_and_backward(b, heads, lq, lk, e, ev, dtype, masking, data):
    """Several query and key blocks (64 and 128), grouped heads, every masking, any
    layout; a query that may attend to nothing where the mask leaves it none."""
    hq, hk = heads
    q = data.draw(arrays((b, hq, lq, e), dtype))
    k = data.draw(arrays((b, hk, lk, e), dtype))
    v = data.draw(arrays((b, hk, lk, ev), dtype))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    mask = None
    if masking == "bool":
        mask = rng.random((lq, lk)) < 0.7
    elif masking == "bool_rows":
        mask = rng.random((b, 1, lq, lk)) < 0.05
    elif masking == "float":
        mask = np.where(rng.random((hq, lq, lk)) < 0.8, rng.standard_normal((hq, lq, lk)),
                        -np.inf).astype(dtype)
    params = dict(is_causal=masking == "causal", scale=data.draw(st.sampled_from([0.3, 1.0])))
    with np.errstate(all="ignore"):
        out, lse = REF.flash_attention(q, k, v, mask, **params)
    _both("flash_attention", q, k, v, mask, **params)
    g = data.draw(arrays(out.shape, dtype))
    _both("flash_attention_backward", g, q, k, v, out, lse, mask, **params)


@FUZZ
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3), st.integers(-3, 2),
       st.integers(1, 4), st.sampled_from([np.float32, np.int64, np.bool_]), st.data())
def test_cat(shape, dim, count, dtype, data):
    """Pieces of any size along ``dim``, each in any layout (native, from a grain of one
    element here); now and then one of another dtype or another size elsewhere (the
    reference's promotion and error); a dim out of range."""
    d = dim % len(shape)
    pieces = []
    for _ in range(count):
        piece = list(shape)
        piece[d] = data.draw(st.integers(0, 3))
        pieces.append(data.draw(arrays(tuple(piece), np.float64)).astype(dtype))
    if data.draw(st.booleans()):
        odd = data.draw(st.integers(0, count - 1))
        pieces[odd] = pieces[odd].astype(np.float64) if data.draw(st.booleans()) \
            else np.zeros(tuple(n + 1 for n in pieces[odd].shape), dtype)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_kernels, "_GRAIN", 1)
        _both("cat", *pieces, dim=dim)


@FUZZ
@given(st.lists(st.integers(0, 6), min_size=0, max_size=5),
       st.sampled_from([np.float32, np.float64, np.int8, np.int16, np.complex128, np.bool_]),
       st.data())
def test_contiguous(shape, dtype, data):
    """Any rank and layout: a permutation of the dims, each stepped, flipped or broadcast
    (native from one element here), byte for byte the reference's."""
    a = data.draw(arrays(tuple(shape), np.float64)).astype(dtype)
    a = a.transpose(data.draw(st.permutations(range(a.ndim))))
    view = tuple(data.draw(st.sampled_from([slice(None), slice(None, None, 2),
                                            slice(None, None, -1), slice(None, None, -3)]))
                 for _ in range(a.ndim))
    a = a[view]
    if a.ndim and a.shape[-1] and data.draw(st.booleans()):
        a = np.broadcast_to(a[..., :1], a.shape[:-1] + (data.draw(st.integers(0, 5)),))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_kernels, "_COPY_FROM", 1)
        got, want = NAT.contiguous(a), REF.contiguous(a)
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()


@FUZZ
@given(st.lists(st.integers(0, 6), min_size=1, max_size=4),
       st.sampled_from([np.float32, np.int64, np.bool_]), st.sampled_from(["flat", "rows",
                                                                          "merged", "bad"]),
       st.data())
def test_reshape(shape, dtype, target, data):
    """A permuted or stepped array reshaped: a view where its strides allow one (the
    reference's, sharing its memory), else a copy (native from one element here); a shape
    of another size: the reference's error."""
    a = data.draw(arrays(tuple(shape), np.float64)).astype(dtype)
    a = a.transpose(data.draw(st.permutations(range(a.ndim))))
    size = {"flat": (-1,), "rows": (a.shape[0], -1) if a.shape[0] else (0, a.size),
            "merged": a.shape[:-2] + (-1,), "bad": (a.size + 1,)}[target]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_kernels, "_COPY_FROM", 1)
        want = _both("reshape", a, size)
        if want is not None:
            assert np.shares_memory(NAT.reshape(a, size), a) == np.shares_memory(want, a)


def test_every_override_is_fuzzed():
    fuzzed = {"matmul", "mm", "bmm", "addmm", "linear", "conv", "conv_weight",
              "conv_transpose", "max_pool", "max_pool_backward", "softmax", "log_softmax",
              "softmax_backward", "log_softmax_backward", "cross_entropy",
              "cross_entropy_backward", "embedding_backward", "lstm_cell",
              "lstm_cell_backward", "lstm_layer", "lstm_layer_backward", "gelu",
              "gelu_backward", "silu", "silu_backward", "sigmoid", "tanh", "softplus", "elu",
              "leaky_relu", "relu", "activation_backward", "layer_norm",
              "layer_norm_backward", "rms_norm", "rms_norm_backward", "batch_norm",
              "batch_norm_backward", "masked_fill", "flash_attention",
              "flash_attention_backward", "index_add", "cat", "contiguous", "reshape"}
    assert set(OVERRIDES) == fuzzed
