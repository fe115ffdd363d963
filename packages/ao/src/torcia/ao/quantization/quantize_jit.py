"""TorchScript graph-mode quantization (``torch.ao.quantization.quantize_jit``) over
torcia.jit's compiled modules.

PyTorch rewrites the TorchScript graph: it folds conv-bn pairs, inserts observers on the
values around each quantizable op, then replaces those ops with quantized ones between
``quantize``/``dequantize`` calls. torcia's compiled modules keep the module they were
compiled from (``original_module``), so the same result comes from the eager flow on
that module: conv-bn pairs folded and conv-(bn-)relu and linear-relu runs of children
fused (in eval mode, as the graph pass's fused ops), the qconfig of ``qconfig_dict``
(keys are submodule names, ``""`` the whole model) propagated, and, in a model without
:class:`QuantStub`, every quantizable leaf with a qconfig wrapped between a QuantStub and
a DeQuantStub (the values around each op are observed and quantized, as the graph pass
does; ReLU, pooling and the like stay float between them); then
:func:`prepare`/:func:`convert` (or :func:`quantize_dynamic`'s swap of the Linear layers)
and a compiled module of the result, traced at its first call (the scales and zero points
the quantized modules read become the program's constants, as in PyTorch's converted
graph). With PyTorch's default qconfig a Linear-ReLU-Linear model gives PyTorch 2.13's
outputs to the bit; a conv-bn-relu network is within one output step of them.

Examples
--------
>>> import torcia
>>> from torcia import nn
>>> from torcia.ao import quantization as tq
>>> _ = torcia.manual_seed(0)
>>> model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
>>> data = [torcia.randn(4, 8) for _ in range(3)]
>>> def calibrate(m, batches):
...     for x in batches:
...         m(x)
>>> q = tq.quantize_jit(torcia.jit.script(model), {"": tq.default_qconfig}, calibrate, [data])
>>> isinstance(q, torcia.jit.ScriptModule), type(q.original_module[0].module).__name__
(True, 'LinearReLU')
>>> bool((q(data[0]) - model(data[0])).abs().max() < 0.1)
True
"""

from __future__ import annotations

import copy
import warnings

import torcia
import torcia.jit
from torcia import nn
from torcia.ao.nn import quantized as nnq
from torcia.ao.quantization.qconfig import QConfig
from torcia.ao.quantization.quant_type import QuantType
from torcia.ao.quantization.quantize import (
    DeQuantStub,
    QuantStub,
    QuantWrapper,
    convert,
    fuse_conv_bn,
    fuse_modules,
    get_default_static_quant_module_mappings,
    prepare,
    propagate_qconfig_,
    quantize_dynamic,
)

__all__ = ["convert_dynamic_jit", "convert_jit", "fuse_conv_bn_jit", "prepare_dynamic_jit",
           "prepare_jit", "quantize_dynamic_jit", "quantize_jit", "script_qconfig",
           "script_qconfig_dict"]

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_BNS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _check_is_script_module(model) -> None:
    if not isinstance(model, torcia.jit.ScriptModule):
        raise ValueError("input must be a script module, got: " + str(type(model)))


def _check_forward_method(model) -> None:
    if not callable(getattr(model, "forward", None)):
        raise ValueError("input script module does not have forward method")


def _module_of(model, inplace: bool) -> nn.Module:
    """The eager module under a compiled one (a copy unless ``inplace``)."""
    module = model.original_module
    if module is None:
        raise NotImplementedError(
            "torcia.ao.quantization's graph-mode quantization transforms the module a "
            "compiled module was made from: a module loaded with torcia.jit.load or frozen "
            "has none (quantize the nn.Module, then compile it)")
    return module if inplace else copy.deepcopy(module)


class _Instance:
    """A QConfig factory that makes copies of one observer instance (what
    :func:`script_qconfig` gives: PyTorch deep-copies the scripted observers too)."""

    def __init__(self, instance):
        self.instance = instance

    def __call__(self):
        return copy.deepcopy(self.instance)

    def __repr__(self):
        return f"{type(self.instance).__name__}()"


def script_qconfig(qconfig):
    """The QConfig with its observers made once, each use taking a copy
    (``torch.ao.quantization.script_qconfig``, which scripts them).

    Examples
    --------
    >>> from torcia.ao.quantization import default_qconfig, script_qconfig
    >>> qc = script_qconfig(default_qconfig)
    >>> type(qc.activation()).__name__, qc.activation() is qc.activation()
    ('MinMaxObserver', False)
    """
    return QConfig(activation=_Instance(qconfig.activation()),
                   weight=_Instance(qconfig.weight()))


def script_qconfig_dict(qconfig_dict: dict) -> dict:
    """:func:`script_qconfig` of every entry that is not None
    (``torch.ao.quantization.script_qconfig_dict``)."""
    return {k: script_qconfig(v) if v else None for k, v in qconfig_dict.items()}


def _fold_conv_bn(module: nn.Module) -> None:
    """Fold each eval-mode BatchNorm that directly follows a convolution among its
    parent's children into it (the BatchNorm becomes ``nn.Identity``), in place."""
    for child in module.children():
        _fold_conv_bn(child)
    names = list(module._modules)
    for first, second in zip(names, names[1:]):
        conv, bn = module._modules[first], module._modules[second]
        if (type(conv) in _CONVS and type(bn) in _BNS and not conv.training
                and not bn.training and bn.num_features == conv.out_channels):
            module._modules[first] = fuse_conv_bn(False, conv, bn)
            module._modules[second] = nn.Identity()


_FUSIBLE = tuple((a, b, c) for a in _CONVS for b in _BNS for c in (nn.ReLU,)) \
    + tuple((a, b) for a in _CONVS for b in _BNS + (nn.ReLU,)) + ((nn.Linear, nn.ReLU),)


def _fuse_adjacent(module: nn.Module) -> None:
    """Fuse the conv-(bn-)relu and linear-relu runs among each module's children, in
    place: the quantized op's output is then the ReLU's, as graph mode's fused
    ``linear_relu``/``conv2d_relu`` give."""
    for child in module.children():
        _fuse_adjacent(child)
    names = list(module._modules)
    groups, i = [], 0
    while i < len(names):
        for length in (3, 2):
            run = names[i:i + length]
            kinds = tuple(type(module._modules[n]) for n in run)
            if len(run) == length and kinds in _FUSIBLE:
                groups.append(run)
                i += length
                break
        else:
            i += 1
    if groups:
        fuse_modules(module, groups, inplace=True)


def fuse_conv_bn_jit(model, inplace=False):
    """Fold each convolution's BatchNorm into it, for an eval-mode compiled module
    (``torch.ao.quantization.fuse_conv_bn_jit``).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao.quantization import fuse_conv_bn_jit
    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)).eval()
    >>> fused = fuse_conv_bn_jit(torcia.jit.script(net))
    >>> [type(m).__name__ for m in fused.original_module]
    ['Conv2d', 'Identity']
    """
    _check_is_script_module(model)
    module = _module_of(model, inplace)
    _fold_conv_bn(module)
    return _compiled(module)


def _compiled(module: nn.Module):
    return _Traced(module)


class _Traced(torcia.jit.ScriptModule):
    """A compiled module of a quantized (or folded) module: traced at its first call, and
    again for inputs its programs' guards refuse. Tracing, not scripting: the quantized
    modules read their scales and zero points, which become the program's constants (as
    PyTorch's ``convert_jit`` folds them into its graph)."""

    def __init__(self, module):
        super().__init__()
        self.add_module("module", module)
        self._programs: list = []
        self._last = None

    @property
    def original_module(self):
        return self.module

    def forward(self, *args):
        for traced in self._programs:
            try:
                out = traced(*args)
            except (AssertionError, TypeError) as exc:
                if not str(exc).startswith(("Guard failed", "the inputs' structure")):
                    raise
                continue
            self._last = traced
            return out
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torcia.jit.TracerWarning)
            traced = torcia.jit.trace(self.module, args)
        self._programs.append(traced)
        self._last = traced
        return traced(*args)

    def _current(self):
        if self._last is None:
            raise RuntimeError("the quantized module has not run yet: it is traced at its "
                               "first call")
        return self._last

    @property
    def graph(self):
        """The graph of the program last run (:class:`torcia.export.ExportGraph`)."""
        return self._current().graph

    @property
    def code(self) -> str:
        """The program last run as Python-like source."""
        return self._current().code

    def save(self, f, _extra_files=None) -> None:
        """Write the program last run to ``f`` (:func:`torcia.jit.save`)."""
        torcia.jit.save(self._current(), f, _extra_files)


class _Observed(torcia.jit.ScriptModule):
    """A prepared compiled module: calls run the observed module (observers record in
    Python, which a captured program would not); :func:`convert_jit` compiles the
    converted module."""

    def __init__(self, module, quant_type):
        super().__init__()
        self.add_module("module", module)
        self.quant_type = quant_type

    @property
    def original_module(self):
        return self.module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def _wrap_quantizable(module: nn.Module) -> nn.Module:
    """Each leaf with a qconfig and a quantized module of its own (a linear layer,
    convolution, normalization...) between a QuantStub and a DeQuantStub, in place; the
    others (ReLU, pooling, dropout) stay float between them."""
    kinds = {k for k, v in get_default_static_quant_module_mappings().items()
             if v is not nnq.QuantizedPassthrough and k not in (nn.Dropout, QuantStub,
                                                                DeQuantStub)}
    if type(module) in kinds and getattr(module, "qconfig", None) is not None:
        return QuantWrapper(module)
    for name, child in module.named_children():
        module._modules[name] = _wrap_quantizable(child)
    return module


def _prepare_jit(model, qconfig_dict, inplace, quant_type):
    _check_is_script_module(model)
    _check_forward_method(model)
    if not all(isinstance(x, str) for x in qconfig_dict):
        raise ValueError("qconfig_dict should only contain names(str) as keys.")
    qconfig_dict = script_qconfig_dict(qconfig_dict)
    module = _module_of(model, inplace)
    _fold_conv_bn(module)
    if quant_type == QuantType.STATIC and not module.training:
        _fuse_adjacent(module)
    propagate_qconfig_(module, qconfig_dict)
    if quant_type == QuantType.STATIC:
        if not any(isinstance(m, QuantStub) for m in module.modules()):
            module = _wrap_quantizable(module)
        module = prepare(module, inplace=True)
    return _Observed(module, quant_type)


def prepare_jit(model, qconfig_dict, inplace=False):
    """Observers inserted for post-training static quantization of a compiled module
    (``torch.ao.quantization.prepare_jit``); run calibration data through the result,
    then :func:`convert_jit`. ``qconfig_dict`` maps submodule names (``""``: the whole
    model) to QConfigs; a key that is not a name is a ``ValueError``, as in PyTorch."""
    return _prepare_jit(model, qconfig_dict, inplace, QuantType.STATIC)


def prepare_dynamic_jit(model, qconfig_dict, inplace=False):
    """The qconfigs of ``qconfig_dict`` given to a compiled module's submodules, for
    :func:`convert_dynamic_jit` (``torch.ao.quantization.prepare_dynamic_jit``)."""
    return _prepare_jit(model, qconfig_dict, inplace, QuantType.DYNAMIC)


def _convert_jit(model, inplace, quant_type):
    _check_is_script_module(model)
    model.eval()
    module = _module_of(model, inplace)
    if quant_type == QuantType.STATIC:
        module = convert(module, inplace=True)
    else:
        # graph mode's dynamic quantization quantizes the linear layers
        spec = {name: m.qconfig for name, m in module.named_modules()
                if type(m) is nn.Linear and getattr(m, "qconfig", None) is not None}
        module = quantize_dynamic(module, spec, inplace=True)
    return _compiled(module.eval())


def convert_jit(model, inplace=False, debug=False, preserved_attrs=None):
    """The quantized compiled module of a prepared, calibrated one
    (``torch.ao.quantization.convert_jit``): each observed layer swapped for its
    quantized module, as :func:`convert` does, and compiled."""
    return _convert_jit(model, inplace, QuantType.STATIC)


def convert_dynamic_jit(model, inplace=False, debug=False, preserved_attrs=None):
    """The dynamically quantized compiled module of one from :func:`prepare_dynamic_jit`
    (``torch.ao.quantization.convert_dynamic_jit``): its Linear layers with a qconfig
    become dynamic quantized ones."""
    return _convert_jit(model, inplace, QuantType.DYNAMIC)


def quantize_jit(model, qconfig_dict, run_fn, run_args, inplace=False, debug=False):
    """Post-training static quantization of a compiled module
    (``torch.ao.quantization.quantize_jit``): :func:`prepare_jit`,
    ``run_fn(prepared, *run_args)`` (calibration), :func:`convert_jit`.

    Parameters
    ----------
    model : ScriptModule
        From ``torcia.jit.script`` or ``torcia.jit.trace``.
    qconfig_dict : dict
        Submodule name (``""``: the whole model) -> QConfig (None: left float).
    run_fn, run_args
        The calibration: ``run_fn(prepared, *run_args)``.
    """
    if not run_fn:
        raise AssertionError("Must provide calibration function for post training static "
                             "quantization")
    if not run_args:
        raise AssertionError("Must provide calibration dataset for post training static "
                             "quantization")
    prepared = prepare_jit(model, qconfig_dict, inplace)
    run_fn(prepared, *run_args)
    return convert_jit(prepared, True, debug)


def quantize_dynamic_jit(model, qconfig_dict, inplace=False, debug=False):
    """Dynamic quantization of a compiled module's Linear layers
    (``torch.ao.quantization.quantize_dynamic_jit``): int8 weights, activations
    quantized per call.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao import quantization as tq
    >>> m = torcia.jit.script(torcia.nn.Sequential(torcia.nn.Linear(4, 4)).eval())
    >>> q = tq.quantize_dynamic_jit(m, {"": tq.default_dynamic_qconfig})
    >>> type(q.original_module[0]).__module__
    'torcia.ao.nn.quantized.dynamic'
    """
    prepared = prepare_dynamic_jit(model, qconfig_dict, inplace)
    return convert_dynamic_jit(prepared, True, debug)
