"""The one reference kernel of the neural-network family that is not an op's:
``logsumexp_rows``, the rows of the cross-entropy kernels (declared in
:mod:`torcia._ops.nn_loss`), which torcia-cpu runs natively. The ops' own kernels are
declared with them in :mod:`torcia._ops`.

A mixin of :class:`torcia._numpy_backend.Reference`.
"""

from __future__ import annotations

import numpy as np


class NNKernels:
    """Kernels of the neural-network ops."""

    xp = np

    def logsumexp_rows(self, x):
        """log(sum(exp(x), 1)) of each row of x (N, C), computed stably (a helper of
        the cross-entropy kernels, not an op: a backend may run it natively)."""
        m = x.max(axis=1, keepdims=True)
        return self.xp.log(self.xp.exp(x - m).sum(axis=1)) + m[:, 0]
