"""Functional forms of the quantized ops (``torch.ao.nn.quantized.functional``): quantized
tensors in and out. The products (:func:`linear`, :func:`conv1d`, :func:`conv2d`,
:func:`conv3d`) run torcia-ao's integer kernels on an int8 weight given as a quantized
tensor; pooling and the activations work on the values the integers stand for and
quantize the result, at the input's scale and zero point unless the function takes
others (as PyTorch's do).

Examples
--------
>>> import torcia
>>> import torcia.ao.nn.quantized.functional as qF
>>> x = torcia.quantize_per_tensor(torcia.tensor([[-1.0, 0.5, 2.0]]), 0.1, 20, torcia.quint8)
>>> qF.hardtanh(x).dequantize().tolist()
[[-1.0, 0.5, 1.0]]
>>> w = torcia.quantize_per_tensor(torcia.eye(3), 0.01, 0, torcia.qint8)
>>> qF.linear(x, w, scale=0.1, zero_point=20).dequantize().tolist()
[[-1.0, 0.5, 2.0]]
"""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.ao._qtensor import QTensor, qint8, quantize_per_tensor, quint8
from torcia.ao.nn.quantized._modules import (
    _averaged,
    _check_quantized,
    max_pooled2d,
    ntuple,
)
from torcia.library import call

__all__ = ["adaptive_avg_pool2d", "adaptive_avg_pool3d", "avg_pool2d", "avg_pool3d", "celu",
           "clamp", "conv1d", "conv2d", "conv3d", "elu", "hardsigmoid", "hardswish",
           "hardtanh", "interpolate", "leaky_relu", "linear", "max_pool1d", "max_pool2d",
           "threshold", "upsample", "upsample_bilinear", "upsample_nearest"]

F = nn.functional


def _weight(weight, out_channels: int, what: str) -> tuple:
    """The int8 values of a quantized weight and its scale per output channel."""
    if not isinstance(weight, QTensor) or weight.dtype is not qint8:
        raise ValueError(f"{what}: the weight must be a qint8 quantized tensor, got "
                         f"{getattr(weight, 'dtype', type(weight).__name__)}")
    if weight._axis is None:
        if int(weight._zero_point) != 0:
            raise ValueError(f"{what}: the weight's zero point must be 0 (symmetric)")
        scales = torcia.full((out_channels,), float(weight._scale))
    else:
        if weight._axis != 0:
            raise ValueError(f"{what}: a per-channel weight must be quantized along its "
                             f"output channels (axis 0), got axis {weight._axis}")
        if weight._zero_point.abs().max().item() != 0:
            raise ValueError(f"{what}: the weight's zero points must be 0 (symmetric)")
        scales = weight._scale.to(torcia.float32)
    return weight._int, scales


def _bias(bias):
    return None if bias is None else bias.detach().to(torcia.float32)


def linear(input, weight, bias=None, scale=None, zero_point=None):
    """A quantized linear layer: uint8 ``input`` (..., K), qint8 ``weight`` (N, K), float
    ``bias``; the output at ``scale``/``zero_point`` (the input's when None).

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[1.0, 2.0]]), 0.1, 0, torcia.quint8)
    >>> w = torcia.quantize_per_tensor(torcia.tensor([[1.0, 1.0]]), 0.1, 0, torcia.qint8)
    >>> qF.linear(x, w, torcia.tensor([0.5])).dequantize().tolist()
    [[3.5]]
    """
    x = _check_quantized(input, "quantized linear")
    scale = float(x._scale) if scale is None else float(scale)
    zero_point = int(x._zero_point) if zero_point is None else int(zero_point)
    wq, scales = _weight(weight, weight.shape[0], "quantized linear")
    out = call("quantized_linear", (x._int, wq, scales, _bias(bias)),
               {"x_scale": float(x._scale), "x_zero_point": int(x._zero_point),
                "out_scale": scale, "out_zero_point": zero_point})
    return QTensor(out, quint8, scale, zero_point)


def _conv(nd, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale,
          zero_point, dtype):
    what = f"quantized conv{nd}d"
    if padding_mode != "zeros":
        raise NotImplementedError(f"{what}: only zero-padding is supported, got "
                                  f"padding_mode={padding_mode!r}")
    if dtype is not quint8:
        raise NotImplementedError(f"{what}: only quint8 outputs are supported, got {dtype}")
    x = _check_quantized(input, what)
    if x.dim() != nd + 2:
        raise ValueError(f"{what}: input shape must be (N, C, {', '.join('DHW'[-nd:])}), got "
                         f"{tuple(x.shape)}")
    wq, scales = _weight(weight, weight.shape[0], what)
    out = call("quantized_conv", (x._int, wq, scales, _bias(bias)),
               {"x_scale": float(x._scale), "x_zero_point": int(x._zero_point),
                "stride": ntuple(stride, nd), "padding": ntuple(padding, nd),
                "dilation": ntuple(dilation, nd), "groups": groups,
                "out_scale": float(scale), "out_zero_point": int(zero_point)})
    return QTensor(out, quint8, float(scale), int(zero_point))


def _named(fn, name: str, doc: str):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _conv_function(nd: int, doc: str):
    """The functional form of the ``nd``-d quantized convolution, with PyTorch's
    signature."""

    def conv(input, weight, bias, stride=1, padding=0, dilation=1, groups=1,
             padding_mode="zeros", scale=1.0, zero_point=0, dtype=quint8):
        return _conv(nd, input, weight, bias, stride, padding, dilation, groups,
                     padding_mode, scale, zero_point, dtype)

    return _named(conv, f"conv{nd}d", doc)


conv1d = _conv_function(1, """A quantized 1-d convolution: uint8 ``input`` (N, C, L),
    qint8 ``weight`` (O, C / groups, k), zero padding with the input's zero point; the
    output at ``scale``/``zero_point``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[[1.0, 2.0, 3.0]]]), 0.1, 0,
    ...                                torcia.quint8)
    >>> w = torcia.quantize_per_tensor(torcia.ones(1, 1, 2), 0.1, 0, torcia.qint8)
    >>> qF.conv1d(x, w, None, scale=0.1).dequantize().tolist()
    [[[3.0, 5.0]]]
    """)
conv2d = _conv_function(2, """A quantized 2-d convolution (as :func:`conv1d`, on (N, C,
    H, W)).

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.ones(1, 1, 3, 3), 0.1, 0, torcia.quint8)
    >>> w = torcia.quantize_per_tensor(torcia.ones(2, 1, 2, 2), 0.1, 0, torcia.qint8)
    >>> qF.conv2d(x, w, None, padding=1, scale=0.1).shape
    torcia.Size([1, 2, 4, 4])
    """)
conv3d = _conv_function(3, """A quantized 3-d convolution (as :func:`conv1d`, on (N, C,
    D, H, W)).

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.ones(1, 1, 2, 3, 3), 0.1, 0, torcia.quint8)
    >>> w = torcia.quantize_per_tensor(torcia.ones(1, 1, 1, 2, 2), 0.1, 0, torcia.qint8)
    >>> qF.conv3d(x, w, None, scale=0.1).dequantize()[0, 0, 0].tolist()
    [[4.0, 4.0], [4.0, 4.0]]
    """)


def _requantized(x, fn, what, scale=None, zero_point=None):
    """``fn`` of the values ``x`` stands for, quantized at ``scale``/``zero_point`` (the
    input's when None)."""
    x = _check_quantized(x, what)
    scale = float(x._scale) if scale is None else float(scale)
    zero_point = int(x._zero_point) if zero_point is None else int(zero_point)
    return quantize_per_tensor(fn(x.dequantize()), scale, zero_point, x.dtype)


def _on_integers(x, fn, what):
    """``fn`` (a max: monotone, so it commutes with the affine map) of the integers,
    exactly, the quantization parameters kept."""
    x = _check_quantized(x, what)
    out = fn(x._int.to(torcia.float32)).to(x._int.dtype)
    return QTensor(out, x.dtype, x._scale, x._zero_point)


def _max_pool(nd: int, doc: str):
    """Max pooling over ``nd`` dimensions of quantized values, on the integers."""
    name = f"max_pool{nd}d"

    def pool(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False):
        if return_indices:
            raise NotImplementedError(f"quantized {name}: return_indices is not supported "
                                      "for quantized inputs")
        if nd == 2:
            return max_pooled2d(input, kernel_size, stride, padding, dilation, ceil_mode)
        return _on_integers(input, lambda t: getattr(F, name)(t, kernel_size, stride,
                                                              padding, dilation, ceil_mode),
                            f"quantized {name}")

    return _named(pool, name, doc)


def _avg_pool(nd: int, doc: str):
    """Average pooling over ``nd`` dimensions of quantized values."""
    name = f"avg_pool{nd}d"

    def pool(input, kernel_size, stride=None, padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None):
        return _averaged(input, lambda t: getattr(F, name)(
            t, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override),
            f"quantized {name}")

    return _named(pool, name, doc)


def _adaptive_avg_pool(nd: int, doc: str):
    """Adaptive average pooling over ``nd`` dimensions of quantized values."""
    name = f"adaptive_avg_pool{nd}d"

    def pool(input, output_size):
        return _averaged(input, lambda t: getattr(F, name)(t, output_size),
                         f"quantized {name}")

    return _named(pool, name, doc)


max_pool1d = _max_pool(1, """Max pooling over (N, C, L) quantized values, the
    quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 0.5, 0,
    ...                                torcia.quint8)
    >>> qF.max_pool1d(x, 2).dequantize().tolist()
    [[[3.0, 2.0]]]
    """)


max_pool2d = _max_pool(2, """Max pooling over (N, C, H, W) quantized values, the
    quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.arange(16.0).reshape(1, 1, 4, 4), 1.0, 0,
    ...                                torcia.quint8)
    >>> qF.max_pool2d(x, 2).int_repr().tolist()
    [[[[5, 7], [13, 15]]]]
    """)


avg_pool2d = _avg_pool(2, """Average pooling of quantized (N, C, H, W) values, the
    quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.arange(16.0).reshape(1, 1, 4, 4), 1.0, 0,
    ...                                torcia.quint8)
    >>> qF.avg_pool2d(x, 2).int_repr().tolist()
    [[[[2, 4], [10, 12]]]]
    """)


avg_pool3d = _avg_pool(3, """Average pooling of quantized (N, C, D, H, W) values, the
    quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.ones(1, 1, 2, 2, 2), 0.5, 0, torcia.quint8)
    >>> qF.avg_pool3d(x, 2).dequantize().flatten().tolist()
    [1.0]
    """)


adaptive_avg_pool2d = _adaptive_avg_pool(2, """Adaptive average pooling of quantized
    (N, C, H, W) values, the quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.arange(4.0).reshape(1, 1, 2, 2), 0.5, 0,
    ...                                torcia.quint8)
    >>> qF.adaptive_avg_pool2d(x, 1).dequantize().flatten().tolist()
    [1.5]
    """)


adaptive_avg_pool3d = _adaptive_avg_pool(3, """Adaptive average pooling of quantized
    (N, C, D, H, W) values, the quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.ones(1, 1, 2, 2, 2), 0.5, 0, torcia.quint8)
    >>> qF.adaptive_avg_pool3d(x, 1).shape
    torcia.Size([1, 1, 1, 1, 1])
    """)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Resizing of quantized (N, C, ...) values (``nearest`` or ``bilinear``), the
    quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[[[1.0, 2.0]]]]), 0.5, 0, torcia.quint8)
    >>> qF.interpolate(x, scale_factor=2).dequantize().tolist()
    [[[[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0]]]]
    """
    if mode not in ("nearest", "bilinear"):
        raise ValueError(f"Input data type is quantized. Only 'nearest' and 'bilinear' "
                         f"modes are supported, got mode={mode!r}")
    return _requantized(input, lambda t: F.interpolate(t, size, scale_factor, mode,
                                                       align_corners),
                        "quantized interpolate")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """:func:`interpolate` under its older name.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.ones(1, 1, 2, 2), 0.5, 0, torcia.quint8)
    >>> qF.upsample(x, size=3).shape
    torcia.Size([1, 1, 3, 3])
    """
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_bilinear(input, size=None, scale_factor=None):
    """:func:`interpolate` with ``mode="bilinear"`` and ``align_corners=True``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[[[0.0, 2.0]]]]), 0.5, 0,
    ...                                torcia.quint8)
    >>> qF.upsample_bilinear(x, size=(1, 3)).dequantize().tolist()
    [[[[0.0, 1.0, 2.0]]]]
    """
    return interpolate(input, size, scale_factor, "bilinear", True)


def upsample_nearest(input, size=None, scale_factor=None):
    """:func:`interpolate` with ``mode="nearest"``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.ones(1, 1, 1, 2), 0.5, 0, torcia.quint8)
    >>> qF.upsample_nearest(x, scale_factor=2).shape
    torcia.Size([1, 1, 2, 4])
    """
    return interpolate(input, size, scale_factor, "nearest")


def leaky_relu(input, negative_slope=0.01, inplace=False, scale=None, zero_point=None):
    """Leaky ReLU of quantized values, at ``scale``/``zero_point`` (the input's when None).

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-2.0, 1.0]), 0.1, 100, torcia.quint8)
    >>> qF.leaky_relu(x, 0.5).dequantize().tolist()
    [-1.0, 1.0]
    """
    return _requantized(input, lambda t: F.leaky_relu(t, negative_slope),
                        "quantized leaky_relu", scale, zero_point)


def hardswish(input, scale, zero_point):
    """Hardswish of quantized values, at ``scale``/``zero_point``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-4.0, 0.0, 4.0]), 0.1, 50, torcia.quint8)
    >>> qF.hardswish(x, 0.1, 10).dequantize().tolist()
    [0.0, 0.0, 4.0]
    """
    return _requantized(input, F.hardswish, "quantized hardswish", scale, zero_point)


def elu(input, scale, zero_point, alpha=1.0):
    """ELU of quantized values, at ``scale``/``zero_point``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-5.0, 1.0]), 0.1, 60, torcia.quint8)
    >>> qF.elu(x, 0.1, 20).dequantize().tolist()
    [-1.0, 1.0]
    """
    return _requantized(input, lambda t: F.elu(t, alpha), "quantized elu", scale, zero_point)


def celu(input, scale, zero_point, alpha=1.0):
    """CELU of quantized values, at ``scale``/``zero_point``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-5.0, 1.0]), 0.1, 60, torcia.quint8)
    >>> qF.celu(x, 0.1, 20, alpha=2.0).int_repr().tolist()  # -1.8 and 1.0
    [2, 30]
    """
    return _requantized(input, lambda t: F.celu(t, alpha), "quantized celu", scale,
                        zero_point)


def hardsigmoid(input, inplace=False):
    """Hardsigmoid of quantized values; the output at scale 1/256 and zero point 0,
    which cover [0, 1) (PyTorch's fixed output parameters).

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-4.0, 0.0]), 0.1, 50, torcia.quint8)
    >>> out = qF.hardsigmoid(x)
    >>> out.int_repr().tolist(), out.q_scale()
    ([0, 128], 0.00390625)
    """
    return _requantized(input, F.hardsigmoid, "quantized hardsigmoid", 1.0 / 256, 0)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """Hardtanh of quantized values, the quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-3.0, 0.5, 3.0]), 0.1, 50,
    ...                                torcia.quint8)
    >>> qF.hardtanh(x, -2.0, 2.0).dequantize().tolist()
    [-2.0, 0.5, 2.0]
    """
    return _requantized(input, lambda t: F.hardtanh(t, min_val, max_val),
                        "quantized hardtanh")


def clamp(input, min_, max_):
    """Clamp quantized values to ``[min_, max_]``, the quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-3.0, 0.5, 3.0]), 0.1, 50,
    ...                                torcia.quint8)
    >>> qF.clamp(x, 0.0, 1.0).dequantize().tolist()
    [0.0, 0.5, 1.0]
    """
    return _requantized(input, lambda t: t.clamp(min_, max_), "quantized clamp")


def threshold(input, threshold, value):
    """Where quantized values are at most ``threshold``, ``value``; the quantization kept.

    Examples
    --------
    >>> import torcia
    >>> import torcia.ao.nn.quantized.functional as qF
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-1.0, 0.5, 2.0]), 0.1, 50,
    ...                                torcia.quint8)
    >>> qF.threshold(x, 1.0, -2.0).dequantize().tolist()
    [-2.0, -2.0, 2.0]
    """
    if threshold is None or value is None:
        raise ValueError("Input to 'threshold' must be specified")
    return _requantized(input, lambda t: F.threshold(t, threshold, value),
                        "quantized threshold")
