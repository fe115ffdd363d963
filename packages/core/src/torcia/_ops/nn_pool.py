"""The pooling ops of :data:`torcia.ops.NN`, each declared once: schema, reference kernel,
meta shape, decomposition. ``max_pool``, ``avg_pool``, ``adaptive_max_pool`` and the pools'
adjoints ``max_pool_backward`` and ``avg_pool_backward`` (each an op, so that a faster
backend can override it).

A kernel here is a method of the reference backend, as in :mod:`torcia._ops.nn_conv`,
whose windows (``array_windows``, ``tensor_windows``...) it takes. The public functions at
the end of this module (``max_pool1d``... ``adaptive_max_pool3d``,
``max_pool1d_with_indices``) have already checked shapes and normalised every parameter:
inputs are batched (``N, C, *spatial``), and ``kernel_size``, ``stride``, ``dilation`` and
``padding`` are tuples with one int per spatial dim (the padding the same on both sides).
Adaptive average pooling is no op of its own: a matmul of window sums per spatial dim.

A decomposition is written with Tensor methods, the public functions
(:data:`torcia._opdef.PUBLIC`) and ops by name (:func:`torcia._ops._common.op`): it runs
on any device, and this module is below the Tensor class. 1-D and 2-D max pooling goes
through im2col (1-D as 2-D of height 1), the rest through one strided slice of the input
per window offset. The derivatives are torcia-autograd's.

:func:`pool_geometry` is also the plugins' (through :mod:`torcia.library`): a native
kernel refuses what the reference refuses, with the same error.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef, plugins
from torcia._dtype import np_floating as _floating
from torcia._dtype import torch_type_name as _torch_name
from torcia._opdef import define
from torcia._ops._common import HALF, autocast_as, check_tensor, low_precision, random_floats
from torcia._ops.nn_conv import (
    add_tensor_windows,
    array_add_windows,
    array_windows,
    as_2d,
    as_2d_params,
    batched,
    check_geometry,
    columns,
    inner,
    ntuple,
    tensor_windows,
    unbatch,
)

# ----- reference kernels -----------------------------------------------------------------


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
        win = array_windows(xp, x, kernel_size, stride, dilation, pads, lowest)[keep]
        flat = win.reshape(x.shape[:2] + out_sp + (-1,))
        arg = flat.argmax(axis=-1)
        values = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
        # (on a device the select runs whatever the values: reading them would wait for it)
        if any(lo or hi for lo, hi in pads) and (xp is not np or (values == lowest).any()):
            # a window of the lowest value only names its first real element, as PyTorch
            # does, never the padding, which holds the same value
            real = xp.ones((1, 1) + tuple(in_sp), dtype=np.int8)
            real = array_windows(xp, real, kernel_size, stride, dilation, pads)[keep]
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
        win = array_windows(xp, x, kernel_size, stride, ones, pads)
        win = win[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_sp)]
        # half floats summed in float32 and rounded once, as PyTorch's kernel
        total = win.sum(axis=tuple(range(2 + nd, 2 + 2 * nd)),
                        dtype=np.float32 if low_precision(x) else None)
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
        out = array_add_windows(xp, cols, full, stride, ones, by_window=True)
        return xp.ascontiguousarray(out[(slice(None), slice(None)) + tuple(
            slice(p, p + i) for p, i in zip(padding, input_shape))])


# ----- decompositions ---------------------------------------------------------------------


def max_pool(x, kernel_size, stride, padding, dilation, ceil_mode):
    nd = x.ndim - 2
    if nd > 2:
        return _max_pool_nd(x, kernel_size, stride, padding, dilation, ceil_mode)
    x2 = as_2d(x, nd)
    kernel, stride = as_2d_params(kernel_size, nd, 1), as_2d_params(stride, nd, 1)
    padding, dilation = as_2d_params(padding, nd, 0), as_2d_params(dilation, nd, 1)
    n, c, h, w = x2.shape
    (oh, ow), extra = pool_geometry((h, w), kernel, stride, padding, dilation, ceil_mode)
    pads = tuple((p, p + e) for p, e in zip(padding, extra))
    lowest = -math.inf if x.is_floating_point() else int(np.iinfo(x.dtype.to_numpy()).min)
    cols = columns(x2, kernel, stride, pads, dilation, lowest)  # (N, C*K, L')
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
    cols = tensor_windows(x, kernel, stride, pads, dilation, out, lowest)  # (N, C, K, *out)
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
    total = tensor_windows(x, kernel_size, stride, pads, ones, out).sum(2)
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
    return inner(add_tensor_windows(cols, full, stride, (1,) * nd), padding, input_shape)


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


# ----- meta shapes -----------------------------------------------------------------------


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


#: in :data:`torcia.ops.NN`'s order, after the convolutions (:mod:`torcia._ops.nn_conv`);
#: all composites (1-D and 2-D max pooling through im2col)
DECLARED = (
    define("max_pool(Tensor x, *, kernel_size=None, stride=None, padding=None, "
           "dilation=None, ceil_mode=None) -> (Tensor, Tensor)", Kernels.max_pool,
           shape=_max_pool_shape, decomposition=max_pool, group="nn"),
    define("max_pool_backward(Tensor g, Tensor indices, *, input_shape=None) -> Tensor",
           Kernels.max_pool_backward, shape=_pool_backward_shape,
           decomposition=max_pool_backward, group="nn"),
    define("avg_pool(Tensor x, *, kernel_size=None, stride=None, padding=None, "
           "ceil_mode=None, count_include_pad=None, divisor_override=None) -> Tensor",
           Kernels.avg_pool, shape=_avg_pool_shape, decomposition=avg_pool, group="nn"),
    define("avg_pool_backward(Tensor g, *, input_shape=None, kernel_size=None, stride=None, "
           "padding=None, ceil_mode=None, count_include_pad=None, divisor_override=None) "
           "-> Tensor", Kernels.avg_pool_backward, shape=_pool_backward_shape,
           decomposition=avg_pool_backward, group="nn"),
    define("adaptive_max_pool(Tensor x, *, output_size=None) -> (Tensor, Tensor)",
           Kernels.adaptive_max_pool, shape=_adaptive_max_pool_shape,
           decomposition=adaptive_max_pool, group="nn",
           samples=lambda rng: [((random_floats(rng, 1, 2, 5, 5),), {"output_size": (2, 3)})]),
)


# ----- the public functions ----------------------------------------------------------------


def _pool_args(nd, input, kernel_size, stride, padding, dilation, fn):
    check_tensor(input, "input", fn)
    input, added = batched(input, nd, fn)
    kernel = ntuple(kernel_size, nd, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else ntuple(stride, nd, "stride")
    pad = ntuple(padding, nd, "padding")
    dilation = ntuple(dilation, nd, "dilation")
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{fn}(): kernel_size must be greater than zero, but got "
                           f"{list(kernel)}")
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{fn}(): stride must be greater than zero, but got {list(stride)}")
    check_geometry(kernel, stride, pad, dilation, pool=True)
    return input, added, kernel, stride, pad, dilation


def _check_pool_output(input, out_sp, fn):
    if any(o <= 0 for o in out_sp):
        size = "x".join(map(str, input.shape[1:]))
        out = "x".join(map(str, (input.shape[1],) + tuple(out_sp)))
        raise RuntimeError(f"Given input size: ({size}). Calculated output size: ({out}). "
                           "Output size is too small")


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
              fn):
    input, added, kernel, stride, pad, dilation = _pool_args(
        nd, input, kernel_size, stride, padding, dilation, fn)
    out_sp, _ = pool_geometry(input.shape[2:], kernel, stride, pad, dilation, bool(ceil_mode))
    _check_pool_output(input, out_sp, fn)
    values, indices = _opdef.CALL("max_pool", (input,), {
        "kernel_size": kernel, "stride": stride, "padding": pad, "dilation": dilation,
        "ceil_mode": bool(ceil_mode)})
    values = unbatch(values, added)
    if return_indices:
        return values, unbatch(indices, added)
    return values


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of ``input`` (N, C, L) or (C, L); ``stride`` defaults
    to ``kernel_size``; indices (with ``return_indices``) are positions along L.

    Examples
    --------
    >>> import torcia
    >>> torcia.max_pool1d(torcia.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    tensor([[3., 2.]])
    """
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, "max_pool1d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of ``input`` (N, C, H, W) or (C, H, W); indices (with
    ``return_indices``) are flat positions in each H x W plane.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    >>> torcia.max_pool2d(x, 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, "max_pool2d")


@autocast_as("max_pool3d")
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of ``input`` (N, C, D, H, W).

    Examples
    --------
    >>> import torcia
    >>> torcia.max_pool3d(torcia.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten()
    tensor([7.])
    """
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, "max_pool3d")


def _avg_pool(nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override, fn):
    input, added, kernel, stride, pad, _ = _pool_args(nd, input, kernel_size, stride,
                                                      padding, 1, fn)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if nd == 3 and any(i < k for i, k in zip(input.shape[2:], kernel)):
        # PyTorch's 3-D average pooling wants the window inside the unpadded input
        t, h, w = input.shape[2:]
        raise RuntimeError(f"input image (T: {t} H: {h} W: {w}) smaller than kernel size "
                           f"(kT: {kernel[0]} kH: {kernel[1]} kW: {kernel[2]})")
    out_sp, _ = pool_geometry(input.shape[2:], kernel, stride, pad, (1,) * nd,
                              bool(ceil_mode))
    _check_pool_output(input, out_sp, fn)
    out = _opdef.CALL("avg_pool", (input,), {
        "kernel_size": kernel, "stride": stride, "padding": pad, "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
        "divisor_override": None if divisor_override is None else int(divisor_override)})
    return unbatch(out, added)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """The mean of each window of ``input`` (N, C, L) or (C, L).

    Examples
    --------
    >>> import torcia
    >>> torcia.avg_pool1d(torcia.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    tensor([[2., 1.]])
    """
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     None, "avg_pool1d")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window of ``input`` (N, C, H, W) or (C, H, W); padded zeros count
    unless ``count_include_pad=False``; ``divisor_override`` replaces the window size.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.avg_pool2d(torcia.arange(16.0).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 2.5000,  4.5000],
              [10.5000, 12.5000]]]])
    """
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, "avg_pool2d")


@autocast_as("avg_pool3d")
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window of ``input`` (N, C, D, H, W).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.avg_pool3d(torcia.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten()
    tensor([3.5000])
    """
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, "avg_pool3d")


def _adaptive_size(output_size, input, nd):
    size = ntuple(output_size, nd, "output_size") if not isinstance(output_size, (list, tuple)) \
        else tuple(input.shape[-nd + i] if s is None else int(s)
                   for i, s in enumerate(output_size))
    if len(size) != nd:
        raise RuntimeError(f"adaptive pooling: output_size must be {nd}-dimensional, got "
                           f"{list(size)}")
    return size


def _window_matrix(i: int, o: int, like) -> tuple:
    """The (o, i) 0/1 matrix of adaptive pooling's windows along one dim
    (:func:`adaptive_bounds`) and each window's length."""
    start, end = adaptive_bounds(i, o)
    pos = np.arange(i)
    m = (pos >= start[:, None]) & (pos < end[:, None])
    # built on the host, then moved: ``like`` may live on another device
    return (_opdef.PUBLIC.tensor(m, dtype=like.dtype, device=like.device),
            _opdef.PUBLIC.tensor(end - start, dtype=like.dtype, device=like.device))


def _adaptive_avg_pool(nd, input, output_size, fn):
    check_tensor(input, "input", fn)
    batched(input, nd, fn)
    size = _adaptive_size(output_size, input, nd)
    if any(s < 0 for s in size):
        raise RuntimeError(f"{fn}(): output_size must be non-negative, got {list(size)}")
    if input.dtype in HALF:
        # in float32, rounded once, as PyTorch's kernel (each product rounded, half of
        # the results were a step off)
        return _adaptive_avg_pool(nd, input.float(), size, fn).to(input.dtype)
    # separable and linear: one small matmul of window sums per spatial dim, then one
    # division by the window's size, as PyTorch divides its sum (multiplying by a fraction
    # per dim rounds an exact half of integers off it)
    out, count = input, None
    for k in range(nd):
        dim = input.ndim - nd + k
        windows, length = _window_matrix(input.shape[dim], size[k], input)
        out = (out.movedim(dim, -1) @ windows.mT).movedim(-1, dim)
        count = length if count is None else count[..., None] * length
    return out / count


@autocast_as("adaptive_avg_pool1d")
def adaptive_avg_pool1d(input, output_size):
    """Means over ``output_size`` nearly equal windows covering ``input`` (N, C, L).

    Examples
    --------
    >>> import torcia
    >>> torcia.adaptive_avg_pool1d(torcia.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    tensor([[2., 1.]])
    """
    if (isinstance(input, _opdef.PUBLIC.Tensor) and input.ndim in (2, 3)
            and output_size in (1, (1,), [1])):
        # PyTorch's global-pooling shortcut (through adaptive_avg_pool2d's): a mean, which
        # refuses integers
        return input.mean(-1, keepdim=True)
    return _adaptive_avg_pool(1, input, output_size, "adaptive_avg_pool1d")


@autocast_as("adaptive_avg_pool2d")
def adaptive_avg_pool2d(input, output_size):
    """Means over nearly equal windows of ``input`` (N, C, H, W) giving ``output_size``
    (an int, a pair, or a pair with None for "keep").

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.adaptive_avg_pool2d(torcia.arange(16.0).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 2.5000,  4.5000],
              [10.5000, 12.5000]]]])
    """
    if (isinstance(input, _opdef.PUBLIC.Tensor) and input.ndim >= 2
            and output_size in (1, (1, 1), [1, 1])):
        # PyTorch's global-pooling shortcut: a mean over the last two dims, of any rank
        return input.mean((-2, -1), keepdim=True)
    return _adaptive_avg_pool(2, input, output_size, "adaptive_avg_pool2d")


def _adaptive_max_pool(nd, input, output_size, return_indices, fn):
    check_tensor(input, "input", fn)
    if input.is_complex():
        # complex numbers have no order (NumPy's max compares them part by part)
        kernel = "adaptive_max_pool3d_cpu" if nd == 3 else "adaptive_max_pool2d"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{_torch_name(input.dtype)}'")
    input, added = batched(input, nd, fn)
    size = _adaptive_size(output_size, input, nd)
    if any(s < 0 for s in size) or any(i == 0 for i in input.shape[2:]):
        raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(input.shape)} with "
                           f"output_size {list(size)}")
    if 0 in size:
        # an empty output, as PyTorch gives
        shape = tuple(input.shape[:2]) + size
        values = unbatch(input.new_empty(shape), added)
        if return_indices:
            return values, unbatch(input.new_empty(shape, dtype=D.int64), added)
        return values
    values, indices = _opdef.CALL("adaptive_max_pool", (input,), {"output_size": size})
    values = unbatch(values, added)
    if return_indices:
        return values, unbatch(indices, added)
    return values


@autocast_as("adaptive_avg_pool3d")
def adaptive_avg_pool3d(input, output_size):
    """Means over nearly equal windows of ``input`` (N, C, D, H, W).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.adaptive_avg_pool3d(torcia.arange(8.0).reshape(1, 1, 2, 2, 2), 1).flatten()
    tensor([3.5000])
    """
    if (isinstance(input, _opdef.PUBLIC.Tensor) and input.ndim in (4, 5)
            and output_size in (1, (1, 1, 1), [1, 1, 1])):
        # PyTorch's global-pooling shortcut, as adaptive_avg_pool2d's
        return input.mean((-3, -2, -1), keepdim=True)
    return _adaptive_avg_pool(3, input, output_size, "adaptive_avg_pool3d")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Maxima over ``output_size`` nearly equal windows covering ``input`` (N, C, L).

    Examples
    --------
    >>> import torcia
    >>> torcia.adaptive_max_pool1d(torcia.tensor([[[1.0, 4.0, 2.0, 3.0]]]), 2)
    tensor([[[4., 3.]]])
    """
    return _adaptive_max_pool(1, input, output_size, return_indices, "adaptive_max_pool1d")


@autocast_as("adaptive_max_pool3d")
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Maxima over nearly equal windows of ``input`` (N, C, D, H, W).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.adaptive_max_pool3d(torcia.arange(8.0).reshape(1, 1, 2, 2, 2), 1).flatten()
    tensor([7.])
    """
    return _adaptive_max_pool(3, input, output_size, return_indices, "adaptive_max_pool3d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Maxima over nearly equal windows of ``input`` (N, C, H, W) giving ``output_size``.

    Examples
    --------
    >>> import torcia
    >>> from torcia._ops.nn_pool import adaptive_max_pool2d
    >>> adaptive_max_pool2d(torcia.arange(9.0).reshape(1, 3, 3), 1)
    tensor([[[8.]]])
    """
    return _adaptive_max_pool(2, input, output_size, return_indices, "adaptive_max_pool2d")


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """``torch.max_pool1d_with_indices``: ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.max_pool1d_with_indices(torcia.tensor([[[1.0, 3.0, 2.0, 5.0]]]), 2)
    (tensor([[[3., 5.]]]), tensor([[[1, 3]]]))
    """
    return plugins.lent("torcia.nn.functional", "torcia-nn").max_pool1d_with_indices(
        input, kernel_size, stride, padding, dilation, ceil_mode)


#: the public functions above that torcia exports (the others are
#: ``torcia.nn.functional``'s only, as PyTorch's)
PUBLIC = (max_pool1d, max_pool2d, max_pool3d, max_pool1d_with_indices, avg_pool1d,
          adaptive_avg_pool1d, adaptive_max_pool1d)

#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = (
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "max_pool1d", "max_pool2d", "max_pool3d",
)

#: the names ``torcia`` exports from here
__all__ = [fn.__name__ for fn in PUBLIC]
