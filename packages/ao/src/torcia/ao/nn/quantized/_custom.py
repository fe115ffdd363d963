"""Quantized LSTM and MultiheadAttention (``torch.ao.nn.quantized.LSTM``,
``MultiheadAttention``): the quantizable modules once ``convert`` has made each observed
piece quantized. They come only from observed modules (``from_observed``), the custom
module mapping ``observed_to_quantized_custom_module_class`` that ``convert`` follows."""

from __future__ import annotations

import torcia
from torcia.ao._qtensor import quantize_per_tensor_dynamic, quint8
from torcia.ao.nn import quantizable


def _converted(cls, observed):
    if not isinstance(observed, cls._FLOAT_MODULE):
        raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got "
                             f"{type(observed)}")
    converted = torcia.ao.quantization.convert(observed, inplace=False, remove_qconfig=True)
    converted.__class__ = cls
    return converted


class LSTM(quantizable.LSTM):
    """A quantized LSTM (``torch.ao.nn.quantized.LSTM``): quantized input, hidden and cell
    states and outputs, int8 weights in its cells' quantized Linear layers.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> model = nn.Sequential(tq.QuantStub(), nn.LSTM(4, 8)).eval()
    >>> model.qconfig = tq.default_qconfig
    >>> prepared = tq.prepare(model)
    >>> type(prepared[1]).__name__
    'LSTM'
    >>> _ = prepared(torcia.randn(5, 2, 4))  # calibration
    >>> quantized = tq.convert(prepared)
    >>> type(quantized[1]).__module__
    'torcia.ao.nn.quantized._custom'
    >>> out, (h, c) = quantized(torcia.randn(5, 2, 4))
    >>> out.dtype, tuple(out.shape)
    (torcia.quint8, (5, 2, 8))
    """

    _FLOAT_MODULE = quantizable.LSTM

    def _get_name(self):
        return "QuantizedLSTM"

    @classmethod
    def from_float(cls, *args, **kwargs):
        raise NotImplementedError("It looks like you are trying to convert a non-observed "
                                  "LSTM module. Please, see the examples on quantizable "
                                  "LSTMs.")

    @classmethod
    def from_observed(cls, other):
        """The quantized LSTM of a calibrated quantizable one."""
        return _converted(cls, other)


class MultiheadAttention(quantizable.MultiheadAttention):
    """A quantized multi-head attention (``torch.ao.nn.quantized.MultiheadAttention``):
    quantized projections (int8 weights), the attention itself in float between them,
    quantized outputs and attention weights; ``dequantize()`` gives the float module back.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> model = nn.Sequential(tq.QuantStub(), nn.MultiheadAttention(8, 2)).eval()
    >>> model.qconfig = tq.default_qconfig
    >>> prepared = tq.prepare(model)
    >>> x = torcia.randn(5, 2, 8)
    >>> _ = prepared[1](*[prepared[0](x)] * 3)  # calibration
    >>> mha = tq.convert(prepared)[1]
    >>> q = torcia.quantize_per_tensor(x, 0.05, 128, torcia.quint8)
    >>> out, weights = mha(q, q, q)
    >>> out.dtype, tuple(out.shape), tuple(weights.shape)
    (torcia.quint8, (5, 2, 8), (2, 5, 5))
    """

    _FLOAT_MODULE = quantizable.MultiheadAttention

    def _get_name(self):
        return "QuantizedMultiheadAttention"

    @classmethod
    def from_float(cls, other):
        raise NotImplementedError("It looks like you are trying to convert a non-observed "
                                  "MHA module. Please, see the examples on quantizable MHAs.")

    @classmethod
    def from_observed(cls, other):
        """The quantized attention of a calibrated quantizable one: its projections
        quantized, ``bias_k``/``bias_v`` quantized over their own ranges, the packed float
        projection weights dropped."""
        converted = _converted(cls, other)
        for name in ("bias_k", "bias_v"):
            bias = converted._parameters.pop(name, None)
            if bias is not None:
                converted.__dict__[name] = quantize_per_tensor_dynamic(bias.detach(), quint8,
                                                                       False)
        del converted.in_proj_weight
        del converted.in_proj_bias
        return converted
