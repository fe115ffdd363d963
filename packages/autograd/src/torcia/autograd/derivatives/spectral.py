"""Backward formulas of the discrete Fourier transforms (:mod:`torcia.fft`)."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import _FFT_NAMES, derivative
from torcia.library import call

# ----- discrete Fourier transforms ---------------------------------------------------------

# The adjoint of a transform scaled by s is the opposite-direction transform scaled by s:
# the norm mode whose scale in the other direction is the same one
_ADJOINT_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


@derivative("fft_c2c", names=_FFT_NAMES)
def _(grad, _x, *, dims, norm, forward):
    return call("fft_c2c", (grad,), {"dims": dims, "norm": _ADJOINT_NORM[norm],
                                     "forward": not forward})


@derivative("fft_r2c", names=_FFT_NAMES)
def _(grad, _x, *, dims, norm, onesided):
    # the half spectrum is the full one cut short: pad it back with zeros, then adjoin
    if onesided:
        last = dims[-1]
        missing = _x.shape[last] - grad.shape[last]
        if missing:
            zeros = torcia.zeros(*grad.shape[:last], missing, *grad.shape[last + 1:],
                                 dtype=grad.dtype, device=grad.device)
            grad = torcia.cat([grad, zeros], last)
    full = call("fft_c2c", (grad,), {"dims": dims, "norm": _ADJOINT_NORM[norm],
                                     "forward": False})
    return full.real


@derivative("fft_c2r", names=_FFT_NAMES)
def _(grad, _x, *, dims, norm, last_dim_size):
    # as PyTorch: the one-sided transform of the gradient, its bins that stand for two
    # (conjugate) bins of the full spectrum doubled
    gx = call("fft_r2c", (grad,), {"dims": dims, "norm": _ADJOINT_NORM[norm],
                                   "onesided": True})
    last = dims[-1]
    double = last_dim_size - gx.shape[last]
    if double > 0:
        scale = torcia.ones(gx.shape[last], dtype=gx.real.dtype, device=gx.device)
        scale[1:1 + double] = 2
        gx = gx * scale.reshape((-1,) + (1,) * (gx.ndim - 1 - last))
    return gx
