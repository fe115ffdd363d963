"""Pooling: the ``*_with_indices`` forms, ``max_unpool``, ``lp_pool``,
``fractional_max_pool``."""

from __future__ import annotations

import math

import numpy as np

import torcia
from torcia.library import batched as _batched
from torcia.library import host_array as _host_array
from torcia.library import ntuple as _ntuple
from torcia.library import unbatch as _unbatch
from torcia.library.functional import (
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """:func:`max_pool1d` returning ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[1.0, 3.0, 2.0, 5.0]]])
    >>> F.max_pool1d_with_indices(x, 2)
    (tensor([[[3., 5.]]]), tensor([[[1, 3]]]))
    """
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """:func:`max_pool2d` returning ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    >>> values, indices = F.max_pool2d_with_indices(x, 2)
    >>> values
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    >>> indices
    tensor([[[[ 5,  7],
              [13, 15]]]])
    """
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """:func:`max_pool3d` returning ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(8.0).reshape(1, 1, 2, 2, 2)
    >>> F.max_pool3d_with_indices(x, 2)
    (tensor([[[[[7.]]]]]), tensor([[[[[7]]]]]))
    """
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """:func:`adaptive_max_pool1d` returning ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[1.0, 4.0, 2.0, 3.0]]])
    >>> F.adaptive_max_pool1d_with_indices(x, 2)
    (tensor([[[4., 3.]]]), tensor([[[1, 3]]]))
    """
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """:func:`adaptive_max_pool2d` returning ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    >>> values, indices = F.adaptive_max_pool2d_with_indices(x, (1, 2))
    >>> values
    tensor([[[[13., 15.]]]])
    >>> indices
    tensor([[[[13, 15]]]])
    """
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """:func:`adaptive_max_pool3d` returning ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(8.0).reshape(1, 1, 2, 2, 2)
    >>> values, indices = F.adaptive_max_pool3d_with_indices(x, 1)
    >>> values.flatten(), indices.flatten()
    (tensor([7.]), tensor([7]))
    """
    return adaptive_max_pool3d(input, output_size, True)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of :func:`max_pool1d`: each value put back at its index,
    zeros elsewhere.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[1.0, 3.0, 2.0, 5.0]]])
    >>> values, indices = F.max_pool1d(x, 2, return_indices=True)
    >>> F.max_unpool1d(values, indices, 2)
    tensor([[[0., 3., 0., 5.]]])
    """
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of :func:`max_pool2d`: each value put back at the flat plane
    position ``indices`` holds, zeros elsewhere.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[[1.0, 4.0], [3.0, 2.0]]]])
    >>> y, i = F.max_pool2d(x, 2, return_indices=True)
    >>> F.max_unpool2d(y, i, 2)
    tensor([[[[0., 4.],
              [0., 0.]]]])
    """
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of :func:`max_pool3d`: each value put back at the flat volume
    position ``indices`` holds, zeros elsewhere.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> y, i = F.max_pool3d(torcia.arange(8.0).reshape(1, 1, 2, 2, 2), 2, return_indices=True)
    >>> F.max_unpool3d(y, i, 2).reshape(-1).tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0]
    """
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


def _max_unpool(nd, input, indices, kernel_size, stride, padding, output_size):
    input, added = _batched(input, nd, f"max_unpool{nd}d")
    if indices.ndim == input.ndim - 1:
        indices = indices.unsqueeze(0)
    k = _ntuple(kernel_size, nd, "kernel_size")
    s = k if stride is None else _ntuple(stride, nd, "stride")
    p = _ntuple(padding, nd, "padding")
    if output_size is None:
        size = tuple((i - 1) * ss - 2 * pp + kk for i, ss, pp, kk in zip(
            input.shape[2:], s, p, k))
    else:
        size = tuple(int(o) for o in tuple(output_size)[-nd:])
    n, c = input.shape[:2]
    plane = math.prod(size)
    found = indices.__torcia_data__
    if indices.numel() and (int(found.min()) < 0 or int(found.max()) >= plane):
        raise RuntimeError(f"Found an invalid max index: {int(found.max())} (output "
                           f"volumes are of size {'x'.join(map(str, size))}")
    flat = torcia.zeros(n, c, plane, dtype=input.dtype, device=input.device)
    out = flat.scatter(2, indices.reshape(n, c, -1), input.reshape(n, c, -1))
    return _unbatch(out.reshape(n, c, *size), added)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum of x ** p over each window) ** (1 / p)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[3.0, 4.0, 1.0, 0.0]]])
    >>> F.lp_pool1d(x, 2, 2)
    tensor([[[5., 1.]]])
    """
    out = avg_pool1d(input ** norm_type, kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu() * kernel_size) ** (1.0 / norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum of x ** p over each window) ** (1 / p)`` over 2-D windows.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[[3.0, 0.0], [0.0, 4.0]]]])
    >>> F.lp_pool2d(x, 2, 2)
    tensor([[[[5.]]]])
    """
    kh, kw = _ntuple(kernel_size, 2, "kernel_size")
    out = avg_pool2d(input ** norm_type, (kh, kw), stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu() * (kh * kw)) ** (1.0 / norm_type)


def _fractional_intervals(sample, size, out, pool, dtype):
    """Window starts along one dimension (PyTorch's ``generate_intervals``, in the
    samples' precision, so that the windows are PyTorch's for the same samples)."""
    starts = np.empty(out, dtype=np.int64)
    if out > 1:
        alpha = dtype.type(size - pool) / dtype.type(out - 1)
        i = np.arange(out - 1, dtype=dtype)
        starts[:-1] = ((i + sample) * alpha).astype(np.int64) - np.int64(
            np.floor(sample * alpha))
    if out > 0:
        starts[-1] = size - pool
    return starts


def _fractional_max_pool(nd, input, kernel_size, output_size, output_ratio, return_indices,
                         _random_samples):
    fn = f"fractional_max_pool{nd}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
    input, added = _batched(input, nd, fn)
    k = _ntuple(kernel_size, nd, "kernel_size")
    spatial = tuple(input.shape[2:])
    if output_size is None:
        ratio = (tuple(output_ratio) if isinstance(output_ratio, (tuple, list))
                 else (output_ratio,) * nd)
        size = tuple(int(i * float(r)) for i, r in zip(spatial, ratio))
    else:
        size = _ntuple(output_size, nd, "output_size")
    names = ("time", "height", "width")[3 - nd:]
    # PyTorch's checks: the 3-D kernel wants one input position to spare
    spare, where = (0, f"{fn}()") if nd == 2 else (1, f"{fn}_out()")
    for name, o, kk, i in zip(names, size, k, spatial):
        if o + kk - 1 + spare > i:
            raise RuntimeError(f"{where}: pool {name} {kk} too large relative to input "
                               f"{name} {i}")
    n, c = input.shape[:2]
    if _random_samples is None:
        _random_samples = torcia.rand(n, c, nd, dtype=input.dtype, device=input.device)
    samples = _host_array(_random_samples)
    if samples.shape != (n, c, nd):
        raise RuntimeError(f"{fn}(): expected _random_samples of shape {[n, c, nd]}, got "
                           f"{list(samples.shape)}")
    # PyTorch's sample order: (W, H) in 2-D, (T, H, W) in 3-D
    order = (1, 0) if nd == 2 else (0, 1, 2)
    data = _host_array(input.detach())
    strides = np.cumprod((1,) + spatial[::-1])[::-1][1:]
    index = np.empty((n, c) + size, dtype=np.int64)
    for b in range(n):
        for ch in range(c):
            starts = [_fractional_intervals(samples[b, ch, order[d]], spatial[d], size[d],
                                            k[d], samples.dtype) for d in range(nd)]
            # every output cell's window, as flat offsets into the input plane
            cells = np.zeros(size, dtype=np.int64)
            offsets = np.zeros(k, dtype=np.int64)
            for d in range(nd):
                shape = [1] * nd
                shape[d] = -1
                cells = cells + (starts[d] * strides[d]).reshape(shape)
                offsets = offsets + (np.arange(k[d]) * strides[d]).reshape(shape)
            windows = cells.reshape(-1, 1) + offsets.reshape(1, -1)
            values = data[b, ch].reshape(-1)[windows]
            # the first maximum in scan order, as PyTorch's kernel keeps it
            index[b, ch] = windows[np.arange(len(windows)), values.argmax(1)].reshape(size)
    indices = torcia.from_numpy(index).to(input.device)
    out = input.flatten(2).gather(2, indices.flatten(2)).reshape(n, c, *size)
    out = _unbatch(out, added)
    return (out, _unbatch(indices, added)) if return_indices else out


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """Fractional max pooling (Graham, 2014) of ``input`` (N, C, H, W): maxima over
    ``kernel_size`` windows placed pseudo-randomly so that the output has ``output_size``
    (or ``output_ratio`` times the input's size). ``_random_samples`` (N, C, 2) in [0, 1)
    fix the placement (drawn from the global generator when None), as PyTorch reads them.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(25.0).reshape(1, 1, 5, 5)
    >>> F.fractional_max_pool2d(x, 2, output_size=3,
    ...                         _random_samples=torcia.tensor([[[0.3, 0.7]]]))
    tensor([[[[ 6.,  7.,  9.],
              [11., 12., 14.],
              [21., 22., 24.]]]])
    """
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """:func:`fractional_max_pool2d` returning ``(values, indices)``; indices are flat
    positions in each input plane (H * W).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> _, i = F.fractional_max_pool2d_with_indices(torcia.arange(16.0).reshape(1, 4, 4), 2,
    ...                                             output_size=1)
    >>> i
    tensor([[[15]]])
    """
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, True,
                                _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """Fractional max pooling of ``input`` (N, C, T, H, W); ``_random_samples`` is
    (N, C, 3). See :func:`fractional_max_pool2d`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.fractional_max_pool3d(torcia.ones(1, 1, 4, 4, 4), 2, output_ratio=0.5).shape
    torcia.Size([1, 1, 2, 2, 2])
    """
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """:func:`fractional_max_pool3d` returning ``(values, indices)`` (flat positions in
    each T * H * W volume).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(27.0).reshape(1, 3, 3, 3)
    >>> F.fractional_max_pool3d_with_indices(x, 2, output_size=1)[1]
    tensor([[[[26]]]])
    """
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, True,
                                _random_samples)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum of x ** p over each window) ** (1 / p)`` over 3-D windows of ``(N, C, D, H,
    W)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.lp_pool3d(torcia.full((1, 1, 2, 2, 2), 2.0), 2, 2).item()
    5.656854152679443
    """
    kd, kh, kw = _ntuple(kernel_size, 3, "kernel_size")
    out = avg_pool3d(input ** norm_type, (kd, kh, kw), stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu() * (kd * kh * kw)) ** (1.0 / norm_type)
