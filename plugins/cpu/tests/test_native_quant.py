"""torcia-cpu's int8/int4 kernels (``csrc/quant.cpp``) against torcia-ao's NumPy reference
kernels (the op records' ``kernel``), on generated shapes, offsets and options.

Integer products are exact on both sides; what may differ is the float epilogue's order
of operations (a few ulps) and, for uint8 outputs, one step where a value lands on a
rounding tie.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
from torcia_cpu import _native, _provider
from torcia_cpu.quant import QuantKernels

import torcia
from torcia.library import get_op

pytest.importorskip("torcia.ao", reason="the quantized ops are torcia-ao's")

RNG = np.random.default_rng(7)
KERNELS = QuantKernels()


def reference(op):
    return get_op(op).kernel


@pytest.fixture(scope="module")
def int8_gemm():
    torcia.ones(1) + 1  # the plugin's first kernel loads the libraries
    _provider.choose()
    if not _native.has_int8_gemm():
        pytest.skip("no integer GEMM loaded (torcia-cpu's int8 extra or MKL)")
    return _native.int8_library()


SHAPES = [(1, 1, 1), (7, 13, 5), (64, 64, 33), (3, 300, 70)]


@pytest.mark.parametrize("m, k, n", SHAPES)
def test_quantized_linear(int8_gemm, m, k, n):
    for zp, bias, relu, out in itertools.product((0, 1, 128, 200, 255), (False, True),
                                                 (False, True), (None, 0.07)):
        xq = RNG.integers(0, 256, (m, k)).astype(np.uint8)
        wq = RNG.integers(-128, 128, (n, k)).astype(np.int8)
        scales = RNG.uniform(1e-3, 1e-2, n).astype(np.float32)
        b = RNG.standard_normal(n).astype(np.float32) if bias else None
        kw = dict(x_scale=0.03, x_zero_point=zp, out_scale=out, out_zero_point=17, relu=relu)
        got = KERNELS.quantized_linear(xq, wq, scales, b, **kw)
        want = reference("quantized_linear")(xq, wq, scales, b, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape
        if out is None:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("per_row, reduce_range", [(True, False), (False, True),
                                                   (False, False)])
def test_linear_dynamic(int8_gemm, m, k, n, per_row, reduce_range):
    x = (RNG.standard_normal((m, k)) * RNG.uniform(0.1, 10)).astype(np.float32)
    wq = RNG.integers(-127, 128, (n, k)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, n).astype(np.float32)
    kw = dict(per_row=per_row, reduce_range=reduce_range)
    # a bias per output, and one per output element (what the dynamic LSTM passes: its
    # input projection), broadcast over the leading dimension
    for b in (RNG.standard_normal(n), RNG.standard_normal((m, n)),
              RNG.standard_normal((1, n))):
        b = b.astype(np.float32)
        got = KERNELS.linear_dynamic(x, wq, scales, b, **kw)
        want = reference("linear_dynamic")(x, wq, scales, b, **kw)
        assert got.shape == want.shape == (m, n)
        # one activation step of difference at a rounding tie moves a product by step * |w|
        step = np.abs(x).max() / 127 * 2
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=step * 128 * scales.max())
        assert np.mean(np.isclose(got, want, rtol=1e-4, atol=1e-4)) > 0.95


@pytest.mark.parametrize("stride, padding, dilation, groups", [
    ((1, 1), ((1, 1), (1, 1)), (1, 1), 1), ((2, 2), ((3, 3), (3, 3)), (1, 1), 1),
    ((2, 1), ((0, 2), (1, 0)), (2, 1), 1), ((1, 1), ((0, 0), (0, 0)), (1, 1), 1),
    ((3, 2), ((2, 1), (0, 3)), (1, 3), 2), ((1, 1), ((1, 1), (1, 1)), (1, 1), 4),
    ((2, 2), ((0, 0), (0, 0)), (1, 1), 1),
])
@pytest.mark.parametrize("kernel", [(3, 3), (1, 1), (2, 3)])
def test_quantized_conv2d(int8_gemm, stride, padding, dilation, groups, kernel):
    # the same integers as the reference (and torch's quantized convolution): exact sums,
    # the epilogue in the reference's order of operations; per-channel scales, zero points
    # 0 and not, with and without bias and ReLU, uint8 and float outputs
    xq = RNG.integers(0, 256, (3, 4, 9, 8)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (8, 4 // groups, *kernel)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, 8).astype(np.float32)
    for zp, b, out_scale, relu in itertools.product(
            (0, 131), (None, RNG.standard_normal(8).astype(np.float32)), (None, 0.05, 0.31),
            (False, True)):
        kw = dict(x_scale=0.02, x_zero_point=zp, stride=stride, padding=padding,
                  dilation=dilation, groups=groups, out_scale=out_scale, out_zero_point=9,
                  relu=relu)
        got = KERNELS.quantized_conv2d(xq, wq, scales, b, **kw)
        want = reference("quantized_conv2d")(xq, wq, scales, b, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_quantized_conv2d_rounds_halves_as_the_reference(int8_gemm):
    # sums * 31.5 / 63.0 lands every odd sum on a half, which rint takes to the even
    # neighbour; the product by the inverse of 63.0 (inexact) misses half of them
    xq = RNG.integers(0, 256, (2, 64, 5, 5)).astype(np.uint8)
    wq = np.zeros((64, 64, 1, 1), np.int8)
    wq[np.arange(64), np.arange(64), 0, 0] = RNG.choice([-1, 1, 3], 64)
    for relu, zp in itertools.product((False, True), (0, 128)):
        kw = dict(x_scale=31.5, x_zero_point=zp, out_scale=63.0, out_zero_point=100,
                  relu=relu)
        got = KERNELS.quantized_conv2d(xq, wq, np.ones(64, np.float32), None, **kw)
        want = reference("quantized_conv2d")(xq, wq, np.ones(64, np.float32), None, **kw)
        np.testing.assert_array_equal(got, want)


def _conv_matches_reference(xq, wq, scales, **kw):
    np.testing.assert_array_equal(KERNELS.quantized_conv2d(xq, wq, scales, None, **kw),
                                  reference("quantized_conv2d")(xq, wq, scales, None, **kw))


def test_quantized_conv2d_weights_changed_in_place(int8_gemm):
    # the filters packed for oneDNN are kept per weight array: a change in place is seen
    xq = RNG.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (5, 3, 3, 3)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, 5).astype(np.float32)
    for _ in range(2):
        _conv_matches_reference(xq, wq, scales, x_scale=0.02, x_zero_point=7,
                                padding=((1, 1), (1, 1)), out_scale=0.05)
        wq[...] = RNG.integers(-128, 128, wq.shape)


def test_quantized_conv2d_frozen_weights_are_packed_once_per_owner(int8_gemm):
    # read-only weights over memory a read-only array owns are packed once while that array
    # lives (the kernel holds it): one freed and another made in its place are packed anew
    xq = RNG.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8)
    scales = RNG.uniform(1e-3, 1e-2, 5).astype(np.float32)
    for _ in range(3):
        wq = RNG.integers(-128, 128, (5, 3, 3, 3)).astype(np.int8)
        wq.flags.writeable = False
        for view in (wq, wq[:, :, None][:, :, 0]):  # the array, and a read-only view of it
            _conv_matches_reference(xq, view, scales, x_scale=0.02, x_zero_point=7,
                                    padding=((1, 1), (1, 1)), out_scale=0.05)
        del wq, view


def _channels_last(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def test_quantized_conv2d_takes_and_gives_channels_last(int8_gemm):
    # PyTorch's quantized convolutions return channels-last images; so do these, and they
    # take them (as C-contiguous ones) without a copy to C order first
    xq = RNG.integers(0, 256, (3, 5, 7, 6)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (4, 5, 3, 3)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, 4).astype(np.float32)
    kw = dict(x_scale=0.02, x_zero_point=3, stride=(2, 1), padding=((1, 1), (0, 1)),
              out_scale=0.05, out_zero_point=4)
    for image in (xq, _channels_last(xq), xq[:, :, ::-1]):
        got = KERNELS.quantized_conv2d(image, wq, scales, None, **kw)
        assert got.transpose(0, 2, 3, 1).flags.c_contiguous
        np.testing.assert_array_equal(
            got, reference("quantized_conv2d")(image, wq, scales, None, **kw))
    with pytest.raises(RuntimeError, match="C-contiguous or channels-last"):
        _native.qconv2d(xq[:, :, ::2], 3, wq, 0.02, scales, None, [1, 1], [0, 0, 0, 0],
                        [1, 1], 1, 0.05, 4, False)


MAX_POOLS = [((3, 3), (2, 2), (1, 1), (1, 1), False), ((3, 2), (2, 1), (1, 0), (1, 2), True),
             ((2, 2), (2, 2), (0, 0), (1, 1), True), ((1, 1), (3, 2), (0, 0), (1, 1), False),
             ((2, 3), (1, 2), (1, 1), (2, 1), False)]


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", MAX_POOLS)
def test_quantized_max_pool2d(kernel, stride, padding, dilation, ceil_mode):
    kw = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
              ceil_mode=ceil_mode)
    xq = RNG.integers(0, 256, (2, 6, 9, 8)).astype(np.uint8)
    want = reference("quantized_max_pool2d")(xq, **kw)
    for image, channels_last in ((xq, False), (_channels_last(xq), True)):
        got = KERNELS.quantized_max_pool2d(image, **kw)
        assert got.transpose(0, 2, 3, 1).flags.c_contiguous == channels_last
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(KERNELS.quantized_max_pool2d(xq[0], **kw), want[0])
    np.testing.assert_array_equal(KERNELS.quantized_max_pool2d(xq.view(np.int8), **kw),
                                  reference("quantized_max_pool2d")(xq.view(np.int8), **kw))


def test_quantized_max_pool2d_validates_its_window():
    xq = RNG.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    for args, match in ((([3, 3], [1, 1], [2, 2], [1, 1]), "at most half"),
                        (([3, 3], [0, 1], [0, 0], [1, 1]), "must be positive"),
                        (([7, 7], [1, 1], [0, 0], [1, 1]), "output would be empty"),
                        (([3], [1, 1], [0, 0], [1, 1]), "need 2 values")):
        with pytest.raises(RuntimeError, match=match):
            _native.qmax_pool2d(xq, *args, False)
    with pytest.raises(RuntimeError, match="expected uint8"):
        _native.qmax_pool2d(xq.astype(np.int32), [2, 2], [2, 2], [0, 0], [1, 1], False)


def test_quantized_add_keeps_channels_last():
    a, b = (RNG.integers(0, 256, (2, 5, 4, 3)).astype(np.uint8) for _ in range(2))
    kw = dict(a_scale=0.05, a_zero_point=120, b_scale=0.02, b_zero_point=3, out_scale=0.07,
              out_zero_point=60, relu=True)
    want = KERNELS.quantized_add(a, b, **kw)
    got = KERNELS.quantized_add(_channels_last(a), _channels_last(b), **kw)
    assert got.transpose(0, 2, 3, 1).flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(KERNELS.quantized_add(_channels_last(a), b, **kw), want)


def test_int8_linear_weights_changed_in_place_and_batch_sizes(int8_gemm):
    # the weights packed for oneDNN's matmul are kept per weight array and batch size: a
    # change in place is seen, and each batch size gives the sums a fresh array gives
    wq = RNG.integers(-128, 128, (6, 9)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, 6).astype(np.float32)
    for m in (4, 1, 4, 7, 4):
        xq = RNG.integers(0, 256, (m, 9)).astype(np.uint8)
        row = np.full(m, 0.02, np.float32)
        got = _native.int8_linear(xq, 3, wq, row, scales, None, -1.0, 0, False)
        want = _native.int8_linear(xq, 3, wq.copy(), row, scales, None, -1.0, 0, False)
        np.testing.assert_array_equal(got, want)
        acc = (xq.astype(np.int64) - 3) @ wq.astype(np.int64).T
        np.testing.assert_allclose(got, acc * 0.02 * scales, rtol=1e-6)
        wq[...] = RNG.integers(-128, 128, wq.shape)


def test_quantized_conv2d_batch_sizes_share_weights(int8_gemm):
    wq = RNG.integers(-128, 128, (6, 2, 3, 3)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, 6).astype(np.float32)
    for n in (1, 5, 1, 2):
        xq = RNG.integers(0, 256, (n, 2, 7, 7)).astype(np.uint8)
        _conv_matches_reference(xq, wq, scales, x_scale=0.02, x_zero_point=3, stride=(2, 2),
                                out_scale=0.05)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_quantized_conv2d_matches_torch(int8_gemm):
    import torch

    torch.backends.quantized.engine = "x86"
    # seeded: on 2 of 120 unseeded draws torch's requantization rounds a value at a tie to
    # the other side of the reference (one step), which this exact comparison would flag
    torch.manual_seed(0)
    x = torch.randn(2, 8, 10, 10)
    w = torch.randn(16, 8, 3, 3)
    b = torch.randn(16)
    xq = torch.quantize_per_tensor(x, 0.03, 100, torch.quint8)
    w_scales = (w.abs().amax((1, 2, 3)) / 127).double()
    wq = torch.quantize_per_channel(w, w_scales, torch.zeros(16, dtype=torch.long), 0,
                                    torch.qint8)
    for relu in (False, True):
        packed = torch.ops.quantized.conv2d_prepack(wq, b, [2, 1], [1, 1], [1, 1], 1)
        op = torch.ops.quantized.conv2d_relu if relu else torch.ops.quantized.conv2d
        want = op(xq, packed, 0.07, 11).int_repr().numpy()
        got = KERNELS.quantized_conv2d(
            xq.int_repr().numpy(), wq.int_repr().numpy(),
            wq.q_per_channel_scales().float().numpy(), b.numpy(), x_scale=0.03,
            x_zero_point=100, stride=(2, 1), padding=((1, 1), (1, 1)), out_scale=0.07,
            out_zero_point=11, relu=relu)
        np.testing.assert_array_equal(got, want)


def test_quantize_and_dequantize_are_exact():
    for shape in [(0,), (5,), (3, 1000), (2, 3, 4)]:
        x = (RNG.standard_normal(shape) * 5).astype(np.float32)
        x.flat[:3] = [0.25, 0.75, -0.25][:x.size] if x.size >= 3 else x.flat[:3]
        for dtype, qmin, qmax, zp in (("quint8", 0, 255, 7), ("qint8", -128, 127, -3),
                                      ("quint8", 0, 127, 0)):
            kw = dict(scale=0.1, zero_point=zp, qmin=qmin, qmax=qmax, dtype=dtype)
            q = KERNELS.quantize_per_tensor(x, **kw)
            np.testing.assert_array_equal(q, reference("quantize_per_tensor")(x, **kw))
            np.testing.assert_array_equal(
                KERNELS.dequantize_per_tensor(q, scale=0.1, zero_point=zp),
                reference("dequantize_per_tensor")(q, scale=0.1, zero_point=zp))
    strided = np.arange(12, dtype=np.float32).reshape(3, 4).T
    np.testing.assert_array_equal(
        KERNELS.quantize_per_tensor(strided, scale=0.5, zero_point=0, qmin=0, qmax=255,
                                    dtype="quint8"), np.rint(strided * 2))


def test_quantized_add():
    a = RNG.integers(0, 256, (4, 5, 6)).astype(np.uint8)
    b = RNG.integers(0, 256, (4, 5, 6)).astype(np.uint8)
    for relu in (False, True):
        kw = dict(a_scale=0.05, a_zero_point=120, b_scale=0.02, b_zero_point=3,
                  out_scale=0.07, out_zero_point=60, relu=relu)
        got = KERNELS.quantized_add(a, b, **kw)
        want = reference("quantized_add")(a, b, **kw)
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


@pytest.mark.parametrize("m, k, n", SHAPES + [(5, 129, 200)])
def test_weight_only_products(m, k, n):
    x = RNG.standard_normal((m, k)).astype(np.float32)
    wq = RNG.integers(-127, 128, (n, k)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(KERNELS.linear_weight_int8(x, wq, scales, b),
                               reference("linear_weight_int8")(x, wq, scales, b),
                               rtol=1e-4, atol=1e-5)
    group = 32
    groups = -(-k // group)
    packed = RNG.integers(0, 256, (n, (k + 1) // 2)).astype(np.uint8)
    s4 = RNG.uniform(1e-3, 1e-2, (n, groups)).astype(np.float32)
    z4 = RNG.integers(0, 16, (n, groups)).astype(np.float32)
    np.testing.assert_allclose(
        KERNELS.linear_weight_int4(x, packed, s4, z4, None, group_size=group),
        reference("linear_weight_int4")(x, packed, s4, z4, None, group_size=group),
        rtol=1e-4, atol=1e-5)


def test_native_entry_points_name_bad_arguments(int8_gemm):
    u8, i8, f32 = np.zeros((2, 3), np.uint8), np.zeros((4, 3), np.int8), np.ones(2, np.float32)
    with pytest.raises(RuntimeError, match="int8_linear: wq has dtype"):
        _native.int8_linear(u8, 0, i8.astype(np.uint8), f32, np.ones(4, np.float32), None,
                            -1.0, 0, False)
    with pytest.raises(RuntimeError, match="int8_linear: xq has shape"):
        _native.int8_linear(u8, 0, np.zeros((4, 5), np.int8), f32, np.ones(4, np.float32),
                            None, -1.0, 0, False)
    with pytest.raises(RuntimeError, match="col_scale has shape"):
        _native.int8_linear(u8, 0, i8, f32, np.ones(3, np.float32), None, -1.0, 0, False)
    with pytest.raises(RuntimeError, match="a_offset must be in 0..255"):
        _native.int8_linear(u8, 300, i8, f32, np.ones(4, np.float32), None, -1.0, 0, False)
    with pytest.raises(RuntimeError, match=r"a 2-d bias must have the output's shape \(2, 4\), "
                                            r"got \(4, 2\)"):
        _native.int8_linear(u8, 0, i8, f32, np.ones(4, np.float32), np.ones((4, 2), np.float32),
                            -1.0, 0, False)
    # (the error, then what changes from a valid 3x3 convolution of 2 channels to 4)
    for match, change in [
        ("wq has shape", dict(w=np.zeros((4, 5, 3, 3), np.int8))),
        ("stride must be positive", dict(stride=[0, 1])),
        # no group; wq's channels times 2 is not the input's 2; 2 channels in 3 groups
        *[(r"wq has shape \(4, 2, 3, 3\) for an input of 2 channels in -?\d group",
           dict(groups=g)) for g in (0, 2, 3)],
        ("the output would be empty", dict(x=np.zeros((1, 2, 2, 2), np.uint8))),
        ("zero points must be in 0..255", dict(zp=256)),
    ]:
        a = dict(x=np.zeros((1, 2, 4, 4), np.uint8), zp=0, w=np.zeros((4, 2, 3, 3), np.int8),
                 stride=[1, 1], groups=1) | change
        with pytest.raises(RuntimeError, match="qconv2d: " + match):
            _native.qconv2d(a["x"], a["zp"], a["w"], 1.0, np.ones(4, np.float32), None,
                            a["stride"], [0, 0, 0, 0], [1, 1], a["groups"], -1.0, 0, False)
    with pytest.raises(RuntimeError, match="linear_w4: packed has shape"):
        _native.linear_w4(np.ones((2, 8), np.float32), np.zeros((3, 3), np.uint8),
                          np.ones((3, 1), np.float32), np.zeros((3, 1), np.float32), 8, None)
    # a range the dtype cannot hold, or upside down
    for qmin, qmax, signed in ((0, 256, False), (-1, 255, False), (-129, 127, True),
                               (0, 128, True), (10, 9, False)):
        with pytest.raises(RuntimeError, match="quantize_tensor: qmin and qmax must be in"):
            _native.quantize_tensor(np.ones(3, np.float32), 0.1, 0, qmin, qmax, signed)


def test_quantized_conv2d_float_epilogue_is_exact_near_halves(int8_gemm):
    # the uint8 epilogue computes in float and again as the reference where a value may
    # round otherwise: quotients a hair off a half (0.1 / fl32(0.2) is not 1/2), biases that
    # cancel most of the sum, scales whose quotients are inexact, values past the clamps
    xq = RNG.integers(0, 256, (2, 16, 8, 16)).astype(np.uint8)
    wq = np.zeros((16, 16, 1, 1), np.int8)
    wq[np.arange(16), np.arange(16), 0, 0] = RNG.choice([-3, -1, 1, 2, 5], 16)
    cases = [
        (0.1, np.ones(16, np.float32), None, 0.2, 0),
        (0.1, np.ones(16, np.float32), np.full(16, -12.75, np.float32), 0.2, 128),
        (0.01, RNG.uniform(0.5, 2.0, 16).astype(np.float32),
         RNG.standard_normal(16).astype(np.float32), 0.0123, 77),
        (1.0 / 3, np.full(16, 3.0, np.float32), np.full(16, 0.5, np.float32), 1.0, 0),
        (0.5, np.ones(16, np.float32), None, 1e-3, 200),
        (1e-30, np.ones(16, np.float32), None, 1e-35, 3),
    ]
    for x_scale, scales, b, out_scale, zp in cases:
        for relu in (False, True):
            kw = dict(x_scale=x_scale, x_zero_point=zp, out_scale=out_scale,
                      out_zero_point=100, relu=relu)
            np.testing.assert_array_equal(
                KERNELS.quantized_conv2d(xq, wq, scales, b, **kw),
                reference("quantized_conv2d")(xq, wq, scales, b, **kw))
    # random 3x3 convolutions over many values: every integer as the reference's
    xq = RNG.integers(0, 256, (4, 32, 16, 16)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (32, 32, 3, 3)).astype(np.int8)
    for _ in range(4):
        scales = RNG.uniform(1e-3, 1e-2, 32).astype(np.float32)
        b = RNG.standard_normal(32).astype(np.float32)
        kw = dict(x_scale=float(RNG.uniform(0.005, 0.05)), x_zero_point=int(RNG.integers(256)),
                  padding=((1, 1), (1, 1)), out_scale=float(RNG.uniform(0.5, 3.0)),
                  out_zero_point=int(RNG.integers(256)), relu=bool(RNG.integers(2)))
        np.testing.assert_array_equal(KERNELS.quantized_conv2d(xq, wq, scales, b, **kw),
                                      reference("quantized_conv2d")(xq, wq, scales, b, **kw))
