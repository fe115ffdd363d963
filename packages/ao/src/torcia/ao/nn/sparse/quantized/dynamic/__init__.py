"""The dynamically quantized Linear layer of a block-sparse weight
(``torch.ao.nn.sparse.quantized.dynamic``)."""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.ao._qtensor import per_tensor_affine, qint8
from torcia.ao.nn.quantized import dynamic as nnqd
from torcia.ao.nn.sparse.quantized import _Sparse

__all__ = ["Linear"]


class Linear(_Sparse, nnqd.Linear):
    """A dynamically quantized Linear layer of a block-sparse int8 weight
    (``torch.ao.nn.sparse.quantized.dynamic.Linear``): float in and out, the activations
    quantized per call, as :class:`torcia.ao.nn.quantized.dynamic.Linear`.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> from torcia.ao.nn.sparse.quantized.dynamic import Linear
    >>> float_layer = nn.Linear(8, 2)
    >>> float_layer.sparse_params = {"sparse_block_shape": (1, 4)}
    >>> float_layer.qconfig = tq.default_dynamic_qconfig
    >>> q = Linear.from_float(float_layer)
    >>> x = torcia.randn(3, 8)
    >>> bool((q(x) - float_layer(x)).abs().max() < 0.05)
    True
    """

    _version = 1
    _NAME = "SparseQuantizedDynamicLinear"
    _FLOAT_MODULE = nn.Linear

    def __init__(self, in_features, out_features, row_block_size, col_block_size, bias=True,
                 dtype=qint8):
        nnqd.Linear.__init__(self, in_features, out_features, bias, dtype)
        self._blocks(row_block_size, col_block_size, dtype,
                     "Sparse Quantized Dynamic Linear (only QINT8 is supported)")

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"qscheme={per_tensor_affine}")

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The dynamic sparse layer of a float Linear with ``sparse_params``: its weight
        through the QConfig's weight observer (int8, zero points 0)."""
        rows, cols = cls._block_shape(mod)
        dense = nnqd.Linear.from_float(mod)
        if dense.dtype != qint8:
            raise AssertionError(f"Weight observer must have dtype torcia.qint8, got "
                                 f"{dense.dtype}")
        q = cls(mod.in_features, mod.out_features, rows, cols, mod.bias is not None)
        q.weight_int8, q.weight_scales, q.bias_ = dense.weight_int8, dense.weight_scales, \
            dense.bias_
        return q
