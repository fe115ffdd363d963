"""torcia-cpu's int8/int4 kernels (``csrc/quant.cpp``) against torcia-ao's NumPy reference
kernels (the op records' ``kernel``), on generated shapes, offsets and options.

Integer products are exact on both sides; what may differ is the float epilogue's order
of operations (a few ulps) and, for uint8 outputs, one step where a value lands on a
rounding tie.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("stride, padding, dilation", [
    ((1, 1), ((1, 1), (1, 1)), (1, 1)), ((2, 2), ((3, 3), (3, 3)), (1, 1)),
    ((2, 1), ((0, 2), (1, 0)), (2, 1)),
])
def test_quantized_conv2d(int8_gemm, stride, padding, dilation):
    xq = RNG.integers(0, 256, (3, 4, 9, 8)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (6, 4, 3, 3)).astype(np.int8)
    scales = RNG.uniform(1e-3, 1e-2, 6).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    for out_scale, relu in ((None, False), (0.05, True), (0.05, False)):
        kw = dict(x_scale=0.02, x_zero_point=131, stride=stride, padding=padding,
                  dilation=dilation, out_scale=out_scale, out_zero_point=9, relu=relu)
        got = KERNELS.quantized_conv2d(xq, wq, scales, b, **kw)
        want = reference("quantized_conv2d")(xq, wq, scales, b, **kw)
        if out_scale is None:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    # grouped convolutions go to the reference
    grouped = RNG.integers(-128, 128, (6, 2, 3, 3)).astype(np.int8)
    kw = dict(x_scale=0.02, x_zero_point=3, groups=2)
    np.testing.assert_array_equal(KERNELS.quantized_conv2d(xq, grouped, scales, None, **kw),
                                  reference("quantized_conv2d")(xq, grouped, scales, None, **kw))


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
    with pytest.raises(RuntimeError, match="qconv2d: wq has shape"):
        _native.qconv2d(np.zeros((1, 2, 4, 4), np.uint8), 0, np.zeros((3, 5, 3, 3), np.int8),
                        1.0, np.ones(3, np.float32), None, [1, 1], [0, 0, 0, 0], [1, 1], -1.0,
                        0, False)
    with pytest.raises(RuntimeError, match="qconv2d: stride must be positive"):
        _native.qconv2d(np.zeros((1, 2, 4, 4), np.uint8), 0, np.zeros((3, 2, 3, 3), np.int8),
                        1.0, np.ones(3, np.float32), None, [0, 1], [0, 0, 0, 0], [1, 1], -1.0,
                        0, False)
    with pytest.raises(RuntimeError, match="linear_w4: packed has shape"):
        _native.linear_w4(np.ones((2, 8), np.float32), np.zeros((3, 3), np.uint8),
                          np.ones((3, 1), np.float32), np.zeros((3, 1), np.float32), 8, None)
