"""The discrete Fourier transforms, each declared once: schema, reference kernel (on
``xp.fft``, NumPy's or CuPy's), meta shape, decomposition. Three ops, as PyTorch's
primitives: complex-to-complex (``forward=`` the direction), real-to-complex
(``onesided=``) and complex-to-real of a one-sided spectrum (``last_dim_size=`` the real
signal's length), each over ``dims=`` with a normalization mode ``norm=`` ("backward",
"ortho", "forward"). The public functions of :mod:`torcia.fft` resize the input first, so
the kernels transform the sizes they are given (``last_dim_size`` aside). The real
transforms decompose into the complex one; the derivatives are torcia-autograd's.

The ops' calls are at the end of this module (``c2c``, ``r2c``, ``c2r``: argument checks,
the signal sizes, the input resized to them), which the transforms of :mod:`torcia.fft`
and ``stft``/``istft`` (:mod:`torcia._oplib.spectral`) make.
"""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import torch_type_name as _torch_name
from torcia._opdef import define
from torcia._ops._common import first_shape, op, real_dtype, wrap_dim
from torcia._ops._common import with_size as _with

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

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


# ----- meta shapes -----------------------------------------------------------------------


def _r2c_shape(x, dims=(-1,), norm="backward", onesided=True, **params):
    shape = _with(x.shape, dims[-1], x.shape[dims[-1]] // 2 + 1) if onesided else x.shape
    return shape, np.result_type(x.dtype, np.complex64)


def _c2r_shape(x, dims=(-1,), norm="backward", last_dim_size=1, **params):
    return _with(x.shape, dims[-1], last_dim_size), real_dtype(x.dtype)


# ----- decompositions: the real transforms through the complex one -----------------------


def fft_r2c(a, dims=(-1,), norm="backward", onesided=True):
    full = op("fft_c2c", a.to(D.complex128 if a.dtype == D.float64 else D.complex64),
              dims=dims, norm=norm, forward=True)
    if not onesided:
        return full
    last = dims[-1] % a.ndim
    return full.narrow(last, 0, a.shape[last] // 2 + 1).clone()


def fft_c2r(a, dims=(-1,), norm="backward", last_dim_size=1):
    # as NumPy's irfftn: the inverse over the other dims, then the last dim's Hermitian
    # spectrum completed (its first n // 2 + 1 terms, zero-padded or cut; the rest their
    # conjugates mirrored) and inverted, its real part kept
    last, n = dims[-1] % a.ndim, last_dim_size
    if len(dims) > 1:
        a = op("fft_c2c", a, dims=tuple(dims[:-1]), norm=norm, forward=False)
    half = n // 2 + 1
    if a.shape[last] >= half:
        a = a.narrow(last, 0, half)
    else:
        a = op("cat", a, a.new_zeros(_with(a.shape, last, half - a.shape[last])), dim=last)
    mirror = a.new_tensor(np.arange(n - half, 0, -1), dtype=D.int64)
    full = op("cat", a, a.index_select(last, mirror).conj(), dim=last)
    out = op("fft_c2c", full, dims=(last,), norm=norm, forward=False)
    return out.real.contiguous()


# ----- the declarations ------------------------------------------------------------------

_NORM = 'int[] dims=(-1,), str norm="backward"'

DECLARED = (
    define(f"fft_c2c(Tensor x, *, {_NORM}, bool forward=True) -> Tensor", Kernels.fft_c2c,
           shape=first_shape, group="fft"),
    define(f"fft_r2c(Tensor x, *, {_NORM}, bool onesided=True) -> Tensor", Kernels.fft_r2c,
           shape=_r2c_shape, decomposition=fft_r2c, floating_inputs=True, group="fft"),
    define(f"fft_c2r(Tensor x, *, {_NORM}, int last_dim_size=1) -> Tensor", Kernels.fft_c2r,
           shape=_c2r_shape, decomposition=fft_c2r, group="fft"),
)


# ----- the ops' calls, as torcia.fft and stft/istft make them ----------------------------

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _norm(norm):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f'Invalid normalization mode: "{norm}"')
    return norm


def _prepare(x, name, want_complex):
    if not isinstance(x, _opdef.PUBLIC.Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    if x.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"Unsupported dtype {_torch_name(x.dtype)}")
    if x.dtype.category < 2:
        x = x.to(D.get_default_dtype())
    if want_complex and not x.is_complex():
        x = x.to(x.dtype.to_complex())
    return x


def _dims_sizes(x, s, dim, default_all, name):
    """The dims transformed (non-negative) and the signal size along each (None: as is)."""
    if dim is None:
        if s is not None:
            dims = list(range(x.ndim - len(s), x.ndim))
        else:
            dims = list(range(x.ndim)) if default_all else [x.ndim - 1]
    else:
        dims = [wrap_dim(d, x.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"fft_{name} dims must be unique")
    if s is not None:
        s = [s] if isinstance(s, int) else list(s)
        if len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same "
                               "length")
        sizes = [None if n == -1 else n for n in s]
    else:
        sizes = [None] * len(dims)
    for n in sizes:
        if n is not None and n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return dims, sizes


def _resize(x, dims, sizes):
    """Zero-pad or cut ``x`` to ``sizes`` along ``dims`` (differentiably)."""
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if n is None or n == have:
            continue
        if n < have:
            x = x.narrow(d, 0, n)
        else:
            shape = list(x.shape)
            shape[d] = n - have
            pad = _opdef.PUBLIC.zeros(*shape, dtype=x.dtype, device=x.device)
            x = _opdef.PUBLIC.cat([x, pad], d)
    return x


def c2c(x, s, dim, norm, forward, name, default_all):
    x = _prepare(x, name, True)
    dims, sizes = _dims_sizes(x, s, dim, default_all, name)
    x = _resize(x, dims, sizes)
    return _opdef.CALL("fft_c2c", (x,), {"dims": tuple(dims), "norm": _norm(norm),
                                         "forward": forward})


def r2c(x, s, dim, norm, name, default_all, conj=False):
    if isinstance(x, _opdef.PUBLIC.Tensor) and x.is_complex():
        raise RuntimeError(f"{name} expects a real input tensor, but got "
                           f"{_torch_name(x.dtype)}")
    x = _prepare(x, name, False)
    dims, sizes = _dims_sizes(x, s, dim, default_all, name)
    x = _resize(x, dims, sizes)
    out = _opdef.CALL("fft_r2c", (x,), {"dims": tuple(dims), "norm": _norm(norm) if not conj
                                        else _SWAP[_norm(norm)], "onesided": True})
    return out.conj() if conj else out


def c2r(x, s, dim, norm, name, default_all, conj=False):
    x = _prepare(x, name, True)
    dims, sizes = _dims_sizes(x, s, dim, default_all, name)
    last = sizes[-1]
    if last is None:
        last = 2 * (x.shape[dims[-1]] - 1)
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    x = _resize(x, dims, sizes[:-1] + [last // 2 + 1])
    if conj:
        x = x.conj()
    return _opdef.CALL("fft_c2r", (x,), {"dims": tuple(dims), "norm": _norm(norm) if not conj
                                         else _SWAP[_norm(norm)], "last_dim_size": last})
