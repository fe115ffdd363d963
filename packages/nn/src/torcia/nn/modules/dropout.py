"""Dropout layers: active in training mode, the identity in eval mode."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules.module import Module

__all__ = ["AlphaDropout", "Dropout", "Dropout1d", "Dropout2d"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    Examples
    --------
    >>> import torcia
    >>> drop = torcia.nn.Dropout(0.5)
    >>> y = drop(torcia.ones(1000))
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    >>> drop.eval()(torcia.ones(3))
    tensor([1., 1., 1.])
    """

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)`` inputs with probability ``p``.

    Examples
    --------
    >>> import torcia
    >>> y = torcia.nn.Dropout2d(0.5)(torcia.ones(1, 64, 2, 2))
    >>> bool(((y.sum((2, 3)) == 0) | (y.sum((2, 3)) == 8)).all())
    True
    """

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)`` inputs with probability ``p``.

    Examples
    --------
    >>> import torcia
    >>> y = torcia.nn.Dropout1d(0.5)(torcia.ones(1, 64, 3))
    >>> bool(((y.sum(2) == 0) | (y.sum(2) == 6)).all())
    True
    """

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: keeps the mean and variance of a standard normal input.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AlphaDropout(0.2).eval()(torcia.ones(2))
    tensor([1., 1.])
    """

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)`` inputs with probability ``p``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Dropout3d(0.5).eval()(torcia.ones(1, 2, 1, 1, 1)).sum().item()
    2.0
    """

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels (keeps SELU's statistics).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.FeatureAlphaDropout(0.2)(torcia.ones(2, 3, 4)).shape
    torcia.Size([2, 3, 4])
    """

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)
