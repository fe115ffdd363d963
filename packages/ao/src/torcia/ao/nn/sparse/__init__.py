"""Sparse quantized modules (``torch.ao.nn.sparse``): :mod:`quantized` holds the Linear
layers a sparsified model converts to."""

from torcia.ao.nn.sparse import quantized

__all__ = ["quantized"]
