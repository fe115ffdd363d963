"""Normalisation defined here: ``normalize``, ``local_response_norm``."""

from __future__ import annotations

import torcia
from torcia.library.functional import avg_pool2d
from torcia.nn.functional._vision import pad


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
    if input.dtype == torcia.bool:  # its squares' average pool, as PyTorch's, has no bool
        raise NotImplementedError("\"avg_pool2d\" not implemented for 'Bool'")
    n, c = input.shape[:2]
    sq = (input * input).reshape(n, 1, c, -1)
    sq = pad(sq, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(sq, (size, 1), stride=1).reshape(input.shape)
    return input / (div * alpha + k) ** beta
