"""``torcia.fft``: discrete Fourier transforms, as ``torch.fft``.

Every transform takes the signal sizes (``n`` or ``s``: the input is zero-padded or cut to
them), the ``dim`` it runs over and a ``norm``: "backward" (the default: no scaling forward,
``1/n`` back), "ortho" (``1/sqrt(n)`` both ways) or "forward" (``1/n`` forward). Real inputs
of the complex transforms are made complex; integer inputs take the default float dtype;
float16 and bfloat16 are refused as on PyTorch's CPU. All are differentiable, complex
gradients following PyTorch's convention.

Examples
--------
>>> import torcia
>>> torcia.fft.fft(torcia.tensor([1.0, 0.0, 0.0, 0.0]))
tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
>>> torcia.fft.irfft(torcia.fft.rfft(torcia.tensor([1.0, 2.0, 3.0])), n=3)
tensor([1., 2., 3.])
"""

from __future__ import annotations

from torcia import _dtype as D
from torcia._ops.creation import arange
from torcia._ops.movement import roll
from torcia._ops.spectral import c2c as _c2c
from torcia._ops.spectral import c2r as _c2r
from torcia._ops.spectral import r2c as _r2c
from torcia._tensor import Tensor  # noqa: F401  (torch.fft.Tensor: PyTorch's module has the name)

# ----- one dim ------------------------------------------------------------------------------


def fft(input, n=None, dim=-1, norm=None):
    """The one-dimensional discrete Fourier transform along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.fft(torcia.tensor([1.0, 0.0, 0.0, 0.0]))
    tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    >>> torcia.fft.fft(torcia.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([4.+0.j, 0.+0.j, 0.+0.j, 0.+0.j])
    """
    return _c2c(input, None if n is None else [n], [dim], norm, True, "fft", False)


def ifft(input, n=None, dim=-1, norm=None):
    """The inverse of :func:`fft`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0, 3.0])
    >>> torcia.fft.ifft(torcia.fft.fft(x)).real
    tensor([1., 2., 3.])
    """
    return _c2c(input, None if n is None else [n], [dim], norm, False, "ifft", False)


def rfft(input, n=None, dim=-1, norm=None):
    """The transform of a real signal: its ``n // 2 + 1`` non-negative frequencies.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.rfft(torcia.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([4.+0.j, 0.+0.j, 0.+0.j])
    """
    return _r2c(input, None if n is None else [n], [dim], norm, "rfft", False)


def irfft(input, n=None, dim=-1, norm=None):
    """The inverse of :func:`rfft`: a real signal of length ``n`` (default
    ``2 * (input.size(dim) - 1)``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0, 3.0, 4.0])
    >>> torcia.fft.irfft(torcia.fft.rfft(x))
    tensor([1., 2., 3., 4.])
    """
    return _c2r(input, None if n is None else [n], [dim], norm, "irfft", False)


def hfft(input, n=None, dim=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its first half: real.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.hfft(torcia.tensor([1.0, 0.0, 0.0]))
    tensor([1., 1., 1., 1.])
    """
    return _c2r(input, None if n is None else [n], [dim], norm, "hfft", False, conj=True)


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of :func:`hfft`: the half spectrum of a real signal's inverse
    transform.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.ihfft(torcia.tensor([1.0, 1.0, 1.0, 1.0])).real
    tensor([1., 0., 0.])
    """
    return _r2c(input, None if n is None else [n], [dim], norm, "ihfft", False, conj=True)


# ----- two dims -----------------------------------------------------------------------------


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D transform over ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.fft2(torcia.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _c2c(input, s, dim, norm, True, "fft2", False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of :func:`fft2`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.fft.ifft2(torcia.fft.fft2(x)).real
    tensor([[1., 2.],
            [3., 4.]])
    """
    return _c2c(input, s, dim, norm, False, "ifft2", False)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D transform of a real signal, one-sided in the last of ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.rfft2(torcia.ones(2, 4)).shape
    torcia.Size([2, 3])
    """
    return _r2c(input, s, dim, norm, "rfft2", False)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of :func:`rfft2`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.fft.irfft2(torcia.fft.rfft2(x), s=(2, 2))
    tensor([[1., 2.],
            [3., 4.]])
    """
    return _c2r(input, s, dim, norm, "irfft2", False)


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D transform of a Hermitian-symmetric signal given by its half.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.hfft2(torcia.ones(2, 2, dtype=torcia.complex64)).shape
    torcia.Size([2, 2])
    """
    return _c2r(input, s, dim, norm, "hfft2", False, conj=True)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of :func:`hfft2`.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.ihfft2(torcia.ones(2, 4)).shape
    torcia.Size([2, 3])
    """
    return _r2c(input, s, dim, norm, "ihfft2", False, conj=True)


# ----- n dims -------------------------------------------------------------------------------


def fftn(input, s=None, dim=None, norm=None):
    """The N-D transform over ``dim`` (all dims, or the last ``len(s)``, by default).

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.fftn(torcia.ones(2, 2)).real
    tensor([[4., 0.],
            [0., 0.]])
    """
    return _c2c(input, s, dim, norm, True, "fftn", True)


def ifftn(input, s=None, dim=None, norm=None):
    """The inverse of :func:`fftn`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(8.0).reshape(2, 2, 2)
    >>> torcia.allclose(torcia.fft.ifftn(torcia.fft.fftn(x)).real, x)
    True
    """
    return _c2c(input, s, dim, norm, False, "ifftn", True)


def rfftn(input, s=None, dim=None, norm=None):
    """The N-D transform of a real signal, one-sided in the last of ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.rfftn(torcia.ones(2, 2, 4)).shape
    torcia.Size([2, 2, 3])
    """
    return _r2c(input, s, dim, norm, "rfftn", True)


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of :func:`rfftn`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(8.0).reshape(2, 4)
    >>> torcia.allclose(torcia.fft.irfftn(torcia.fft.rfftn(x), s=(2, 4)), x)
    True
    """
    return _c2r(input, s, dim, norm, "irfftn", True)


def hfftn(input, s=None, dim=None, norm=None):
    """The N-D transform of a Hermitian-symmetric signal given by its half.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.hfftn(torcia.ones(2, 2, 3, dtype=torcia.complex64)).shape
    torcia.Size([2, 2, 4])
    """
    return _c2r(input, s, dim, norm, "hfftn", True, conj=True)


def ihfftn(input, s=None, dim=None, norm=None):
    """The inverse of :func:`hfftn`.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.ihfftn(torcia.ones(2, 2, 4)).shape
    torcia.Size([2, 2, 3])
    """
    return _r2c(input, s, dim, norm, "ihfftn", True, conj=True)


# ----- frequencies and shifts ---------------------------------------------------------------


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of :func:`fft` for a signal of ``n`` samples spaced ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    k = arange(n, dtype=dtype or D.get_default_dtype(), device=device)
    k = roll(k - n // 2, -(n // 2) if n else 0) if n else k
    out = k / (d * n) if n else k
    return out.requires_grad_() if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    k = arange(n // 2 + 1, dtype=dtype or D.get_default_dtype(), device=device)
    out = k / (d * n)
    return out.requires_grad_() if requires_grad else out


def _shift_dims(input, dim):
    if dim is None:
        return list(range(input.ndim))
    return [dim] if isinstance(dim, int) else list(dim)


def fftshift(input, dim=None):
    """Move the zero frequency to the middle of ``dim`` (all dims by default).

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.fftshift(torcia.fft.fftfreq(4))
    tensor([-0.5000, -0.2500,  0.0000,  0.2500])
    """
    dims = _shift_dims(input, dim)
    return roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift`.

    Examples
    --------
    >>> import torcia
    >>> torcia.fft.ifftshift(torcia.fft.fftshift(torcia.arange(5)))
    tensor([0, 1, 2, 3, 4])
    """
    dims = _shift_dims(input, dim)
    return roll(input, [-(input.shape[d] // 2) for d in dims], dims)


__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
           "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
