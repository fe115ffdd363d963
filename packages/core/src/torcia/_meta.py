"""The "meta" device: tensors with a shape and a dtype but no data.

A meta tensor holds a zero-strided NumPy stand-in (one element, broadcast to the shape),
so it costs no memory however large it is. An op on meta tensors runs the shape function
of its record (:attr:`torcia.library.OpDef.shape`): every built-in op has one but those of
:data:`DATA_DEPENDENT` (``nonzero``, ``unique``, ``masked_select``, ``bincount``), whose
output shape depends on the values and which raise :class:`NotImplementedError` on this
device, as on PyTorch's. A plugin's op defined without ``shape=`` runs its reference
kernel on the stand-ins (their values are zeros), which gives the shape and dtype at the
cost of computing on zeros.

Examples
--------
>>> import torcia
>>> (torcia.empty(3, 4, device="meta") @ torcia.empty(4, 5, device="meta")).shape
torcia.Size([3, 5])
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from torcia import ops
from torcia._kernels_nn import _pool_geometry
from torcia._ops import DECLARED
from torcia._ops._common import (
    first_shape,
    floating_dtype,
    grad_like,
    scan_with_indices,
    values_and_indices,
)
from torcia._ops._common import with_size as _with
from torcia._ops.linalg import matmul_shape
from torcia.backend import Backend
from torcia.plugins import hookimpl


def stand_in(shape, dtype) -> np.ndarray:
    """A writable zero-strided array of ``shape`` and ``dtype`` holding one element."""
    one = np.zeros(1, dtype=dtype)
    return np.lib.stride_tricks.as_strided(one, shape=tuple(shape), strides=(0,) * len(shape),
                                           writeable=True)


def _to_host(arr):
    raise NotImplementedError(
        "Cannot copy out of meta tensor; no data! Create a tensor on another device "
        "(e.g. torcia.empty_like(t, device='cpu')) to hold values"
    )


def _from_host(arr, index=None):
    return stand_in(arr.shape, arr.dtype)


class Meta:
    """The shape and dtype of one input of a shape function (None for an absent one)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)


# ----- shape functions of the built-in groups ---------------------------------------------
# Each receives one Meta (or Python scalar, or None) per input and the op's parameters, and
# returns (shape, numpy dtype), or a tuple of those for several outputs. The dispatch path
# has already promoted the inputs, so an elementwise result keeps the promoted dtype.


def _shape_of(x):
    return x.shape if isinstance(x, Meta) else ()


def sparse_mm(crow, col, values, dense, ncols, transpose=False):
    """(len(crow) - 1, k), or (ncols, k) with ``transpose``, for a dense (rows, k)."""
    return ((ncols if transpose else crow.shape[0] - 1, dense.shape[1]),
            np.result_type(values.dtype, dense.dtype))


def linear(x, w, b=None, **params):
    shape, dtype = matmul_shape(x, Meta(w.shape[::-1], w.dtype))
    return shape, dtype




def softmax_backward(g, y, dim, **params):
    return grad_like(g, y)


def topk(x, k, dim=-1, **params):
    shape = _with(x.shape, dim, k)
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def kthvalue(x, k, dim=-1, keepdim=False):
    return values_and_indices(x, dim, keepdim)


def pool_backward(g, *rest, input_shape, **params):
    """``max_pool_backward`` and ``avg_pool_backward``: the gradient of the input."""
    return g.shape[:2] + tuple(input_shape), g.dtype


def embedding(weight, indices, padding_idx=None, **params):
    return indices.shape + weight.shape[1:], weight.dtype


def embedding_backward(g, indices, num_weights, padding_idx=None, **params):
    return (num_weights, g.shape[-1]), g.dtype


def conv(x, w, b, stride, padding, dilation, groups, **params):
    out = tuple((i + lo + hi - d * (k - 1) - 1) // s + 1 for i, k, s, (lo, hi), d in
                zip(x.shape[2:], w.shape[2:], stride, padding, dilation))
    return (x.shape[0], w.shape[0]) + out, np.result_type(x.dtype, w.dtype)


def conv_weight(x, g, weight_shape, *rest, **params):
    return tuple(weight_shape), np.result_type(x.dtype, g.dtype)


def max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, **params):
    out, _ = _pool_geometry(x.shape[2:], kernel_size, stride, padding, dilation, ceil_mode)
    shape = x.shape[:2] + out
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def avg_pool(x, kernel_size, stride, padding, ceil_mode, *rest, **params):
    ones = (1,) * len(kernel_size)
    out, _ = _pool_geometry(x.shape[2:], kernel_size, stride, padding, ones, ceil_mode)
    return x.shape[:2] + out, x.dtype


def im2col(x, kernel_size, dilation, padding, stride, **params):
    out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, d, p, s in
           zip(x.shape[2:], kernel_size, dilation, padding, stride)]
    return (x.shape[0], x.shape[1] * math.prod(kernel_size), math.prod(out)), x.dtype



def _channels(x, dim=1) -> tuple:
    return (x.shape[dim],) if x.ndim > dim else ()


def batch_norm(x, weight, bias, running_mean, running_var, training, eps, **params):
    """``(out, mean, var)``: the statistics used, one per channel."""
    stats = x.dtype if training or running_mean is None else running_mean.dtype
    return (x.shape, x.dtype), (_channels(x), stats), (_channels(x), stats)


def batch_norm_backward(g, x, weight, running_mean, running_var, training, eps, **params):
    dtype = np.result_type(g.dtype, x.dtype)
    return (x.shape, dtype), (_channels(x), dtype), (_channels(x), dtype)


def layer_norm(x, weight, bias, normalized_ndim, eps, **params):
    return x.shape, floating_dtype(x.dtype)


def layer_norm_backward(g, x, weight, normalized_ndim, eps, **params):
    dtype = np.result_type(g.dtype, x.dtype)
    normalized = x.shape[x.ndim - normalized_ndim:]
    return (x.shape, dtype), (normalized, dtype), (normalized, dtype)


def rms_norm(x, weight, normalized_ndim, eps, **params):
    return x.shape, x.dtype


def rms_norm_backward(g, x, weight, normalized_ndim, eps, **params):
    dtype = np.result_type(g.dtype, x.dtype)
    return (x.shape, dtype), (x.shape[x.ndim - normalized_ndim:], dtype)


def lstm_cell(gates, c, **params):
    """``(h, c', act)`` of one LSTM step: ``gates`` is (*, 4H), ``c`` (*, H)."""
    dtype = np.result_type(gates.dtype, c.dtype)
    state = tuple(np.broadcast_shapes(gates.shape[:-1] + (gates.shape[-1] // 4,), c.shape))
    return (state, dtype), (state, dtype), (gates.shape, gates.dtype)


def lstm_cell_backward(gh, gc, act, c, c_new, **params):
    """``(grad_gates, grad_c)``; ``gh`` or ``gc`` may be absent."""
    return (c_new.shape[:-1] + act.shape[-1:], act.dtype), (
        tuple(np.broadcast_shapes(c_new.shape, c.shape)), np.result_type(act.dtype, c.dtype))


def lstm_layer(x_gates, h0, c0, w_hh_t, **params):
    """``(out, cs, acts)`` of a layer over ``x_gates`` (L, N, 4H)."""
    state = x_gates.shape[:-1] + h0.shape[-1:]
    return (state, x_gates.dtype), (state, x_gates.dtype), (x_gates.shape, x_gates.dtype)


def lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t, **params):
    dtype = np.result_type(acts.dtype, w_hh_t.dtype)
    return ((acts.shape, acts.dtype), (h0.shape, dtype),
            (c0.shape, np.result_type(c0.dtype, dtype)),
            (w_hh_t.shape, np.result_type(h0.dtype, acts.dtype)))


def flash_attention(q, k, v, mask, **params):
    """``(out, lse)``: ``out`` (*, Hq, Lq, Ev), ``lse`` (*, Hq, Lq)."""
    return (q.shape[:-1] + v.shape[-1:], q.dtype), (q.shape[:-1], q.dtype)


def flash_attention_backward(g, q, k, v, out, lse, mask, **params):
    return (q.shape, q.dtype), (k.shape, k.dtype), (v.shape, v.dtype)


def loss(x, target, weight=None, reduction="mean", *rest, **params):
    """``nll_loss`` and ``cross_entropy`` over (N, C): one loss a sample or their reduction."""
    return (x.shape[:1] if reduction == "none" else ()), x.dtype


def cross_entropy_backward(g, x, *rest, **params):
    return x.shape, x.dtype


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, **params):
    """One loss per sample of ``log_probs`` (T, N, C)."""
    return log_probs.shape[1:2], log_probs.dtype


def ctc_loss_backward(g, log_probs, *rest, **params):
    return log_probs.shape, log_probs.dtype


def histc(x, bins=100, min=0.0, max=0.0, **params):
    return (bins,), x.dtype


def searchsorted(seq, values, right=False, out_int32=False, **params):
    return _shape_of(values), np.dtype(np.int32 if out_int32 else np.int64)


def conv_transpose(x, w, b, stride, padding, output_padding, dilation, groups, **params):
    """``(in - 1) * stride - low - high + dilation * (k - 1) + output_padding + 1``."""
    size = tuple((i - 1) * s - lo - hi + d * (k - 1) + op + 1
                 for i, s, d, k, op, (lo, hi) in zip(x.shape[2:], stride, dilation,
                                                     w.shape[2:], output_padding, padding))
    if any(n <= 0 for n in size):
        raise RuntimeError(f"Given input size per channel: {list(x.shape[2:])}. Calculated "
                           f"output size per channel: {list(size)}. Output size is too small")
    return (x.shape[0], w.shape[1] * groups) + size, np.result_type(x.dtype, w.dtype)


def col2im(cols, output_size, kernel_size, dilation, padding, stride, **params):
    return (cols.shape[0], cols.shape[1] // math.prod(kernel_size)) + tuple(output_size), \
        cols.dtype


def adaptive_max_pool(x, output_size, **params):
    shape = x.shape[:2] + tuple(output_size)
    return (shape, x.dtype), (shape, np.dtype(np.int64))


SHAPES = {}
for _name in ("softmax", "log_softmax"):
    SHAPES[_name] = first_shape
SHAPES.update({name: op.shape for name, op in DECLARED.items() if op.shape is not None})
SHAPES.update({
    "softmax_backward": softmax_backward,
    "log_softmax_backward": softmax_backward, "sort": scan_with_indices, "topk": topk,
    "kthvalue": kthvalue,
    "max_pool_backward": pool_backward, "avg_pool_backward": pool_backward,
    "embedding": embedding, "embedding_backward": embedding_backward, "conv": conv,
    "conv_weight": conv_weight, "max_pool": max_pool, "avg_pool": avg_pool, "im2col": im2col,
    "batch_norm": batch_norm,
    "batch_norm_backward": batch_norm_backward, "layer_norm": layer_norm,
    "layer_norm_backward": layer_norm_backward, "rms_norm": rms_norm,
    "rms_norm_backward": rms_norm_backward, "lstm_cell": lstm_cell,
    "lstm_cell_backward": lstm_cell_backward, "lstm_layer": lstm_layer,
    "lstm_layer_backward": lstm_layer_backward, "flash_attention": flash_attention,
    "flash_attention_backward": flash_attention_backward, "nll_loss": loss, "cross_entropy": loss,
    "cross_entropy_backward": cross_entropy_backward, "ctc_loss": ctc_loss,
    "ctc_loss_backward": ctc_loss_backward,
    "histc": histc, "searchsorted": searchsorted, "conv_transpose": conv_transpose,
    "col2im": col2im, "adaptive_max_pool": adaptive_max_pool,
})
SHAPES["sparse_mm"] = sparse_mm
SHAPES["linear"] = linear


def _meta_of(x):
    if isinstance(x, np.ndarray):
        return Meta(x.shape, x.dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_meta_of(v) for v in x)
    return x


def _stand_ins(result):
    # (shape, dtype) for one output; a tuple of such pairs for several
    if len(result) == 2 and not isinstance(result[1], tuple):
        return stand_in(result[0], result[1])
    return tuple(stand_in(s, d) for s, d in result)


#: Built-in ops whose output shape depends on the input's values, so no shape function can
#: exist; on the meta device they raise, as on PyTorch's, rather than compute on stand-ins
#: (whose zeros would give a wrong shape). The value says why.
DATA_DEPENDENT = {
    "nonzero": "the number of nonzero elements",
    "unique": "the number of distinct values",
    "masked_select": "the number of True elements of the mask",
    "bincount": "the largest value of the input",
}


def _data_dependent(op: str):
    def kernel(*args, **params):
        raise NotImplementedError(
            f"{op}: cannot run on the meta device: the shape of its output depends on "
            f"{DATA_DEPENDENT[op]}, and a meta tensor has no values. Run it on a device "
            "with data (e.g. 'cpu')")

    return kernel


def meta_kernel(op: str, shape_fn, reference):
    """The meta kernel of ``op``: its shape function, else its reference kernel on the
    stand-ins; the result is a stand-in again. An op of :data:`DATA_DEPENDENT` raises
    :class:`NotImplementedError`."""
    if op in DATA_DEPENDENT and shape_fn is None:
        kernel = _data_dependent(op)
    elif shape_fn is not None:
        def kernel(*args, **params):
            return _stand_ins(shape_fn(*(_meta_of(a) for a in args), **params))
    elif reference is not None:
        def kernel(*args, **params):
            out = reference(*args, **params)
            if isinstance(out, tuple):
                return tuple(stand_in(o.shape, o.dtype) for o in out)
            out = np.asarray(out)
            return stand_in(out.shape, out.dtype)
    else:
        return None
    kernel.shape_function = shape_fn  # None: the reference kernel runs on stand-ins
    kernel.__name__ = f"{op}_meta"
    return kernel


#: What returns the op records ({name: OpDef}) the meta device has kernels for:
#: torcia._oprecords's op_records, added when it loads (import torcia loads it, before the
#: plugins register their kernels).
RECORD_SOURCES: list[Callable[[], dict]] = []


class MetaPlugin:
    """Core's built-in "meta" device: shapes and dtypes without data."""

    @hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("meta", np, to_host=_to_host, from_host=_from_host))

    @hookimpl
    def torcia_register_kernels(self, registry):
        for records in RECORD_SOURCES:
            for name, record in records().items():
                kernel = meta_kernel(name, record.shape, record.kernel)
                if kernel is not None:
                    registry.add(name, "meta", kernel, priority=0)


#: Built-in ops without a shape function: those of :data:`DATA_DEPENDENT`, which raise on
#: the meta device. The test of the meta device holds this list to what is missing, so it
#: only shrinks; an op added without a shape function would run its reference kernel on
#: the stand-ins.
WITHOUT_SHAPE = frozenset(n for n in ops.ALL if n not in SHAPES)
