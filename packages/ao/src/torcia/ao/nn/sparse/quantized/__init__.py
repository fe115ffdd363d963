"""Quantized Linear layers of a block-sparse weight (``torch.ao.nn.sparse.quantized``).

PyTorch runs them on QNNPACK's sparse kernels; torcia runs the int8 weight, its zeros
included, on torcia-ao's dense integer kernels, which give the same values (a zero weight
adds nothing to the exact integer sums). The block shape is kept, as PyTorch's packed
parameters keep it, and a float layer converts only with its ``sparse_params`` (what
the sparsifier's ``squash_mask(params_to_save=("sparse_block_shape",))`` leaves).

Examples
--------
>>> import torcia
>>> from torcia.ao.nn.sparse.quantized import Linear
>>> m = Linear(4, 2, row_block_size=1, col_block_size=4)
>>> x = torcia.quantize_per_tensor(torcia.randn(3, 4), 0.05, 128, torcia.quint8)
>>> m(x).shape, m._weight_bias()[2:]
(torcia.Size([3, 2]), (1, 4))
"""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.ao._qtensor import (
    QTensor,
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    qint8,
)
from torcia.ao.nn import quantized as nnq

__all__ = ["Linear", "LinearPackedParams", "dynamic"]


def _check_blocks(row_block_size, col_block_size) -> None:
    if row_block_size is None or col_block_size is None:
        raise AssertionError(f"row_block_size and col_block_size must not be None, got "
                             f"row_block_size={row_block_size}, "
                             f"col_block_size={col_block_size}")


def _check_dtype(dtype, what: str) -> None:
    if dtype != qint8:
        raise NotImplementedError(f"{what} only supports QINT8")


class LinearPackedParams(nn.Module):
    """A sparse Linear layer's weight, bias and block shape
    (``torch.ao.nn.sparse.quantized.LinearPackedParams``); ``forward`` is the identity.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.sparse.quantized import LinearPackedParams
    >>> p = LinearPackedParams(row_block_size=1, col_block_size=4)
    >>> w, b, rows, cols = p._weight_bias()
    >>> w.shape, b, rows, cols
    (torcia.Size([1, 1]), None, 1, 4)
    """

    _version = 1

    def __init__(self, row_block_size=1, col_block_size=4, dtype=qint8):
        super().__init__()
        _check_dtype(dtype, "Linear prepacking")
        self.dtype = dtype
        weight = QTensor(torcia.zeros(1, 1, dtype=torcia.int8), qint8, 1.0, 0)
        self.set_weight_bias(weight, None, row_block_size, col_block_size)

    def _get_name(self):
        return "SparseQuantizedLinearPackedParams"

    def set_weight_bias(self, weight, bias, row_block_size, col_block_size) -> None:
        _check_blocks(row_block_size, col_block_size)
        self._packed = (weight, bias, int(row_block_size), int(col_block_size))

    def _weight_bias(self) -> tuple:
        return self._packed

    def forward(self, x):
        return x

    def __repr__(self):
        return repr(self._packed)


class _Sparse:
    """What the static and dynamic sparse layers add to their dense ones: the block shape,
    and ``from_float``'s checks of the sparsifier's parameters."""

    def _blocks(self, row_block_size, col_block_size, dtype, what) -> None:
        _check_dtype(dtype, what)
        _check_blocks(row_block_size, col_block_size)
        self.row_block_size, self.col_block_size = int(row_block_size), int(col_block_size)

    def _weight_bias(self) -> tuple:
        return self.weight(), self.bias(), self.row_block_size, self.col_block_size

    def set_weight_bias(self, w, b, row_block_size, col_block_size) -> None:
        _check_blocks(row_block_size, col_block_size)
        if isinstance(w, QTensor):
            self.weight_int8 = w.int_repr().to(torcia.int8)
            scales = w.q_per_channel_scales() if w.qscheme() in (
                per_channel_affine, per_channel_symmetric) \
                else torcia.full((w.shape[0],), w.q_scale(), dtype=torcia.float64)
            self.weight_scales = scales.to(torcia.float32)
            self.bias_ = None if b is None else b.detach().to(torcia.float32)
        else:
            super().set_weight_bias(w, b)
        self.row_block_size, self.col_block_size = int(row_block_size), int(col_block_size)

    @classmethod
    def _block_shape(cls, mod) -> tuple:
        if type(mod) is not nn.Linear:
            raise AssertionError(f"{cls._NAME}.from_float only works for Linear")
        if not hasattr(mod, "sparse_params"):
            raise AssertionError("Expecting the Linear to have `sparse_params`. Make sure you "
                                 "have provided arguments in the `sparsifier.squash_mask("
                                 "params_to_save=(\"sparse_block_shape\",))` method.")
        shape = mod.sparse_params.get("sparse_block_shape", None)
        if not isinstance(shape, (tuple, list)):
            raise AssertionError(f"sparse_block_shape must be tuple or list, got "
                                 f"{type(shape)}")
        if len(shape) != 2:
            raise AssertionError(f"sparse_block_shape must have length 2, got {len(shape)}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        return tuple(shape)

    def _get_name(self):
        return self._NAME


# after _Sparse, which the dynamic layer builds on
from torcia.ao.nn.sparse.quantized import dynamic  # noqa: E402


class Linear(_Sparse, nnq.Linear):
    """A quantized Linear layer of a block-sparse int8 weight
    (``torch.ao.nn.sparse.quantized.Linear``): quantized tensors in and out, as
    :class:`torcia.ao.nn.quantized.Linear`, the block shape kept.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> from torcia.ao.nn.sparse.quantized import Linear
    >>> float_layer = nn.Linear(8, 2)
    >>> float_layer.sparse_params = {"sparse_block_shape": (1, 4)}
    >>> float_layer.qconfig = tq.default_qconfig
    >>> float_layer.activation_post_process = float_layer.qconfig.activation()
    >>> _ = float_layer.activation_post_process(float_layer(torcia.randn(5, 8)))
    >>> q = Linear.from_float(float_layer)
    >>> type(q).__name__, q(torcia.quantize_per_tensor(torcia.randn(5, 8), 0.05, 128,
    ...                                                torcia.quint8)).shape
    ('Linear', torcia.Size([5, 2]))
    >>> q._get_name(), q._weight_bias()[2:]
    ('SparseQuantizedLinear', (1, 4))
    """

    _version = 1
    _NAME = "SparseQuantizedLinear"
    _FLOAT_MODULE = nn.Linear
    _qscheme = per_tensor_affine

    def __init__(self, in_features, out_features, row_block_size, col_block_size, bias=True,
                 dtype=qint8):
        nnq.Linear.__init__(self, in_features, out_features, bias)
        self._blocks(row_block_size, col_block_size, dtype,
                     "Sparse Quantized Linear (only QINT8 is supported)")

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"scale={self.scale}, zero_point={self.zero_point}, "
                f"qscheme={self._qscheme}")

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The sparse quantized layer of a calibrated float Linear with ``sparse_params``:
        its weight through the QConfig's weight observer (int8, zero points 0), its output
        parameters from its activation observer."""
        rows, cols = cls._block_shape(mod)
        observer = mod.qconfig.weight()
        if observer.dtype != qint8:
            raise AssertionError(f"Weight observer must have dtype torcia.qint8, got "
                                 f"{observer.dtype}")
        dense = nnq.Linear.from_float(mod)
        q = cls(mod.in_features, mod.out_features, rows, cols, mod.bias is not None)
        q.weight_int8, q.weight_scales, q.bias_ = dense.weight_int8, dense.weight_scales, \
            dense.bias_
        q.scale, q.zero_point = dense.scale, dense.zero_point
        q._qscheme = observer.qscheme
        return q
