"""Every kernel the plugin overrides, against core's reference kernel."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torcia_cpu
from torcia_cpu import _blas, _native, _provider, kernels
from torcia_cpu.kernels import OVERRIDES, NativeKernels, adam_step, sgd_step

import torcia
from torcia.library import ReferenceKernels as Reference

REF, NAT = Reference(), NativeKernels()
RNG = np.random.default_rng(0)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def _rand(shape, dtype, contiguous=True):
    a = RNG.standard_normal(shape).astype(dtype)
    if not contiguous:
        # the same values seen through a transposed copy: strides differ, values do not
        a = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    return a


def _same(a, b, dtype):
    if isinstance(a, tuple):
        for x, y in zip(a, b):
            _same(x, y, dtype)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype.kind == "i":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, **TOL[dtype])


DTYPES = [np.float32, np.float64]
CONVS = [  # (N, C, H, W), (O, C/g, kh, kw), stride, padding pairs, dilation, groups
    ((2, 3, 7, 5), (4, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((1, 4, 9, 8), (6, 2, 3, 2), (2, 3), ((0, 1), (2, 0)), (1, 2), 2),
    ((3, 2, 6, 6), (2, 2, 1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),
    ((2, 6, 11, 13), (6, 1, 5, 3), (3, 2), ((2, 2), (1, 1)), (2, 1), 6),
    # many samples of few positions: chunks of several samples per product, the last short
    ((45, 3, 5, 5), (4, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((130, 2, 4, 4), (3, 2, 2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1), 1),
    # a 1x1 window of stride 2 (columns gathered), and one reading whole rows (stride 1,
    # the full width) beside padded ones
    ((3, 4, 6, 5), (5, 4, 1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1), 1),
    ((2, 3, 5, 4), (2, 3, 3, 1), (1, 1), ((1, 1), (0, 0)), (1, 1), 1),
    # output rows of 16 or more copied in pieces; shorter ones (all of the above) gathered
    # through a table of offsets
    ((2, 3, 5, 37), (4, 3, 3, 3), (1, 2), ((1, 1), (2, 2)), (1, 1), 1),
    ((2, 2, 3, 40), (3, 2, 2, 3), (1, 1), ((0, 1), (1, 0)), (1, 2), 1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CONVS)
def test_conv_and_its_gradients(dtype, contiguous, xs, ws, stride, padding, dilation, groups):
    x, w, b = _rand(xs, dtype, contiguous), _rand(ws, dtype), _rand(ws[:1], dtype)
    args = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    out = REF.conv(x, w, b, **args)
    _same(NAT.conv(x, w, b, **args), out, dtype)
    _same(NAT.conv(x, w, None, **args), REF.conv(x, w, None, **args), dtype)
    g = _rand(out.shape, dtype, contiguous)
    _same(NAT.conv_weight(x, g, weight_shape=ws, **args),
          REF.conv_weight(x, g, weight_shape=ws, **args), dtype)
    for output_padding in ((0, 0), (stride[0] - 1, 0)):
        t_args = dict(args, output_padding=output_padding)
        _same(NAT.conv_transpose(g, w, None, **t_args), REF.conv_transpose(g, w, None, **t_args),
              dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", [
    ((24, 8, 9, 9), (16, 8, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),  # a sample a chunk
    ((70, 4, 3, 3), (8, 4, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),   # several
    ((6, 16, 8, 8), (32, 16, 1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),  # planes as columns
])
def test_conv_on_several_threads_matches_the_reference(dtype, xs, ws, stride, padding,
                                                       dilation, groups):
    # threads split the chunks; the weight gradient sums each thread's part at the end
    x, w, b = _rand(xs, dtype), _rand(ws, dtype), _rand(ws[:1], dtype)
    args = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    before = _native.get_num_threads()
    _native.set_num_threads(3)
    try:
        out = NAT.conv(x, w, b, **args)
        g = _rand(out.shape, dtype)
        gw = NAT.conv_weight(x, g, weight_shape=ws, **args)
        gx = NAT.conv_transpose(g, w, None, output_padding=(0, 0), **args)
    finally:
        _native.set_num_threads(before)
    # sums of up to 2000 float32 products, added in another order
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else TOL[dtype]
    np.testing.assert_allclose(out, REF.conv(x, w, b, **args), **tol)
    np.testing.assert_allclose(gw, REF.conv_weight(x, g, weight_shape=ws, **args), **tol)
    np.testing.assert_allclose(
        gx, REF.conv_transpose(g, w, None, output_padding=(0, 0), **args), **tol)


# 3x3 windows of stride 1 with enough 2x2 output blocks (csrc/winograd.h's `worth`) run by
# Winograd's F(2x2, 3x3): odd output sizes (a last block half outside), each padding it
# takes (0-2, uneven sides), planes of one position, a single sample of many blocks
WINOGRAD = [  # (N, C, H, W), O, padding pairs
    ((40, 8, 5, 7), 8, ((1, 1), (1, 1))),
    ((30, 16, 6, 6), 12, ((1, 1), (1, 1))),
    ((64, 9, 8, 6), 10, ((0, 0), (0, 0))),
    ((300, 8, 1, 1), 8, ((1, 1), (1, 1))),
    ((40, 32, 3, 9), 8, ((2, 2), (2, 2))),
    ((20, 8, 9, 8), 9, ((1, 0), (2, 1))),
    ((1, 8, 40, 31), 16, ((1, 1), (1, 1))),
]


def _close_to(a, ref, dtype):
    # Winograd's transforms round differently from the direct sums: a few ulps of the
    # largest magnitudes involved
    scale = float(np.abs(ref).max()) or 1.0
    tol = 5e-6 if dtype == np.float32 else 1e-13
    assert a.shape == ref.shape and a.dtype == ref.dtype
    np.testing.assert_allclose(a, ref, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs, o, padding", WINOGRAD)
def test_winograd_convolutions_match_the_reference(threads, dtype, xs, o, padding):
    x, w, b = _rand(xs, dtype, contiguous=False), _rand((o, xs[1], 3, 3), dtype), _rand((o,), dtype)
    args = dict(stride=(1, 1), padding=padding, dilation=(1, 1), groups=1)
    before = _native.get_num_threads()
    _native.set_num_threads(threads)
    try:
        out = NAT.conv(x, w, b, **args)
        g = _rand(out.shape, dtype, contiguous=False)
        gw = NAT.conv_weight(x, g, weight_shape=w.shape, **args)
        # the input's gradient: conv_transpose2d of stride 1, which runs by Winograd too
        gx = NAT.conv_transpose(g, w, None, output_padding=(0, 0), **args)
    finally:
        _native.set_num_threads(before)
    _close_to(out, REF.conv(x, w, b, **args), dtype)
    _close_to(gw, REF.conv_weight(x, g, weight_shape=w.shape, **args), dtype)
    _close_to(gx, REF.conv_transpose(g, w, None, output_padding=(0, 0), **args), dtype)


def test_winograd_is_used_and_can_be_turned_off():
    x, w = _rand((32, 64, 16, 16), np.float32), _rand((64, 64, 3, 3), np.float32)
    args = dict(stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1)
    g = _rand((32, 64, 16, 16), np.float32)
    assert _native.winograd()
    fast = (NAT.conv(x, w, None, **args), NAT.conv_weight(x, g, weight_shape=w.shape, **args),
            NAT.conv_transpose(g, w, None, output_padding=(0, 0), **args))
    _native.set_winograd(False)
    try:
        direct = (NAT.conv(x, w, None, **args),
                  NAT.conv_weight(x, g, weight_shape=w.shape, **args),
                  NAT.conv_transpose(g, w, None, output_padding=(0, 0), **args))
    finally:
        _native.set_winograd(True)
    for a, d in zip(fast, direct):
        assert not np.array_equal(a, d)  # another algorithm ran
        _close_to(a, d, np.float32)


def test_winograd_environment_switch_is_read_when_the_plugin_starts(registered):
    code = ("import torcia; torcia.ones(2, 2) @ torcia.ones(2, 2); from torcia_cpu import _native; "
            "print(_native.winograd())")
    for value, expected in (("0", "False"), ("1", "True")):
        env = dict(os.environ, TORCIA_CPU_WINOGRAD=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.split()
        assert out[-1] == expected


def test_winograd_gradients_pass_gradcheck():
    import torcia.nn.functional as F
    from torcia.autograd import gradcheck

    # 256 blocks of 2x2 outputs: the smallest layer that takes the Winograd path
    x = torcia.randn(16, 8, 8, 8, dtype=torcia.float64, requires_grad=True)
    w = torcia.randn(8, 8, 3, 3, dtype=torcia.float64, requires_grad=True)
    b = torcia.randn(8, dtype=torcia.float64, requires_grad=True)
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1), (x, w, b), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((3, 2), (1, 2), (1, 0), (2, 1), False),
    ((2, 3), (3, 2), (0, 1), (1, 1), True),
])
def test_max_pool_and_backward(dtype, kernel, stride, padding, dilation, ceil_mode):
    x = _rand((2, 3, 9, 7), dtype, contiguous=False)
    args = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                ceil_mode=ceil_mode)
    values, indices = REF.max_pool(x, **args)
    _same(NAT.max_pool(x, **args), (values, indices), dtype)
    g = _rand(values.shape, dtype)
    _same(NAT.max_pool_backward(g, indices, input_shape=(9, 7)),
          REF.max_pool_backward(g, indices, input_shape=(9, 7)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_ties_nan_and_minus_infinity_pick_what_the_reference_picks(dtype):
    # few distinct values: ties everywhere, where the first maximum wins
    x = RNG.integers(-2, 2, (2, 2, 8, 9)).astype(dtype)
    x[0, 0, 1, 1] = x[0, 1, 4, 5] = np.nan
    x[0, 0, 0, 0] = x[0, 1, 4, 4] = np.nan  # two NaNs in one window: the first stays
    x[1, 0, :4, :4] = -np.inf  # windows of -inf only still name an element
    for padding in ((0, 0), (1, 1)):
        args = dict(kernel_size=(2, 3), stride=(2, 2), padding=padding, dilation=(1, 1),
                    ceil_mode=True)
        values, indices = NAT.max_pool(x, **args)
        ref_values, ref_indices = REF.max_pool(x, **args)
        np.testing.assert_array_equal(values, ref_values)
        np.testing.assert_array_equal(indices, ref_indices)

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, dim", [((5, 7), 1), ((2, 3, 33), -1), ((1,), 0),
                                        ((4, 6), 0)])  # the last: not rows, the reference
@pytest.mark.parametrize("contiguous", [True, False])
def test_softmax_log_softmax_and_their_backward(dtype, shape, dim, contiguous):
    x = _rand(shape, dtype, contiguous or len(shape) == 1) * 10
    g = _rand(shape, dtype)
    for op in ("softmax", "log_softmax"):
        y = getattr(REF, op)(x, dim)
        _same(getattr(NAT, op)(x, dim), y, dtype)
        _same(getattr(NAT, op + "_backward")(g, y, dim),
              getattr(REF, op + "_backward")(g, y, dim), dtype)


def test_softmax_of_masked_and_nan_rows():
    x = RNG.standard_normal((3, 9)).astype(np.float32)
    x[0, 4:] = -np.inf  # masked attention scores: exactly zero probability
    x[1, 2] = np.nan  # a NaN makes its row NaN, as in PyTorch
    x[2, :] = -np.inf  # nothing unmasked: NaN, as in PyTorch
    y = NAT.softmax(x, 1)
    assert (y[0, 4:] == 0).all()
    np.testing.assert_allclose(y[0, :4].sum(), 1, rtol=1e-6)
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all()
    assert (NAT.log_softmax(x, 1)[0, 4:] == -np.inf).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000])
def test_softmax_rows_across_vector_widths_and_special_values(dtype, width):
    # the row maxima and sums run in 64-byte vectors with a scalar tail: rows shorter than,
    # as long as and longer than one or two vectors, with the special value in the vector
    # part or in the tail
    x = _rand((8, width), dtype) * 10
    x[1, -1] = np.nan
    x[2, 0] = np.nan
    x[3, :] = -np.inf
    x[4, width // 2:] = -np.inf
    x[5, -1] = np.inf
    x[6, 0] = np.inf
    x[7, -1] = 80  # the maximum in the tail
    g = _rand((8, width), dtype)
    for op in ("softmax", "log_softmax"):
        y = getattr(REF, op)(x, 1)
        np.testing.assert_array_equal(np.isnan(getattr(NAT, op)(x, 1)), np.isnan(y))
        _same(getattr(NAT, op)(x, 1), y, dtype)
        finite = np.isfinite(y).all(axis=1)
        _same(getattr(NAT, op + "_backward")(g[finite], y[finite], 1),
              getattr(REF, op + "_backward")(g[finite], y[finite], 1), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction, smoothing", [("mean", 0.0), ("mean", 0.1), ("sum", 0.2),
                                                  ("none", 0.0)])
def test_cross_entropy_and_backward(dtype, weighted, reduction, smoothing):
    x = _rand((6, 7), dtype) * 5
    target = RNG.integers(0, 7, 6)
    target[2] = -100
    weight = RNG.uniform(0.5, 2, 7).astype(dtype) if weighted else None
    args = dict(weight=weight, reduction=reduction, ignore_index=-100,
                label_smoothing=smoothing)
    _same(NAT.cross_entropy(x, target, **args), REF.cross_entropy(x, target, **args), dtype)
    g = np.asarray(1.5, dtype) if reduction != "none" else _rand((6,), dtype)
    _same(NAT.cross_entropy_backward(g, x, target, **args),
          REF.cross_entropy_backward(g, x, target, **args), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_backward_rows_natively(dtype, reduction, monkeypatch):
    """Without label smoothing the gradient is one native pass per row (softmax, the row's
    factor, the target's term): against the reference on transposed logits, odd widths,
    rows over the threads' threshold, ignored rows and integer targets of any width."""
    from torcia_cpu import kernels

    x = _rand((1001, 67), dtype, contiguous=False) * 6
    x[3, 5] = -np.inf  # a class that cannot occur
    target = RNG.integers(0, 67, 1001).astype(np.int32)
    target[::7] = 3
    target[::11] = -100
    weight = RNG.uniform(0.5, 2, 67).astype(dtype)
    g = np.asarray(0.7, dtype) if reduction != "none" else _rand((1001,), dtype)
    want = [REF.cross_entropy_backward(g, x, target, w, reduction, -100, 0.0)
            for w in (None, weight)]

    def refuse(*args, **kwargs):
        raise AssertionError("fell back to the reference kernel")

    monkeypatch.setattr(kernels, "fallback", refuse)
    for w, expected in zip((None, weight), want):
        _same(NAT.cross_entropy_backward(g, x, target, w, reduction, -100, 0.0), expected,
              dtype)


def test_cross_entropy_backward_targets_out_of_range_go_to_the_reference():
    x = _rand((3, 4), np.float32)
    args = (None, "sum", -100, 0.0)
    for kernels_ in (NAT, REF):
        with pytest.raises(IndexError):
            kernels_.cross_entropy_backward(np.float32(1), x, np.array([0, 4, 1]), *args)
    # a negative target other than ignore_index: whatever the reference does with it
    target = np.array([0, -2, 1])
    _same(NAT.cross_entropy_backward(np.float32(1), x, target, *args),
          REF.cross_entropy_backward(np.float32(1), x, target, *args), np.float32)
    with pytest.raises(IndexError, match="out of bounds for 4 classes"):
        _native.cross_entropy_backward_rows(x, np.ones(3, np.float32), np.array([0, 4, 1]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_backward(dtype, padding_idx):
    idx = RNG.integers(0, 6, (4, 5))
    g = _rand((4, 5, 3), dtype)
    _same(NAT.embedding_backward(g, idx, num_weights=6, padding_idx=padding_idx),
          REF.embedding_backward(g, idx, num_weights=6, padding_idx=padding_idx), dtype)


def test_unsupported_cases_fall_back_to_the_reference():
    x = RNG.standard_normal((2, 3, 8)).astype(np.float16)  # 1-D conv in half precision
    w = RNG.standard_normal((4, 3, 3)).astype(np.float16)
    args = dict(stride=(1,), padding=((1, 1),), dilation=(1,), groups=1)
    np.testing.assert_array_equal(NAT.conv(x, w, None, **args), REF.conv(x, w, None, **args))
    assert set(OVERRIDES) <= set(dir(NAT))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((2, 5, 7), (7, 3)), ((7,), (7, 3)),
                                    ((3, 40, 30), (3, 30, 20))])
def test_matrix_products_on_one_or_several_blas_threads(dtype, shapes, monkeypatch):
    # the threshold lowered to 0 runs every product through the threaded path too
    for threshold in (_blas.PARALLEL_WORK, 0):
        monkeypatch.setattr(_blas, "PARALLEL_WORK", threshold)
        a, b = _rand(shapes[0], dtype), _rand(shapes[1], dtype)
        _same(NAT.matmul(a, b), REF.matmul(a, b), dtype)
        if a.ndim == 2:
            c = _rand(shapes[1][-1:], dtype)
            _same(NAT.addmm(c, a, b, 0.5, 2.0), REF.addmm(c, a, b, 0.5, 2.0), dtype)
            _same(NAT.linear(a, b.T, c), REF.linear(a, b.T, c), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_and_addmm_on_every_layout(dtype):
    # x as rows of a 3-D batch, transposed, or strided; the weight transposed; no bias;
    # an empty inner dimension (the bias alone) and no rows
    x3, w = _rand((4, 5, 7), dtype), _rand((3, 7), dtype)
    b = _rand((3,), dtype)
    for x in (x3, x3.transpose(1, 0, 2), x3[:, ::2], x3[0].T.copy().T):
        for weight in (w, np.ascontiguousarray(w.T).T):
            for bias in (b, None):
                _same(NAT.linear(x, weight, bias), REF.linear(x, weight, bias), dtype)
    _same(NAT.linear(_rand((4, 0), dtype), _rand((3, 0), dtype), b),
          REF.linear(_rand((4, 0), dtype), _rand((3, 0), dtype), b), dtype)
    _same(NAT.linear(_rand((0, 7), dtype), w, b), REF.linear(_rand((0, 7), dtype), w, b), dtype)
    a, m = _rand((6, 7), dtype), _rand((7, 3), dtype)
    for c in (b, _rand((6, 3), dtype), np.float64(2.0)):
        for beta, alpha in ((1, 1), (0.5, 2.0)):
            _same(NAT.addmm(c, a, m, beta, alpha), REF.addmm(c, a, m, beta, alpha), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_batched_products_are_the_references_loop(dtype):
    # under 400 multiply-adds a matrix PyTorch sums in its own loop, which the reference
    # follows: the same bits, not BLAS's
    for sa, sb in (((3, 4, 5), (3, 5, 3)), ((2, 1, 19, 21), (1, 3, 21, 1)),
                   ((3, 1, 399), (3, 399, 1))):
        a, b = _rand(sa, dtype), _rand(sb, dtype)
        np.testing.assert_array_equal(NAT.matmul(a, b), REF.matmul(a, b))
        np.testing.assert_array_equal(NAT.bmm(a, b), REF.bmm(a, b))


def _pytorch():
    try:
        import torch as real
    except ImportError:
        return None
    return real if getattr(real, "Tensor", None) is not torcia.Tensor else None


@pytest.mark.parametrize("mkn", [(5, 7, 3), (16, 32, 8), (64, 64, 64), (33, 100, 17),
                                 (128, 256, 64)], ids=str)
def test_addmm_and_baddbmm_with_alpha_and_beta_give_pytorchs_bits_on_mkl(mkn, registered):
    # PyTorch copies the input into the result and hands alpha and beta to one GEMM, which
    # scales inside its kernel: on the same library and one thread, its bits
    torch = _pytorch()
    if torch is None or "Math Kernel Library" not in torcia_cpu.blas_library():
        pytest.skip("needs PyTorch, and MKL as the plugin's BLAS")
    m, k, n = mkn
    threads = torch.get_num_threads(), torcia.get_num_threads()
    torch.set_num_threads(1)
    torcia.set_num_threads(1)
    try:
        a, b = _rand((m, k), np.float32), _rand((k, n), np.float32)
        for c in (_rand((m, n), np.float32), _rand((n,), np.float32), _rand((m, 1), np.float32)):
            for alpha, beta in ((0.3, 0.7), (0.3, 1), (1, 0.7), (2.5, 0), (-1.7, -0.1)):
                want = torch.addmm(*map(torch.from_numpy, (c, a, b)), alpha=alpha, beta=beta)
                got = torcia.addmm(*map(torcia.from_numpy, (c, a, b)), alpha=alpha, beta=beta)
                np.testing.assert_array_equal(got.numpy(), want.numpy())
        # baddbmm: one such GEMM a matrix, for either dtype (PyTorch's loop below 400
        # multiply-adds a matrix: the reference's, tested in torcia-core)
        for dtype in (np.float32, np.float64):
            a, b = _rand((3, m, k), dtype), _rand((3, k, n), dtype)
            for c in (_rand((3, m, n), dtype), _rand((n,), dtype), _rand((1, m, 1), dtype)):
                for alpha, beta in ((0.3, 0.7), (0.3, 1), (1, 0.7), (2.5, 0), (1, 1)):
                    args = (c, a, b)
                    want = torch.baddbmm(*map(torch.from_numpy, args), alpha=alpha, beta=beta)
                    got = torcia.baddbmm(*map(torcia.from_numpy, args), alpha=alpha, beta=beta)
                    np.testing.assert_array_equal(got.numpy(), want.numpy())
    finally:
        torch.set_num_threads(threads[0])
        torcia.set_num_threads(threads[1])


F32 = np.ones((4, 3), np.float32)


@pytest.mark.parametrize("args, message", [
    ((F32, F32, F32.T.copy(), 1.0, 1.0), "a has shape (4, 3), b (3, 4), c (4, 3)"),
    ((F32.astype(np.int64), F32, F32[:3].copy(), 1.0, 1.0), "c must be float32 or float64"),
    ((F32.T.copy().T, F32[:, :3].copy(), F32[:3].copy(), 1.0, 1.0), "c must be C-contiguous"),
    ((F32, F32.astype(np.int32), F32[:3].copy(), 1.0, 1.0), "a must be float32 or float64"),
    ((F32, F32, F32[:3].astype(np.float64), 1.0, 1.0), "b has dtype float64, a has float32"),
    ((F32, F32[:, :2].copy(), F32[:3].copy(), 1.0, 1.0), "(expected (m, k), (k, n), (m, n))"),
    ((F32[0], F32, F32, 1.0, 1.0), "must be 2-D"),
    ((F32, F32, F32[:3].copy(), 1e300, 1.0), "alpha is outside float32's range"),
    ((F32, F32[:, ::2], F32[:2].copy(), 1.0, 1.0), "no unit stride"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_native_addmm_refuses_bad_arguments(args, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _native.addmm(*args)
    readonly = F32.copy()
    readonly.flags.writeable = False
    with pytest.raises(RuntimeError, match="beta is outside float32's range"):
        _native.addmm(F32.copy(), F32, F32[:3].copy(), 1.0, -1e300)
    with pytest.raises(RuntimeError, match="c must be writable"):
        _native.addmm(readonly, F32, F32[:3].copy(), 1.0, 1.0)


def test_native_addmm_writes_c_in_place_and_ignores_it_where_beta_is_0():
    c = np.full((4, 3), np.nan, np.float32)
    out = _native.addmm(c, F32, F32[:3].copy(), 2.0, 0.0)
    assert out is c or np.shares_memory(out, c)
    np.testing.assert_array_equal(out, np.full((4, 3), 6.0, np.float32))
    # an empty inner dimension: beta * c, zeros for beta 0
    c = np.full((4, 3), 2.0)
    np.testing.assert_array_equal(_native.addmm(c, np.ones((4, 0)), np.ones((0, 3)), 1.0, 0.5),
                                  np.ones((4, 3)))
    # the kernel leaves its input alone
    inp = _rand((3,), np.float32)
    before = inp.copy()
    NAT.addmm(inp, _rand((4, 5), np.float32), _rand((5, 3), np.float32), 0.5, 2.0)
    np.testing.assert_array_equal(inp, before)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_writes_its_bias_rows_on_any_thread_count(bias):
    # an output of several blocks of rows for the bias (or zeros), one of 2 and one of 1
    # column: the same bits on 1, 2 and 3 threads, and the reference's values
    for rows, cols in ((700, 300), (5000, 1), (2, 40000)):
        x, w = _rand((rows, 9), np.float32), _rand((cols, 9), np.float32)
        b = _rand((cols,), np.float32) if bias else None
        before = _native.get_num_threads()
        try:
            outs = []
            for n in (1, 2, 3):
                _native.set_num_threads(n)
                outs.append(_native.linear(x, w, b, 1, 1))
        finally:
            _native.set_num_threads(before)
        for other in outs[1:]:
            np.testing.assert_array_equal(other, outs[0])
        _same(outs[0], REF.linear(x, w, b), np.float32)


def test_only_large_products_ask_blas_for_threads(monkeypatch):
    if _blas._setter is None or torcia.get_num_threads() == 1:
        pytest.skip("no OpenBLAS thread control here, or one thread: products never go wide")
    small, mid = (np.empty((16, 64)), np.empty((64, 256))), (np.empty((128, 784)),
                                                                  np.empty((784, 512)))
    large = (np.empty((1024, 1024)), np.empty((1024, 1024)))
    monkeypatch.setattr(_blas, "crowded", lambda: False)
    assert [_blas.wide(*p) for p in (small, mid, large)] == [False, True, True]
    # on a crowded machine only products long enough to amortise a stalled thread
    monkeypatch.setattr(_blas, "crowded", lambda: True)
    assert [_blas.wide(*p) for p in (small, mid, large)] == [False, False, True]


def test_a_crowded_machine_is_measured_from_what_other_processes_use(monkeypatch):
    clock = {"now": 100.0, "busy": 0.0, "own": 0.0}
    monkeypatch.setattr(_blas, "_load", {"checked": -np.inf, "crowded": False, "busy": None,
                                         "own": 0.0, "called": -np.inf, "measured": -np.inf})
    monkeypatch.setattr(_blas.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(_blas, "_busy_seconds", lambda: clock["busy"])
    monkeypatch.setattr(_blas.os, "times", lambda: (clock["own"], 0.0))
    monkeypatch.setattr(_blas.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torcia, "get_num_threads", lambda: 2)
    pushed = []  # what the extension's regions of a fixed split are told (team.h)
    monkeypatch.setattr(_native, "set_crowded", pushed.append)

    def advance(seconds, busy, own):
        clock["now"] += seconds
        clock["busy"] += busy
        clock["own"] += own

    def span(seconds, busy, own):
        # products every 10 ms (a training loop), the cores' time spread over them
        calls = round(seconds / 0.01)
        for _ in range(calls):
            advance(seconds / calls, busy / calls, own / calls)
            answer = _blas.crowded()
        return answer

    def pause(seconds, busy):
        # no product for `seconds` while other processes use `busy` core-seconds
        advance(seconds, busy, 0.0)
        return _blas.crowded()

    assert not _blas.crowded()  # no earlier sample yet
    assert not span(1.0, busy=2.0, own=1.9)  # the busy cores were this process's own
    assert span(1.0, busy=2.0, own=1.0)  # another process took a core
    assert span(0.1, busy=0.0, own=0.0)  # too soon: the last answer, without a new sample
    assert not span(0.5, busy=0.1, own=0.0)
    # a pause in which this process asked for no product (a benchmark's other child had
    # the cores, for seconds or for a round of 0.25 s) only starts a new span, and the
    # last answer stands
    assert not pause(5.0, busy=10.0)
    assert not span(0.5, busy=1.0, own=0.9)
    span(0.15, busy=0.3, own=0.3)
    assert not pause(0.25, busy=0.5)
    assert not span(0.25, busy=0.5, own=0.45)
    assert span(0.25, busy=0.5, own=0.1)  # then a crowded span is seen again
    assert pushed[-1] is True and False in pushed
    # rounds too short to be measured, each after a pause (a benchmark's children taking
    # turns): the crowded answer stands while it is recent, then it is dropped
    for _ in range(5):  # 1.5 s
        assert span(0.15, busy=0.3, own=0.3)
        assert pause(0.15, busy=0.3)
    for _ in range(5):
        span(0.15, busy=0.3, own=0.3)
        pause(0.15, busy=0.3)
    assert not span(0.15, busy=0.3, own=0.3) and pushed[-1] is False


def test_an_optimizer_step_measures_the_load_on_several_threads(monkeypatch):
    # a step without large products (a CNN's) still tells the regions of a fixed split
    # whether the machine is crowded
    checks = []
    monkeypatch.setattr(_blas, "crowded", lambda: checks.append(True) or False)
    p, g = [np.ones(4, np.float32)], [np.ones(4, np.float32)]
    for threads, expected in ((1, 0), (2, 2)):
        monkeypatch.setattr(torcia, "get_num_threads", lambda threads=threads: threads)
        checks.clear()
        sgd_step(p, g, [None], lr=0.1, weight_decay=0.0, momentum=0.9, dampening=0.0,
                 nesterov=False, maximize=False)
        adam_step(p, g, [np.zeros(4, np.float32)], [np.zeros(4, np.float32)], [], [1],
                  lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False,
                  maximize=False, decoupled_weight_decay=False)
        assert len(checks) == expected


def test_regions_of_a_fixed_split_give_the_same_bits_on_a_team_of_one():
    # a crowded machine runs them on one thread (team.h): the spans, rows and partial sums
    # are the shape's, so the bits are those of the full team
    x, y = _rand((300, 1000), np.float32), _rand((300, 1000), np.float32)
    w, b = _rand((1000,), np.float32), _rand((1000,), np.float32)
    image = _rand((16, 32, 16, 16), np.float32)

    def run():
        p, buf = [x.copy()], [None]
        for _ in range(2):  # the first step makes the momentum buffer, the second reads it
            sgd_step(p, [y], buf, lr=0.01, weight_decay=0.0, momentum=0.9, dampening=0.0,
                     nesterov=False, maximize=False)
        return [_native.binary("add", x.ravel(), y.ravel()),
                _native.reduce_sum(x.ravel(), 1, x.size, 1, False),
                _native.reduce_sum(x.ravel(), 1, 300, 1000, False),
                _native.activation("relu", x), NAT.softmax(x, 1),
                NAT.layer_norm(x, w, b, 1, 1e-5), p[0], buf[0],
                *_native.max_pool2d(image, 2, 2, 2, 2, 0, 0, 1, 1, 8, 8)]

    before = _native.get_num_threads()
    _native.set_num_threads(3)
    try:
        full = run()
        _native.set_crowded(True)
        alone = run()
    finally:
        _native.set_crowded(False)
        _native.set_num_threads(before)
    for a, c in zip(full, alone):
        np.testing.assert_array_equal(a, c)


def test_products_on_sleeping_threads_take_the_thread_count_whatever_the_load(monkeypatch):
    # MKL's threads (libgomp's, a brief spin) never stall a partner by spinning: a mid-sized
    # product gets torcia's threads on a crowded machine too, so its rounding, which
    # depends on the thread count, does not depend on the load
    monkeypatch.setattr(torcia, "get_num_threads", lambda: 2)
    monkeypatch.setattr(_blas, "crowded", lambda: True)
    mid = 128 * 784 * 512
    assert _blas.worth_threads(mid, spins=False)
    assert not _blas.worth_threads(mid, spins=True)
    # below SLEEPING_WORK a wake-up per product costs more than the second thread gives
    lstm_step = 32 * 128 * 512
    assert _blas.PARALLEL_WORK <= lstm_step < _blas.SLEEPING_WORK
    assert not _blas.worth_threads(lstm_step, spins=False)
    # an MLP layer of 128 on 256 rows, and its gradients' products, on two MKL threads;
    # on OpenBLAS one (split's panels from PANEL_WORK)
    for rows, k, n in ((256, 128, 128), (128, 256, 128)):
        layer = _blas.product_work(rows, k, n)
        assert _blas.worth_threads(layer, spins=False)
        assert _blas.split(layer) == (1, 1)
    assert _blas.split(_blas.PANEL_WORK) == (2, 1)
    monkeypatch.setattr(torcia, "get_num_threads", lambda: 1)
    assert not _blas.worth_threads(mid, spins=False)


@pytest.mark.parametrize("splits", [False, True], ids=["mkl", "openblas"])
def test_a_product_gets_the_threads_its_size_and_library_give(monkeypatch, splits):
    # kernels._product: on MKL its threads raised for the call alone (back to one after
    # it, an error too); on OpenBLAS the panels of split(); below PARALLEL_WORK one
    # thread on either, without measuring the load
    calls, asked = [], []
    monkeypatch.setattr(torcia, "get_num_threads", lambda: 2)
    monkeypatch.setattr(_blas, "crowded", lambda: asked.append(True) or False)
    monkeypatch.setattr(_provider, "splits_products", lambda: splits)
    monkeypatch.setattr(_native, "set_blas_threads", calls.append)

    def native(*args):
        return args

    def failing(*args):
        raise RuntimeError("product failed")

    small, mid = _blas.PARALLEL_WORK - 1, _blas.PANEL_WORK if splits else _blas.SLEEPING_WORK
    assert kernels._product(small, native, "a") == ("a", 1, 1)
    assert kernels._product(small, native, "a", split=False) == ("a",)
    assert calls == [] and asked == []
    if splits:
        assert kernels._product(mid, native, "a") == ("a", *_blas.split(mid))
        assert calls == []
    else:
        assert kernels._product(mid, native, "a") == ("a", 1, 1)
        assert kernels._product(mid, native, "a", split=False) == ("a",)
        assert calls == [2, 1, 2, 1]
        with pytest.raises(RuntimeError, match="product failed"):
            kernels._product(mid, failing)
        assert calls[-2:] == [2, 1]


def test_products_are_split_by_their_size_and_run_on_one_thread_when_crowded(monkeypatch):
    monkeypatch.setattr(torcia, "get_num_threads", lambda: 2)
    small, mid, large = 32 * 128 * 512, 128 * 784 * 512, _blas.CROWDED_WORK
    for busy, team in ((False, 2), (True, 1)):
        monkeypatch.setattr(_blas, "crowded", lambda busy=busy: busy)
        assert _blas.split(small) == (1, 1)
        assert _blas.split(mid) == (2, team)  # cut for 2 threads, the load or not
        assert _blas.split(large) == (2, 2)
        assert _blas.split(small, spins=True) == (2, team)
    monkeypatch.setattr(torcia, "get_num_threads", lambda: 1)
    assert _blas.split(large) == (1, 1)


def test_the_plugin_has_openmp_threads_spin_briefly_unless_the_user_chose():
    code = "import os, torcia_cpu; print(os.environ.get('GOMP_SPINCOUNT'))"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    cases = (({}, str(torcia_cpu.SPIN_COUNT)), ({"OMP_WAIT_POLICY": "active"}, "None"),
             ({"GOMP_SPINCOUNT": "7"}, "7"))
    for extra, printed in cases:
        out = subprocess.run([sys.executable, "-c", code], env={**env, **extra},
                             capture_output=True, text=True, check=True).stdout.split()
        assert out == [printed]
    # the products' thread policy (_blas) treats a long spin as OpenBLAS's spinning threads
    spins_long = _provider._spins_long
    assert not spins_long({"GOMP_SPINCOUNT": str(torcia_cpu.SPIN_COUNT)})
    assert not spins_long({"OMP_WAIT_POLICY": "PASSIVE"})
    assert spins_long({}) and spins_long({"OMP_WAIT_POLICY": "active"})
    assert spins_long({"GOMP_SPINCOUNT": "300000"}) and spins_long({"GOMP_SPINCOUNT": "1M"})
    assert not spins_long({"OMP_WAIT_POLICY": "active", "GOMP_SPINCOUNT": "100"})


MID_SIZED = r"""
import sys
import numpy as np
import torcia
from torcia_cpu import _blas, _provider
from torcia_cpu.kernels import NativeKernels

torcia.set_num_threads(2)
nat = NativeKernels()
rng = np.random.default_rng(0)
# a shape whose rounding differs on one and two MKL threads, and on one and two OpenBLAS
# threads at (128, 784) @ (784, 512) (131M and 51M multiply-adds)
pairs = [(rng.standard_normal((1000, 1024)).astype(np.float32),
          rng.standard_normal((128, 1024)).astype(np.float32)),
         (rng.standard_normal((128, 784)).astype(np.float32),
          rng.standard_normal((512, 784)).astype(np.float32))]
out = {}
for busy in (False, True):
    _blas.crowded = lambda busy=busy: busy
    out[busy] = [f(x, w) for x, w in pairs
                 for f in (lambda x, w: nat.linear(x, w, None),
                           lambda x, w: nat.matmul(x, np.ascontiguousarray(w.T)))]
print(_provider.choose(), all(np.array_equal(a, b) for a, b in zip(out[False], out[True])))
"""


@pytest.mark.parametrize("blas", ["openblas", "mkl"])
def test_a_mid_sized_product_does_not_depend_on_the_load(blas):
    if blas == "mkl" and _provider.find_mkl() is None:
        pytest.skip("the mkl package is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["TORCIA_CPU_BLAS"] = blas
    out = subprocess.run([sys.executable, "-c", MID_SIZED], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0].lower().startswith("openblas" if blas == "openblas" else "intel")
    assert out[-1] == "True"


def test_the_kernels_start_on_torcias_default_thread_count():
    # torcia's default (the CPU count) is never passed on (only an explicit count is):
    # the extension starts on OpenMP's default, the same count where every CPU is ours
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) != os.cpu_count():
        pytest.skip("OpenMP's default is the CPUs this process may run on, not all")
    code = ("import torcia; from torcia_cpu import _native; "
            "torcia.nn.functional.conv2d(torcia.randn(2, 3, 8, 8), torcia.randn(4, 3, 3, 3)); "
            "print(torcia.get_num_threads(), _native.get_num_threads())")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == out[1] == str(os.cpu_count() or 1)


def test_an_explicit_openblas_thread_count_is_left_alone():
    code = "from torcia_cpu import _blas; print(_blas._setter is None)"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "True"


LSTM_SHAPES = [(1, 1), (3, 5), (4, 128)]  # (rows, hidden): odd sizes leave vector tails


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, hidden", LSTM_SHAPES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_lstm_cell_and_backward(dtype, rows, hidden, contiguous):
    # large pre-activations reach the clamped ends of the native exp
    gates = _rand((rows, 4 * hidden), dtype, contiguous) * 6
    gates[0, 0] = 200
    c = _rand((rows, hidden), dtype, contiguous)
    _same(NAT.lstm_cell(gates, c), REF.lstm_cell(gates, c), dtype)
    _, c_new, act = REF.lstm_cell(gates, c)
    gh, gc = _rand((rows, hidden), dtype, contiguous), _rand((rows, hidden), dtype)
    for a, b in ((gh, gc), (None, gc), (gh, None)):
        _same(NAT.lstm_cell_backward(a, b, act, c, c_new),
              REF.lstm_cell_backward(a, b, act, c, c_new), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstm_layer_and_backward(dtype):
    steps, rows, hidden = 5, 3, 7
    x_gates = _rand((steps, rows, 4 * hidden), dtype)
    h0, c0 = _rand((rows, hidden), dtype), _rand((rows, hidden), dtype, contiguous=False)
    w = _rand((hidden, 4 * hidden), dtype) * 0.3
    out, cs, acts = NAT.lstm_layer(x_gates, h0, c0, w)
    _same((out, cs, acts), REF.lstm_layer(x_gates, h0, c0, w), dtype)
    g_out, g_cs = _rand(out.shape, dtype), _rand(cs.shape, dtype)
    for a, b in ((g_out, g_cs), (g_out, None), (None, g_cs)):
        _same(NAT.lstm_layer_backward(a, b, acts, cs, out, h0, c0, w),
              REF.lstm_layer_backward(a, b, acts, cs, out, h0, c0, w), dtype)


def test_lstm_cell_in_other_dtypes_falls_back_to_the_reference():
    gates, c = _rand((2, 8), np.float16), _rand((2, 2), np.float16)
    _same(NAT.lstm_cell(gates, c), REF.lstm_cell(gates, c), np.float32)


def test_gradients_through_native_conv_and_linear_pass_gradcheck(monkeypatch, registered):
    import torcia.nn.functional as F
    from torcia.autograd import gradcheck, gradgradcheck

    used = []
    for name in ("conv2d", "conv2d_weight", "conv2d_transpose", "linear"):
        fn = getattr(_native, name)
        monkeypatch.setattr(_native, name, lambda *a, _fn=fn, _name=name: (
            used.append(_name), _fn(*a))[1])
    x = torcia.randn(3, 2, 6, 5, dtype=torcia.float64, requires_grad=True)
    w = torcia.randn(4, 2, 3, 2, dtype=torcia.float64, requires_grad=True)
    b = torcia.randn(4, dtype=torcia.float64, requires_grad=True)
    for kw in (dict(stride=2, padding=1), dict(stride=(1, 2), padding=(2, 0), dilation=(2, 1))):
        gradcheck(lambda x, w, b, kw=kw: F.conv2d(x, w, b, **kw), (x, w, b))
    # conv_transpose2d and the gradients of the gradients (conv_weight's derivative)
    wt = torcia.randn(2, 3, 3, 3, dtype=torcia.float64, requires_grad=True)
    gradcheck(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
              (x, wt))
    gradgradcheck(lambda x, w: F.conv2d(x, w, padding=1), (x, w))
    lw = torcia.randn(5, 6, dtype=torcia.float64, requires_grad=True)
    lb = torcia.randn(5, dtype=torcia.float64, requires_grad=True)
    h = torcia.randn(2, 3, 6, dtype=torcia.float64, requires_grad=True)
    gradcheck(lambda h, w, b: F.linear(h, w, b), (h, lw, lb))
    assert {"conv2d", "conv2d_weight", "conv2d_transpose", "linear"} <= set(used)


def test_cross_entropy_gradients_through_the_native_rows_pass_gradcheck():
    from torcia.autograd import gradcheck

    x = torcia.randn(5, 6, dtype=torcia.float64, requires_grad=True)
    target = torcia.tensor([0, 5, -100, 2, 2])
    weight = torcia.rand(6, dtype=torcia.float64) + 0.5
    for kw in ({}, {"weight": weight}, {"reduction": "sum"}, {"reduction": "none"}):
        assert gradcheck(lambda z, kw=kw: torcia.nn.functional.cross_entropy(z, target, **kw),
                         (x,))
