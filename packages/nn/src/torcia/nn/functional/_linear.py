"""Linear maps: ``linear``, ``bilinear``."""

from __future__ import annotations

import math

import torcia
from torcia.library import autocast_as, call
from torcia.nn.functional._common import _scalar


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
