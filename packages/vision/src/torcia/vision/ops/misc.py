"""``torchvision.ops.misc``: layers used as building blocks of detection and backbone
models."""

from __future__ import annotations

import torcia
from torcia import nn

__all__ = ["FrozenBatchNorm2d"]


class FrozenBatchNorm2d(nn.Module):
    """Batch normalisation with fixed statistics and affine parameters, all buffers
    (torchvision's ``FrozenBatchNorm2d``): ``y = (x - running_mean) / sqrt(running_var +
    eps) * weight + bias`` per channel of an ``(N, C, H, W)`` input. Backbones fine-tuned
    with tiny batches use it in place of :class:`torcia.nn.BatchNorm2d`.

    Parameters
    ----------
    num_features : int
        The channels ``C``.
    eps : float
        Added to the variance. Default: 1e-5.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.ops.misc import FrozenBatchNorm2d
    >>> bn = FrozenBatchNorm2d(2)
    >>> bn.running_var.fill_(4.0); bn.bias.fill_(1.0)
    tensor([4., 4.])
    tensor([1., 1.])
    >>> [round(v, 4) for v in bn(torcia.full((1, 2, 1, 1), 6.0)).flatten().tolist()]
    [4.0, 4.0]
    >>> list(bn.state_dict())
    ['weight', 'bias', 'running_mean', 'running_var']
    """

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torcia.ones(num_features))
        self.register_buffer("bias", torcia.zeros(num_features))
        self.register_buffer("running_mean", torcia.zeros(num_features))
        self.register_buffer("running_var", torcia.ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # a BatchNorm2d's state dict converts as is, less its batch counter
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def forward(self, x):
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.weight.shape[0]}, eps={self.eps})"
