"""Reference kernels of the special functions (``torcia.special``).

A mixin of :class:`torcia._numpy_backend.Reference`. The functions with no short closed form
run on SciPy's ``scipy.special`` (``cupyx.scipy.special`` when ``xp`` is CuPy), which is
the optional ``torcia-core[scipy]`` extra: core itself needs only NumPy, and a kernel that
needs SciPy without it raises an error naming the extra. The orthogonal polynomials are
their three-term recurrences, exact in ``xp`` arithmetic.
"""

from __future__ import annotations

import numpy as np

#: op name -> the ``scipy.special`` function computing it elementwise
_SCIPY_UNARY = {
    "i0": "i0", "i0e": "i0e", "i1": "i1", "i1e": "i1e", "ndtr": "ndtr", "ndtri": "ndtri",
    "log_ndtr": "log_ndtr", "erfcx": "erfcx", "bessel_j0": "j0", "bessel_j1": "j1",
    "bessel_y0": "y0", "bessel_y1": "y1", "modified_bessel_i0": "i0",
    "modified_bessel_i1": "i1", "modified_bessel_k0": "k0", "modified_bessel_k1": "k1",
    "scaled_modified_bessel_k0": "k0e", "scaled_modified_bessel_k1": "k1e",
}


def scipy_special(xp, op: str):
    """The special-function module serving ``xp`` arrays, or an error naming the extra."""
    try:
        if getattr(xp, "__name__", "") == "cupy":
            import cupyx.scipy.special as sp
        else:
            import scipy.special as sp
    except ImportError:
        raise ModuleNotFoundError(
            f"torcia.special.{op} needs SciPy, which is not installed: "
            "pip install 'torcia-core[scipy]'"
        ) from None
    return sp


def special_call(xp, op, fn_name, *args):
    """``fn_name`` of the special-function module serving ``xp`` on ``args``; a function
    that ``cupyx.scipy.special`` lacks (``airy``...) runs in SciPy on the host."""
    fn = getattr(scipy_special(xp, op), fn_name, None)
    if fn is not None:
        return fn(*args)
    host = getattr(scipy_special(np, op), fn_name)
    out = host(*[xp.asnumpy(a) if hasattr(a, "device") else a for a in args])
    return tuple(xp.asarray(o) for o in out) if isinstance(out, tuple) else xp.asarray(out)


def _same(out, like):
    """``out`` in the floating dtype of ``like`` (SciPy may compute in float64)."""
    dt = like.dtype
    return out if out.dtype == dt else out.astype(dt)


def _make_scipy_unary(op, fn_name):
    def kernel(self, a):
        return _same(special_call(self.xp, op, fn_name, a), a)

    kernel.__name__ = op
    return kernel


def _low(dtype) -> bool:
    """float16 or bfloat16 (ml_dtypes' bfloat16 is NumPy's kind "V")."""
    return dtype.itemsize == 2 and (dtype.kind == "f" or dtype.name == "bfloat16")


def _chebyshev_step(k, x, p, q):
    return 2 * x * p - q


#: the Chebyshev polynomials of the four kinds as (p_0, p_1, step), where
#: p_{k+1} = step(k, x, p_k, p_{k-1})
_CHEBYSHEV = {"t": (lambda x: 1, lambda x: x, _chebyshev_step),
              "u": (lambda x: 1, lambda x: 2 * x, _chebyshev_step),
              "v": (lambda x: 1, lambda x: 2 * x - 1, _chebyshev_step),
              "w": (lambda x: 1, lambda x: 2 * x + 1, _chebyshev_step)}


class SpecialKernels:
    """Kernels of :data:`torcia.ops.SPECIAL_UNARY`, ``SPECIAL_BINARY`` and ``polygamma``."""

    xp = np

    def sinc(self, a):
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
    def _recurrence(self, x, n, p0, p1, step, shifted=False):
        """p_n(x) (p_n(2x - 1) when ``shifted``); half precision in float32, rounded once
        (in half its terms lost digits at each step, and overflowed to inf - inf = NaN
        where the value is inf)."""
        xp = self.xp
        dtype = xp.result_type(x, n)
        work = np.float32 if _low(np.dtype(dtype)) else dtype
        x = xp.asarray(x, dtype=work)
        if shifted:
            x = 2 * x - 1
        n = xp.trunc(xp.asarray(n, dtype=work))
        shape = xp.broadcast_shapes(x.shape, n.shape)
        x, n = xp.broadcast_to(x, shape), xp.broadcast_to(n, shape)
        prev = xp.broadcast_to(xp.asarray(p0(x), dtype=work), shape)
        out = xp.where(n == 0, prev, 0).astype(work)
        top = int(n.max()) if n.size else 0
        if top >= 1:
            cur = xp.asarray(p1(x), dtype=work)
            out = xp.where(n == 1, cur, out)
            for k in range(1, top):
                prev, cur = cur, step(k, x, cur, prev)
                out = xp.where(n == k + 1, cur, out)
        return out.astype(dtype, copy=False)

    def chebyshev_polynomial_t(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["t"])

    def chebyshev_polynomial_u(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["u"])

    def chebyshev_polynomial_v(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["v"])

    def chebyshev_polynomial_w(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["w"])

    def shifted_chebyshev_polynomial_t(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["t"], shifted=True)

    def shifted_chebyshev_polynomial_u(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["u"], shifted=True)

    def shifted_chebyshev_polynomial_v(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["v"], shifted=True)

    def shifted_chebyshev_polynomial_w(self, x, n):
        return self._recurrence(x, n, *_CHEBYSHEV["w"], shifted=True)

    def hermite_polynomial_h(self, x, n):
        return self._recurrence(x, n, lambda x: 1, lambda x: 2 * x,
                                lambda k, x, p, q: 2 * x * p - 2 * k * q)

    def hermite_polynomial_he(self, x, n):
        return self._recurrence(x, n, lambda x: 1, lambda x: x,
                                lambda k, x, p, q: x * p - k * q)

    def laguerre_polynomial_l(self, x, n):
        return self._recurrence(x, n, lambda x: 1, lambda x: 1 - x,
                                lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1))

    def legendre_polynomial_p(self, x, n):
        return self._recurrence(x, n, lambda x: 1, lambda x: x,
                                lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1))


for _op, _fn in _SCIPY_UNARY.items():
    setattr(SpecialKernels, _op, _make_scipy_unary(_op, _fn))
