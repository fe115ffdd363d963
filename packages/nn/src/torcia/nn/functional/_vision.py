"""Vision functions: ``pad``, ``interpolate``, ``upsample``, ``affine_grid``,
``grid_sample``, ``channel_shuffle``."""

from __future__ import annotations

import itertools
import math

import numpy as np

import torcia
from torcia.library import autocast_as
from torcia.library import ntuple as _ntuple
from torcia.library import pad as _pad
from torcia.library.functional import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d


def pad(input, pad, mode="constant", value=None):
    """Pad ``input``: ``pad`` holds (left, right) amounts for the last dim, then the one
    before, ...; ``mode`` is "constant", "reflect", "replicate" or "circular".

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.pad(torcia.tensor([[1.0, 2.0]]), (1, 1), value=0.5)
    tensor([[0.5000, 1.0000, 2.0000, 0.5000]])
    """
    return _pad(input, pad, mode, value)


def _interp_sizes(input, size, scale_factor, nd, recompute_scale_factor):
    """Output sizes and the scale used to map output to input coordinates per dim."""
    in_sp = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out = _ntuple(size, nd, "size")
        return out, tuple(i / o for i, o in zip(in_sp, out))
    scales = tuple(float(s) for s in scale_factor) if isinstance(scale_factor, (list, tuple)) \
        else (float(scale_factor),) * nd
    if len(scales) != nd:
        raise ValueError(f"Input and scale_factor must have the same number of spatial "
                         f"dimensions, but got input with spatial dimensions of "
                         f"{list(in_sp)} and scale_factor of shape {list(scales)}.")
    out = tuple(int(math.floor(i * s)) for i, s in zip(in_sp, scales))
    if recompute_scale_factor:
        return out, tuple(i / o for i, o in zip(in_sp, out))
    return out, tuple(1.0 / s for s in scales)


def _linear_weights(i, o, scale, align_corners, like):
    """(o, i) matrix of 1-D linear interpolation from ``i`` points to ``o``."""
    dst = np.arange(o, dtype=np.float64)
    if align_corners:
        src = dst * ((i - 1) / (o - 1)) if o > 1 else np.zeros(o)
    else:
        src = np.maximum((dst + 0.5) * scale - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), i - 1)
    hi = np.minimum(lo + 1, i - 1)
    frac = src - lo
    m = np.zeros((o, i))
    np.add.at(m, (np.arange(o), lo), 1 - frac)
    np.add.at(m, (np.arange(o), hi), frac)
    return torcia.tensor(m, dtype=like.dtype, device=like.device)


def _cubic_weights(i, o, scale, align_corners, like):
    """(o, i) matrix of PyTorch's 1-D cubic convolution (A = -0.75) from ``i`` points to
    ``o``; taps beyond the edges read the edge pixel, as PyTorch's do."""
    a = -0.75
    dst = np.arange(o, dtype=np.float64)
    if align_corners:
        src = dst * ((i - 1) / (o - 1)) if o > 1 else np.zeros(o)
    else:
        src = (dst + 0.5) * scale - 0.5
    base = np.floor(src).astype(np.int64)
    t = src - base

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    m = np.zeros((o, i))
    rows = np.arange(o)
    for tap, w in zip((-1, 0, 1, 2), (far(t + 1), near(t), near(1 - t), far(2 - t))):
        np.add.at(m, (rows, np.clip(base + tap, 0, i - 1)), w)
    return torcia.tensor(m, dtype=like.dtype, device=like.device)


@autocast_as("interpolate")
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of ``input`` ``(N, C, *spatial)`` to ``size`` or by
    ``scale_factor``; ``mode`` is "nearest", "nearest-exact", "area" (adaptive average
    pooling), "linear" (3-D input), "bilinear" or "bicubic" (4-D) or "trilinear" (5-D);
    ``align_corners`` maps corner pixel centres onto each other.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.interpolate(torcia.tensor([[[1.0, 2.0]]]), scale_factor=2)
    tensor([[[1., 1., 2., 2.]]])
    >>> F.interpolate(torcia.tensor([[[1.0, 2.0]]]), size=3, mode="linear", align_corners=True)
    tensor([[[1.0000, 1.5000, 2.0000]]])
    """
    nd = input.ndim - 2
    if nd < 1:
        raise ValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                         f"{input.ndim}D) for the modes: nearest | linear | bilinear | "
                         f"bicubic | trilinear | area | nearest-exact (got {mode})")
    linear_modes = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
    if mode in linear_modes:
        if linear_modes[mode] != nd:
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                      f"{linear_modes[mode] + 2}D input")
    elif mode not in ("nearest", "nearest-exact", "area"):
        raise NotImplementedError(f"interpolate: mode '{mode}' is not supported")
    elif align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError("interpolate: antialias is not supported")
    out_sp, scales = _interp_sizes(input, size, scale_factor, nd, recompute_scale_factor)
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[nd - 1](
            input, out_sp)
    if mode == "nearest" and nd == 2 and tuple(input.shape[2:]) == tuple(out_sp):
        return input.clone()  # PyTorch's 2-D nearest kernel copies an unchanged size
    out = input
    # integers (PyTorch's uint8 kernels) interpolate in float, one dim at a time from the
    # last, each pass rounded half up to an integer
    integer = mode not in ("nearest", "nearest-exact") and not (
        input.is_floating_point() or input.is_complex())
    for k in reversed(range(nd)) if integer else range(nd):
        dim = 2 + k
        i, o = input.shape[dim], out_sp[k]
        if i == o and mode in ("linear", "bilinear", "trilinear"):
            # PyTorch's linear kernels copy a dim whose size does not change, whatever
            # scale_factor says (the nearest and bicubic ones resample it)
            continue
        if mode in ("nearest", "nearest-exact"):
            shift = 0.5 if mode == "nearest-exact" else 0.0
            src = np.minimum(np.floor((np.arange(o) + shift) * scales[k]).astype(np.int64),
                             i - 1)
            index = torcia.tensor(src, device=input.device)
            out = out.index_select(dim, index)
        else:
            weights = _cubic_weights if mode == "bicubic" else _linear_weights
            w = weights(i, o, scales[k], bool(align_corners),
                        torcia.empty(0, device=input.device) if integer else input)
            x = out.float() if integer else out
            out = (x.movedim(dim, -1) @ w.mT).movedim(-1, dim)
            if integer:
                info = torcia.iinfo(input.dtype) if input.dtype is not torcia.bool else None
                out = (out + 0.5).floor().clamp(info.min if info else 0, info.max if info else 1)
    if integer and out is not input:
        out = out.to(input.dtype)
    return out if out is not input else input.clone()  # a new tensor, as PyTorch's


def affine_grid(theta, size, align_corners=None):
    """The sampling grid (N, H, W, 2) of the 2-D affine maps ``theta`` (N, 2, 3) for an
    output of ``size`` (N, C, H, W), in [-1, 1] coordinates (x first).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> theta = torcia.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> F.affine_grid(theta, (1, 1, 1, 2), align_corners=True)
    tensor([[[[-1.,  0.],
              [ 1.,  0.]]]])
    """
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) != 4 or theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{list(size)}. Got {list(theta.shape)}.")
    n, _, h, w = (int(v) for v in size)

    def axis(k):
        pts = np.linspace(-1.0, 1.0, k) if k > 1 else np.zeros(1)
        return pts if align_corners else pts * (k - 1) / k

    xs, ys = np.meshgrid(axis(w), axis(h))
    base = np.stack([xs, ys, np.ones_like(xs)], axis=-1).reshape(1, h * w, 3)
    base = torcia.tensor(base, dtype=theta.dtype, device=theta.device)
    return (base @ theta.transpose(1, 2)).reshape(n, h, w, 2)


@autocast_as("grid_sample")
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) at the points of ``grid`` (N, Ho, Wo, 2), or a volume
    (N, C, D, H, W) at the points of ``grid`` (N, Do, Ho, Wo, 3), given in [-1, 1]
    coordinates (x first); ``mode`` "bilinear" (trilinear for volumes), "nearest" or
    "bicubic" (4-D only), ``padding_mode`` "zeros", "border" or "reflection" for points
    outside, as PyTorch's grid sampler. Differentiable in both arguments (the grid has a
    zero gradient with "nearest").

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> F.grid_sample(x, torcia.tensor([[[[0.0, 0.0]]]]), align_corners=True)
    tensor([[[[2.5000]]]])
    """
    nd = input.ndim - 2
    if nd not in (2, 3) or grid.ndim != input.ndim or grid.shape[-1] != nd or \
            grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number "
                           f"of dimensions and batch size, and a grid of shape [N, H, W, 2] or "
                           f"[N, D, H, W, 3], but got input of size {list(input.shape)} and "
                           f"grid of size {list(grid.shape)}")
    if grid.dtype is not input.dtype:
        raise RuntimeError(f"grid_sampler(): expected grid to have the input's dtype "
                           f"{input.dtype}, but found {grid.dtype}")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if mode == "bicubic" and nd == 3:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    align = bool(align_corners)
    n, c = input.shape[:2]
    sizes = tuple(input.shape[2:])
    out_sp = tuple(grid.shape[1:-1])
    points = math.prod(out_sp)
    flat = input.reshape(n, c, math.prod(sizes))
    strides = [math.prod(sizes[k + 1:]) for k in range(nd)]
    # the grid's last axis is (x, y[, z]): x indexes the last input dim
    src = [_grid_unnormalize(grid[..., nd - 1 - k].reshape(n, points), sizes[k], align)
           for k in range(nd)]

    def read(pos):
        """Input values (N, C, points) at integer positions (one (N, points) tensor per
        dim), zero outside the input."""
        inside = None
        index = 0
        for p, size, stride in zip(pos, sizes, strides):
            ok = (p >= 0) & (p <= size - 1)
            inside = ok if inside is None else inside & ok
            index = index + p.clamp(0, size - 1).to(torcia.int64) * stride
        index = index.reshape(n, 1, points).expand(n, c, points)
        return flat.gather(2, index) * inside.reshape(n, 1, points)

    if mode == "bicubic":
        out = _grid_bicubic(src, sizes, padding_mode, align, read)
    else:
        src = [_grid_pad(p, size, padding_mode, align) for p, size in zip(src, sizes)]
        if mode == "nearest":
            # round half to even, as PyTorch's nearbyint
            out = read([p.detach().round() for p in src])
        else:
            with torcia.no_grad():
                low = [p.detach().floor() for p in src]
            out = 0
            for corner in itertools.product((0, 1), repeat=nd):
                weight = 1
                for p, lo, up in zip(src, low, corner):
                    weight = weight * (p - lo if up else 1 - (p - lo))
                out = out + read([lo + up for lo, up in zip(low, corner)]) * weight.reshape(
                    n, 1, points)
    return out.reshape(n, c, *out_sp)


def _grid_unnormalize(coord, size, align):
    """A [-1, 1] grid coordinate as a position along a dim of ``size`` pixels."""
    return (coord + 1) / 2 * (size - 1) if align else ((coord + 1) * size - 1) / 2


def _grid_pad(pos, size, padding_mode, align):
    """Positions outside the input moved in as ``padding_mode`` says: clamped to the
    border, or reflected at the corner pixels (``align``) or the edges, then clamped."""
    if padding_mode == "zeros":
        return pos
    if padding_mode == "reflection":
        low, high = (0, 2 * (size - 1)) if align else (-1, 2 * size - 1)
        if low == high:
            pos = torcia.zeros_like(pos)
        else:
            middle, span = low / 2, (high - low) / 2
            dist = (pos - middle).abs()
            extra = dist.fmod(span)
            with torcia.no_grad():
                flips = (dist.detach() / span).floor()
            pos = torcia.where(flips.remainder(2) == 0, extra + middle, span - extra + middle)
    return pos.clamp(0, size - 1)


def _cubic_coefficients(t):
    """PyTorch's bicubic weights (A = -0.75) of the taps at -1, 0, 1, 2 around ``t``."""
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _grid_bicubic(src, sizes, padding_mode, align, read):
    n, points = src[0].shape
    with torcia.no_grad():
        low = [p.detach().floor() for p in src]
    coeffs = [_cubic_coefficients(p - lo) for p, lo in zip(src, low)]
    out = 0
    for taps in itertools.product(range(4), repeat=2):
        with torcia.no_grad():
            # each tap is a whole pixel, moved in by the padding mode and then read
            pos = [_grid_pad(lo + (k - 1), size, padding_mode, align).trunc()
                   if padding_mode != "zeros" else lo + (k - 1)
                   for lo, k, size in zip(low, taps, sizes)]
        weight = coeffs[0][taps[0]] * coeffs[1][taps[1]]
        out = out + read(pos) * weight.reshape(n, 1, points)
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[1.0, 2.0]]])
    >>> F.upsample(x, scale_factor=2)
    tensor([[[1., 1., 2., 2.]]])
    """
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """:func:`interpolate` with mode "nearest".

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[[1.0, 2.0]]]])
    >>> F.upsample_nearest(x, size=(1, 4))
    tensor([[[[1., 1., 2., 2.]]]])
    """
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """:func:`interpolate` with mode "bilinear" and ``align_corners=True``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[[[0.0, 3.0]]]])
    >>> F.upsample_bilinear(x, size=(1, 4))
    tensor([[[[0., 1., 2., 3.]]]])
    """
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def channel_shuffle(input, groups):
    """``(N, g * c, *)`` -> ``(N, c * g, *)``: channels regrouped so each group mixes.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(4.0).reshape(1, 4, 1, 1)
    >>> F.channel_shuffle(x, 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    n, c = input.shape[:2]
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)
