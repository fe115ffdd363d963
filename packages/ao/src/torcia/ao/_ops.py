"""The quantized ops: their NumPy reference kernels, which define what each computes.

torcia-ao defines them through ``torcia_register_ops`` (``_plugin.py``), so every
quantized module runs them through torcia's dispatch: tracing (torcia.export, the ONNX
exporter) records them like any op, and a device plugin can register faster kernels for
them by name (torcia-cpu does, on MKL's integer GEMM). The reference computes integer
products exactly: int8 x uint8 products summed in float64, whose 53-bit mantissa holds
every int32 sum.

Conventions (PyTorch's on x86, FBGEMM's): quantized values ``q = clamp(rint(x * (1 /
scale) + zero_point), qmin, qmax)`` in float32 (rint: round half to even; the zero point
added before rounding, as FBGEMM's vectorised quantization does), ``x ~ (q - zero_point)
* scale``; weights int8 symmetric (zero point 0), per output channel or per tensor;
activations uint8 affine.
"""

from __future__ import annotations

import numpy as np

_DTYPES = {"quint8": np.uint8, "qint8": np.int8, "qint32": np.int32, "quint4x2": np.uint8}


def _f32(x):
    return np.asarray(x, dtype=np.float32)


def quantize_per_tensor(x, *, scale: float, zero_point: int, qmin: int, qmax: int,
                        dtype: str):
    """``clamp(rint(x * (1 / scale) + zero_point), qmin, qmax)`` as ``dtype``'s integers."""
    inv = np.float32(1.0) / np.float32(scale)
    q = np.rint(_f32(x) * inv + np.float32(zero_point))
    return np.clip(q, qmin, qmax).astype(_DTYPES[dtype])


def dequantize_per_tensor(q, *, scale: float, zero_point: int):
    """``(q - zero_point) * scale`` in float32."""
    return ((q.astype(np.int32) - zero_point).astype(np.float32) * np.float32(scale))


def _along(v, axis, ndim):
    shape = [1] * ndim
    shape[axis] = -1
    return np.asarray(v).reshape(shape)


def quantize_per_channel(x, scales, zero_points, *, axis: int, qmin: int, qmax: int,
                         dtype: str):
    """:func:`quantize_per_tensor` with a scale and zero point per slice along ``axis``."""
    inv = np.float32(1.0) / _f32(scales)
    q = np.rint(_f32(x) * _along(inv, axis, x.ndim) + _along(_f32(zero_points), axis, x.ndim))
    return np.clip(q, qmin, qmax).astype(_DTYPES[dtype])


def dequantize_per_channel(q, scales, zero_points, *, axis: int):
    """:func:`dequantize_per_tensor` with a scale and zero point per slice along ``axis``."""
    centred = q.astype(np.int32) - _along(zero_points, axis, q.ndim).astype(np.int32)
    return centred.astype(np.float32) * _along(_f32(scales), axis, q.ndim)


def choose_qparams(lo: float, hi: float, qmin: int, qmax: int) -> tuple[float, int]:
    """Scale and zero point covering ``[min(lo, 0), max(hi, 0)]`` on ``[qmin, qmax]``,
    as FBGEMM's ``ChooseQuantizationParams`` (what PyTorch's dynamic quantization uses)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / (qmax - qmin)
    if float(np.float32(scale)) == 0.0 or not np.isfinite(1.0 / np.float32(scale)):
        scale = 0.1
    from_min, from_max = qmin - lo / scale, qmax - hi / scale
    err_min, err_max = abs(qmin) + abs(lo / scale), abs(qmax) + abs(hi / scale)
    zero = from_min if err_min < err_max else from_max
    return float(np.float32(scale)), int(min(max(round(zero), qmin), qmax))


def _requantize(out, out_scale, out_zero_point, relu):
    if out_scale is None:
        return np.maximum(out, 0).astype(np.float32) if relu else out.astype(np.float32)
    q = np.rint(out.astype(np.float32) / np.float32(out_scale)) + out_zero_point
    lo = out_zero_point if relu else 0
    return np.clip(q, lo, 255).astype(np.uint8)


def _int_product(a, b_t):
    """``a @ b_t.T`` exactly, for integer arrays (float64 holds every int32 sum)."""
    return a.astype(np.float64) @ b_t.astype(np.float64).T


def quantized_linear(xq, wq, w_scales, bias, *, x_scale: float, x_zero_point: int,
                     out_scale: float | None = None, out_zero_point: int = 0,
                     relu: bool = False):
    """A linear layer on uint8 ``xq`` (…, K) and int8 ``wq`` (N, K) with a scale per
    output channel: ``(xq - x_zero_point) @ wq.T * (x_scale * w_scales) + bias``,
    requantized to uint8 at ``out_scale``/``out_zero_point`` (float32 when ``out_scale`` is
    None), after a ReLU when ``relu``."""
    lead = xq.shape[:-1]
    x2 = xq.reshape(-1, xq.shape[-1]).astype(np.int32) - x_zero_point
    acc = _int_product(x2, wq)
    out = acc * (np.float64(x_scale) * _f32(w_scales).astype(np.float64))
    if bias is not None:
        out = out + bias
    return _requantize(out, out_scale, out_zero_point, relu).reshape(*lead, wq.shape[0])


def _conv_out_size(size, kernel, stride, padding, dilation):
    """The output sizes of a convolution of ``size`` (one per spatial dimension);
    ``padding`` is a (low, high) pair per dimension."""
    return tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                 for n, k, s, (lo, hi), d in zip(size, kernel, stride, padding, dilation))


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _pairs(v):
    return _tuple(v, 2)


def _padding(p, n=2):
    return tuple(x if isinstance(x, (tuple, list)) else (x, x) for x in _tuple(p, n))


def _int_conv(xc, wq, stride, padding, dilation, groups):
    """The integer accumulators of an N-d convolution, exactly (float64): ``xc`` (N, C,
    *S) holds centred input values (``xq - x_zero_point``, so that padding with 0 pads
    with the quantized 0.0), ``wq`` (O, C / groups, *K). Returns (N, O, *OS)."""
    padded = np.pad(xc.astype(np.float64), ((0, 0), (0, 0), *padding))
    out = _conv_out_size(xc.shape[2:], wq.shape[2:], stride, padding, dilation)
    o, cg = wq.shape[:2]
    og = o // groups
    acc = np.zeros((xc.shape[0], o, *out))
    w = wq.astype(np.float64)
    for offset in np.ndindex(*wq.shape[2:]):
        window = padded[(slice(None), slice(None)) + tuple(
            slice(k * d, k * d + s * (n - 1) + 1, s)
            for k, d, s, n in zip(offset, dilation, stride, out))]
        for g in range(groups):
            tap = w[(slice(g * og, (g + 1) * og), slice(None)) + offset]  # (og, cg)
            part = window[:, g * cg:(g + 1) * cg]
            acc[:, g * og:(g + 1) * og] += np.moveaxis(
                np.tensordot(part, tap, axes=([1], [1])), -1, 1)
    return acc


def _conv_requantized(acc, x_scale, w_scales, bias, out_scale, out_zero_point, relu):
    """``acc * (x_scale * w_scales) + bias`` per output channel (axis 1), requantized."""
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    o = acc.shape[1]
    scales = np.broadcast_to(_f32(w_scales), (o,)).astype(np.float64).reshape(shape)
    out = acc * (np.float64(x_scale) * scales)
    if bias is not None:
        out = out + np.asarray(bias, np.float64).reshape(shape)
    return np.ascontiguousarray(_requantize(out, out_scale, out_zero_point, relu))


def quantized_conv(xq, wq, w_scales, bias, *, x_scale: float, x_zero_point: int,
                   stride=1, padding=0, dilation=1, groups: int = 1,
                   out_scale: float | None = None, out_zero_point: int = 0,
                   relu: bool = False):
    """An N-d convolution (1-d, 2-d, 3-d: the weight's rank says) on uint8 ``xq`` (N, C,
    *S) and int8 ``wq`` (O, C / groups, *K), padded with the input's zero point (the
    quantized 0.0); ``padding`` an int, one per dimension or a (low, high) pair per
    dimension. Output as :func:`quantized_linear`'s."""
    nd = wq.ndim - 2
    acc = _int_conv(xq.astype(np.int32) - x_zero_point, wq, _tuple(stride, nd),
                    _padding(padding, nd), _tuple(dilation, nd), groups)
    return _conv_requantized(acc, x_scale, w_scales, bias, out_scale, out_zero_point, relu)


def quantized_conv2d(xq, wq, w_scales, bias, *, x_scale: float, x_zero_point: int,
                     stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1),
                     groups: int = 1, out_scale: float | None = None,
                     out_zero_point: int = 0, relu: bool = False):
    """:func:`quantized_conv` of 2-d images (its own op: the one torcia-cpu runs natively
    and the ONNX exporter writes as a QLinearConv)."""
    return quantized_conv(xq, wq, w_scales, bias, x_scale=x_scale, x_zero_point=x_zero_point,
                          stride=stride, padding=padding, dilation=dilation, groups=groups,
                          out_scale=out_scale, out_zero_point=out_zero_point, relu=relu)


def _transpose_out_size(size, kernel, stride, padding, output_padding, dilation):
    return tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, k, s, p, op, d in
                 zip(size, kernel, stride, padding, output_padding, dilation))


def quantized_conv_transpose(xq, wq, w_scales, bias, *, x_scale: float, x_zero_point: int,
                             stride=1, padding=0, output_padding=0, dilation=1,
                             groups: int = 1, out_scale: float | None = None,
                             out_zero_point: int = 0):
    """An N-d transposed convolution on uint8 ``xq`` (N, C, *S) and int8 ``wq`` (C, O /
    groups, *K): each input element scatters its products with the kernel into the
    output at ``stride`` (integers accumulated exactly, in float64), the border of
    ``padding`` cut off; output as :func:`quantized_linear`'s."""
    nd = wq.ndim - 2
    stride, padding = _tuple(stride, nd), _tuple(padding, nd)
    output_padding, dilation = _tuple(output_padding, nd), _tuple(dilation, nd)
    xc = (xq.astype(np.int32) - x_zero_point).astype(np.float64)
    n, c = xc.shape[:2]
    cg, og = c // groups, wq.shape[1]
    size = xc.shape[2:]
    full = tuple((m - 1) * s + d * (k - 1) + 1 + op for m, k, s, d, op in
                 zip(size, wq.shape[2:], stride, dilation, output_padding))
    acc = np.zeros((n, og * groups, *full))
    w = wq.astype(np.float64)
    for offset in np.ndindex(*wq.shape[2:]):
        place = tuple(slice(k * d, k * d + s * (m - 1) + 1, s)
                      for k, d, s, m in zip(offset, dilation, stride, size))
        for g in range(groups):
            tap = w[(slice(g * cg, (g + 1) * cg), slice(None)) + offset]  # (cg, og)
            part = np.moveaxis(np.tensordot(xc[:, g * cg:(g + 1) * cg], tap, axes=([1], [0])),
                               -1, 1)
            acc[(slice(None), slice(g * og, (g + 1) * og)) + place] += part
    out = _transpose_out_size(size, wq.shape[2:], stride, padding, output_padding, dilation)
    acc = acc[(slice(None), slice(None)) + tuple(slice(p, p + m) for p, m in
                                                  zip(padding, out))]
    return _conv_requantized(acc, x_scale, w_scales, bias, out_scale, out_zero_point, False)


def embedding_byte(wq, scales, zero_points, indices):
    """Rows ``indices`` of uint8 ``wq`` (N, D) with a float scale and zero point per row
    (PyTorch's ``per_channel_affine_float_qparams``), as float32: ``(q - zero_point) *
    scale``."""
    rows = np.asarray(indices, np.int64)
    bad = rows[(rows < 0) | (rows >= wq.shape[0])]
    if bad.size:
        raise RuntimeError(f"Index {int(bad[0])} is out of bounds: the embedding has "
                           f"{wq.shape[0]} rows (range 0 to {wq.shape[0]})")
    q = wq[rows].astype(np.float32)
    return (q - _f32(zero_points)[rows][..., None]) * _f32(scales)[rows][..., None]


def embedding_bag_byte(wq, scales, zero_points, indices, offsets, per_sample_weights, *,
                       include_last_offset: bool = False):
    """The sum of :func:`embedding_byte`'s rows over each bag (bags start at
    ``offsets`` of 1-d ``indices``; each row of 2-d ``indices`` is a bag), each row
    weighted by ``per_sample_weights`` when given; an empty bag sums to zeros."""
    idx = np.asarray(indices, np.int64)
    if idx.ndim == 2:
        # PyTorch makes the offsets of fixed-size bags, then reads them as it reads given
        # ones: with include_last_offset, the last bag's start is taken for the end
        offsets = np.arange(0, idx.size, idx.shape[1], dtype=np.int64)
        idx = idx.reshape(-1)
    elif offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    bounds = np.asarray(offsets, np.int64)
    if not include_last_offset:
        bounds = np.append(bounds, idx.size)
    starts, ends = bounds[:-1], bounds[1:]
    rows = embedding_byte(wq, scales, zero_points, idx)
    if per_sample_weights is not None:
        rows = rows * _f32(per_sample_weights).reshape(-1, 1)
    out = np.zeros((len(starts), wq.shape[1]), np.float32)
    for b, (lo, hi) in enumerate(zip(starts, ends)):
        if hi > lo:
            out[b] = rows[lo:hi].sum(axis=0)
    return out


def quantized_add(a, b, *, a_scale: float, a_zero_point: int, b_scale: float,
                  b_zero_point: int, out_scale: float, out_zero_point: int,
                  relu: bool = False):
    """``a + b`` of two uint8 tensors, requantized (``torch.ops.quantized.add``)."""
    total = dequantize_per_tensor(a, scale=a_scale, zero_point=a_zero_point) + \
        dequantize_per_tensor(b, scale=b_scale, zero_point=b_zero_point)
    return _requantize(total, out_scale, out_zero_point, relu)


def _pooled_size(size, k, stride, pad, dilation, ceil_mode):
    """PyTorch's output size of a max pooling along one dimension: the last window starts
    inside the input or its low padding (with ``ceil_mode`` too)."""
    span = dilation * (k - 1) + 1
    if pad > span // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                           f"pad={pad}, kernel_size={k} and dilation={dilation}")
    room = size + 2 * pad - span + (stride - 1 if ceil_mode else 0)
    out = room // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    if out < 1:
        raise RuntimeError(f"max_pool2d: the output would be empty (input size {size}, "
                           f"window {span}, padding {pad})")
    return out


def quantized_max_pool2d(xq, *, kernel_size, stride, padding=(0, 0), dilation=(1, 1),
                         ceil_mode: bool = False):
    """Max pooling of the integers of (…, H, W) ``xq`` (max commutes with the increasing
    map to the values they stand for, so the quantization parameters stay the input's);
    each window skips what lies outside the input: it takes the dtype's smallest integer
    there, as PyTorch's quantized max pooling. ``kernel_size``, ``stride``, ``padding`` and
    ``dilation``: two values each."""
    h, w = xq.shape[-2:]
    out = [_pooled_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
           zip((h, w), kernel_size, stride, padding, dilation)]
    lowest = np.iinfo(xq.dtype).min
    # enough padding on the high side for the last window of ceil_mode
    high = [max(0, (o - 1) * s + d * (k - 1) + 1 - n - p) for o, s, d, k, n, p in
            zip(out, stride, dilation, kernel_size, (h, w), padding)]
    lead = [(0, 0)] * (xq.ndim - 2)
    padded = np.pad(xq, lead + [(padding[0], high[0]), (padding[1], high[1])],
                    constant_values=lowest)
    best = np.full(xq.shape[:-2] + tuple(out), lowest, xq.dtype)
    for ki, kj in np.ndindex(*kernel_size):
        y, x = ki * dilation[0], kj * dilation[1]
        window = padded[..., y:y + stride[0] * (out[0] - 1) + 1:stride[0],
                        x:x + stride[1] * (out[1] - 1) + 1:stride[1]]
        np.maximum(best, window, out=best)
    return best


def _dynamic_rows(x2, per_row: bool, reduce_range: bool):
    """Quantize activations at run time: uint8 affine over the whole tensor (PyTorch's
    ``quantize_dynamic``, FBGEMM's parameters) or int8 symmetric per row (torchao's
    per-token scheme). Returns (centred integers, scale per row)."""
    if per_row:
        amax = np.abs(x2).max(axis=1) if x2.size else np.zeros(x2.shape[0], np.float32)
        scale = np.where(amax > 0, amax / np.float32(127), np.float32(1)).astype(np.float32)
        q = np.clip(np.rint(x2 / scale[:, None]), -127, 127).astype(np.int32)
        return q, scale
    qmax = 127 if reduce_range else 255
    lo = float(x2.min()) if x2.size else 0.0
    hi = float(x2.max()) if x2.size else 0.0
    scale, zero = choose_qparams(lo, hi, 0, qmax)
    q = quantize_per_tensor(x2, scale=scale, zero_point=zero, qmin=0, qmax=qmax,
                            dtype="quint8").astype(np.int32) - zero
    return q, np.full(x2.shape[0], scale, np.float32)


def linear_dynamic(x, wq, w_scales, bias, *, per_row: bool = False,
                   reduce_range: bool = True):
    """A linear layer with int8 weights whose float input is quantized at run time
    (:func:`_dynamic_rows`), the product in integers, the output float32."""
    lead = x.shape[:-1]
    x2 = _f32(x).reshape(-1, x.shape[-1])
    q, row_scale = _dynamic_rows(x2, per_row, reduce_range)
    acc = _int_product(q, wq)
    out = acc * row_scale.astype(np.float64)[:, None] * \
        _f32(w_scales).astype(np.float64)[None, :]
    if bias is not None:
        out = out + bias
    return out.astype(np.float32).reshape(*lead, wq.shape[0])


def linear_weight_int8(x, wq, w_scales, bias):
    """A linear layer whose int8 weights (a scale per output channel) are dequantized
    as they are used; input and output float32."""
    w = wq.astype(np.float32) * _f32(w_scales)[:, None]
    out = _f32(x) @ w.T
    return out + bias if bias is not None else out


def unpack_int4(packed, k: int):
    """Two 4-bit values per byte, the low nibble first: (N, ceil(K / 2)) -> (N, K)."""
    low, high = packed & 0x0F, packed >> 4
    return np.stack([low, high], axis=-1).reshape(packed.shape[0], -1)[:, :k]


def linear_weight_int4(x, packed, scales, zeros, bias, *, group_size: int):
    """A linear layer with 4-bit weights in groups of ``group_size`` along K, each group
    its scale and zero point (``w = (q - zero) * scale``, q in 0..15), dequantized as
    used; input and output float32."""
    k = x.shape[-1]
    q = unpack_int4(packed, k).astype(np.float32)
    groups = np.repeat(np.arange(scales.shape[1]), group_size)[:k]
    w = (q - _f32(zeros)[:, groups]) * _f32(scales)[:, groups]
    out = _f32(x) @ w.T
    return out + bias if bias is not None else out


def fake_quantize(x, scale, zero_point, *, qmin: int, qmax: int, axis: int = -1):
    """Quantize and dequantize in one (what QAT trains through): ``scale`` and
    ``zero_point`` per tensor (one element) or per slice along ``axis``."""
    if np.size(scale) > 1:
        s, z = _along(_f32(scale), axis, x.ndim), _along(zero_point, axis, x.ndim)
    else:
        s, z = _f32(scale).reshape(()), np.asarray(zero_point).reshape(())
    q = np.clip(np.rint(_f32(x) * (np.float32(1) / s) + _f32(z)), qmin, qmax)
    return ((q - z) * s).astype(x.dtype)


def fake_quantize_backward(grad, x, scale, zero_point, *, qmin, qmax, axis=-1):
    """Straight-through: the gradient passes where ``x`` quantizes inside the range."""
    if scale.numel() > 1:
        shape = [1] * x.dim()
        shape[axis] = -1
        s, z = scale.reshape(shape), zero_point.reshape(shape)
    else:
        s, z = scale.reshape(()), zero_point.reshape(())
    q = (x * (1.0 / s) + z).round()  # the forward's rounding, so the same values clamp
    inside = (q >= qmin) & (q <= qmax)
    return grad * inside.to(grad.dtype), None, None


def pack_int4(q):
    """(N, K) values 0..15 -> (N, ceil(K / 2)) bytes, the low nibble first."""
    if q.shape[1] % 2:
        q = np.concatenate([q, np.zeros((q.shape[0], 1), q.dtype)], axis=1)
    q = q.astype(np.uint8)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)


# ----- shape functions: (shape, dtype) from the inputs' Metas, for the "meta" device and
# for tracing without data (torcia.export)

def _quantize_shape(x, *args, dtype: str, **params):
    return x.shape, np.dtype(_DTYPES[dtype])


def _dequantize_shape(q, *args, **params):
    return q.shape, np.dtype(np.float32)


def _requantized(out_scale):
    return np.dtype(np.float32 if out_scale is None else np.uint8)


def _quantized_linear_shape(xq, wq, w_scales, bias, *, out_scale=None, **params):
    return xq.shape[:-1] + (wq.shape[0],), _requantized(out_scale)


def _quantized_conv_shape(xq, wq, w_scales, bias, *, stride=1, padding=0, dilation=1,
                          out_scale=None, **params):
    nd = len(wq.shape) - 2
    out = _conv_out_size(xq.shape[2:], wq.shape[2:], _tuple(stride, nd), _padding(padding, nd),
                         _tuple(dilation, nd))
    return (xq.shape[0], wq.shape[0], *out), _requantized(out_scale)


def _quantized_conv_transpose_shape(xq, wq, w_scales, bias, *, stride=1, padding=0,
                                    output_padding=0, dilation=1, groups=1, out_scale=None,
                                    **params):
    nd = len(wq.shape) - 2
    out = _transpose_out_size(xq.shape[2:], wq.shape[2:], _tuple(stride, nd),
                              _tuple(padding, nd), _tuple(output_padding, nd),
                              _tuple(dilation, nd))
    return (xq.shape[0], wq.shape[1] * groups, *out), _requantized(out_scale)


def _embedding_shape(wq, scales, zero_points, indices, **params):
    return indices.shape + (wq.shape[1],), np.dtype(np.float32)


def _embedding_bag_shape(wq, scales, zero_points, indices, offsets, per_sample_weights, *,
                         include_last_offset=False, **params):
    bags = indices.shape[0] if len(indices.shape) == 2 else offsets.shape[0]
    bags -= 1 if include_last_offset else 0
    return (bags, wq.shape[1]), np.dtype(np.float32)


def _quantized_add_shape(a, b, *, out_scale, **params):
    return np.broadcast_shapes(a.shape, b.shape), _requantized(out_scale)


def _max_pool_shape(xq, *, kernel_size, stride, padding=(0, 0), dilation=(1, 1),
                    ceil_mode=False):
    out = tuple(_pooled_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
                zip(xq.shape[-2:], kernel_size, stride, padding, dilation))
    return tuple(xq.shape[:-2]) + out, xq.dtype


def _dynamic_linear_shape(x, wq, w_scales, bias, **params):
    return x.shape[:-1] + (wq.shape[0],), np.dtype(np.float32)


def _float_linear_shape(x, weights, *args, **params):
    # the weights' rows are the outputs (packed int4 or not); the bias is the last input
    bias = args[-1] if args else None
    dtype = np.float32 if bias is None else np.result_type(np.float32, bias.dtype)
    return x.shape[:-1] + (weights.shape[0],), np.dtype(dtype)


def _fake_quantize_shape(x, scale, zero_point, **params):
    return x.shape, x.dtype


#: name -> (reference kernel, backward formula or None)
OPS = {
    "quantize_per_tensor": (quantize_per_tensor, None),
    "dequantize_per_tensor": (dequantize_per_tensor, None),
    "quantize_per_channel": (quantize_per_channel, None),
    "dequantize_per_channel": (dequantize_per_channel, None),
    "quantized_linear": (quantized_linear, None),
    "quantized_conv2d": (quantized_conv2d, None),
    "quantized_conv": (quantized_conv, None),
    "quantized_conv_transpose": (quantized_conv_transpose, None),
    "embedding_byte": (embedding_byte, None),
    "embedding_bag_byte": (embedding_bag_byte, None),
    "quantized_add": (quantized_add, None),
    "quantized_max_pool2d": (quantized_max_pool2d, None),
    "linear_dynamic": (linear_dynamic, None),
    "linear_weight_int8": (linear_weight_int8, None),
    "linear_weight_int4": (linear_weight_int4, None),
    "fake_quantize": (fake_quantize, fake_quantize_backward),
}

#: name -> shape function, one for every op of OPS
SHAPES = {
    "quantize_per_tensor": _quantize_shape,
    "dequantize_per_tensor": _dequantize_shape,
    "quantize_per_channel": _quantize_shape,
    "dequantize_per_channel": _dequantize_shape,
    "quantized_linear": _quantized_linear_shape,
    "quantized_conv2d": _quantized_conv_shape,
    "quantized_conv": _quantized_conv_shape,
    "quantized_conv_transpose": _quantized_conv_transpose_shape,
    "embedding_byte": _embedding_shape,
    "embedding_bag_byte": _embedding_bag_shape,
    "quantized_add": _quantized_add_shape,
    "quantized_max_pool2d": _max_pool_shape,
    "linear_dynamic": _dynamic_linear_shape,
    "linear_weight_int8": _float_linear_shape,
    "linear_weight_int4": _float_linear_shape,
    "fake_quantize": _fake_quantize_shape,
}
