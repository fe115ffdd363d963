"""Eager-mode quantization (``torch.ao.quantization.quantize``): stubs, fusion,
``prepare``/``convert`` for post-training static quantization, ``prepare_qat`` for
quantization-aware training, ``quantize_dynamic``.

The flow PyTorch users know: set ``model.qconfig``, ``fuse_modules`` the conv-bn-relu and
linear-relu sequences, ``prepare`` (observers after every quantizable layer and stub),
run calibration data, ``convert`` (each layer swapped for its quantized module, which
reads its observer's scale and zero point). Quantized tensors flow between the stubs:
a ``QuantStub`` starts them, a ``DeQuantStub`` ends them.
"""

from __future__ import annotations

import copy
import itertools

import torcia
from torcia import nn
from torcia.ao._qtensor import qint8
from torcia.ao.nn import intrinsic as nni
from torcia.ao.nn import qat as nnqat
from torcia.ao.nn import quantizable as nnqa
from torcia.ao.nn import quantized as nnq
from torcia.ao.nn.intrinsic import qat as nniqat
from torcia.ao.nn.intrinsic import quantized as nniq
from torcia.ao.nn.quantized import dynamic as nnqd
from torcia.ao.nn.quantized import reference as nnqr
from torcia.ao.nn.quantized._modules import (
    _FixedRangeHardsigmoid,
    _FixedRangeSigmoid,
    _FixedRangeTanh,
)
from torcia.ao.quantization.fake_quantize import (
    FakeQuantizeBase,
    default_fixed_qparams_range_0to1_fake_quant,
    default_fixed_qparams_range_neg1to1_fake_quant,
)
from torcia.ao.quantization.observer import ObserverBase
from torcia.ao.quantization.qconfig import (
    QConfigMapping,
    default_dynamic_qconfig,
    float16_dynamic_qconfig,
)
from torcia.ao.quantization.utils import MatchAllNode
from torcia.nn.modules.linear import NonDynamicallyQuantizableLinear
from torcia.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

__all__ = [
    "DeQuantStub", "QuantStub", "QuantWrapper", "add_quant_dequant", "convert",
    "fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn", "fuse_modules",
    "fuse_modules_qat", "get_combined_dict", "get_default_dynamic_quant_module_mappings",
    "get_default_qat_module_mappings", "get_default_static_quant_module_mappings",
    "get_default_custom_config_dict", "get_dynamic_quant_module_class", "get_fuser_method",
    "get_static_quant_module_class", "no_observer_set", "prepare", "prepare_qat",
    "propagate_qconfig_", "quantize", "quantize_dynamic", "quantize_qat", "swap_module",
    "default_eval_fn", "fuse_convtranspose_bn", "get_default_compare_output_module_list",
    "get_default_qconfig_propagation_list", "get_embedding_qat_module_mappings",
    "get_embedding_static_quant_module_mappings", "get_fuser_method_new",
    "get_default_static_quant_reference_module_mappings",
]


class QuantStub(nn.Module):
    """Where quantized tensors start: the identity in the float model, an observer after
    ``prepare``, a :class:`~torcia.ao.nn.quantized.Quantize` after ``convert``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import QuantStub
    >>> QuantStub()(torcia.ones(2)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(nn.Module):
    """Where quantized tensors end: a :class:`~torcia.ao.nn.quantized.DeQuantize` after
    ``convert``."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantWrapper(nn.Module):
    """``module`` between a QuantStub and a DeQuantStub (``torch.ao.quantization.
    QuantWrapper``), its qconfig taken along.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import QuantWrapper
    >>> sorted(n for n, _ in QuantWrapper(torcia.nn.Linear(2, 2)).named_children())
    ['dequant', 'module', 'quant']
    """

    def __init__(self, module):
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X):
        return self.dequant(self.module(self.quant(X)))


def add_quant_dequant(module):
    """Wrap every leaf with a qconfig in a :class:`QuantWrapper` (in place)."""
    if not module._modules and getattr(module, "qconfig", None):
        return QuantWrapper(module)
    for name, child in module.named_children():
        module._modules[name] = add_quant_dequant(child)
    return module


# ---------------------------------------------------------------------------------------
# fusion
# ---------------------------------------------------------------------------------------


_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _same_mode(first, bn, what: str) -> None:
    if first.training != bn.training:
        raise AssertionError(f"{what} and BN both must be in the same mode (train or eval).")


def _check_qat_bn(bn, out: int, what: str) -> None:
    if bn.num_features != out:
        raise AssertionError(f"Output channel of {what} must match num_features of "
                             f"BatchNorm")
    if not (bn.affine and bn.track_running_stats):
        raise AssertionError("Only support fusing BatchNorm with affine set to True and "
                             "tracking_running_stats set to True")


def fuse_conv_bn(is_qat, conv, bn):
    """A convolution and its BatchNorm as one module (``torch.ao.quantization.
    fuse_conv_bn``): the BatchNorm folded into the weights, or, for QAT (``is_qat``),
    ``ConvBn1d``/``ConvBn2d``/``ConvBn3d``.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao.quantization import fuse_conv_bn
    >>> conv, bn = nn.Conv2d(3, 4, 3).eval(), nn.BatchNorm2d(4).eval()
    >>> x = torcia.randn(1, 3, 5, 5)
    >>> bool(torcia.allclose(fuse_conv_bn(False, conv, bn)(x), bn(conv(x)), atol=1e-5))
    True
    """
    _same_mode(conv, bn, "Conv")
    if is_qat:
        _check_qat_bn(bn, conv.out_channels, type(conv).__name__)
        return _CONV_FUSED[type(conv)][0](conv, bn)
    return fuse_conv_bn_eval(conv, bn)


def fuse_conv_bn_relu(is_qat, conv, bn, relu):
    """Convolution, BatchNorm and ReLU as one module (``torch.ao.quantization.
    fuse_conv_bn_relu``): ``ConvReLU*d`` of the folded convolution, or ``ConvBnReLU*d``
    for QAT.

    Examples
    --------
    >>> from torcia import nn
    >>> from torcia.ao.quantization import fuse_conv_bn_relu
    >>> type(fuse_conv_bn_relu(True, nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())).__name__
    'ConvBnReLU2d'
    """
    _same_mode(conv, bn, "Conv")
    _, conv_bn_relu, conv_relu = _CONV_FUSED[type(conv)]
    if is_qat:
        _check_qat_bn(bn, conv.out_channels, type(conv).__name__)
        return conv_bn_relu(conv, bn, relu)
    return conv_relu(fuse_conv_bn_eval(conv, bn), relu)


def fuse_linear_bn(is_qat, linear, bn):
    """A Linear layer with its BatchNorm1d folded in, or ``LinearBn1d`` for QAT
    (``torch.ao.quantization.fuse_linear_bn``).

    Examples
    --------
    >>> from torcia import nn
    >>> from torcia.ao.quantization import fuse_linear_bn
    >>> type(fuse_linear_bn(False, nn.Linear(4, 2).eval(), nn.BatchNorm1d(2).eval())).__name__
    'Linear'
    """
    _same_mode(linear, bn, "Linear")
    if is_qat:
        _check_qat_bn(bn, linear.out_features, "Linear")
        return nni.LinearBn1d(linear, bn)
    return fuse_linear_bn_eval(linear, bn)


def _sequence(fused_kind):
    """The fuser method that puts two modules in ``fused_kind``."""
    def fuse(is_qat, first, second):
        return fused_kind(first, second)
    return fuse


#: each convolution's fused kinds: with BatchNorm, with BatchNorm and ReLU, with ReLU
_CONV_FUSED = {nn.Conv1d: (nni.ConvBn1d, nni.ConvBnReLU1d, nni.ConvReLU1d),
               nn.Conv2d: (nni.ConvBn2d, nni.ConvBnReLU2d, nni.ConvReLU2d),
               nn.Conv3d: (nni.ConvBn3d, nni.ConvBnReLU3d, nni.ConvReLU3d)}
#: what fuse_modules fuses (PyTorch's table), sequence of types -> fuser method
_FUSER_METHODS = {
    **{(conv, bn): fuse_conv_bn for conv, bn in zip(_CONV_FUSED, _BATCH_NORMS, strict=True)},
    **{(conv, bn, nn.ReLU): fuse_conv_bn_relu
       for conv, bn in zip(_CONV_FUSED, _BATCH_NORMS, strict=True)},
    **{(conv, nn.ReLU): _sequence(kinds[2]) for conv, kinds in _CONV_FUSED.items()},
    (nn.Linear, nn.BatchNorm1d): fuse_linear_bn,
    (nn.Linear, nn.ReLU): _sequence(nni.LinearReLU),
    (nn.BatchNorm2d, nn.ReLU): _sequence(nni.BNReLU2d),
    (nn.BatchNorm3d, nn.ReLU): _sequence(nni.BNReLU3d),
}


def fuse_known_modules(mod_list, is_qat=False, additional_fuser_method_mapping=None):
    """The fused module of a sequence (conv-bn, conv-bn-relu, conv-relu in 1, 2 or 3
    dimensions, transposed conv-bn, linear-bn, linear-relu, bn-relu) and identities for
    the rest of it (``torch.ao.quantization.fuse_modules.fuse_known_modules``)."""
    method = get_fuser_method(tuple(type(m) for m in mod_list),
                              additional_fuser_method_mapping)
    return [method(is_qat, *mod_list)] + [nn.Identity() for _ in mod_list[1:]]


def fuse_convtranspose_bn(is_qat, convt, bn):
    """A transposed convolution with its eval-mode BatchNorm folded in
    (``torch.ao.quantization.fuse_convtranspose_bn``; not for QAT, as in PyTorch).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao.quantization import fuse_convtranspose_bn
    >>> convt, bn = nn.ConvTranspose2d(3, 4, 3).eval(), nn.BatchNorm2d(4).eval()
    >>> x = torcia.randn(1, 3, 5, 5)
    >>> bool(torcia.allclose(fuse_convtranspose_bn(False, convt, bn)(x), bn(convt(x)),
    ...                      atol=1e-5))
    True
    """
    if convt.training != bn.training:
        raise AssertionError("ConvTranspose and BN both must be in the same mode "
                             "(train or eval).")
    if is_qat:
        raise Exception("Fusing ConvTranspose+BatchNorm not yet supported in QAT.")  # noqa: TRY002
    return fuse_conv_bn_eval(convt, bn, transpose=True)


_FUSER_METHODS.update({
    (convt, bn): fuse_convtranspose_bn for convt, bn in zip(
        (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d), _BATCH_NORMS, strict=True)})


def get_combined_dict(default_dict, additional_dict) -> dict:
    """``default_dict`` updated with ``additional_dict``, a new dict
    (``torch.ao.quantization.get_combined_dict``).

    Examples
    --------
    >>> from torcia.ao.quantization import get_combined_dict
    >>> get_combined_dict({"a": 1, "b": 2}, {"b": 3})
    {'a': 1, 'b': 3}
    """
    return {**default_dict, **additional_dict}


def get_fuser_method(op_list, additional_fuser_method_mapping=None):
    """The function ``(is_qat, *modules) -> fused module`` for a tuple of module types
    (``torch.ao.quantization.get_fuser_method``).

    Examples
    --------
    >>> from torcia import nn
    >>> from torcia.ao.quantization import get_fuser_method
    >>> fuser = get_fuser_method((nn.Linear, nn.ReLU))
    >>> type(fuser(False, nn.Linear(2, 2), nn.ReLU())).__name__
    'LinearReLU'
    """
    methods = get_combined_dict(_FUSER_METHODS, additional_fuser_method_mapping or {})
    method = methods.get(op_list)
    if method is None:
        raise AssertionError(f"did not find fuser method for: {op_list} ")
    return method


def _valid_patterns(pattern) -> list:
    """``pattern`` and every form of it with elements replaced by MatchAllNode, most
    specific first."""
    if isinstance(pattern, (tuple, list)):
        return list(itertools.product(*(_valid_patterns(part) for part in pattern)))
    return [pattern, MatchAllNode]


def get_fuser_method_new(op_pattern, fuser_method_mapping):
    """The fuser method of ``op_pattern`` in ``fuser_method_mapping``, whose keys may
    use :class:`MatchAllNode` for any op (``torch.ao.quantization.get_fuser_method_new``).

    Examples
    --------
    >>> from torcia import nn
    >>> from torcia.ao.quantization import MatchAllNode, get_fuser_method_new
    >>> mapping = {(nn.ReLU, MatchAllNode): "relu after anything"}
    >>> get_fuser_method_new((nn.ReLU, nn.Conv2d), mapping)
    'relu after anything'
    """
    for pattern in _valid_patterns(op_pattern):
        method = fuser_method_mapping.get(pattern)
        if method is not None:
            return method
    raise AssertionError(f"did not find fuser method for: {op_pattern} ")


def _fuse(model, modules_to_fuse, inplace, is_qat, fuser_func):
    if not inplace:
        model = copy.deepcopy(model)
    groups = modules_to_fuse if modules_to_fuse and isinstance(modules_to_fuse[0],
                                                                (list, tuple)) \
        else [modules_to_fuse]
    for names in groups:
        mods = [model.get_submodule(n) for n in names]
        if not is_qat and any(m.training for m in mods) and any(
                isinstance(m, _BATCH_NORMS) for m in mods):
            raise AssertionError("Fusion only for eval!")
        new = fuser_func(mods, is_qat=is_qat) if fuser_func is not fuse_known_modules \
            else fuse_known_modules(mods, is_qat=is_qat)
        for name, m in zip(names, new):
            owner, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(owner) if owner else model, leaf, m)
    return model


def fuse_modules(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                 fuse_custom_config_dict=None):
    """Fuse sequences of modules named in ``modules_to_fuse`` (a list of names, or a
    list of such lists) for post-training quantization: BatchNorm folded into the
    preceding convolution or linear layer, ReLU fused after it (``torch.ao.quantization.
    fuse_modules``). The model must be in eval mode where BatchNorm is fused.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao.quantization import fuse_modules
    >>> m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU()).eval()
    >>> fused = fuse_modules(m, ["0", "1", "2"])
    >>> [type(c).__name__ for c in fused]
    ['ConvReLU2d', 'Identity', 'Identity']
    >>> x = torcia.randn(1, 1, 5, 5)
    >>> torcia.allclose(fused(x), m(x), atol=1e-5)
    True
    """
    return _fuse(model, modules_to_fuse, inplace, False, fuser_func)


def fuse_modules_qat(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                     fuse_custom_config_dict=None):
    """:func:`fuse_modules` for quantization-aware training: conv-bn(-relu) stay
    ``ConvBn2d``/``ConvBnReLU2d``, whose BatchNorm keeps training."""
    return _fuse(model, modules_to_fuse, inplace, True, fuser_func)


# ---------------------------------------------------------------------------------------
# mappings
# ---------------------------------------------------------------------------------------

_PASSTHROUGH = (nn.ReLU, nn.MaxPool2d, nn.AdaptiveAvgPool2d, nn.AvgPool2d, nn.Flatten,
                nn.Identity)
# torch's quantized tensors run these as they are too, the output at the fixed parameters
# of its range (no observer in eval mode: torch's mappings have none of them); torcia's are
# swapped for versions that take quantized tensors and print as the float modules
_FIXED_RANGE = {nn.Sigmoid: _FixedRangeSigmoid, nn.Tanh: _FixedRangeTanh,
                nn.Hardsigmoid: _FixedRangeHardsigmoid}


def get_default_static_quant_module_mappings() -> dict:
    """Float (or QAT) module type -> quantized module type, for :func:`convert`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import get_default_static_quant_module_mappings
    >>> get_default_static_quant_module_mappings()[torcia.nn.Linear].__name__
    'Linear'
    """
    mapping = {
        QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize,
        nn.Linear: nnq.Linear, NonDynamicallyQuantizableLinear: nnq.Linear,
        nn.Conv1d: nnq.Conv1d, nn.Conv2d: nnq.Conv2d,
        nn.Conv3d: nnq.Conv3d, nn.ConvTranspose1d: nnq.ConvTranspose1d,
        nn.ConvTranspose2d: nnq.ConvTranspose2d, nn.ConvTranspose3d: nnq.ConvTranspose3d,
        nn.LayerNorm: nnq.LayerNorm, nn.GroupNorm: nnq.GroupNorm,
        nn.InstanceNorm1d: nnq.InstanceNorm1d, nn.InstanceNorm2d: nnq.InstanceNorm2d,
        nn.InstanceNorm3d: nnq.InstanceNorm3d, nn.BatchNorm3d: nnq.BatchNorm3d,
        nn.PReLU: nnq.PReLU,
        nn.Embedding: nnq.Embedding, nn.EmbeddingBag: nnq.EmbeddingBag, nnqat.Linear: nnq.Linear,
        nnqat.Conv1d: nnq.Conv1d, nnqat.Conv2d: nnq.Conv2d, nnqat.Conv3d: nnq.Conv3d,
        nni.ConvReLU1d: nniq.ConvReLU1d, nni.ConvReLU2d: nniq.ConvReLU2d,
        nni.ConvReLU3d: nniq.ConvReLU3d, nni.LinearReLU: nniq.LinearReLU,
        nni.BNReLU2d: nniq.BNReLU2d, nni.BNReLU3d: nniq.BNReLU3d,
        nni.LinearLeakyReLU: nniq.LinearLeakyReLU, nni.LinearTanh: nniq.LinearTanh,
        nni.ConvAdd2d: nniq.ConvAdd2d, nni.ConvAddReLU2d: nniq.ConvAddReLU2d,
        nniqat.ConvReLU1d: nniq.ConvReLU1d, nniqat.ConvReLU2d: nniq.ConvReLU2d,
        nniqat.ConvReLU3d: nniq.ConvReLU3d, nniqat.LinearReLU: nniq.LinearReLU,
        nniqat.ConvBn1d: nnq.Conv1d, nniqat.ConvBn2d: nnq.Conv2d, nniqat.ConvBn3d: nnq.Conv3d,
        nniqat.ConvBnReLU1d: nniq.ConvReLU1d, nniqat.ConvBnReLU2d: nniq.ConvReLU2d,
        nniqat.ConvBnReLU3d: nniq.ConvReLU3d, nniqat.LinearBn1d: nnq.Linear,
        nn.ReLU6: nnq.ReLU6,
        nn.Hardswish: nnq.Hardswish, nn.LeakyReLU: nnq.LeakyReLU, nn.ELU: nnq.ELU,
        nn.BatchNorm2d: nnq.BatchNorm2d, nn.Dropout: nnq.Dropout,
        nnq.FloatFunctional: nnq.QFunctional,
    }
    # torch's quantized tensors run these as they are; torcia's are wrapped
    mapping.update({kind: nnq.QuantizedPassthrough for kind in _PASSTHROUGH})
    mapping.update(_FIXED_RANGE)
    return mapping


def get_default_qat_module_mappings() -> dict:
    """Float (or fused) module type -> QAT module type, for :func:`prepare_qat`."""
    return {nn.Linear: nnqat.Linear, NonDynamicallyQuantizableLinear: nnqat.Linear,
            nn.Conv1d: nnqat.Conv1d, nn.Conv2d: nnqat.Conv2d,
            nn.Conv3d: nnqat.Conv3d, nni.ConvReLU1d: nniqat.ConvReLU1d,
            nni.ConvReLU2d: nniqat.ConvReLU2d, nni.ConvReLU3d: nniqat.ConvReLU3d,
            nni.LinearReLU: nniqat.LinearReLU, nni.LinearBn1d: nniqat.LinearBn1d,
            nni.ConvBn1d: nniqat.ConvBn1d, nni.ConvBn2d: nniqat.ConvBn2d,
            nni.ConvBn3d: nniqat.ConvBn3d, nni.ConvBnReLU1d: nniqat.ConvBnReLU1d,
            nni.ConvBnReLU2d: nniqat.ConvBnReLU2d, nni.ConvBnReLU3d: nniqat.ConvBnReLU3d}


def get_embedding_qat_module_mappings() -> dict:
    """:func:`get_default_qat_module_mappings` with the embeddings' QAT modules."""
    return {**get_default_qat_module_mappings(), nn.EmbeddingBag: nnqat.EmbeddingBag,
            nn.Embedding: nnqat.Embedding}


def get_embedding_static_quant_module_mappings() -> dict:
    """:func:`get_default_static_quant_module_mappings` with the embeddings' QAT
    modules converting to quantized embeddings."""
    return {**get_default_static_quant_module_mappings(),
            nnqat.EmbeddingBag: nnq.EmbeddingBag, nnqat.Embedding: nnq.Embedding}


def get_default_qconfig_propagation_list() -> set:
    """The module types :func:`prepare` gives a qconfig to: every float, QAT and
    dynamic module of the default mappings, and ``nn.Sequential``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import get_default_qconfig_propagation_list
    >>> torcia.nn.Linear in get_default_qconfig_propagation_list()
    True
    """
    return (set(get_default_static_quant_module_mappings())
            | set(get_default_qat_module_mappings())
            | set(get_default_dynamic_quant_module_mappings()) | {nn.Sequential})


def get_default_compare_output_module_list() -> set:
    """The module types whose outputs the numeric suite compares: those of
    :func:`get_default_qconfig_propagation_list` and what the mappings make of them."""
    mappings = (get_default_static_quant_module_mappings(), get_default_qat_module_mappings(),
                get_default_dynamic_quant_module_mappings())
    return get_default_qconfig_propagation_list().union(
        *(set(mapping.values()) for mapping in mappings))


def _module_class(mapping: dict, float_module_class):
    found = mapping.get(float_module_class)
    if found is None:
        raise AssertionError(f"Floating point module class {float_module_class} does not "
                             "have a corresponding quantized module class")
    return found


def get_static_quant_module_class(float_module_class, additional_static_quant_mapping=None,
                                  is_reference=False):
    """The statically quantized class of a float module class, or its reference
    (simulated) class with ``is_reference``
    (``torch.ao.quantization.get_static_quant_module_class``).

    Examples
    --------
    >>> from torcia import nn
    >>> from torcia.ao.quantization import get_static_quant_module_class
    >>> get_static_quant_module_class(nn.Conv2d).__module__
    'torcia.ao.nn.quantized._modules'
    >>> get_static_quant_module_class(nn.Conv2d, is_reference=True).__module__
    'torcia.ao.nn.quantized.reference'
    """
    default = get_default_static_quant_reference_module_mappings() if is_reference \
        else get_default_static_quant_module_mappings()
    return _module_class(get_combined_dict(default, additional_static_quant_mapping or {}),
                         float_module_class)


def get_default_static_quant_reference_module_mappings() -> dict:
    """Float module type -> reference (simulated) quantized module type
    (``torch.ao.quantization.get_default_static_quant_reference_module_mappings``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import get_default_static_quant_reference_module_mappings
    >>> get_default_static_quant_reference_module_mappings()[torcia.nn.LSTM].__module__
    'torcia.ao.nn.quantized.reference'
    """
    return {QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize,
            nn.Linear: nnqr.Linear, nn.Conv1d: nnqr.Conv1d, nn.Conv2d: nnqr.Conv2d,
            nn.Conv3d: nnqr.Conv3d, nn.ConvTranspose1d: nnqr.ConvTranspose1d,
            nn.ConvTranspose2d: nnqr.ConvTranspose2d, nn.ConvTranspose3d: nnqr.ConvTranspose3d,
            nn.Embedding: nnqr.Embedding, nn.EmbeddingBag: nnqr.EmbeddingBag,
            nn.GRUCell: nnqr.GRUCell, nn.LSTMCell: nnqr.LSTMCell, nn.RNNCell: nnqr.RNNCell,
            nn.LSTM: nnqr.LSTM}


def get_dynamic_quant_module_class(float_module_class, additional_dynamic_quant_mapping=None):
    """The dynamically quantized class of a float module class
    (``torch.ao.quantization.get_dynamic_quant_module_class``).

    Examples
    --------
    >>> from torcia import nn
    >>> from torcia.ao.quantization import get_dynamic_quant_module_class
    >>> get_dynamic_quant_module_class(nn.LSTM).__name__
    'LSTM'
    """
    return _module_class(get_combined_dict(get_default_dynamic_quant_module_mappings(),
                                           additional_dynamic_quant_mapping or {}),
                         float_module_class)


def get_default_dynamic_quant_module_mappings() -> dict:
    """Float module type -> dynamically quantized module type (the embeddings' are
    weight-only quantized: ``float_qparams_weight_only_qconfig``)."""
    return {nn.Linear: nnqd.Linear, NonDynamicallyQuantizableLinear: nnqd.Linear,
            nn.LSTM: nnqd.LSTM, nn.GRU: nnqd.GRU,
            nn.LSTMCell: nnqd.LSTMCell, nn.GRUCell: nnqd.GRUCell, nn.RNNCell: nnqd.RNNCell,
            nn.EmbeddingBag: nnq.EmbeddingBag, nn.Embedding: nnq.Embedding}


def get_default_custom_config_dict() -> dict:
    """The custom module mappings ``prepare`` and ``convert`` follow when given none
    (``torch.ao.quantization.get_default_custom_config_dict``): ``nn.LSTM`` and
    ``nn.MultiheadAttention`` become their quantizable modules when prepared, and those
    their quantized ones when converted.

    Examples
    --------
    >>> from torcia import nn
    >>> from torcia.ao.quantization import get_default_custom_config_dict
    >>> observed = get_default_custom_config_dict()["float_to_observed_custom_module_class"]
    >>> observed[nn.LSTM].__module__
    'torcia.ao.nn.quantizable._rnn'
    """
    return {
        "float_to_observed_custom_module_class": {
            nn.LSTM: nnqa.LSTM, nn.MultiheadAttention: nnqa.MultiheadAttention},
        "observed_to_quantized_custom_module_class": {
            nnqa.LSTM: nnq.LSTM, nnqa.MultiheadAttention: nnq.MultiheadAttention},
    }


def no_observer_set() -> set:
    """Module types that get no output observer of their own when prepared (their pieces
    are observed): the quantizable LSTM and MultiheadAttention.

    Examples
    --------
    >>> from torcia.ao.quantization import no_observer_set
    >>> sorted(f"{c.__module__}.{c.__name__}" for c in no_observer_set())[0]
    'torcia.ao.nn.quantizable._activation.MultiheadAttention'
    """
    return {nnqa.LSTM, nnqa.MultiheadAttention}


# modules whose output an observer follows after prepare (what convert will quantize)
_OBSERVED_EXCLUDED = ((DeQuantStub, nn.Dropout, nnq.FloatFunctional) + _PASSTHROUGH
                      + tuple(_FIXED_RANGE))


# ---------------------------------------------------------------------------------------
# prepare / convert
# ---------------------------------------------------------------------------------------


def propagate_qconfig_(module, qconfig_dict=None, prepare_custom_config_dict=None):
    """Give every submodule the qconfig of its nearest ancestor that has one (or the one
    ``qconfig_dict``, a dict or :class:`QConfigMapping`, names for it), in place."""

    def walk(mod, name, inherited):
        qconfig = inherited
        if isinstance(qconfig_dict, QConfigMapping):
            chosen = qconfig_dict.qconfig_for(name, mod)
            qconfig = chosen if (chosen is not None or name in qconfig_dict.module_name_qconfigs
                                 or type(mod) in qconfig_dict.object_type_qconfigs) else inherited
        elif qconfig_dict:
            qconfig = qconfig_dict.get(name, qconfig_dict.get(type(mod), inherited))
        if hasattr(mod, "qconfig"):
            qconfig = mod.qconfig  # set on the module itself (None opts it out)
        mod.qconfig = qconfig
        for child_name, child in mod.named_children():
            walk(child, f"{name}.{child_name}" if name else child_name, qconfig)

    walk(module, "", None)


def _observer_hook(mod, inputs, output):
    return mod.activation_post_process(output)


def _observe(mod, observer):
    mod.add_module("activation_post_process", observer)
    mod.register_forward_hook(_observer_hook)


def _fixed_range_fake_quant(mod):
    """The fake quantizer of a training activation whose output range is known (torch's
    ``DEFAULT_MODULE_TO_ACT_POST_PROCESS``): QAT then sees the fixed parameters the
    quantized sigmoid and tanh will have."""
    if not mod.training:
        return None
    if type(mod) in (nn.Sigmoid, nn.Hardsigmoid, nn.Softmax, _FixedRangeSigmoid):
        return default_fixed_qparams_range_0to1_fake_quant
    if type(mod) in (nn.Tanh, _FixedRangeTanh):
        return default_fixed_qparams_range_neg1to1_fake_quant
    return None


def _remove_observers(module):
    # what convert left unswapped keeps no observer (torch's _remove_activation_post_process)
    for mod in module.modules():
        if isinstance(getattr(mod, "activation_post_process", None),
                      (ObserverBase, FakeQuantizeBase)) and \
                not isinstance(mod, (nnq.FloatFunctional, FakeQuantizeBase)):
            del mod.activation_post_process
            for key in [k for k, hook in mod._forward_hooks.items()
                        if hook is _observer_hook]:
                del mod._forward_hooks[key]


def _add_observers(module, mapping, custom_mapping):
    for name, child in list(module.named_children()):
        qconfig = getattr(child, "qconfig", None)
        if isinstance(child, nnq.FloatFunctional):
            if qconfig is not None:
                child.activation_post_process = qconfig.activation()
            continue
        fixed = _fixed_range_fake_quant(child)
        if qconfig is not None and fixed is not None:
            _observe(child, fixed())
            continue
        if qconfig is not None and type(child) in custom_mapping:
            observed_class = custom_mapping[type(child)]
            module._modules[name] = observed = observed_class.from_float(child)
            if observed_class not in no_observer_set():
                _observe(observed, qconfig.activation())
            continue
        quantizable = type(child) in mapping and not isinstance(child, _OBSERVED_EXCLUDED)
        if quantizable and qconfig is not None:
            _observe(child, qconfig.activation())
        elif not isinstance(child, (nni._FusedModule,)) and not quantizable:
            _add_observers(child, mapping, custom_mapping)


def _custom_mapping(config, key: str) -> dict:
    if config is None or isinstance(config, QConfigMapping):
        config = get_default_custom_config_dict()
    return config.get(key, {})


def prepare(model, inplace=False, allow_list=None, observer_non_leaf_module_list=None,
            prepare_custom_config_dict=None):
    """Put an observer after every quantizable layer and QuantStub that has a qconfig
    (``torch.ao.quantization.prepare``): run calibration data through the result, then
    :func:`convert`.

    Modules named in ``prepare_custom_config_dict["float_to_observed_custom_module_class"]``
    (by default :func:`get_default_custom_config_dict`'s: ``nn.LSTM`` and
    ``nn.MultiheadAttention``) are swapped for their observed class's ``from_float``.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> model = nn.Sequential(tq.QuantStub(), nn.Linear(4, 2), tq.DeQuantStub()).eval()
    >>> model.qconfig = tq.default_qconfig
    >>> prepared = tq.prepare(model)
    >>> type(prepared[1].activation_post_process).__name__
    'MinMaxObserver'
    """
    if not inplace:
        model = copy.deepcopy(model)
    qconfig_dict = prepare_custom_config_dict if isinstance(prepare_custom_config_dict,
                                                            QConfigMapping) else None
    propagate_qconfig_(model, qconfig_dict)
    _add_observers(model, allow_list or get_default_static_quant_module_mappings(),
                   _custom_mapping(prepare_custom_config_dict,
                                   "float_to_observed_custom_module_class"))
    return model


def swap_module(mod, mapping, custom_module_class_mapping=None, use_precomputed_fake_quant=False):
    """``mod``'s quantized counterpart: from ``custom_module_class_mapping`` (its
    ``from_observed``) or ``mapping`` (its ``from_float``); ``mod`` itself where neither has
    its type or it has no qconfig."""
    if getattr(mod, "qconfig", None) is None:
        return mod
    if type(mod) in (custom_module_class_mapping or {}):
        return custom_module_class_mapping[type(mod)].from_observed(mod)
    if type(mod) in mapping:
        return mapping[type(mod)].from_float(mod)
    return mod


def convert(module, mapping=None, inplace=False, remove_qconfig=True,
            is_reference=False, convert_custom_config_dict=None,
            use_precomputed_fake_quant=False):
    """Swap every prepared (and calibrated) module for its quantized one
    (``torch.ao.quantization.convert``); observed custom modules (the types in
    ``convert_custom_config_dict["observed_to_quantized_custom_module_class"]``, by default
    the quantizable LSTM and MultiheadAttention) by their quantized class's
    ``from_observed``.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> model = nn.Sequential(tq.QuantStub(), nn.Linear(4, 2), tq.DeQuantStub()).eval()
    >>> model.qconfig = tq.default_qconfig
    >>> prepared = tq.prepare(model)
    >>> for _ in range(8):
    ...     _ = prepared(torcia.randn(16, 4))  # calibration
    >>> q = tq.convert(prepared)
    >>> [type(m).__name__ for m in q]
    ['Quantize', 'Linear', 'DeQuantize']
    >>> x = torcia.randn(3, 4).clamp(-2, 2)
    >>> bool((q(x) - model(x)).abs().max() < 0.1)
    True
    """
    if is_reference:
        raise NotImplementedError(
            "convert(is_reference=True) is not offered: build the reference modules "
            "(torcia.ao.nn.quantized.reference) with their from_float(module, weight_qparams)")
    if not inplace:
        module = copy.deepcopy(module)
    mapping = mapping or get_default_static_quant_module_mappings()
    _convert(module, mapping, _custom_mapping(convert_custom_config_dict,
                                              "observed_to_quantized_custom_module_class"))
    if remove_qconfig:
        _remove_observers(module)
        for m in module.modules():
            if "qconfig" in m.__dict__:
                del m.__dict__["qconfig"]
    return module


def _convert(module, mapping, custom_mapping):
    for name, child in list(module.named_children()):
        swapped = swap_module(child, mapping, custom_mapping)
        if swapped is child:
            _convert(child, mapping, custom_mapping)
        else:
            module._modules[name] = swapped


def default_eval_fn(model, calib_data):
    """Run ``model`` on the inputs of ``calib_data``, pairs of ``(input, target)``:
    calibration for :func:`quantize` (``torch.ao.quantization.default_eval_fn``)."""
    for data, _target in calib_data:
        model(data)


def quantize(model, run_fn, run_args, mapping=None, inplace=False):
    """Post-training static quantization in one call: prepare, ``run_fn(model,
    *run_args)`` to calibrate, convert (``torch.ao.quantization.quantize``)."""
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    prepare(model, inplace=True)
    run_fn(model, *run_args)
    return convert(model, mapping, inplace=True)


def quantize_dynamic(model, qconfig_spec=None, dtype=qint8, mapping=None, inplace=False):
    """Swap Linear, LSTM and GRU layers (and cells) for dynamically quantized ones: int8 weights,
    activations quantized on each call (``torch.ao.quantization.quantize_dynamic``).

    Parameters
    ----------
    qconfig_spec : set of module types or names, or dict to QConfig, optional
        What to quantize; by default every ``nn.Linear``, ``nn.LSTM``, ``nn.GRU``,
        ``nn.LSTMCell``, ``nn.GRUCell`` and ``nn.RNNCell``.
    dtype : qdtype or dtype
        ``torcia.qint8``: int8 weights (the default); ``torcia.float16``: float16 weights.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao.quantization import quantize_dynamic
    >>> model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> q = quantize_dynamic(model, {nn.Linear}, dtype=torcia.qint8)
    >>> type(q[0]).__module__, type(q[0]).__name__
    ('torcia.ao.nn.quantized.dynamic', 'Linear')
    """
    if dtype not in (qint8, torcia.float16):
        raise ValueError(f"Don't know how to quantize with default settings for {dtype}. "
                         "Provide full qconfig please")
    default = default_dynamic_qconfig if dtype is qint8 else float16_dynamic_qconfig
    if qconfig_spec is None:
        qconfig_spec = {nn.Linear, nn.LSTM, nn.GRU, nn.LSTMCell, nn.GRUCell, nn.RNNCell}
    if isinstance(qconfig_spec, (set, list, tuple)):
        qconfig_spec = dict.fromkeys(qconfig_spec, default)
    mapping = mapping or get_default_dynamic_quant_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()

    def walk(mod, name):
        for child_name, child in list(mod.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            qconfig = qconfig_spec.get(full, qconfig_spec.get(type(child)))
            if qconfig is not None and type(child) in mapping:
                child.qconfig = qconfig
                mod._modules[child_name] = mapping[type(child)].from_float(child)
            else:
                walk(child, full)

    walk(model, "")
    return model


def prepare_qat(model, mapping=None, inplace=False):
    """Prepare for quantization-aware training (``torch.ao.quantization.prepare_qat``):
    layers swapped for their QAT versions (weights fake-quantized), fake quantizers after
    them; train, then :func:`convert` (in eval mode).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> model = nn.Sequential(tq.QuantStub(), nn.Linear(4, 2), tq.DeQuantStub()).train()
    >>> model.qconfig = tq.get_default_qat_qconfig("x86")
    >>> qat = tq.prepare_qat(model)
    >>> type(qat[1]).__module__, type(qat[1].activation_post_process).__name__
    ('torcia.ao.nn.qat', 'FusedMovingAvgObsFakeQuantize')
    """
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    mapping = mapping or get_default_qat_module_mappings()

    def swap(mod):
        for name, child in list(mod.named_children()):
            if type(child) in mapping and getattr(child, "qconfig", None) is not None:
                mod._modules[name] = mapping[type(child)].from_float(child)
            else:
                swap(child)

    swap(model)
    _add_observers(model, get_default_static_quant_module_mappings(),
                   get_default_custom_config_dict()["float_to_observed_custom_module_class"])
    return model


def quantize_qat(model, run_fn, run_args, inplace=False):
    """Quantization-aware training in one call: prepare_qat, ``run_fn(model,
    *run_args)`` to train, convert in eval mode."""
    if not inplace:
        model = copy.deepcopy(model)
    model.train()
    prepare_qat(model, inplace=True)
    run_fn(model, *run_args)
    return convert(model.eval(), inplace=True)
