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
from torcia.ao.nn.quantized._modules import _check_quantized
from torcia.ao.nn.quantized.functional import _requantized

__all__ = ["dropout", "elu", "hardswish", "instance_norm", "layer_norm", "leaky_relu"]

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
