"""torcia.ao: quantization (``torch.ao``): :mod:`torcia.ao.quantization` and the
quantized modules of ``torcia.ao.nn``."""

from __future__ import annotations

from torcia.ao import nn, quantization

__all__ = ["nn", "quantization"]
