"""The kinds of quantization (``torch.ao.quantization.quant_type``)."""

from __future__ import annotations

import enum

__all__ = ["QuantType"]


class QuantType(enum.IntEnum):
    """Dynamic, static, quantization-aware training, or weight-only; the numbers are
    PyTorch's.

    Examples
    --------
    >>> from torcia.ao.quantization import QuantType
    >>> int(QuantType.QAT), QuantType(1).name
    (2, 'STATIC')
    """

    DYNAMIC = 0
    STATIC = 1
    QAT = 2
    WEIGHT_ONLY = 3
