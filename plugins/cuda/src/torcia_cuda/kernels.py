"""The kernels "cuda" has of its own.

The backend declares ``fallback="reference"`` (see :func:`torcia.library.fallback`): every
op without a kernel here runs core's reference kernel on CuPy, which works because the
reference kernels are written against the array module ``xp``. Only what NumPy and CuPy
spell differently needs a kernel of its own, and the few ops CuPy cannot run go to the
host (:data:`HOST_OPS`).
"""

from __future__ import annotations

import numpy as np

from torcia.library import host_fallback

#: ops CuPy cannot run, which run on the host: CuPy's ufuncs have no ``accumulate``
#: (cummax, cummin, logcumsumexp), its ``pinv`` no ``hermitian``, and cupyx's
#: ``polygamma`` fails on a Python integer order
HOST_OPS = ("cummax", "cummin", "logcumsumexp", "linalg_pinv", "polygamma")


def _view(xp):
    def view(a, shape):
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
        return xp.lib.stride_tricks.as_strided(a, shape, strides)

    return view


def cupy_kernels(xp) -> dict:
    """op -> kernel over array module ``xp`` (CuPy, or NumPy in the tests, where the
    reference runs every op).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia_cuda import cupy_kernels
    >>> cupy_kernels(np)["view"](np.arange(6.0), (2, 3)).shape
    (2, 3)
    """
    kernels = {"view": _view(xp)}
    if xp is not np:
        kernels.update({op: host_fallback(op, "cuda") for op in HOST_OPS})
    return kernels
