"""A torcia plugin that adds ``FocalLoss`` through torcia-nn's ``torcia_register_losses``
hook; torcia-nn itself does not know it exists.

>>> import torcia
>>> loss = torcia.nn.losses.get("focal", gamma=0.0)
>>> logits = torcia.tensor([[0.0, 0.0]])
>>> round(float(loss(logits, torcia.tensor([1]))), 4)  # gamma=0: cross entropy, log(2)
0.6931
"""

from __future__ import annotations

import torcia
import torcia.nn.functional as F
from torcia import nn

__all__ = ["FocalLoss"]


class FocalLoss(nn.Module):
    """Focal loss for multi-class logits: ``-w[t] * (1 - p_t) ** gamma * log(p_t)``.

    Parameters
    ----------
    gamma : float
        Focusing parameter; 0 gives the cross entropy. Default: 2.
    weight : Tensor, optional
        Per-class weights ``w`` of shape ``(C,)``.
    ignore_index : int
        Targets equal to it contribute nothing. Default: -100.
    reduction : str
        ``"none"``, ``"mean"`` (weighted mean over non-ignored samples) or ``"sum"``.

    Examples
    --------
    >>> import torcia
    >>> from torcia_focal_loss import FocalLoss
    >>> confident = torcia.tensor([[4.0, 0.0]])
    >>> float(FocalLoss(gamma=2.0)(confident, torcia.tensor([0]))) < 1e-4
    True
    """

    def __init__(self, gamma: float = 2.0, weight=None, ignore_index: int = -100,
                 reduction: str = "mean"):
        super().__init__()
        if gamma < 0:
            raise ValueError(f"FocalLoss: gamma must be non-negative, got {gamma}")
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.gamma = gamma
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        if input.dim() < 2 or tuple(target.shape) != (input.shape[0], *input.shape[2:]):
            raise ValueError(
                f"FocalLoss: expected input of shape (N, C, ...) and target of shape "
                f"(N, ...), got {list(input.shape)} and {list(target.shape)}"
            )
        log_p = F.log_softmax(input, dim=1)
        keep = target != self.ignore_index
        safe_target = torcia.where(keep, target, torcia.zeros_like(target))
        log_pt = log_p.gather(1, safe_target.unsqueeze(1)).squeeze(1)
        loss = -((1 - log_pt.exp()) ** self.gamma) * log_pt
        w = keep.to(loss.dtype)
        if self.weight is not None:
            w = w * self.weight[safe_target]
        loss = loss * w
        if self.reduction == "none":
            return loss
        if self.reduction == "sum":
            return loss.sum()
        return loss.sum() / w.sum()

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}"


@torcia.hookimpl
def torcia_register_losses(registry):
    registry.add("focal", FocalLoss)
