"""Quantization (``torch.ao.quantization``, and torchao's ``quantize_``): int8 and int4
models on one set of kernels.

- Post-training dynamic quantization: :func:`quantize_dynamic` (Linear, LSTM, GRU).
- Post-training static quantization: ``model.qconfig``, :func:`fuse_modules`,
  :func:`prepare` (observers), calibration, :func:`convert`; :class:`QuantStub` and
  :class:`DeQuantStub` bound the quantized region.
- Quantization-aware training: :func:`prepare_qat` (fake quantization), train,
  :func:`convert`.
- torchao's API: :func:`quantize_` with :class:`Int8DynamicActivationInt8WeightConfig`,
  :class:`Int8WeightOnlyConfig`, :class:`Int4WeightOnlyConfig`.
- The export flow: :func:`~torcia.ao.quantization.quantize_pt2e.prepare_pt2e` and
  :func:`~torcia.ao.quantization.quantize_pt2e.convert_pt2e` on a program of
  :func:`torcia.export.export`.
- Quantized tensors: :func:`quantize_per_tensor`, :func:`quantize_per_channel`,
  :class:`QTensor` (``int_repr``, ``q_scale``, ``dequantize``...), the dtypes
  ``qint8``/``quint8``/``qint32`` (also reachable as ``torcia.qint8``...).

Examples
--------
>>> import torcia
>>> from torcia import nn
>>> from torcia.ao.quantization import quantize_dynamic
>>> _ = torcia.manual_seed(0)
>>> model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).eval()
>>> qmodel = quantize_dynamic(model, {nn.Linear}, dtype=torcia.qint8)
>>> x = torcia.randn(4, 64)
>>> bool((qmodel(x) - model(x)).abs().max() < 0.05)
True
"""

from __future__ import annotations

import sys
from typing import Union

from torcia.ao._qtensor import (
    QTensor,
    dequantize,
    per_channel_affine,
    per_channel_affine_float_qparams,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qdtype,
    qint8,
    qint32,
    qscheme,
    quantize_per_channel,
    quantize_per_tensor,
    quantize_per_tensor_dynamic,
    quint4x2,
    quint8,
)
from torcia.ao.quantization.fake_quantize import (
    FakeQuantize,
    FakeQuantizeBase,
    FixedQParamsFakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    default_affine_fixed_qparams_fake_quant,
    default_dynamic_fake_quant,
    default_embedding_fake_quant,
    default_embedding_fake_quant_4bit,
    default_fake_quant,
    default_fixed_qparams_range_0to1_fake_quant,
    default_fixed_qparams_range_neg1to1_fake_quant,
    default_fused_act_fake_quant,
    default_fused_per_channel_wt_fake_quant,
    default_fused_wt_fake_quant,
    default_histogram_fake_quant,
    default_per_channel_weight_fake_quant,
    default_symmetric_fixed_qparams_fake_quant,
    default_weight_fake_quant,
    disable_fake_quant,
    disable_observer,
    enable_fake_quant,
    enable_observer,
    fused_per_channel_wt_fake_quant_range_neg_127_to_127,
    fused_wt_fake_quant_range_neg_127_to_127,
)
from torcia.ao.quantization.observer import (
    AffineQuantizedObserverBase,
    FixedQParamsObserver,
    Granularity,
    HistogramObserver,
    MappingType,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    NoopObserver,
    ObserverBase,
    PerAxis,
    PerBlock,
    PerChannelMinMaxObserver,
    PerGroup,
    PerRow,
    PerTensor,
    PerToken,
    PlaceholderObserver,
    RecordingObserver,
    ReuseInputObserver,
    TorchAODType,
    UniformQuantizationObserverBase,
    ZeroPointDomain,
    default_affine_fixed_qparams_observer,
    default_debug_observer,
    default_dynamic_quant_observer,
    default_fixed_qparams_range_0to1_observer,
    default_fixed_qparams_range_neg1to1_observer,
    default_float_qparams_observer,
    default_float_qparams_observer_4bit,
    default_histogram_observer,
    default_observer,
    default_per_channel_weight_observer,
    default_placeholder_observer,
    default_reuse_input_observer,
    default_symmetric_fixed_qparams_observer,
    default_weight_observer,
    get_block_size,
    get_observer_state_dict,
    load_observer_state_dict,
    per_channel_weight_observer_range_neg_127_to_127,
    weight_observer_range_neg_127_to_127,
)
from torcia.ao.quantization.qconfig import (
    QConfig,
    QConfigAny,
    QConfigDynamic,
    QConfigMapping,
    default_activation_only_qconfig,
    default_debug_qconfig,
    default_dynamic_qat_qconfig,
    default_dynamic_qconfig,
    default_embedding_qat_qconfig,
    default_embedding_qat_qconfig_4bit,
    default_per_channel_qconfig,
    default_per_channel_symmetric_qnnpack_qat_qconfig,
    default_per_channel_symmetric_qnnpack_qconfig,
    default_qat_qconfig,
    default_qat_qconfig_v2,
    default_qconfig,
    default_quint8_weight_qconfig,
    default_reuse_input_qconfig,
    default_symmetric_qnnpack_qat_qconfig,
    default_symmetric_qnnpack_qconfig,
    default_weight_only_qconfig,
    float16_dynamic_qconfig,
    float16_static_qconfig,
    float_qparams_weight_only_qconfig,
    float_qparams_weight_only_qconfig_4bit,
    get_default_qat_qconfig,
    get_default_qat_qconfig_dict,
    get_default_qat_qconfig_mapping,
    get_default_qconfig,
    get_default_qconfig_dict,
    get_default_qconfig_mapping,
    per_channel_dynamic_qconfig,
    qconfig_equals,
)
from torcia.ao.quantization.quant_api import (
    Int4WeightOnlyConfig,
    Int8DynamicActivationInt8WeightConfig,
    Int8WeightOnlyConfig,
    QuantizedLinear,
    quantize_,
)
from torcia.ao.quantization.quant_type import QuantType
from torcia.ao.quantization.quantization_mappings import (
    DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS,
    DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS,
    DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS,
    DEFAULT_MODULE_TO_ACT_POST_PROCESS,
    DEFAULT_QAT_MODULE_MAPPINGS,
    DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS,
    DEFAULT_STATIC_QUANT_MODULE_MAPPINGS,
    DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS,
    get_default_dynamic_sparse_quant_module_mappings,
    get_default_float_to_quantized_operator_mappings,
    get_default_static_sparse_quant_module_mappings,
    get_quantized_operator,
)
from torcia.ao.quantization.quantize import (
    DeQuantStub,
    QuantStub,
    QuantWrapper,
    add_quant_dequant,
    convert,
    default_eval_fn,
    fuse_conv_bn,
    fuse_conv_bn_relu,
    fuse_convtranspose_bn,
    fuse_linear_bn,
    fuse_modules,
    fuse_modules_qat,
    get_combined_dict,
    get_default_compare_output_module_list,
    get_default_custom_config_dict,
    get_default_dynamic_quant_module_mappings,
    get_default_qat_module_mappings,
    get_default_qconfig_propagation_list,
    get_default_static_quant_module_mappings,
    get_default_static_quant_reference_module_mappings,
    get_dynamic_quant_module_class,
    get_embedding_qat_module_mappings,
    get_embedding_static_quant_module_mappings,
    get_fuser_method,
    get_fuser_method_new,
    get_static_quant_module_class,
    no_observer_set,
    prepare,
    prepare_qat,
    propagate_qconfig_,
    quantize,
    quantize_dynamic,
    quantize_qat,
    swap_module,
)
from torcia.ao.quantization.quantize_jit import (
    convert_dynamic_jit,
    convert_jit,
    fuse_conv_bn_jit,
    prepare_dynamic_jit,
    prepare_jit,
    quantize_dynamic_jit,
    quantize_jit,
    script_qconfig,
    script_qconfig_dict,
)
from torcia.ao.quantization.utils import MatchAllNode, Pattern

# the modules (``quantize_jit`` the package's name is its function, as in PyTorch)
_qconfig = sys.modules["torcia.ao.quantization.qconfig"]
_mappings = sys.modules["torcia.ao.quantization.quantization_mappings"]
_jit_flow = sys.modules["torcia.ao.quantization.quantize_jit"]

#: what a QConfig's factories make (a typing form, as PyTorch's)
ObserverOrFakeQuantize = Union[ObserverBase, FakeQuantizeBase]  # noqa: UP007

__all__ = [
    "DeQuantStub", "FakeQuantize", "FakeQuantizeBase", "FixedQParamsFakeQuantize",
    "HistogramObserver", "Int4WeightOnlyConfig", "Int8DynamicActivationInt8WeightConfig",
    "Int8WeightOnlyConfig", "MinMaxObserver", "MovingAverageMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver", "NoopObserver", "ObserverBase",
    "PerChannelMinMaxObserver", "PlaceholderObserver", "QConfig", "QConfigDynamic",
    "QConfigMapping", "QTensor", "QuantStub", "QuantWrapper", "QuantizedLinear",
    "add_quant_dequant", "convert", "default_debug_observer", "default_dynamic_qconfig",
    "default_dynamic_quant_observer", "default_fake_quant", "default_float_qparams_observer",
    "default_fused_act_fake_quant", "default_histogram_observer", "default_observer",
    "default_per_channel_qconfig", "default_per_channel_weight_fake_quant",
    "default_per_channel_weight_observer", "default_placeholder_observer",
    "default_qat_qconfig", "default_qconfig", "default_weight_fake_quant",
    "default_weight_observer", "dequantize", "disable_fake_quant", "disable_observer",
    "enable_fake_quant", "enable_observer", "float16_dynamic_qconfig",
    "float16_static_qconfig", "float_qparams_weight_only_qconfig", "fuse_modules",
    "fuse_modules_qat", "get_default_dynamic_quant_module_mappings",
    "get_default_qat_module_mappings", "get_default_qat_qconfig",
    "get_default_qat_qconfig_mapping", "get_default_qconfig", "get_default_qconfig_mapping",
    "get_default_static_quant_module_mappings", "get_observer_state_dict",
    "load_observer_state_dict", "per_channel_affine", "per_channel_affine_float_qparams",
    "per_channel_dynamic_qconfig", "per_channel_symmetric", "per_tensor_affine",
    "per_tensor_symmetric", "prepare", "prepare_qat", "propagate_qconfig_", "qdtype",
    "qint32", "qint8", "qscheme", "quantize", "quantize_", "quantize_dynamic",
    "quantize_per_channel", "quantize_per_tensor", "quantize_per_tensor_dynamic",
    "quantize_qat", "quint4x2", "quint8", "swap_module",
    # fusion and mapping helpers
    "fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn", "get_combined_dict",
    "get_dynamic_quant_module_class", "get_fuser_method", "get_static_quant_module_class",
    "per_channel_weight_observer_range_neg_127_to_127", "weight_observer_range_neg_127_to_127",
    # custom modules (the quantizable LSTM and MultiheadAttention)
    "get_default_custom_config_dict", "no_observer_set",
    # fixed output parameters (sigmoid, tanh)
    "FixedQParamsObserver", "default_fixed_qparams_range_0to1_fake_quant",
    "default_fixed_qparams_range_0to1_observer", "default_fixed_qparams_range_neg1to1_fake_quant",
    "default_fixed_qparams_range_neg1to1_observer",
    # fused observation and fake quantization (QAT's version 1)
    "FusedMovingAvgObsFakeQuantize", "default_affine_fixed_qparams_fake_quant",
    "default_dynamic_fake_quant", "default_embedding_fake_quant",
    "default_embedding_fake_quant_4bit", "default_fused_per_channel_wt_fake_quant",
    "default_fused_wt_fake_quant", "default_histogram_fake_quant",
    "default_symmetric_fixed_qparams_fake_quant",
    "fused_per_channel_wt_fake_quant_range_neg_127_to_127",
    "fused_wt_fake_quant_range_neg_127_to_127",
    # the rest of torch.ao.quantization's observers and helpers
    "ObserverOrFakeQuantize", "QConfigAny", "QuantType", "RecordingObserver",
    "ReuseInputObserver", "UniformQuantizationObserverBase",
    "default_affine_fixed_qparams_observer", "default_eval_fn",
    "default_float_qparams_observer_4bit", "default_reuse_input_observer",
    "default_symmetric_fixed_qparams_observer", "fuse_convtranspose_bn",
    "get_default_compare_output_module_list", "get_default_qat_qconfig_dict",
    "get_default_qconfig_dict", "get_default_qconfig_propagation_list",
    "get_embedding_qat_module_mappings", "get_embedding_static_quant_module_mappings",
    "get_fuser_method_new", "qconfig_equals", "MatchAllNode", "Pattern",
    "get_default_static_quant_reference_module_mappings",
    # affine quantization's vocabulary (torchao's)
    "AffineQuantizedObserverBase", "Granularity", "MappingType", "PerAxis", "PerBlock",
    "PerGroup", "PerRow", "PerTensor", "PerToken", "TorchAODType", "ZeroPointDomain",
    "get_block_size",
]
# the rest of PyTorch's default QConfigs, the mappings' constants (sparse quantization's,
# the quantized operators'), TorchScript graph mode over torcia.jit's compiled modules
__all__ += [name for names in (_qconfig.__all__, _mappings.__all__, _jit_flow.__all__)
            for name in names if name not in __all__]
