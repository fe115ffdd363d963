"""Fused quantized modules (``torch.ao.nn.intrinsic.quantized``): a quantized
convolution, linear layer or BatchNorm whose ReLU runs before the output is rounded (the
output clamped at its zero point, which is what quantizing ``relu(y)`` gives).

The fusions only PyTorch's oneDNN engine implements (:class:`LinearLeakyReLU`,
:class:`LinearTanh`, :class:`ConvAdd2d`, :class:`ConvAddReLU2d`) take the layer's float32
result (the exact integer product, scaled, plus the bias), apply the activation or the
addition in float32, and round once, as oneDNN's post-ops do; under another engine
(``torcia.backends.quantized.engine``) they raise PyTorch's error.
"""

from __future__ import annotations

import torcia
from torcia.ao._qtensor import QTensor, qint8, quantize_per_tensor, quint8
from torcia.ao.nn import intrinsic
from torcia.ao.nn import quantized as nnq
from torcia.ao.nn.intrinsic import qat as nniqat
from torcia.library import call
from torcia.nn import functional as F

__all__ = ["BNReLU2d", "BNReLU3d", "ConvAdd2d", "ConvAddReLU2d", "ConvReLU1d", "ConvReLU2d",
           "ConvReLU3d", "LinearLeakyReLU", "LinearReLU", "LinearTanh"]


def _onednn_only(op: str) -> None:
    engine = torcia.backends.quantized.engine
    if engine != "onednn":
        raise RuntimeError(f"Didn't find engine for operation quantized::{op}"
                           f"{'.' if op.startswith('conv') else ' '}{engine.upper()}")


def _check_input(x, where: str) -> QTensor:
    if not isinstance(x, QTensor) or x.dtype is not quint8 or x._axis is not None:
        raise RuntimeError(f"{where} expects a per-tensor quint8 quantized tensor, got "
                           f"{getattr(x, 'dtype', type(x).__name__)}")
    return x


class ConvReLU1d(nnq.Conv1d):
    """Quantized Conv1d + ReLU."""

    _FLOAT_MODULE = (intrinsic.ConvReLU1d, nniqat.ConvReLU1d, nniqat.ConvBnReLU1d)
    _relu = True


class ConvReLU2d(nnq.Conv2d):
    """Quantized Conv2d + ReLU: the output clamped at its zero point before rounding.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.quantized import ConvReLU2d
    >>> m = ConvReLU2d(1, 2, 3)
    >>> x = torcia.quantize_per_tensor(torcia.randn(1, 1, 5, 5), 0.05, 128, torcia.quint8)
    >>> bool((m(x).int_repr() >= m.zero_point).all())
    True
    """

    _FLOAT_MODULE = (intrinsic.ConvReLU2d, nniqat.ConvReLU2d, nniqat.ConvBnReLU2d)
    _relu = True


class ConvReLU3d(nnq.Conv3d):
    """Quantized Conv3d + ReLU."""

    _FLOAT_MODULE = (intrinsic.ConvReLU3d, nniqat.ConvReLU3d, nniqat.ConvBnReLU3d)
    _relu = True


class LinearReLU(nnq.Linear):
    """Quantized Linear + ReLU."""

    _FLOAT_MODULE = (intrinsic.LinearReLU, nniqat.LinearReLU)
    _relu = True


class BNReLU2d(nnq.BatchNorm2d):
    """Quantized BatchNorm2d + ReLU in eval mode.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.quantized import BNReLU2d
    >>> m = BNReLU2d(2, scale=0.05, zero_point=100)
    >>> x = torcia.quantize_per_tensor(torcia.randn(1, 2, 3, 3), 0.05, 128, torcia.quint8)
    >>> bool((m(x).int_repr() >= 100).all())
    True
    """

    def _float(self, x):
        return F.relu(self.bn(x))


class BNReLU3d(nnq.BatchNorm3d):
    """Quantized BatchNorm3d + ReLU in eval mode."""

    def _float(self, x):
        return F.relu(self.bn(x))


class _LinearFloatEpilogue(nnq.Linear):
    """A quantized Linear whose activation runs on the float32 result, rounded once."""

    _OP = ""

    def _activation(self, y):
        raise NotImplementedError

    def forward(self, x):
        _onednn_only(self._OP)
        x = _check_input(x, type(self).__name__)
        y = call("quantized_linear", (x._int, self.weight_int8, self.weight_scales, self.bias_),
                 {"x_scale": float(x._scale), "x_zero_point": int(x._zero_point),
                  "out_scale": None})
        return quantize_per_tensor(self._activation(y), self.scale, self.zero_point, quint8)

    @classmethod
    def _from_linear(cls, mod, **extra):
        base = nnq.Linear.from_float(mod)
        q = cls(base.in_features, base.out_features, **extra, bias=base.bias_ is not None)
        q.weight_int8, q.weight_scales, q.bias_ = base.weight_int8, base.weight_scales, \
            base.bias_
        q.scale, q.zero_point = base.scale, base.zero_point
        return q


class LinearLeakyReLU(_LinearFloatEpilogue):
    """Quantized Linear + LeakyReLU (``torch.ao.nn.intrinsic.quantized.LinearLeakyReLU``;
    oneDNN engine only, as in PyTorch).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.quantized import LinearLeakyReLU
    >>> torcia.backends.quantized.engine = "onednn"
    >>> m = LinearLeakyReLU(4, 2, negative_slope=0.1)
    >>> x = torcia.quantize_per_tensor(torcia.randn(3, 4), 0.05, 128, torcia.quint8)
    >>> m(x).shape, m(x).dtype
    (torcia.Size([3, 2]), torcia.quint8)
    >>> torcia.backends.quantized.engine = "x86"
    """

    _FLOAT_MODULE = (intrinsic.LinearLeakyReLU,)
    _OP = "linear_leaky_relu"

    def __init__(self, in_features, out_features, negative_slope, bias=True,
                 dtype=qint8):
        super().__init__(in_features, out_features, bias, dtype)
        self.negative_slope = negative_slope

    def _activation(self, y):
        return F.leaky_relu(y, self.negative_slope)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls._from_linear(mod, negative_slope=mod[1].negative_slope)

    def extra_repr(self):
        return f"{super().extra_repr()}, negative_slope={self.negative_slope}"


class LinearTanh(_LinearFloatEpilogue):
    """Quantized Linear + Tanh (``torch.ao.nn.intrinsic.quantized.LinearTanh``; oneDNN
    engine only)."""

    _FLOAT_MODULE = (intrinsic.LinearTanh,)
    _OP = "linear_tanh"

    def __init__(self, in_features, out_features, bias=True, dtype=qint8):
        super().__init__(in_features, out_features, bias, dtype)

    def _activation(self, y):
        return torcia.tanh(y)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls._from_linear(mod)


class ConvAdd2d(nnq.Conv2d):
    """Quantized Conv2d whose float32 result is added to a second quantized input, then
    rounded once: ``forward(input, extra_input)``
    (``torch.ao.nn.intrinsic.quantized.ConvAdd2d``; oneDNN engine only).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.intrinsic.quantized import ConvAdd2d
    >>> torcia.backends.quantized.engine = "onednn"
    >>> m = ConvAdd2d(2, 2, 3)
    >>> x = torcia.quantize_per_tensor(torcia.randn(1, 2, 5, 5), 0.05, 64, torcia.quint8)
    >>> extra = torcia.quantize_per_tensor(torcia.randn(1, 2, 3, 3), 0.05, 64, torcia.quint8)
    >>> m(x, extra).shape
    torcia.Size([1, 2, 3, 3])
    >>> torcia.backends.quantized.engine = "x86"
    """

    _FLOAT_MODULE = (intrinsic.ConvAdd2d,)
    _relu_after_add = False

    def _params(self, x):
        return {**super()._params(x), "out_scale": None, "out_zero_point": 0}

    def forward(self, input, extra_input):
        _onednn_only("conv2d_add")
        x = _check_input(input, type(self).__name__)
        extra = _check_input(extra_input, type(self).__name__)
        if x.dim() != 4:
            raise ValueError(f"Input shape must be `(N, C, H, W)`! got a {x.dim()}-d input")
        y = self._run(x._int, x) + extra.dequantize()
        if self._relu_after_add:
            y = F.relu(y)
        return quantize_per_tensor(y, self.scale, self.zero_point, quint8)


class ConvAddReLU2d(ConvAdd2d):
    """Quantized Conv2d + addition of a second input + ReLU
    (``torch.ao.nn.intrinsic.quantized.ConvAddReLU2d``; oneDNN engine only)."""

    _FLOAT_MODULE = (intrinsic.ConvAddReLU2d,)
    _relu_after_add = True
