"""Reference (simulated) quantized modules (``torch.ao.nn.quantized.reference``): float
modules whose weights pass through quantize and dequantize with given parameters before
each call, so that a model shows the numerics of its quantized weights in float
arithmetic; what :func:`~torcia.ao.quantization.get_default_static_quant_reference_module_mappings`
maps the float modules to.

Each weight's parameters are PyTorch's ``weight_qparams`` dictionary (``qscheme``,
``dtype``, ``scale``, ``zero_point``, ``axis`` for per-channel ones), kept as the buffers
``<weight>_scale``, ``<weight>_zero_point``, ``<weight>_axis`` and the attributes
``<weight>_qscheme``, ``<weight>_dtype``; the recurrent modules take one per weight
(``weight_qparams_dict``, keyed by the weights' names, and ``is_decomposed``).

Examples
--------
>>> import torcia
>>> from torcia.ao.nn.quantized import reference as nnqr
>>> float_layer = torcia.nn.Linear(3, 2)
>>> ref = nnqr.Linear.from_float(float_layer, {"qscheme": torcia.per_tensor_affine,
...                                           "dtype": torcia.qint8, "scale": 0.1,
...                                           "zero_point": 0})
>>> w = ref.get_weight()
>>> bool(((w / 0.1).round() * 0.1 - w).abs().max() < 1e-6)
True
>>> x = torcia.randn(4, 3)
>>> torcia.allclose(ref(x), torcia.nn.functional.linear(x, w, float_layer.bias))
True
"""

from __future__ import annotations

import copy

import torcia
from torcia import nn
from torcia.ao._qtensor import (
    per_channel_affine,
    per_channel_affine_float_qparams,
    per_tensor_affine,
    qint8,
    qint32,
    quantize_per_channel,
    quantize_per_tensor,
    quint4x2,
    quint8,
)
from torcia.nn.utils.stateless import functional_call

__all__ = ["GRU", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "Embedding", "EmbeddingBag", "GRUCell", "LSTM", "LSTMCell",
           "Linear", "RNNCell"]

_SCHEMES = (None, per_tensor_affine, per_channel_affine, per_channel_affine_float_qparams)
_INTEGER = (quint8, qint8, quint4x2, qint32)
_DEFAULT = {"qscheme": per_tensor_affine, "dtype": quint8, "scale": 1.0, "zero_point": 0}


def _buffer(value, dtype):
    return value.detach().clone() if isinstance(value, torcia.Tensor) \
        else torcia.tensor(value, dtype=dtype)


class _Reference:
    """What the reference modules share: each weight of ``_WEIGHTS`` quantized and
    dequantized with its parameters before the float module's forward runs."""

    _WEIGHTS: tuple = ("weight",)
    _FLOAT: type = nn.Module

    def _init_qparams(self, key: str, qparams) -> None:
        qscheme, dtype = qparams["qscheme"], qparams["dtype"]
        if qscheme not in _SCHEMES:
            raise AssertionError(f"qscheme: {qscheme} is not supported in reference "
                                 f"quantized {self._get_name()}")
        setattr(self, f"{key}_qscheme", qscheme)
        setattr(self, f"{key}_dtype", dtype)
        integer = dtype in _INTEGER and qscheme is not None
        self.register_buffer(f"{key}_scale", _buffer(qparams["scale"], torcia.float32)
                             if integer else torcia.tensor(1.0))
        self.register_buffer(f"{key}_zero_point", _buffer(qparams["zero_point"], torcia.int32)
                             if integer else torcia.tensor(0, dtype=torcia.int32))
        per_channel = integer and qscheme in (per_channel_affine,
                                              per_channel_affine_float_qparams)
        self.register_buffer(f"{key}_axis", _buffer(qparams["axis"], torcia.int32)
                             if per_channel else torcia.tensor(0, dtype=torcia.int32))

    def _init_weight_qparams(self, weight_qparams, device=None) -> None:
        self._init_qparams("weight", weight_qparams or _DEFAULT)
        self.is_decomposed = bool((weight_qparams or {}).get("is_decomposed", False))
        self.weight_axis_int = int(self.weight_axis)

    def _init_weight_qparams_dict(self, weight_qparams_dict, device=None) -> None:
        if weight_qparams_dict is None:
            raise AssertionError("weight_qparams_dict must not be None")
        self.is_decomposed = bool(weight_qparams_dict.get("is_decomposed", False))
        for key, qparams in weight_qparams_dict.items():
            if key != "is_decomposed":
                self._init_qparams(key, qparams)

    def _quantized(self, key: str):
        weight = getattr(self, key).detach()
        qscheme, dtype = getattr(self, f"{key}_qscheme"), getattr(self, f"{key}_dtype")
        if dtype is torcia.float16:
            return weight.to(torcia.float16)
        scale, zero = getattr(self, f"{key}_scale"), getattr(self, f"{key}_zero_point")
        if qscheme == per_tensor_affine and dtype in (quint8, qint8, qint32):
            return quantize_per_tensor(weight, float(scale), int(zero), dtype)
        if qscheme in (per_channel_affine, per_channel_affine_float_qparams) \
                and dtype in _INTEGER:
            return quantize_per_channel(weight, scale, zero,
                                        int(getattr(self, f"{key}_axis")), dtype)
        raise ValueError(f"Unsupported dtype and qscheme: {dtype}, {qscheme}")

    def _simulated(self, key: str):
        if getattr(self, f"{key}_qscheme") is None:
            return getattr(self, key)
        quantized = self._quantized(key)
        return quantized.to(torcia.float32) if isinstance(quantized, torcia.Tensor) \
            else quantized.dequantize()

    def get_weight(self):
        """The weight quantized and dequantized with its parameters."""
        return self._simulated("weight")

    def get_quantized_weight(self):
        """The weight quantized with its parameters."""
        return self._quantized("weight")

    def forward(self, *args, **kwargs):
        if getattr(self, "_running", False):  # inside functional_call: the float forward
            return super().forward(*args, **kwargs)
        weights = {key: self._simulated(key) for key in self._keys()}
        self._running = True
        try:
            return functional_call(self, weights, args, kwargs)
        finally:
            self._running = False

    def _keys(self) -> tuple:
        return self._WEIGHTS

    @classmethod
    def from_float(cls, float_module, weight_qparams):
        """The reference module of ``float_module``: its configuration and (detached)
        weights, with ``weight_qparams`` (a dict of dicts by weight name for the
        recurrent modules)."""
        ref = copy.deepcopy(float_module)
        # the float module's state as it is, its class the reference one's (a subclass)
        ref.__class__ = cls
        ref._init_from(weight_qparams)
        return ref

    def _init_from(self, weight_qparams) -> None:
        self._init_weight_qparams(weight_qparams)

    def _get_name(self):
        return f"Quantized{self._FLOAT.__name__}(Reference)"

    def extra_repr(self):
        return (f"{super().extra_repr()}, weight_qscheme={getattr(self, 'weight_qscheme', None)}"
                f", weight_dtype={getattr(self, 'weight_dtype', None)}")


def _single(float_cls: type, doc: str) -> type:
    def __init__(self, *args, weight_qparams=None, device=None, dtype=None, **kwargs):
        if "bias_" in kwargs:  # PyTorch's reference Linear names its flag so
            kwargs["bias"] = kwargs.pop("bias_")
        float_cls.__init__(self, *args, **kwargs)
        self._init_weight_qparams(weight_qparams)

    return type(float_cls.__name__, (_Reference, float_cls),
                {"__init__": __init__, "__doc__": doc, "__module__": __name__,
                 "_FLOAT": float_cls})


Linear = _single(nn.Linear, "A reference quantized Linear layer "
                 "(``torch.ao.nn.quantized.reference.Linear``).")
Conv1d = _single(nn.Conv1d, "``torch.ao.nn.quantized.reference.Conv1d``.")
Conv2d = _single(nn.Conv2d, "``torch.ao.nn.quantized.reference.Conv2d``.")
Conv3d = _single(nn.Conv3d, "``torch.ao.nn.quantized.reference.Conv3d``.")
ConvTranspose1d = _single(nn.ConvTranspose1d,
                          "``torch.ao.nn.quantized.reference.ConvTranspose1d``.")
ConvTranspose2d = _single(nn.ConvTranspose2d,
                          "``torch.ao.nn.quantized.reference.ConvTranspose2d``.")
ConvTranspose3d = _single(nn.ConvTranspose3d,
                          "``torch.ao.nn.quantized.reference.ConvTranspose3d``.")
Embedding = _single(nn.Embedding, "``torch.ao.nn.quantized.reference.Embedding``.")
EmbeddingBag = _single(nn.EmbeddingBag, "``torch.ao.nn.quantized.reference.EmbeddingBag``.")


class _Recurrent(_Reference):
    """The recurrent modules: every ``weight_*`` parameter has its own parameters."""

    def _keys(self) -> tuple:
        return tuple(name for name, _ in self.named_parameters() if name.startswith("weight"))

    def _init_from(self, weight_qparams_dict) -> None:
        self._init_weight_qparams_dict(weight_qparams_dict)

    def get_weight_ih(self):
        return self._simulated("weight_ih")

    def get_weight_hh(self):
        return self._simulated("weight_hh")

    def get_quantized_weight_ih(self):
        return self._quantized("weight_ih")

    def get_quantized_weight_hh(self):
        return self._quantized("weight_hh")

    def extra_repr(self):
        return super(_Reference, self).extra_repr()


def _recurrent(float_cls: type) -> type:
    def __init__(self, *args, weight_qparams_dict=None, device=None, dtype=None, **kwargs):
        float_cls.__init__(self, *args, **kwargs)
        if weight_qparams_dict is None:
            weight_qparams_dict = {"is_decomposed": False, **{
                key: dict(_DEFAULT, dtype=qint8) for key in self._keys()}}
        self._init_weight_qparams_dict(weight_qparams_dict)

    return type(float_cls.__name__, (_Recurrent, float_cls),
                {"__init__": __init__, "__module__": __name__, "_FLOAT": float_cls,
                 "__doc__": f"``torch.ao.nn.quantized.reference.{float_cls.__name__}``."})


RNNCell = _recurrent(nn.RNNCell)
LSTMCell = _recurrent(nn.LSTMCell)
GRUCell = _recurrent(nn.GRUCell)
LSTM = _recurrent(nn.LSTM)
GRU = _recurrent(nn.GRU)
