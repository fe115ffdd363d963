"""QConfig: which observer (or fake quantizer) makes the activation's and the weight's
quantization parameters of a module (``torch.ao.quantization.qconfig``), the defaults
PyTorch ships, and :class:`QConfigMapping`."""

from __future__ import annotations

import re
import warnings
from collections import namedtuple
from typing import Optional

import torcia
from torcia.ao._qtensor import qint8
from torcia.ao.quantization.fake_quantize import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    default_dynamic_fake_quant,
    default_embedding_fake_quant,
    default_embedding_fake_quant_4bit,
    default_fake_quant,
    default_fused_act_fake_quant,
    default_fused_per_channel_wt_fake_quant,
    default_fused_wt_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
    fused_per_channel_wt_fake_quant_range_neg_127_to_127,
    fused_wt_fake_quant_range_neg_127_to_127,
)
from torcia.ao.quantization.observer import (
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    NoopObserver,
    PlaceholderObserver,
    _PartialWrapper,
    default_debug_observer,
    default_dynamic_quant_observer,
    default_float_qparams_observer,
    default_float_qparams_observer_4bit,
    default_observer,
    default_per_channel_weight_observer,
    default_placeholder_observer,
    default_reuse_input_observer,
    default_weight_observer,
    per_channel_weight_observer_range_neg_127_to_127,
    weight_observer_range_neg_127_to_127,
)

__all__ = [
    "QConfig", "QConfigAny", "QConfigDynamic", "QConfigMapping", "default_dynamic_qconfig",
    "default_per_channel_qconfig", "default_qat_qconfig", "default_qconfig",
    "float16_dynamic_qconfig", "float16_static_qconfig", "float_qparams_weight_only_qconfig",
    "get_default_qat_qconfig", "get_default_qat_qconfig_mapping", "get_default_qconfig",
    "get_default_qconfig_mapping", "per_channel_dynamic_qconfig", "get_default_qat_qconfig_dict",
    "get_default_qconfig_dict", "qconfig_equals",
    "default_activation_only_qconfig", "default_debug_qconfig", "default_dynamic_qat_qconfig",
    "default_embedding_qat_qconfig", "default_embedding_qat_qconfig_4bit",
    "default_per_channel_symmetric_qnnpack_qat_qconfig",
    "default_per_channel_symmetric_qnnpack_qconfig", "default_qat_qconfig_v2",
    "default_quint8_weight_qconfig", "default_reuse_input_qconfig",
    "default_symmetric_qnnpack_qat_qconfig", "default_symmetric_qnnpack_qconfig",
    "default_weight_only_qconfig", "float_qparams_weight_only_qconfig_4bit",
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
#: a QConfig, or None for "do not quantize" (a typing form, as PyTorch's)
QConfigAny = Optional[QConfig]  # noqa: UP045

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

# the rest of PyTorch's defaults, with its observers' arguments
default_debug_qconfig = QConfig(activation=default_debug_observer, weight=default_weight_observer)
float_qparams_weight_only_qconfig_4bit = QConfig(activation=default_placeholder_observer,
                                                 weight=default_float_qparams_observer_4bit)
default_dynamic_qat_qconfig = QConfig(activation=default_dynamic_fake_quant,
                                      weight=default_weight_fake_quant)
# ``Identity`` leaves the other side float (its call returns its input)
default_weight_only_qconfig = QConfig(activation=torcia.nn.Identity,
                                      weight=default_weight_fake_quant)
default_activation_only_qconfig = QConfig(activation=default_fake_quant,
                                          weight=torcia.nn.Identity)
default_qat_qconfig_v2 = QConfig(activation=default_fused_act_fake_quant,
                                 weight=default_fused_wt_fake_quant)
default_reuse_input_qconfig = QConfig(activation=default_reuse_input_observer,
                                      weight=NoopObserver)
default_quint8_weight_qconfig = QConfig(activation=HistogramObserver, weight=MinMaxObserver)
default_embedding_qat_qconfig = QConfig(activation=NoopObserver.with_args(dtype=torcia.float32),
                                        weight=default_embedding_fake_quant)
default_embedding_qat_qconfig_4bit = QConfig(
    activation=NoopObserver.with_args(dtype=torcia.float32),
    weight=default_embedding_fake_quant_4bit)
# qnnpack's symmetric int8 activations: eps 2**-12 keeps XNNPACK's requantization scale
# (input scale * weight scale / output scale) inside the range it accepts
default_symmetric_qnnpack_qconfig = QConfig(
    activation=HistogramObserver.with_args(dtype=qint8, reduce_range=False, eps=2**-12),
    weight=weight_observer_range_neg_127_to_127)
default_per_channel_symmetric_qnnpack_qconfig = QConfig(
    activation=HistogramObserver.with_args(dtype=qint8, reduce_range=False, eps=2**-12),
    weight=per_channel_weight_observer_range_neg_127_to_127)
_symmetric_qnnpack_qat_activation = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=qint8,
    reduce_range=False, eps=2**-12)
default_symmetric_qnnpack_qat_qconfig = QConfig(
    activation=_symmetric_qnnpack_qat_activation,
    weight=fused_wt_fake_quant_range_neg_127_to_127)
default_per_channel_symmetric_qnnpack_qat_qconfig = QConfig(
    activation=_symmetric_qnnpack_qat_activation,
    weight=fused_per_channel_wt_fake_quant_range_neg_127_to_127)

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
    averages of the activations, per-channel int8 weights (x86). Version 1 (the
    default) observes and fake-quantizes in one module,
    :class:`FusedMovingAvgObsFakeQuantize`, as PyTorch's does; version 0 uses
    :class:`FakeQuantize`.

    Examples
    --------
    >>> from torcia.ao.quantization import get_default_qat_qconfig
    >>> type(get_default_qat_qconfig().weight()).__name__
    'FusedMovingAvgObsFakeQuantize'
    >>> type(get_default_qat_qconfig(version=0).weight()).__name__
    'FakeQuantize'
    """
    _check_backend(backend)
    if version not in (0, 1):
        raise AssertionError(f"Version number: {version}in get_default_qat_qconfig is not "
                             f"supported. Version number must be 0 or 1")
    # version 1 observes and fake-quantizes in one module, the same values as version 0's
    fake_quant = FusedMovingAvgObsFakeQuantize if version == 1 else FakeQuantize
    if backend == "qnnpack":
        weight = default_fused_wt_fake_quant if version == 1 else default_weight_fake_quant
    else:
        weight = default_fused_per_channel_wt_fake_quant if version == 1 \
            else default_per_channel_weight_fake_quant
    reduce = {"onednn": {}, "qnnpack": {"reduce_range": False}}.get(
        backend, {"reduce_range": True})
    return QConfig(activation=fake_quant.with_args(
        observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, **reduce),
        weight=weight)


def qconfig_equals(q1, q2) -> bool:
    """Whether two QConfigs make the same observers: factories made by ``with_args``
    compare by class and arguments (``torch.ao.quantization.qconfig_equals``).

    Examples
    --------
    >>> from torcia.ao.quantization import get_default_qconfig, qconfig_equals
    >>> qconfig_equals(get_default_qconfig("x86"), get_default_qconfig("x86"))
    True
    >>> qconfig_equals(get_default_qconfig("x86"), get_default_qconfig("qnnpack"))
    False
    """
    if q1 is None or q2 is None:
        return q1 == q2
    try:
        return (_factories_equal(q1.activation, q2.activation)
                and _factories_equal(q1.weight, q2.weight))
    except AttributeError:
        return q1 == q2


def _factories_equal(f1, f2) -> bool:
    if not (isinstance(f1, _PartialWrapper) and isinstance(f2, _PartialWrapper)):
        return f1 == f2
    k1, k2 = dict(f1.p.keywords), dict(f2.p.keywords)
    if "observer" in k1 and "observer" in k2 \
            and not _factories_equal(k1.pop("observer"), k2.pop("observer")):
        return False
    return f1.p.func == f2.p.func and f1.p.args == f2.p.args and k1 == k2


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
        self.module_name_regex_qconfigs: dict = {}
        self.module_name_qconfigs: dict = {}

    def set_global(self, global_qconfig):
        self.global_qconfig = global_qconfig
        return self

    def set_object_type(self, object_type, qconfig):
        self.object_type_qconfigs[object_type] = qconfig
        return self

    def set_module_name_regex(self, module_name_regex: str, qconfig):
        """The QConfig of the modules whose names match ``module_name_regex``
        (``re.match``); the first regex set that matches wins."""
        self.module_name_regex_qconfigs[module_name_regex] = qconfig
        return self

    def set_module_name(self, module_name: str, qconfig):
        self.module_name_qconfigs[module_name] = qconfig
        return self

    def qconfig_for(self, name: str, module):
        """The QConfig of the module called ``name``: by name, then by the first name
        regex that matches, then by type, then the global one."""
        if name in self.module_name_qconfigs:
            return self.module_name_qconfigs[name]
        for pattern, qconfig in self.module_name_regex_qconfigs.items():
            if re.match(pattern, name):
                return qconfig
        for kind, qconfig in self.object_type_qconfigs.items():
            if type(module) is kind:
                return qconfig
        return self.global_qconfig

    def to_dict(self) -> dict:
        """The mapping as PyTorch's ``qconfig_dict``: ``""`` for the global QConfig, then
        lists of pairs under ``"object_type"``, ``"module_name_regex"``, ``"module_name"``.

        Examples
        --------
        >>> import torcia
        >>> from torcia.ao.quantization import QConfigMapping
        >>> QConfigMapping().set_object_type(torcia.nn.LSTM, None).to_dict()["object_type"]
        [(<class 'torcia.nn.modules.rnn.LSTM'>, None)]
        """
        return {"": self.global_qconfig,
                "object_type": list(self.object_type_qconfigs.items()),
                "module_name_regex": list(self.module_name_regex_qconfigs.items()),
                "module_name": list(self.module_name_qconfigs.items()),
                "module_name_object_type_order": []}

    @classmethod
    def from_dict(cls, qconfig_dict: dict) -> QConfigMapping:
        """The mapping of a ``qconfig_dict`` (the form :meth:`to_dict` gives)."""
        if qconfig_dict.get("module_name_object_type_order"):
            raise NotImplementedError("module_name_object_type_order needs FX graph mode's "
                                      "call order, which eager quantization does not have")
        mapping = cls()
        if "" in qconfig_dict:
            mapping.set_global(qconfig_dict[""])
        for key, setter in (("object_type", mapping.set_object_type),
                            ("module_name_regex", mapping.set_module_name_regex),
                            ("module_name", mapping.set_module_name)):
            for target, qconfig in qconfig_dict.get(key, []):
                setter(target, qconfig)
        return mapping


def get_default_qconfig_dict(backend: str = "x86", version: int = 0) -> dict:
    """:func:`get_default_qconfig_mapping` as a ``qconfig_dict`` (deprecated in PyTorch
    too: use the mapping)."""
    warnings.warn("`torch.ao.quantization.get_default_qconfig_dict` is deprecated and will "
                  "be removed in a future version. Please use `torch.ao.quantization."
                  "get_default_qconfig_mapping` instead.", FutureWarning, stacklevel=2)
    return get_default_qconfig_mapping(backend, version).to_dict()


def get_default_qat_qconfig_dict(backend: str = "x86", version: int = 1) -> dict:
    """:func:`get_default_qat_qconfig_mapping` as a ``qconfig_dict`` (deprecated in
    PyTorch too: use the mapping)."""
    warnings.warn("`torch.ao.quantization.get_default_qat_qconfig_dict` is deprecated and "
                  "will be removed in a future version. Please use `torch.ao.quantization."
                  "get_default_qat_qconfig_mapping` instead.", FutureWarning, stacklevel=2)
    return get_default_qat_qconfig_mapping(backend, version).to_dict()


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

