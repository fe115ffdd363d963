"""Core's reference kernels on CuPy.

The reference kernels are written against ``self.xp``, so the same code runs on CuPy.
Only what NumPy and CuPy spell differently is overridden here.
"""

from __future__ import annotations

import numpy as np

from torcia.library import ReferenceKernels as Reference


class CupyKernels(Reference):
    """The reference kernels with ``xp`` set to an array module (CuPy, or NumPy in tests)."""

    def __init__(self, xp):
        self.xp = xp

    def view(self, a, shape):
        # The shape/strides arithmetic is NumPy's, done on a zero-byte stand-in with the
        # same strides (CuPy's reshape has no copy=False); then applied to the real array.
        probe = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=a.dtype), a.shape, a.strides)
        try:
            strides = np.reshape(probe, shape, copy=False).strides
        except ValueError:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
            ) from None
        return self.xp.lib.stride_tricks.as_strided(a, shape, strides)

    def _special_fn(self, name, a):
        if self.xp is np:
            return getattr(super(), name)(a)
        import cupyx.scipy.special as special

        return getattr(special, {"lgamma": "gammaln", "digamma": "digamma"}.get(name, name))(a)

    def erf(self, a):
        return self._special_fn("erf", a)

    def erfc(self, a):
        return self._special_fn("erfc", a)

    def erfinv(self, a):
        return self._special_fn("erfinv", a)

    def lgamma(self, a):
        return self._special_fn("lgamma", a)

    def digamma(self, a):
        return self._special_fn("digamma", a)
