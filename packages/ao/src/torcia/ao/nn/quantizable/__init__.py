"""Quantizable modules (``torch.ao.nn.quantizable``): float modules made of pieces that
eager quantization can observe and convert one by one, for layers whose float form packs
several steps together: :class:`LSTM`, :class:`LSTMCell`, :class:`MultiheadAttention`.
``prepare`` swaps ``nn.LSTM`` and ``nn.MultiheadAttention`` for them (the custom module
mapping ``float_to_observed_custom_module_class``), ``convert`` swaps them for
:mod:`torcia.ao.nn.quantized`'s ``LSTM`` and ``MultiheadAttention``."""

from __future__ import annotations

from torcia.ao.nn.quantizable._activation import MultiheadAttention
from torcia.ao.nn.quantizable._rnn import LSTM, LSTMCell

__all__ = ["LSTM", "LSTMCell", "MultiheadAttention"]
