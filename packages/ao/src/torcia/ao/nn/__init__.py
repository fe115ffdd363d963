"""Quantized, fused and quantization-aware modules (``torch.ao.nn``)."""

from __future__ import annotations

# isort: off
# quantized first: its LSTM and MultiheadAttention build on quantizable's, which are made of
# its FloatFunctional
from torcia.ao.nn import intrinsic, qat, quantized
from torcia.ao.nn import quantizable, sparse
# isort: on

__all__ = ["intrinsic", "qat", "quantizable", "quantized", "sparse"]
