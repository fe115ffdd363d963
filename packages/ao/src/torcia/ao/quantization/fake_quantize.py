"""Fake quantization: quantize and dequantize in the forward pass, the straight-through
gradient in the backward, so that training sees int8's rounding
(``torch.ao.quantization.fake_quantize``)."""

from __future__ import annotations

import functools

import numpy as np

import torcia
from torcia import nn
from torcia.ao._qtensor import (
    per_channel_affine,
    per_channel_affine_float_qparams,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qint8,
    quint4x2,
    quint8,
)
from torcia.ao.quantization.observer import (
    HistogramObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    _PartialWrapper,
    default_fixed_qparams_range_0to1_observer,
    default_fixed_qparams_range_neg1to1_observer,
)
from torcia.library import call

__all__ = [
    "FakeQuantize", "FakeQuantizeBase", "FixedQParamsFakeQuantize", "default_fake_quant",
    "default_fused_act_fake_quant", "default_per_channel_weight_fake_quant",
    "default_weight_fake_quant", "disable_fake_quant", "disable_observer",
    "enable_fake_quant", "enable_observer", "default_fixed_qparams_range_0to1_fake_quant",
    "default_fixed_qparams_range_neg1to1_fake_quant", "FusedMovingAvgObsFakeQuantize",
    "default_fused_per_channel_wt_fake_quant", "default_fused_wt_fake_quant",
    "default_embedding_fake_quant", "default_embedding_fake_quant_4bit",
    "default_affine_fixed_qparams_fake_quant", "default_dynamic_fake_quant",
    "default_histogram_fake_quant", "default_symmetric_fixed_qparams_fake_quant",
    "fused_per_channel_wt_fake_quant_range_neg_127_to_127",
    "fused_wt_fake_quant_range_neg_127_to_127",
]


class FakeQuantizeBase(nn.Module):
    """Base of fake quantizers: the switches for observing and for fake quantizing."""

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", torcia.tensor([1], dtype=torcia.uint8))
        self.register_buffer("observer_enabled", torcia.tensor([1], dtype=torcia.uint8))

    def enable_fake_quant(self, enabled: bool = True):
        self.fake_quant_enabled[0] = 1 if enabled else 0
        return self

    def disable_fake_quant(self):
        return self.enable_fake_quant(False)

    def enable_observer(self, enabled: bool = True):
        self.observer_enabled[0] = 1 if enabled else 0
        return self

    def disable_observer(self):
        return self.enable_observer(False)

    @classmethod
    def with_args(cls, **kwargs):
        return _PartialWrapper(functools.partial(cls, **kwargs))


class FakeQuantize(FakeQuantizeBase):
    """Observe (``observer``), then quantize and dequantize with the observed scale and
    zero point (``torch.ao.quantization.FakeQuantize``); gradients pass straight through
    where the value falls inside the quantized range.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import FakeQuantize
    >>> fq = FakeQuantize(quant_min=0, quant_max=255)
    >>> x = torcia.tensor([0.0, 0.1, 1.0], requires_grad=True)
    >>> y = fq(x)
    >>> [round(v, 4) for v in y.tolist()]  # on the grid of step 1/255
    [0.0, 0.098, 1.0]
    >>> y.sum().backward(); x.grad.tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None,
                 is_dynamic=False, **observer_kwargs):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            observer_kwargs.update(quant_min=quant_min, quant_max=quant_max)
        self.is_dynamic = is_dynamic
        self.activation_post_process = observer(is_dynamic=is_dynamic, **observer_kwargs)
        obs = self.activation_post_process
        self.quant_min, self.quant_max = obs.quant_min, obs.quant_max
        self.dtype = obs.dtype
        self.qscheme = obs.qscheme
        self.ch_axis = getattr(obs, "ch_axis", -1)
        self.is_per_channel = self.qscheme in (per_channel_affine, per_channel_symmetric,
                                               per_channel_affine_float_qparams)
        # an embedding's float-qparams zero point is a float, as PyTorch keeps it
        self._zero_dtype = torcia.float32 if self.qscheme is per_channel_affine_float_qparams \
            else torcia.int32
        self.register_buffer("scale", torcia.tensor([1.0]))
        self.register_buffer("zero_point", torcia.tensor([0], dtype=self._zero_dtype))

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def _observed_qparams(self):
        return self.calculate_qparams()

    def forward(self, X):
        if self.observer_enabled[0] == 1:
            self.activation_post_process(X.detach())
            scale, zero = self._observed_qparams()
            self.scale, self.zero_point = scale, zero.to(self._zero_dtype)
        if self.fake_quant_enabled[0] == 1:
            X = call("fake_quantize", (X, self.scale, self.zero_point),
                     {"qmin": self.quant_min, "qmax": self.quant_max,
                      "axis": self.ch_axis if self.is_per_channel else -1})
        return X

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled="
                f"{self.observer_enabled}, quant_min={self.quant_min}, quant_max="
                f"{self.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
                f"ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")


class FixedQParamsFakeQuantize(FakeQuantize):
    """Fake quantization with a fixed scale and zero point (a sigmoid's output range)."""

    def __init__(self, observer):
        super().__init__(observer=observer)
        obs = self.activation_post_process
        self.scale = torcia.tensor([float(obs.scale)])
        self.zero_point = torcia.tensor([int(obs.zero_point)], dtype=torcia.int32)
        self.disable_observer()


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """:class:`FakeQuantize` over a moving-average min/max observer, which PyTorch runs as
    one fused op (``torch.ao.quantization.FusedMovingAvgObsFakeQuantize``); the values
    are those of the unfused module.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import FusedMovingAvgObsFakeQuantize
    >>> fq = FusedMovingAvgObsFakeQuantize()
    >>> [round(v, 4) for v in fq(torcia.tensor([0.0, 0.1, 1.0])).tolist()]
    [0.0, 0.098, 1.0]
    """

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                 **observer_kwargs):
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)
        if not isinstance(self.activation_post_process,
                          (MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver)):
            raise AssertionError("Fused observer+fake_quant module only works with "
                                 "MovingAverageMinMaxObserver")
        self.register_buffer("fake_quant_enabled", torcia.tensor([1], dtype=torcia.int64))
        self.register_buffer("observer_enabled", torcia.tensor([1], dtype=torcia.int64))
        self.is_symmetric_quant = self.qscheme in (per_tensor_symmetric, per_channel_symmetric)

    def _observed_qparams(self):
        # PyTorch's fused op picks its parameters with ATen's choose_qparams, not with the
        # observer's calculate_qparams (which convert() still uses): a symmetric range is
        # [-128 s, 127 s] and the zero point is the one nearer its end of the range
        obs = self.activation_post_process
        lo = np.minimum(obs.min_val.numpy().astype(np.float64), 0.0)
        hi = np.maximum(obs.max_val.numpy().astype(np.float64), 0.0)
        qmin, qmax = obs.quant_min, obs.quant_max
        sparse = self.is_symmetric_quant & (lo < 0) & (hi > 0)
        low_q, high_q = -((qmax - qmin) // 2 + 1), (qmax - qmin) // 2
        widest = np.maximum(np.abs(lo / low_q), np.abs(hi / high_q))
        lo, hi = np.where(sparse, widest * low_q, lo), np.where(sparse, widest * high_q, hi)
        scale = ((hi - lo) / (qmax - qmin)).astype(np.float32).astype(np.float64)
        with np.errstate(divide="ignore"):
            scale = np.where((scale == 0) | np.isinf(1.0 / scale.astype(np.float32)), 0.1, scale)
        from_min, from_max = qmin - lo / scale, qmax - hi / scale
        nearer_min = abs(qmin) - np.abs(lo / scale) < abs(qmax) - np.abs(hi / scale)
        zero = np.where(sparse, (qmin + qmax) / 2, np.where(nearer_min, from_min, from_max))
        zero = np.clip(np.rint(zero), qmin, qmax)
        return (torcia.from_numpy(scale.astype(np.float32).reshape(-1)),
                torcia.from_numpy(zero.astype(np.int32).reshape(-1)))


default_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=quint8,
    qscheme=per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=qint8,
    qscheme=per_tensor_symmetric, reduce_range=False)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=qint8, qscheme=per_channel_symmetric, reduce_range=False, ch_axis=0)
default_dynamic_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, is_dynamic=True,
    dtype=quint8, averaging_constant=1)
default_histogram_fake_quant = FakeQuantize.with_args(
    observer=HistogramObserver, quant_min=0, quant_max=255, dtype=quint8,
    qscheme=per_tensor_affine, reduce_range=True)
default_embedding_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=per_channel_affine_float_qparams,
    dtype=quint8, quant_min=0, quant_max=255, ch_axis=0, averaging_constant=1)
default_embedding_fake_quant_4bit = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=per_channel_affine_float_qparams,
    ch_axis=0, dtype=quint4x2, averaging_constant=1)
default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=quint8)
default_fused_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=qint8,
    qscheme=per_tensor_symmetric)
default_fused_per_channel_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=qint8, qscheme=per_channel_symmetric)
fused_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-127, quant_max=127, dtype=qint8,
    qscheme=per_tensor_symmetric, eps=2 ** -12)
fused_per_channel_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-127, quant_max=127,
    dtype=qint8, qscheme=per_channel_symmetric, eps=2 ** -12)
default_fixed_qparams_range_0to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_0to1_observer)
default_fixed_qparams_range_neg1to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_neg1to1_observer)
default_affine_fixed_qparams_fake_quant = default_fixed_qparams_range_0to1_fake_quant
default_symmetric_fixed_qparams_fake_quant = default_fixed_qparams_range_neg1to1_fake_quant


def _switch(method):
    def apply(mod):
        if isinstance(mod, FakeQuantizeBase):
            getattr(mod, method)()

    apply.__name__ = method
    apply.__doc__ = (f"``model.apply({method})``: call ``{method}()`` on every fake "
                     "quantizer of a model.")
    return apply


enable_fake_quant = _switch("enable_fake_quant")
disable_fake_quant = _switch("disable_fake_quant")
enable_observer = _switch("enable_observer")
disable_observer = _switch("disable_observer")
