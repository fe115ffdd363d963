"""Operator namespaces of torcia-ao (``torch.ops.<namespace>``): :mod:`quantized`, the
operators PyTorch's quantized modules call (``torch.ops.quantized``)."""

from torcia.ao.ops import quantized

__all__ = ["quantized"]
