"""The neural-network kernels against independent truth: SciPy's correlate for
convolution, explicit loops for pooling and col2im on tiny inputs, closed forms for the
activations, losses and normalisations; and the argument errors of the public functions.
"""

import itertools
import math

import numpy as np
import pytest

import torcia
from torcia import ops
from torcia._numpy_backend import Reference

scipy_signal = pytest.importorskip("scipy.signal")
special = pytest.importorskip("scipy.special")

K = Reference()
rng = np.random.default_rng(0)


def test_every_nn_op_has_a_reference_kernel():
    table = K.table()
    assert not [op for op in ops.NN if op not in table]


# ----- convolution ------------------------------------------------------------------------


def _conv_reference(x, w, b, stride, pad, dilation, groups):
    """Grouped, dilated, strided correlation from scipy.signal.correlate, channel by
    channel: correlate the zero-padded input with the dilated kernel, then subsample."""
    n, c = x.shape[:2]
    o = w.shape[0]
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(lo, hi) for lo, hi in pad])
    kernel = w.shape[2:]
    dil = np.zeros((o, w.shape[1]) + tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation)))
    dil[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dilation)] = w
    cg, og = c // groups, o // groups
    outs = []
    for i in range(n):
        chans = []
        for oc in range(o):
            g = oc // og
            acc = sum(scipy_signal.correlate(xp[i, g * cg + j], dil[oc, j], mode="valid")
                      for j in range(cg))
            chans.append(acc[tuple(slice(None, None, s) for s in stride)])
        outs.append(np.stack(chans))
    out = np.stack(outs)
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * nd)
    return out


CONV_CASES = [
    # x shape, w shape, stride, padding pairs, dilation, groups
    ((2, 3, 7, 6), (4, 3, 3, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),
    ((1, 4, 8, 9), (6, 2, 3, 3), (2, 3), ((1, 2), (0, 1)), (2, 1), 2),
    ((2, 4, 6, 6), (4, 1, 2, 2), (2, 2), ((1, 1), (1, 1)), (1, 2), 4),
    ((2, 3, 11), (2, 3, 4), (3,), ((2, 1),), (2,), 1),
]


@pytest.mark.parametrize("xs, ws, stride, pad, dilation, groups", CONV_CASES)
def test_conv_matches_scipy_correlate(xs, ws, stride, pad, dilation, groups):
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    got = K.conv(x, w, b, stride=stride, padding=pad, dilation=dilation, groups=groups)
    np.testing.assert_allclose(got, _conv_reference(x, w, b, stride, pad, dilation, groups),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs, ws, stride, pad, dilation, groups", CONV_CASES)
def test_conv_transpose_and_conv_weight_are_adjoints(xs, ws, stride, pad, dilation, groups):
    # <conv(x, w), y> = <x, conv_transpose(y, w)> = <w, conv_weight(x, y)>
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    y = rng.standard_normal(K.conv(x, w, None, stride, pad, dilation, groups).shape)
    out_pad = tuple(
        i - ((o - 1) * s - lo - hi + d * (k - 1) + 1)
        for i, o, s, (lo, hi), d, k in zip(xs[2:], y.shape[2:], stride, pad, dilation, ws[2:]))
    xt = K.conv_transpose(y, w, None, stride, pad, out_pad, dilation, groups)
    wt = K.conv_weight(x, y, ws, stride, pad, dilation, groups)
    lhs = (K.conv(x, w, None, stride, pad, dilation, groups) * y).sum()
    assert xt.shape == x.shape and wt.shape == w.shape
    assert math.isclose(lhs, (x * xt).sum(), rel_tol=1e-10)
    assert math.isclose(lhs, (w * wt).sum(), rel_tol=1e-10)


def test_conv_transpose_scatters_each_input_pixel():
    # one input pixel at (1, 2), stride 2: the kernel lands at (2, 4) of the output
    x = np.zeros((1, 1, 3, 3))
    x[0, 0, 1, 2] = 2.0
    w = np.arange(4.0).reshape(1, 1, 2, 2)
    out = K.conv_transpose(x, w, None, (2, 2), ((0, 0), (0, 0)), (0, 0), (1, 1), 1)
    expected = np.zeros((6, 6))
    expected[2:4, 4:6] = 2 * w[0, 0]
    np.testing.assert_array_equal(out[0, 0], expected)


def test_half_conv_transpose_is_rounded_once():
    # float16 in, computed in float32, rounded once (as PyTorch's oneDNN kernel): the
    # overlapping columns summed in float16 were up to 10 ulps off a small output
    x = rng.standard_normal((2, 4, 5, 5)).astype(np.float16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    b = rng.standard_normal(3).astype(np.float16)
    args = ((2, 2), ((1, 1), (0, 0)), (1, 0), (1, 1), 1)
    out = K.conv_transpose(x, w, b, *args)
    assert out.dtype == np.float16
    exact = K.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                             b.astype(np.float64), *args)
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert (np.abs(out - exact) <= ulp * 0.5 + 1e-5 * np.abs(exact)).all()


def test_im2col_col2im_by_loops():
    x = rng.standard_normal((2, 2, 5, 4))
    cols = K.im2col(x, kernel_size=(2, 3), dilation=(2, 1), padding=(1, 1), stride=(2, 1))
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    blocks = [(i, j) for i in range(0, 7 - 3 + 1, 2) for j in range(0, 6 - 3 + 1)]
    expected = np.stack([
        np.stack([xp[:, c, i + 2 * a, j + b] for c in range(2) for a in range(2)
                  for b in range(3)], axis=1) for i, j in blocks], axis=2)
    np.testing.assert_array_equal(cols, expected)
    # col2im adds every column entry back at its position
    back = K.col2im(cols, output_size=(5, 4), kernel_size=(2, 3), dilation=(2, 1),
                    padding=(1, 1), stride=(2, 1))
    acc = np.zeros_like(xp)
    for k, (i, j) in enumerate(blocks):
        for c, a, b in itertools.product(range(2), range(2), range(3)):
            acc[:, c, i + 2 * a, j + b] += cols[:, c * 6 + a * 3 + b, k]
    np.testing.assert_allclose(back, acc[:, :, 1:-1, 1:-1], rtol=1e-12)


# ----- pooling ----------------------------------------------------------------------------


def _pool_loops(x, k, s, p, d, ceil_mode, reduce):
    """2-D pooling by explicit loops over the output positions; ``reduce`` gets the list
    of (value, flat input index, in_padding) of a window."""
    n, c, h, w = x.shape

    def size(i, kk, ss, pp, dd):
        num = i + 2 * pp - dd * (kk - 1) - 1
        o = (-(-num // ss) if ceil_mode else num // ss) + 1
        if ceil_mode and (o - 1) * ss >= i + pp:
            o -= 1
        return o

    oh, ow = size(h, k[0], s[0], p[0], d[0]), size(w, k[1], s[1], p[1], d[1])
    out = np.zeros((n, c, oh, ow))
    for a, b, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        window = []
        for u, v in itertools.product(range(k[0]), range(k[1])):
            r, q = i * s[0] - p[0] + u * d[0], j * s[1] - p[1] + v * d[1]
            inside = 0 <= r < h and 0 <= q < w
            in_pad = -p[0] <= r < h + p[0] and -p[1] <= q < w + p[1]
            window.append((x[a, b, r, q] if inside else None, r * w + q, in_pad))
        out[a, b, i, j] = reduce(window)
    return out


@pytest.mark.parametrize("k, s, p, d, ceil_mode", [
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 2), (2, 1), (1, 1), (1, 1), True),
    ((3, 3), (2, 2), (1, 1), (2, 2), True),
    ((2, 3), (3, 2), (1, 0), (1, 2), False),
])
def test_max_pool_by_loops(k, s, p, d, ceil_mode):
    x = rng.standard_normal((2, 2, 7, 8))
    values, index = K.max_pool(x, kernel_size=k, stride=s, padding=p, dilation=d,
                               ceil_mode=ceil_mode)

    def best(window):
        vals = [(v, i) for v, i, _ in window if v is not None]
        return max(vals)[0]

    def where(window):
        vals = [(v, i) for v, i, _ in window if v is not None]
        return max(vals)[1]

    np.testing.assert_array_equal(values, _pool_loops(x, k, s, p, d, ceil_mode, best))
    np.testing.assert_array_equal(index, _pool_loops(x, k, s, p, d, ceil_mode, where))


def test_max_pool_ties_and_minus_infinity_name_the_first_real_element():
    # PyTorch's rule: the first maximum in window order; padding never wins, even
    # against a window of -inf only
    x = rng.integers(-2, 2, (1, 2, 7, 8)).astype(np.float64)
    x[0, 0, :3, :4] = -np.inf
    k, s, p, d = (2, 3), (2, 2), (1, 1), (1, 1)
    values, index = K.max_pool(x, kernel_size=k, stride=s, padding=p, dilation=d,
                               ceil_mode=True)

    def first_max(window):
        real = [(v, i) for v, i, _ in window if v is not None]
        top = max(v for v, _ in real)
        return next((v, i) for v, i in real if v == top)

    np.testing.assert_array_equal(
        values, _pool_loops(x, k, s, p, d, True, lambda w: first_max(w)[0]))
    np.testing.assert_array_equal(
        index, _pool_loops(x, k, s, p, d, True, lambda w: first_max(w)[1]))


@pytest.mark.parametrize("k, s, p, ceil_mode, include, override", [
    ((2, 2), (2, 2), (0, 0), False, True, None),
    ((3, 3), (2, 2), (1, 1), True, True, None),
    ((3, 2), (2, 1), (1, 1), True, False, None),
    ((2, 3), (1, 2), (1, 0), False, True, 5),
])
def test_avg_pool_by_loops(k, s, p, ceil_mode, include, override):
    x = rng.standard_normal((1, 2, 7, 6))
    got = K.avg_pool(x, kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode,
                     count_include_pad=include, divisor_override=override)

    def mean(window):
        total = sum(v for v, _, _ in window if v is not None)
        if override:
            return total / override
        count = sum(1 for v, _, pad in window if (pad if include else v is not None))
        return total / count

    np.testing.assert_allclose(got, _pool_loops(x, k, s, p, (1, 1), ceil_mode, mean),
                               rtol=1e-12)


def test_avg_pool_backward_is_the_adjoint():
    params = dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True,
                  count_include_pad=False, divisor_override=None)
    x = rng.standard_normal((2, 3, 7, 6))
    y = rng.standard_normal(K.avg_pool(x, **params).shape)
    gx = K.avg_pool_backward(y, input_shape=(7, 6), **params)
    assert math.isclose((K.avg_pool(x, **params) * y).sum(), (x * gx).sum(), rel_tol=1e-10)


def test_adaptive_max_pool_by_loops():
    x = rng.standard_normal((2, 3, 7, 5))
    values, index = K.adaptive_max_pool(x, output_size=(3, 2))
    for i, j in itertools.product(range(3), range(2)):
        r0, r1 = (i * 7) // 3, -(-(i + 1) * 7 // 3)
        c0, c1 = (j * 5) // 2, -(-(j + 1) * 5 // 2)
        window = x[:, :, r0:r1, c0:c1].reshape(2, 3, -1)
        np.testing.assert_array_equal(values[:, :, i, j], window.max(-1))
        arg = window.argmax(-1)
        rows, cols = r0 + arg // (c1 - c0), c0 + arg % (c1 - c0)
        np.testing.assert_array_equal(index[:, :, i, j], rows * 5 + cols)


def test_max_pool_backward_adds_at_indices():
    g = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    idx = np.array([[[[0, 0], [5, 8]]]])
    out = K.max_pool_backward(g, idx, input_shape=(3, 3))
    np.testing.assert_array_equal(out.reshape(-1), [3.0, 0, 0, 0, 0, 3.0, 0, 0, 4.0])


# ----- elementwise, softmax, norms, losses --------------------------------------------------


X = np.linspace(-6, 6, 49)


@pytest.mark.parametrize("op, params, expected", [
    ("leaky_relu", {"negative_slope": 0.1}, np.where(X > 0, X, 0.1 * X)),
    ("elu", {"alpha": 2.0}, np.where(X > 0, X, 2.0 * (np.exp(X) - 1))),
    ("selu", {}, 1.0507009873554805 * np.where(X > 0, X, 1.6732632423543772 * np.expm1(X))),
    ("celu", {"alpha": 0.5}, np.maximum(X, 0) + np.minimum(0, 0.5 * np.expm1(X / 0.5))),
    ("gelu", {"approximate": "none"}, X * special.ndtr(X)),
    ("gelu", {"approximate": "tanh"},
     0.5 * X * (1 + np.tanh(np.sqrt(2 / np.pi) * (X + 0.044715 * X ** 3)))),
    ("silu", {}, X * special.expit(X)),
    ("mish", {}, X * np.tanh(np.log1p(np.exp(X)))),
    ("softplus", {"beta": 2.0, "threshold": 4.0},
     np.where(2 * X > 4, X, np.log1p(np.exp(2 * X)) / 2)),
    ("hardtanh", {"min_val": -2.0, "max_val": 1.0}, np.clip(X, -2, 1)),
    ("hardswish", {}, X * np.clip(X + 3, 0, 6) / 6),
    ("hardsigmoid", {}, np.clip(X + 3, 0, 6) / 6),
    ("logsigmoid", {}, np.log(special.expit(X))),
    ("softsign", {}, X / (1 + np.abs(X))),
    ("tanhshrink", {}, X - np.tanh(X)),
])
def test_activation_closed_forms(op, params, expected):
    np.testing.assert_allclose(getattr(K, op)(X, **params), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("op, params", [
    ("leaky_relu", {"negative_slope": 0.1}), ("elu", {"alpha": 2.0}), ("selu", {}),
    ("celu", {"alpha": 0.5}), ("softplus", {"beta": 2.0, "threshold": 4.0}), ("mish", {}),
    ("hardtanh", {"min_val": -2.0, "max_val": 1.0}), ("hardswish", {}), ("hardsigmoid", {}),
    ("logsigmoid", {}), ("softsign", {}), ("tanhshrink", {}),
])
def test_activation_backward_by_finite_differences(op, params):
    # points off the kinks (0, +-3, the clip bounds, beta * x = threshold)
    x = np.linspace(-5.05, 5.05, 36)
    g = rng.standard_normal(x.shape)
    got = K.activation_backward(g, x, activation=op, **params)
    h = 1e-6
    numeric = g * (getattr(K, op)(x + h, **params) - getattr(K, op)(x - h, **params)) / (2 * h)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)


def test_softmax_backward_kernels_by_finite_differences():
    x = rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 4))
    for fwd, bwd in (("softmax", "softmax_backward"), ("log_softmax", "log_softmax_backward")):
        f = getattr(K, fwd)
        got = getattr(K, bwd)(g, f(x, dim=1), dim=1)
        numeric = _numerical_vjp(lambda x_, f=f: f(x_, dim=1), x, g)
        np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-9)


def test_logsigmoid_and_softplus_do_not_overflow():
    big = np.array([-1000.0, 1000.0])
    np.testing.assert_array_equal(K.logsigmoid(big), [-1000.0, 0.0])
    np.testing.assert_array_equal(K.softplus(big, beta=1.0, threshold=1e9), [0.0, 1000.0])


def test_softmax_and_log_softmax_closed_form():
    x = rng.standard_normal((3, 4)) * 50
    np.testing.assert_allclose(K.softmax(x, dim=1), special.softmax(x, axis=1), rtol=1e-12)
    np.testing.assert_allclose(K.log_softmax(x, dim=0), special.log_softmax(x, axis=0),
                               rtol=1e-12)


def test_batch_norm_and_layer_norm_closed_form():
    x = rng.standard_normal((4, 3, 5))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    out, mean, var = K.batch_norm(x, w, b, None, None, training=True, eps=1e-5)
    m = x.mean(axis=(0, 2))
    v = x.var(axis=(0, 2))
    expected = (x - m[:, None]) / np.sqrt(v[:, None] + 1e-5) * w[:, None] + b[:, None]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    np.testing.assert_allclose(mean, m, rtol=1e-12)
    np.testing.assert_allclose(var, v, rtol=1e-12)
    ln = K.layer_norm(x, None, None, normalized_ndim=2, eps=0.0)
    flat = x.reshape(4, -1)
    np.testing.assert_allclose(ln.reshape(4, -1), (flat - flat.mean(1, keepdims=True))
                               / flat.std(1, keepdims=True), rtol=1e-12)



@pytest.mark.parametrize("training", [True, False])
def test_half_batch_norm_is_rounded_once(training):
    # float16 in, computed in float32, rounded once: within half an ulp (plus float32's
    # error) of the exact value of the same float16 inputs, as PyTorch's CPU kernel, from
    # the batch's mean and 1/std rounded to float16 in training (as PyTorch saves them)
    x = (rng.standard_normal((4, 3, 5)) * 3).astype(np.float16)
    w, b = (rng.standard_normal(3) * 2).astype(np.float16), rng.standard_normal(3).astype(
        np.float16)
    rm, rv = rng.standard_normal(3).astype(np.float16), rng.uniform(0.5, 2, 3).astype(
        np.float16)
    out, mean, var = K.batch_norm(x, w, b, rm, rv, training=training, eps=1e-5)
    assert out.dtype == np.float16 and mean.dtype == np.float16
    x64 = x.astype(np.float64)
    m = x64.mean(axis=(0, 2)) if training else rm.astype(np.float64)
    v = x64.var(axis=(0, 2)) if training else rv.astype(np.float64)
    inv = 1 / np.sqrt(v + 1e-5)
    if training:
        m, inv = (a.astype(np.float16).astype(np.float64) for a in (m, inv))
    exact = (x64 - m[:, None]) * inv[:, None] * w[:, None] + b[:, None]
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert (np.abs(out - exact) <= ulp * 0.5 + 1e-5 * np.abs(exact)).all()

def _numerical_vjp(f, x, g, h=1e-6):
    """sum(g * df/dx) by central differences, element by element."""
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = ((f(x + e) - f(x - e)) * g).sum() / (2 * h)
    return out


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_by_finite_differences(training):
    x = rng.standard_normal((3, 2, 2))
    w, b = rng.standard_normal(2), rng.standard_normal(2)
    rm, rv = rng.standard_normal(2), rng.random(2) + 0.5
    g = rng.standard_normal(x.shape)

    def f(x_, w_=w, b_=b):
        return K.batch_norm(x_, w_, b_, rm, rv, training=training, eps=1e-3)[0]

    gx, gw, gb = K.batch_norm_backward(g, x, w, rm, rv, training=training, eps=1e-3)
    np.testing.assert_allclose(gx, _numerical_vjp(f, x, g), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, _numerical_vjp(lambda w_: f(x, w_), w, g), rtol=1e-6)
    np.testing.assert_allclose(gb, _numerical_vjp(lambda b_: f(x, w, b_), b, g), rtol=1e-6)


def test_layer_norm_backward_by_finite_differences():
    x = rng.standard_normal((2, 3, 4))
    w, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    g = rng.standard_normal(x.shape)

    def f(x_, w_=w, b_=b):
        return K.layer_norm(x_, w_, b_, normalized_ndim=2, eps=1e-5)

    gx, gw, gb = K.layer_norm_backward(g, x, w, normalized_ndim=2, eps=1e-5)
    np.testing.assert_allclose(gx, _numerical_vjp(f, x, g), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, _numerical_vjp(lambda w_: f(x, w_), w, g), rtol=1e-6)
    np.testing.assert_allclose(gb, _numerical_vjp(lambda b_: f(x, w, b_), b, g), rtol=1e-6)


def test_cross_entropy_backward_by_finite_differences():
    x = rng.standard_normal((4, 3))
    t = np.array([0, 2, -100, 1])
    w = np.array([1.0, 2.0, 0.5])
    params = dict(reduction="mean", ignore_index=-100, label_smoothing=0.2)
    got = K.cross_entropy_backward(np.float64(1.5), x, t, w, **params)
    np.testing.assert_allclose(
        got, _numerical_vjp(lambda x_: K.cross_entropy(x_, t, w, **params), x, 1.5), rtol=1e-6)


def test_cross_entropy_closed_form():
    x = rng.standard_normal((5, 4))
    t = np.array([0, 3, 1, 3, 2])
    w = np.array([1.0, 2.0, 0.5, 3.0])
    logp = x - special.logsumexp(x, axis=1, keepdims=True)
    nll = -logp[np.arange(5), t]
    # label smoothing eps: (1 - eps) * nll + eps / C * (-sum_c w_c logp_c), weighted mean
    eps = 0.2
    smooth = -(logp * w).sum(1)
    expected = ((1 - eps) * (w[t] * nll).sum() + eps / 4 * smooth.sum()) / w[t].sum()
    got = K.cross_entropy(x, t, w, reduction="mean", ignore_index=-100, label_smoothing=eps)
    assert math.isclose(got, expected, rel_tol=1e-12)
    assert math.isclose(K.nll_loss(logp, t, None, reduction="sum", ignore_index=3),
                        nll[t != 3].sum(), rel_tol=1e-12)


def _collapse(path, blank):
    out = []
    for i, c in enumerate(path):
        if c != blank and (i == 0 or c != path[i - 1]):
            out.append(c)
    return out


def test_ctc_loss_by_enumerating_alignments():
    t_max, c, blank = 5, 3, 0
    lp = special.log_softmax(rng.standard_normal((t_max, 2, c)), axis=2)
    targets = np.array([[1, 2], [2, 2]])
    lengths_in, lengths_t = np.array([5, 4]), np.array([2, 2])
    got = K.ctc_loss(lp, targets, lengths_in, lengths_t, blank=blank)
    for n in range(2):
        total = 0.0
        for path in itertools.product(range(c), repeat=int(lengths_in[n])):
            if _collapse(path, blank) == list(targets[n, :lengths_t[n]]):
                total += math.exp(sum(lp[t, n, k] for t, k in enumerate(path)))
        assert math.isclose(got[n], -math.log(total), rel_tol=1e-12)
    g = rng.standard_normal(2)
    grad = K.ctc_loss_backward(g, lp, targets, lengths_in, lengths_t, got, blank=blank)
    numeric = _numerical_vjp(
        lambda x_: K.ctc_loss(x_, targets, lengths_in, lengths_t, blank=blank), lp, g)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_embedding_backward_sums_repeated_rows():
    g = np.arange(12.0).reshape(2, 2, 3)
    idx = np.array([[1, 3], [1, 0]])
    out = K.embedding_backward(g, idx, num_weights=5, padding_idx=0)
    expected = np.zeros((5, 3))
    expected[1] = g[0, 0] + g[1, 0]
    expected[3] = g[0, 1]
    np.testing.assert_array_equal(out, expected)


# ----- argument errors of the public functions ----------------------------------------------


def test_conv2d_errors_name_shapes():
    w = torcia.zeros(8, 3, 3, 3)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input "
                                           r"to conv2d, but got input of size: \[2, 3\]"):
        torcia.conv2d(torcia.zeros(2, 3), w)
    with pytest.raises(RuntimeError, match=r"Given groups=1, weight of size \[8, 3, 3, 3\], "
                                           r"expected input\[2, 4, 5, 5\] to have 3 channels, "
                                           r"but got 4 channels instead"):
        torcia.conv2d(torcia.zeros(2, 4, 5, 5), w)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input"):
        torcia.conv2d(torcia.zeros(1, 3, 2, 2), w)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        torcia.conv2d(torcia.zeros(1, 3, 5, 5), w, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="expected weight to be divisible by 3"):
        torcia.conv2d(torcia.zeros(1, 3, 5, 5), torcia.zeros(8, 1, 3, 3), groups=3)


def test_pool_errors():
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel"):
        torcia.max_pool2d(torcia.zeros(1, 1, 4, 4), 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        torcia.max_pool2d(torcia.zeros(1, 1, 1, 1), 2)
    with pytest.raises(RuntimeError, match=r"Expected 2D \(unbatched\) or 3D \(batched\) input "
                                           r"to max_pool1d"):
        torcia.max_pool1d(torcia.zeros(4), 2)


def test_norm_errors():
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3\], expected input with "
                                           r"shape \[\*, 3\]"):
        torcia.layer_norm(torcia.zeros(2, 4), (3,))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        torcia.batch_norm(torcia.zeros(1, 3), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        torcia.group_norm(torcia.zeros(2, 5, 3), 2)


def test_embedding_and_softmax_errors():
    with pytest.raises(IndexError, match="index out of range in self"):
        torcia.embedding(torcia.zeros(3, 2), torcia.tensor([3]))
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar "
                                           "types: Long, Int"):
        torcia.embedding(torcia.zeros(3, 2), torcia.tensor([1.0]))
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        torcia.softmax(torcia.tensor([1, 2]), 0)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        torcia.dropout(torcia.zeros(2), 1.5)


def test_softmax_dtype_argument_and_methods():
    x = torcia.tensor([[1, 2], [3, 5]])
    out = torcia.softmax(x, 1, dtype=torcia.float64)
    assert out.dtype is torcia.float64
    np.testing.assert_allclose(out.numpy(), special.softmax([[1, 2], [3, 5]], axis=1))
    y = torcia.tensor([0.0, math.log(3.0)])
    np.testing.assert_allclose(y.softmax(0).numpy(), [0.25, 0.75], rtol=1e-6)
    np.testing.assert_allclose(y.log_softmax(0).exp().numpy(), [0.25, 0.75], rtol=1e-6)
