"""Quantized, fused and quantization-aware modules (``torch.ao.nn``)."""

from __future__ import annotations

from torcia.ao.nn import intrinsic, qat, quantized

__all__ = ["intrinsic", "qat", "quantized"]
