"""Reference kernels of the discrete Fourier transforms, on ``xp.fft`` (NumPy or CuPy).

Three primitives, as PyTorch's: complex-to-complex, real-to-complex and complex-to-real,
each over several dims with a normalization mode ("backward", "ortho", "forward") and a
direction. The public functions of :mod:`torcia.fft` resize the input first, so the
kernels transform the sizes they are given (``last_dim_size`` aside).
"""

from __future__ import annotations

import numpy as np


class FFTKernels:
    """Kernels of ``fft_c2c``, ``fft_r2c`` and ``fft_c2r``."""

    xp = np

    def fft_c2c(self, a, dims=(-1,), norm="backward", forward=True):
        fn = self.xp.fft.fftn if forward else self.xp.fft.ifftn
        return fn(a, axes=dims, norm=norm).astype(a.dtype, copy=False)

    def fft_r2c(self, a, dims=(-1,), norm="backward", onesided=True):
        xp = self.xp
        out = xp.fft.rfftn(a, axes=dims, norm=norm) if onesided else xp.fft.fftn(
            a, axes=dims, norm=norm)
        return out.astype(np.result_type(a.dtype, np.complex64), copy=False)

    def fft_c2r(self, a, dims=(-1,), norm="backward", last_dim_size=1):
        xp = self.xp
        sizes = [a.shape[d] for d in dims[:-1]] + [last_dim_size]
        out = xp.fft.irfftn(a, s=sizes, axes=dims, norm=norm)
        return out.astype(a.real.dtype, copy=False)
