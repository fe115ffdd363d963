"""The convolutions and pooling of :data:`torcia.ops.NN`, each declared once: schema,
reference kernel, meta shape, decomposition, autocast policy, refusals. ``linear``,
``conv`` (cross-correlation over 1, 2 or 3 spatial dims), ``conv_transpose``, conv's
weight gradient ``conv_weight``, ``im2col`` and its adjoint ``col2im``, ``max_pool``,
``avg_pool``, ``adaptive_max_pool`` and the pools' adjoints ``max_pool_backward`` and
``avg_pool_backward`` (each an op, so that a faster backend can override it).

A kernel here is a method of the reference backend: ``self.xp`` is the array module
(NumPy, or CuPy for torcia-cuda's subclass), arrays come positionally, parameters as
keywords, multi-output ops return a tuple. The public functions in
:mod:`torcia._oplib.nn_conv` have already checked shapes and normalised every parameter:
inputs are batched (``N, C, *spatial``), and ``kernel_size``, ``stride``, ``dilation`` are
tuples with one int per spatial dim; convolution ``padding`` is a tuple of ``(low, high)``
pairs, pooling ``padding`` a tuple of ints (the same on both sides). Windows are taken
with ``sliding_window_view`` and contracted with one batched matmul (im2col); their
adjoint (col2im) adds strided slices, one per kernel offset. No kernel loops over pixels.

A decomposition is written with Tensor methods, the public functions
(:data:`torcia._opdef.PUBLIC`) and ops by name (:func:`torcia._ops._common.op`): it runs
on any device, and this module is below the Tensor class. 1-D and 2-D windows go through
im2col (1-D as 2-D of height 1), any other number of dimensions through one strided slice
of the input per window offset. The derivatives are torcia-autograd's.

:func:`check_geometry` and :func:`pool_geometry` are also the plugins' (through
:mod:`torcia.library`): a native kernel refuses what the reference refuses, with the same
error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from torcia import _opdef
from torcia._dtype import np_floating as _floating
from torcia._opdef import define
from torcia._ops._common import BOOL, HALF, in_float32, low_precision, no_kernel, refuse
from torcia._ops._common import op as _op

# ----- reference kernels -----------------------------------------------------------------


def _array_windows(xp, x, kernel, stride, dilation, padding, value=0):
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


def _array_add_windows(xp, cols, size, stride, dilation):
    """The adjoint of :func:`_array_windows` without padding: ``cols`` is ``(N, C, *kernel,
    *positions)``; each kernel offset's values are added at their strided positions of a
    zero array of spatial ``size``."""
    nd = len(size)
    kernel = cols.shape[2:2 + nd]
    pos = cols.shape[2 + nd:]
    out = xp.zeros(cols.shape[:2] + tuple(size), dtype=cols.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
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


def adaptive_bounds(size, out):
    """(start, end): NumPy arrays of the bounds of adaptive pooling's ``out`` windows over a
    dim of ``size``, window i spanning [floor(i size / out), ceil((i + 1) size / out))."""
    r = np.arange(out)
    return (r * size) // out, -((-(r + 1) * size) // out)


def _adaptive_windows(size, out):
    """The input positions of adaptive pooling's windows (:func:`adaptive_bounds`) as an
    (out, width) NumPy table: each window has the width of the widest, a short one
    repeating its last element, which cannot change a maximum."""
    start, end = adaptive_bounds(size, out)
    width = int((end - start).max())
    return np.minimum(start[:, None] + np.arange(width)[None, :], end[:, None] - 1)


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


def pool_geometry(size, kernel, stride, padding, dilation, ceil_mode):
    """Output sizes of a pooling window and the extra high-side padding ``ceil_mode``
    needs so the last (partial) window exists.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> library.pool_geometry((5,), (2,), (2,), (0,), (1,), ceil_mode=False)
    ((2,), (0,))
    >>> library.pool_geometry((5,), (2,), (2,), (0,), (1,), ceil_mode=True)
    ((3,), (1,))
    """
    check_geometry(kernel, stride, padding, dilation, pool=True)
    out, extra = [], []
    for i, k, s, p, d in zip(size, kernel, stride, padding, dilation):
        span = d * (k - 1) + 1
        num = i + 2 * p - span
        o = (-(-num // s) if ceil_mode else num // s) + 1
        if ceil_mode and (o - 1) * s >= i + p:
            # the last window would start in the padding only
            o -= 1
        if d > 1 and o > 0:
            _check_windows_reach_input(i, k, s, p, d, o)
        out.append(o)
        extra.append(max(0, (o - 1) * s + span - (i + 2 * p)))
    return tuple(out), tuple(extra)


def _check_windows_reach_input(size, k, s, p, d, out):
    """Raise when a dilated window falls on padding only (kernel 2, dilation 3, padding 1
    over 2 elements: positions -1 and 2): it has no element to pick, and its index would
    point outside the plane. Undilated windows within the padding limit always reach it."""
    pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
    empty = ~((pos >= 0) & (pos < size)).any(axis=1)
    if empty.any():
        raise RuntimeError(f"max_pool: window {int(empty.argmax())} of a dimension of size "
                           f"{size} holds padding only (kernel_size={k}, stride={s}, "
                           f"padding={p}, dilation={d}); reduce the padding or the dilation")


def _lowest(xp, dtype):
    if _floating(np.dtype(dtype)):
        return -xp.inf
    return np.iinfo(dtype).min


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


def _avg_divisor(xp, in_sp, out_sp, kernel, stride, padding, count_include_pad,
                 divisor_override):
    """The divisor of each average-pooling window, broadcastable to ``(N, C, *out)``."""
    if divisor_override:
        return divisor_override
    div = np.ones((), dtype=np.float64)
    for i, o, k, s, p in zip(in_sp, out_sp, kernel, stride, padding):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, i + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, i)
        div = np.multiply.outer(div, end - start)
    return xp.asarray(div)


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
        win = _array_windows(xp, x, kernel_size, stride, dilation, tuple((p, p) for p in padding))
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
        out = _array_add_windows(self.xp, cols, full, stride, dilation)
        return out[(slice(None), slice(None)) + tuple(
            slice(p, p + o) for p, o in zip(padding, output_size))]

    # ----- pooling ------------------------------------------------------------------
    def max_pool(self, x, kernel_size, stride, padding, dilation, ceil_mode):
        """max_pool(x (N, C, *in)) -> (values, indices): indices are flat positions in
        each input plane, as PyTorch's ``return_indices``."""
        xp = self.xp
        nd = len(kernel_size)
        in_sp = x.shape[2:]
        out_sp, extra = pool_geometry(in_sp, kernel_size, stride, padding, dilation,
                                      ceil_mode)
        pads = tuple((p, p + e) for p, e in zip(padding, extra))
        lowest = _lowest(xp, x.dtype)
        keep = (slice(None), slice(None)) + tuple(slice(0, o) for o in out_sp)
        win = _array_windows(xp, x, kernel_size, stride, dilation, pads, lowest)[keep]
        flat = win.reshape(x.shape[:2] + out_sp + (-1,))
        arg = flat.argmax(axis=-1)
        values = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
        # (on a device the select runs whatever the values: reading them would wait for it)
        if any(lo or hi for lo, hi in pads) and (xp is not np or (values == lowest).any()):
            # a window of the lowest value only names its first real element, as PyTorch
            # does, never the padding, which holds the same value
            real = xp.ones((1, 1) + tuple(in_sp), dtype=np.int8)
            real = _array_windows(xp, real, kernel_size, stride, dilation, pads)[keep]
            first_real = real.reshape((1, 1) + out_sp + (-1,)).argmax(axis=-1)
            arg = xp.where(values == lowest, first_real, arg)
        # window offset -> input coordinate, per dim, then a flat index into the plane
        # (unravelled by hand: CuPy's unravel_index checks the bounds on the device, a wait)
        offsets, rest = [], arg
        for k in kernel_size[::-1]:
            offsets.insert(0, rest % k)
            rest = rest // k
        index = xp.zeros(arg.shape, dtype=np.int64)
        for dim in range(nd):
            shape = [1] * (2 + nd)
            shape[2 + dim] = out_sp[dim]
            start = (xp.arange(out_sp[dim]) * stride[dim] - padding[dim]).reshape(shape)
            coord = start + offsets[dim] * dilation[dim]
            index = index * in_sp[dim] + coord
        return values, index

    def max_pool_backward(self, g, indices, input_shape):
        """max_pool_backward(g (N, C, *out), indices) -> (N, C, *input_shape): each
        gradient added at the input position its window's maximum came from."""
        xp = self.xp
        n, c = g.shape[:2]
        plane = math.prod(input_shape)
        rows = (xp.arange(n * c, dtype=np.int64) * plane)[:, None]
        flat = (indices.reshape(n * c, -1) + rows).reshape(-1)
        if xp is np:
            out = xp.bincount(flat, weights=g.reshape(-1), minlength=n * c * plane)
        else:  # a device's bincount reads the largest index first (a wait): scatter-add
            out = xp.zeros(n * c * plane, dtype=np.promote_types(g.dtype, np.float32))
            xp.add.at(out, flat, g.reshape(-1))
        return out.astype(g.dtype, copy=False).reshape((n, c) + tuple(input_shape))

    def adaptive_max_pool(self, x, output_size):
        """adaptive_max_pool(x (N, C, *in)) -> (values, indices): window i of a dim of
        size I spans [floor(i*I/O), ceil((i+1)*I/O))."""
        xp = self.xp
        nd = len(output_size)
        in_sp = x.shape[2:]
        idx = [_adaptive_windows(i, o) for i, o in zip(in_sp, output_size)]
        g = x
        for dim, pos in enumerate(idx):
            g = xp.take(g, xp.asarray(pos.reshape(-1)), axis=2 + 2 * dim)
            g = g.reshape(g.shape[:2 + 2 * dim] + pos.shape + g.shape[3 + 2 * dim:])
        # g: (N, C, O1, W1, O2, W2, ...) -> (N, C, O1, O2, ..., W1*W2*...)
        perm = (0, 1) + tuple(range(2, 2 + 2 * nd, 2)) + tuple(range(3, 3 + 2 * nd, 2))
        flat = g.transpose(perm).reshape(x.shape[:2] + tuple(output_size) + (-1,))
        arg = flat.argmax(axis=-1)
        values = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
        widths = tuple(p.shape[1] for p in idx)
        offsets = xp.unravel_index(arg, widths)
        index = xp.zeros(arg.shape, dtype=np.int64)
        for dim in range(nd):
            shape = [1] * (2 + nd)
            shape[2 + dim] = output_size[dim]
            table = xp.asarray(idx[dim])  # (O, W): input coordinate of each window slot
            rows = xp.broadcast_to(xp.arange(output_size[dim]).reshape(shape), arg.shape)
            coord = table[rows, offsets[dim]]
            index = index * in_sp[dim] + coord
        return values, index

    def avg_pool(self, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
        """avg_pool(x (N, C, *in)) -> (N, C, *out): window sums over a divisor
        (``divisor_override``, or the window's size within the padded or unpadded input)."""
        xp = self.xp
        nd = len(kernel_size)
        ones = (1,) * nd
        out_sp, extra = pool_geometry(x.shape[2:], kernel_size, stride, padding, ones,
                                      ceil_mode)
        pads = tuple((p, p + e) for p, e in zip(padding, extra))
        win = _array_windows(xp, x, kernel_size, stride, ones, pads)
        win = win[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_sp)]
        total = win.sum(axis=tuple(range(2 + nd, 2 + 2 * nd)))
        div = _avg_divisor(xp, x.shape[2:], out_sp, kernel_size, stride, padding,
                           count_include_pad, divisor_override)
        return (total / div).astype(x.dtype, copy=False)

    def avg_pool_backward(self, g, input_shape, kernel_size, stride, padding, ceil_mode,
                          count_include_pad, divisor_override):
        """avg_pool_backward(g (N, C, *out)) -> (N, C, *input_shape): the adjoint of
        ``avg_pool``; each gradient spread over its window over the divisor."""
        xp = self.xp
        nd = len(kernel_size)
        ones = (1,) * nd
        out_sp = g.shape[2:]
        div = _avg_divisor(xp, input_shape, out_sp, kernel_size, stride, padding,
                           count_include_pad, divisor_override)
        share = (g / div).astype(g.dtype, copy=False)
        cols = xp.broadcast_to(share[(slice(None), slice(None)) + (None,) * nd],
                               g.shape[:2] + tuple(kernel_size) + out_sp)
        full = tuple(max(i + 2 * p, (o - 1) * s + k) for i, p, o, s, k in zip(
            input_shape, padding, out_sp, stride, kernel_size))
        out = _array_add_windows(xp, cols, full, stride, ones)
        return xp.ascontiguousarray(out[(slice(None), slice(None)) + tuple(
            slice(p, p + i) for p, i in zip(padding, input_shape))])


# ----- decompositions ---------------------------------------------------------------------


#: PyTorch's linear has no bool kernel (its matmul's)
_LINEAR_REFUSES = {BOOL: no_kernel("addmm_impl_cpu_")}


def linear(x, w, b):
    refuse(_LINEAR_REFUSES, x)
    out = x.matmul(w.transpose(0, 1))
    return out if b is None else out + b


def _as_2d(x, nd):
    return x if nd == 2 else x.unsqueeze(-2)


def _windows(x, kernel, stride, padding, dilation, out, value=0.0):
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
    cols = _windows(x, w.shape[2:], stride, padding, dilation, out)  # (N, C, K, *out)
    cols = cols.reshape(n, groups, -1, math.prod(out))
    res = w.reshape(groups, o // groups, -1).matmul(cols)  # (N, g, O/g, L)
    res = res.reshape((n, o) + out)
    return res if b is None else res + b.reshape((1, o) + (1,) * nd)


def _conv_weight_nd(x, g, weight_shape, stride, padding, dilation, groups):
    n, o = x.shape[0], weight_shape[0]
    out = tuple(g.shape[2:])
    cols = _windows(x, weight_shape[2:], stride, padding, dilation, out)
    cols = cols.reshape(n, groups, -1, math.prod(out))
    gm = g.reshape(n, groups, o // groups, -1)  # (N, g, O/g, L)
    return gm.matmul(cols.transpose(2, 3)).sum(0).reshape(tuple(weight_shape))


def _pairs(values, nd, fill):
    return ((fill,) + tuple(values)) if nd == 1 else tuple(values)


def _columns(x, kernel, stride, padding, dilation, value=0.0):
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
    x2, w2 = _as_2d(x, nd), _as_2d(w, nd)
    stride, dilation = _pairs(stride, nd, 1), _pairs(dilation, nd, 1)
    padding = _pairs(padding, nd, (0, 0))
    n, o = x2.shape[0], w2.shape[0]
    kh, kw = w2.shape[2:]
    (plo, phi), (qlo, qhi) = padding
    oh = (x2.shape[2] + plo + phi - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x2.shape[3] + qlo + qhi - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    cols = _columns(x2, (kh, kw), stride, padding, dilation)  # (N, C*K, L)
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
    x2, g2 = _as_2d(x, nd), _as_2d(g, nd)
    shape2 = tuple(weight_shape) if nd == 2 else tuple(weight_shape[:2]) + (1,) + tuple(
        weight_shape[2:])
    stride, dilation = _pairs(stride, nd, 1), _pairs(dilation, nd, 1)
    padding = _pairs(padding, nd, (0, 0))
    n, o = x2.shape[0], shape2[0]
    cols = _columns(x2, shape2[2:], stride, padding, dilation)  # (N, C*K, L)
    cols = cols.reshape(n, groups, -1, cols.shape[-1])
    gm = g2.reshape(n, groups, o // groups, -1)  # (N, g, O/g, L)
    return gm.matmul(cols.transpose(2, 3)).sum(0).reshape(tuple(weight_shape))


def max_pool(x, kernel_size, stride, padding, dilation, ceil_mode):
    nd = x.ndim - 2
    if nd > 2:
        return _max_pool_nd(x, kernel_size, stride, padding, dilation, ceil_mode)
    x2 = _as_2d(x, nd)
    kernel, stride = _pairs(kernel_size, nd, 1), _pairs(stride, nd, 1)
    padding, dilation = _pairs(padding, nd, 0), _pairs(dilation, nd, 1)
    n, c, h, w = x2.shape
    (oh, ow), extra = pool_geometry((h, w), kernel, stride, padding, dilation, ceil_mode)
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    lowest = -math.inf if x.is_floating_point() else int(np.iinfo(x.dtype.to_numpy()).min)
    cols = _columns(x2, kernel, stride, pads, dilation, lowest)  # (N, C*K, L')
    k = kernel[0] * kernel[1]
    full_w = (w + pads[1][0] + pads[1][1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    cols = cols.reshape(n, c, k, -1, full_w)[:, :, :, :oh, :ow]
    arg = cols.argmax(2, keepdim=True)  # the first maximum, as PyTorch
    values = cols.take_along_dim(arg, 2).squeeze(2)
    arg = arg.squeeze(2)
    dev = x.device
    row = (_opdef.PUBLIC.arange(oh, device=dev) * stride[0] - padding[0]).reshape(1, 1, oh, 1)
    col = (_opdef.PUBLIC.arange(ow, device=dev) * stride[1] - padding[1]).reshape(1, 1, 1, ow)
    row = row + _opdef.PUBLIC.div(arg, kernel[1], rounding_mode="floor") * dilation[0]
    col = col + _opdef.PUBLIC.remainder(arg, kernel[1]) * dilation[1]
    index = row * w + col
    if nd == 1:
        return values.squeeze(-2), index.squeeze(-2)
    return values, index


def _max_pool_nd(x, kernel, stride, padding, dilation, ceil_mode):
    nd, size = x.ndim - 2, tuple(x.shape[2:])
    out, extra = pool_geometry(size, kernel, stride, padding, dilation, ceil_mode)
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    lowest = -math.inf if x.is_floating_point() else int(np.iinfo(x.dtype.to_numpy()).min)
    cols = _windows(x, kernel, stride, pads, dilation, out, lowest)  # (N, C, K, *out)
    arg = cols.argmax(2, keepdim=True)  # the first maximum, as PyTorch
    values = cols.take_along_dim(arg, 2).squeeze(2)
    arg = arg.squeeze(2)
    # the flat index in the input plane: each dim's window start plus its offset in arg
    index = None
    for i in range(nd):
        offset = _opdef.PUBLIC.remainder(
            _opdef.PUBLIC.div(arg, math.prod(kernel[i + 1:]), rounding_mode="floor"),
            kernel[i])
        start = _opdef.PUBLIC.arange(out[i], device=x.device) * stride[i] - padding[i]
        start = start.reshape((1, 1) + (1,) * i + (out[i],) + (1,) * (nd - i - 1))
        term = (start + offset * dilation[i]) * math.prod(size[i + 1:])
        index = term if index is None else index + term
    return values, index


def max_pool_backward(g, indices, input_shape):
    n, c = g.shape[:2]
    plane = math.prod(input_shape)
    out = _opdef.PUBLIC.zeros(n * c, plane, dtype=g.dtype, device=g.device)
    out = out.scatter_add(1, indices.reshape(n * c, -1), g.reshape(n * c, -1))
    return out.reshape((n, c) + tuple(input_shape))



def _add_windows(cols, size, stride, dilation):
    """The adjoint of :func:`_windows` without padding: ``cols`` (N, C, *kernel,
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


def _inner(x, padding, size):
    """x's spatial dims cropped to ``size`` after ``padding``: its own memory."""
    key = tuple(slice(p, p + n) for p, n in zip(padding, size))
    return x[(slice(None), slice(None)) + key].contiguous()


def im2col(x, kernel_size, dilation, padding, stride):
    pads = tuple((p, p) for p in padding)
    out = _conv_out(x.shape[2:], kernel_size, stride, pads, dilation)
    cols = _windows(x, kernel_size, stride, pads, dilation, out)  # (N, C, K, *out)
    return cols.reshape(x.shape[0], -1, math.prod(out))


def col2im(cols, output_size, kernel_size, dilation, padding, stride):
    n, c = cols.shape[0], cols.shape[1] // math.prod(kernel_size)
    pads = tuple((p, p) for p in padding)
    blocks = _conv_out(output_size, kernel_size, stride, pads, dilation)
    cols = cols.reshape((n, c) + tuple(kernel_size) + blocks)
    full = tuple(o + 2 * p for o, p in zip(output_size, padding))
    return _inner(_add_windows(cols, full, stride, dilation), padding, output_size)


def _divisor(like, in_sp, out_sp, kernel, stride, padding, count_include_pad,
             divisor_override):
    """avg_pool's divisor of each window (computed on the host from the geometry) as a
    float64 tensor beside ``like``, or ``divisor_override``."""
    div = _avg_divisor(np, in_sp, out_sp, kernel, stride, padding, count_include_pad,
                       divisor_override)
    return div if divisor_override else _opdef.PUBLIC.tensor(div, device=like.device)


def avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    ones = (1,) * len(kernel_size)
    out, extra = pool_geometry(tuple(x.shape[2:]), kernel_size, stride, padding, ones,
                               ceil_mode)
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    total = _windows(x, kernel_size, stride, pads, ones, out).sum(2)
    div = _divisor(x, x.shape[2:], out, kernel_size, stride, padding, count_include_pad,
                   divisor_override)
    return (total / div).to(x.dtype)


def avg_pool_backward(g, input_shape, kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override):
    nd = len(kernel_size)
    out = tuple(g.shape[2:])
    div = _divisor(g, input_shape, out, kernel_size, stride, padding, count_include_pad,
                   divisor_override)
    share = (g / div).to(g.dtype).reshape(tuple(g.shape[:2]) + (1,) * nd + out)
    cols = share.expand(tuple(g.shape[:2]) + tuple(kernel_size) + out)
    full = tuple(max(i + 2 * p, (o - 1) * s + k) for i, p, o, s, k in zip(
        input_shape, padding, out, stride, kernel_size))
    return _inner(_add_windows(cols, full, stride, (1,) * nd), padding, input_shape)


def adaptive_max_pool(x, output_size):
    # as the reference kernel: each dim gathers fixed-width windows [floor(i I / O),
    # ceil((i + 1) I / O)), a short one repeating its last element
    nd, in_sp, dev = len(output_size), tuple(x.shape[2:]), x.device
    tables = []
    g = x
    for dim, (i, o) in enumerate(zip(in_sp, output_size)):
        table = _adaptive_windows(i, o)
        tables.append(table)
        g = g.index_select(2 + 2 * dim, _opdef.PUBLIC.tensor(table.reshape(-1), device=dev))
        g = g.reshape(tuple(g.shape[:2 + 2 * dim]) + table.shape
                      + tuple(g.shape[3 + 2 * dim:]))
    # (N, C, O1, W1, O2, W2, ...) -> (N, C, O1, O2, ..., W1*W2*...)
    perm = (0, 1) + tuple(range(2, 2 + 2 * nd, 2)) + tuple(range(3, 3 + 2 * nd, 2))
    flat = g.permute(*perm).reshape(tuple(x.shape[:2]) + tuple(output_size) + (-1,))
    arg = flat.argmax(-1, keepdim=True)  # the first maximum, as PyTorch
    values = flat.gather(-1, arg).squeeze(-1)
    arg = arg.squeeze(-1)
    widths = [t.shape[1] for t in tables]
    index = None
    for dim, table in enumerate(tables):
        offset = _opdef.PUBLIC.remainder(
            _opdef.PUBLIC.div(arg, math.prod(widths[dim + 1:]), rounding_mode="floor"),
            widths[dim])
        shape = [1] * (2 + nd)
        shape[2 + dim] = output_size[dim]
        row = _opdef.PUBLIC.arange(output_size[dim], device=dev).reshape(tuple(shape))
        coord = _opdef.PUBLIC.tensor(table.reshape(-1), device=dev)[row * widths[dim] + offset]
        index = coord if index is None else index * in_sp[dim] + coord
    return values, index


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
    out = _inner(_add_windows(cols, full, stride, dilation), [lo for lo, _ in padding], size)
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


def _max_pool_shape(x, kernel_size, stride, padding, dilation, ceil_mode, **params):
    out, _ = pool_geometry(x.shape[2:], kernel_size, stride, padding, dilation, ceil_mode)
    shape = x.shape[:2] + out
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def _avg_pool_shape(x, kernel_size, stride, padding, ceil_mode, *rest, **params):
    ones = (1,) * len(kernel_size)
    out, _ = pool_geometry(x.shape[2:], kernel_size, stride, padding, ones, ceil_mode)
    return x.shape[:2] + out, x.dtype


def _pool_backward_shape(g, *rest, input_shape, **params):
    """``max_pool_backward`` and ``avg_pool_backward``: the gradient of the input."""
    return g.shape[:2] + tuple(input_shape), g.dtype


def _adaptive_max_pool_shape(x, output_size, **params):
    shape = x.shape[:2] + tuple(output_size)
    return (shape, x.dtype), (shape, np.dtype(np.int64))


# ----- the declarations ------------------------------------------------------------------


def _nn(schema, kernel, **declared):
    return define(schema, kernel, group="nn", **declared)


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
        "-> Tensor", Kernels.im2col, shape=_im2col_shape, decomposition=im2col),
    _nn("col2im(Tensor cols, *, output_size=None, kernel_size=None, dilation=None, "
        "padding=None, stride=None) -> Tensor", Kernels.col2im, shape=_col2im_shape,
        decomposition=col2im),
    _nn("max_pool(Tensor x, *, kernel_size=None, stride=None, padding=None, dilation=None, "
        "ceil_mode=None) -> (Tensor, Tensor)", Kernels.max_pool, shape=_max_pool_shape,
        decomposition=max_pool),
    _nn("max_pool_backward(Tensor g, Tensor indices, *, input_shape=None) -> Tensor",
        Kernels.max_pool_backward, shape=_pool_backward_shape,
        decomposition=max_pool_backward),
    _nn("avg_pool(Tensor x, *, kernel_size=None, stride=None, padding=None, ceil_mode=None, "
        "count_include_pad=None, divisor_override=None) -> Tensor", Kernels.avg_pool,
        shape=_avg_pool_shape, decomposition=avg_pool),
    _nn("avg_pool_backward(Tensor g, *, input_shape=None, kernel_size=None, stride=None, "
        "padding=None, ceil_mode=None, count_include_pad=None, divisor_override=None) "
        "-> Tensor", Kernels.avg_pool_backward, shape=_pool_backward_shape,
        decomposition=avg_pool_backward),
    _nn("adaptive_max_pool(Tensor x, *, output_size=None) -> (Tensor, Tensor)",
        Kernels.adaptive_max_pool, shape=_adaptive_max_pool_shape,
        decomposition=adaptive_max_pool),
)
