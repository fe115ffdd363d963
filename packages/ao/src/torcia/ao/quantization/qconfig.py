"""QConfig: which observer (or fake quantizer) makes the activation's and the weight's
quantization parameters of a module (``torch.ao.quantization.qconfig``), the defaults
PyTorch ships, and :class:`QConfigMapping`."""

from __future__ import annotations

from collections import namedtuple

import torcia
from torcia.ao.quantization.fake_quantize import (
    FakeQuantize,
    default_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
)
from torcia.ao.quantization.observer import (
    HistogramObserver,
    MovingAverageMinMaxObserver,
    NoopObserver,
    PlaceholderObserver,
    default_dynamic_quant_observer,
    default_float_qparams_observer,
    default_observer,
    default_per_channel_weight_observer,
    default_weight_observer,
)

__all__ = [
    "QConfig", "QConfigDynamic", "QConfigMapping", "default_dynamic_qconfig",
    "default_per_channel_qconfig", "default_qat_qconfig", "default_qconfig",
    "float16_dynamic_qconfig", "float16_static_qconfig", "float_qparams_weight_only_qconfig",
    "get_default_qat_qconfig", "get_default_qat_qconfig_mapping", "get_default_qconfig",
    "get_default_qconfig_mapping", "per_channel_dynamic_qconfig",
]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """How to quantize a module: ``activation`` and ``weight`` are observer (or fake
    quantizer) factories, e.g. ``MinMaxObserver.with_args(dtype=torcia.qint8)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import QConfig, MinMaxObserver
    >>> qc = QConfig(activation=MinMaxObserver, weight=MinMaxObserver.with_args(
    ...     dtype=torcia.qint8))
    >>> qc.weight().dtype
    torcia.qint8
    """

    __slots__ = ()

    def __new__(cls, activation, weight):
        if isinstance(activation, torcia.nn.Module) or isinstance(weight, torcia.nn.Module):
            raise ValueError("QConfig received observer instance, please pass observer class "
                             "instead. Use MyObserver.with_args(x=1) to override arguments to "
                             "constructor if needed")
        return super().__new__(cls, activation, weight)


QConfigDynamic = QConfig

default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_per_channel_qconfig = QConfig(activation=default_observer,
                                      weight=default_per_channel_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                  weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float16_dynamic_qconfig = QConfig(
    activation=PlaceholderObserver.with_args(dtype=torcia.float16, is_dynamic=True),
    weight=PlaceholderObserver.with_args(dtype=torcia.float16))
float16_static_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=torcia.float16),
                                 weight=PlaceholderObserver.with_args(dtype=torcia.float16))
float_qparams_weight_only_qconfig = QConfig(activation=NoopObserver,
                                            weight=default_float_qparams_observer)
default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)

_BACKENDS = ("x86", "fbgemm", "qnnpack", "onednn")


def _check_backend(backend):
    if backend not in _BACKENDS:
        raise AssertionError(f"Unknown backend {backend!r}: expected one of "
                             f"{', '.join(_BACKENDS)}")


def get_default_qconfig(backend: str = "x86", version: int = 0) -> QConfig:
    """The post-training QConfig PyTorch uses for ``backend``: on x86 (and fbgemm,
    onednn) a histogram of the activations on 7-bit uint8 and per-channel symmetric
    int8 weights; on qnnpack min/max and per-tensor weights.

    Examples
    --------
    >>> from torcia.ao.quantization import get_default_qconfig
    >>> qc = get_default_qconfig("x86")
    >>> type(qc.activation()).__name__, qc.activation().quant_max
    ('HistogramObserver', 127)
    """
    _check_backend(backend)
    if backend == "qnnpack":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                       weight=default_weight_observer)
    return QConfig(activation=HistogramObserver.with_args(reduce_range=backend != "onednn"),
                   weight=default_per_channel_weight_observer)


def get_default_qat_qconfig(backend: str = "x86", version: int = 1) -> QConfig:
    """The quantization-aware-training QConfig PyTorch uses for ``backend``: moving
    averages of the activations, per-channel int8 weights (x86).

    Examples
    --------
    >>> from torcia.ao.quantization import get_default_qat_qconfig
    >>> type(get_default_qat_qconfig().weight()).__name__
    'FakeQuantize'
    """
    _check_backend(backend)
    if backend == "qnnpack":
        return QConfig(activation=FakeQuantize.with_args(
            observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
            reduce_range=False), weight=default_weight_fake_quant)
    return QConfig(activation=FakeQuantize.with_args(
        observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
        reduce_range=backend != "onednn"), weight=default_per_channel_weight_fake_quant)


class QConfigMapping:
    """Which QConfig each part of a model gets: a global one, by module type, by module
    name (``torch.ao.quantization.QConfigMapping``); :func:`prepare` and
    :func:`prepare_qat` accept it in place of ``model.qconfig``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import QConfigMapping, default_qconfig
    >>> mapping = QConfigMapping().set_global(default_qconfig).set_object_type(
    ...     torcia.nn.LSTM, None)
    >>> mapping.object_type_qconfigs[torcia.nn.LSTM] is None
    True
    """

    def __init__(self):
        self.global_qconfig = None
        self.object_type_qconfigs: dict = {}
        self.module_name_qconfigs: dict = {}

    def set_global(self, global_qconfig):
        self.global_qconfig = global_qconfig
        return self

    def set_object_type(self, object_type, qconfig):
        self.object_type_qconfigs[object_type] = qconfig
        return self

    def set_module_name(self, module_name: str, qconfig):
        self.module_name_qconfigs[module_name] = qconfig
        return self

    def qconfig_for(self, name: str, module):
        """The QConfig of the module called ``name``: by name, then by type, then the
        global one."""
        if name in self.module_name_qconfigs:
            return self.module_name_qconfigs[name]
        for kind, qconfig in self.object_type_qconfigs.items():
            if type(module) is kind:
                return qconfig
        return self.global_qconfig


def get_default_qconfig_mapping(backend: str = "x86", version: int = 0) -> QConfigMapping:
    """A :class:`QConfigMapping` of :func:`get_default_qconfig` for every module.

    Examples
    --------
    >>> from torcia.ao.quantization import get_default_qconfig_mapping
    >>> get_default_qconfig_mapping().global_qconfig is not None
    True
    """
    return QConfigMapping().set_global(get_default_qconfig(backend, version))


def get_default_qat_qconfig_mapping(backend: str = "x86", version: int = 1) -> QConfigMapping:
    """A :class:`QConfigMapping` of :func:`get_default_qat_qconfig` for every module."""
    return QConfigMapping().set_global(get_default_qat_qconfig(backend, version))

