"""The transforms of :mod:`torcia.fft` as the families call them (``stft`` and ``istft`` in
``spectral``): argument checks, the signal sizes, and the call of the ``fft_c2c``,
``fft_r2c`` and ``fft_c2r`` ops. :mod:`torcia.fft`, a module of the layer above the ops,
publishes the transforms built on these."""

from __future__ import annotations

from torcia import _dtype as D
from torcia._creation import zeros
from torcia._oplib.views import cat
from torcia._tensor import Tensor, _torch_name, _wrap_dim, call

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _norm(norm):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f'Invalid normalization mode: "{norm}"')
    return norm


def _prepare(x, name, want_complex):
    if not isinstance(x, Tensor):
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
        dims = [_wrap_dim(d, x.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
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
            x = cat([x, zeros(*shape, dtype=x.dtype, device=x.device)], d)
    return x


def _c2c(x, s, dim, norm, forward, name, default_all):
    x = _prepare(x, name, True)
    dims, sizes = _dims_sizes(x, s, dim, default_all, name)
    x = _resize(x, dims, sizes)
    return call("fft_c2c", (x,), {"dims": tuple(dims), "norm": _norm(norm),
                                  "forward": forward})


def _r2c(x, s, dim, norm, name, default_all, conj=False):
    if isinstance(x, Tensor) and x.is_complex():
        raise RuntimeError(f"{name} expects a real input tensor, but got "
                           f"{_torch_name(x.dtype)}")
    x = _prepare(x, name, False)
    dims, sizes = _dims_sizes(x, s, dim, default_all, name)
    x = _resize(x, dims, sizes)
    out = call("fft_r2c", (x,), {"dims": tuple(dims), "norm": _norm(norm) if not conj
                                 else _SWAP[_norm(norm)], "onesided": True})
    return out.conj() if conj else out


def _c2r(x, s, dim, norm, name, default_all, conj=False):
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
    return call("fft_c2r", (x,), {"dims": tuple(dims), "norm": _norm(norm) if not conj
                                  else _SWAP[_norm(norm)], "last_dim_size": last})
