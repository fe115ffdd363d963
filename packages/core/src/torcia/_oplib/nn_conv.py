"""Convolutions and pooling at ``torcia.*`` (``conv2d``, ``conv_transpose2d``,
``max_pool2d``, ``adaptive_avg_pool2d``, ``convolution``, ``conv_tbc``...).
"""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia._autocast import autocast_as
from torcia._creation import tensor
from torcia._oplib._common import _F, _check_tensor
from torcia._ops.nn_conv import check_geometry
from torcia._ops.nn_pool import adaptive_bounds, pool_geometry
from torcia._tensor import Tensor, _torch_name, call


def _ntuple(value, n: int, name: str) -> tuple:
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


def _batched(input: Tensor, nd: int, fn: str) -> tuple[Tensor, bool]:
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


def _unbatch(out, added: bool):
    return out.squeeze(0) if added else out


def _same_dtype(input: Tensor, other: Tensor | None, name: str) -> None:
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
    pad = _ntuple(padding, nd, "padding")
    if any(p < 0 for p in pad):
        raise RuntimeError("negative padding is not supported")
    return tuple((p, p) for p in pad)


def _conv(nd, input, weight, bias, stride, padding, dilation, groups, fn):
    _check_tensor(input, "input", fn)
    input, added = _batched(input, nd, fn)
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
    stride = _ntuple(stride, nd, "stride")
    dilation = _ntuple(dilation, nd, "dilation")
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
        return _unbatch(empty.expand((input.shape[0], 0) + out_sp).clone(), added)
    out = call("conv", (input, weight, bias), {"stride": stride, "padding": pads,
                                               "dilation": dilation, "groups": groups})
    return _unbatch(out, added)


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
    _check_tensor(input, "input", fn)
    input, added = _batched(input, nd, fn)
    if weight.ndim != nd + 2:
        raise RuntimeError(f"Expected {nd + 2}-dimensional weight for {nd + 2}-dimensional "
                           f"input {list(input.shape)}, but got {weight.ndim}-dimensional "
                           f"weight of size {list(weight.shape)} instead")
    _same_dtype(input, weight, "weight")
    _same_dtype(input, bias, "bias")
    if isinstance(padding, str):
        raise ValueError(f"{fn}: padding must be an int or a tuple, not '{padding}'")
    groups = int(groups)
    stride = _ntuple(stride, nd, "stride")
    dilation = _ntuple(dilation, nd, "dilation")
    pad = _ntuple(padding, nd, "padding")
    out_pad = _ntuple(output_padding, nd, "output_padding")
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
    out = call("conv_transpose", (input, weight, bias), {
        "stride": stride, "padding": tuple((p, p) for p in pad), "output_padding": out_pad,
        "dilation": dilation, "groups": groups})
    return _unbatch(out, added)


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


def _pool_args(nd, input, kernel_size, stride, padding, dilation, fn):
    _check_tensor(input, "input", fn)
    input, added = _batched(input, nd, fn)
    kernel = _ntuple(kernel_size, nd, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else _ntuple(stride, nd, "stride")
    pad = _ntuple(padding, nd, "padding")
    dilation = _ntuple(dilation, nd, "dilation")
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
    values, indices = call("max_pool", (input,), {
        "kernel_size": kernel, "stride": stride, "padding": pad, "dilation": dilation,
        "ceil_mode": bool(ceil_mode)})
    values = _unbatch(values, added)
    if return_indices:
        return values, _unbatch(indices, added)
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
    out = call("avg_pool", (input,), {
        "kernel_size": kernel, "stride": stride, "padding": pad, "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
        "divisor_override": None if divisor_override is None else int(divisor_override)})
    return _unbatch(out, added)


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
    size = _ntuple(output_size, nd, "output_size") if not isinstance(output_size, (list, tuple)) \
        else tuple(input.shape[-nd + i] if s is None else int(s)
                   for i, s in enumerate(output_size))
    if len(size) != nd:
        raise RuntimeError(f"adaptive pooling: output_size must be {nd}-dimensional, got "
                           f"{list(size)}")
    return size


def _adaptive_windows(i: int, o: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """The (o, i) 0/1 matrix of adaptive pooling's windows along one dim
    (:func:`~torcia._ops.nn_pool.adaptive_bounds`) and each window's length."""
    start, end = adaptive_bounds(i, o)
    pos = np.arange(i)
    m = (pos >= start[:, None]) & (pos < end[:, None])
    # built on the host, then moved: ``like`` may live on another device
    return (tensor(m, dtype=like.dtype, device=like.device),
            tensor(end - start, dtype=like.dtype, device=like.device))


def _adaptive_avg_pool(nd, input, output_size, fn):
    _check_tensor(input, "input", fn)
    _batched(input, nd, fn)
    size = _adaptive_size(output_size, input, nd)
    if any(s < 0 for s in size):
        raise RuntimeError(f"{fn}(): output_size must be non-negative, got {list(size)}")
    # separable and linear: one small matmul of window sums per spatial dim, then one
    # division by the window's size, as PyTorch divides its sum (multiplying by a fraction
    # per dim rounds an exact half of integers off it)
    out, count = input, None
    for k in range(nd):
        dim = input.ndim - nd + k
        windows, length = _adaptive_windows(input.shape[dim], size[k], input)
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
    if isinstance(input, Tensor) and input.ndim in (2, 3) and output_size in (1, (1,), [1]):
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
    if (isinstance(input, Tensor) and input.ndim >= 2 and output_size in (1, (1, 1), [1, 1])):
        # PyTorch's global-pooling shortcut: a mean over the last two dims, of any rank
        return input.mean((-2, -1), keepdim=True)
    return _adaptive_avg_pool(2, input, output_size, "adaptive_avg_pool2d")


def _adaptive_max_pool(nd, input, output_size, return_indices, fn):
    _check_tensor(input, "input", fn)
    if input.is_complex():
        # complex numbers have no order (NumPy's max compares them part by part)
        kernel = "adaptive_max_pool3d_cpu" if nd == 3 else "adaptive_max_pool2d"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{_torch_name(input.dtype)}'")
    input, added = _batched(input, nd, fn)
    size = _adaptive_size(output_size, input, nd)
    if any(s < 0 for s in size) or any(i == 0 for i in input.shape[2:]):
        raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(input.shape)} with "
                           f"output_size {list(size)}")
    if 0 in size:
        # an empty output, as PyTorch gives
        shape = tuple(input.shape[:2]) + size
        values = _unbatch(input.new_empty(shape), added)
        if return_indices:
            return values, _unbatch(input.new_empty(shape, dtype=D.int64), added)
        return values
    values, indices = call("adaptive_max_pool", (input,), {"output_size": size})
    values = _unbatch(values, added)
    if return_indices:
        return values, _unbatch(indices, added)
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
    if (isinstance(input, Tensor) and input.ndim in (4, 5)
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
    >>> from torcia._oplib.nn_conv import adaptive_max_pool2d
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
    return _F().max_pool1d_with_indices(input, kernel_size, stride, padding, dilation,
                                        ceil_mode)


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


#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = (
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d",
)

#: the names ``torcia`` exports from here
__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "avg_pool1d", "conv1d", "conv2d", "conv3d",
    "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution",
    "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool3d",
]
