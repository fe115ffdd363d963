"""The elementwise activations of :data:`torcia.ops.NN` and their fused backward ops,
each declared once: schema, reference kernel, meta shape, decomposition, autocast policy.

A kernel here is written as a method of the reference backend: ``self.xp`` is the array
module (NumPy, or CuPy for torcia-cuda's subclass) and ``self.sigmoid``/``self.erf`` its
other kernels; arrays come positionally, parameters as keywords. A decomposition is
written with Tensor methods only (it runs on any device, and this module is below the
Tensor class). Each forward activation's declaration also says what its functional form
(``torcia.nn.functional.softplus``), made from it in :mod:`torcia._oplib.nn_activation`,
needs: its docstring and examples, whether it takes ``inplace``, the dtypes it refuses and
the checks of its arguments. Their derivatives are in torcia-autograd.
"""

from __future__ import annotations

import math

import numpy as np

from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    COMPLEX,
    HALF,
    first_shape,
    grad_like,
    in_float32,
    low_precision,
    opmath,
    random_floats,
    refuse,
)
from torcia._ops._common import where as _where

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


# ----- the dtypes refused, the checks of the arguments ----------------------------------


def _not_implemented(kernel, kinds):
    """The refusal of the NumPy ``kinds`` by the activation PyTorch's errors name
    ``kernel`` (:attr:`torcia._opdef.Declaration.refuses`)."""
    return dict.fromkeys(kinds, (RuntimeError, f'"{kernel}" not implemented for \'{{}}\''))


#: the integer kinds, bool included: PyTorch has floating (and complex) kernels only
_INTEGERS = (BOOL, "i", "u")
_REAL = (*_INTEGERS, COMPLEX)

_LEAKY_RELU = _not_implemented("leaky_relu", _REAL)
_ELU = _not_implemented("elu", _REAL)
_SELU = _not_implemented("selu", _REAL)
_CELU = _not_implemented("celu", _REAL)
_GELU = _not_implemented("gelu", _REAL)
_SILU = _not_implemented("silu", _INTEGERS)
_MISH = _not_implemented("mish", _REAL)
_SOFTPLUS = _not_implemented("softplus", _REAL)
_HARDTANH = {**_not_implemented("hardtanh", (COMPLEX,)),
             BOOL: (RuntimeError, "Bool inputs not supported for hardtanh")}
_HARDSWISH = _not_implemented("hardswish", _REAL)
_HARDSIGMOID = _not_implemented("hardsigmoid", _REAL)
_LOGSIGMOID = _not_implemented("log_sigmoid_forward", _REAL)
_TANHSHRINK = _not_implemented("tanhshrink", (BOOL,))


def _check_celu(input, alpha=1.0):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")


def _check_gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, but got "
                           f"{approximate}")


def _check_hardtanh(input, min_val=-1.0, max_val=1.0):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    # PyTorch converts the limits to the integer dtype first (truncating), -0.5 passes
    if input.dtype.to_numpy().kind == "u" and (int(min_val) < 0 or int(max_val) < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")


# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels, methods of the reference backend (see the module's doc)."""

    def leaky_relu(self, a, negative_slope=0.01):
        """leaky_relu(a, negative_slope): a where a > 0, else a * negative_slope."""
        return self.xp.where(a > 0, a, a * a.dtype.type(negative_slope))

    def elu(self, a, alpha=1.0):
        """elu(a, alpha): a where a > 0, else alpha * (exp(a) - 1)."""
        xp = self.xp
        # the positive inputs zeroed (their exp could overflow), -0.0 kept: elu(-0.0) is
        # -0.0 in PyTorch
        neg = xp.expm1(xp.where(a > 0, a.dtype.type(0), a)) * a.dtype.type(alpha)
        return xp.where(a > 0, a, neg)

    def selu(self, a):
        """selu(a): scale * elu(a, alpha) with the self-normalising constants."""
        return self.elu(a, alpha=_SELU_ALPHA) * a.dtype.type(_SELU_SCALE)

    def celu(self, a, alpha=1.0):
        """celu(a, alpha): max(0, a) + min(0, alpha * (exp(a / alpha) - 1))."""
        xp = self.xp
        al = a.dtype.type(alpha)
        return xp.where(a > 0, a, xp.expm1(xp.where(a > 0, a.dtype.type(0), a) / al) * al)

    def gelu(self, a, approximate="none"):
        """gelu(a, approximate): a * Phi(a), or its tanh approximation."""
        if approximate == "tanh":
            # 0.5 (1 + tanh u) as sigmoid(2 u): 1 + tanh u cancels for a < 0 (down to a
            # 1e-2 relative error at a = -7 in float64)
            inner = a.dtype.type(2 * _SQRT_2_OVER_PI) * (a + a.dtype.type(0.044715) * a * a * a)
            return a * self.sigmoid(inner)
        return (0.5 * a * (1 + self.erf(a * a.dtype.type(1 / math.sqrt(2))))).astype(
            a.dtype, copy=False)

    def gelu_backward(self, g, a, approximate="none"):
        """gelu_backward(g, a, approximate): g * gelu'(a)."""
        xp = self.xp
        if low_precision(a):
            # in float32, rounded once, as PyTorch: a's cube overflows half precision
            return self.gelu_backward(*in_float32(g, a), approximate).astype(g.dtype)
        if approximate == "tanh":
            # with s = sigmoid(2 u): 0.5 (1 + tanh u) = s and 1 - tanh^2 u = 4 s (1 - s),
            # without the cancellation of 1 + tanh u for a < 0
            k, c = a.dtype.type(_SQRT_2_OVER_PI), a.dtype.type(0.044715)
            s = self.sigmoid(2 * k * (a + c * a * a * a))
            return g * (s + 2 * a * s * (1 - s) * k * (1 + 3 * c * a * a))
        cdf = 0.5 * (1 + self.erf(a * a.dtype.type(1 / math.sqrt(2))))
        pdf = xp.exp(-0.5 * a * a) * a.dtype.type(1 / math.sqrt(2 * math.pi))
        return (g * (cdf + a * pdf)).astype(g.dtype, copy=False)

    def silu(self, a):
        """silu(a): a * sigmoid(a); a / (1 + exp(-a)) for a complex a, as PyTorch (the
        product gives -0 for the real part of -0+0j, the quotient PyTorch's +0)."""
        if a.dtype.kind == "c":
            return a / (1 + self.xp.exp(-a))
        return a * self.sigmoid(a)

    def silu_backward(self, g, a):
        """silu_backward(g, a): g * silu'(a) = g * s * (1 + a * (1 - s)), s = sigmoid(a)."""
        s = self.sigmoid(a)
        return g * s * (1 + a * (1 - s))

    def softplus(self, a, beta=1.0, threshold=20.0):
        """softplus(a, beta, threshold): log(1 + exp(beta * a)) / beta; a where
        beta * a > threshold."""
        xp = self.xp
        b = a * a.dtype.type(beta)
        return xp.where(b > threshold, a, xp.logaddexp(0, b) / a.dtype.type(beta))

    def mish(self, a):
        """mish(a): a * tanh(softplus(a))."""
        return a * self.xp.tanh(self.xp.logaddexp(0, a))

    # NOTE: ml_dtypes' bfloat16 has no clip loop (NumPy computes it in float32): the results
    # are cast back to the input's dtype
    def hardtanh(self, a, min_val=-1.0, max_val=1.0):
        """hardtanh(a, min_val, max_val): a clipped to [min_val, max_val]."""
        return self.xp.clip(a, a.dtype.type(min_val), a.dtype.type(max_val)).astype(
            a.dtype, copy=False)

    def hardswish(self, a):
        """hardswish(a): a * clip(a + 3, 0, 6) / 6."""
        return (a * self.xp.clip(a + 3, 0, 6) / 6).astype(a.dtype, copy=False)

    def hardsigmoid(self, a):
        """hardsigmoid(a): clip(a + 3, 0, 6) / 6."""
        return (self.xp.clip(a + 3, 0, 6) / 6).astype(a.dtype, copy=False)

    def logsigmoid(self, a):
        """logsigmoid(a): log(sigmoid(a)) = -log(1 + exp(-a)), computed stably."""
        if low_precision(a):
            # in float32, as PyTorch: logsigmoid(20) is -2e-9, -0 once rounded to half
            return self.logsigmoid(a.astype(np.float32)).astype(a.dtype)
        # 0 - rather than a negation: +0 at +inf, as PyTorch's min(a, 0) - log1p(exp(-|a|))
        return 0 - self.xp.logaddexp(0, -a)

    def softsign(self, a):
        """softsign(a): a / (1 + |a|)."""
        return a / (1 + self.xp.abs(a))

    def tanhshrink(self, a):
        """tanhshrink(a): a - tanh(a)."""
        return a - self.xp.tanh(a)

    def activation_backward(self, g, a, activation, **params):
        """``activation_backward(g, a, activation, **params)``: ``g * f'(a)`` for the activation
        named ``activation`` with its parameters (first derivatives; second ones go
        through differentiable ops)."""
        xp = self.xp
        one = a.dtype.type(1)
        if activation == "relu":
            # ``a``: ReLU's input or its output (positive at the same places); as PyTorch's
            # threshold_backward, zero where a <= 0 whatever the gradient there, g where a
            # is NaN
            return xp.where(a <= 0, g.dtype.type(0), g)
        if activation == "leaky_relu":
            return xp.where(a > 0, g, g * a.dtype.type(params["negative_slope"]))
        if activation in ("elu", "selu"):
            alpha = params.get("alpha", _SELU_ALPHA)
            d = xp.where(a > 0, one, a.dtype.type(alpha) * xp.exp(xp.minimum(a, 0)))
            return g * d * a.dtype.type(_SELU_SCALE) if activation == "selu" else g * d
        if activation == "celu":
            alpha = a.dtype.type(params["alpha"])
            return g * xp.where(a > 0, one, xp.exp(xp.minimum(a, 0) / alpha))
        if activation == "softplus":
            z = a * a.dtype.type(params["beta"])
            return xp.where(z > params["threshold"], g, g * self.sigmoid(z))
        if activation == "mish":
            t = xp.tanh(xp.logaddexp(0, a))
            return g * (t + a * (1 - t * t) * self.sigmoid(a))
        if activation == "hardtanh":
            return g * ((a > params["min_val"]) & (a < params["max_val"]))
        if activation == "hardswish":
            return xp.where(a < -3, 0, xp.where(a > 3, g, g * (a / 3 + a.dtype.type(0.5))))
        if activation == "hardsigmoid":
            return g * ((a > -3) & (a < 3)) / 6
        if activation == "logsigmoid":
            return g * self.sigmoid(-a)
        if activation == "softsign":
            mag = xp.abs(a)
            d = 1 + mag
            if a.dtype.kind == "c":
                # z / (1 + |z|) is not holomorphic: its |z| adds -Re(g conj(z)) sgn(z) / d^2
                sgn = a / xp.where(mag == 0, 1, mag)
                return g / d - (g * xp.conj(a)).real * sgn / (d * d)
            return g / (d * d)
        if activation == "tanhshrink":
            t = xp.tanh(a)
            return g * xp.conj(t * t)  # PyTorch's convention for complex: conj(f'(z))
        raise ValueError(f"activation_backward: unknown activation {activation!r}")


# ----- decompositions (tensors; half precision computes in float32, see opmath) ---------


@opmath
def leaky_relu(a, negative_slope=0.01):
    refuse(_LEAKY_RELU, a)
    return _where(a > 0, a, a * negative_slope)


@opmath
def hardtanh(a, min_val=-1.0, max_val=1.0):
    refuse(_HARDTANH, a)
    # limits of a's dtype: an integer tensor is clamped in its dtype, as PyTorch's
    return a.clamp(a.new_full((), min_val), a.new_full((), max_val))


@opmath
def hardsigmoid(a):
    refuse(_HARDSIGMOID, a)
    return (a + 3).clamp(0, 6) / 6


@opmath
def hardswish(a):
    refuse(_HARDSWISH, a)
    return a * (a + 3).clamp(0, 6) / 6


@opmath
def softsign(a):
    return a / (1 + a.abs())


@opmath
def tanhshrink(a):
    refuse(_TANHSHRINK, a)
    return a - a.tanh()


@opmath
def silu(a):
    refuse(_SILU, a)
    if a.is_complex():
        return a / (1 + (-a).exp())  # PyTorch's quotient: +0 for the real part of -0+0j
    return a * a.sigmoid()


@opmath
def silu_backward(g, a):
    s = a.sigmoid()
    return g * s * (1 + a * (1 - s))


@opmath
def softplus(a, beta=1.0, threshold=20.0):
    refuse(_SOFTPLUS, a)
    # above the threshold the value is the input itself: log1p(exp) would overflow there
    z = a * beta
    return _where(z > threshold, a, z.clamp(max=threshold).exp().log1p() / beta)


@opmath
def mish(a):
    refuse(_MISH, a)
    return a * softplus(a).tanh()


@opmath
def logsigmoid(a):
    refuse(_LOGSIGMOID, a)
    return 0 - softplus(-a)  # +0 at +inf, as PyTorch (a negation gives -0)


@opmath
def elu(a, alpha=1.0):
    refuse(_ELU, a)
    return _where(a > 0, a, alpha * a.expm1())


@opmath
def celu(a, alpha=1.0):
    refuse(_CELU, a)
    return _where(a > 0, a, alpha * (a / alpha).expm1())


@opmath
def selu(a):
    refuse(_SELU, a)
    return _SELU_SCALE * elu(a, _SELU_ALPHA)


@opmath
def gelu(a, approximate="none"):
    refuse(_GELU, a)
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (a + 0.044715 * a * a * a)
        return 0.5 * a * (1 + inner.tanh())
    return 0.5 * a * (1 + (a * math.sqrt(0.5)).erf())


@opmath
def gelu_backward(g, a, approximate="none"):
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        t = (k * (a + 0.044715 * a * a * a)).tanh()
        return g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * 0.044715 * a * a))
    cdf = 0.5 * (1 + (a * math.sqrt(0.5)).erf())
    pdf = (-0.5 * a * a).exp() / math.sqrt(2 * math.pi)
    return g * (cdf + a * pdf)


def activation_backward(g, a, activation, **params):
    if a.is_complex() and activation in ("softsign", "tanhshrink"):
        if activation == "tanhshrink":
            t = a.tanh()
            return g * (t * t).conj()  # PyTorch's convention for complex: conj(f'(z))
        mag = a.abs()
        d = 1 + mag
        # z / (1 + |z|) is not holomorphic: its |z| adds -Re(g conj(z)) sgn(z) / d^2
        sgn = a / _where(mag == 0, mag.new_ones(()), mag)
        return g / d - (g * a.conj()).real * sgn / (d * d)
    if a.dtype in HALF:
        return activation_backward(g.float(), a.float(), activation, **params).to(g.dtype)
    # zero where the slope is, whatever the gradient there (an infinite one included)
    if activation == "relu":
        return _where(a <= 0, g.new_zeros(()), g)  # g where a is NaN
    if activation == "hardswish":
        return _where(a < -3, g.new_zeros(()), _where(a > 3, g, g * (a / 3 + 0.5)))
    return g * _derivative(a, activation, params)


def _derivative(a, activation, params):
    """f'(a) of the activation ``activation`` (real ``a``)."""
    one = a.new_ones(())
    if activation == "relu":
        return (a > 0).to(a.dtype)
    if activation == "leaky_relu":
        return _where(a > 0, one, a.new_full((), params["negative_slope"]))
    if activation in ("elu", "selu", "celu"):
        alpha = params.get("alpha", _SELU_ALPHA)
        below = (_where(a > 0, a.new_zeros(()), a) / (alpha if activation == "celu" else 1)).exp()
        d = _where(a > 0, one, below * (1 if activation == "celu" else alpha))
        return d * _SELU_SCALE if activation == "selu" else d
    if activation == "softplus":
        z = a * params["beta"]
        return _where(z > params["threshold"], one, z.sigmoid())
    if activation == "mish":
        t = softplus(a).tanh()
        return t + a * (1 - t * t) * a.sigmoid()
    if activation == "hardtanh":
        return (a > params["min_val"]).bitwise_and(a < params["max_val"]).to(a.dtype)
    if activation == "hardsigmoid":
        return (a > -3).bitwise_and(a < 3).to(a.dtype) / 6
    if activation == "logsigmoid":
        return (-a).sigmoid()
    if activation == "softsign":
        d = 1 + a.abs()
        return 1 / (d * d)
    if activation == "tanhshrink":
        t = a.tanh()
        return t * t
    raise ValueError(f"activation_backward: unknown activation {activation!r}")


# ----- the declarations ------------------------------------------------------------------


def _activation(schema, kernel, decomposition, refuses, doc, examples, **more):
    """The declaration of a forward activation: the first input's shape, floating inputs
    (see ``DECLARED``), ``group="nn"``."""
    more.setdefault("floating_inputs", True)
    return define(schema, kernel, shape=first_shape, decomposition=decomposition,
                  refuses=refuses, doc=doc, examples=examples, group="nn", **more)


#: in :data:`torcia.ops.NN`'s order; gelu_backward and silu_backward are differentiable
#: ops of their own, activation_backward a fused first derivative only (higher orders go
#: through differentiable ops, so it has no derivative row). All take floating (or
#: complex) inputs only but hardtanh, which clamps integers in their dtype, and
#: activation_backward, which is given what the forward was; softsign's and tanhshrink's
#: functional forms compute integers with the decomposition, as PyTorch's composites.
DECLARED = (
    _activation("leaky_relu(Tensor x, *, float negative_slope=0.01) -> Tensor",
                Kernels.leaky_relu, leaky_relu, _LEAKY_RELU,
                "``input`` where positive, else ``input * negative_slope``.",
                (("[-2.0, 3.0]", "0.5", "tensor([-1.,  3.])"),), inplace=True),
    _activation("elu(Tensor x, *, float alpha=1.0) -> Tensor", Kernels.elu, elu, _ELU,
                "``input`` where positive, else ``alpha * (exp(input) - 1)``.",
                (("[-1.0, 2.0]", "tensor([-0.6321,  2.0000])"),), inplace=True),
    _activation("selu(Tensor x) -> Tensor", Kernels.selu, selu, _SELU,
                "``scale * elu(input, alpha)`` with alpha = 1.6733 and scale = 1.0507.",
                (("[-1.0, 1.0]", "tensor([-1.1113,  1.0507])"),), inplace=True),
    _activation("celu(Tensor x, *, float alpha=1.0) -> Tensor", Kernels.celu, celu, _CELU,
                "``max(0, input) + min(0, alpha * (exp(input / alpha) - 1))``.",
                (("[-1.0, 2.0]", "tensor([-0.6321,  2.0000])"),), inplace=True,
                checks=_check_celu),
    _activation("gelu(Tensor x, *, str approximate='none') -> Tensor", Kernels.gelu, gelu,
                _GELU,
                "``input * Phi(input)`` (Phi the standard normal CDF); "
                "``approximate=\"tanh\"`` uses\n"
                "``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.",
                (("[-1.0, 0.0, 1.0]", "tensor([-0.1587,  0.0000,  0.8413])"),
                 ("[1.0]", 'approximate="tanh"', "tensor([0.8412])")),
                checks=_check_gelu),
    _activation("silu(Tensor x) -> Tensor", Kernels.silu, silu, _SILU,
                "``input * sigmoid(input)``.",
                (("[0.0, 1.0]", "tensor([0.0000, 0.7311])"),), inplace=True),
    _activation("mish(Tensor x) -> Tensor", Kernels.mish, mish, _MISH,
                "``input * tanh(softplus(input))``.",
                (("[0.0, 1.0]", "tensor([0.0000, 0.8651])"),), inplace=True),
    # PyTorch runs softplus in float32 under CUDA autocast
    _activation("softplus(Tensor x, *, float beta=1.0, float threshold=20.0) -> Tensor",
                Kernels.softplus, softplus, _SOFTPLUS,
                "``log(1 + exp(beta * input)) / beta``, linear where "
                "``beta * input > threshold``.",
                (("[0.0, 30.0]", "tensor([ 0.6931, 30.0000])"),),
                autocast={"cuda": "float32"}),
    _activation("hardtanh(Tensor x, *, float min_val=-1.0, float max_val=1.0) -> Tensor",
                Kernels.hardtanh, hardtanh, _HARDTANH,
                "``input`` clipped to ``[min_val, max_val]``.",
                (("[-2.0, 0.5, 2.0]", "tensor([-1.0000,  0.5000,  1.0000])"),),
                inplace=True, checks=_check_hardtanh, floating_inputs=False),
    _activation("hardswish(Tensor x) -> Tensor", Kernels.hardswish, hardswish, _HARDSWISH,
                "``input * relu6(input + 3) / 6``.",
                (("[0.0, 1.0, 4.0]", "tensor([0.0000, 0.6667, 4.0000])"),), inplace=True),
    _activation("hardsigmoid(Tensor x) -> Tensor", Kernels.hardsigmoid, hardsigmoid,
                _HARDSIGMOID, "``relu6(input + 3) / 6``.",
                (("[-4.0, 0.0, 1.5]", "tensor([0.0000, 0.5000, 0.7500])"),), inplace=True),
    _activation("logsigmoid(Tensor x) -> Tensor", Kernels.logsigmoid, logsigmoid,
                _LOGSIGMOID, "``log(sigmoid(input))``, computed without overflow.",
                (("[0.0, 2.0]", "tensor([-0.6931, -0.1269])"),)),
    _activation("softsign(Tensor x) -> Tensor", Kernels.softsign, softsign, {},
                "``input / (1 + |input|)``.",
                (("[-1.0, 3.0]", "tensor([-0.5000,  0.7500])"),)),
    _activation("tanhshrink(Tensor x) -> Tensor", Kernels.tanhshrink, tanhshrink, _TANHSHRINK,
                "``input - tanh(input)``.", (("[0.0, 1.0]", "tensor([0.0000, 0.2384])"),)),
    define("gelu_backward(Tensor g, Tensor x, *, str approximate='none') -> Tensor",
           Kernels.gelu_backward, shape=grad_like, decomposition=gelu_backward,
           floating_inputs=True, group="nn"),
    define("silu_backward(Tensor g, Tensor x) -> Tensor", Kernels.silu_backward,
           shape=grad_like, decomposition=silu_backward, floating_inputs=True, group="nn"),
    define("activation_backward(Tensor g, Tensor a, str activation, **params) -> Tensor",
           Kernels.activation_backward, shape=grad_like, decomposition=activation_backward,
           group="nn",
           samples=lambda rng: [((random_floats(rng, 3, 4), random_floats(rng, 3, 4), "relu"), {}),
                                ((random_floats(rng, 3, 4), random_floats(rng, 3, 4), "leaky_relu"),
                                 {"negative_slope": 0.1})]),
)
