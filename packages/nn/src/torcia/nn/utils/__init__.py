"""Utilities on parameters: gradient clipping, flattening to one vector, weight and
spectral normalisation, batch-norm fusion."""

from torcia.nn.utils import rnn
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
from torcia.nn.utils.weight_norm import (
    remove_spectral_norm,
    remove_weight_norm,
    spectral_norm,
    weight_norm,
)

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "get_total_norm", "parameters_to_vector",
           "remove_spectral_norm", "remove_weight_norm", "rnn", "spectral_norm",
           "vector_to_parameters", "weight_norm", "zero_grad"]
