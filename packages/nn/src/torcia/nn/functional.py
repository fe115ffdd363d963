"""``torcia.nn.functional``: layers and losses as functions, with PyTorch's signatures.

The heavy primitives (convolution, pooling, softmax, normalisation, embedding, the fused
cross-entropy) are core ops with kernels a backend can replace; they live in torcia-core
(reached through :mod:`torcia.library`) and are re-exported here. What is defined here is
a composition of differentiable ops: its gradient comes from theirs.

Loss functions raise on input and target shapes that differ (PyTorch warns and
broadcasts, which silently computes something else).

Examples
--------
>>> import torcia
>>> import torcia.nn.functional as F
>>> x = torcia.tensor([[2.0, 0.0, 0.0]])
>>> round(F.cross_entropy(x, torcia.tensor([0])).item(), 4)
0.2395
"""

from __future__ import annotations

import itertools
import math

import numpy as np

import torcia
from torcia.autograd import Function
from torcia.library import (  # noqa: F401  (re-exported)
    Tensor,
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    alpha_dropout,
    autocast_as,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    batch_norm,
    call,
    celu,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    cosine_similarity,
    dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    elu,
    embedding,
    feature_alpha_dropout,
    gelu,
    group_norm,
    hardsigmoid,
    hardswish,
    hardtanh,
    inplace,
    instance_norm,
    layer_norm,
    leaky_relu,
    log_softmax,
    logsigmoid,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    mish,
    pairwise_distance,
    pixel_shuffle,
    pixel_unshuffle,
    prelu,
    relu6,
    rms_norm,
    selu,
    silu,
    softmax,
    softmin,
    softplus,
    softsign,
    tanhshrink,
)
from torcia.library import (  # noqa: F401  (re-exported)
    batched as _batched,
)
from torcia.library import check_async as _check_async
from torcia.library import host_array as _host_array
from torcia.library import ntuple as _ntuple
from torcia.library import pad as _pad
from torcia.library import unbatch as _unbatch
from torcia.nn.attention import SDPBackend as _SDPBackend
from torcia.nn.attention import _enabled as _sdpa_enabled
from torcia.nn.attention import check_viable

# ---------------------------------------------------------------------------------------
# linear maps and simple activations
# ---------------------------------------------------------------------------------------


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``; ``weight`` is (out_features, in_features).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.linear(torcia.tensor([[1.0, 2.0]]), torcia.tensor([[1.0, 1.0]]), torcia.tensor([0.5]))
    tensor([[3.5000]])
    """
    if input.is_nested:
        # a jagged batch: the product on its values' last dimension
        out = input @ weight.t()
        return out if bias is None else out + bias
    if input.shape[-1] != weight.shape[-1]:
        rows = math.prod(input.shape[:-1]) if input.ndim > 1 else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x"
                           f"{input.shape[-1]} and {weight.shape[-1]}x{weight.shape[0]})")
    if weight.ndim != 2 or input.ndim == 0:
        out = input @ (weight.t() if weight.ndim == 2 else weight)
        return out if bias is None else out + bias
    mismatch = input.dtype is not weight.dtype or (bias is not None
                                                   and bias.dtype is not input.dtype)
    if mismatch and not torcia.amp.is_autocast_enabled(input.device.type):
        # under autocast the op's inputs are cast to one dtype when it runs
        other = weight if weight.dtype is not input.dtype else bias
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                           f"{_scalar(input.dtype)} and {_scalar(other.dtype)}")
    if bias is not None and bias.shape not in ((weight.shape[0],), ()):
        raise RuntimeError(f"linear(): bias of size {list(bias.shape)} does not match "
                           f"out_features={weight.shape[0]}")
    return call("linear", (input, weight, bias), {})


@autocast_as("bilinear")
def bilinear(input1, input2, weight, bias=None):
    """``out[..., o] = input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.bilinear(torcia.ones(1, 2), torcia.ones(1, 3), torcia.ones(4, 2, 3)).shape
    torcia.Size([1, 4])
    """
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{list(input1.shape[:-1])} and {list(input2.shape[:-1])}")
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or \
            weight.shape[2] != input2.shape[-1]:
        raise RuntimeError(f"bilinear(): weight of size {list(weight.shape)} does not match "
                           f"inputs of sizes {list(input1.shape)} and {list(input2.shape)}")
    lead = input1.shape[:-1]
    a = input1.reshape(-1, input1.shape[-1])
    b = input2.reshape(-1, input2.shape[-1])
    # (B, i) @ (i, o*j) -> (B, o, j), then contract j with input2
    t = (a @ weight.permute(1, 0, 2).reshape(weight.shape[1], -1)).reshape(
        a.shape[0], weight.shape[0], weight.shape[2])
    out = (t @ b.unsqueeze(-1)).squeeze(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, weight.shape[0])


def relu(input, inplace=False):
    """``max(input, 0)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.relu(torcia.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    return input.relu_() if inplace else torcia.relu(input)


def relu_(input):
    """In-place :func:`relu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 0.5, 2.0])
    >>> F.relu_(x)
    tensor([0.0000, 0.5000, 2.0000])
    >>> x
    tensor([0.0000, 0.5000, 2.0000])
    """
    return input.relu_()


def sigmoid(input):
    """``1 / (1 + exp(-input))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.sigmoid(torcia.tensor([0.0, 2.0]))
    tensor([0.5000, 0.8808])
    """
    return torcia.sigmoid(input)


def tanh(input):
    """Hyperbolic tangent.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.tanh(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7616])
    """
    return torcia.tanh(input)


def threshold(input, threshold, value, inplace=False):
    """``input`` where greater than ``threshold``, else ``value``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.threshold(torcia.tensor([0.1, 0.5, 2.0]), 0.3, -1.0)
    tensor([-1.0000,  0.5000,  2.0000])
    """
    # "input <= threshold" replaced, so NaN (never <=) passes as PyTorch's
    out = torcia.where(input <= threshold, torcia.full_like(input, value), input)
    return _maybe_inplace(input, out, inplace)


def hardshrink(input, lambd=0.5):
    """``input`` where ``|input| > lambd``, else 0.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardshrink(torcia.tensor([-1.0, 0.2, 0.7]))
    tensor([-1.0000,  0.0000,  0.7000])
    """
    return input * (input.abs() > lambd)


def softshrink(input, lambd=0.5):
    """``input`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softshrink(torcia.tensor([-1.0, 0.2, 0.75]))
    tensor([-0.5000,  0.0000,  0.2500])
    """
    name = input.type().rsplit(".", 1)[1].removesuffix("Tensor")  # PyTorch's name: 'Float'
    if not input.is_floating_point():
        raise NotImplementedError(f"\"softshrink_check\" not implemented for '{name}'")
    top = torcia.finfo(input.dtype).max
    if not 0 <= lambd <= top:
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype {name}, "
                           f"but found {lambd:g}")
    # NaN is no nearer 0 than lambd, so it passes through: input - lambd * sign(nan) is NaN
    return torcia.where(input.abs() <= lambd, torcia.zeros_like(input),
                        input - lambd * input.sign())


def glu(input, dim=-1):
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.glu(torcia.tensor([[1.0, 2.0, 0.0, 0.0]]))
    tensor([[0.5000, 1.0000]])
    """
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {n}")
    a, b = input.split(n // 2, dim)
    return a * b.sigmoid()


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: the negative slope is drawn from U(lower, upper) per
    element in training, and is ``(lower + upper) / 2`` in evaluation.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.rrelu(torcia.tensor([-3.0, 1.0]), lower=0.25, upper=0.25)
    tensor([-0.7500,  1.0000])
    """
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    with torcia.no_grad():
        slope = torcia.empty_like(input).uniform_(lower, upper) if hasattr(
            Tensor, "uniform_") else torcia.rand_like(input) * (upper - lower) + lower
    out = torcia.where(input >= 0, input, input * slope)
    return _maybe_inplace(input, out, inplace)


def elu_(input, alpha=1.0):
    """In-place :func:`elu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 2.0])
    >>> F.elu_(x) is x
    True
    >>> x
    tensor([-0.6321,  2.0000])
    """
    return elu(input, alpha, inplace=True)


def celu_(input, alpha=1.0):
    """In-place :func:`celu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 2.0])
    >>> F.celu_(x, alpha=2.0)
    tensor([-0.7869,  2.0000])
    """
    return celu(input, alpha, inplace=True)


def selu_(input):
    """In-place :func:`selu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 1.0])
    >>> F.selu_(x)
    tensor([-1.1113,  1.0507])
    """
    return selu(input, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """In-place :func:`leaky_relu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-2.0, 3.0])
    >>> F.leaky_relu_(x, negative_slope=0.5)
    tensor([-1.,  3.])
    """
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place :func:`hardtanh`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-3.0, 0.5, 3.0])
    >>> F.hardtanh_(x)
    tensor([-1.0000,  0.5000,  1.0000])
    """
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold_, value):
    """In-place :func:`threshold`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([0.1, 2.0])
    >>> F.threshold_(x, 1.0, 0.0)
    tensor([0., 2.])
    """
    return threshold(input, threshold_, value, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """In-place :func:`rrelu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-4.0, 1.0])
    >>> F.rrelu_(x, lower=0.5, upper=0.5)
    tensor([-2.,  1.])
    """
    return rrelu(input, lower, upper, training, inplace=True)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax (relaxed categorical) distribution over ``dim``:
    ``softmax((logits + g) / tau)`` with standard Gumbel noise ``g``; ``hard`` returns
    one-hot vectors whose gradient is the soft sample's (straight-through).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.gumbel_softmax(torcia.zeros(2, 3), hard=True).sum(-1)
    tensor([1., 1.])
    """
    with torcia.no_grad():
        u = torcia.rand(logits.shape, dtype=logits.dtype, device=logits.device)
        gumbels = -(-(u.clamp(min=eps)).log()).log()
    soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one = torcia.zeros_like(soft).scatter(dim, index, 1.0)
    return one - soft.detach() + soft


def _maybe_inplace(input, out, inplace_):
    return inplace(lambda t: out, input) if inplace_ else out


# ---------------------------------------------------------------------------------------
# padding, resizing, patches
# ---------------------------------------------------------------------------------------


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


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: ``input`` (B, L) is B bags of L
    indices, or 1-D with ``offsets`` marking where each bag starts; ``per_sample_weights``
    scale the rows (mode "sum"); indices equal to ``padding_idx`` are left out; an empty
    bag gives zeros.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> w = torcia.tensor([[1.0, 0.0], [0.0, 2.0], [4.0, 4.0]])
    >>> F.embedding_bag(torcia.tensor([0, 1, 2]), w, torcia.tensor([0, 2]), mode="sum")
    tensor([[1., 2.],
            [4., 4.]])
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' "
                                  f"(got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    dev = weight.device
    # bags and padding as tensors, not NumPy reads of the values: vmap maps them
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences.")
        bags, length = input.shape
        bag_of = torcia.arange(bags, device=dev).repeat_interleave(length)
        flat = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor but got None" if offsets is None
                             else f"offsets has to be a 1D Tensor but got {offsets.ndim}D")
        starts = offsets.long()
        if include_last_offset:
            starts = starts[:-1]
        bags = starts.shape[0]
        bag_of = torcia.searchsorted(starts, torcia.arange(input.shape[0], device=dev),
                                     right=True) - 1
        flat = input
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    rows = embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    # the padding rows take no part: the lowest value in a max, zero in a sum, no count
    left_out = None if padding_idx is None else \
        (flat == padding_idx % weight.shape[0]).unsqueeze(1)
    out = torcia.zeros(bags, weight.shape[1], dtype=weight.dtype, device=dev)
    if mode == "max":
        if left_out is not None:
            rows = rows.masked_fill(left_out, float("-inf"))
        lowest = torcia.full_like(out, float("-inf"))
        out = lowest.scatter_reduce(0, bag_of.unsqueeze(1).expand(rows.shape), rows, "amax")
        return out.masked_fill(out == float("-inf"), 0.0)
    if left_out is not None:
        rows = rows.masked_fill(left_out, 0.0)
    out = out.index_add(0, bag_of, rows)
    if mode == "mean":
        counted = torcia.ones(flat.shape[0], dtype=out.dtype, device=dev)
        if left_out is not None:
            counted = counted.masked_fill(left_out.squeeze(1), 0.0)
        counts = torcia.zeros(bags, dtype=out.dtype, device=dev).index_add(0, bag_of, counted)
        out = out / counts.clamp(min=1).unsqueeze(1)
    return out


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


def one_hot(tensor, num_classes=-1):
    """Integer class indices as int64 rows of zeros with a one at each index.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.one_hot(torcia.tensor([0, 2]), 3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    if tensor.dtype is not torcia.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    data = tensor.__torcia_data__
    if num_classes == -1:
        if tensor.device.type == "meta":
            raise RuntimeError("one_hot with num_classes=-1 cannot run on the meta device: "
                               "the number of classes comes from the values, which a meta "
                               "tensor does not hold; pass num_classes")
        if data.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(data.max()) + 1
    if data.size and data.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if data.size and data.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = torcia.zeros(*tensor.shape, num_classes, dtype=torcia.int64, device=tensor.device)
    return out.scatter(-1, tensor.unsqueeze(-1), 1)


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


# ---------------------------------------------------------------------------------------
# distances and attention
# ---------------------------------------------------------------------------------------


@autocast_as("pdist")
def pdist(input, p=2):
    """The ``p``-norm distances between every pair of rows ``i < j`` of ``input`` (N, M),
    in row-major order of the pairs.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.pdist(torcia.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.0000, 1.0000, 4.2426])
    """
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    i, j = np.triu_indices(input.shape[0], 1)
    rows = torcia.tensor(i, device=input.device), torcia.tensor(j, device=input.device)
    return (input.index_select(0, rows[0]) - input.index_select(0, rows[1])).norm(p, dim=1)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input`` divided by its ``p``-norm along ``dim`` (at least ``eps``).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.normalize(torcia.tensor([[3.0, 4.0]]))
    tensor([[0.6000, 0.8000]])
    """
    norm = input.norm(p, dim=dim, keepdim=True).clamp(min=eps)
    return input / norm


def _fusable_attention(q, k, v, mask, is_causal, enable_gqa) -> bool:
    """Whether ``flash_attention`` computes this attention: floating tensors (half
    precision computed in float32, rounded once, as PyTorch's CPU kernel) of one dtype and
    device with (*, H, L, E) shapes of the same leading dims, keys and
    values of one length, the query heads a multiple of the key heads (equal without
    ``enable_gqa``), and a mask (not with ``is_causal``) that broadcasts to the scores'
    shape. Whatever else goes the composite way, errors included."""
    if not all(isinstance(t, torcia.Tensor) for t in (q, k, v)) or q.dtype not in (
            torcia.float16, torcia.bfloat16, torcia.float32, torcia.float64) or not (
            q.dtype is k.dtype and k.dtype is v.dtype):
        return False
    if q.device != k.device or q.device != v.device or min(q.ndim, k.ndim, v.ndim) < 3 \
            or not q.ndim == k.ndim == v.ndim or q.shape[:-3] != k.shape[:-3] \
            or k.shape[:-3] != v.shape[:-3]:
        return False
    hq, lq, e = q.shape[-3:]
    hk, lk, ek = k.shape[-3:]
    if e != ek or v.shape[-3:-1] != (hk, lk) or 0 in (lq, lk, hk) or hq % hk \
            or (hq != hk and not enable_gqa):
        return False
    if mask is None:
        return True
    if is_causal or not isinstance(mask, torcia.Tensor) or mask.device != q.device or (
            mask.dtype is not torcia.bool and mask.dtype is not q.dtype):
        return False
    scores = q.shape[:-1] + (lk,)
    try:
        return mask.ndim <= q.ndim and np.broadcast_shapes(mask.shape, scores) == scores
    except ValueError:
        return False


@autocast_as("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key.T * scale + mask) @ value`` over the last two dims; a bool
    ``attn_mask`` marks the positions that may attend, a float one is added;
    ``is_causal`` masks the future; ``scale`` defaults to ``1 / sqrt(E)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> q = k = v = torcia.eye(2).unsqueeze(0)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, 0]
    tensor([1., 0.])
    """
    check_viable(query.device.type)
    if query.is_nested:
        return torcia.nested.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    e = query.shape[-1]
    lq, lk = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(e) if scale is None else scale
    if dropout_p == 0 and _sdpa_enabled(_SDPBackend.FLASH_ATTENTION) and _fusable_attention(
            query, key, value, attn_mask, is_causal, enable_gqa):
        # one op (flash_attention), whose native kernels need not hold the scores; with
        # sdpa_kernel(SDPBackend.MATH) the composite below, PyTorch's math path
        return call("flash_attention", (query, key, value, attn_mask),
                    {"is_causal": bool(is_causal), "scale": float(scale)})[0]
    if enable_gqa and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(rep, dim=-3)
        value = value.repeat_interleave(rep, dim=-3)
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not "
                               "be set when is_causal=True")
        allowed = torcia.ones(lq, lk, dtype=torcia.bool, device=query.device).tril()
        scores = scores.masked_fill(allowed.logical_not(), float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype is torcia.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if is_causal or attn_mask is not None:
        # a query that may attend to no key: PyTorch's safe softmax gives it zero weights
        # (and a zero output) where softmax over -inf alone would give NaN
        weights = torcia.where(scores.isneginf().all(-1, keepdim=True), 0.0, weights)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value


# ---------------------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------------------


def _reduction(size_average, reduce, reduction):
    """The legacy ``size_average``/``reduce`` pair mapped to a reduction, as PyTorch."""
    if size_average is None and reduce is None:
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _same_shape(input, target, fn):
    if input.shape != target.shape:
        raise ValueError(f"{fn}: target size ({list(target.shape)}) must be the same as input "
                         f"size ({list(input.shape)}); broadcasting them would compute a "
                         "different loss")


@autocast_as("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error ``(input - target) ** 2``, reduced.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.mse_loss(torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 4.0]))
    tensor(2.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "mse_loss")
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_as("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|``, reduced.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.l1_loss(torcia.tensor([1.0, 2.0]), torcia.tensor([2.0, 4.0]))
    tensor(1.5000)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "l1_loss")
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_as("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
                   beta=1.0):
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``
    (``d = input - target``); ``beta=0`` is the L1 loss.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.smooth_l1_loss(torcia.tensor([0.0, 0.0]), torcia.tensor([0.5, 3.0]), reduction="none")
    tensor([0.1250, 2.5000])
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "smooth_l1_loss")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = (input - target).abs()
    if beta == 0:
        loss = d
    else:
        loss = torcia.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce(loss, reduction)


@autocast_as("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 * d**2`` where ``|d| <= delta``, else ``delta * (|d| - 0.5 * delta)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.huber_loss(torcia.tensor([0.0, 0.0]), torcia.tensor([0.5, 3.0]), reduction="none")
    tensor([0.1250, 2.5000])
    """
    reduction = _reduction(None, None, reduction)
    _same_shape(input, target, "huber_loss")
    d = (input - target).abs()
    loss = torcia.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _check_float_input(input, kernel):
    """PyTorch's error for a loss on integer scores: its kernel has no integer version."""
    if isinstance(input, Tensor) and not input.is_floating_point():
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{_scalar(input.dtype)}'")


def _class_target(input, target, fn):
    """Class-index form of (input, target): input as (rows, C), target as (rows,), and
    the shape the 'none' loss has."""
    if target.dtype not in (torcia.int64, torcia.int32, torcia.uint8, torcia.int16, torcia.int8):
        raise RuntimeError(f"expected scalar type Long but found {_scalar(target.dtype)}")
    if input.ndim == 0:
        raise RuntimeError(f"{fn}: input must have at least 1 dimension, got a 0-d tensor")
    if input.ndim == 1:
        if target.ndim != 0:
            raise RuntimeError(f"0D or 1D target tensor expected, multi-target not supported "
                               f"(got target of size {list(target.shape)} for input of size "
                               f"{list(input.shape)})")
        return input.unsqueeze(0), target.reshape(1), ()
    if target.shape[:1] != input.shape[:1]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 0}).")
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got "
                           f"{list(target.shape)}")
    c = input.shape[1]
    if input.ndim > 2:
        input = input.movedim(1, -1).reshape(-1, c)
    if target.ndim != 1:
        target = target.reshape(-1)
    if target.dtype is not torcia.int64:
        target = target.to(torcia.int64)
    return input, target, expected


def _scalar(d) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(d.name, d.name)


def _check_targets(target, c, ignore_index):
    t = target.__torcia_data__
    bad = (t != ignore_index) & ((t < 0) | (t >= c))
    _check_async(target.device, bad.any(),
                 lambda: IndexError(f"Target {int(t[bad][0])} is out of bounds."))


def _check_class_weight(weight, c):
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
        raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no "
                           f"classes but got weight tensor of shape: {list(weight.shape)}")


@autocast_as("nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood of log-probabilities ``input`` ``(N, C, *)`` or ``(C,)`` at the
    class indices ``target``, weighted per class; 'mean' divides by the summed weights
    of the non-ignored targets.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.nll_loss(torcia.tensor([[-1.0, -2.0], [-3.0, -4.0]]), torcia.tensor([1, 0]))
    tensor(2.5000)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _check_float_input(input, "nll_loss_out_frame" if input.ndim <= 2 else
                       "nll_loss2d_forward_out_frame")
    rows, tgt, shape = _class_target(input, target, "nll_loss")
    c = rows.shape[1]
    _check_targets(tgt, c, ignore_index)
    _check_class_weight(weight, c)
    out = call("nll_loss", (rows, tgt, weight), {"reduction": reduction,
                                                 "ignore_index": int(ignore_index)})
    return out.reshape(shape) if reduction == "none" else out


@autocast_as("cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits ``input`` ``(N, C, *)`` or ``(C,)`` and ``target``: class
    indices ``(N, *)`` (fused log_softmax and nll_loss, with ``weight``, ``ignore_index`` and
    ``label_smoothing``), or class probabilities of ``input``'s shape.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.0, 0.0]])
    >>> F.cross_entropy(x, torcia.tensor([1]))
    tensor(0.6931)
    >>> F.cross_entropy(x, torcia.tensor([[0.5, 0.5]]))
    tensor(0.6931)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                         f"{label_smoothing}")
    # without it, integer logits gave an integer loss
    _check_float_input(input, "log_softmax_lastdim_kernel_impl" if input.ndim <= 2 else
                       "log_softmax_kernel_impl")
    if target.is_floating_point():
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing)
    rows, tgt, shape = _class_target(input, target, "cross_entropy")
    c = rows.shape[1]
    _check_targets(tgt, c, ignore_index)
    _check_class_weight(weight, c)
    out = call("cross_entropy", (rows, tgt, weight), {
        "reduction": reduction, "ignore_index": int(ignore_index),
        "label_smoothing": float(label_smoothing)})
    return out.reshape(shape) if reduction == "none" else out


def _cross_entropy_probs(input, target, weight, reduction, label_smoothing):
    if input.shape != target.shape:
        raise RuntimeError(f"Expected target size {list(input.shape)}, got "
                           f"{list(target.shape)}")
    dim = 0 if input.ndim == 1 else 1
    c = input.shape[dim]
    _check_class_weight(weight, c)
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    terms = log_softmax(input, dim) * target
    if weight is not None:
        terms = terms * weight.reshape((c,) + (1,) * (input.ndim - dim - 1))
    loss = -terms.sum(dim)
    if reduction == "mean":
        # per element of the batch (and positions), whatever the weights
        return loss.sum() / (input.numel() // c) if input.numel() else loss.sum() * math.nan
    return _reduce(loss, reduction)


def _clamped_log(x):
    """``log(x)`` clamped at -100 without evaluating ``log(0)``."""
    positive = x > 0
    return torcia.where(positive, torcia.where(positive, x, 1).log(), -100.0).clamp(min=-100)


class _BinaryCrossEntropy(Function):
    """Elementwise binary cross-entropy with PyTorch's gradient.

    The logs are clamped at -100, and the input gradient is
    ``(input - target) / max(input * (1 - input), 1e-12)`` as PyTorch computes it: the
    gradient of the clamped expression would be 0 * inf = NaN at input 0 or 1.
    """

    @staticmethod
    def forward(ctx, input, target):
        ctx.save_for_backward(input, target)
        ctx.save_for_forward(input, target)
        return -(target * _clamped_log(input) + (1 - target) * _clamped_log(1 - input))

    @staticmethod
    def _partials(input, target, needed):
        """The derivatives with respect to (input, target), those ``needed`` only."""
        return ((input - target) / ((1 - input) * input).clamp(min=1e-12) if needed[0]
                else None, (1 - input).log() - input.log() if needed[1] else None)

    @staticmethod
    def backward(ctx, grad):
        d_input, d_target = _BinaryCrossEntropy._partials(*ctx.saved_tensors,
                                                          ctx.needs_input_grad)
        return (None if d_input is None else grad * d_input,
                None if d_target is None else grad * d_target)

    @staticmethod
    def jvp(ctx, t_input, t_target):
        d_input, d_target = _BinaryCrossEntropy._partials(*ctx.saved_tensors, (True, True))
        return t_input * d_input + t_target * d_target


@autocast_as("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """``-(target * log(input) + (1 - target) * log(1 - input))`` with the logs clamped
    at -100, as PyTorch, so that probabilities of exactly 0 or 1 give finite losses.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.binary_cross_entropy(torcia.tensor([0.5]), torcia.tensor([1.0]))
    tensor(0.6931)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "binary_cross_entropy")
    data = input.__torcia_data__
    if data.size and (data.min() < 0 or data.max() > 1):
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = _BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_as("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Binary cross-entropy of ``sigmoid(input)``, computed from the logits without
    overflow: ``(1 - t) * x - (1 + (pos_weight - 1) * t) * logsigmoid(x)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.binary_cross_entropy_with_logits(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor(0.6931)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    log_sig = logsigmoid(input)
    if pos_weight is not None:
        coef = 1 + (pos_weight - 1) * target
        loss = (1 - target) * input - coef * log_sig
    else:
        loss = (1 - target) * input - log_sig
    if weight is not None:
        loss = loss * weight
    # PyTorch accumulates the loss in place into ``1 - target``: the target's dtype
    kept = (1 - target).dtype
    if kept.is_floating_point and loss.dtype is not kept:
        loss = loss.to(kept)
    return _reduce(loss, reduction)


@autocast_as("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence ``target * (log(target) - input)`` of log-probabilities
    ``input``; ``log_target`` means ``target`` holds log-probabilities too; 'batchmean'
    divides the sum by the batch size (the mathematically correct KL).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> p = torcia.tensor([[0.5, 0.5]])
    >>> F.kl_div(p.log(), p, reduction="batchmean")
    tensor(0.)
    """
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction != "batchmean":
        reduction = _reduction(size_average, reduce, reduction)
    if input.is_complex() or target.is_complex():
        raise RuntimeError("kl_div: Complex inputs not supported.")
    if not (input.is_floating_point() and target.is_floating_point()):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    _same_shape(input, target, "kl_div")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = torcia.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction)


@autocast_as("ctc_loss")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification loss: minus the log of the total probability
    of all alignments of each target to its input. ``log_probs`` (T, N, C) or (T, C)
    holds log-probabilities; ``targets`` is (N, S) padded or 1-D concatenated; 'mean'
    divides each loss by its target length, then averages. First derivatives only.

    The gradient is the true derivative with respect to ``log_probs`` (PyTorch's own
    adds ``exp(log_probs)``, which cancels when ``log_probs`` comes from log_softmax).

    Examples
    --------
    >>> import math, torcia
    >>> import torcia.nn.functional as F
    >>> lp = torcia.full((2, 1, 2), math.log(0.5))
    >>> # target [1] over two steps: alignments "1 1", "_ 1", "1 _", each 1/4
    >>> round(F.ctc_loss(lp, torcia.tensor([[1]]), [2], [1], reduction="sum").item(), 4)
    0.2877
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    added = log_probs.ndim == 2
    if added:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.reshape(1, -1)
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 or 3 dimensions, got "
                           f"{log_probs.ndim}")
    t_max, n, c = log_probs.shape
    if any(isinstance(x, Tensor) and x.device.type == "meta"
           for x in (input_lengths, target_lengths)):
        raise RuntimeError("ctc_loss with tensor lengths cannot run on the meta device: the "
                           "loss reads the lengths' values, which a meta tensor does not "
                           "hold (PyTorch has no meta kernel for it either)")
    il = np.asarray(input_lengths.__torcia_data__ if isinstance(input_lengths, Tensor)
                    else input_lengths, dtype=np.int64).reshape(-1)
    tl = np.asarray(target_lengths.__torcia_data__ if isinstance(target_lengths, Tensor)
                    else target_lengths, dtype=np.int64).reshape(-1)
    if il.shape != (n,) or tl.shape != (n,):
        raise RuntimeError(f"ctc_loss: expected input_lengths and target_lengths of size {n}, "
                           f"got {list(il.shape)} and {list(tl.shape)}")
    if (il > t_max).any() or (il < 1).any():
        raise RuntimeError(f"Expected input_lengths to have value at most {t_max}, but got "
                           f"value {int(il.max())} (while checking arguments for ctc_loss_cpu)")
    tgt = np.asarray(targets.__torcia_data__, dtype=np.int64)
    if tgt.ndim == 1 and n > 1 or tgt.ndim == 1 and not added and tgt.shape[0] != tl[0]:
        # concatenated targets: split by target_lengths into padded rows
        starts = np.concatenate([[0], np.cumsum(tl)[:-1]])
        padded = np.full((n, max(int(tl.max()), 1)), blank, dtype=np.int64)
        for k in range(n):
            padded[k, :tl[k]] = tgt[starts[k]:starts[k] + tl[k]]
        tgt = padded
    tgt = tgt.reshape(n, -1)
    if (tl > tgt.shape[1]).any():
        raise RuntimeError(f"Expected tensor to have size at least {int(tl.max())} at "
                           f"dimension 1, but got size {tgt.shape[1]} for argument #2 "
                           "'targets' (while checking arguments for ctc_loss_cpu)")
    inside = np.arange(tgt.shape[1])[None, :] < tl[:, None]
    if ((tgt < 0) | (tgt >= c) | (tgt == blank))[inside].any():
        raise RuntimeError(f"ctc_loss: targets must be class indices in [0, {c}) other than "
                           f"the blank {blank}")
    tgt = np.where(inside, tgt, blank)
    dev = log_probs.device
    nll = call("ctc_loss", (log_probs, torcia.tensor(tgt, device=dev),
                            torcia.tensor(il, device=dev), torcia.tensor(tl, device=dev)),
               {"blank": int(blank)})
    if zero_infinity:
        nll = torcia.where(nll.isinf(), torcia.zeros_like(nll), nll)
    if reduction == "mean":
        lengths = torcia.tensor(np.maximum(tl, 1), dtype=nll.dtype, device=dev)
        return (nll / lengths).mean()
    if reduction == "sum":
        return nll.sum()
    return nll.reshape(()) if added else nll


@autocast_as("poisson_nll_loss")
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Negative log likelihood of ``target`` under Poisson(``input``) (or
    Poisson(exp(input)) with ``log_input``); ``full`` adds Stirling's term.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.poisson_nll_loss(torcia.tensor([0.0, 1.0]), torcia.tensor([1.0, 2.0]))
    tensor(0.8591)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "poisson_nll_loss")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


@autocast_as("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)`` where
    it is -1.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[1.0, 0.0]])
    >>> F.cosine_embedding_loss(x, x, torcia.tensor([1.0]))
    tensor(0.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or input1.shape != input2.shape:
        raise RuntimeError(f"cosine_embedding_loss: expected 1D or 2D inputs of equal size, "
                           f"got {list(input1.shape)} and {list(input2.shape)}")
    dim = input1.ndim - 1
    eps = 1e-12
    dot = (input1 * input2).sum(dim)
    m1 = (input1 * input1).sum(dim) + eps
    m2 = (input2 * input2).sum(dim) + eps
    cos = dot / (m1 * m2).sqrt()
    zero = torcia.zeros_like(cos)
    loss = torcia.where(target == 1, 1 - cos, zero) + torcia.where(
        target == -1, (cos - margin).clamp(min=0), zero)
    return _reduce(loss, reduction)


@autocast_as("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.margin_ranking_loss(torcia.tensor([1.0]), torcia.tensor([2.0]), torcia.tensor([1.0]))
    tensor(1.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not (input1.shape == input2.shape == target.shape):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {list(input1.shape)}, input2: "
                           f"{list(input2.shape)}, target: {list(target.shape)} ")
    loss = (-target * (input1 - input2) + margin).clamp(min=0)
    return _reduce(loss, reduction)


@autocast_as("hinge_embedding_loss")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x, y = torcia.tensor([0.3, 2.0]), torcia.tensor([1.0, -1.0])
    >>> F.hinge_embedding_loss(x, y, reduction="none")
    tensor([0.3000, 0.0000])
    """
    reduction = _reduction(size_average, reduce, reduction)
    zero = torcia.zeros_like(input)
    # PyTorch fills ``margin`` into a tensor of the input's dtype (an integer input stays
    # integer) and adds both terms where ``target`` is neither 1 nor -1
    hinge = (torcia.full_like(input, margin) - input).clamp(min=0)
    loss = torcia.where(target != 1, hinge, zero) + torcia.where(target != -1, input, zero)
    return _reduce(loss, reduction)


@autocast_as("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.soft_margin_loss(torcia.tensor([0.0, 2.0]), torcia.tensor([1.0, -1.0]), reduction="none")
    tensor([0.6931, 2.1269])
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "soft_margin_loss")
    if not (input.is_floating_point() or input.is_complex()):
        # PyTorch computes in place in the input's dtype, which cannot hold the exp: its
        # chain raises its error
        input.neg().mul_(target).exp_()
    # PyTorch's formula in the input's dtype, overflow included
    loss = (input.neg() * target).to(input.dtype).exp().log1p()
    return _reduce(loss, reduction)


@autocast_as("triplet_margin_loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, d(anchor, positive) - d(anchor, negative) + margin)`` with ``d`` the
    ``p``-norm :func:`pairwise_distance`; ``swap`` uses the smaller of d(a, n), d(p, n).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> a = torcia.tensor([[0.0, 0.0]])
    >>> F.triplet_margin_loss(a, a, a + 3, eps=0.0)
    tensor(0.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions (1 or 2), but got: anchor "
                           f"{anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    d_ap = pairwise_distance(anchor, positive, p, eps)
    d_an = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_an = torcia.minimum(d_an, pairwise_distance(positive, negative, p, eps))
    loss = (margin + d_ap - d_an).clamp(min=0)
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """:func:`triplet_margin_loss` with any ``distance_function`` (default
    :func:`pairwise_distance`).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> anchor = torcia.tensor([[0.0, 0.0]])
    >>> positive = torcia.tensor([[0.0, 1.0]])
    >>> negative = torcia.tensor([[3.0, 0.0]])
    >>> l1 = lambda a, b: (a - b).abs().sum(-1)
    >>> F.triplet_margin_with_distance_loss(anchor, positive, negative,
    ...                                     distance_function=l1, margin=3.0)
    tensor(1.)
    """
    reduction = _reduction(None, None, reduction)
    dist = pairwise_distance if distance_function is None else distance_function
    d_ap = dist(anchor, positive)
    d_an = dist(anchor, negative)
    if swap:
        d_an = torcia.minimum(d_an, dist(positive, negative))
    loss = (margin + d_ap - d_an).clamp(min=0)
    return _reduce(loss, reduction)


@autocast_as("multilabel_margin_loss")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: for each sample, the sum over its target classes ``j``
    (``target`` lists them, ending at the first -1) and non-target classes ``i`` of
    ``max(0, 1 - (x[j] - x[i]))``, over the number of classes.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> y = torcia.tensor([[3, 0, -1, 1]])
    >>> F.multilabel_margin_loss(x, y)
    tensor(0.8500)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input.shape != target.shape or input.ndim not in (1, 2):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    t = target.reshape(x.shape)
    c = x.shape[1]
    # slots before the first -1 name targets; all in tensor ops, so that vmap maps them
    valid = (t != -1).long().cumprod(1) != 0
    safe = torcia.where(valid, t, torcia.zeros_like(t))
    is_target = torcia.zeros_like(t).scatter_add(1, safe, valid.long()) != 0
    picked = x.gather(1, safe)  # (N, slots)
    hinge = (1 - picked.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (hinge * mask).sum((1, 2)) / c
    if input.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


@autocast_as("multi_margin_loss")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss: the mean over classes ``i != y`` of
    ``max(0, margin - x[y] + x[i]) ** p`` (times ``weight[y]``).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> F.multi_margin_loss(x, torcia.tensor([3]))
    tensor(0.3250)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    rows = input if input.ndim == 2 else input.unsqueeze(0)
    t = target.reshape(-1, 1)
    picked = rows.gather(1, t)
    terms = (margin - picked + rows).clamp(min=0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * weight[t.reshape(-1)].unsqueeze(1)
    terms = terms.scatter(1, t, 0.0)
    loss = terms.sum(1) / rows.shape[1]
    if input.ndim != 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-06, reduction="mean"):
    """Negative log likelihood of ``target`` under N(``input``, ``var``):
    ``0.5 * (log(max(var, eps)) + (input - target)**2 / max(var, eps))`` (plus
    ``0.5 * log(2 pi)`` with ``full``); ``var`` may have one fewer trailing dim or a last
    dim of 1 (one variance per sample).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.gaussian_nll_loss(torcia.tensor([1.0]), torcia.tensor([3.0]), torcia.tensor([4.0]))
    tensor(1.1931)
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if (var.__torcia_data__ < 0).any():
        raise ValueError("var has negative entry/entries")
    with torcia.no_grad():
        clamped = var.clamp(min=eps)
    # the clamp is invisible to the gradient, as PyTorch's in-place clamp under no_grad
    var = var + (clamped - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Mean over classes of the binary cross-entropy of ``sigmoid(input)`` against the
    0/1 ``target``, per sample.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.0, 2.0]])
    >>> F.multilabel_soft_margin_loss(x, torcia.tensor([[1.0, 0.0]]))
    tensor(1.4100)
    """
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.mean(input.ndim - 1)
    # PyTorch's composite checks the reduction last, after its log-sigmoid's dtype check
    return _reduce(loss, _reduction(size_average, reduce, reduction))


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Divide each element by ``(k + alpha / size * sum of squares of the ``size``
    neighbouring channels) ** beta`` (AlexNet's normalisation).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.ones(1, 3, 1, 1)
    >>> F.local_response_norm(x, size=2, alpha=1.0, beta=1.0, k=1.0).flatten()
    tensor([0.6667, 0.5000, 0.5000])
    """
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         "dimensions)")
    n, c = input.shape[:2]
    sq = (input * input).reshape(n, 1, c, -1)
    sq = pad(sq, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(sq, (size, 1), stride=1).reshape(input.shape)
    return input / (div * alpha + k) ** beta


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


def assert_int_or_pair(arg, arg_name, message):
    """Assert that ``arg`` is an int or a pair, as PyTorch's argument check does
    (``message`` is formatted with ``arg_name``).

    Examples
    --------
    >>> import torcia.nn.functional as F
    >>> F.assert_int_or_pair((2, 3), "kernel_size", "{} must be int or pair")
    """
    assert isinstance(arg, int) or len(arg) == 2, message.format(arg_name)


def boolean_dispatch(arg_name, arg_index, default, if_true, if_false, module_name, func_name):
    """A function that calls ``if_true`` or ``if_false`` by the boolean argument
    ``arg_name`` (keyword, or positional at ``arg_index``; ``default`` when absent), as
    PyTorch builds ``max_pool2d`` from its ``return_indices`` forms.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> def with_indices(x, k, return_indices=False):
    ...     return x.topk(k)
    >>> def values_only(x, k, return_indices=False):
    ...     return x.topk(k).values
    >>> top = F.boolean_dispatch("return_indices", 2, False, with_indices, values_only,
    ...                          __name__, "top")
    >>> top(torcia.tensor([1.0, 3.0]), 1), top(torcia.tensor([1.0, 3.0]), 1, True).indices
    (tensor([3.]), tensor([1]))
    """

    def fn(*args, **kwargs):
        flag = default
        if arg_name in kwargs:
            flag = kwargs[arg_name]
        elif arg_index < len(args):
            flag = args[arg_index]
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)

    # the documented one lends its docstring to the other, as in PyTorch
    if if_true.__doc__ is None and if_false.__doc__ is not None:
        if_true.__doc__ = if_false.__doc__
    elif if_false.__doc__ is None and if_true.__doc__ is not None:
        if_false.__doc__ = if_true.__doc__
    elif if_true.__doc__ is not None:
        raise RuntimeError("only one function can have a docstring")
    fn.__doc__ = if_true.__doc__
    fn.__module__ = module_name
    fn.__name__ = func_name
    return fn


class _BroadcastingListCls:
    """TorchScript's annotation of an argument given as one value or a list of N: outside
    TorchScript, subscripting it gives nothing, as in PyTorch."""

    def __getitem__(self, types):
        return None


#: Annotations of an argument that is one value or a list (``BroadcastingList2[int]``).
BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingListCls()



# last: they call this module's functions
from torcia.nn._mha import multi_head_attention_forward  # noqa: E402,F401
from torcia.nn.linear_cross_entropy import linear_cross_entropy  # noqa: E402,F401

__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and callable(v)
           and n not in ("Tensor", "call", "inplace", "annotations")
           and not isinstance(v, type) and getattr(v, "__module__", "").startswith("torcia")]

