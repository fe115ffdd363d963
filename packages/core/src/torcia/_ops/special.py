"""The special functions of :mod:`torcia.special`, each declared once: schema, reference
kernel, meta shape, decomposition. One input: :data:`torcia.ops.SPECIAL_UNARY`; two,
broadcast together: ``SPECIAL_BINARY`` (``zeta``, the orthogonal polynomials of ``(x, n)``,
degree n truncated to an integer, 0 where n < 0); ``SPECIAL_OTHER``: ``polygamma``, whose
``n=`` is the order, an int >= 1. All take floating inputs (the public functions promote
integers) and give floating results; the Bessel functions of the first kinds, Airy's and
the polynomials have no derivative in PyTorch, so none here.

The kernels that have no short closed form run on SciPy's ``scipy.special``
(``cupyx.scipy.special`` when ``xp`` is CuPy), the optional ``torcia-core[scipy]`` extra:
core itself needs only NumPy, and a kernel that needs SciPy without it raises an error
naming the extra. The polynomials are their three-term recurrences, exact in ``xp``
arithmetic.

The decompositions are the kernels' own steps (the polynomials), or the functions
written with the ones SciPy defines them by (``i0`` with ``i0e``, ``ndtr`` with ``erf`` and
``erfc``); like SciPy, which computes float32 in float64, they compute below float64 in
float64 and round once (in float32 the rounding of ``x / sqrt(2)`` alone would cost
``ndtr`` digits in its tails). They are written with Tensor methods, and :func:`op` for
the ops that have none. Their public functions are :mod:`torcia.special`'s, their
derivatives torcia-autograd's.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torcia import _dtype as D
from torcia._opdef import define
from torcia._ops._common import (
    float_broadcast,
    float_like,
    low_precision,
    op,
    opmath,
    widened,
)
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------

#: op name -> the ``scipy.special`` function computing it elementwise
_SCIPY_UNARY = {
    "i0": "i0", "i0e": "i0e", "i1": "i1", "i1e": "i1e", "ndtr": "ndtr", "ndtri": "ndtri",
    "log_ndtr": "log_ndtr", "erfcx": "erfcx", "bessel_j0": "j0", "bessel_j1": "j1",
    "bessel_y0": "y0", "bessel_y1": "y1", "modified_bessel_i0": "i0",
    "modified_bessel_i1": "i1", "modified_bessel_k0": "k0", "modified_bessel_k1": "k1",
    "scaled_modified_bessel_k0": "k0e", "scaled_modified_bessel_k1": "k1e",
}


def scipy_special(xp, name: str):
    """The special-function module serving ``xp`` arrays, or an error naming the extra."""
    try:
        if getattr(xp, "__name__", "") == "cupy":
            import cupyx.scipy.special as sp
        else:
            import scipy.special as sp
    except ImportError:
        raise ModuleNotFoundError(
            f"torcia.special.{name} needs SciPy, which is not installed: "
            "pip install 'torcia-core[scipy]'"
        ) from None
    return sp


def special_call(xp, name, fn_name, *args):
    """``fn_name`` of the special-function module serving ``xp`` on ``args``; a function
    that ``cupyx.scipy.special`` lacks (``airy``...) runs in SciPy on the host."""
    fn = getattr(scipy_special(xp, name), fn_name, None)
    if fn is not None:
        return fn(*args)
    host = getattr(scipy_special(np, name), fn_name)
    out = host(*[xp.asnumpy(a) if hasattr(a, "device") else a for a in args])
    return tuple(xp.asarray(o) for o in out) if isinstance(out, tuple) else xp.asarray(out)


def _same(out, like):
    """``out`` in the floating dtype of ``like`` (SciPy may compute in float64)."""
    dt = like.dtype
    return out if out.dtype == dt else out.astype(dt)


def _scipy_unary(name, fn_name):
    def kernel(self, a):
        return _same(special_call(self.xp, name, fn_name, a), a)

    kernel.__name__ = name
    return kernel


def _chebyshev_step(k, x, p, q):
    return 2 * x * p - q


#: the Chebyshev polynomials of the four kinds as (p_1, step), where p_0 = 1 and
#: p_{k+1} = step(k, x, p_k, p_{k-1})
_CHEBYSHEV = {"t": (lambda x: x, _chebyshev_step),
              "u": (lambda x: 2 * x, _chebyshev_step),
              "v": (lambda x: 2 * x - 1, _chebyshev_step),
              "w": (lambda x: 2 * x + 1, _chebyshev_step)}
#: the other polynomials, the same way
_HERMITE_H = (lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - 2 * k * q)
_HERMITE_HE = (lambda x: x, lambda k, x, p, q: x * p - k * q)
_LAGUERRE = (lambda x: 1 - x, lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1))
_LEGENDRE = (lambda x: x, lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1))


def _polynomial_array(xp, x, n, p1, step, shifted=False):
    """p_n(x) (p_n(2x - 1) when ``shifted``); half precision in float32, rounded once
    (in half its terms lost digits at each step, and overflowed to inf - inf = NaN
    where the value is inf)."""
    dtype = xp.result_type(x, n)
    work = np.float32 if low_precision(np.dtype(dtype)) else dtype
    x = xp.asarray(x, dtype=work)
    if shifted:
        x = 2 * x - 1
    n = xp.trunc(xp.asarray(n, dtype=work))
    shape = xp.broadcast_shapes(x.shape, n.shape)
    x, n = xp.broadcast_to(x, shape), xp.broadcast_to(n, shape)
    prev = xp.ones(shape, dtype=work)
    out = xp.where(n == 0, prev, 0).astype(work)
    top = int(n.max()) if n.size else 0
    if top >= 1:
        cur = xp.asarray(p1(x), dtype=work)
        out = xp.where(n == 1, cur, out)
        for k in range(1, top):
            prev, cur = cur, step(k, x, cur, prev)
            out = xp.where(n == k + 1, cur, out)
    return out.astype(dtype, copy=False)


class Kernels:
    """The reference kernels of the special functions (``self.xp`` the array module)."""

    def sinc(self, a):
        # sin(inf) warns from NumPy's Python code, outside the modules that
        # torcia's warning filter covers (torcia/__init__.py)
        with np.errstate(all="ignore"):
            return _same(self.xp.sinc(a), a)

    def entr(self, a):
        xp = self.xp
        with np.errstate(divide="ignore", invalid="ignore"):
            body = -a * xp.log(xp.where(a > 0, a, 1))
        out = xp.where(a > 0, body, xp.where(a == 0, 0.0, -np.inf))
        return _same(xp.where(xp.isnan(a), a, out), a)

    def airy_ai(self, a):
        # Ai(x) ~ exp(-2/3 x^1.5) / (2 sqrt(pi) x^0.25): 0 in any precision past x = 200,
        # where SciPy's series gives NaN
        xp = self.xp
        out = special_call(xp, "airy_ai", "airy", a)[0]
        out = xp.where(a > 200, 0.0, out)
        # Ai(-x) for large x: the first terms of the oscillating asymptotic series (DLMF
        # 9.7.9), whose phase is all that is left; SciPy's gives NaN past x = 1e7 and loses
        # digits of the phase before that, where the series is exact to rounding
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            x = xp.where(a < -1e3, a, -1e3).astype(np.float64)
            t = xp.sqrt(-x)
            zeta = -2.0 * x * t / 3.0
            z = 1 / zeta
            theta = zeta + 0.25 * np.pi
            far = (xp.sin(theta) * (1 - 385 / 10368 * z * z) - xp.cos(theta) * (5 / 72 * z)) \
                / (np.sqrt(np.pi) * xp.sqrt(t))
        out = xp.where(a < -1e3, far, out)
        # PyTorch's kernel gives NaN at both infinities (rather than the limit 0)
        return _same(xp.where(xp.isinf(a), np.nan, out), a)

    def spherical_bessel_j0(self, a):
        xp = self.xp
        safe = xp.where((a == 0) | xp.isinf(a), 1, a)
        # sin(x) / x: 1 at 0, and 0 at +-inf (where NumPy's sin would give NaN)
        return _same(xp.where(a == 0, 1.0, xp.where(xp.isinf(a), 0.0, xp.sin(safe) / safe)),
                     a)

    def xlog1py(self, a, b):
        xp = self.xp
        with np.errstate(divide="ignore", invalid="ignore"):
            out = xp.where(a == 0, 0.0, a * xp.log1p(b))
        out = xp.where(xp.isnan(b), b, out)
        return out.astype(xp.result_type(a, b), copy=False)

    def zeta(self, a, b):
        xp = self.xp
        return special_call(xp, "zeta", "zeta", a, b).astype(xp.result_type(a, b), copy=False)

    # at x = 0 the regularised incomplete gamma functions are 0 and 1 for a > 0 and for a
    # NaN a, where SciPy gives NaN (PyTorch checks a < 0, then a == 0, which is NaN at
    # x = 0 as in SciPy, then x == 0)
    def gammainc(self, a, b):
        xp = self.xp
        out = special_call(xp, "gammainc", "gammainc", a, b)
        return xp.where((b == 0) & ~(a <= 0), 0, out).astype(xp.result_type(a, b), copy=False)

    def gammaincc(self, a, b):
        xp = self.xp
        out = special_call(xp, "gammaincc", "gammaincc", a, b)
        return xp.where((b == 0) & ~(a <= 0), 1, out).astype(xp.result_type(a, b), copy=False)

    def polygamma(self, a, n=1):
        return _same(special_call(self.xp, "polygamma", "polygamma", n, a), a)

    # ----- orthogonal polynomials: p_{k+1} = step(k, x, p_k, p_{k-1}) ------------------
    def chebyshev_polynomial_t(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["t"])

    def chebyshev_polynomial_u(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["u"])

    def chebyshev_polynomial_v(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["v"])

    def chebyshev_polynomial_w(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["w"])

    def shifted_chebyshev_polynomial_t(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["t"], shifted=True)

    def shifted_chebyshev_polynomial_u(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["u"], shifted=True)

    def shifted_chebyshev_polynomial_v(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["v"], shifted=True)

    def shifted_chebyshev_polynomial_w(self, x, n):
        return _polynomial_array(self.xp, x, n, *_CHEBYSHEV["w"], shifted=True)

    def hermite_polynomial_h(self, x, n):
        return _polynomial_array(self.xp, x, n, *_HERMITE_H)

    def hermite_polynomial_he(self, x, n):
        return _polynomial_array(self.xp, x, n, *_HERMITE_HE)

    def laguerre_polynomial_l(self, x, n):
        return _polynomial_array(self.xp, x, n, *_LAGUERRE)

    def legendre_polynomial_p(self, x, n):
        return _polynomial_array(self.xp, x, n, *_LEGENDRE)


for _name, _fn in _SCIPY_UNARY.items():
    setattr(Kernels, _name, _scipy_unary(_name, _fn))


# ----- decompositions (tensors) ------------------------------------------------------------


def _in_float64(fn):
    """``fn`` computed in float64 for float32 and half-precision tensors, rounded once."""
    @functools.wraps(fn)
    def run(a):
        if a.dtype in (D.float32, D.float16, D.bfloat16):
            return fn(a.double()).to(a.dtype)
        return fn(a)

    return run


def _recurrence(x, n, p1, step):
    """p_n(x) from p_0 = 1 and p_1(x) (``n`` truncated to an integer); half precision in
    float32, rounded once. Not differentiable, as PyTorch's."""
    if not hasattr(n, "dtype"):
        n = x.new_full((), n)
    x, n = x.detach(), n.detach()
    wide_x, wide_n = widened(x), widened(n).trunc()
    shape = np.broadcast_shapes(tuple(wide_x.shape), tuple(wide_n.shape))
    wide_x, wide_n = wide_x.expand(shape), wide_n.expand(shape)
    one = wide_x.new_ones(())
    out = _where(wide_n == 0, one, wide_x.new_zeros(()))
    # the number of steps is the largest degree asked for: a host decision, as the
    # reference kernel's (whose error a NaN or infinite degree raises too)
    top = int(wide_n.amax()) if wide_n.numel() else 0
    if top >= 1:
        prev, cur = one, p1(wide_x)
        out = _where(wide_n == 1, cur, out)
        for k in range(1, top):
            prev, cur = cur, step(k, wide_x, cur, prev)
            out = _where(wide_n == k + 1, cur, out)
    return out.to(x.dtype)


def chebyshev_polynomial_t(x, n):
    return _recurrence(x, n, *_CHEBYSHEV["t"])


def chebyshev_polynomial_u(x, n):
    return _recurrence(x, n, *_CHEBYSHEV["u"])


def chebyshev_polynomial_v(x, n):
    return _recurrence(x, n, *_CHEBYSHEV["v"])


def chebyshev_polynomial_w(x, n):
    return _recurrence(x, n, *_CHEBYSHEV["w"])


def _shifted(kind, x, n):
    """The Chebyshev polynomial of ``kind`` at 2x - 1; half precision in float32, rounded
    once."""
    n = widened(n)
    return op(f"chebyshev_polynomial_{kind}", 2 * widened(x) - 1, n).to(x.dtype)


def shifted_chebyshev_polynomial_t(x, n):
    return _shifted("t", x, n)


def shifted_chebyshev_polynomial_u(x, n):
    return _shifted("u", x, n)


def shifted_chebyshev_polynomial_v(x, n):
    return _shifted("v", x, n)


def shifted_chebyshev_polynomial_w(x, n):
    return _shifted("w", x, n)


def hermite_polynomial_h(x, n):
    return _recurrence(x, n, *_HERMITE_H)


def hermite_polynomial_he(x, n):
    return _recurrence(x, n, *_HERMITE_HE)


def laguerre_polynomial_l(x, n):
    return _recurrence(x, n, *_LAGUERRE)


def legendre_polynomial_p(x, n):
    return _recurrence(x, n, *_LEGENDRE)


# Bessel functions through their exponentially scaled forms: SciPy's (Cephes') i0 is
# exp(|x|) times the series i0e sums (the same at +-inf: NaN), and k0e is exp(x) times
# k0; so are the order-1 functions


@_in_float64
def i0(a):
    return a.abs().exp() * op("i0e", a)


@_in_float64
def i1(a):
    return a.abs().exp() * op("i1e", a)


# the modified Bessel functions have no derivative in PyTorch: their inputs are detached


def modified_bessel_i0(a):
    return op("i0", a.detach())  # the kernel of i0, SciPy's i0


def modified_bessel_i1(a):
    return op("i1", a.detach())


@_in_float64
def modified_bessel_k0(a):
    a = a.detach()
    return (-a).exp() * op("scaled_modified_bessel_k0", a)


@_in_float64
def modified_bessel_k1(a):
    a = a.detach()
    return (-a).exp() * op("scaled_modified_bessel_k1", a)


def spherical_bessel_j0(a):
    # sin(x) / x: 1 at 0, and 0 at +-inf (where sin would give NaN)
    inf = a.isinf()
    one = a.new_ones(())
    safe = _where((a == 0).bitwise_or(inf), one, a)
    return _where(a == 0, one, _where(inf, a.new_zeros(()), safe.sin() / safe))


@opmath
def sinc(a):
    # the zeros divide sin(pi) by pi, not 0 by 0, whose NaN would reach their gradient
    zero = a == 0
    one = a.new_ones(())
    x = _where(zero, one, a) * math.pi
    return _where(zero, one, x.sin() / x)


# the normal distribution function


@_in_float64
def ndtr(a):
    # Cephes' ndtr: erf near 0, erfc (of |t|, then mirrored) in the tails
    t = a * math.sqrt(0.5)
    z = t.abs()
    tail = 0.5 * z.erfc()
    tail = _where(t > 0, 1 - tail, tail)
    return _where(z < math.sqrt(0.5), 0.5 + 0.5 * t.erf(), tail)


@_in_float64
def log_ndtr(a):
    # SciPy's: below -1, log(erfcx(-t) / 2) - t^2, whose erfcx does not underflow; above,
    # log1p(-erfc(t) / 2). Each side sees only its own inputs: the other's infinities
    # would reach the gradient as 0 * inf
    low = a < -1
    t = _where(low, a, a.new_full((), -1.0)) * math.sqrt(0.5)
    below = (op("erfcx", -t) / 2).log() - t * t
    t = _where(low, a.new_zeros(()), a) * math.sqrt(0.5)
    return _where(low, below, (-t.erfc() / 2).log1p())


def entr(a):
    # the reference kernel's values, in a's dtype: -x log x above 0, 0 at 0, -inf below
    # and NaN kept (its gradient is entr's formula's: the dispatcher records entr itself)
    out = _where(a > 0, -a * a.log(),
                 _where(a == 0, a.new_zeros(()), a.new_full((), -math.inf)))
    return _where(a.isnan(), a, out)


def xlog1py(a, b):
    # PyTorch's gradient in a is log1p(b) at a == 0 too: there the product a * log1p(b)
    # gives the value 0, but where log1p(b) is not finite and b not NaN (b <= -1, inf),
    # masked; + 0 makes -0.0 the reference's 0.0
    out = b.log1p()
    out = _where((a == 0).bitwise_and((b <= -1).bitwise_or(b == math.inf)),
                 out.new_zeros(()), out)
    return a * out + 0


@opmath
def polygamma(a, n=1):
    if n == 0:
        return op("digamma", a)
    # SciPy's formula, which the reference kernel runs: (-1)^(n+1) n! zeta(n + 1, a)
    return op("zeta", a.new_full((), n + 1.0), a) * float((-1) ** (n + 1) * math.factorial(n))


# ----- the declarations ------------------------------------------------------------------


# Each declaration carries its public function's example in torcia.special (the arguments,
# a list standing for a tensor of it, then what the call prints; the docs tests run it) and,
# for some, the first line of its docstring.


def _unary(name, example, decomposition=None, differentiable=True, param="x", doc=""):
    """An op of ``SPECIAL_UNARY``."""
    kernel = getattr(Kernels, name)
    return define(f"{name}(Tensor {param}) -> Tensor", kernel, shape=float_like,
                  decomposition=decomposition, floating_inputs=True,
                  differentiable=differentiable, group="special_unary", doc=doc,
                  examples=(example,))


def _unary_no_grad(name, example, decomposition=None):
    return _unary(name, example, decomposition, differentiable=False, param="a")


def _binary(name, example, decomposition=None, doc=""):
    """An op of ``SPECIAL_BINARY`` with a derivative."""
    return define(f"{name}(Tensor a, Tensor b) -> Tensor", getattr(Kernels, name),
                  shape=float_broadcast, decomposition=decomposition, floating_inputs=True,
                  group="special_binary", doc=doc, examples=(example,))


def _polynomial(name, example, decomposition):
    """An orthogonal polynomial p_n(x) of ``SPECIAL_BINARY``: no derivative."""
    return define(f"{name}(Tensor x, Tensor n) -> Tensor", getattr(Kernels, name),
                  shape=float_broadcast, decomposition=decomposition, floating_inputs=True,
                  differentiable=False, group="special_binary", examples=(example,))


DECLARED = (
    _unary("i0", ("[0.0, 1.0]", "tensor([1.0000, 1.2661])"), i0,
           doc="The modified Bessel function of the first kind, order 0."),
    _unary("i0e", ("[0.0, 1.0]", "tensor([1.0000, 0.4658])"),
           doc="``i0(x) * exp(-|x|)``, the exponentially scaled ``i0``."),
    _unary("i1", ("[0.0, 1.0]", "tensor([0.0000, 0.5652])"), i1,
           doc="The modified Bessel function of the first kind, order 1."),
    _unary("i1e", ("[0.0, 1.0]", "tensor([0.0000, 0.2079])"),
           doc="``i1(x) * exp(-|x|)``, the exponentially scaled ``i1``."),
    _unary("ndtr", ("[0.0, 1.0]", "tensor([0.5000, 0.8413])"), ndtr,
           doc="The standard normal cumulative distribution function."),
    _unary("ndtri", ("[0.5, 0.975]", "tensor([0.0000, 1.9600])"),
           doc="The inverse of :func:`ndtr` (the normal quantile function)."),
    _unary("log_ndtr", ("[0.0, 3.0]", "tensor([-0.6931, -0.0014])"), log_ndtr,
           doc="``log(ndtr(x))``, accurate far in the lower tail."),
    _unary("erfcx", ("[0.0, 1.0]", "tensor([1.0000, 0.4276])"),
           doc="The scaled complementary error function ``exp(x**2) * erfc(x)``."),
    _unary("sinc", ("[0.0, 0.5]", "tensor([1.0000, 0.6366])"), sinc,
           doc="The normalised sinc ``sin(pi x) / (pi x)``, 1 at 0."),
    _unary("entr", ("[0.5, 1.0]", "tensor([0.3466, -0.0000])"), entr,
           doc="The elementwise entropy ``-x log(x)``: 0 at 0, ``-inf`` for negative x."),
    _unary_no_grad("bessel_j0", ("[0.0, 1.0]", "tensor([1.0000, 0.7652])")),
    _unary_no_grad("bessel_j1", ("[0.0, 1.0]", "tensor([0.0000, 0.4401])")),
    _unary_no_grad("bessel_y0", ("[1.0, 2.0]", "tensor([0.0883, 0.5104])")),
    _unary_no_grad("bessel_y1", ("[1.0, 2.0]", "tensor([-0.7812, -0.1070])")),
    _unary_no_grad("modified_bessel_i0", ("[0.0, 1.0]", "tensor([1.0000, 1.2661])"),
                   modified_bessel_i0),
    _unary_no_grad("modified_bessel_i1", ("[0.0, 1.0]", "tensor([0.0000, 0.5652])"),
                   modified_bessel_i1),
    _unary_no_grad("modified_bessel_k0", ("[1.0, 2.0]", "tensor([0.4210, 0.1139])"),
                   modified_bessel_k0),
    _unary_no_grad("modified_bessel_k1", ("[1.0, 2.0]", "tensor([0.6019, 0.1399])"),
                   modified_bessel_k1),
    _unary_no_grad("scaled_modified_bessel_k0", ("[1.0, 2.0]", "tensor([1.1445, 0.8416])")),
    _unary_no_grad("scaled_modified_bessel_k1", ("[1.0, 2.0]", "tensor([1.6362, 1.0335])")),
    _unary_no_grad("airy_ai", ("[0.0, 1.0]", "tensor([0.3550, 0.1353])")),
    _unary_no_grad("spherical_bessel_j0", ("[0.0, 1.0]", "tensor([1.0000, 0.8415])"),
                   spherical_bessel_j0),
    _binary("xlog1py", ("[0.0, 2.0]", "[1.0, 1.0]", "tensor([0.0000, 1.3863])"), xlog1py,
            doc="``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN)."),
    _binary("zeta", ("[2.0, 4.0]", "1.0", "tensor([1.6449, 1.0823])"),
            doc="The Hurwitz zeta function ``sum_k (k + other) ** -input``."),
    _binary("gammainc", ("[1.0, 2.0]", "[1.0, 1.0]", "tensor([0.6321, 0.2642])"),
            doc="The regularized lower incomplete gamma function ``P(input, other)``."),
    _binary("gammaincc", ("[1.0, 2.0]", "[1.0, 1.0]", "tensor([0.3679, 0.7358])"),
            doc="The regularized upper incomplete gamma function ``Q(input, other)``."),
    _polynomial("chebyshev_polynomial_t", ("[0.5, 1.0]", "2", "tensor([-0.5000,  1.0000])"),
                chebyshev_polynomial_t),
    _polynomial("chebyshev_polynomial_u", ("[0.5, 1.0]", "2", "tensor([0., 3.])"),
                chebyshev_polynomial_u),
    _polynomial("chebyshev_polynomial_v", ("[0.5, 1.0]", "2", "tensor([-1.,  1.])"),
                chebyshev_polynomial_v),
    _polynomial("chebyshev_polynomial_w", ("[0.5, 1.0]", "2", "tensor([1., 5.])"),
                chebyshev_polynomial_w),
    _polynomial("shifted_chebyshev_polynomial_t", ("[0.5, 1.0]", "2", "tensor([-1.,  1.])"),
                shifted_chebyshev_polynomial_t),
    _polynomial("shifted_chebyshev_polynomial_u", ("[0.5, 1.0]", "2", "tensor([-1.,  3.])"),
                shifted_chebyshev_polynomial_u),
    _polynomial("shifted_chebyshev_polynomial_v", ("[0.5, 1.0]", "2", "tensor([-1.,  1.])"),
                shifted_chebyshev_polynomial_v),
    _polynomial("shifted_chebyshev_polynomial_w", ("[0.5, 1.0]", "2", "tensor([-1.,  5.])"),
                shifted_chebyshev_polynomial_w),
    _polynomial("hermite_polynomial_h", ("[0.5, 1.0]", "2", "tensor([-1.,  2.])"),
                hermite_polynomial_h),
    _polynomial("hermite_polynomial_he", ("[0.5, 1.0]", "2", "tensor([-0.7500,  0.0000])"),
                hermite_polynomial_he),
    _polynomial("laguerre_polynomial_l", ("[0.5, 1.0]", "2", "tensor([ 0.1250, -0.5000])"),
                laguerre_polynomial_l),
    _polynomial("legendre_polynomial_p", ("[0.5, 1.0]", "2", "tensor([-0.1250,  1.0000])"),
                legendre_polynomial_p),
    define("polygamma(Tensor x, *, int n=1) -> Tensor", Kernels.polygamma, shape=float_like,
           decomposition=polygamma, floating_inputs=True, group="special_other"),
)
