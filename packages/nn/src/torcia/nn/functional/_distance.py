"""Distances defined here: ``pdist``."""

from __future__ import annotations

import numpy as np

import torcia
from torcia.library import autocast_as


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
