"""Utilities on parameters: gradient clipping and flattening to one vector."""

from torcia.nn.utils import rnn
from torcia.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_, zero_grad
from torcia.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "rnn",
           "vector_to_parameters", "zero_grad"]
