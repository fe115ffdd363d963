"""``CosineSimilarity`` and ``PairwiseDistance``."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules.module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.CosineSimilarity()(torcia.tensor([[1.0, 0.0]]), torcia.tensor([[1.0, 1.0]]))
    tensor([0.7071])
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The p-norm of ``x1 - x2 + eps`` along the last dimension.

    Examples
    --------
    >>> import torcia
    >>> d = torcia.nn.PairwiseDistance(eps=0.0)
    >>> d(torcia.tensor([[0.0, 0.0]]), torcia.tensor([[3.0, 4.0]]))
    tensor([5.])
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
