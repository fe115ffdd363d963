"""Quantized modules (``torch.ao.nn.quantized``): quantized tensors in and out, int8
weights, the ops of torcia-ao through dispatch. :mod:`torcia.ao.nn.quantized.dynamic`
holds the modules whose activations are quantized at run time,
:mod:`torcia.ao.nn.quantized.functional` the functional forms,
:mod:`torcia.ao.nn.quantized.reference` the reference (simulated) modules."""

from __future__ import annotations

from torcia.ao.nn.quantized import functional, reference
from torcia.ao.nn.quantized._custom import LSTM, MultiheadAttention
from torcia.ao.nn.quantized._modules import (
    ELU,
    BatchNorm2d,
    BatchNorm3d,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    DeQuantize,
    Dropout,
    Embedding,
    EmbeddingBag,
    FloatFunctional,
    FXFloatFunctional,
    GroupNorm,
    Hardswish,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    LeakyReLU,
    Linear,
    MaxPool2d,
    PReLU,
    QFunctional,
    Quantize,
    QuantizedPassthrough,
    ReLU6,
    Sigmoid,
    Softmax,
)

__all__ = ["BatchNorm2d", "BatchNorm3d", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
           "ConvTranspose2d", "ConvTranspose3d", "DeQuantize", "Dropout", "ELU", "Embedding",
           "EmbeddingBag", "FXFloatFunctional", "FloatFunctional", "GroupNorm", "Hardswish",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LSTM", "LayerNorm",
           "LeakyReLU", "Linear", "MaxPool2d", "MultiheadAttention", "PReLU", "QFunctional",
           "Quantize", "QuantizedPassthrough", "ReLU6", "Sigmoid", "Softmax"]
