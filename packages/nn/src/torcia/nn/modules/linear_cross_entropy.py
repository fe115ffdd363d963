"""LinearCrossEntropyLoss: a classifier head and its cross entropy in one module, as
``torch.nn.LinearCrossEntropyLoss``."""

from __future__ import annotations

import math

from torcia.nn.linear_cross_entropy import LinearCrossEntropyOptions, linear_cross_entropy
from torcia.nn.modules.linear import Linear
from torcia.nn.modules.loss import _WeightedLoss

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


class LinearCrossEntropyLoss(_WeightedLoss):
    """A linear layer to ``num_classes`` logits (times ``out_features`` for a
    K-dimensional loss) followed by cross entropy, computed by
    :func:`~torcia.nn.functional.linear_cross_entropy` (chunked with ``options``).

    Parameters
    ----------
    in_features, num_classes : int
    out_features : tuple of int, default ()
    bias : bool, default False
    device, dtype : optional
    reduction : {"mean", "sum", "none"}
    weight : Tensor, optional
        Per-class weights, shape ``(num_classes,)``.
    ignore_index : int, optional
    label_smoothing : float, default 0.0
    options : LinearCrossEntropyOptions, optional

    Examples
    --------
    >>> import torcia
    >>> head = torcia.nn.LinearCrossEntropyLoss(8, 100)
    >>> loss = head(torcia.randn(4, 8), torcia.tensor([3, 99, 0, 7]))
    >>> loss.shape, head.linear.weight.shape
    (torcia.Size([]), torcia.Size([100, 8]))
    """

    def __init__(self, in_features: int, num_classes: int, *, out_features=(),
                 bias: bool = False, device=None, dtype=None, reduction: str = "mean",
                 weight=None, ignore_index=None, label_smoothing: float = 0.0, options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got "
                               f"{tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got "
                               f"{label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(in_features, math.prod(self.out_features, start=num_classes),
                             bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input, target):
        weight = self.linear.weight.reshape(self.num_classes, *self.out_features,
                                            self.linear.in_features)
        bias = (self.linear.bias.reshape(self.num_classes, *self.out_features)
                if self.linear.bias is not None else None)
        return linear_cross_entropy(input, weight, target, linear_bias=bias,
                                    weight=self.weight, reduction=self.reduction,
                                    ignore_index=self.ignore_index,
                                    label_smoothing=self.label_smoothing,
                                    options=self.options)

    def extra_repr(self) -> str:
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
