"""Window functions, as ``torch.signal.windows`` (SciPy's names and conventions).

Each takes the window length ``M`` and, keyword-only, ``sym`` (True: a symmetric window for
filter design; False: the periodic window of length ``M + 1`` without its last point, for
spectral analysis), ``dtype`` (a floating dtype; the default dtype when None), ``layout``,
``device`` and ``requires_grad``. The values are computed on the host in float64 and cast,
as the ``torcia.*_window`` functions are.

Examples
--------
>>> import torcia
>>> from torcia.signal import windows
>>> windows.hann(5)
tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
>>> windows.hann(4, sym=False)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia._creation import _dtype_arg, tensor
from torcia._oplib.runtime import strided
from torcia._tensor import canonical_device

__all__ = [
    "bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
    "general_hamming", "hamming", "hann", "kaiser", "nuttall",
]


def _make(name, M, sym, dtype, device, requires_grad, layout, values, one_is_peak=True):
    """``values(k, N)`` at ``k = 0 .. M - 1`` for a symmetric window of ``N`` points
    (``N = M + 1`` for a periodic one), after PyTorch's checks of the arguments; a window
    of one point is ``[1.]`` when ``one_is_peak``."""
    if not isinstance(M, int) or isinstance(M, bool):
        raise TypeError(f"{name}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and layout != strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    d = D.get_default_dtype() if dtype is None else _dtype_arg(dtype)
    if d not in (D.float32, D.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {d}")
    n = M + 1 if not sym and M > 1 else M
    if M <= 1 and one_is_peak:
        w = np.ones(M)
    elif getattr(values, "in_dtype", False):
        w = values(np.arange(M, dtype=np.float64), n, np.dtype(d.name))
    else:
        w = values(np.arange(M, dtype=np.float64), n)
    out = tensor(w, dtype=d, device=canonical_device(device))
    return out.requires_grad_() if requires_grad else out


def _cosine_sum(a):
    """``sum_i (-1)^i a_i cos(2 pi i k / (N - 1))``, computed as PyTorch does, in the
    window's dtype (so a float32 window's zeros are PyTorch's rounding residues too)."""
    def values(k, n, dt):
        m = len(k)
        step = dt.type(2 * math.pi / (n - 1))
        at = np.arange(m, dtype=dt)
        half = m // 2
        end = dt.type((m - 1) * (2 * math.pi / (n - 1)))
        # linspace's two halves: from the start up, from the end down
        kk = np.where(at < half, at * step, end - step * (m - 1 - at)).astype(dt)
        coef = np.array([(-1) ** i * c for i, c in enumerate(a)], dtype=dt)
        terms = coef[:, None] * np.cos(np.arange(len(a), dtype=dt)[:, None] * kk)
        total = terms[0]
        for row in terms[1:]:
            total = total + row
        return total
    values.in_dtype = True
    return values


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):
    r"""The generalised cosine window :math:`w_k = \sum_i (-1)^i a_i \cos(2\pi i k/(M-1))`.

    Parameters
    ----------
    M : int
        The window length.
    a : sequence of float
        The coefficients :math:`a_i`.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.general_cosine(3, a=[0.5, 0.5])
    tensor([0., 1., 0.])
    """
    if not isinstance(a, (list, tuple)) or not a:
        raise ValueError("Coefficients cannot be empty" if isinstance(a, (list, tuple)) else
                         f"Coefficients must be a list or tuple, got {type(a).__name__}")
    return _make("general_cosine", M, sym, dtype, device, requires_grad, layout,
                 _cosine_sum([float(c) for c in a]))


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    r"""The generalised Hamming window :math:`\alpha - (1 - \alpha)\cos(2\pi k/(M-1))`.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.general_hamming(3, alpha=0.5)
    tensor([0., 1., 0.])
    """
    return _make("general_hamming", M, sym, dtype, device, requires_grad, layout,
                 _cosine_sum([alpha, 1.0 - alpha]))


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window, :func:`general_hamming` with ``alpha=0.54``.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.hamming(3)
    tensor([0.0800, 1.0000, 0.0800])
    """
    return _make("hamming", M, sym, dtype, device, requires_grad, layout,
                 _cosine_sum([0.54, 1.0 - 0.54]))


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window, :func:`general_hamming` with ``alpha=0.5``.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.hann(3)
    tensor([0., 1., 0.])
    """
    return _make("hann", M, sym, dtype, device, requires_grad, layout, _cosine_sum([0.5, 0.5]))


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window, :func:`general_cosine` with ``a=[0.42, 0.5, 0.08]``.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.blackman(3)
    tensor([-1.4901e-08,  1.0000e+00, -1.4901e-08])
    """
    return _make("blackman", M, sym, dtype, device, requires_grad, layout,
                 _cosine_sum([0.42, 0.5, 0.08]))


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall (1981).

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.nuttall(3)
    tensor([3.6280e-04, 1.0000e+00, 3.6280e-04])
    """
    return _make("nuttall", M, sym, dtype, device, requires_grad, layout,
                 _cosine_sum([0.3635819, 0.4891775, 0.1365995, 0.0106411]))


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular Bartlett window ``1 - |2k / (M - 1) - 1|``.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.bartlett(5)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    return _make("bartlett", M, sym, dtype, device, requires_grad, layout,
                 lambda k, n: 1 - np.abs(2 * k / (n - 1) - 1))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The cosine (sine) window ``sin(pi (k + 0.5) / M)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.cosine(3)
    tensor([0.5000, 1.0000, 0.5000])
    """
    return _make("cosine", M, sym, dtype, device, requires_grad, layout,
                 lambda k, n: np.sin(math.pi * (k + 0.5) / n))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - (2k / (M - 1) - 1)^2)) / I0(beta)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.kaiser(3, beta=0.0)
    tensor([1., 1., 1.])
    """
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    return _make("kaiser", M, sym, dtype, device, requires_grad, layout,
                 lambda k, n: np.i0(beta * np.sqrt(np.clip(
                     1 - (2 * k / (n - 1) - 1) ** 2, 0, None))) / np.i0(beta))


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False):
    """The Gaussian window ``exp(-((k - (M - 1) / 2) / std)^2 / 2)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.gaussian(3, std=1.0)
    tensor([0.6065, 1.0000, 0.6065])
    """
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    return _make("gaussian", M, sym, dtype, device, requires_grad, layout,
                 lambda k, n: np.exp(-0.5 * ((k - (n - 1) / 2) / std) ** 2))


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """The exponential (Poisson) window ``exp(-|k - center| / tau)``; ``center`` defaults
    to the middle, and may be given only for non-symmetric windows.

    Examples
    --------
    >>> import torcia
    >>> torcia.signal.windows.exponential(3, tau=1.0)
    tensor([0.3679, 1.0000, 0.3679])
    """
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")

    def values(k, n):
        c = (n - 1) / 2 if center is None else center
        return np.exp(-np.abs(k - c) / tau)
    # a given center leaves the one point of M = 1 that far from the peak
    return _make("exponential", M, sym, dtype, device, requires_grad, layout, values,
                 one_is_peak=center is None)
