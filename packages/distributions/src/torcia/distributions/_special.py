"""Special functions and samplers the distributions need beyond torcia's core ops.

The regularized incomplete gamma function (Gamma and Chi2 ``cdf``) and the implicit
reparameterisation gradient of Gamma samples are computed here in NumPy float64 and wrapped
in :class:`torcia.autograd.Function` objects, so that they stay differentiable where PyTorch's
are. Samplers that torcia's core lacks (gamma, Poisson, binomial, von Mises) draw from the
NumPy stream of torcia's default generator, so ``torcia.manual_seed`` makes them reproducible.
"""

from __future__ import annotations

import math

import numpy as np

import torcia
from torcia.autograd import Function

_MAX_ITER = 400


def rng():
    """The NumPy stream of torcia's default generator (seeded by ``torcia.manual_seed``)."""
    return torcia.default_generator.rng


def from_numpy(array, like):
    """``array`` as a tensor with ``like``'s dtype and device."""
    return torcia.tensor(np.asarray(array), dtype=like.dtype, device=like.device)


def _np(t):
    return t.detach().cpu().numpy().astype(np.float64)


# ---------------------------------------------------------------------------------------
# Regularized lower incomplete gamma P(a, x)
# ---------------------------------------------------------------------------------------


def _gammainc_np(a, x):
    """P(a, x) for a > 0, x >= 0, elementwise in float64: the power series below a + 1 and
    Legendre's continued fraction (modified Lentz) above, as in Numerical Recipes."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.zeros(a.shape)
    # both expansions need O(sqrt(a)) terms where x is near a
    finite = a[np.isfinite(a)]
    max_iter = _MAX_ITER + int(10 * np.sqrt(finite.max())) if finite.size else _MAX_ITER
    with np.errstate(all="ignore"):
        log_prefix = a * np.log(x) - x - _lgamma_np(a)
        series = (x < a + 1) & (x > 0)
        if series.any():
            aa, xx = a[series], x[series]
            term = 1.0 / aa
            total = term.copy()
            ap = aa.copy()
            for _ in range(max_iter):
                ap = ap + 1
                term = term * xx / ap
                total = total + term
                if np.all(np.abs(term) < np.abs(total) * 1e-16):
                    break
            out[series] = total * np.exp(log_prefix[series])
        frac = x >= a + 1
        if frac.any():
            aa, xx = a[frac], x[frac]
            tiny = 1e-300
            b = xx + 1 - aa
            c = np.full(aa.shape, 1 / tiny)
            d = 1 / b
            h = d.copy()
            for i in range(1, max_iter):
                an = -i * (i - aa)
                b = b + 2
                d = an * d + b
                d = np.where(np.abs(d) < tiny, tiny, d)
                c = b + an / c
                c = np.where(np.abs(c) < tiny, tiny, c)
                d = 1 / d
                delta = d * c
                h = h * delta
                if np.all(np.abs(delta - 1) < 1e-16):
                    break
            out[frac] = 1 - np.exp(log_prefix[frac]) * h
        out = np.where(np.isinf(x), 1.0, out)
        out = np.where(np.isnan(a) | np.isnan(x), np.nan, out)
    return out


def _lgamma_np(a):
    return np.vectorize(math.lgamma, otypes=[np.float64])(a) if np.size(a) else np.zeros(
        np.shape(a))


def _dgammainc_da_np(a, x):
    """dP(a, x)/da by central differences (step relative to a; P is smooth in a)."""
    h = 1e-5 * np.maximum(a, 1e-3)
    return (_gammainc_np(a + h, x) - _gammainc_np(a - h, x)) / (2 * h)


def _gamma_log_pdf_np(a, x):
    with np.errstate(all="ignore"):
        return (a - 1) * np.log(x) - x - _lgamma_np(a)


class _GammaInc(Function):
    @staticmethod
    def forward(ctx, a, x):
        ctx.save_for_backward(a, x)
        return from_numpy(_gammainc_np(_np(a), _np(x)), x)

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.saved_tensors
        an, xn = np.broadcast_arrays(_np(a), _np(x))
        grad_a = grad_x = None
        if ctx.needs_input_grad[0]:
            grad_a = grad * from_numpy(_dgammainc_da_np(an, xn), a)
        if ctx.needs_input_grad[1]:
            grad_x = grad * from_numpy(np.exp(_gamma_log_pdf_np(an, xn)), x)
        return _unbroadcast(grad_a, a), _unbroadcast(grad_x, x)


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x), differentiable in both.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions._special import gammainc
    >>> round(gammainc(torcia.tensor(1.0), torcia.tensor(1.0)).item(), 6)
    0.632121
    """
    return _GammaInc.apply(a, x)


def _unbroadcast(grad, like):
    if grad is None:
        return None
    while grad.dim() > like.dim():
        grad = grad.sum(0)
    for i, n in enumerate(like.shape):
        if n == 1 and grad.shape[i] != 1:
            grad = grad.sum(i, keepdim=True)
    return grad


# ---------------------------------------------------------------------------------------
# Gamma samples with implicit reparameterisation gradients
# ---------------------------------------------------------------------------------------


def standard_gamma_grad(x, alpha):
    """dx/dalpha of a standard gamma sample x with concentration alpha, by implicit
    differentiation of its CDF: -(dP/dalpha) / p(x) (Figurnov et al., 2018)."""
    xn, an = _np(x), _np(alpha)
    with np.errstate(all="ignore"):
        grad = -_dgammainc_da_np(an, xn) / np.exp(_gamma_log_pdf_np(an, xn))
    return from_numpy(np.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0), x)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx, alpha):
        tiny = np.finfo(alpha.dtype.to_numpy()).tiny
        sample = rng().standard_gamma(_np(alpha))
        x = from_numpy(np.maximum(sample, tiny), alpha)
        ctx.save_for_backward(x, alpha)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, alpha = ctx.saved_tensors
        return grad * standard_gamma_grad(x, alpha)


def standard_gamma(alpha):
    """Gamma(alpha, 1) samples of ``alpha``'s shape, with pathwise gradients to alpha."""
    return _StandardGamma.apply(alpha)


# ---------------------------------------------------------------------------------------
# Other samplers
# ---------------------------------------------------------------------------------------


def poisson(rate):
    """Poisson samples of ``rate``'s shape (no gradient)."""
    return from_numpy(rng().poisson(_np(rate)).astype(np.float64), rate)


def binomial(count, prob):
    """Binomial samples: ``count`` trials of probability ``prob`` (no gradient)."""
    n = np.round(_np(count)).astype(np.int64)
    return from_numpy(rng().binomial(n, np.clip(_np(prob), 0, 1)).astype(np.float64), prob)


def von_mises(loc, concentration):
    """von Mises samples in [-pi, pi) (no gradient)."""
    sample = rng().vonmises(_np(loc), _np(concentration))
    return from_numpy(sample, loc)


# ---------------------------------------------------------------------------------------
# Differentiable special functions written with torcia ops
# ---------------------------------------------------------------------------------------


def mvlgamma(x, p: int):
    """The multivariate log-gamma function of dimension ``p``, as ``torch.mvlgamma``."""
    j = torcia.arange(p, dtype=x.dtype, device=x.device)
    return (x.unsqueeze(-1) - j / 2).lgamma().sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def mvdigamma(x, p: int):
    """The derivative of :func:`mvlgamma` in ``x``: sum of digamma(x - j/2), j < p."""
    j = torcia.arange(p, dtype=x.dtype, device=x.device)
    return (x.unsqueeze(-1) - j / 2).digamma().sum(-1)


# the coefficients of PyTorch's (and Cephes') polynomial approximations of log I0 and log I1
_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2]
_I0_COEF_LARGE = [0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2,
                  -0.2057706e-1, 0.2635537e-1, -0.1647633e-1, 0.392377e-2]
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2,
                  0.32411e-3]
_I1_COEF_LARGE = [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1,
                  0.2282967e-1, -0.2895312e-1, 0.1787654e-1, -0.420059e-2]
_COEF_SMALL = [_I0_COEF_SMALL, _I1_COEF_SMALL]
_COEF_LARGE = [_I0_COEF_LARGE, _I1_COEF_LARGE]


def _eval_poly(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def log_modified_bessel_fn(x, order: int = 0):
    """log(I_order(x)) for x > 0 and order 0 or 1 (the von Mises normaliser)."""
    assert order in (0, 1)
    y = x / 3.75
    y = y * y
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    y = 3.75 / x
    large = x - 0.5 * x.log() + _eval_poly(y, _COEF_LARGE[order]).log()
    return torcia.where(x < 3.75, small, large)
