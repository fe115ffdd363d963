"""Reference kernels for the neural-network primitives (:data:`torcia.ops.NN`) but the
declared ones, whose kernels are declared with them in :mod:`torcia._ops` (the
activations, softmax and the norms, the embedding and the losses).

A mixin of :class:`torcia._numpy_backend.Reference`: arrays of ``self.xp`` positionally,
parameters as keywords, multi-output ops return a tuple. The public functions in
:mod:`torcia._oplib` (``nn_conv``, ``nn_norm``...) have already checked shapes and
normalised every parameter: inputs are batched (``N, C, *spatial``), and ``kernel_size``,
``stride``, ``dilation`` are tuples with one int per spatial dim; convolution ``padding``
is a tuple of ``(low, high)`` pairs, pooling ``padding`` a tuple of ints (the same on both
sides).

Windows are taken with ``sliding_window_view`` and contracted with one batched matmul
(im2col); their adjoint (col2im) adds strided slices, one per kernel offset. No kernel
loops over pixels.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from torcia._dtype import np_floating as _floating
from torcia._ops._common import in_float32, low_precision


def _windows(xp, x, kernel, stride, dilation, padding, value=0):
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


def _add_windows(xp, cols, size, stride, dilation):
    """The adjoint of :func:`_windows` without padding: ``cols`` is ``(N, C, *kernel,
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


_INT_MAX = 2**31 - 1


def _check_geometry(kernel, stride, padding, dilation, output_padding=None, pool=False):
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


def _pool_geometry(size, kernel, stride, padding, dilation, ceil_mode):
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
    _check_geometry(kernel, stride, padding, dilation, pool=True)
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


class NNKernels:
    """Kernels of the neural-network ops."""

    xp = np

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
        _check_geometry(w.shape[2:], stride, padding, dilation)
        xp = self.xp
        n = x.shape[0]
        o = w.shape[0]
        kernel = w.shape[2:]
        out_sp = tuple((i + lo + hi - d * (k - 1) - 1) // s + 1 for i, (lo, hi), d, k, s in zip(
            x.shape[2:], padding, dilation, kernel, stride))
        cols = _columns(xp, x, kernel, stride, dilation, padding, out_sp)
        # sizes spelled out: an empty batch (N = 0) leaves -1 nothing to infer
        per_group = x.shape[1] // groups * math.prod(kernel)
        cols = cols.reshape(groups, per_group, n * math.prod(out_sp))  # (g, C/g*K, N*P)
        out = w.reshape(groups, o // groups, per_group) @ cols  # (g, O/g, N*P)
        out = _batch_first(xp, out.reshape((o, n) + out_sp)).astype(x.dtype, copy=False)
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
        _check_geometry(w.shape[2:], stride, padding, dilation, output_padding)
        xp = self.xp
        n, cin = x.shape[:2]
        in_sp = x.shape[2:]
        kernel = w.shape[2:]
        og = w.shape[1]
        xm = _channels_first(xp, x).reshape(groups, cin // groups, -1)  # (g, Cin/g, N*P)
        wm = w.reshape(groups, cin // groups, -1).transpose(0, 2, 1)  # (g, O/g*K, Cin/g)
        cols = (wm @ xm).reshape((groups * og,) + kernel + (n,) + in_sp)
        full = tuple((i - 1) * s + d * (k - 1) + 1 + max(op - hi, 0)
                     for i, s, d, k, op, (lo, hi) in zip(in_sp, stride, dilation, kernel,
                                                         output_padding, padding))
        out = _add_columns(xp, cols, full, stride, dilation)  # (Cout, N, *full)
        size = tuple((i - 1) * s - lo - hi + d * (k - 1) + op + 1
                     for i, s, d, k, op, (lo, hi) in zip(in_sp, stride, dilation, kernel,
                                                         output_padding, padding))
        if any(sz <= 0 for sz in size):
            raise RuntimeError(f"Given input size per channel: {list(in_sp)}. Calculated "
                               f"output size per channel: {list(size)}. Output size is too "
                               "small")
        out = _batch_first(xp, out[(slice(None), slice(None)) + tuple(
            slice(lo, lo + sz) for (lo, _), sz in zip(padding, size))]).astype(x.dtype,
                                                                              copy=False)
        if b is not None:
            out += b.reshape((1, -1) + (1,) * len(kernel))
        return out

    def conv_weight(self, x, g, weight_shape, stride, padding, dilation, groups):
        """conv_weight(x (N, C, *in), g (N, O, *out)) -> (O, C/groups, *k): the gradient
        of ``conv`` with respect to its weight, given the output gradient ``g``."""
        _check_geometry(weight_shape[2:], stride, padding, dilation)
        xp = self.xp
        kernel = tuple(weight_shape[2:])
        o = weight_shape[0]
        cols = _columns(xp, x, kernel, stride, dilation, padding, g.shape[2:])
        cols = cols.reshape(groups, -1, x.shape[0] * math.prod(g.shape[2:]))  # (g, C/g*K, N*P)
        gm = _channels_first(xp, g).reshape(groups, o // groups, -1)  # (g, O/g, N*P)
        return (gm @ cols.transpose(0, 2, 1)).reshape(weight_shape)

    def im2col(self, x, kernel_size, dilation, padding, stride):
        """im2col(x (N, C, H, W)) -> (N, C*kh*kw, L): every sliding block as a column."""
        xp = self.xp
        n, c = x.shape[:2]
        win = _windows(xp, x, kernel_size, stride, dilation, tuple((p, p) for p in padding))
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
        blocks = tuple((o + 2 * p - d * (kk - 1) - 1) // s + 1 for o, p, d, kk, s in zip(
            output_size, padding, dilation, kernel_size, stride))
        cols = cols.reshape((n, c) + tuple(kernel_size) + blocks)
        full = tuple(o + 2 * p for o, p in zip(output_size, padding))
        out = _add_windows(self.xp, cols, full, stride, dilation)
        return out[(slice(None), slice(None)) + tuple(
            slice(p, p + o) for p, o in zip(padding, output_size))]

    # ----- pooling ------------------------------------------------------------------
    def max_pool(self, x, kernel_size, stride, padding, dilation, ceil_mode):
        """max_pool(x (N, C, *in)) -> (values, indices): indices are flat positions in
        each input plane, as PyTorch's ``return_indices``."""
        xp = self.xp
        nd = len(kernel_size)
        in_sp = x.shape[2:]
        out_sp, extra = _pool_geometry(in_sp, kernel_size, stride, padding, dilation,
                                       ceil_mode)
        pads = tuple((p, p + e) for p, e in zip(padding, extra))
        lowest = _lowest(xp, x.dtype)
        keep = (slice(None), slice(None)) + tuple(slice(0, o) for o in out_sp)
        win = _windows(xp, x, kernel_size, stride, dilation, pads, lowest)[keep]
        flat = win.reshape(x.shape[:2] + out_sp + (-1,))
        arg = flat.argmax(axis=-1)
        values = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
        # (on a device the select runs whatever the values: reading them would wait for it)
        if any(lo or hi for lo, hi in pads) and (xp is not np or (values == lowest).any()):
            # a window of the lowest value only names its first real element, as PyTorch
            # does, never the padding, which holds the same value
            real = xp.ones((1, 1) + tuple(in_sp), dtype=np.int8)
            real = _windows(xp, real, kernel_size, stride, dilation, pads)[keep]
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
        # each dim gathers a fixed-width window; short windows repeat their last element,
        # which cannot change a maximum
        idx = []
        for i, o in zip(in_sp, output_size):
            start = (np.arange(o) * i) // o
            end = -((-(np.arange(o) + 1) * i) // o)
            width = int((end - start).max())
            pos = np.minimum(start[:, None] + np.arange(width)[None, :], end[:, None] - 1)
            idx.append(pos)
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
        out_sp, extra = _pool_geometry(x.shape[2:], kernel_size, stride, padding, ones,
                                       ceil_mode)
        pads = tuple((p, p + e) for p, e in zip(padding, extra))
        win = _windows(xp, x, kernel_size, stride, ones, pads)
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
        out = _add_windows(xp, cols, full, stride, ones)
        return xp.ascontiguousarray(out[(slice(None), slice(None)) + tuple(
            slice(p, p + i) for p, i in zip(padding, input_shape))])

    # ----- attention ----------------------------------------------------------------
    def _attention_scores(self, q, k, mask, is_causal, scale):
        """The masked scores of ``flash_attention``: ``q k^T scale`` (k's heads repeated
        for grouped queries) plus a float mask, -inf where a bool mask or causality
        forbids."""
        xp = self.xp
        rep = q.shape[-3] // k.shape[-3]
        if rep > 1:
            k = xp.repeat(k, rep, axis=-3)
        s = (q @ xp.swapaxes(k, -1, -2)) * xp.asarray(scale, dtype=q.dtype)
        lq, lk = s.shape[-2:]
        if is_causal:
            s = xp.where(xp.tri(lq, lk, dtype=bool), s, xp.asarray(-xp.inf, dtype=s.dtype))
        elif mask is not None and mask.dtype == bool:
            s = xp.where(mask, s, xp.asarray(-xp.inf, dtype=s.dtype))
        elif mask is not None:
            s = s + mask.astype(s.dtype, copy=False)
        return s

    def flash_attention(self, q, k, v, mask, is_causal=False, scale=1.0):
        """flash_attention(q (*, Hq, Lq, E), k (*, Hk, Lk, E), v (*, Hk, Lk, Ev), mask or
        None) -> (out (*, Hq, Lq, Ev), lse (*, Hq, Lq)): ``softmax(q k^T scale + mask) v``
        and the log of each softmax's denominator (with the scores' maximum), the query
        heads in Hk groups of Hq / Hk sharing a key/value head. A bool ``mask`` (broadcast
        to (*, Hq, Lq, Lk)) marks the keys a query may attend to, a float one is added;
        ``is_causal`` lets query i attend to keys j <= i (no mask then). A query that may
        attend to no key gets a zero output and an lse of -inf (PyTorch's safe softmax).
        This kernel holds the (Lq, Lk) scores; a native one need not."""
        if low_precision(q):
            # float16 and bfloat16 in float32, rounded once, as PyTorch's CPU kernel
            out = self.flash_attention(*in_float32(q, k, v, mask), is_causal, scale)
            return tuple(t.astype(q.dtype) for t in out)
        xp = self.xp
        s = self._attention_scores(q, k, mask, is_causal, scale)
        top = s.max(axis=-1, keepdims=True)
        top = xp.where(xp.isneginf(top), xp.zeros((), dtype=s.dtype), top)
        p = xp.exp(s - top)
        total = p.sum(axis=-1, keepdims=True)
        rep = q.shape[-3] // k.shape[-3]
        if rep > 1:
            v = xp.repeat(v, rep, axis=-3)
        out = (p / xp.where(total == 0, xp.ones((), dtype=s.dtype), total)) @ v
        with np.errstate(divide="ignore"):
            lse = (xp.log(total) + top)[..., 0]
        return out.astype(q.dtype, copy=False), lse.astype(q.dtype, copy=False)

    def flash_attention_backward(self, g, q, k, v, out, lse, mask, is_causal=False,
                                 scale=1.0):
        """flash_attention_backward(g, q, k, v, out, lse, mask) -> (grad_q, grad_k,
        grad_v) of ``flash_attention``'s output (first order): with P the softmax
        recomputed from the scores and ``lse``, dV = P^T g, dS = P (g V^T - rowsum(g out)),
        dQ = dS K scale, dK = dS^T Q scale; a group's query heads add into its key/value
        head."""
        if low_precision(q):
            grads = self.flash_attention_backward(*in_float32(g, q, k, v, out, lse, mask),
                                                  is_causal, scale)
            return tuple(t.astype(q.dtype) for t in grads)
        xp = self.xp
        rep = q.shape[-3] // k.shape[-3]
        s = self._attention_scores(q, k, mask, is_causal, scale)
        live = ~xp.isneginf(lse)[..., None]
        safe = xp.where(live, lse[..., None], xp.zeros((), dtype=lse.dtype))
        p = xp.where(live, xp.exp(s - safe), xp.zeros((), dtype=s.dtype))
        kk, vv = (xp.repeat(t, rep, axis=-3) if rep > 1 else t for t in (k, v))
        dv = xp.swapaxes(p, -1, -2) @ g
        ds = p * (g @ xp.swapaxes(vv, -1, -2) - (g * out).sum(axis=-1, keepdims=True))
        ds *= xp.asarray(scale, dtype=ds.dtype)
        dq = ds @ kk
        dk = xp.swapaxes(ds, -1, -2) @ q
        if rep > 1:
            shape = k.shape[:-3] + (k.shape[-3], rep) + k.shape[-2:]
            dk = dk.reshape(shape[:-1] + dk.shape[-1:]).sum(axis=-3)
            dv = dv.reshape(shape[:-1] + dv.shape[-1:]).sum(axis=-3)
        return tuple(t.astype(q.dtype, copy=False) for t in (dq, dk, dv))

    # ----- recurrent cells ----------------------------------------------------------
    def lstm_cell(self, gates, c):
        """lstm_cell(gates (*, 4H), c (*, H)) -> (h, c', act): one LSTM step from its gate
        pre-activations (i, f, g, o): c' = sigmoid(f) c + sigmoid(i) tanh(g),
        h = sigmoid(o) tanh(c'); ``act`` holds the activated gates, for the backward."""
        hidden = gates.shape[-1] // 4
        act = self.sigmoid(gates)  # one pass for all four; g's quarter is redone with tanh
        act[..., 2 * hidden:3 * hidden] = self.xp.tanh(gates[..., 2 * hidden:3 * hidden])
        i, f, g, o = _quarters(act)
        c_new = f * c + i * g
        return o * self.xp.tanh(c_new), c_new, act

    def lstm_cell_backward(self, gh, gc, act, c, c_new):
        """lstm_cell_backward(gh, gc, act, c, c') -> (grad_gates, grad_c) of ``lstm_cell``
        (first order) from its saved outputs; ``gh`` or ``gc`` may be None (no gradient
        reached that output)."""
        xp = self.xp
        i, f, g, o = _quarters(act)
        hidden = c_new.shape[-1]
        tc = xp.tanh(c_new)
        dc = xp.zeros_like(c_new) if gc is None else gc
        out = xp.empty(c_new.shape[:-1] + act.shape[-1:], dtype=act.dtype)
        if gh is None:
            out[..., 3 * hidden:] = 0
        else:
            gho = gh * o
            dc = dc + gho * (1 - tc * tc)
            out[..., 3 * hidden:] = gho * tc * (1 - o)
        out[..., :hidden] = dc * g * i * (1 - i)
        out[..., hidden:2 * hidden] = dc * c * f * (1 - f)
        out[..., 2 * hidden:3 * hidden] = dc * i * (1 - g * g)
        return out, dc * f

    def lstm_layer(self, x_gates, h0, c0, w_hh_t):
        """lstm_layer(x_gates (L, N, 4H), h0 (N, H), c0 (N, H), w_hh_t (H, 4H)) ->
        (out (L, N, H), cs (L, N, H), acts (L, N, 4H)): a one-direction LSTM layer over a
        whole sequence; ``x_gates`` holds the input projection with both biases, ``cs``
        every step's cell state and ``acts`` its activated gates, for the backward."""
        steps = x_gates.shape[0]
        out = self.xp.empty(x_gates.shape[:-1] + h0.shape[-1:], dtype=x_gates.dtype)
        cs = self.xp.empty_like(out)
        acts = self.xp.empty_like(x_gates)
        h, c = h0, c0
        for t in range(steps):
            # self.matmul, not @: a backend's matmul may pick its threads per product
            h, c, acts[t] = self.lstm_cell(x_gates[t] + self.matmul(h, w_hh_t), c)
            out[t], cs[t] = h, c
        return out, cs, acts

    def lstm_layer_backward(self, g_out, g_cs, acts, cs, out, h0, c0, w_hh_t):
        """lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t) ->
        (grad_x_gates, grad_h0, grad_c0, grad_w_hh_t) of ``lstm_layer`` (first order),
        back through time; ``g_out`` or ``g_cs`` may be None. The recurrent weight's
        gradient is one product over all steps rather than one a step."""
        xp = self.xp
        steps = acts.shape[0]
        g_gates = xp.empty_like(acts)
        dh = xp.zeros_like(h0)
        dc = xp.zeros_like(c0)
        w_t = w_hh_t.T
        for t in range(steps - 1, -1, -1):
            gh = dh if g_out is None else dh + g_out[t]
            gc = dc if g_cs is None else dc + g_cs[t]
            g_gates[t], dc = self.lstm_cell_backward(gh, gc, acts[t],
                                                     c0 if t == 0 else cs[t - 1], cs[t])
            dh = self.matmul(g_gates[t], w_t)
        hidden = h0.shape[-1]
        h_prev = xp.concatenate([h0[None], out[:-1]]).reshape(-1, hidden)
        g_w = self.matmul(h_prev.T, g_gates.reshape(-1, g_gates.shape[-1]))
        return g_gates, dh, dc, g_w

    # ----- the rows of the cross-entropy kernels (torcia._ops.nn_loss) ---------------
    def logsumexp_rows(self, x):
        """log(sum(exp(x), 1)) of each row of x (N, C), computed stably (a helper of
        the cross-entropy kernels, not an op: a backend may run it natively)."""
        m = x.max(axis=1, keepdims=True)
        return self.xp.log(self.xp.exp(x - m).sum(axis=1)) + m[:, 0]


def _channels_first(xp, x):
    """(N, C, *sp) as a contiguous (C, N, *sp): the layout the column matrices use."""
    return xp.ascontiguousarray(xp.moveaxis(x, 1, 0))


def _batch_first(xp, x):
    """(C, N, *sp) back to a contiguous (N, C, *sp)."""
    return xp.ascontiguousarray(xp.moveaxis(x, 1, 0))


def _columns(xp, x, kernel, stride, dilation, padding, out_sp):
    """im2col: (N, C, *in) -> contiguous (C, *kernel, N, *out) (a (C*K, N*P) matrix), one
    strided block copy per kernel offset. Only the first ``out_sp`` windows are taken."""
    xt = _channels_first(xp, x)
    if any(lo or hi for lo, hi in padding):
        xt = xp.pad(xt, ((0, 0), (0, 0)) + tuple(padding))
    c, n = xt.shape[:2]
    cols = xp.empty((c,) + tuple(kernel) + (n,) + tuple(out_sp), dtype=x.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
        key = tuple(slice(o * d, o * d + (p - 1) * s + 1, s)
                    for o, d, p, s in zip(offset, dilation, out_sp, stride))
        cols[(slice(None),) + offset] = xt[(slice(None), slice(None)) + key]
    return cols


def _add_columns(xp, cols, size, stride, dilation):
    """col2im, the adjoint of :func:`_columns` without padding: (C, *kernel, N, *pos)
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


def _quarters(act):
    """The four gates of an LSTM's (*, 4H) array, as views."""
    hidden = act.shape[-1] // 4
    return tuple(act[..., k * hidden:(k + 1) * hidden] for k in range(4))

