"""``torch.ops.quantized``: the operators PyTorch's quantized modules call, with their
signatures (quantized tensors in and out, the output's scale and zero point given), on
torcia-ao's ops and kernels.

Examples
--------
>>> import torcia
>>> from torcia.ao.ops import quantized
>>> x = torcia.quantize_per_tensor(torcia.tensor([-2.0, 1.0]), 0.1, 30, torcia.quint8)
>>> quantized.leaky_relu(x, 0.5, False, 0.1, 30).dequantize().tolist()
[-1.0, 1.0]
"""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.ao._qtensor import QTensor, qint8, quantize_per_tensor, quint8
from torcia.ao._qtensor import cat as _cat
from torcia.ao.nn import quantized as nnq
from torcia.ao.nn.quantized import dynamic as nnqd
from torcia.ao.nn.quantized import functional as qF
from torcia.ao.nn.quantized._modules import _check_quantized
from torcia.ao.nn.quantized.functional import _requantized

__all__ = ["add", "add_relu", "cat", "conv2d", "conv2d_prepack", "conv2d_relu",
           "conv2d_unpack", "dropout", "elu", "hardswish", "instance_norm", "layer_norm",
           "leaky_relu", "linear", "linear_dynamic", "linear_prepack", "linear_relu",
           "linear_unpack", "mul", "Conv2dPackedParams", "LinearPackedParams"]

F = nn.functional


def elu(self, output_scale, output_zero_point, alpha=1, scale=1, input_scale=1):
    """``quantized::elu``: ATen's ``elu`` with its scales, ``scale * x`` where ``x > 0``,
    ``scale * alpha * (exp(input_scale * x) - 1)`` elsewhere, quantized at
    ``output_scale``/``output_zero_point``."""
    def fn(t):
        return torcia.where(t > 0, t * scale, F.elu(t * input_scale, alpha) * scale)
    return _requantized(self, fn, "quantized::elu", output_scale, output_zero_point)


def hardswish(input, output_scale, output_zero_point):
    """``quantized::hardswish``."""
    return _requantized(input, F.hardswish, "quantized::hardswish", output_scale,
                        output_zero_point)


def leaky_relu(qx, negative_slope, inplace, output_scale, output_zero_point):
    """``quantized::leaky_relu`` (``inplace`` is accepted: quantized tensors are not
    written in place)."""
    return _requantized(qx, lambda t: F.leaky_relu(t, negative_slope),
                        "quantized::leaky_relu", output_scale, output_zero_point)


def layer_norm(input, normalized_shape, weight, bias, eps, output_scale, output_zero_point):
    """``quantized::layer_norm``."""
    return _requantized(input, lambda t: F.layer_norm(t, list(normalized_shape), weight, bias,
                                                      eps),
                        "quantized::layer_norm", output_scale, output_zero_point)


def instance_norm(input, weight, bias, eps, output_scale, output_zero_point):
    """``quantized::instance_norm``."""
    return _requantized(input, lambda t: F.instance_norm(t, weight=weight, bias=bias, eps=eps),
                        "quantized::instance_norm", output_scale, output_zero_point)


def dropout(self, output_scale, output_zero_point, p=0.5, training=False):
    """``quantized::dropout``: the input as it is, its parameters kept (PyTorch's
    quantized dropout ignores the output's and ``training``)."""
    return _check_quantized(self, "quantized::dropout")


# --- packed weights and the products -----------------------------------------------------


def _check_weight(w, what: str) -> QTensor:
    if not isinstance(w, QTensor) or w.dtype is not qint8:
        raise RuntimeError(f"{what}: the weight must be a qint8 quantized tensor (from "
                           "torcia.quantize_per_tensor or quantize_per_channel)")
    return w


class LinearPackedParams:
    """What :func:`linear_prepack` returns (``LinearPackedParamsBase``): a qint8 weight
    and a float bias, for :func:`linear`, :func:`linear_relu` and
    :func:`linear_dynamic`."""

    def __init__(self, weight, bias):
        self.weight = _check_weight(weight, "quantized::linear_prepack")
        self.bias = None if bias is None else bias.detach().to(torcia.float32)
        self._dynamic = None

    def unpack(self) -> tuple:
        return self.weight, self.bias

    def dynamic(self, reduce_range: bool):
        """The dynamic Linear layer of these weights (its int8 rows packed once)."""
        if self._dynamic is None:
            n, k = self.weight.shape
            layer = nnqd.Linear(k, n, self.bias is not None)
            layer.weight_int8 = self.weight.int_repr().to(torcia.int8)
            layer.weight_scales = _row_scales(self.weight)
            layer.bias_ = self.bias
            self._dynamic = layer
        self._dynamic.reduce_range = reduce_range
        return self._dynamic


def _row_scales(w: QTensor):
    if w.qscheme() in (torcia.per_channel_affine, torcia.per_channel_symmetric):
        return w.q_per_channel_scales().to(torcia.float32)
    return torcia.full((w.shape[0],), w.q_scale(), dtype=torcia.float32)


class Conv2dPackedParams:
    """What :func:`conv2d_prepack` returns (``Conv2dPackedParamsBase``): a qint8 weight,
    a float bias and the convolution's geometry, with PyTorch's accessors."""

    def __init__(self, weight, bias, stride, padding, dilation, groups):
        self.weight = _check_weight(weight, "quantized::conv2d_prepack")
        self.bias = None if bias is None else bias.detach().to(torcia.float32)
        self._stride, self._padding = list(stride), list(padding)
        self._dilation, self._groups = list(dilation), int(groups)

    def unpack(self) -> tuple:
        return self.weight, self.bias

    def stride(self) -> list:
        return self._stride

    def padding(self) -> list:
        return self._padding

    def dilation(self) -> list:
        return self._dilation

    def groups(self) -> int:
        return self._groups


def linear_prepack(W, B=None) -> LinearPackedParams:
    """``quantized::linear_prepack``: pack a qint8 weight (N, K) and a float bias.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.ops import quantized
    >>> w = torcia.quantize_per_tensor(torcia.eye(2), 0.1, 0, torcia.qint8)
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[1.0, -2.0]]), 0.1, 50, torcia.quint8)
    >>> packed = quantized.linear_prepack(w, torcia.tensor([0.5, 0.0]))
    >>> quantized.linear(x, packed, 0.1, 50).dequantize().tolist()
    [[1.5, -2.0]]
    >>> quantized.linear_relu(x, packed, 0.1, 50).dequantize().tolist()
    [[1.5, 0.0]]
    """
    return LinearPackedParams(W, B)


def linear_unpack(W_prepack) -> tuple:
    """``quantized::linear_unpack``: ``(weight, bias)``."""
    return W_prepack.unpack()


def linear(X, W_prepack, Y_scale_i, Y_zero_point_i):
    """``quantized::linear``: the product at ``Y_scale_i``/``Y_zero_point_i``."""
    return qF.linear(X, W_prepack.weight, W_prepack.bias, Y_scale_i, Y_zero_point_i)


def linear_relu(X, W_prepack, Y_scale_i, Y_zero_point_i):
    """``quantized::linear_relu``: :func:`linear`, then ReLU (the integers clamped at the
    zero point, as the fused kernel's output)."""
    return linear(X, W_prepack, Y_scale_i, Y_zero_point_i).relu()


def linear_dynamic(X, W_prepack, reduce_range=False):
    """``quantized::linear_dynamic``: float in and out, ``X`` quantized per call (7-bit
    with ``reduce_range``), as :class:`torcia.ao.nn.quantized.dynamic.Linear`."""
    return W_prepack.dynamic(bool(reduce_range))(X)


def conv2d_prepack(weight, bias, stride, padding, dilation, groups) -> Conv2dPackedParams:
    """``quantized::conv2d_prepack``: pack a qint8 weight (O, I/groups, kH, kW), a float
    bias and the geometry.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.ops import quantized
    >>> w = torcia.quantize_per_tensor(torcia.ones(1, 1, 2, 2), 0.25, 0, torcia.qint8)
    >>> x = torcia.quantize_per_tensor(torcia.ones(1, 1, 3, 3), 0.5, 0, torcia.quint8)
    >>> packed = quantized.conv2d_prepack(w, None, [1, 1], [0, 0], [1, 1], 1)
    >>> quantized.conv2d(x, packed, 0.5, 0).dequantize().tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
    >>> packed.stride(), packed.groups()
    ([1, 1], 1)
    """
    return Conv2dPackedParams(weight, bias, stride, padding, dilation, groups)


def conv2d_unpack(packed_weights) -> tuple:
    """``quantized::conv2d_unpack``: ``(weight, bias)``."""
    return packed_weights.unpack()


def conv2d(qx, packed_weight, output_scale, output_zero_point):
    """``quantized::conv2d``: the convolution at ``output_scale``/``output_zero_point``."""
    p = packed_weight
    return qF.conv2d(qx, p.weight, p.bias, p.stride(), p.padding(), p.dilation(), p.groups(),
                     scale=output_scale, zero_point=output_zero_point)


def conv2d_relu(qx, packed_weight, output_scale, output_zero_point):
    """``quantized::conv2d_relu``: :func:`conv2d`, then ReLU."""
    return conv2d(qx, packed_weight, output_scale, output_zero_point).relu()


# --- arithmetic ----------------------------------------------------------------------------


def _functional(scale, zero_point) -> nnq.QFunctional:
    f = nnq.QFunctional()
    f.scale, f.zero_point = float(scale), int(zero_point)
    return f


def add(qa, qb, scale, zero_point):
    """``quantized::add``: ``qa + qb`` at ``scale``/``zero_point``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.ops import quantized
    >>> a = torcia.quantize_per_tensor(torcia.tensor([1.0, -1.0]), 0.1, 20, torcia.quint8)
    >>> quantized.add(a, a, 0.2, 30).dequantize().tolist()
    [2.0, -2.0]
    >>> quantized.add_relu(a, a, 0.2, 30).dequantize().tolist()
    [2.0, 0.0]
    """
    return _functional(scale, zero_point).add(qa, qb)


def add_relu(qa, qb, scale, zero_point):
    """``quantized::add_relu``: ``relu(qa + qb)`` at ``scale``/``zero_point``."""
    return _functional(scale, zero_point).add_relu(qa, qb)


def mul(qa, qb, scale, zero_point):
    """``quantized::mul``: ``qa * qb`` at ``scale``/``zero_point``."""
    return _functional(scale, zero_point).mul(qa, qb)


def cat(qx, dim, scale=None, zero_point=None):
    """``quantized::cat``: the tensors joined along ``dim``, at ``scale``/``zero_point``
    (the first tensor's when None)."""
    if scale is None or zero_point is None:
        return _cat(list(qx), dim)
    return _cat([quantize_per_tensor(_check_quantized(t, "quantized::cat").dequantize(),
                                      float(scale), int(zero_point), quint8) for t in qx],
                dim)
