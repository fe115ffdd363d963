"""Decompositions of the special functions (``torcia.special``) into other ops.

The orthogonal polynomials are the reference kernels' three-term recurrences, step for step.
The functions the reference computes with SciPy are written with the ones they are defined
by (``i0`` with ``i0e``, ``ndtr`` with ``erf`` and ``erfc``), as SciPy's own code writes
them; like SciPy, which computes float32 in float64, they compute below float64 in float64
and round once (in float32 the rounding of ``x / sqrt(2)`` alone would cost ``ndtr`` digits
in its tails). What a decomposition is: :mod:`torcia._decompositions`.
"""

from __future__ import annotations

import functools
import math

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _oplib
from torcia._decompositions import _in_float32, _one, _scalar, _zero
from torcia._tensor import DECOMPOSITIONS, Tensor, call


def _in_float64(fn):
    """``fn`` computed in float64 for float32 and half-precision tensors, rounded once."""
    @functools.wraps(fn)
    def run(a):
        if a.dtype in (D.float32, D.float16, D.bfloat16):
            return fn(a.double()).to(a.dtype)
        return fn(a)

    return run


def _op(name, a):
    return call(name, (a,), {})


# ----- orthogonal polynomials: p_{k+1} = step(k, x, p_k, p_{k-1}), 0 where n < 0 ----------


def _recurrence(x, n, p1, step):
    """p_n(x) from p_0 = 1 and p_1(x) (``n`` truncated to an integer); half precision in
    float32, rounded once. Not differentiable, as PyTorch's."""
    if not isinstance(n, Tensor):
        n = C.full((), n, dtype=x.dtype, device=x.device)
    x, n = x.detach(), n.detach()
    wide_x, wide_n = _in_float32(x, n)
    wide_n = wide_n.trunc()
    shape = _oplib.broadcast_shapes(wide_x.shape, wide_n.shape)
    wide_x, wide_n = wide_x.expand(shape), wide_n.expand(shape)
    out = _oplib.where(wide_n == 0, _one(wide_x), _zero(wide_x))
    # the number of steps is the largest degree asked for: a host decision, as the
    # reference kernel's (whose error a NaN or infinite degree raises too)
    top = int(wide_n.amax()) if wide_n.numel() else 0
    if top >= 1:
        prev, cur = _one(wide_x), p1(wide_x)
        out = _oplib.where(wide_n == 1, cur, out)
        for k in range(1, top):
            prev, cur = cur, step(k, wide_x, cur, prev)
            out = _oplib.where(wide_n == k + 1, cur, out)
    return out.to(x.dtype)


def _chebyshev_step(k, x, p, q):
    return 2 * x * p - q


def chebyshev_polynomial_t(x, n):
    return _recurrence(x, n, lambda x: x, _chebyshev_step)


def chebyshev_polynomial_u(x, n):
    return _recurrence(x, n, lambda x: 2 * x, _chebyshev_step)


def chebyshev_polynomial_v(x, n):
    return _recurrence(x, n, lambda x: 2 * x - 1, _chebyshev_step)


def chebyshev_polynomial_w(x, n):
    return _recurrence(x, n, lambda x: 2 * x + 1, _chebyshev_step)


def hermite_polynomial_h(x, n):
    return _recurrence(x, n, lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - 2 * k * q)


def hermite_polynomial_he(x, n):
    return _recurrence(x, n, lambda x: x, lambda k, x, p, q: x * p - k * q)


def laguerre_polynomial_l(x, n):
    return _recurrence(x, n, lambda x: 1 - x,
                       lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1))


def legendre_polynomial_p(x, n):
    return _recurrence(x, n, lambda x: x,
                       lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1))


# ----- Bessel functions through their exponentially scaled forms ------------------------
# SciPy's (Cephes') i0 is exp(|x|) times the series i0e sums (the same at +-inf: NaN), and
# k0e is exp(x) times k0; so are the order-1 functions.


@_in_float64
def i0(a):
    return a.abs().exp() * _op("i0e", a)


@_in_float64
def i1(a):
    return a.abs().exp() * _op("i1e", a)


# the modified Bessel functions have no derivative in PyTorch: their inputs are detached


def modified_bessel_i0(a):
    return _op("i0", a.detach())  # the kernel of i0, SciPy's i0


def modified_bessel_i1(a):
    return _op("i1", a.detach())


@_in_float64
def modified_bessel_k0(a):
    a = a.detach()
    return (-a).exp() * _op("scaled_modified_bessel_k0", a)


@_in_float64
def modified_bessel_k1(a):
    a = a.detach()
    return (-a).exp() * _op("scaled_modified_bessel_k1", a)


# ----- the normal distribution function --------------------------------------------------


@_in_float64
def ndtr(a):
    # Cephes' ndtr: erf near 0, erfc (of |t|, then mirrored) in the tails
    t = a * math.sqrt(0.5)
    z = t.abs()
    tail = 0.5 * _op("erfc", z)
    tail = _oplib.where(t > 0, 1 - tail, tail)
    return _oplib.where(z < math.sqrt(0.5), 0.5 + 0.5 * _op("erf", t), tail)


@_in_float64
def log_ndtr(a):
    # SciPy's: below -1, log(erfcx(-t) / 2) - t^2, whose erfcx does not underflow; above,
    # log1p(-erfc(t) / 2). Each side sees only its own inputs: the other's infinities
    # would reach the gradient as 0 * inf
    low = a < -1
    t = _oplib.where(low, a, _zero(a) - 1) * math.sqrt(0.5)
    below = (_op("erfcx", -t) / 2).log() - t * t
    t = _oplib.where(low, _zero(a), a) * math.sqrt(0.5)
    return _oplib.where(low, below, (-_op("erfc", t) / 2).log1p())


def entr(a):
    # the reference kernel's values, in a's dtype: -x log x above 0, 0 at 0, -inf below
    # and NaN kept (its gradient is entr's formula's: the dispatcher records entr itself)
    positive = a > 0
    body = -a * a.log()
    out = _oplib.where(positive, body, _oplib.where(a == 0, _zero(a), _scalar(a, -math.inf)))
    return _oplib.where(a.isnan(), a, out)


DECOMPOSITIONS.update({fn.__name__: fn for fn in (
    chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,
    chebyshev_polynomial_w, hermite_polynomial_h, hermite_polynomial_he, laguerre_polynomial_l,
    legendre_polynomial_p, i0, i1, modified_bessel_i0, modified_bessel_i1, modified_bessel_k0,
    modified_bessel_k1, ndtr, log_ndtr, entr)})
