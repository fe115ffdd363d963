"""The "meta" device: tensors with a shape and a dtype but no data.

A meta tensor holds a zero-strided NumPy stand-in (one element, broadcast to the shape),
so it costs no memory however large it is. An op on meta tensors runs the shape function
of its record (:attr:`torcia.library.OpDef.shape`) where it has one: the elementwise,
special, complex, reduction, scan, view and softmax groups, the activations, the matrix
products, ``linear``, ``cat``/``stack`` and ops defined by plugins with ``shape=``. Any
other op (those of :data:`WITHOUT_SHAPE`) still runs its reference kernel on the stand-ins
(their values are zeros), which gives the right shape and dtype at the cost of computing
on zeros.

Examples
--------
>>> import torcia
>>> (torcia.empty(3, 4, device="meta") @ torcia.empty(4, 5, device="meta")).shape
torcia.Size([3, 5])
"""

from __future__ import annotations

import math

import numpy as np

from torcia import ops
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


def _dtype_of(*xs):
    arrays = [x.dtype for x in xs if isinstance(x, Meta)]
    return arrays[0] if arrays else np.dtype(np.float32)


def same_shape(x, *rest, **params):
    """One input, dtype kept: ``neg``, ``exp`` on a float input..."""
    return x.shape, x.dtype


def bool_result(x, *rest, **params):
    return np.broadcast_shapes(*(_shape_of(v) for v in (x, *rest))), np.dtype(bool)


def broadcast(*xs, **params):
    """Several inputs broadcast together; the first tensor's (promoted) dtype."""
    return np.broadcast_shapes(*(_shape_of(x) for x in xs)), _dtype_of(*xs)


def matmul(a, b, **params):
    """``matmul`` with NumPy's rules: vectors, matrices and broadcast batches."""
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{len(sa)}D and {len(sb)}D")
    ka = sa[-1]
    kb = sb[-2] if len(sb) > 1 else sb[0]
    if ka != kb:
        left = sa if len(sa) > 1 else (1,) + sa
        right = sb if len(sb) > 1 else sb + (1,)
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({left[-2]}x{left[-1]} "
                           f"and {right[-2]}x{right[-1]})")
    batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    rows = sa[-2:-1]
    cols = sb[-1:] if len(sb) > 1 else ()
    return tuple(batch) + rows + cols, np.result_type(a.dtype, b.dtype)


def linear(x, w, b=None, **params):
    shape, dtype = matmul(x, Meta(w.shape[::-1], w.dtype))
    return shape, dtype


def addmm(c, a, b, **params):
    shape, dtype = matmul(a, b)
    return np.broadcast_shapes(c.shape, shape), dtype


def created(*args, shape, dtype, **params):
    """A creation op's output: ``shape`` and ``dtype`` are parameters."""
    return tuple(shape), np.dtype(dtype)


def _float(dtype) -> np.dtype:
    """NumPy's result dtype of a float function of ``dtype``: integers give float64."""
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _real(dtype) -> np.dtype:
    return np.empty(0, dtype).real.dtype


def float_shape(x, *rest, **params):
    """One input, a float result of its shape: the special functions."""
    return x.shape, _float(x.dtype)


def float_broadcast(*xs, **params):
    """Several inputs broadcast together, a float result: ``zeta``, the polynomials..."""
    return np.broadcast_shapes(*(_shape_of(x) for x in xs)), _float(
        np.result_type(*(x.dtype if isinstance(x, Meta) else x for x in xs if x is not None)))


def first_shape(x, *rest, **params):
    """The first input's shape and dtype: ``x`` with the same shape as ``g`` (backward
    of activations, ``masked_fill``, ``softmax``...)."""
    return x.shape, x.dtype


def _grad_like(g, x, *rest, **params):
    return np.broadcast_shapes(g.shape, x.shape), np.result_type(g.dtype, x.dtype)


def _reduced(shape, dim, keepdim) -> tuple:
    """``shape`` reduced over ``dim`` (None: all dims; an int or a sequence)."""
    if dim is None:
        return (1,) * len(shape) if keepdim else ()
    dims = {d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim)} \
        if shape else set()
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


def reduction(kind):
    """A reduction's shape function; ``kind`` picks its dtype: "acc" (``dtype`` or the
    input's), "float" (NumPy's float result), "real" (a norm), "bool", "index" (int64)."""
    def shape_fn(x, dim=None, keepdim=False, dtype=None, **params):
        d = x.dtype
        if kind == "acc":
            d = np.dtype(dtype) if dtype is not None else (
                np.dtype(np.int64) if d.kind in "biu" else d)
        elif kind == "float":
            d = np.dtype(dtype) if dtype is not None else _float(d)
        elif kind == "real":
            d = _real(_float(d))
        elif kind == "bool":
            d = np.dtype(bool)
        elif kind == "index":
            d = np.dtype(np.int64)
        return _reduced(x.shape, dim, keepdim), d

    shape_fn.__name__ = f"{kind}_reduction"
    return shape_fn


def values_and_indices(x, dim=-1, keepdim=False, **params):
    """``max_dim``, ``median_dim``...: the reduced values and their int64 indices."""
    shape = _reduced(x.shape, dim, keepdim)
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def scan(x, dim=0, dtype=None, **params):
    if dtype is not None:
        return x.shape, np.dtype(dtype)
    return x.shape, np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype


def scan_with_indices(x, dim=0, **params):
    return (x.shape, x.dtype), (x.shape, np.dtype(np.int64))


def cast(x, dtype, **params):
    return x.shape, np.dtype(dtype)


def angle(x, **params):
    return x.shape, _real(_float(x.dtype)) if x.dtype.kind == "c" else _float(x.dtype)


def real_part(x, **params):
    return x.shape, _real(x.dtype)


def view_as_real(x, **params):
    return x.shape + (2,), _real(x.dtype)


def view_as_complex(x, **params):
    if not x.shape or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return x.shape[:-1], np.dtype(np.complex128 if x.dtype == np.float64 else np.complex64)


def complex_(re, im, **params):
    return np.broadcast_shapes(re.shape, im.shape), np.dtype(
        np.complex128 if re.dtype == np.float64 else np.complex64)


def where(cond, a, b, **params):
    return np.broadcast_shapes(*(_shape_of(v) for v in (cond, a, b))), np.result_type(
        *(v.dtype if isinstance(v, Meta) else v for v in (a, b)))


def view(x, shape, **params):
    return tuple(shape), x.dtype


def permute(x, dims, **params):
    return tuple(x.shape[d] for d in dims), x.dtype


def transpose(x, dim0, dim1, **params):
    shape = list(x.shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    return tuple(shape), x.dtype


def squeeze(x, dim=None, **params):
    if dim is None:
        return tuple(n for n in x.shape if n != 1), x.dtype
    dims = {d % x.ndim for d in ((dim,) if isinstance(dim, int) else dim)} if x.shape else set()
    return tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1)), x.dtype


def unsqueeze(x, dim, **params):
    shape = list(x.shape)
    shape.insert(dim, 1)
    return tuple(shape), x.dtype


def narrow(x, dim, start, length, **params):
    shape = list(x.shape)
    shape[dim] = length
    return tuple(shape), x.dtype


def diagonal_shape(x, offset=0, dim1=0, dim2=1, **params):
    n1, n2 = x.shape[dim1], x.shape[dim2]
    size = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    rest = tuple(n for i, n in enumerate(x.shape) if i not in (dim1 % x.ndim, dim2 % x.ndim))
    return rest + (size,), x.dtype


def joined(*xs, dim=0, stacked=False):
    shapes = [x.shape for x in xs]
    dtype = np.result_type(*(x.dtype for x in xs))
    if stacked:
        shape = list(shapes[0])
        shape.insert(dim, len(xs))
        return tuple(shape), dtype
    shape = list(shapes[0])
    shape[dim] = sum(s[dim] for s in shapes)
    return tuple(shape), dtype


def stacked(*xs, dim=0, **params):
    return joined(*xs, dim=dim, stacked=True)


def softmax_backward(g, y, dim, **params):
    return _grad_like(g, y)


def _with(shape, dim, size) -> tuple:
    shape = list(shape)
    shape[dim] = size
    return tuple(shape)


def topk(x, k, dim=-1, **params):
    shape = _with(x.shape, dim, k)
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def kthvalue(x, k, dim=-1, keepdim=False):
    return values_and_indices(x, dim, keepdim)


def gather(x, index, dim, **params):
    return index.shape, x.dtype


def index_select(x, index, dim, **params):
    dim %= max(x.ndim, 1)
    return x.shape[:dim] + index.shape + x.shape[dim + 1:], x.dtype


def dot(a, b, **params):
    return (), a.dtype


def outer(a, b, **params):
    return (a.shape[0], b.shape[0]), a.dtype


def batch_of_matrices(drop: int, real: bool = False):
    """A linear-algebra result over the batch dims: ``drop`` trailing dims removed."""
    def shape_fn(a, *rest, **params):
        return a.shape[:len(a.shape) - drop], _real(a.dtype) if real else a.dtype

    return shape_fn


def slogdet(a, **params):
    batch = a.shape[:-2]
    return (batch, a.dtype), (batch, _real(a.dtype))


def eigh(a, **params):
    return (a.shape[:-1], _real(a.dtype)), (a.shape, a.dtype)


def eye(n, m, dtype, **params):
    return (n, n if m is None else m), np.dtype(dtype)


def linspace(start, end, steps, dtype, **params):
    return (steps,), np.dtype(dtype)


def logspace(start, end, steps, base, dtype, **params):
    return (steps,), np.dtype(dtype)


def arange(start, end, step, dtype, **params):
    return (max(0, math.ceil((end - start) / step)),), np.dtype(dtype)


def repeat(x, sizes, **params):
    shape = (1,) * (len(sizes) - x.ndim) + x.shape
    return tuple(n * r for n, r in zip(shape, sizes)), x.dtype


def tile(x, dims, **params):
    dims = (1,) * (x.ndim - len(dims)) + tuple(dims)
    return repeat(x, dims)


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
    from torcia._kernels_nn import _pool_geometry

    out, _ = _pool_geometry(x.shape[2:], kernel_size, stride, padding, dilation, ceil_mode)
    shape = x.shape[:2] + out
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def avg_pool(x, kernel_size, stride, padding, ceil_mode, *rest, **params):
    from torcia._kernels_nn import _pool_geometry

    ones = (1,) * len(kernel_size)
    out, _ = _pool_geometry(x.shape[2:], kernel_size, stride, padding, ones, ceil_mode)
    return x.shape[:2] + out, x.dtype


def pad(x, pad, mode="constant", value=0.0, **params):
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        shape[-1 - i] += pad[2 * i] + pad[2 * i + 1]
    return tuple(shape), x.dtype


def vector_norm(x, ord=2.0, dim=None, keepdim=False, **params):
    return _reduced(x.shape, dim, keepdim), _real(_float(x.dtype))


def matrix_norm(x, ord="fro", dim=(-2, -1), keepdim=False, **params):
    return _reduced(x.shape, dim, keepdim), _real(_float(x.dtype))


def unfold(x, dimension, size, step, **params):
    return _with(x.shape, dimension, (x.shape[dimension] - size) // step + 1) + (size,), \
        x.dtype


def as_strided(x, size, stride, storage_offset=0, **params):
    return tuple(size), x.dtype


def diag(x, diagonal=0, **params):
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        return (n, n), x.dtype
    return diagonal_shape(x, diagonal, 0, 1)


def fft_c2c(x, dims=(-1,), norm="backward", forward=True, **params):
    return x.shape, x.dtype


def fft_r2c(x, dims=(-1,), norm="backward", onesided=True, **params):
    shape = _with(x.shape, dims[-1], x.shape[dims[-1]] // 2 + 1) if onesided else x.shape
    return shape, np.result_type(x.dtype, np.complex64)


def fft_c2r(x, dims=(-1,), norm="backward", last_dim_size=1, **params):
    return _with(x.shape, dims[-1], last_dim_size), _real(x.dtype)


def im2col(x, kernel_size, dilation, padding, stride, **params):
    out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, d, p, s in
           zip(x.shape[2:], kernel_size, dilation, padding, stride)]
    return (x.shape[0], x.shape[1] * math.prod(kernel_size), math.prod(out)), x.dtype


SHAPES = {}
for _name in ops.UNARY_FLOAT + ops.UNARY_SAME:
    SHAPES[_name] = same_shape
for _name in ops.SPECIAL_UNARY + ops.SPECIAL_OTHER:
    SHAPES[_name] = float_shape
for _name in ops.SPECIAL_BINARY:
    SHAPES[_name] = float_broadcast
for _name in ("leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "softplus",
              "hardtanh", "hardswish", "hardsigmoid", "logsigmoid", "softsign", "tanhshrink",
              "softmax", "log_softmax", "round", "nan_to_num", "masked_fill", "conj", "clone",
              "contiguous", "detach_view", "flip", "roll", "tril", "triu"):
    SHAPES[_name] = first_shape
for _name in ("gelu_backward", "silu_backward"):
    SHAPES[_name] = _grad_like
for _name in ("clamp", "lerp", "addcmul", "addcdiv"):
    SHAPES[_name] = broadcast
for _name, _kind in (("sum", "acc"), ("nansum", "acc"), ("prod", "acc"), ("mean", "float"),
                     ("amax", "same"), ("amin", "same"), ("var", "float"), ("std", "float"),
                     ("logsumexp", "float"), ("norm", "real"), ("all", "bool"),
                     ("any", "bool"), ("argmax", "index"), ("argmin", "index"),
                     ("count_nonzero", "index")):
    SHAPES[_name] = reduction(_kind)
for _name in ("max_dim", "min_dim", "median_dim", "mode_dim"):
    SHAPES[_name] = values_and_indices
for _name in ("cumsum", "cumprod", "logcumsumexp"):
    SHAPES[_name] = scan
for _name in ("cummax", "cummin"):
    SHAPES[_name] = scan_with_indices
SHAPES.update({
    "cast": cast, "angle": angle, "real": real_part, "imag": real_part, "abs": real_part,
    "view_as_real": view_as_real, "view_as_complex": view_as_complex, "complex": complex_,
    "where": where, "view": view, "reshape": view, "expand": view, "permute": permute,
    "transpose": transpose, "squeeze": squeeze, "unsqueeze": unsqueeze, "narrow": narrow,
    "diagonal": diagonal_shape, "cat": joined, "stack": stacked,
    "softmax_backward": softmax_backward, "log_softmax_backward": softmax_backward,
    "sort": scan_with_indices, "topk": topk, "kthvalue": kthvalue, "gather": gather,
    "index_select": index_select, "dot": dot, "outer": outer,
    "linalg_det": batch_of_matrices(2), "linalg_eigvalsh": batch_of_matrices(1, real=True),
    "linalg_slogdet": slogdet, "linalg_eigh": eigh, "eye": eye, "linspace": linspace,
    "logspace": logspace, "arange": arange, "repeat": repeat, "tile": tile,
    "max_pool_backward": pool_backward, "avg_pool_backward": pool_backward,
    "embedding": embedding, "embedding_backward": embedding_backward, "conv": conv,
    "conv_weight": conv_weight, "max_pool": max_pool, "avg_pool": avg_pool, "pad": pad,
    "im2col": im2col, "linalg_vector_norm": vector_norm, "linalg_matrix_norm": matrix_norm,
    "unfold": unfold, "as_strided": as_strided, "diag": diag, "fft_c2c": fft_c2c,
    "fft_r2c": fft_r2c, "fft_c2r": fft_c2r,
})
for _name in ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
              "index_put", "linalg_inv", "linalg_matrix_exp", "linalg_cholesky"):
    SHAPES[_name] = first_shape
for _name in ops.UNARY_BOOL + ops.COMPARE:
    SHAPES[_name] = bool_result
for _name in ops.BINARY + ops.BINARY_FLOAT:
    SHAPES[_name] = broadcast
for _name in ("zeros", "ones", "empty", "full", "rand", "uniform", "randn", "normal",
              "randint"):
    SHAPES[_name] = created
SHAPES["dropout_mask"] = created
SHAPES["bernoulli"] = first_shape  # draws of the probabilities' shape and dtype
SHAPES.update({"matmul": matmul, "mm": matmul, "bmm": matmul, "linear": linear,
               "addmm": addmm})


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


def meta_kernel(op: str, shape_fn, reference):
    """The meta kernel of ``op``: its shape function, else its reference kernel on the
    stand-ins; the result is a stand-in again."""
    if shape_fn is not None:
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


class MetaPlugin:
    """Core's built-in "meta" device: shapes and dtypes without data."""

    @hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("meta", np, to_host=_to_host, from_host=_from_host))

    @hookimpl
    def torcia_register_kernels(self, registry):
        from torcia import library

        for name, record in library.op_records().items():
            kernel = meta_kernel(name, record.shape, record.kernel)
            if kernel is not None:
                registry.add(name, "meta", kernel, priority=0)


#: Built-in ops without a shape function yet: their meta kernel runs the reference kernel
#: on stand-ins. Data-dependent ones (``nonzero``, ``unique``, ``masked_select``,
#: ``bincount``...) have no shape without data, as on PyTorch's meta device. The test of
#: the meta device holds this list to what is missing, so it only shrinks.
WITHOUT_SHAPE = frozenset(n for n in ops.ALL if n not in SHAPES)
