"""The convolutions of :data:`torcia.ops.NN`, each declared once: schema, reference kernel,
meta shape, decomposition, autocast policy, refusals. ``linear``, ``conv``
(cross-correlation over 1, 2 or 3 spatial dims), ``conv_transpose``, conv's weight gradient
``conv_weight``, ``im2col`` and its adjoint ``col2im`` (each an op, so that a faster
backend can override it). The pooling ops are :mod:`torcia._ops.nn_pool`'s, which takes
its windows from here.

A kernel here is a method of the reference backend: ``self.xp`` is the array module
(NumPy, or CuPy for torcia-cuda's subclass), arrays come positionally, parameters as
keywords, multi-output ops return a tuple. The public functions at the end of this module
(``conv1d``... ``conv_transpose3d``, ``convolution``, ``conv_tbc``) have already checked
shapes and normalised every parameter: inputs are batched (``N, C, *spatial``), and
``kernel_size``, ``stride``, ``dilation`` are tuples with one int per spatial dim;
``padding`` is a tuple of ``(low, high)`` pairs (``im2col``'s and ``col2im``'s, of ints,
the same on both sides). Windows are taken with ``sliding_window_view`` and contracted with
one batched matmul (im2col); their adjoint (col2im) adds strided slices, one per kernel
offset. No kernel loops over pixels.

A decomposition is written with Tensor methods, the public functions
(:data:`torcia._opdef.PUBLIC`) and ops by name (:func:`torcia._ops._common.op`): it runs
on any device, and this module is below the Tensor class. 1-D and 2-D windows go through
im2col (1-D as 2-D of height 1), any other number of dimensions through one strided slice
of the input per window offset. The derivatives are torcia-autograd's.

:func:`check_geometry` is also the plugins' (through :mod:`torcia.library`): a native
kernel refuses what the reference refuses, with the same error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    HALF,
    autocast_as,
    check_tensor,
    in_float32,
    low_precision,
    no_kernel,
    random_floats,
    refuse,
)
from torcia._ops._common import op as _op

# ----- reference kernels -----------------------------------------------------------------


def array_windows(xp, x, kernel, stride, dilation, padding, value=0):
    """A strided view of ``x`` (``N, C, *spatial``) as ``(N, C, *out, *kernel)``.

    ``padding`` holds one ``(low, high)`` pair per spatial dim, filled with ``value``.
    """
    nd = len(kernel)
    if any(lo or hi for lo, hi in padding):
        x = xp.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=value)
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    # NumPy's geometry on a zero-byte stand-in with x's strides, applied to x: CuPy's own
    # sliding_window_view checks the window on the device, a wait for it at every call
    probe = np.lib.stride_tricks.as_strided(np.zeros(1, x.dtype), x.shape, x.strides)
    probe = np.lib.stride_tricks.sliding_window_view(probe, span, axis=tuple(range(2, 2 + nd)))
    win = xp.lib.stride_tricks.as_strided(x, probe.shape, probe.strides)
    key = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride) + tuple(
        slice(None, None, d) for d in dilation)
    return win[key]


def array_add_windows(xp, cols, size, stride, dilation, by_window=False):
    """The adjoint of :func:`array_windows` without padding: ``cols`` is ``(N, C, *kernel,
    *positions)``; each kernel offset's values are added at their strided positions of a
    zero array of spatial ``size``, the offsets in increasing order (as col2im adds them),
    or with ``by_window`` decreasing, so that each element's terms arrive in the order of
    their windows (as PyTorch's pooling backward adds them: in half floats, where each
    addition rounds, the order shows)."""
    nd = len(size)
    kernel = cols.shape[2:2 + nd]
    pos = cols.shape[2 + nd:]
    out = xp.zeros(cols.shape[:2] + tuple(size), dtype=cols.dtype)
    step = -1 if by_window else 1
    for offset in itertools.product(*(range(k)[::step] for k in kernel)):
        key = tuple(slice(o * d, o * d + (p - 1) * s + 1, s)
                    for o, d, p, s in zip(offset, dilation, pos, stride))
        out[(slice(None), slice(None)) + key] += cols[(slice(None), slice(None)) + offset]
    return out


def _conv_out(size, kernel, stride, padding, dilation):
    """The output sizes of a convolution over spatial ``size`` (``padding``: (low, high)
    pairs): the number of windows along each dim."""
    return tuple((i + lo + hi - d * (k - 1) - 1) // s + 1
                 for i, k, s, (lo, hi), d in zip(size, kernel, stride, padding, dilation))


def _transposed_sizes(in_sp, kernel, stride, padding, output_padding, dilation):
    """``conv_transpose``'s output sizes, ``(in - 1) * stride - low - high + dilation *
    (k - 1) + output_padding + 1``, with PyTorch's error where one is not positive, and
    the sizes its columns are added into before the padding is cropped."""
    size = tuple((i - 1) * s - lo - hi + d * (k - 1) + op + 1
                 for i, s, d, k, op, (lo, hi) in zip(in_sp, stride, dilation, kernel,
                                                     output_padding, padding))
    if any(sz <= 0 for sz in size):
        raise RuntimeError(f"Given input size per channel: {list(in_sp)}. Calculated "
                           f"output size per channel: {list(size)}. Output size is too small")
    full = tuple((i - 1) * s + d * (k - 1) + 1 + max(op - hi, 0)
                 for i, s, d, k, op, (lo, hi) in zip(in_sp, stride, dilation, kernel,
                                                     output_padding, padding))
    return size, full


_INT_MAX = 2**31 - 1


def check_geometry(kernel, stride, padding, dilation, output_padding=None, pool=False):
    """Raise PyTorch's error for a window geometry no kernel can run: a size that does not
    fit a C int, a stride or dilation below one, negative (output) padding, or, for pooling,
    padding over half the window (a window in the padding only has no element to pick).

    Every kernel taking a geometry calls it, NumPy's and native ones alike, so both refuse
    the same input with the same error. ``padding`` holds ints or (low, high) pairs.
    """
    pads = [p for pair in padding for p in (pair if isinstance(pair, tuple) else (pair,))]
    values = [*kernel, *stride, *pads, *dilation, *(output_padding or ())]
    if any(abs(v) > _INT_MAX for v in values):
        raise RuntimeError("value cannot be converted to type int without overflow")
    if any(s < 1 for s in stride):
        raise RuntimeError("stride should not be zero" if pool and 0 in stride else
                           "non-positive stride is not supported")
    if any(d < 1 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation: "
                           f"{list(dilation)}")
    if any(p < 0 for p in pads):
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(pads)}" if pool else
                           "negative padding is not supported")
    if output_padding is not None and any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if pool:
        for p, k, d in zip(padding, kernel, dilation):
            if p > (d * (k - 1) + 1) // 2:
                raise RuntimeError(f"pad should be at most half of effective kernel size, but "
                                   f"got pad={p}, kernel_size={k} and dilation={d}")


def _swap_batch(xp, x):
    """``x`` with its first two dims swapped, contiguous: (N, C, *sp) as the (C, N, *sp)
    layout the column matrices use, and back."""
    return xp.ascontiguousarray(xp.moveaxis(x, 1, 0))


def _array_columns(xp, x, kernel, stride, dilation, padding, out_sp):
    """im2col: (N, C, *in) -> contiguous (C, *kernel, N, *out) (a (C*K, N*P) matrix), one
    strided block copy per kernel offset. Only the first ``out_sp`` windows are taken."""
    xt = _swap_batch(xp, x)
    if any(lo or hi for lo, hi in padding):
        xt = xp.pad(xt, ((0, 0), (0, 0)) + tuple(padding))
    c, n = xt.shape[:2]
    cols = xp.empty((c,) + tuple(kernel) + (n,) + tuple(out_sp), dtype=x.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
        key = tuple(slice(o * d, o * d + (p - 1) * s + 1, s)
                    for o, d, p, s in zip(offset, dilation, out_sp, stride))
        cols[(slice(None),) + offset] = xt[(slice(None), slice(None)) + key]
    return cols


def _array_add_columns(xp, cols, size, stride, dilation):
    """col2im, the adjoint of :func:`_array_columns` without padding: (C, *kernel, N, *pos)
    -> (C, N, *size), each offset's block added at its strided positions."""
    nd = len(size)
    kernel = cols.shape[1:1 + nd]
    pos = cols.shape[2 + nd:]
    out = xp.zeros((cols.shape[0], cols.shape[1 + nd]) + tuple(size), dtype=cols.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
        key = tuple(slice(o * d, o * d + (p - 1) * s + 1, s)
                    for o, d, p, s in zip(offset, dilation, pos, stride))
        out[(slice(None), slice(None)) + key] += cols[(slice(None),) + offset]
    return out


class Kernels:
    """The reference kernels, methods of the reference backend (see the module's doc)."""

    # ----- linear and convolution ---------------------------------------------------
    def linear(self, x, w, b):
        """linear(x (*, in), w (out, in), b (out,) or None) -> (*, out): x @ w.T + b."""
        if x.ndim > 2:
            # one GEMM over all rows: a batch against a transposed 2-D operand runs in
            # NumPy's slow loop, worse still when x is a transposed view (batch_first RNNs)
            out = (x.reshape(-1, x.shape[-1]) @ w.T).reshape(x.shape[:-1] + w.shape[:1])
        else:
            out = x @ w.T
        # NOTE: ml_dtypes' bfloat16 products come back as float32; PyTorch keeps the dtype
        out = out.astype(x.dtype, copy=False)
        if b is not None:
            out += b
        return out

    def conv(self, x, w, b, stride, padding, dilation, groups):
        """conv(x (N, C, *in), w (O, C/groups, *k), b (O,) or None) -> (N, O, *out):
        cross-correlation; ``padding`` is per-dim (low, high) pairs."""
        check_geometry(w.shape[2:], stride, padding, dilation)
        xp = self.xp
        n = x.shape[0]
        o = w.shape[0]
        kernel = w.shape[2:]
        out_sp = _conv_out(x.shape[2:], kernel, stride, padding, dilation)
        cols = _array_columns(xp, x, kernel, stride, dilation, padding, out_sp)
        # sizes spelled out: an empty batch (N = 0) leaves -1 nothing to infer
        per_group = x.shape[1] // groups * math.prod(kernel)
        cols = cols.reshape(groups, per_group, n * math.prod(out_sp))  # (g, C/g*K, N*P)
        out = w.reshape(groups, o // groups, per_group) @ cols  # (g, O/g, N*P)
        out = _swap_batch(xp, out.reshape((o, n) + out_sp)).astype(x.dtype, copy=False)
        if b is not None:
            out += b.reshape((1, o) + (1,) * len(kernel))
        return out

    def conv_transpose(self, x, w, b, stride, padding, output_padding, dilation, groups):
        """``conv_transpose(x (N, Cin, *in), w (Cin, Cout/groups, *k), b (Cout,) or None)
        -> (N, Cout, *out)``, ``out = (in - 1) * stride - low - high + dilation * (k - 1) +
        output_padding + 1``: the adjoint of ``conv`` with the same geometry."""
        if low_precision(x):
            # float16 and bfloat16 in float32, rounded once, as PyTorch's oneDNN kernel:
            # the overlapping columns summed in the dtype lose up to a fifth of a small value
            return self.conv_transpose(*in_float32(x, w, b), stride, padding, output_padding,
                                       dilation, groups).astype(x.dtype)
        check_geometry(w.shape[2:], stride, padding, dilation, output_padding)
        xp = self.xp
        n, cin = x.shape[:2]
        in_sp = x.shape[2:]
        kernel = w.shape[2:]
        og = w.shape[1]
        xm = _swap_batch(xp, x).reshape(groups, cin // groups, -1)  # (g, Cin/g, N*P)
        wm = w.reshape(groups, cin // groups, -1).transpose(0, 2, 1)  # (g, O/g*K, Cin/g)
        size, full = _transposed_sizes(in_sp, kernel, stride, padding, output_padding,
                                       dilation)
        cols = (wm @ xm).reshape((groups * og,) + kernel + (n,) + in_sp)
        out = _array_add_columns(xp, cols, full, stride, dilation)  # (Cout, N, *full)
        out = _swap_batch(xp, out[(slice(None), slice(None)) + tuple(
            slice(lo, lo + sz) for (lo, _), sz in zip(padding, size))]).astype(x.dtype,
                                                                              copy=False)
        if b is not None:
            out += b.reshape((1, -1) + (1,) * len(kernel))
        return out

    def conv_weight(self, x, g, weight_shape, stride, padding, dilation, groups):
        """conv_weight(x (N, C, *in), g (N, O, *out)) -> (O, C/groups, *k): the gradient
        of ``conv`` with respect to its weight, given the output gradient ``g``."""
        check_geometry(weight_shape[2:], stride, padding, dilation)
        xp = self.xp
        kernel = tuple(weight_shape[2:])
        o = weight_shape[0]
        cols = _array_columns(xp, x, kernel, stride, dilation, padding, g.shape[2:])
        cols = cols.reshape(groups, -1, x.shape[0] * math.prod(g.shape[2:]))  # (g, C/g*K, N*P)
        gm = _swap_batch(xp, g).reshape(groups, o // groups, -1)  # (g, O/g, N*P)
        return (gm @ cols.transpose(0, 2, 1)).reshape(weight_shape)

    def im2col(self, x, kernel_size, dilation, padding, stride):
        """im2col(x (N, C, H, W)) -> (N, C*kh*kw, L): every sliding block as a column."""
        xp = self.xp
        n, c = x.shape[:2]
        win = array_windows(xp, x, kernel_size, stride, dilation, tuple((p, p) for p in padding))
        nd = len(kernel_size)
        # (N, C, *L, *k) -> (N, C, *k, *L)
        perm = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
        return xp.ascontiguousarray(win.transpose(perm)).reshape(
            n, c * math.prod(kernel_size), -1)

    def col2im(self, cols, output_size, kernel_size, dilation, padding, stride):
        """col2im(cols (N, C*kh*kw, L)) -> (N, C, H, W): overlapping blocks summed."""
        n = cols.shape[0]
        k = math.prod(kernel_size)
        c = cols.shape[1] // k
        blocks = _conv_out(output_size, kernel_size, stride, tuple((p, p) for p in padding),
                           dilation)
        cols = cols.reshape((n, c) + tuple(kernel_size) + blocks)
        full = tuple(o + 2 * p for o, p in zip(output_size, padding))
        out = array_add_windows(self.xp, cols, full, stride, dilation)
        return out[(slice(None), slice(None)) + tuple(
            slice(p, p + o) for p, o in zip(padding, output_size))]


# ----- decompositions ---------------------------------------------------------------------


#: PyTorch's linear has no bool kernel (its matmul's)
_LINEAR_REFUSES = {BOOL: no_kernel("addmm_impl_cpu_")}


def linear(x, w, b):
    refuse(_LINEAR_REFUSES, x)
    out = x.matmul(w.transpose(0, 1))
    return out if b is None else out + b


def as_2d(x, nd):
    return x if nd == 2 else x.unsqueeze(-2)


def tensor_windows(x, kernel, stride, padding, dilation, out, value=0.0):
    """x (N, C, *size) padded by ``padding`` ((lo, hi) per dim) with ``value``, seen through
    its windows: (N, C, K, *out), K = prod(kernel) offsets in row-major order (the order of
    a weight's flattened kernel dims)."""
    if any(lo or hi for lo, hi in padding):
        flat = tuple(p for pair in reversed(padding) for p in pair)  # last dim first
        x = _op("pad", x, pad=flat, mode="constant", value=value)
    views = []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        key = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                    for o, d, n, s in zip(offsets, dilation, out, stride))
        views.append(x[(slice(None), slice(None)) + key])
    return _opdef.PUBLIC.stack(views, 2)


def _conv_nd(x, w, b, stride, padding, dilation, groups):
    n, o, nd = x.shape[0], w.shape[0], x.ndim - 2
    out = _conv_out(x.shape[2:], w.shape[2:], stride, padding, dilation)
    cols = tensor_windows(x, w.shape[2:], stride, padding, dilation, out)  # (N, C, K, *out)
    cols = cols.reshape(n, groups, -1, math.prod(out))
    res = w.reshape(groups, o // groups, -1).matmul(cols)  # (N, g, O/g, L)
    res = res.reshape((n, o) + out)
    return res if b is None else res + b.reshape((1, o) + (1,) * nd)


def _conv_weight_nd(x, g, weight_shape, stride, padding, dilation, groups):
    n, o = x.shape[0], weight_shape[0]
    out = tuple(g.shape[2:])
    cols = tensor_windows(x, weight_shape[2:], stride, padding, dilation, out)
    cols = cols.reshape(n, groups, -1, math.prod(out))
    gm = g.reshape(n, groups, o // groups, -1)  # (N, g, O/g, L)
    return gm.matmul(cols.transpose(2, 3)).sum(0).reshape(tuple(weight_shape))


def as_2d_params(values, nd, fill):
    return ((fill,) + tuple(values)) if nd == 1 else tuple(values)


def columns(x, kernel, stride, padding, dilation, value=0.0):
    """im2col of x (N, C, H, W) after padding it by ``padding`` ((lo, hi) per dim) with
    ``value``: (N, C*kh*kw, L)."""
    (plo, phi), (qlo, qhi) = padding
    if plo or phi or qlo or qhi:
        x = _op("pad", x, pad=(qlo, qhi, plo, phi), mode="constant", value=value)
    return _op("im2col", x, kernel_size=tuple(kernel), dilation=tuple(dilation),
               padding=(0, 0), stride=tuple(stride))


def conv(x, w, b, stride, padding, dilation, groups):
    nd = x.ndim - 2
    if nd > 2:
        return _conv_nd(x, w, b, stride, padding, dilation, groups)
    x2, w2 = as_2d(x, nd), as_2d(w, nd)
    stride, dilation = as_2d_params(stride, nd, 1), as_2d_params(dilation, nd, 1)
    padding = as_2d_params(padding, nd, (0, 0))
    n, o = x2.shape[0], w2.shape[0]
    kh, kw = w2.shape[2:]
    (plo, phi), (qlo, qhi) = padding
    oh = (x2.shape[2] + plo + phi - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x2.shape[3] + qlo + qhi - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    cols = columns(x2, (kh, kw), stride, padding, dilation)  # (N, C*K, L)
    cols = cols.reshape(n, groups, -1, oh * ow)
    out = w2.reshape(groups, o // groups, -1).matmul(cols)  # (N, g, O/g, L)
    out = out.reshape(n, o, oh, ow)
    if b is not None:
        out = out + b.reshape(1, o, 1, 1)
    return out.squeeze(-2) if nd == 1 else out


def conv_weight(x, g, weight_shape, stride, padding, dilation, groups):
    nd = x.ndim - 2
    if nd > 2:
        return _conv_weight_nd(x, g, weight_shape, stride, padding, dilation, groups)
    x2, g2 = as_2d(x, nd), as_2d(g, nd)
    shape2 = tuple(weight_shape) if nd == 2 else tuple(weight_shape[:2]) + (1,) + tuple(
        weight_shape[2:])
    stride, dilation = as_2d_params(stride, nd, 1), as_2d_params(dilation, nd, 1)
    padding = as_2d_params(padding, nd, (0, 0))
    n, o = x2.shape[0], shape2[0]
    cols = columns(x2, shape2[2:], stride, padding, dilation)  # (N, C*K, L)
    cols = cols.reshape(n, groups, -1, cols.shape[-1])
    gm = g2.reshape(n, groups, o // groups, -1)  # (N, g, O/g, L)
    return gm.matmul(cols.transpose(2, 3)).sum(0).reshape(tuple(weight_shape))


def add_tensor_windows(cols, size, stride, dilation):
    """The adjoint of :func:`tensor_windows` without padding: ``cols`` (N, C, *kernel,
    *positions); each kernel offset's values added at their strided positions of zeros of
    spatial ``size``."""
    nd = len(size)
    kernel, positions = tuple(cols.shape[2:2 + nd]), tuple(cols.shape[2 + nd:])
    out = _opdef.PUBLIC.zeros(tuple(cols.shape[:2]) + tuple(size), dtype=cols.dtype,
                              device=cols.device)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        key = (slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (n - 1) * s + 1, s)
            for o, d, n, s in zip(offsets, dilation, positions, stride))
        out = _op("index_put", out, cols[(slice(None), slice(None)) + offsets], key=key,
                  accumulate=True)
    return out


def inner(x, padding, size):
    """x's spatial dims cropped to ``size`` after ``padding``: its own memory."""
    key = tuple(slice(p, p + n) for p, n in zip(padding, size))
    return x[(slice(None), slice(None)) + key].contiguous()


def im2col(x, kernel_size, dilation, padding, stride):
    pads = tuple((p, p) for p in padding)
    out = _conv_out(x.shape[2:], kernel_size, stride, pads, dilation)
    cols = tensor_windows(x, kernel_size, stride, pads, dilation, out)  # (N, C, K, *out)
    return cols.reshape(x.shape[0], -1, math.prod(out))


def col2im(cols, output_size, kernel_size, dilation, padding, stride):
    n, c = cols.shape[0], cols.shape[1] // math.prod(kernel_size)
    pads = tuple((p, p) for p in padding)
    blocks = _conv_out(output_size, kernel_size, stride, pads, dilation)
    cols = cols.reshape((n, c) + tuple(kernel_size) + blocks)
    full = tuple(o + 2 * p for o, p in zip(output_size, padding))
    return inner(add_tensor_windows(cols, full, stride, dilation), padding, output_size)


def conv_transpose(x, w, b, stride, padding, output_padding, dilation, groups):
    if x.dtype in HALF:  # in float32, rounded once, as the reference kernel
        wide = [None if t is None else t.float() for t in (x, w, b)]
        return conv_transpose(*wide, stride, padding, output_padding, dilation,
                              groups).to(x.dtype)
    check_geometry(tuple(w.shape[2:]), stride, padding, dilation, output_padding)
    n, cin, in_sp = x.shape[0], x.shape[1], tuple(x.shape[2:])
    kernel, og = tuple(w.shape[2:]), w.shape[1]
    # each input position's contribution to each kernel offset: (N, g, O/g * K, P)
    xm = x.reshape(n, groups, cin // groups, -1)
    wm = w.reshape(groups, cin // groups, -1).transpose(1, 2)
    size, full = _transposed_sizes(in_sp, kernel, stride, padding, output_padding, dilation)
    cols = wm.matmul(xm).reshape((n, groups * og) + kernel + in_sp)
    out = inner(add_tensor_windows(cols, full, stride, dilation), [lo for lo, _ in padding], size)
    return out if b is None else out + b.reshape((1, -1) + (1,) * len(kernel))


# ----- meta shapes -----------------------------------------------------------------------


def _linear_shape(x, w, b=None, **params):
    """``x @ w.T``: ``(*, out)`` for ``x (*, in)`` and ``w (out, in)``, with matmul's error
    where ``in`` differs."""
    if x.shape[-1:] != w.shape[-1:]:
        left, right = ((1, 1) + x.shape)[-2:], w.shape[::-1] + (1,)
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({left[0]}x{left[1]} "
                           f"and {right[0]}x{right[1]})")
    return x.shape[:-1] + w.shape[:-1], np.result_type(x.dtype, w.dtype)


def _conv_shape(x, w, b, stride, padding, dilation, groups, **params):
    out = _conv_out(x.shape[2:], w.shape[2:], stride, padding, dilation)
    return (x.shape[0], w.shape[0]) + out, np.result_type(x.dtype, w.dtype)


def _conv_transpose_shape(x, w, b, stride, padding, output_padding, dilation, groups,
                          **params):
    size, _ = _transposed_sizes(x.shape[2:], w.shape[2:], stride, padding, output_padding,
                                dilation)
    return (x.shape[0], w.shape[1] * groups) + size, np.result_type(x.dtype, w.dtype)


def _conv_weight_shape(x, g, weight_shape, *rest, **params):
    return tuple(weight_shape), np.result_type(x.dtype, g.dtype)


def _im2col_shape(x, kernel_size, dilation, padding, stride, **params):
    out = _conv_out(x.shape[2:], kernel_size, stride, tuple((p, p) for p in padding),
                    dilation)
    return (x.shape[0], x.shape[1] * math.prod(kernel_size), math.prod(out)), x.dtype


def _col2im_shape(cols, output_size, kernel_size, dilation, padding, stride, **params):
    return (cols.shape[0], cols.shape[1] // math.prod(kernel_size)) + tuple(output_size), \
        cols.dtype


# ----- the declarations ------------------------------------------------------------------


def _nn(schema, kernel, **declared):
    return define(schema, kernel, group="nn", **declared)


#: the windows of im2col's and col2im's samples
_WINDOWS = {"kernel_size": (2, 2), "dilation": (1, 1), "padding": (0, 0), "stride": (1, 1)}


#: the products and convolutions run in the low-precision dtype under autocast, as
#: PyTorch's lists have them on both device types
_LOWER = {"cpu": "lower", "cuda": "lower"}


#: in :data:`torcia.ops.NN`'s order; all composites (1-D and 2-D windows through im2col)
DECLARED = (
    _nn("linear(Tensor x, Tensor w, Tensor? b) -> Tensor", Kernels.linear,
        shape=_linear_shape, decomposition=linear, autocast=_LOWER,
        refuses=_LINEAR_REFUSES),
    _nn("conv(Tensor x, Tensor w, Tensor? b, *, stride=None, padding=None, dilation=None, "
        "groups=None) -> Tensor", Kernels.conv, shape=_conv_shape, decomposition=conv,
        autocast=_LOWER),
    _nn("conv_transpose(Tensor x, Tensor w, Tensor? b, *, stride=None, padding=None, "
        "output_padding=None, dilation=None, groups=None) -> Tensor", Kernels.conv_transpose,
        shape=_conv_transpose_shape, decomposition=conv_transpose, autocast=_LOWER),
    _nn("conv_weight(Tensor x, Tensor g, *, weight_shape=None, stride=None, padding=None, "
        "dilation=None, groups=None) -> Tensor", Kernels.conv_weight,
        shape=_conv_weight_shape, decomposition=conv_weight),
    _nn("im2col(Tensor x, *, kernel_size=None, dilation=None, padding=None, stride=None) "
        "-> Tensor", Kernels.im2col, shape=_im2col_shape, decomposition=im2col,
        samples=lambda rng: [((random_floats(rng, 1, 2, 4, 4),), _WINDOWS)]),
    _nn("col2im(Tensor cols, *, output_size=None, kernel_size=None, dilation=None, "
        "padding=None, stride=None) -> Tensor", Kernels.col2im, shape=_col2im_shape,
        decomposition=col2im,
        samples=lambda rng: [((random_floats(rng, 1, 8, 9),),
                              {"output_size": (4, 4), **_WINDOWS})]),
)


# ----- the public functions ----------------------------------------------------------------


def ntuple(value, n: int, name: str) -> tuple:
    """An int or a sequence of ``n`` ints as a tuple of ``n`` ints.

    Examples
    --------
    >>> import torcia.library
    >>> torcia.library.ntuple(3, 2, "kernel_size")
    (3, 3)
    >>> torcia.library.ntuple((1, 2), 2, "stride")
    (1, 2)
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the convolution dimensions, but got "
                           f"{name}={list(value)}")
    return value


def batched(input, nd: int, fn: str) -> tuple:
    """``input`` with a batch dim, and whether one was added (an unbatched input).

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> x = torcia.zeros(3, 4)  # an unbatched (C, L) input
    >>> batch, added = library.batched(x, 1, "conv1d")
    >>> batch.shape, added, library.unbatch(batch, added).shape
    (torcia.Size([1, 3, 4]), True, torcia.Size([3, 4]))
    """
    if input.ndim == nd + 1:
        return input.unsqueeze(0), True
    if input.ndim == nd + 2:
        return input, False
    raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                       f"{fn}, but got input of size: {list(input.shape)}")


def unbatch(out, added: bool):
    return out.squeeze(0) if added else out


def _same_dtype(input, other, name: str) -> None:
    if other is not None and other.dtype is not input.dtype:
        raise RuntimeError(f"Input type ({_tname(input.dtype)}) and {name} type "
                           f"({_tname(other.dtype)}) should be the same")


def _tname(d) -> str:
    return {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16"}.get(d.name, d.name)


def _conv_padding(padding, nd, kernel, dilation, stride, fn):
    """``padding`` (int, tuple, "valid" or "same") as (low, high) pairs."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            pairs = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pairs.append((total // 2, total - total // 2))
            return tuple(pairs)
        raise ValueError(f"Invalid padding string '{padding}', should be one of "
                         "{'valid', 'same'}")
    pad = ntuple(padding, nd, "padding")
    if any(p < 0 for p in pad):
        raise RuntimeError("negative padding is not supported")
    return tuple((p, p) for p in pad)


def _conv(nd, input, weight, bias, stride, padding, dilation, groups, fn):
    check_tensor(input, "input", fn)
    input, added = batched(input, nd, fn)
    if weight.ndim != nd + 2:
        raise RuntimeError("weight should have at least three dimensions" if nd == 1 else
                           f"Expected {nd + 2}-dimensional weight for {nd + 2}-dimensional "
                           f"input {list(input.shape)}, but got {weight.ndim}-dimensional "
                           f"weight of size {list(weight.shape)} instead")
    _same_dtype(input, weight, "weight")
    _same_dtype(input, bias, "bias")
    groups = int(groups)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    kernel = tuple(weight.shape[2:])
    stride = ntuple(stride, nd, "stride")
    dilation = ntuple(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    pads = _conv_padding(padding, nd, kernel, dilation, stride, fn)
    out_ch, c = weight.shape[0], input.shape[1]
    if out_ch == 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {list(weight.shape)} instead")
    if out_ch % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size "
                           f"{list(weight.shape)} instead")
    if c != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(input.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {c} channels "
                           "instead")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_ch):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {out_ch} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    padded = tuple(i + lo + hi for i, (lo, hi) in zip(input.shape[2:], pads))
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    if any(p < s for p, s in zip(padded, span)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, span))}). Kernel size can't be greater "
                           "than actual input size")
    if c == 0:
        # PyTorch hands an input without channels back as an empty (N, 0, *out) batch
        out_sp = tuple((p - s) // st + 1 for p, s, st in zip(padded, span, stride))
        empty = input.sum(dim=tuple(range(2, 2 + nd)), keepdim=True)
        return unbatch(empty.expand((input.shape[0], 0) + out_sp).clone(), added)
    out = _opdef.CALL("conv", (input, weight, bias), {"stride": stride, "padding": pads,
                                                      "dilation": dilation, "groups": groups})
    return unbatch(out, added)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation of ``input`` (N, C, L) or (C, L) with ``weight``
    (out_channels, C / groups, k); ``padding`` may be an int, "valid" or "same".

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[[1.0, 2.0, 3.0]]])
    >>> torcia.conv1d(x, torcia.tensor([[[1.0, -1.0]]]))
    tensor([[[-1., -1.]]])
    """
    return _conv(1, input, weight, bias, stride, padding, dilation, groups, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of ``input`` (N, C, H, W) or (C, H, W) with ``weight``
    (out_channels, C / groups, kh, kw).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(1, 1, 3, 3)
    >>> torcia.conv2d(x, torcia.ones(1, 1, 2, 2), padding=1)[0, 0]
    tensor([[1., 2., 2., 1.],
            [2., 4., 4., 2.],
            [2., 4., 4., 2.],
            [1., 2., 2., 1.]])
    """
    return _conv(2, input, weight, bias, stride, padding, dilation, groups, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of ``input`` (N, C, D, H, W) with ``weight``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(1, 1, 2, 2, 2)
    >>> torcia.conv3d(x, torcia.ones(1, 1, 2, 2, 2)).flatten()
    tensor([8.])
    """
    return _conv(3, input, weight, bias, stride, padding, dilation, groups, "conv3d")


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups,
                    dilation, fn):
    check_tensor(input, "input", fn)
    input, added = batched(input, nd, fn)
    if weight.ndim != nd + 2:
        raise RuntimeError(f"Expected {nd + 2}-dimensional weight for {nd + 2}-dimensional "
                           f"input {list(input.shape)}, but got {weight.ndim}-dimensional "
                           f"weight of size {list(weight.shape)} instead")
    _same_dtype(input, weight, "weight")
    _same_dtype(input, bias, "bias")
    if isinstance(padding, str):
        raise ValueError(f"{fn}: padding must be an int or a tuple, not '{padding}'")
    groups = int(groups)
    stride = ntuple(stride, nd, "stride")
    dilation = ntuple(dilation, nd, "dilation")
    pad = ntuple(padding, nd, "padding")
    out_pad = ntuple(output_padding, nd, "output_padding")
    check_geometry(weight.shape[2:], stride, pad, dilation, out_pad)
    for op, s, d in zip(out_pad, stride, dilation):
        if op >= s and op >= d:
            raise RuntimeError(f"output padding must be smaller than either stride or "
                               f"dilation, but got output_padding: {list(out_pad)}, "
                               f"stride: {list(stride)}, dilation: {list(dilation)}")
    c = input.shape[1]
    if c != weight.shape[0] or c % groups:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, "
                           f"expected input{list(input.shape)} to have {weight.shape[0]} "
                           f"channels, but got {c} channels instead")
    out_ch = weight.shape[1] * groups
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_ch):
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, "
                           f"expected bias to be 1-dimensional with {out_ch} elements, but "
                           f"got bias of size {list(bias.shape)} instead")
    size = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in zip(
        input.shape[2:], stride, pad, dilation, weight.shape[2:], out_pad)]
    if any(s <= 0 for s in size):
        raise RuntimeError(f"Given input size per channel: {list(input.shape[2:])}. "
                           f"Calculated output size per channel: {size}. Output size is too "
                           "small")
    out = _opdef.CALL("conv_transpose", (input, weight, bias), {
        "stride": stride, "padding": tuple((p, p) for p in pad), "output_padding": out_pad,
        "dilation": dilation, "groups": groups})
    return unbatch(out, added)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """The transpose (adjoint) of :func:`conv1d`: ``weight`` is (in_channels,
    out_channels / groups, k).

    Examples
    --------
    >>> import torcia
    >>> torcia.conv_transpose1d(torcia.tensor([[[1.0, 2.0]]]), torcia.tensor([[[1.0, 1.0]]]))
    tensor([[[1., 3., 2.]]])
    """
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation, "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """The transpose (adjoint) of :func:`conv2d` ("deconvolution"): ``weight`` is
    (in_channels, out_channels / groups, kh, kw).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(1, 1, 2, 2)
    >>> torcia.conv_transpose2d(x, torcia.ones(1, 1, 2, 2))
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation, "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """The transpose (adjoint) of :func:`conv3d`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(1, 1, 1, 1, 1)
    >>> torcia.conv_transpose3d(x, torcia.ones(1, 2, 2, 2, 2)).shape
    torcia.Size([1, 2, 2, 2, 2])
    """
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation, "conv_transpose3d")


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """PyTorch's generic convolution: 1-, 2- or 3-D by ``weight``'s rank, transposed or
    not; the arguments are all positional, as ``torch.convolution``'s.

    Examples
    --------
    >>> import torcia
    >>> torcia.convolution(torcia.ones(1, 1, 4), torcia.ones(1, 1, 2), None, [1], [0], [1],
    ...                    False, [0], 1)
    tensor([[[2., 2., 2.]]])
    """
    n = weight.ndim - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a 3-D, 4-D or 5-D weight, got "
                           f"{weight.ndim}-D")
    if transposed:
        fn = globals()[f"conv_transpose{n}d"]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return globals()[f"conv{n}d"](input, weight, bias, stride, padding, dilation,
                                         groups)


@autocast_as("conv_tbc")
def conv_tbc(input, weight, bias, pad=0):
    """1-D convolution over a ``(time, batch, channels)`` input with a ``(kernel,
    in_channels, out_channels)`` weight, ``pad`` zeros at each end of time.

    Examples
    --------
    >>> import torcia
    >>> torcia.conv_tbc(torcia.ones(4, 1, 1), torcia.ones(2, 1, 1), torcia.zeros(1)).shape
    torcia.Size([3, 1, 1])
    """
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if bias.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, pad)
    return out.permute(2, 0, 1)


#: the public functions above, which torcia exports
PUBLIC = (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d,
          convolution, conv_tbc)

#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
)

#: the names ``torcia`` exports from here
__all__ = [fn.__name__ for fn in PUBLIC]
