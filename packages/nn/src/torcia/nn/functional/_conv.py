"""Patches and convolutions defined here: ``unfold``, ``fold``, ``conv_tbc``."""

from __future__ import annotations

from torcia.library import autocast_as, call
from torcia.library import batched as _batched
from torcia.library import ntuple as _ntuple
from torcia.library import unbatch as _unbatch
from torcia.library.functional import conv1d


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks of ``input`` (N, C, H, W) as columns: (N, C * kh * kw, L) (im2col).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.unfold(torcia.arange(4.0).reshape(1, 1, 2, 2), 1)
    tensor([[[0., 1., 2., 3.]]])
    """
    input, added = _batched(input, 2, "unfold")
    k = _ntuple(kernel_size, 2, "kernel_size")
    params = {"kernel_size": k, "dilation": _ntuple(dilation, 2, "dilation"),
              "padding": _ntuple(padding, 2, "padding"),
              "stride": _ntuple(stride, 2, "stride")}
    blocks = [(i + 2 * p - d * (kk - 1) - 1) // s + 1 for i, p, d, kk, s in zip(
        input.shape[2:], params["padding"], params["dilation"], k, params["stride"])]
    if any(b <= 0 for b in blocks):
        raise RuntimeError(f"Given input with spatial size {list(input.shape[2:])}, "
                           f"kernel_size={list(k)}, dilation={list(params['dilation'])}, "
                           f"padding={list(params['padding'])}, calculated shape of the array "
                           f"of sliding blocks as {blocks}, but its components must be at "
                           "least one.")
    return _unbatch(call("im2col", (input,), params), added)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Columns (N, C * kh * kw, L) summed back into ``(N, C, *output_size)`` (col2im), the
    adjoint of :func:`unfold`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.fold(torcia.ones(1, 4, 4), (3, 3), 2)[0, 0]
    tensor([[1., 2., 1.],
            [2., 4., 2.],
            [1., 2., 1.]])
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to fold, but got "
                           f"input of size: {list(input.shape)}")
    added = input.ndim == 2
    if added:
        input = input.unsqueeze(0)
    k = _ntuple(kernel_size, 2, "kernel_size")
    params = {"output_size": _ntuple(output_size, 2, "output_size"), "kernel_size": k,
              "dilation": _ntuple(dilation, 2, "dilation"),
              "padding": _ntuple(padding, 2, "padding"), "stride": _ntuple(stride, 2, "stride")}
    kk = k[0] * k[1]
    if input.shape[1] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={input.shape[1]} "
                           f"and kernel_size={list(k)}")
    blocks = [(o + 2 * p - d * (kx - 1) - 1) // s + 1 for o, p, d, kx, s in zip(
        params["output_size"], params["padding"], params["dilation"], k, params["stride"])]
    if blocks[0] * blocks[1] != input.shape[2]:
        raise RuntimeError(f"Given output_size={list(params['output_size'])}, "
                           f"kernel_size={list(k)}, dilation={list(params['dilation'])}, "
                           f"padding={list(params['padding'])}, "
                           f"stride={list(params['stride'])}, expected size of input's "
                           f"dimension 2 to match the calculated number of sliding blocks "
                           f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={input.shape[2]}.")
    return _unbatch(call("col2im", (input,), params), added)


@autocast_as("conv_tbc")
def conv_tbc(input, weight, bias, pad=0):
    """1-D convolution of a time-batch-channels ``input`` (T, N, C_in) with ``weight``
    (K, C_in, C_out) and ``bias`` (C_out,), zero-padded by ``pad`` at both ends of time;
    the output is (T + 2 pad - K + 1, N, C_out).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.arange(3.0).reshape(3, 1, 1)          # T=3, N=1, C=1
    >>> F.conv_tbc(x, torcia.ones(2, 1, 1), torcia.zeros(1)).reshape(-1).tolist()
    [1.0, 3.0]
    """
    if input.ndim != 3:
        raise RuntimeError(f"Input must have 3 dims: time, batch, in_channel, got "
                           f"{input.ndim}")
    if weight.ndim != 3:
        raise RuntimeError(f"Weight tensor must have 3 dims: kernel_width, in_channels, "
                           f"out_channels, got {weight.ndim}")
    if bias.ndim != 1:
        raise RuntimeError(f"Bias must be 1-D, got {bias.ndim}")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError(f"Input dim 2 (input channels) is not == dim 1 in the weight "
                           f"tensor: {input.shape[2]} != {weight.shape[1]}")
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError(f"Bias size must equal dim 2 in the weight tensor (output "
                           f"channels): {bias.shape[0]} != {weight.shape[2]}")
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)
