"""Native kernels of torcia-ao's quantized ops (``csrc/quant.cpp``).

The ops are defined by torcia-ao (its NumPy reference kernels define them); this plugin
registers faster kernels for the same names, as for any op. The int8 products run on
oneDNN's integer GEMM and convolutions on its convolution primitive (the ``int8`` extra),
or on MKL's integer GEMM where oneDNN is missing (see ``_provider``); inputs they do not
cover (another dtype, grouped convolutions without oneDNN, no integer GEMM) go to the
op's reference kernel (its record's, ``torcia.library.get_op``).
"""

from __future__ import annotations

import numpy as np

from torcia.library import get_op
from torcia_cpu import _native, _provider
from torcia_cpu.kernels import _product

_U8, _I8, _F32 = np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.float32)


def _reference(op):
    """The reference kernel of ``op`` (a torcia-ao op: its record holds it)."""
    return get_op(op).kernel


def _int8_gemm() -> bool:
    if _native.has_int8_gemm():  # loaded: what follows would change nothing
        return True
    _provider.choose()  # MKL is loaded by the plugin's first kernel; this may be it
    return _native.has_int8_gemm()


def _per_channel(v, n: int):
    """``v`` (one value, or one per channel) as ``n`` contiguous float32s: ``v`` itself
    where it is that already (a module's scales, on every call)."""
    if v.__class__ is np.ndarray and v.dtype == _F32 and v.shape == (n,) and (
            v.flags.c_contiguous):
        return v
    return np.ascontiguousarray(np.broadcast_to(v, (n,)), dtype=_F32)


def _bias(b):
    return None if b is None else np.ascontiguousarray(b, dtype=np.float32)


def _is(a, dtype) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == dtype


def _image(x):
    """A 4-d array as the image kernels take it: C-contiguous or channels-last (the layout
    of their outputs, as of PyTorch's quantized convolutions), copied to C order otherwise."""
    if x.flags.c_contiguous or x.transpose(0, 2, 3, 1).flags.c_contiguous:
        return x
    return np.ascontiguousarray(x)


class QuantKernels:
    """The kernels, by op name (each with the reference's signature)."""

    def quantize_per_tensor(self, x, *, scale, zero_point, qmin, qmax, dtype):
        if _is(x, _F32) and dtype in ("quint8", "qint8"):
            return _native.quantize_tensor(np.ascontiguousarray(x), scale, zero_point, qmin,
                                           qmax, dtype == "qint8")
        return _reference("quantize_per_tensor")(
            x, scale=scale, zero_point=zero_point, qmin=qmin, qmax=qmax, dtype=dtype)

    def dequantize_per_tensor(self, q, *, scale, zero_point):
        if _is(q, _U8) or _is(q, _I8):
            return _native.dequantize_tensor(np.ascontiguousarray(q), scale, zero_point)
        return _reference("dequantize_per_tensor")(q, scale=scale, zero_point=zero_point)

    def quantized_linear(self, xq, wq, w_scales, bias, *, x_scale, x_zero_point,
                         out_scale=None, out_zero_point=0, relu=False):
        if _is(xq, _U8) and _is(wq, _I8) and wq.ndim == 2 and _int8_gemm():
            x2 = np.ascontiguousarray(xq.reshape(-1, xq.shape[-1]))
            m = x2.shape[0]
            out = _product(m * wq.shape[0] * wq.shape[1], _native.int8_linear,
                           x2, x_zero_point, np.ascontiguousarray(wq), np.full(m, x_scale, _F32),
                           np.ascontiguousarray(w_scales, dtype=_F32), _bias(bias),
                           -1.0 if out_scale is None else out_scale, out_zero_point, relu,
                           split=False)
            return out.reshape(*xq.shape[:-1], wq.shape[0])
        return _reference("quantized_linear")(
            xq, wq, w_scales, bias, x_scale=x_scale, x_zero_point=x_zero_point,
            out_scale=out_scale, out_zero_point=out_zero_point, relu=relu)

    def quantized_conv2d(self, xq, wq, w_scales, bias, *, x_scale, x_zero_point,
                         stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1,
                         out_scale=None, out_zero_point=0, relu=False):
        if (_is(xq, _U8) and xq.ndim == 4 and _is(wq, _I8) and _int8_gemm()
                and (groups == 1 or _native.has_int8_conv())):
            return _native.qconv2d(
                _image(xq), x_zero_point, np.ascontiguousarray(wq), x_scale,
                _per_channel(w_scales, wq.shape[0]), _bias(bias), stride,
                (*padding[0], *padding[1]), dilation, groups,
                -1.0 if out_scale is None else out_scale, out_zero_point, relu)
        return _reference("quantized_conv2d")(
            xq, wq, w_scales, bias, x_scale=x_scale, x_zero_point=x_zero_point, stride=stride,
            padding=padding, dilation=dilation, groups=groups, out_scale=out_scale,
            out_zero_point=out_zero_point, relu=relu)

    def quantized_max_pool2d(self, xq, *, kernel_size, stride, padding=(0, 0),
                             dilation=(1, 1), ceil_mode=False):
        if _is(xq, _U8) and xq.ndim in (3, 4):
            x4 = _image(xq if xq.ndim == 4 else xq[None])
            out = _native.qmax_pool2d(x4, list(kernel_size), list(stride), list(padding),
                                      list(dilation), ceil_mode)
            return out if xq.ndim == 4 else out[0]
        return _reference("quantized_max_pool2d")(
            xq, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
            ceil_mode=ceil_mode)

    def quantized_add(self, a, b, *, a_scale, a_zero_point, b_scale, b_zero_point,
                      out_scale, out_zero_point, relu=False):
        if _is(a, _U8) and _is(b, _U8) and a.shape == b.shape:
            # elementwise: operands laid out alike (channels-last images) are added in their
            # memory order, and the sum keeps it
            if a.strides != b.strides or not (a.flags.c_contiguous or (
                    a.ndim == 4 and a.transpose(0, 2, 3, 1).flags.c_contiguous)):
                a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
            return _native.qadd(a, b, a_scale, a_zero_point, b_scale, b_zero_point, out_scale,
                                out_zero_point, relu)
        return _reference("quantized_add")(
            a, b, a_scale=a_scale, a_zero_point=a_zero_point, b_scale=b_scale,
            b_zero_point=b_zero_point, out_scale=out_scale, out_zero_point=out_zero_point,
            relu=relu)

    def linear_dynamic(self, x, wq, w_scales, bias, *, per_row=False, reduce_range=True):
        if _is(x, _F32) and _is(wq, _I8) and wq.ndim == 2 and _int8_gemm():
            x2 = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
            q, row_scale, offset = _native.quantize_rows(x2, per_row, reduce_range)
            b = _bias(bias)
            rows = (x2.shape[0], wq.shape[0])
            if b is not None and b.ndim > 1 and b.shape != rows:
                # per output element (the GEMM's epilogue adds it), in the output's shape
                b = np.ascontiguousarray(np.broadcast_to(
                    b, x.shape[:-1] + (wq.shape[0],)).reshape(rows))
            out = _product(x2.shape[0] * wq.shape[0] * wq.shape[1], _native.int8_linear,
                           q, offset, np.ascontiguousarray(wq), row_scale,
                           np.ascontiguousarray(w_scales, dtype=_F32), b, -1.0, 0, False,
                           split=False)
            return out.reshape(*x.shape[:-1], wq.shape[0])
        return _reference("linear_dynamic")(x, wq, w_scales, bias, per_row=per_row,
                                                 reduce_range=reduce_range)

    def linear_weight_int8(self, x, wq, w_scales, bias):
        if _is(x, _F32) and _is(wq, _I8) and wq.ndim == 2:
            x2 = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
            out = _native.linear_w8(x2, np.ascontiguousarray(wq),
                                    np.ascontiguousarray(w_scales, dtype=_F32), _bias(bias))
            return out.reshape(*x.shape[:-1], wq.shape[0])
        return _reference("linear_weight_int8")(x, wq, w_scales, bias)

    def linear_weight_int4(self, x, packed, scales, zeros, bias, *, group_size):
        if _is(x, _F32) and _is(packed, _U8):
            x2 = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
            out = _native.linear_w4(x2, np.ascontiguousarray(packed),
                                    np.ascontiguousarray(scales, dtype=_F32),
                                    np.ascontiguousarray(zeros, dtype=_F32), group_size,
                                    _bias(bias))
            return out.reshape(*x.shape[:-1], packed.shape[0])
        return _reference("linear_weight_int4")(x, packed, scales, zeros, bias,
                                                     group_size=group_size)


#: the ops these kernels serve (defined by torcia-ao; registered whether or not it is
#: installed, where they wait unused)
QUANT_OPS = ("quantize_per_tensor", "dequantize_per_tensor", "quantized_linear",
             "quantized_conv2d", "quantized_max_pool2d", "quantized_add", "linear_dynamic",
             "linear_weight_int8", "linear_weight_int4")
