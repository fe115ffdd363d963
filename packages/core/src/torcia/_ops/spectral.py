"""The discrete Fourier transforms, each declared once: schema, reference kernel (on
``xp.fft``, NumPy's or CuPy's), meta shape, decomposition. Three ops, as PyTorch's
primitives: complex-to-complex (``forward=`` the direction), real-to-complex
(``onesided=``) and complex-to-real of a one-sided spectrum (``last_dim_size=`` the real
signal's length), each over ``dims=`` with a normalization mode ``norm=`` ("backward",
"ortho", "forward"). The public functions of :mod:`torcia.fft` resize the input first, so
the kernels transform the sizes they are given (``last_dim_size`` aside). The real
transforms decompose into the complex one; the derivatives are torcia-autograd's.

The ops' calls follow (``c2c``, ``r2c``, ``c2r``: argument checks, the signal sizes, the
input resized to them), which the transforms of :mod:`torcia.fft` make, and at the end of
this module the public functions built on them: the window functions (``hann_window``...)
and ``stft``/``istft``, which :mod:`torcia._oplib` registers as a family.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import torch_type_name as _torch_name
from torcia._opdef import define
from torcia._ops._common import first_shape, op, real_dtype, wrap_dim
from torcia._ops._common import with_size as _with
from torcia._ops.complex_numbers import view_as_real
from torcia._ops.movement import pad

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


# ----- windows and the short-time Fourier transform (torcia.hann_window, torcia.stft...) ----


def _window(name, window_length, periodic, dtype, device, requires_grad, values):
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    d = D.dtype_arg(dtype) if dtype is not None else D.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d}")
    if window_length <= 1:
        w = np.ones(window_length)
    else:
        n = window_length + 1 if periodic else window_length
        w = values(np.arange(n, dtype=np.float64), n, np.dtype(d.name))[:window_length]
    out = _opdef.PUBLIC.tensor(w, dtype=d, device=device)
    return out.requires_grad_() if requires_grad else out


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    """The Hann window ``0.5 - 0.5 cos(2 pi k / (N - 1))`` (``N = window_length + 1`` when
    ``periodic``, for spectral analysis).

    Examples
    --------
    >>> import torcia
    >>> torcia.hann_window(4)
    tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n, dt: _hamming(k, n, dt, 0.5, 0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    """The Hamming window ``alpha - beta cos(2 pi k / (N - 1))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.hamming_window(3, periodic=False)
    tensor([0.0800, 1.0000, 0.0800])
    """
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n, dt: _hamming(k, n, dt, alpha, beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The Blackman window ``0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))``.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.blackman_window(5, periodic=False)
    >>> w[2], w.shape
    (tensor(1.), torcia.Size([5]))
    """
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _blackman)


def _rounding(dt):
    """The windows are computed as PyTorch does: its sequence of ops in the window's dtype,
    each result rounded to it (a half precision one computed in float32), its scalars too.
    So the values, and the ends' rounding residues, are its own (blackman's float16 ends
    are +0 where 0.42 - 0.5 + 0.08 in float64 is -1.4e-17, -0 once rounded). Returns
    ``r``, which rounds an array as PyTorch's op would, and ``s``, which does so to a
    scalar."""
    op = np.float32 if dt.itemsize == 2 else dt.type

    def r(x):
        return np.asarray(x, op).astype(dt).astype(op)

    def s(x):
        return op(dt.type(x))

    return r, s


def _cos(x):
    # float32 through float64: rounded once, it agrees with PyTorch's vectorised cos more
    # often than NumPy's float32 cos does (both within an ulp)
    return np.cos(x.astype(np.float64)).astype(x.dtype)


def _hamming(k, n, dt, alpha, beta):
    r, s = _rounding(dt)
    c = r(_cos(r(k * s(2 * math.pi / (n - 1)))))
    return r(r(c * s(-beta)) + s(alpha)).astype(dt)


def _blackman(k, n, dt):
    r, s = _rounding(dt)
    x = r(k * s(math.pi / (n - 1)))
    c4, c2 = r(_cos(r(x * s(4)))), r(_cos(r(x * s(2))))
    return r(r(r(c4 * s(0.08)) - r(c2 * s(0.5))) + s(0.42)).astype(dt)


def _bartlett(k, n, dt):
    # the rising half 2k / (N - 1), the falling one 2 - 2k / (N - 1) from that same value
    r, s = _rounding(dt)
    x = r(k * s(2 / (n - 1)))
    half = ((n - 1) >> 1) + 1
    x[half:] = r(r(x[half:] * s(-1)) + s(2))
    return x.astype(dt)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The triangular Bartlett window ``1 - |2 k / (N - 1) - 1|``.

    Examples
    --------
    >>> import torcia
    >>> torcia.bartlett_window(5, periodic=False)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   _bartlett)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - (2 k / (N - 1) - 1)^2)) / I0(beta)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.kaiser_window(3, periodic=False, beta=0.0)
    tensor([1., 1., 1.])
    """
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n, _: np.i0(beta * np.sqrt(np.clip(
                       1 - (2 * k / (n - 1) - 1) ** 2, 0, None))) / np.i0(beta))


def _padded_window(window, win_length, n_fft, like):
    """The window (ones by default), zero-padded on both sides to ``n_fft``."""
    public = _opdef.PUBLIC
    if window is None:
        window = public.ones(win_length, dtype=like.dtype.to_real(), device=like.device)
    if window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length="
                           f"{win_length}, but got window with size {list(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = public.cat([public.zeros(left, dtype=window.dtype, device=window.device),
                             window, public.zeros(n_fft - win_length - left,
                                                  dtype=window.dtype, device=window.device)])
    return window


def _stft_sizes(n_fft, hop_length, win_length, name):
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if n_fft <= 0:
        raise RuntimeError(f"{name}: expected 0 < n_fft, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{name}: expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(f"{name}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win}")
    return hop, win


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """The short-time Fourier transform: the FFT of windowed frames of ``input`` (1-D, or
    2-D with a batch dim), as ``(*, n_fft // 2 + 1 or n_fft, n_frames)`` complex values.

    Examples
    --------
    >>> import torcia
    >>> spec = torcia.stft(torcia.ones(16), 8, hop_length=2, window=torcia.hann_window(8),
    ...                    return_complex=True)
    >>> spec.shape
    torcia.Size([5, 9])
    """
    if return_complex is None:
        if not input.is_complex() and (window is None or not window.is_complex()):
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True in "
                               "a future PyTorch release.")
        return_complex = True
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D tensor")
    hop, win = _stft_sizes(n_fft, hop_length, win_length, "stft")
    batched = input.ndim == 2
    x = input if batched else input.unsqueeze(0)
    if center:
        half = n_fft // 2
        x = pad(x.unsqueeze(1), (half, half), mode=pad_mode).squeeze(1)
    if x.shape[-1] < n_fft:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got "
                           f"n_fft={n_fft}")
    w = _padded_window(window, win, n_fft, x)
    frames = x.unfold(-1, n_fft, hop) * w  # (B, n_frames, n_fft)
    one = (not x.is_complex() and not w.is_complex()) if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    spec = (r2c(frames, None, [-1], norm, "rfft", False) if one
            else c2c(frames, None, [-1], norm, True, "fft", False))
    spec = spec.transpose(-2, -1)
    if not batched:
        spec = spec.squeeze(0)
    if not return_complex:
        return view_as_real(spec.contiguous())
    return spec


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of :func:`stft` by windowed overlap-add: ``input`` is
    ``(*, freq, n_frames)`` complex.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.randn(64)
    >>> w = torcia.hann_window(16)
    >>> spec = torcia.stft(x, 16, hop_length=4, window=w, return_complex=True)
    >>> torcia.allclose(torcia.istft(spec, 16, hop_length=4, window=w, length=64), x,
    ...                 atol=1e-5)
    True
    """
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                           f"values, but got {input.ndim}D")
    hop, win = _stft_sizes(n_fft, hop_length, win_length, "istft")
    batched = input.ndim == 3
    spec = input if batched else input.unsqueeze(0)
    one = (spec.shape[-2] != n_fft) if onesided is None else onesided
    expected = n_fft // 2 + 1 if one else n_fft
    if spec.shape[-2] != expected:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft / 2 + 1 when onesided=True, but got "
                           f"{spec.shape[-2]}")
    norm = "ortho" if normalized else "backward"
    cols = spec.transpose(-2, -1)  # (B, n_frames, freq)
    frames = (c2r(cols, [n_fft], [-1], norm, "irfft", False) if one and not return_complex
              else c2c(cols, [n_fft], [-1], norm, False, "ifft", False))
    if not return_complex and frames.is_complex():
        frames = frames.real
    w = _padded_window(window, win, n_fft, frames if not frames.is_complex() else
                       frames.real)
    frames = frames * w
    n_frames = frames.shape[-2]
    total = n_fft + hop * (n_frames - 1)
    public = _opdef.PUBLIC
    positions = (public.arange(n_frames, device=frames.device) * hop).unsqueeze(-1) + \
        public.arange(n_fft, device=frames.device)
    flat = positions.reshape(-1)
    y = public.zeros(frames.shape[0], total, dtype=frames.dtype, device=frames.device).index_add(
        -1, flat, frames.reshape(frames.shape[0], -1))
    envelope = public.zeros(total, dtype=w.dtype, device=w.device).index_add(
        0, flat, (w * w).expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + length
    y, envelope = y[..., start:min(end, total)], envelope[start:min(end, total)]
    if bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: 1e-11")
    y = y / envelope
    if length is not None and y.shape[-1] < length:
        y = public.cat([y, public.zeros(y.shape[0], length - y.shape[-1], dtype=y.dtype,
                                        device=y.device)], -1)
    return y if batched else y.squeeze(0)


#: the functions here that are also Tensor methods, under the same name
METHODS = (
    "stft", "istft",
)

#: the names ``torcia`` exports from here
__all__ = [
    "bartlett_window", "blackman_window", "hamming_window", "hann_window", "istft",
    "kaiser_window", "stft",
]
