"""Fake quantization: quantize and dequantize in the forward pass, the straight-through
gradient in the backward, so that training sees int8's rounding
(``torch.ao.quantization.fake_quantize``)."""

from __future__ import annotations

import functools

import torcia
from torcia import nn
from torcia.ao._qtensor import (
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qint8,
    quint8,
)
from torcia.ao.quantization.observer import (
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
    "default_fixed_qparams_range_neg1to1_fake_quant",
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
        self.activation_post_process = observer(**observer_kwargs)
        obs = self.activation_post_process
        self.quant_min, self.quant_max = obs.quant_min, obs.quant_max
        self.dtype = obs.dtype
        self.qscheme = obs.qscheme
        self.ch_axis = getattr(obs, "ch_axis", -1)
        self.is_per_channel = self.qscheme in (per_channel_affine, per_channel_symmetric)
        self.register_buffer("scale", torcia.tensor([1.0]))
        self.register_buffer("zero_point", torcia.tensor([0], dtype=torcia.int64))

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, X):
        if self.observer_enabled[0] == 1:
            self.activation_post_process(X.detach())
            scale, zero = self.calculate_qparams()
            self.scale, self.zero_point = scale, zero.to(torcia.int64)
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
        self.zero_point = torcia.tensor([int(obs.zero_point)], dtype=torcia.int64)
        self.disable_observer()


default_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=quint8,
    qscheme=per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=qint8,
    qscheme=per_tensor_symmetric, reduce_range=False)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=qint8, qscheme=per_channel_symmetric, reduce_range=False, ch_axis=0)
default_fused_act_fake_quant = default_fake_quant
default_fixed_qparams_range_0to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_0to1_observer)
default_fixed_qparams_range_neg1to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_neg1to1_observer)


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
