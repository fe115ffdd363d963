"""The public functions of the neural-network ops (``torcia.softmax``, ``torcia.conv2d``...).

Each checks its arguments the way PyTorch does (with PyTorch's messages), brings inputs to
the batched layout the kernels expect, normalises sizes to tuples, and calls the op.
``torcia.nn.functional`` re-exports these with its own signatures and adds the functions
that are compositions of ops (losses, interpolation, attention).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import _tensor
from torcia._creation import draw
from torcia._grad_mode import no_grad
from torcia._ops import _to_float
from torcia._tensor import Tensor, _wrap_dim, call, inplace
from torcia.amp import autocast_as
from torcia.random import rng_of

# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


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


def _check_tensor(x, name: str, fn: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


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


def _float_input(input: Tensor, fn: str) -> None:
    if not input.is_floating_point():
        raise RuntimeError(f"\"{fn}\" not implemented for '{_tensor._torch_name(input.dtype)}'")


# ---------------------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------------------


#: the dtype categories (1 integer, 2 floating, 3 complex) of the activations that take
#: more than floating inputs, as PyTorch: hardtanh clamps integers in their dtype, the others
#: compute integers in the default float dtype
_CATEGORIES = {"hardtanh": (1, 2), "silu": (2, 3), "softsign": (1, 2, 3),
               "tanhshrink": (1, 2, 3)}


def _activation(op, input, fn, inplace_, **params):
    _check_tensor(input, "input", fn)
    category = input.dtype.category
    if category == 0 and op == "hardtanh":
        raise RuntimeError(f"Bool inputs not supported for {op}")
    if category not in _CATEGORIES.get(op, (2,)):
        raise RuntimeError(f"\"{fn}\" not implemented for '{_tensor._torch_name(input.dtype)}'")
    if category == 1 and op != "hardtanh" and not inplace_:
        input = _to_float(input)
    if inplace_:
        return inplace(lambda t: call(op, (t,), params), input)
    return call(op, (input,), params)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, else ``input * negative_slope``.

    Examples
    --------
    >>> import torcia
    >>> from torcia._ops_nn import leaky_relu
    >>> leaky_relu(torcia.tensor([-2.0, 3.0]), 0.5)
    tensor([-1.,  3.])
    """
    return _activation("leaky_relu", input, "leaky_relu", inplace,
                       negative_slope=float(negative_slope))


def elu(input, alpha=1.0, inplace=False):
    """``input`` where positive, else ``alpha * (exp(input) - 1)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.elu(torcia.tensor([-1.0, 2.0]))
    tensor([-0.6321,  2.0000])
    """
    return _activation("elu", input, "elu", inplace, alpha=float(alpha))


def selu(input, inplace=False):
    """``scale * elu(input, alpha)`` with alpha = 1.6733 and scale = 1.0507.

    Examples
    --------
    >>> import torcia
    >>> torcia.selu(torcia.tensor([-1.0, 1.0]))
    tensor([-1.1113,  1.0507])
    """
    return _activation("selu", input, "selu", inplace)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, input) + min(0, alpha * (exp(input / alpha) - 1))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.celu(torcia.tensor([-1.0, 2.0]))
    tensor([-0.6321,  2.0000])
    """
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _activation("celu", input, "celu", inplace, alpha=float(alpha))


def gelu(input, approximate="none"):
    """``input * Phi(input)`` (Phi the standard normal CDF); ``approximate="tanh"`` uses
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.gelu(torcia.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    >>> F.gelu(torcia.tensor([1.0]), approximate="tanh")
    tensor([0.8412])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, but got "
                           f"{approximate}")
    return _activation("gelu", input, "gelu", False, approximate=approximate)


def silu(input, inplace=False):
    """``input * sigmoid(input)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.silu(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7311])
    """
    return _activation("silu", input, "silu", inplace)


def mish(input, inplace=False):
    """``input * tanh(softplus(input))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.mish(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.8651])
    """
    return _activation("mish", input, "mish", inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softplus(torcia.tensor([0.0, 30.0]))
    tensor([ 0.6931, 30.0000])
    """
    return _activation("softplus", input, "softplus", False, beta=float(beta),
                       threshold=float(threshold))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``input`` clipped to ``[min_val, max_val]``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardtanh(torcia.tensor([-2.0, 0.5, 2.0]))
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _activation("hardtanh", input, "hardtanh", inplace, min_val=float(min_val),
                       max_val=float(max_val))


def relu6(input, inplace=False):
    """``min(max(0, input), 6)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.relu6(torcia.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def hardswish(input, inplace=False):
    """``input * relu6(input + 3) / 6``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardswish(torcia.tensor([0.0, 1.0, 4.0]))
    tensor([0.0000, 0.6667, 4.0000])
    """
    return _activation("hardswish", input, "hardswish", inplace)


def hardsigmoid(input, inplace=False):
    """``relu6(input + 3) / 6``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardsigmoid(torcia.tensor([-4.0, 0.0, 1.5]))
    tensor([0.0000, 0.5000, 0.7500])
    """
    return _activation("hardsigmoid", input, "hardsigmoid", inplace)


def logsigmoid(input):
    """``log(sigmoid(input))``, computed without overflow.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.logsigmoid(torcia.tensor([0.0, 2.0]))
    tensor([-0.6931, -0.1269])
    """
    return _activation("logsigmoid", input, "log_sigmoid_forward", False)


def softsign(input):
    """``input / (1 + |input|)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softsign(torcia.tensor([-1.0, 3.0]))
    tensor([-0.5000,  0.7500])
    """
    return _activation("softsign", input, "softsign", False)


def tanhshrink(input):
    """``input - tanh(input)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.tanhshrink(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.2384])
    """
    return _activation("tanhshrink", input, "tanhshrink", False)


@autocast_as("prelu")
def prelu(input, weight):
    """``input`` where positive, else ``weight * input``; ``weight`` has one element or
    one per channel (dim 1).

    Examples
    --------
    >>> import torcia
    >>> torcia.prelu(torcia.tensor([[-2.0, 3.0]]), torcia.tensor([0.25]))
    tensor([[-0.5000,  3.0000]])
    """
    n = weight.numel()
    if n != 1:
        channels = input.shape[1] if input.ndim >= 2 else input.shape[0] if input.ndim else 1
        if n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {channels}.")
        shape = [1] * input.ndim
        shape[1 if input.ndim >= 2 else 0] = n
        weight = weight.reshape(shape)
    elif weight.ndim:
        weight = weight.reshape(())
    from torcia import _ops

    return _ops.where(input > 0, input, input * weight)


# ---------------------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------------------


def _softmax_dim(ndim: int) -> int:
    # PyTorch's legacy choice when dim is not given
    return 0 if ndim in (0, 1, 3) else 1


def _softmax(op, input, dim, dtype, name=None):
    _check_tensor(input, "input", name or op)
    if dim is None:
        dim = _softmax_dim(input.ndim)
        warnings.warn(f"Implicit dimension choice for {name or op} has been deprecated. "
                      "Change the call to include dim=X as an argument.", stacklevel=4)
    if dtype is not None:
        input = input.to(dtype)
    elif not input.is_floating_point():
        last = input.ndim <= 1 or _wrap_dim(dim, input.ndim) == input.ndim - 1
        raise NotImplementedError(f"\"{op}{'_lastdim' if last else ''}_kernel_impl\" not "
                                  f"implemented for '{_tensor._torch_name(input.dtype)}'")
    dim = _wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        return call(op, (input.reshape(1),), {"dim": 0}).reshape(())
    return call(op, (input,), {"dim": dim})


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(input)`` normalised to sum to 1 along ``dim``; ``dtype`` casts first.

    Examples
    --------
    >>> import torcia
    >>> torcia.softmax(torcia.tensor([0.0, 0.0]), dim=0)
    tensor([0.5000, 0.5000])
    """
    return _softmax("softmax", input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``input - logsumexp(input, dim)``, computed stably; ``dtype`` casts first.

    Examples
    --------
    >>> import torcia
    >>> torcia.log_softmax(torcia.tensor([0.0, 0.0]), dim=0).exp()
    tensor([0.5000, 0.5000])
    """
    return _softmax("log_softmax", input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input, dim)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softmin(torcia.tensor([1.0, 1.0, 2.0]), dim=0)
    tensor([0.4223, 0.4223, 0.1554])
    """
    return _softmax("softmax", -input, dim, dtype, name="softmin")


# ---------------------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------------------


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
    from torcia._kernels_nn import _check_geometry

    _check_geometry(weight.shape[2:], stride, pad, dilation, out_pad)
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


# ---------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------


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
    from torcia._kernels_nn import _check_geometry

    _check_geometry(kernel, stride, pad, dilation, pool=True)
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
    from torcia._kernels_nn import _pool_geometry

    out_sp, _ = _pool_geometry(input.shape[2:], kernel, stride, pad, dilation, bool(ceil_mode))
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
    from torcia._kernels_nn import _pool_geometry

    out_sp, _ = _pool_geometry(input.shape[2:], kernel, stride, pad, (1,) * nd,
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


def _adaptive_weights(i: int, o: int, like: Tensor) -> Tensor:
    """(o, i) averaging matrix of adaptive pooling along one dim: row r averages input
    positions [floor(r*i/o), ceil((r+1)*i/o))."""
    r = np.arange(o)
    start, end = (r * i) // o, -((-(r + 1) * i) // o)
    pos = np.arange(i)
    m = ((pos >= start[:, None]) & (pos < end[:, None])) / (end - start)[:, None]
    # built on the host, then moved: ``like`` may live on another device
    from torcia._creation import tensor

    return tensor(m, dtype=like.dtype, device=like.device)


def _adaptive_avg_pool(nd, input, output_size, fn):
    _check_tensor(input, "input", fn)
    _batched(input, nd, fn)
    size = _adaptive_size(output_size, input, nd)
    if any(s < 0 for s in size):
        raise RuntimeError(f"{fn}(): output_size must be non-negative, got {list(size)}")
    # separable and linear: one small matmul per spatial dim
    out = input
    for k in range(nd):
        dim = input.ndim - nd + k
        w = _adaptive_weights(input.shape[dim], size[k], input)
        out = (out.movedim(dim, -1) @ w.mT).movedim(-1, dim)
    return out


@autocast_as("adaptive_avg_pool1d")
def adaptive_avg_pool1d(input, output_size):
    """Means over ``output_size`` nearly equal windows covering ``input`` (N, C, L).

    Examples
    --------
    >>> import torcia
    >>> torcia.adaptive_avg_pool1d(torcia.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    tensor([[2., 1.]])
    """
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
    >>> from torcia._ops_nn import adaptive_max_pool2d
    >>> adaptive_max_pool2d(torcia.arange(9.0).reshape(1, 3, 3), 1)
    tensor([[[8.]]])
    """
    return _adaptive_max_pool(2, input, output_size, return_indices, "adaptive_max_pool2d")


# ---------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------


def _check_channel_param(t, name, c):
    if t is not None and (t.ndim != 1 or t.shape[0] != c):
        raise RuntimeError(f"running_mean should contain {c} elements not {t.numel()}"
                           if name == "running_mean" else
                           f"Expected {name} to have {c} elements, but got {name} of size "
                           f"{list(t.shape)}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05):
    """Normalise each channel (dim 1) of ``input`` with the batch statistics (training)
    or the running ones, then scale by ``weight`` and shift by ``bias``. In training,
    ``running_mean`` and ``running_var`` (unbiased variance) move towards the batch
    statistics by ``momentum``, in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0], [3.0]])
    >>> rm, rv = torcia.zeros(1), torcia.ones(1)
    >>> from torcia._ops_nn import batch_norm
    >>> batch_norm(x, rm, rv, training=True, eps=0.0)
    tensor([[-1.],
            [ 1.]])
    >>> rm, rv
    (tensor([0.2000]), tensor([1.1000]))
    """
    _check_tensor(input, "input", "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")
    if eps < 0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {float(eps)}")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"batch_norm\" not implemented for "
                                  f"'{_tensor._torch_name(input.dtype)}'")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _check_channel_param(t, name, c)
    if training:
        count = input.numel() // c if c else 0
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(input.shape)}")
        if count == 0:
            # an empty batch has no statistics: PyTorch returns it (scaled and shifted,
            # so that weight and bias get their zero gradients) and leaves the running
            # statistics as they are
            shape = (1, c) + (1,) * (input.ndim - 2)
            out = input.clone()
            if weight is not None:
                out = out * weight.reshape(shape)
            if bias is not None:
                out = out + bias.reshape(shape)
            return out
    elif running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    stats = (None, None) if training else (running_mean, running_var)
    out, mean, var = call("batch_norm", (input, weight, bias) + stats,
                          {"training": bool(training), "eps": float(eps)})
    if training and (running_mean is not None or running_var is not None):
        n = input.numel() // c
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype)
                                                     * momentum)
            if running_var is not None:
                unbiased = var.detach() * (n / (n - 1))
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    return out


def _torch_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                      eps, cudnn_enabled=True):
    """``torch.batch_norm``'s argument order for :func:`batch_norm`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0], [3.0]])
    >>> torcia.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    tensor([[-1.0000],
            [ 1.0000]])
    """
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                      eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Normalise ``input`` over its last ``len(normalized_shape)`` dims (mean 0, biased
    variance 1), then scale by ``weight`` and shift by ``bias`` (elementwise).

    Examples
    --------
    >>> import torcia
    >>> torcia.layer_norm(torcia.tensor([[1.0, 3.0]]), (2,), eps=0.0)
    tensor([[-1.,  1.]])
    """
    _check_tensor(input, "input", "layer_norm")
    shape = (int(normalized_shape),) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or input.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, "
                               f"but got {name} of shape {list(t.shape)} and "
                               f"normalized_shape = {list(shape)}")
    return call("layer_norm", (input, weight, bias), {"normalized_ndim": k, "eps": float(eps)})


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Divide ``input`` by its root mean square over its last ``len(normalized_shape)``
    dims (``x / sqrt(mean(x**2) + eps)``), then scale by ``weight`` (elementwise).

    ``eps`` defaults to the machine epsilon of ``input``'s dtype, as PyTorch's does.

    Examples
    --------
    >>> import torcia
    >>> torcia.rms_norm(torcia.tensor([[3.0, 4.0]]), (2,), eps=0.0) ** 2
    tensor([[0.7200, 1.2800]])
    """
    _check_tensor(input, "input", "rms_norm")
    shape = (int(normalized_shape),) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(shape)}")
    if not input.is_floating_point():
        raise RuntimeError(f"rms_norm: expected a floating-point input, got {input.dtype}")
    if eps is None:
        eps = 2.0 ** -7 if input.dtype is D.bfloat16 else float(np.finfo(input.dtype.np).eps)
    return call("rms_norm", (input, weight), {"normalized_ndim": k, "eps": float(eps)})


def _torch_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,
                      cudnn_enable=True):
    """``torch.layer_norm``: :func:`layer_norm` with the unused ``cudnn_enable``.

    Examples
    --------
    >>> import torcia
    >>> torcia.layer_norm(torcia.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    return layer_norm(input, normalized_shape, weight, bias, eps)


@autocast_as("group_norm")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Normalise each of ``num_groups`` groups of channels of ``input`` ``(N, C, *)`` over
    its channels and positions, then scale and shift per channel.

    Examples
    --------
    >>> import torcia
    >>> torcia.group_norm(torcia.tensor([[1.0, 3.0]]), 1, eps=0.0)
    tensor([[-1.,  1.]])
    """
    _check_tensor(input, "input", "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.shape[0] != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                               f"of channels in input, but got {name} of shape "
                               f"{list(t.shape)} and input of shape {list(input.shape)}")
    grouped = input.reshape(n, num_groups, -1)
    out = call("layer_norm", (grouped, None, None), {"normalized_ndim": 1, "eps": float(eps)})
    out = out.reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _torch_group_norm(input, num_groups, weight=None, bias=None, eps=1e-05,
                      cudnn_enabled=True):
    """``torch.group_norm``: :func:`group_norm` with the unused ``cudnn_enabled``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 3.0, 5.0, 7.0]]).reshape(1, 4, 1)
    >>> torcia.group_norm(x, 2).flatten()
    tensor([-1.0000,  1.0000, -1.0000,  1.0000])
    """
    return group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Normalise each channel of each sample of ``input`` ``(N, C, *)`` over its positions;
    with running statistics, they are updated from the per-instance means and variances
    averaged over the batch, and used when ``use_input_stats`` is False.

    Examples
    --------
    >>> import torcia
    >>> from torcia._ops_nn import instance_norm
    >>> instance_norm(torcia.tensor([[[1.0, 3.0]]]), eps=0.0)
    tensor([[[-1.,  1.]]])
    """
    _check_tensor(input, "input", "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"expected 3D or higher input (got {input.ndim}D input)")
    n, c = input.shape[:2]
    # an instance is a channel of a batch of one: batch_norm over (1, N*C, *)
    rm = running_mean.repeat(n) if running_mean is not None else None
    rv = running_var.repeat(n) if running_var is not None else None
    w = weight.repeat(n) if weight is not None else None
    b = bias.repeat(n) if bias is not None else None
    flat = input.reshape((1, n * c) + tuple(input.shape[2:]))
    out = batch_norm(flat, rm, rv, w, b, use_input_stats, momentum, eps)
    if use_input_stats:
        with no_grad():
            if running_mean is not None:
                running_mean.copy_(rm.reshape(n, c).mean(0))
            if running_var is not None:
                running_var.copy_(rv.reshape(n, c).mean(0))
    return out.reshape(input.shape)


# ---------------------------------------------------------------------------------------
# embedding and dropout
# ---------------------------------------------------------------------------------------


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` (num_embeddings, dim) picked by the integer ``input``; the row
    ``padding_idx`` gets no gradient; with ``max_norm``, looked-up rows whose
    ``norm_type``-norm exceeds it are rescaled in place first; with ``sparse``, the
    gradient of ``weight`` is a sparse COO tensor of the looked-up rows (for
    :class:`torcia.optim.SparseAdam`).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([[0.0, 0.0], [1.0, 2.0]])
    >>> from torcia._ops_nn import embedding
    >>> embedding(torcia.tensor([1, 0, 1]), w)
    tensor([[1., 2.],
            [0., 0.],
            [1., 2.]])
    """
    _check_tensor(input, "input", "embedding")
    if input.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got "
                           f"{_torch_tensor_type(input)} instead (while checking arguments "
                           "for embedding)")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    v = weight.shape[0]
    if padding_idx is not None:
        if not -v <= padding_idx < v:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = int(padding_idx) % v
    idx = input._data
    if idx.size:
        from torcia.backend import check_async

        check_async(input.device, (idx.min() < 0) | (idx.max() >= v),
                    lambda: IndexError("index out of range in self"))
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq is not supported")
    if max_norm is not None:
        _renorm_rows(weight, input, float(max_norm), float(norm_type))
    params = {"padding_idx": padding_idx}
    if sparse:
        # the gradient of weight becomes a sparse COO tensor of the rows looked up
        params["sparse"] = True
    return call("embedding", (weight, input), params)


def _torch_tensor_type(t) -> str:
    return {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor"}.get(
        t.dtype.name, f"torcia.{t.dtype.name}")


def _renorm_rows(weight, input, max_norm, norm_type):
    with no_grad():
        xp = weight.device.backend.xp
        rows = xp.unique(input._data.reshape(-1))
        w = weight._data
        norms = (xp.abs(w[rows]) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
        scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        w[rows] = w[rows] * scale[:, None].astype(w.dtype)
        weight._vc[0] += 1


def _torch_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False,
                     sparse=False):
    """``torch.embedding``: weight first, and -1 for "no padding row".

    Examples
    --------
    >>> import torcia
    >>> weight = torcia.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> torcia.embedding(weight, torcia.tensor([2, 1]))
    tensor([[3., 4.],
            [1., 2.]])
    """
    return embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                     scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _check_p(p):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_mask(input, shape, p):
    dev = input._device
    if not _tensor._modes_on:  # the no-mode path: draw's, without its call
        kernels = dev.kernels if dev.kernels is not None else dev.backend.kernels
        return Tensor._make(kernels["dropout_mask"](shape=tuple(shape), p=float(p),
                                                    dtype=input._data.dtype,
                                                    rng=rng_of(None)), dev)
    # through dispatch: vmap batches the mask, torcia.compile replays a fresh draw
    return draw("dropout_mask", dev, (), {"shape": tuple(shape), "p": float(p),
                                          "dtype": input._data.dtype, "rng": rng_of(None)})


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (training only; the default generator draws, so ``torcia.manual_seed`` repeats it).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(4)
    >>> from torcia._ops_nn import dropout
    >>> dropout(x, 0.5, training=False)
    tensor([1., 1., 1., 1.])
    """
    _check_p(p)
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0
    else:
        out = input * _dropout_mask(input, input.shape, p)
    if inplace:
        return _write(input, out)
    return out


def _write(input, out):
    return inplace(lambda t: out, input)


def _feature_dropout(input, p, training, inplace_, batched_ndim, fn):
    _check_p(p)
    if not training or p == 0:
        return input
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise ValueError(f"{fn}: Received a {input.ndim}-D input, expected "
                         f"{batched_ndim - 1}-D (unbatched) or {batched_ndim}-D (batched)")
    lead = 2 if input.ndim == batched_ndim else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    out = input * 0 if p == 1 else input * _dropout_mask(input, shape, p)
    return _write(input, out) if inplace_ else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``input`` (N, C, L) or (C, L) with probability ``p``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.ones(1, 2, 3)
    >>> F.dropout1d(x, 0.5, training=False).equal(x)
    True
    """
    return _feature_dropout(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``input`` (N, C, H, W) with probability ``p``, scaling the
    rest by ``1 / (1 - p)``.

    Other ranks behave as in PyTorch, with its warnings: a 3-D input is read as (N, C, L)
    (channel-wise 1-D dropout, not an unbatched image), a 2-D one as (N, C), which drops
    single elements.

    Examples
    --------
    >>> import torcia
    >>> from torcia.library import dropout2d
    >>> dropout2d(torcia.ones(1, 2, 3, 3), p=0.0).sum().item()
    18.0
    """
    ndim = input.ndim
    if ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {ndim}-D input to dropout2d, which is deprecated and will "
            "result in an error in a future release. To retain the behavior and silence this "
            "warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 3D or 4D inputs).", stacklevel=2)
    if ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret "
            "the input as one without a batch dimension, i.e. shape (C, H, W). To maintain "
            "the 1D channel-wise dropout behavior, please switch to using dropout1d "
            "instead.", stacklevel=2)
    if ndim < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, "
                           f"got {ndim}")
    # PyTorch's feature dropout: one draw per (dim 0, dim 1) entry, whatever the rank
    return _feature_dropout(input, p, training, inplace, ndim, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``input`` (N, C, D, H, W) or (C, D, H, W) with probability
    ``p``.

    Other ranks behave as in PyTorch, with its warning: the input is read as unbatched,
    dim 0 being the channels.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.ones(1, 2, 1, 1, 3)
    >>> F.dropout3d(x, 0.5, training=False).equal(x)
    True
    """
    ndim = input.ndim
    if ndim in (4, 5):
        return _feature_dropout(input, p, training, inplace, 5, "dropout3d")
    warnings.warn(
        f"dropout3d: Received a {ndim}-D input to dropout3d, which is deprecated and will "
        "result in an error in a future release. To retain the behavior and silence this "
        "warning, please use dropout instead. Note that dropout3d exists to provide "
        "channel-wise dropout on inputs with 3 spatial dimensions, a channel dimension, and "
        "an optional batch dimension (i.e. 4D or 5D inputs).", stacklevel=2)
    if ndim < 1:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, "
                           f"got {ndim + 1}")
    _check_p(p)
    if not training or p == 0:
        return input
    # PyTorch adds a batch dim of one, so dim 0 holds the channels
    out = _feature_dropout(input.unsqueeze(0), p, training, False, ndim + 1, "dropout3d")
    out = out.squeeze(0)
    return _write(input, out) if inplace else out


def _alpha_dropout(input, p, training, inplace_, shape):
    _check_p(p)
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0
        return _write(input, out) if inplace_ else out
    neg = -1.0507009873554804934193349852946 * 1.6732632423543772848170429916717
    keep = _dropout_mask(input, shape, p) * (1 - p)  # 0 or 1
    a = ((1 - p) * (1 + p * neg * neg)) ** -0.5
    b = -a * neg * p
    out = (input * keep + neg * (1 - keep)) * a + b
    return _write(input, out) if inplace_ else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's zero mean and unit variance: dropped elements become
    SELU's negative saturation value, then an affine map restores the statistics.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, -1.0])
    >>> torcia.alpha_dropout(x, 0.5, training=False)
    tensor([ 1., -1.])
    """
    return _alpha_dropout(input, p, training, inplace, input.shape)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """:func:`alpha_dropout` of whole channels (dim 1) of ``input`` ``(N, C, *)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(1, 2, 3)
    >>> torcia.feature_alpha_dropout(x, 0.5, training=False).equal(x)
    True
    """
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _alpha_dropout(input, p, training, inplace, shape)


# ---------------------------------------------------------------------------------------
# shuffles and distances (top-level in PyTorch)
# ---------------------------------------------------------------------------------------


def pixel_shuffle(input, upscale_factor):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): channels moved into space.

    Examples
    --------
    >>> import torcia
    >>> torcia.pixel_shuffle(torcia.arange(4.0).reshape(1, 4, 1, 1), 2)[0, 0]
    tensor([[0., 1.],
            [2., 3.]])
    """
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c}"
                           f" is not divisible by {r * r}")
    k = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W): the inverse of pixel_shuffle.

    Examples
    --------
    >>> import torcia
    >>> torcia.pixel_unshuffle(torcia.zeros(1, 1, 4, 6), 2).shape
    torcia.Size([1, 4, 2, 3])
    """
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, "
                           f"but got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor, but got input of size {list(input.shape)} "
                           f"and downscale_factor={r}")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


@autocast_as("cosine_similarity")
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / max(||x1|| * ||x2||, eps)`` along ``dim`` (broadcasting).

    Examples
    --------
    >>> import torcia
    >>> torcia.cosine_similarity(torcia.tensor([[1.0, 0.0]]), torcia.tensor([[1.0, 1.0]]))
    tensor([0.7071])
    """
    from torcia import _ops

    x1, x2 = _ops.broadcast_tensors(x1, x2)
    dot = (x1 * x2).sum(dim)
    n1 = (x1 * x1).sum(dim)
    n2 = (x2 * x2).sum(dim)
    return dot / (n1 * n2).clamp(min=eps * eps).sqrt()


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.pairwise_distance(torcia.tensor([[3.0, 0.0]]), torcia.tensor([[0.0, 4.0]]),
    ...                          eps=0.0)
    tensor([5.])
    """
    diff = x1 - x2 + eps
    dim = -1 if diff.ndim else 0
    return diff.norm(p, dim=dim, keepdim=keepdim) if diff.ndim else diff.abs()


__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "alpha_dropout", "avg_pool1d", "celu",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "cosine_similarity", "dropout", "feature_alpha_dropout", "instance_norm", "log_softmax",
    "max_pool1d", "max_pool2d", "max_pool3d", "pairwise_distance", "pixel_shuffle",
    "pixel_unshuffle", "prelu", "rms_norm", "selu", "softmax",
]
#: PyTorch's top-level names whose signatures differ from ``torch.nn.functional``'s.
TOP_LEVEL = {"batch_norm": _torch_batch_norm, "layer_norm": _torch_layer_norm,
             "group_norm": _torch_group_norm, "embedding": _torch_embedding}
METHODS = ("softmax", "log_softmax")
