"""The module and operator tables of quantization
(``torch.ao.quantization.quantization_mappings``), as PyTorch 2.13's constants, translated
to torcia's classes: the ``DEFAULT_*`` dictionaries are what the ``get_default_*``
functions of :mod:`torcia.ao.quantization.quantize` return (copies of the same entries).

Examples
--------
>>> import torcia
>>> from torcia.ao.quantization import DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS
>>> DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS[torcia.nn.Linear].__module__
'torcia.ao.nn.sparse.quantized'
>>> from torcia.ao.quantization import get_quantized_operator
>>> get_quantized_operator(torcia.nn.functional.elu).__name__
'elu'
"""

from __future__ import annotations

import copy
import inspect

from torcia import nn
from torcia.ao.nn.sparse import quantized as ao_nn_sparse_q
from torcia.ao.nn.sparse.quantized import dynamic as ao_nn_sparse_qd
from torcia.ao.ops import quantized as quantized_ops
from torcia.ao.quantization.fake_quantize import (
    default_fixed_qparams_range_0to1_fake_quant,
    default_fixed_qparams_range_neg1to1_fake_quant,
)
from torcia.ao.quantization.quantize import (
    get_default_dynamic_quant_module_mappings,
    get_default_qat_module_mappings,
    get_default_static_quant_module_mappings,
    get_default_static_quant_reference_module_mappings,
)

__all__ = [
    "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS", "DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS",
    "DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS", "DEFAULT_MODULE_TO_ACT_POST_PROCESS",
    "DEFAULT_QAT_MODULE_MAPPINGS", "DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS",
    "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS",
    "DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS",
    "get_default_dynamic_sparse_quant_module_mappings",
    "get_default_float_to_quantized_operator_mappings",
    "get_default_static_sparse_quant_module_mappings", "get_quantized_operator",
]

DEFAULT_STATIC_QUANT_MODULE_MAPPINGS = get_default_static_quant_module_mappings()
DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS = \
    get_default_static_quant_reference_module_mappings()
DEFAULT_QAT_MODULE_MAPPINGS = get_default_qat_module_mappings()
DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS = get_default_dynamic_quant_module_mappings()
DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS = {nn.Linear: ao_nn_sparse_q.Linear}
DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS = {nn.Linear: ao_nn_sparse_qd.Linear}
#: functionals whose quantized operator takes the output's scale and zero point
# keyed by the functions themselves: torcia.overrides wraps the public functions once a
# tensor subclass exists (the wrapper's __wrapped__ is the function), so lookups unwrap
DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS = {
    inspect.unwrap(nn.functional.elu): quantized_ops.elu,
    inspect.unwrap(nn.functional.hardswish): quantized_ops.hardswish,
    inspect.unwrap(nn.functional.instance_norm): quantized_ops.instance_norm,
    inspect.unwrap(nn.functional.layer_norm): quantized_ops.layer_norm,
    inspect.unwrap(nn.functional.leaky_relu): quantized_ops.leaky_relu,
    inspect.unwrap(nn.functional.dropout): quantized_ops.dropout,
}
#: modules whose output has fixed quantization parameters (their range's)
DEFAULT_MODULE_TO_ACT_POST_PROCESS = {
    nn.Hardsigmoid: default_fixed_qparams_range_0to1_fake_quant,
    nn.Sigmoid: default_fixed_qparams_range_0to1_fake_quant,
    nn.Softmax: default_fixed_qparams_range_0to1_fake_quant,
    nn.Tanh: default_fixed_qparams_range_neg1to1_fake_quant,
}


def get_default_static_sparse_quant_module_mappings() -> dict:
    """Float module type -> sparse quantized module type, for :func:`convert` after
    sparsification (``torch.ao.quantization.get_default_static_sparse_quant_module_mappings``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import get_default_static_sparse_quant_module_mappings
    >>> get_default_static_sparse_quant_module_mappings()[torcia.nn.Linear].__name__
    'Linear'
    """
    return copy.deepcopy(DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS)


def get_default_dynamic_sparse_quant_module_mappings() -> dict:
    """Float module type -> dynamic sparse quantized module type
    (``torch.ao.quantization.get_default_dynamic_sparse_quant_module_mappings``)."""
    return copy.deepcopy(DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS)


def get_default_float_to_quantized_operator_mappings() -> dict:
    """Float functional -> its quantized operator (in :mod:`torcia.ao.ops.quantized`)
    (``torch.ao.quantization.get_default_float_to_quantized_operator_mappings``)."""
    return copy.deepcopy(DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS)


def get_quantized_operator(float_op):
    """The quantized operator of a float functional
    (``torch.ao.quantization.get_quantized_operator``); none is an ``AssertionError``, as
    in PyTorch.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import get_quantized_operator
    >>> get_quantized_operator(torcia.nn.functional.relu)
    Traceback (most recent call last):
    ...
    AssertionError: Operator ... does not have corresponding quantized op
    """
    quantized_op = DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS.get(inspect.unwrap(float_op))
    if quantized_op is None:
        raise AssertionError(f"Operator {float_op} does not have corresponding quantized op")
    return quantized_op
