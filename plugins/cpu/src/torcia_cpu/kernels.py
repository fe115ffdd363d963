"""The plugin's kernels: the hot ones done natively.

Each kernel of :class:`NativeKernels` has the reference kernel's signature and hands what
the native code does not cover (ranks other than 2-D images, dtypes other than
float32/float64) to the device's fallback, ``_FALLBACK.op(...)``: torcia's one public
fallback (:func:`torcia.library.fallback`), the reference kernel, whose inner ops (the
products of a convolution) run these native kernels again.
"""

from __future__ import annotations

import math
import sys

import numpy as np

import torcia
from torcia.library import check_geometry as _check_geometry
from torcia.library import fallback
from torcia.library import pool_geometry as _pool_geometry
from torcia_cpu import _blas, _native, _provider

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_add_reduce = np.add.reduce


def _native_ok(*arrays) -> bool:
    """All arrays float32, or all float64 (arrays: the reference's formulas pass NumPy
    scalars too, where a 0-d operand meets an operator, and pybind11 refuses them)."""
    dt = arrays[0].dtype
    if dt not in _FLOATS:
        return False
    # a loop, not all() over a generator: every product and activation asks (0.4 -> 0.2 us)
    for a in arrays:
        if not isinstance(a, np.ndarray) or a.dtype != dt:
            return False
    return True


def _c(a):
    """``np.ascontiguousarray(a)``, a large non-contiguous array copied natively."""
    if a.flags.c_contiguous or not _copies_natively(a):
        return _ascontiguousarray(a)
    return _native.contiguous(a)


def _cc(a):
    """``a`` C-contiguous, its shape kept (``ascontiguousarray`` makes a 0-d array 1-d)."""
    if a.flags.c_contiguous:
        return a
    return _native.contiguous(a) if _copies_natively(a) else a.copy()


_ascontiguousarray = np.ascontiguousarray
#: Elements from which a non-contiguous array's C-contiguous copy is made natively
#: (csrc/elementwise.cpp's contiguous); below, NumPy's copy costs less than the call.
_COPY_FROM = 4096
#: The element sizes the native copy moves (bool, integers, floats, complex).
_COPY_ITEMSIZES = frozenset((1, 2, 4, 8, 16))


def _copies_natively(a) -> bool:
    """Whether the C-contiguous copy of ``a`` (not C-contiguous) is made natively: an
    ndarray of numbers with :data:`_COPY_FROM` elements or more. NumPy's copy walks a
    transposed array along the result, a cache line of the source an element (a (512, 512)
    float32 transpose took 2.9x PyTorch's time); the native one in tiles."""
    return a.__class__ is np.ndarray and a.size >= _COPY_FROM \
        and a.dtype.kind in _NUMBERS and a.itemsize in _COPY_ITEMSIZES


class _Fallback:
    """``_FALLBACK.op``: what runs ``op`` on "cpu" where a native kernel does not."""

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        return fallback(op, "cpu")


_FALLBACK = _Fallback()


class NativeKernels:
    """The native kernels (of the ops listed in :data:`OVERRIDES`)."""

    # ----- matrix products: float32/float64 ones on the extension's OpenBLAS (newer than
    # NumPy's: 10-25% faster on this machine's AVX-512 GEMMs), others on NumPy's BLAS; on
    # several threads only when large ----------------------------------------------------
    def matmul(self, a, b):
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0] and (
                a.dtype in _FLOATS and b.dtype == a.dtype and a.flags.c_contiguous
                and b.flags.c_contiguous and a.size * b.shape[1] < _blas.PARALLEL_WORK):
            # two small C-contiguous matrices (most calls): the product the row path below
            # would make, without its per-call checks, which cost ten times this GEMM
            return _native.matmul_batched(a, b)
        if a.ndim > 2 and b.ndim > 2 and a.shape[-2] * a.shape[-1] * b.shape[-1] < 400:
            # PyTorch's loop for batches of matrices this small (the reference's)
            return _FALLBACK.matmul(a, b)
        if _small_batch(a, b):
            # threads over the batch, one single-threaded GEMM per matrix, in C++: the
            # attention products of a transformer (64 matrices of 64x64x32 a step); their
            # batch dims equal, without the broadcasting's calls (6 us of 13 a call)
            if a.shape[:-2] != b.shape[:-2]:
                lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                a = np.broadcast_to(a, lead + a.shape[-2:])
                b = np.broadcast_to(b, lead + b.shape[-2:])
            return _native.matmul_batched(_gemm_ready(a), _gemm_ready(b))
        if _rows_product(a, b):
            a2 = _as_rows(a)
            out = _product(_blas.product_work(*a2.shape, b.shape[1]), _native.matmul_batched,
                           _gemm_ready(a2), _gemm_ready(b))
            return _shaped(out, a.shape[:-1] + b.shape[-1:])
        if not _blas.wide(a, b):
            return _FALLBACK.matmul(a, b)
        with _blas.parallel():
            return _FALLBACK.matmul(a, b)

    mm = bmm = matmul

    def addmm(self, c, a, b, beta=1, alpha=1):
        if beta == 1 and alpha == 1 and a.ndim == 2 and c.ndim == 1 and _rows_product(a, b) \
                and _native_ok(a, c) and c.shape == b.shape[1:]:
            return self.linear(a, b.T, c)
        if a.ndim == 2 and _rows_product(a, b) and _native_ok(a, c):
            # as PyTorch: the input copied into the result, then one GEMM given alpha and
            # beta, which scales inside the kernel (a product scaled after it rounds twice)
            shape = (a.shape[0], b.shape[1])
            if beta != 0 and c.shape == shape:
                out = c.copy()  # 1 us below a broadcasting assignment's
            else:
                out = np.empty(shape, a.dtype)
                if beta != 0:
                    out[...] = c
            return _product(_blas.product_work(*a.shape, shape[1]), _native.addmm, out,
                            _gemm_ready(a), _gemm_ready(b), float(alpha), float(beta))
        if (a.ndim == 3 and b.ndim == 3 and a.shape[1] * a.shape[2] * b.shape[2] >= 400
                and _native_ok(a, b, c)):
            # baddbmm: PyTorch's GEMM a matrix (under 400 multiply-adds, its loop: the
            # reference's), alpha and beta inside the kernel as in addmm above
            shape = (a.shape[0], a.shape[1], b.shape[2])
            out = np.empty(shape, a.dtype)
            if beta != 0:
                out[...] = c
            work = _blas.product_work(*a.shape[1:], shape[2])
            for i in range(shape[0]):
                _product(work, _native.addmm, out[i], _gemm_ready(a[i]), _gemm_ready(b[i]),
                         float(alpha), float(beta))
            return out
        if not _blas.wide(a, b):
            return _FALLBACK.addmm(c, a, b, beta, alpha)
        with _blas.parallel():
            return _FALLBACK.addmm(c, a, b, beta, alpha)

    def linear(self, x, w, b):
        if w.ndim == 2 and _rows_product(x, w.T) and (b is None or (
                b.shape == w.shape[:1] and _native_ok(x, b))):
            x2 = _as_rows(x)
            out = _product(_blas.product_work(*x2.shape, w.shape[0]), _native.linear,
                           _gemm_ready(x2), _gemm_ready(w), _opt_c(b))
            return _shaped(out, x.shape[:-1] + w.shape[:1])
        if not _blas.wide(x, w.T):
            return _FALLBACK.linear(x, w, b)
        with _blas.parallel():
            return _FALLBACK.linear(x, w, b)

    # ----- convolution: natively. Without groups, a sample at a time in C++ (its columns
    # and one GEMM on the extension's OpenBLAS: see kernels.cpp). With groups, im2col/col2im
    # natively and the products on NumPy's BLAS (through matmul above, for its thread
    # policy) ----------------------------------------------------------------------------
    def conv(self, x, w, b, stride, padding, dilation, groups):
        if x.ndim != 4 or not _native_ok(x, w) or (b is not None and not _native_ok(x, b)):
            return _FALLBACK.conv(x, w, b, stride, padding, dilation, groups)
        _check_geometry(w.shape[2:], stride, padding, dilation)
        n, _, h, wd = x.shape
        o, cg, kh, kw = w.shape
        (plo, phi), (qlo, qhi) = padding
        oh = (h + plo + phi - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        ow = (wd + qlo + qhi - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        if groups == 1:
            return _native.conv2d(_c(x), _c(w), None if b is None else _c(b), stride[0],
                                  stride[1], plo, qlo, dilation[0], dilation[1], oh, ow)
        cols = _native.im2col(_c(x), kh, kw, stride[0], stride[1], plo, qlo, dilation[0],
                              dilation[1], oh, ow, False)
        cols = cols.reshape(n, groups, cg * kh * kw, oh * ow)
        out = self.matmul(w.reshape(groups, o // groups, -1), cols).reshape(n, o, oh, ow)
        if b is not None:
            out += b.reshape(1, o, 1, 1)
        return out

    def conv_weight(self, x, g, weight_shape, stride, padding, dilation, groups):
        if x.ndim != 4 or not _native_ok(x, g):
            return _FALLBACK.conv_weight(x, g, weight_shape, stride, padding, dilation, groups)
        _check_geometry(weight_shape[2:], stride, padding, dilation)
        n = x.shape[0]
        o, cg, kh, kw = weight_shape
        oh, ow = g.shape[2:]
        (plo, _), (qlo, _) = padding
        p = oh * ow
        if groups == 1:
            return _native.conv2d_weight(_c(x), _c(g), kh, kw, stride[0], stride[1], plo, qlo,
                                         dilation[0], dilation[1])
        cols = _native.im2col(_c(x), kh, kw, stride[0], stride[1], plo, qlo, dilation[0],
                              dilation[1], oh, ow, False)
        # a product per sample, summed: each sample's columns transposed are read in place
        gm = _c(g).reshape(n, groups, o // groups, p)
        cm = cols.reshape(n, groups, cg * kh * kw, p)
        return self.matmul(gm, cm.transpose(0, 1, 3, 2)).sum(0).reshape(weight_shape)

    def conv_transpose(self, x, w, b, stride, padding, output_padding, dilation, groups):
        if x.ndim != 4 or not _native_ok(x, w):
            return _FALLBACK.conv_transpose(x, w, b, stride, padding, output_padding, dilation,
                                          groups)
        _check_geometry(w.shape[2:], stride, padding, dilation, output_padding)
        n, cin, ih, iw = x.shape
        _, og, kh, kw = w.shape
        (plo, phi), (qlo, qhi) = padding
        h = (ih - 1) * stride[0] - plo - phi + dilation[0] * (kh - 1) + output_padding[0] + 1
        wd = (iw - 1) * stride[1] - qlo - qhi + dilation[1] * (kw - 1) + output_padding[1] + 1
        if h <= 0 or wd <= 0:  # the reference's error
            return _FALLBACK.conv_transpose(x, w, b, stride, padding, output_padding, dilation,
                                          groups)
        if groups == 1:
            out = _native.conv2d_transpose(_c(x), _c(w), h, wd, stride[0], stride[1], plo, qlo,
                                           dilation[0], dilation[1])
        else:
            cig = cin // groups
            wm = w.reshape(groups, cig, og * kh * kw).transpose(0, 2, 1)
            cols = self.matmul(wm, x.reshape(n, groups, cig, ih * iw))
            out = _native.col2im(_c(cols), n, groups * og, h, wd, kh, kw, stride[0], stride[1],
                                 plo, qlo, dilation[0], dilation[1], ih, iw, False)
        if b is not None:
            out += b.reshape(1, -1, 1, 1)
        return out

    # ----- pooling ------------------------------------------------------------------
    def max_pool(self, x, kernel_size, stride, padding, dilation, ceil_mode):
        if x.ndim == 4 and x.dtype.name == "bfloat16":
            # every bfloat16 is a float32: the maximum, taken in float32, converts back
            # exactly
            values, indices = self.max_pool(x.astype(np.float32), kernel_size, stride,
                                            padding, dilation, ceil_mode)
            return values.astype(x.dtype), indices
        if x.ndim != 4 or not _native_ok(x):
            return _FALLBACK.max_pool(x, kernel_size, stride, padding, dilation, ceil_mode)
        (oh, ow), _ = _pool_geometry(x.shape[2:], kernel_size, stride, padding, dilation,
                                     ceil_mode)
        return tuple(_native.max_pool2d(_c(x), kernel_size[0], kernel_size[1], stride[0],
                                        stride[1], padding[0], padding[1], dilation[0],
                                        dilation[1], oh, ow))

    def max_pool_backward(self, g, indices, input_shape):
        if g.ndim == 4 and g.dtype.name == "bfloat16":
            # the gradients added up in float32 and rounded once
            return self.max_pool_backward(g.astype(np.float32), indices,
                                          input_shape).astype(g.dtype)
        if g.ndim != 4 or not _native_ok(g):
            return _FALLBACK.max_pool_backward(g, indices, input_shape)
        return _native.max_pool2d_backward(_c(g), _c(indices), input_shape[0], input_shape[1])

    # ----- embedding ------------------------------------------------------------------
    def embedding_backward(self, g, indices, num_weights, padding_idx):
        if not _native_ok(g):
            return _FALLBACK.embedding_backward(g, indices, num_weights, padding_idx)
        d = g.shape[-1]
        return _native.embedding_backward(_c(g).reshape(-1, d),
                                          _c(indices.astype(np.int64, copy=False)).reshape(-1),
                                          num_weights, -1 if padding_idx is None else padding_idx)

    # ----- index_add: NumPy's add.at walks one element at a time on one thread; natively
    # threads own blocks of columns and add the rows in index order, the reference's bits
    def index_add(self, a, index, source, dim, alpha=1):
        if a.ndim == 0 or index.ndim != 1 or index.dtype.kind not in "iu" \
                or not _native_ok(a, source) \
                or source.shape != a.shape[:dim] + index.shape + a.shape[dim + 1:]:
            return _FALLBACK.index_add(a, index, source, dim, alpha)
        n = a.shape[dim]
        # out of range (core refuses it first): the reference's error
        if index.size and (index.min() < 0 or index.max() >= n):
            return _FALLBACK.index_add(a, index, source, dim, alpha)
        # as the reference: a tensor of more than one dim takes alpha fused into each
        # term, a vector a product rounded first (a NumPy scalar that widens the dtype
        # goes to the reference, which rounds the sum back into a's dtype)
        fused = a.ndim > 1 and isinstance(alpha, (int, float)) and alpha != 1
        scaled = source * alpha if alpha != 1 and not fused else source
        if not _native_ok(a, scaled):
            return _FALLBACK.index_add(a, index, source, dim, alpha)
        return _native.index_add_rows(_cc(a), _c(index.astype(np.int64, copy=False)),
                                      _cc(scaled), math.prod(a.shape[:dim]), n,
                                      math.prod(a.shape[dim + 1:]),
                                      float(a.dtype.type(alpha)) if fused else 1.0)

    # ----- softmax and cross-entropy over the last dimension --------------------------
    def softmax(self, a, dim):
        if not _last_dim_rows(a, dim):
            return _FALLBACK.softmax(a, dim)
        return _native.softmax_rows(_c(a).reshape(-1, a.shape[-1]), False).reshape(a.shape)

    def log_softmax(self, a, dim):
        if not _last_dim_rows(a, dim):
            return _FALLBACK.log_softmax(a, dim)
        return _native.softmax_rows(_c(a).reshape(-1, a.shape[-1]), True).reshape(a.shape)

    def softmax_backward(self, g, y, dim):
        if not _last_dim_rows(y, dim, g):
            return _FALLBACK.softmax_backward(g, y, dim)
        return _native.softmax_backward_rows(*_rows(g, y), False).reshape(y.shape)

    def log_softmax_backward(self, g, y, dim):
        if not _last_dim_rows(y, dim, g):
            return _FALLBACK.log_softmax_backward(g, y, dim)
        return _native.softmax_backward_rows(*_rows(g, y), True).reshape(y.shape)

    def logsumexp_rows(self, x):
        if not _native_ok(x):
            return _FALLBACK.logsumexp_rows(x)
        return _native.logsumexp_rows(_c(x))

    # the forward: the reference's, whose rows (``logsumexp_rows``) then run natively
    def cross_entropy(self, *args, **params):
        return _FALLBACK.cross_entropy(*args, **params)

    def cross_entropy_backward(self, g, x, target, weight, reduction, ignore_index,
                               label_smoothing):
        # without label smoothing: the reference's softmax, its scaling by each row's
        # factor and the target terms in one native pass over each row; the factors as
        # the reference's. Targets out of range go to the reference, for its error.
        if label_smoothing or x.ndim != 2 or not x.size or target.shape != x.shape[:1] \
                or target.dtype.kind not in "iu" \
                or not _native_ok(x, *(() if weight is None else (weight,))):
            return _FALLBACK.cross_entropy_backward(g, x, target, weight, reduction,
                                                    ignore_index, label_smoothing)
        keep = target != ignore_index
        safe = np.where(keep, target, 0).astype(np.int64, copy=False)
        if safe.min() < 0 or safe.max() >= x.shape[1]:
            return _FALLBACK.cross_entropy_backward(g, x, target, weight, reduction,
                                                    ignore_index, label_smoothing)
        w = keep.astype(x.dtype) if weight is None else np.take(weight, safe) * keep
        scale = g * keep if reduction != "mean" else (g / w.sum()) * keep
        ws = _c((w * scale).astype(x.dtype, copy=False))
        return _native.cross_entropy_backward_rows(_c(x), ws, _c(safe))

    # ----- contiguous, and reshape where it copies: a non-contiguous array's copy (see
    # _copies_natively) ----------------------------------------------------------------
    def contiguous(self, a):
        return _c(a)  # the reference's ascontiguousarray, natively where that pays

    def reshape(self, a, shape):
        if a.flags.c_contiguous or not _copies_natively(a):
            return _FALLBACK.reshape(a, shape)
        try:
            # a view where the strides allow one, as NumPy's reshape gives
            return a.reshape(shape, copy=False)
        except ValueError:
            return _native.contiguous(a).reshape(shape)

    # ----- cat of arrays of one dtype, in any layout: the result's bytes written natively,
    # in spans over torcia's threads (NumPy's concatenate, on one, took 2.6x PyTorch's
    # time on two threads for the (16, 64, 128) gradients a GPT block's qkv split joins,
    # one of them transposed) ------------------------------------------------------------
    def cat(self, *arrays, dim=0):
        if _cat_ok(arrays, dim):
            return _native.cat(list(arrays), dim % arrays[0].ndim)
        return _FALLBACK.cat(*arrays, dim=dim)

    # ----- masked_fill with a mask repeated over leading dims (attention's causal mask over
    # its batch and heads): one native select per element, where NumPy's where walks the
    # broadcast mask in a general, slower iteration (1.8x on (16, 4, 64, 64) float32) ------
    def masked_fill(self, a, mask, value):
        # a mask of more dims than a broadcasts a to its shape: the reference's case
        inner = _strip_leading_ones(mask) if mask.ndim <= a.ndim else mask
        if not (_native_ok(a) and mask.dtype == np.bool_ and 0 < inner.ndim <= a.ndim
                and a.shape[a.ndim - inner.ndim:] == inner.shape and inner.size and a.size):
            return _FALLBACK.masked_fill(a, mask, value)
        mask = inner
        # the value as the reference casts it, then exactly as a double
        v = float(np.asarray(value, dtype=a.dtype))
        rows = _c(a).reshape(-1, mask.size)
        return _native.masked_fill_rows(rows, _c(mask).reshape(-1), v).reshape(a.shape)

    # ----- activations: one native pass each, where NumPy makes several (GELU's erf
    # through SciPy) --------------------------------------------------------------------
    def gelu(self, a, approximate="none"):
        if not _native_ok(a):
            return _FALLBACK.gelu(a, approximate)
        return _native.activation("gelu_tanh" if approximate == "tanh" else "gelu", _cc(a))

    def gelu_backward(self, g, a, approximate="none"):
        if not _same_shape_float(g, a):
            return _FALLBACK.gelu_backward(g, a, approximate)
        name = "gelu_tanh" if approximate == "tanh" else "gelu"
        return _native.activation_backward(name, _cc(g), _cc(a))

    def silu(self, a):
        if not _native_ok(a):
            return _FALLBACK.silu(a)
        return _native.activation("silu", _cc(a))

    def silu_backward(self, g, a):
        if not _same_shape_float(g, a):
            return _FALLBACK.silu_backward(g, a)
        return _native.activation_backward("silu", _cc(g), _cc(a))

    def sigmoid(self, a):
        if not _native_ok(a):
            return _FALLBACK.sigmoid(a)
        return _native.activation("sigmoid", _cc(a))

    def tanh(self, a):
        if not _native_ok(a):
            return np.tanh(a)
        return _native.activation("tanh", _cc(a))

    def softplus(self, a, beta=1.0, threshold=20.0):
        if not _native_ok(a) or beta == 0:
            return _FALLBACK.softplus(a, beta, threshold)
        return _native.activation("softplus", _cc(a), beta, threshold)

    def elu(self, a, alpha=1.0):
        if not _native_ok(a):
            return _FALLBACK.elu(a, alpha)
        return _native.activation("elu", _cc(a), alpha)

    def leaky_relu(self, a, negative_slope=0.01):
        if not _native_ok(a):
            return _FALLBACK.leaky_relu(a, negative_slope)
        return _native.activation("leaky_relu", _cc(a), negative_slope)

    def relu(self, a):
        if not _native_ok(a):
            return _FALLBACK.relu(a)
        return _native.activation("relu", _cc(a))

    def activation_backward(self, g, a, activation, **params):
        native = _NATIVE_BACKWARD.get(activation)
        if native is None or not _same_shape_float(g, a) or params.get("beta") == 0:
            return _FALLBACK.activation_backward(g, a, activation, **params)
        return _native.activation_backward(activation, _cc(g), _cc(a),
                                           *(params[k] for k in native))

    # ----- layer normalisation over the trailing dimensions ----------------------------
    def layer_norm(self, x, weight, bias, normalized_ndim, eps):
        d = _trailing(x, normalized_ndim)
        if not d or not _norm_params_ok(x, d, weight, bias):
            return _FALLBACK.layer_norm(x, weight, bias, normalized_ndim, eps)
        return _native.layer_norm(_cc(x), _opt_c(weight), _opt_c(bias), d, eps)

    def layer_norm_backward(self, g, x, weight, normalized_ndim, eps):
        d = _trailing(x, normalized_ndim)
        if not d or g.shape != x.shape or not _native_ok(x, g) or not _norm_params_ok(
                x, d, weight):
            return _FALLBACK.layer_norm_backward(g, x, weight, normalized_ndim, eps)
        gx, gw, gb = _native.layer_norm_backward(_cc(g), _cc(x), _opt_c(weight), d, eps)
        shape = x.shape[x.ndim - normalized_ndim:]
        return gx, gw.reshape(shape), gb.reshape(shape)

    def rms_norm(self, x, weight, normalized_ndim, eps):
        d = _trailing(x, normalized_ndim)
        if not d or not _norm_params_ok(x, d, weight):
            return _FALLBACK.rms_norm(x, weight, normalized_ndim, eps)
        return _native.rms_norm(_cc(x), _opt_c(weight), d, eps)

    def rms_norm_backward(self, g, x, weight, normalized_ndim, eps):
        d = _trailing(x, normalized_ndim)
        if not d or g.shape != x.shape or not _native_ok(x, g) or not _norm_params_ok(
                x, d, weight):
            return _FALLBACK.rms_norm_backward(g, x, weight, normalized_ndim, eps)
        gx, gw = _native.rms_norm_backward(_cc(g), _cc(x), _opt_c(weight), d, eps)
        return gx, gw.reshape(x.shape[x.ndim - normalized_ndim:])

    def batch_norm(self, x, weight, bias, running_mean, running_var, training, eps):
        stats = None if training else (running_mean, running_var)
        if not _batch_norm_ok(x, stats, weight, bias):
            return _FALLBACK.batch_norm(x, weight, bias, running_mean, running_var, training, eps)
        stats = (None, None) if stats is None else (_cc(running_mean), _cc(running_var))
        return tuple(_native.batch_norm(_cc(x), _opt_c(weight), _opt_c(bias), *stats, eps))

    def batch_norm_backward(self, g, x, weight, running_mean, running_var, training, eps):
        stats = None if training else (running_mean, running_var)
        if g.shape != x.shape or not _native_ok(x, g) or not _batch_norm_ok(x, stats, weight):
            return _FALLBACK.batch_norm_backward(g, x, weight, running_mean, running_var,
                                               training, eps)
        stats = (None, None) if stats is None else (_cc(running_mean), _cc(running_var))
        return tuple(_native.batch_norm_backward(_cc(g), _cc(x), _opt_c(weight), *stats, eps))

    # ----- attention: flash attention's forward and backward in C++, the (Lq, Lk) scores
    # never held (csrc/attention.cpp) ----------------------------------------------------
    def flash_attention(self, q, k, v, mask, is_causal=False, scale=1.0):
        shape = _attention_shape(q, k, v, mask)
        if shape is None:
            return _FALLBACK.flash_attention(q, k, v, mask, is_causal, scale)
        lead, b = shape
        out, lse = _native.flash_attention(*_heads4(b, q, k, v), _mask4(mask, q, k, b),
                                           bool(is_causal), float(scale))
        return out.reshape(lead + out.shape[1:]), lse.reshape(lead + lse.shape[1:])

    def flash_attention_backward(self, g, q, k, v, out, lse, mask, is_causal=False,
                                 scale=1.0):
        shape = _attention_shape(q, k, v, mask)
        if shape is None or not _native_ok(q, g, out, lse) or g.shape != out.shape \
                or out.shape != q.shape[:-1] + v.shape[-1:] or lse.shape != q.shape[:-1]:
            return _FALLBACK.flash_attention_backward(g, q, k, v, out, lse, mask, is_causal,
                                                      scale)
        lead, b = shape
        grads = _native.flash_attention_backward(
            *_heads4(b, g, q, k, v, out), _c(lse).reshape(b, *lse.shape[-2:]),
            _mask4(mask, q, k, b), bool(is_causal), float(scale))
        return tuple(d.reshape(lead + d.shape[1:]) for d in grads)

    # ----- recurrent layers: the time loop in C++, the cells natively; on torcia's threads,
    # which split the hidden units (csrc/lstm.cpp), each product on one BLAS thread --------
    def lstm_layer(self, x_gates, h0, c0, w_hh_t):
        if not _lstm_layer_ok(x_gates, h0, c0, w_hh_t):
            return _FALLBACK.lstm_layer(x_gates, h0, c0, w_hh_t)
        return tuple(_native.lstm_layer(_c(x_gates), _c(h0), _c(c0), _c(w_hh_t)))

    def lstm_layer_backward(self, g_out, g_cs, acts, cs, out, h0, c0, w_hh_t):
        grads = [g for g in (g_out, g_cs) if g is not None]
        if not _lstm_layer_ok(acts, h0, c0, w_hh_t, cs, out, *grads) or any(
                a.shape != acts.shape[:-1] + h0.shape[-1:] for a in (cs, out, *grads)):
            return _FALLBACK.lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t)
        return tuple(_native.lstm_layer_backward(
            None if g_out is None else _c(g_out), None if g_cs is None else _c(g_cs),
            _c(acts), _c(cs), _c(out), _c(h0), _c(c0), _c(w_hh_t)))

    # ----- recurrent cells ----------------------------------------------------------
    def lstm_cell(self, gates, c):
        hidden = gates.shape[-1] // 4
        if not _native_ok(gates, c) or c.shape != gates.shape[:-1] + (hidden,):
            return _FALLBACK.lstm_cell(gates, c)
        h, c_new, act = _native.lstm_cell(*_rows(gates, c))
        return h.reshape(c.shape), c_new.reshape(c.shape), act.reshape(gates.shape)

    def lstm_cell_backward(self, gh, gc, act, c, c_new):
        shape = c_new.shape
        gh = np.zeros_like(c_new) if gh is None else gh
        gc = np.zeros_like(c_new) if gc is None else gc
        if not _native_ok(gh, gc, act, c, c_new) or not gh.shape == gc.shape == c.shape == shape:
            return _FALLBACK.lstm_cell_backward(gh, gc, act, c, c_new)
        g_gates, g_c = _native.lstm_cell_backward(*_rows(gh, gc, act, c, c_new))
        return g_gates.reshape(act.shape), g_c.reshape(shape)


#: The dtype kinds the native cat copies: numbers.
_NUMBERS = frozenset("biufc")


def _cat_ok(arrays, dim) -> bool:
    """Whether ``cat`` runs natively: several arrays of one dtype of numbers and one
    rank, their sizes equal but at ``dim``, with :data:`_GRAIN` elements in all (below,
    NumPy's call costs less than the checks)."""
    if len(arrays) < 2:
        return False
    first = arrays[0]
    if first.__class__ is not _ndarray or first.ndim == 0 or first.dtype.kind not in _NUMBERS \
            or not -first.ndim <= dim < first.ndim:
        return False
    d = dim % first.ndim
    outer, inner, size = first.shape[:d], first.shape[d + 1:], 0
    for a in arrays:
        if a.__class__ is not _ndarray or a.dtype != first.dtype or a.ndim != first.ndim \
                or a.shape[:d] != outer or a.shape[d + 1:] != inner:
            return False
        size += a.size
    return size >= _GRAIN


def _lstm_layer_ok(x_gates, h0, c0, w_hh_t, *others) -> bool:
    """The reference lstm_layer's shapes (L, N, 4H), (N, H), (N, H), (H, 4H) in one float
    dtype (``others`` in it too)."""
    if x_gates.ndim != 3 or h0.ndim != 2 or not _native_ok(x_gates, h0, c0, w_hh_t, *others):
        return False
    n, hidden = h0.shape
    return (x_gates.shape[1:] == (n, 4 * hidden) and c0.shape == h0.shape
            and w_hh_t.shape == (hidden, 4 * hidden))


def _product(work, native, *args, split=True):
    """``native(*args, threads, team)`` (``native(*args)`` where not ``split``): the
    extension's product of ``work`` multiply-adds on torcia's threads where they pay (see
    ``_blas``). On OpenBLAS, whose own threads spin, a product in panels cut for
    ``threads`` threads and run by ``team`` (:func:`_blas.split`); on MKL, ``(1, 1)``, and
    MKL's own threads during the call, on one after it. A function, not a generator-based
    context manager: every product of a training step comes here, and the context
    manager's calls cost 1.4 us a product, a fifth of a (32, 64) @ (64, 64) linear."""
    if work < _blas.PARALLEL_WORK:
        # one thread on either library, as split and worth_threads answer it (the load is
        # not asked below this size)
        return native(*args, 1, 1) if split else native(*args)
    spins = _provider.threads_spin()
    if _provider.splits_products():
        return native(*args, *_blas.split(work, spins)) if split else native(*args)
    if not _blas.worth_threads(work, spins):
        return native(*args, 1, 1) if split else native(*args)
    _native.set_blas_threads(torcia.get_num_threads())
    try:
        return native(*args, 1, 1) if split else native(*args)
    finally:
        _native.set_blas_threads(1)


def _attention_shape(q, k, v, mask):
    """(leading dims, their product) of q, k, v (*, H, L, E) where the native attention
    takes them: one float dtype, the same leading dims, rows not empty, and a bool mask or
    one of their dtype; else None."""
    if q.ndim < 3 or not q.ndim == k.ndim == v.ndim or not _native_ok(q, k, v) \
            or q.shape[-1] == 0 or v.shape[-1] == 0:
        return None
    lead = q.shape[:-3]
    if k.shape[:-3] != lead or v.shape[:-3] != lead or (
            mask is not None and mask.dtype != np.bool_ and mask.dtype != q.dtype):
        return None
    return lead, math.prod(lead)


def _heads4(b, *arrays):
    """Each (*, H, L, E) array as a C-contiguous (b, H, L, E) one."""
    return [_c(a).reshape(b, *a.shape[-3:]) for a in arrays]


def _mask4(mask, q, k, b):
    """The mask as a (b, Hq, Lq, Lk) view, broadcast dims of stride 0 (a copy only where
    leading dims of different strides must merge), or None."""
    if mask is None:
        return None
    full = np.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1])
    return full.reshape(b, *full.shape[-3:])


def _small_batch(a, b) -> bool:
    """A batch of float products, each below the size BLAS threads pay for."""
    # mismatched inner dimensions go to the reference, for its error (a ValueError)
    if a.ndim < 3 or b.ndim < 3 or not _native_ok(a, b) or a.shape[-1] != b.shape[-2]:
        return False
    return a.shape[-2] * a.shape[-1] * b.shape[-1] < _blas.PARALLEL_WORK


def _strip_leading_ones(a):
    """``a`` without its leading dims of size 1 (a view)."""
    k = 0
    while k < a.ndim and a.shape[k] == 1:
        k += 1
    return a.reshape(a.shape[k:]) if k else a


def _rows_product(a, b) -> bool:
    """``a`` (*, K) @ ``b`` (K, N) as one GEMM over a's rows: both float32 or float64."""
    return (a.ndim >= 2 and b.ndim == 2 and a.shape[-1] == b.shape[0] and _native_ok(a, b))


def _as_rows(a):
    """``a`` (*, K) as (rows, K) (``reshape(-1, K)`` fails for K = 0): a matrix itself."""
    if a.ndim == 2:
        return a
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _shaped(out, shape):
    """``out`` as ``shape``: itself where it has it already. A reshape to the same shape is
    a view, whose array does not own its memory; the autograd engine then copies a
    weight's gradient into ``.grad`` instead of taking its buffer, and adds gradients into
    a new array instead of in place."""
    return out if out.shape == shape else out.reshape(shape)


def _gemm_ready(a):
    """``a`` itself where GEMM can read its matrices in place (a unit stride along one of
    the last two dims, none negative), else a C-contiguous copy."""
    item = a.itemsize
    rows, cols = a.shape[-2:]
    rs, cs = a.strides[-2:]
    # a matrix's two strides tested directly (most calls): a generator costs 0.3 us
    if a.ndim == 2:
        aligned = rs >= 0 and cs >= 0 and not (rs % item or cs % item)
    else:
        aligned = all(s >= 0 and s % item == 0 for s in a.strides)
    if aligned and (
            (cs == item or cols == 1) and (rows == 1 or rs // item >= cols)
            or (rs == item or rows == 1) and (cols == 1 or cs // item >= rows)):
        return a
    return _c(a)


def _last_dim_rows(a, dim, g=None) -> bool:
    """Whether a softmax-like op along ``dim`` of ``a`` (and ``g``, of its shape) runs as
    rows: along the last dimension, in float32 or float64."""
    if a.ndim == 0 or dim % a.ndim != a.ndim - 1 or a.shape[-1] == 0:
        return False
    return _native_ok(a) if g is None else (_native_ok(a, g) and g.shape == a.shape)


def _rows(*arrays):
    return [_c(a).reshape(-1, a.shape[-1]) for a in arrays]


#: activation_backward's activations done natively, with the parameters they take.
_NATIVE_BACKWARD = {"relu": (), "sigmoid": (), "tanh": (), "leaky_relu": ("negative_slope",),
                    "elu": ("alpha",),
                    "softplus": ("beta", "threshold")}


def _same_shape_float(g, a) -> bool:
    return g.shape == a.shape and _native_ok(g, a)


def _trailing(x, ndim) -> int:
    """The number of elements in the last ``ndim`` dims of ``x`` (0 when there are none)."""
    if ndim < 1 or ndim > x.ndim:
        return 0
    return int(np.prod(x.shape[x.ndim - ndim:]))


def _norm_params_ok(x, d, *params) -> bool:
    """x float32/float64 and each non-None parameter of its dtype with ``d`` elements."""
    given = [p for p in params if p is not None]
    return _native_ok(x, *given) and all(
        p.size == d and p.shape == x.shape[x.ndim - p.ndim:] for p in given)


def _batch_norm_ok(x, stats, *params) -> bool:
    """x (N, C, *) float32/float64, the running statistics (when used) and each non-None
    parameter (C,) in its dtype."""
    if x.ndim < 2 or (stats is not None and any(s is None for s in stats)):
        return False
    given = [p for p in (*params, *(stats or ())) if p is not None]
    return _native_ok(x, *given) and all(p.shape == (x.shape[1],) for p in given)


def _opt_c(a):
    return None if a is None else _cc(a)


def _same_float(arrays):
    return bool(arrays) and _native_ok(*arrays) and all(a.flags.c_contiguous for a in arrays)


def _delegate(op, fn, *args, **kwargs):
    """Run the kernel this plugin's ``fn`` overrides (torcia-optim's NumPy one)."""
    return fallback(op, "cpu", fn)(*args, **kwargs)


def _follow_load():
    """Measure the load (:func:`_blas.crowded`) once per optimizer step, so that the regions
    of a fixed split (csrc/team.h) follow it in a training step without large products
    too (a CNN's, an LSTM's)."""
    if torcia.get_num_threads() > 1:
        _blas.crowded()


def sgd_step(params, grads, momentum_buffers, *, lr, weight_decay, momentum, dampening,
             nesterov, maximize):
    """torcia-optim's ``sgd_step`` for all parameters in one native call."""
    kw = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, dampening=dampening,
              nesterov=nesterov, maximize=maximize)
    if not _same_float(params):
        return _delegate("sgd_step", sgd_step, params, grads, momentum_buffers, **kw)
    _follow_load()
    step = _native.sgd_step_f32 if params[0].dtype == np.float32 else _native.sgd_step_f64
    # a parameter's first step makes its buffer, which the update fills with the gradient
    fresh = [i for i, b in enumerate(momentum_buffers) if b is None] if momentum != 0 else []
    for i in fresh:
        momentum_buffers[i] = np.empty_like(params[i])
    for subset, has_buffers in ((fresh, False),
                                (sorted(set(range(len(params))) - set(fresh)), True)):
        if subset:
            step([params[i] for i in subset], [_c(grads[i]) for i in subset],
                 [momentum_buffers[i] for i in subset], lr, momentum, dampening, weight_decay,
                 nesterov, maximize, has_buffers)


def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1,
              beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay):
    """torcia-optim's ``adam_step`` (Adam and AdamW) for all parameters in one native call."""
    if not _same_float(params + exp_avgs + exp_avg_sqs):
        return _delegate("adam_step", adam_step, params, grads, exp_avgs, exp_avg_sqs,
                         max_exp_avg_sqs, steps, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                         weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                         decoupled_weight_decay=decoupled_weight_decay)
    _follow_load()
    step = _native.adam_step_f32 if params[0].dtype == np.float32 else _native.adam_step_f64
    step(list(params), [_c(g) for g in grads], list(exp_avgs), list(exp_avg_sqs),
         list(max_exp_avg_sqs) if amsgrad else [], [float(s) for s in steps], lr, beta1, beta2,
         eps, weight_decay, amsgrad, maximize, decoupled_weight_decay)


# ----- elementwise arithmetic, unary ops and sums over large float arrays, on OpenMP
# threads over fixed spans (csrc/elementwise.cpp). They are plain functions, not methods:
# every op of a training step passes through them, and below the grain (small tensors)
# they cost one size test and the reference kernel's call. --------------------------------

_GRAIN = _native.ELEMENTWISE_GRAIN
#: Elements from which the arithmetic runs natively: the grain while torcia has several
#: threads; on one, NumPy's loops stay (they are as fast: 5-10% faster at 128K-256K
#: elements). Sums run natively on any thread count, faster on one too (0.55x NumPy's
#: time at 128K float32), so that their result does not depend on it.
_arithmetic_from = _GRAIN
_ndarray = np.ndarray
#: A Python int converts to a double exactly up to here; beyond, NumPy's rounding of it
#: to float32 could differ from the double's.
_EXACT_INT = 1 << 53


def follow_threads(n: int) -> None:
    """Run the arithmetic natively from the grain on when ``n`` (torcia's thread count)
    is above 1, else on NumPy (a callback of ``torcia.set_num_threads``)."""
    global _arithmetic_from
    _arithmetic_from = _GRAIN if n > 1 else sys.maxsize


def _flat(a):
    return a.reshape(a.size)


def _native_binary(op, a, b, out=None):
    """``a op b`` natively where the operands allow (one float dtype, C-contiguous, and
    b a Python number, or a shape of one element, of a's, or of a's trailing dims, or the
    reverse), written into ``out`` where one is given (then returned), else None. ``out``
    must then be writeable, C-contiguous, of a's dtype and of the result's shape; the
    caller guarantees that it is an operand or memory of its own (the native code checks
    it again, raising where it is not)."""
    if a.__class__ is not _ndarray or a.dtype not in _FLOATS or not a.flags.c_contiguous:
        return None
    if out is not None and not (out.__class__ is _ndarray and out.dtype == a.dtype
                                and out.flags.c_contiguous and out.flags.writeable):
        return None
    cls = b.__class__
    if cls is float or (cls is int and -_EXACT_INT <= b <= _EXACT_INT):
        if out is not None and out.shape != a.shape:
            return None
        return _native.binary_scalar(op, a, b, False, out)
    if cls is not _ndarray or b.dtype != a.dtype or not b.flags.c_contiguous:
        return None
    if a.shape == b.shape:
        shape = a.shape
    else:
        big, small = (a, b) if a.size >= b.size else (b, a)
        inner = _strip_leading_ones(small)
        if inner.ndim > big.ndim or big.shape[big.ndim - inner.ndim:] != inner.shape:
            return None
        shape = np.broadcast_shapes(a.shape, b.shape)
        if small.size == 1:
            if out is not None and out.shape != shape:
                return None
            s = float(small.reshape(()))
            if out is not None:
                return _native.binary_scalar(op, big.reshape(shape), s, small is a, out)
            return _native.binary_scalar(op, big, s, small is a).reshape(shape)
    if out is None:
        return _native.binary(op, _flat(a), _flat(b)).reshape(shape)
    if out.shape != shape:
        return None
    _native.binary(op, _flat(a), _flat(b), _flat(out))
    return out


def _scaled(op, a, b, alpha, out):
    """``a op b * alpha`` into ``out`` (None: a new array) natively, in one pass, where the
    operands allow (a float array b of a's dtype, its shape or a's trailing dims',
    C-contiguous arrays, an ``alpha`` a double holds exactly), else None."""
    if (b.__class__ is not _ndarray or b.dtype != a.dtype or not b.flags.c_contiguous
            or (alpha.__class__ is int and not -_EXACT_INT <= alpha <= _EXACT_INT)):
        return None
    if (a.__class__ is not _ndarray or a.dtype not in _FLOATS or not a.flags.c_contiguous
            or b.ndim > a.ndim):
        return None
    if out is not None and (out.__class__ is not _ndarray or out.dtype != a.dtype
                            or out.shape != a.shape or not out.flags.c_contiguous
                            or not out.flags.writeable):
        return None
    inner = _strip_leading_ones(b)
    if b.size > a.size or a.shape[a.ndim - inner.ndim:] != inner.shape:
        return None
    if out is None:
        out = np.empty(a.shape, a.dtype)
    _native.binary(op, _flat(a), _flat(b), _flat(out), float(alpha))
    return out


def _alpha_kernel(op):
    plain = _binary_kernel(op)
    reference = None

    def kernel(a, b, out=None, alpha=1):
        """add's (sub's) kernel: ``a op b * alpha`` as one fused multiply-add (the
        hookspecs' contract), natively in one pass where the operands allow (the same
        bits as the reference's, which computes the rest)."""
        nonlocal reference
        if alpha == 1:
            return plain(a, b, out)
        if alpha.__class__ in (int, float):
            result = _scaled(op, a, b, alpha, out)
            if result is not None:
                return result
        if reference is None:
            reference = fallback(op, "cpu")
        return reference(a, b, alpha=alpha, out=out)

    kernel.__name__ = kernel.__qualname__ = op
    return kernel


def _binary_kernel(op):
    reference = None

    def kernel(a, b, out=None):
        nonlocal reference
        if reference is None:
            reference = fallback(op, "cpu")
        if a.size >= _arithmetic_from or (
                b.__class__ is _ndarray and b.size >= _arithmetic_from):
            result = _native_binary(op, a, b, out)
            if result is not None:
                return result
        return reference(a, b) if out is None else reference(a, b, out=out)

    kernel.__name__ = kernel.__qualname__ = op
    kernel.__doc__ = (f"``{op}``'s kernel, natively on large float arrays; ``out``: the "
                      "array to write the result into (an operand too), as the reference's.")
    return kernel


def _div_kernel():
    reference = None

    def div(a, b, rounding_mode=None, out=None):
        """``div``'s kernel: true division natively (as :func:`_binary_kernel`'s)."""
        nonlocal reference
        if reference is None:
            reference = fallback("div", "cpu")
        if rounding_mode is None and (a.size >= _arithmetic_from or (
                b.__class__ is _ndarray and b.size >= _arithmetic_from)):
            result = _native_binary("div", a, b, out)
            if result is not None:
                return result
        if out is None:
            return reference(a, b, rounding_mode)
        return reference(a, b, rounding_mode, out=out)

    return div


def _unary_kernel(op, dtypes=_FLOATS):
    reference = None

    def kernel(a):
        nonlocal reference
        if reference is None:
            reference = fallback(op, "cpu")
        if a.size >= _arithmetic_from and a.dtype in dtypes and a.flags.c_contiguous:
            return _native.unary(op, a)
        return reference(a)

    kernel.__name__ = kernel.__qualname__ = op
    return kernel


def _reduction(a, dim, keepdim, dtype, mean):
    """The sum (or mean) of ``a`` over ``dim`` natively, or None where ``dim`` is not
    None or adjacent dims, or ``a`` not a C-contiguous float array."""
    if dtype is not None or a.dtype not in _FLOATS or not a.flags.c_contiguous:
        return None
    if dim is None:
        out = _native.reduce_sum(_flat(a), 1, a.size, 1, mean)
        return out.reshape((1,) * a.ndim if keepdim else ())
    first, last = dim[0], dim[-1]
    if last - first + 1 != len(dim):
        return None
    shape = a.shape
    outer, inner = math.prod(shape[:first]), math.prod(shape[last + 1:])
    out = _native.reduce_sum(_flat(a), outer, math.prod(shape[first:last + 1]), inner, mean)
    if keepdim:
        return out.reshape(shape[:first] + (1,) * len(dim) + shape[last + 1:])
    return out.reshape(shape[:first] + shape[last + 1:])


def _reduction_kernel(op):
    reference = None
    mean = op == "mean"

    def kernel(a, dim=None, keepdim=False, dtype=None):
        nonlocal reference
        if reference is None:
            reference = fallback(op, "cpu")
        if a.size >= _GRAIN:
            out = _reduction(a, dim, keepdim, dtype, mean)
            if out is not None:
                return out
        elif not mean and dtype is None and a.dtype in _FLOATS:
            # a small float32/float64 sum: what the reference's ndarray.sum runs, without
            # its two Python layers
            return _add_reduce(a, dim, None, None, keepdim)
        return reference(a, dim, keepdim, dtype)

    kernel.__name__ = kernel.__qualname__ = op
    kernel.__doc__ = f"``{op}``'s kernel: over all or adjacent dims natively."
    return kernel


def _one_layout(*arrays) -> bool:
    """C-contiguous float arrays of one dtype and shape: what ``_native.fused`` takes."""
    return _native_ok(*arrays) and all(
        a.flags.c_contiguous and a.shape == arrays[0].shape for a in arrays)


def lerp(start, end, weight):
    """lerp's kernel: natively for arrays of one layout and a number weight (one fused
    multiply-add from the nearer end, the reference's bits), else the reference."""
    if np.ndim(weight) == 0 and _one_layout(start, end):
        return _native.fused("lerp", start, end, None, float(weight))
    return _FALLBACK.lerp(start, end, weight)


def addcmul(x, t1, t2, value=1):
    """addcmul's kernel: natively for arrays of one layout (``(value * t1) * t2 + x`` with
    one rounding after the first product, the reference's bits), else the reference."""
    if np.ndim(value) == 0 and _one_layout(x, t1, t2):
        return _native.fused("addcmul", x, t1, t2, float(value))
    return _FALLBACK.addcmul(x, t1, t2, value=value)


#: Elementwise ops and reductions run natively on large float arrays.
ELEMENTWISE = {
    **{op: _alpha_kernel(op) for op in ("add", "sub")},
    "mul": _binary_kernel("mul"),
    "div": _div_kernel(),
    "lerp": lerp,
    "addcmul": addcmul,
    **{op: _unary_kernel(op) for op in ("neg", "abs", "sqrt", "rsqrt", "reciprocal",
                                        "square")},
    # float64's exp stays on NumPy's vectorised one (the C library's is scalar)
    "exp": _unary_kernel("exp", (np.dtype(np.float32),)),
    "sum": _reduction_kernel("sum"),
    "mean": _reduction_kernel("mean"),
}

#: The ops whose reference kernel this plugin replaces on "cpu".
OVERRIDES = ("matmul", "mm", "bmm", "addmm", "linear", "conv", "conv_weight",
             "conv_transpose", "max_pool", "max_pool_backward", "softmax", "log_softmax",
             "softmax_backward", "log_softmax_backward", "cross_entropy",
             "cross_entropy_backward", "embedding_backward", "lstm_cell",
             "lstm_cell_backward", "lstm_layer", "lstm_layer_backward", "gelu",
             "gelu_backward", "silu", "silu_backward", "sigmoid", "tanh", "softplus", "elu",
             "leaky_relu", "relu", "activation_backward", "layer_norm",
             "layer_norm_backward", "rms_norm", "rms_norm_backward", "batch_norm",
             "batch_norm_backward", "masked_fill", "flash_attention",
             "flash_attention_backward", "index_add", "cat", "contiguous", "reshape")
#: Not ops: helpers the reference kernels are written with (cross_entropy's rows), which
#: the fallback's reference kernels call on "cpu" (see torcia.library.fallback).
HELPERS = ("logsumexp_rows",)
OPTIMIZER_STEPS = {"sgd_step": sgd_step, "adam_step": adam_step}
