"""Utilities on parameters: gradient clipping, flattening to one vector, parametrizations,
pruning, weight/spectral normalization hooks, functional calls and layer fusion."""

from torcia.nn.utils import (
    fusion,
    parametrizations,
    parametrize,
    prune,
    rnn,
    stateless,
)
from torcia.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
    zero_grad,
)
from torcia.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from torcia.nn.utils.fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from torcia.nn.utils.memory_format import (
    convert_conv2d_weight_memory_format,
    convert_conv3d_weight_memory_format,
)
from torcia.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from torcia.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format",
           "get_total_norm", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "fusion", "parameters_to_vector",
           "parametrizations", "parametrize", "prune", "remove_spectral_norm",
           "remove_weight_norm", "rnn", "spectral_norm", "stateless", "vector_to_parameters",
           "weight_norm", "zero_grad"]
