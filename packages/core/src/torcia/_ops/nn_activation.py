"""The elementwise activations of :data:`torcia.ops.NN` and their fused backward ops,
each declared once: schema, reference kernel, meta shape, decomposition, autocast policy.

A kernel here is written as a method of the reference backend: ``self.xp`` is the array
module (NumPy, or CuPy for torcia-cuda's subclass) and ``self.sigmoid``/``self.erf`` its
other kernels; arrays come positionally, parameters as keywords. A decomposition is
written with Tensor methods only (it runs on any device, and this module is below the
Tensor class). Each forward activation's declaration also says what its functional form
(``torcia.nn.functional.softplus``), made from it below, needs: its docstring and
examples, whether it takes ``inplace``, the dtypes it refuses and the checks of its
arguments. The public functions written below with them (``prelu``, ``relu6``; PyTorch's
``torch.*`` names that run torcia-nn's forms) reach dispatch late-bound
(:data:`torcia._opdef.CALL`, :data:`torcia._opdef.INPLACE`, :data:`torcia._opdef.PUBLIC`):
``torcia`` exports ``__all__`` and :data:`torcia.library.functional` the ``FUNCTIONAL``
forms; softmax's are ``nn_norm``'s, beside its declaration. Their derivatives are in
torcia-autograd.
"""

from __future__ import annotations

import math
import types

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import (
    BOOL,
    COMPLEX,
    HALF,
    autocast_as,
    check_tensor,
    examples_section,
    first_shape,
    functional,
    grad_like,
    in_float32,
    low_precision,
    opmath,
    opmath_kernel,
    random_floats,
    refusal,
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


#: activations that PyTorch composes of ops (F.softsign, F.tanhshrink), each rounding to
#: a half-float input's dtype: not computed in float32 here either
_COMPOSITE = ("softsign", "tanhshrink")


def _backward_in_float32(activation, float16) -> bool:
    """Whether a half-float gradient of ``activation`` is computed in float32 and rounded
    once, as PyTorch's kernels (its float16 sigmoid_backward rounds after each product,
    its bfloat16 one does not), for the kernel and the decomposition alike."""
    return activation not in _COMPOSITE and not (activation == "sigmoid" and float16)


class Kernels:
    """The reference kernels, methods of the reference backend (see the module's doc)."""

    @opmath_kernel
    def leaky_relu(self, a, negative_slope=0.01):
        """leaky_relu(a, negative_slope): a where a > 0, else a * negative_slope."""
        return self.xp.where(a > 0, a, a * a.dtype.type(negative_slope))

    @opmath_kernel
    def elu(self, a, alpha=1.0):
        """elu(a, alpha): a where a > 0, else alpha * (exp(a) - 1)."""
        xp = self.xp
        # the positive inputs zeroed (their exp could overflow), -0.0 kept: elu(-0.0) is
        # -0.0 in PyTorch
        neg = xp.expm1(xp.where(a > 0, a.dtype.type(0), a)) * a.dtype.type(alpha)
        return xp.where(a > 0, a, neg)

    @opmath_kernel
    def selu(self, a):
        """selu(a): scale * elu(a, alpha) with the self-normalising constants."""
        return self.elu(a, alpha=_SELU_ALPHA) * a.dtype.type(_SELU_SCALE)

    @opmath_kernel
    def celu(self, a, alpha=1.0):
        """celu(a, alpha): max(0, a) + min(0, alpha * (exp(a / alpha) - 1))."""
        xp = self.xp
        al = a.dtype.type(alpha)
        return xp.where(a > 0, a, xp.expm1(xp.where(a > 0, a.dtype.type(0), a) / al) * al)

    @opmath_kernel
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

    @opmath_kernel
    def silu(self, a):
        """silu(a): a * sigmoid(a); a / (1 + exp(-a)) for a complex a, as PyTorch (the
        product gives -0 for the real part of -0+0j, the quotient PyTorch's +0)."""
        if a.dtype.kind == "c":
            return a / (1 + self.xp.exp(-a))
        return a * self.sigmoid(a)

    @opmath_kernel
    def silu_backward(self, g, a):
        """silu_backward(g, a): g * silu'(a) = g * s * (1 + a * (1 - s)), s = sigmoid(a)."""
        s = self.sigmoid(a)
        return g * s * (1 + a * (1 - s))

    @opmath_kernel
    def softplus(self, a, beta=1.0, threshold=20.0):
        """softplus(a, beta, threshold): log(1 + exp(beta * a)) / beta; a where
        beta * a > threshold."""
        xp = self.xp
        b = a * a.dtype.type(beta)
        return xp.where(b > threshold, a, xp.logaddexp(0, b) / a.dtype.type(beta))

    @opmath_kernel
    def mish(self, a):
        """mish(a): a * tanh(softplus(a))."""
        return a * self.xp.tanh(self.xp.logaddexp(0, a))

    # NOTE: ml_dtypes' bfloat16 has no clip loop (NumPy computes it in float32): the results
    # are cast back to the input's dtype
    def hardtanh(self, a, min_val=-1.0, max_val=1.0):
        """hardtanh(a, min_val, max_val): a clipped to [min_val, max_val]."""
        return self.xp.clip(a, a.dtype.type(min_val), a.dtype.type(max_val)).astype(
            a.dtype, copy=False)

    @opmath_kernel
    def hardswish(self, a):
        """hardswish(a): a * clip(a + 3, 0, 6) / 6."""
        return (a * self.xp.clip(a + 3, 0, 6) / 6).astype(a.dtype, copy=False)

    @opmath_kernel
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
        through differentiable ops). For ``sigmoid`` and ``tanh`` (real), ``a`` is the
        forward's output, as for PyTorch's ``sigmoid_backward`` and ``tanh_backward``."""
        xp = self.xp
        if low_precision(a) and _backward_in_float32(activation, a.dtype == np.float16):
            return self.activation_backward(*in_float32(g, a), activation, **params).astype(
                g.dtype)
        one = a.dtype.type(1)
        if activation == "sigmoid":
            return g * (one - a) * a  # PyTorch's order of the products
        if activation == "tanh":
            return g * (one - a * a)
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
            # 0 at -3 and g at 3, as PyTorch's (the middle formula would give -g/2, 3g/2)
            return xp.where(a <= -3, 0, xp.where(a >= 3, g, g * (a / 3 + a.dtype.type(0.5))))
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
def sloped_below_zero(a, negative_slope=0.01):
    refuse(_LEAKY_RELU, a)
    return _where(a > 0, a, a * negative_slope)


@opmath
def clamped_to_limits(a, min_val=-1.0, max_val=1.0):
    refuse(_HARDTANH, a)
    # limits of a's dtype: an integer tensor is clamped in its dtype, as PyTorch's
    return a.clamp(a.new_full((), min_val), a.new_full((), max_val))


@opmath
def ramp_to_one(a):
    refuse(_HARDSIGMOID, a)
    return (a + 3).clamp(0, 6) / 6


@opmath
def times_ramp_to_one(a):
    refuse(_HARDSWISH, a)
    return a * (a + 3).clamp(0, 6) / 6


@opmath
def over_one_plus_abs(a):
    return a / (1 + a.abs())


@opmath
def minus_tanh(a):
    refuse(_TANHSHRINK, a)
    return a - a.tanh()


@opmath
def times_sigmoid(a):
    refuse(_SILU, a)
    if a.is_complex():
        return a / (1 + (-a).exp())  # PyTorch's quotient: +0 for the real part of -0+0j
    return a * a.sigmoid()


@opmath
def silu_backward(g, a):
    s = a.sigmoid()
    return g * s * (1 + a * (1 - s))


@opmath
def log_one_plus_exp(a, beta=1.0, threshold=20.0):
    refuse(_SOFTPLUS, a)
    # above the threshold the value is the input itself: log1p(exp) would overflow there
    z = a * beta
    return _where(z > threshold, a, z.clamp(max=threshold).exp().log1p() / beta)


@opmath
def times_tanh_log_one_plus_exp(a):
    refuse(_MISH, a)
    return a * log_one_plus_exp(a).tanh()


@opmath
def log_of_sigmoid(a):
    refuse(_LOGSIGMOID, a)
    return 0 - log_one_plus_exp(-a)  # +0 at +inf, as PyTorch (a negation gives -0)


@opmath
def expm1_below_zero(a, alpha=1.0):
    refuse(_ELU, a)
    return _where(a > 0, a, alpha * a.expm1())


@opmath
def expm1_over_alpha_below_zero(a, alpha=1.0):
    refuse(_CELU, a)
    return _where(a > 0, a, alpha * (a / alpha).expm1())


@opmath
def scaled_expm1_below_zero(a):
    refuse(_SELU, a)
    return _SELU_SCALE * expm1_below_zero(a, _SELU_ALPHA)


@opmath
def times_normal_cdf(a, approximate="none"):
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
    if a.dtype in HALF and _backward_in_float32(activation, a.dtype is D.float16):
        return activation_backward(g.float(), a.float(), activation, **params).to(g.dtype)
    # zero where the slope is, whatever the gradient there (an infinite one included)
    if activation == "relu":
        return _where(a <= 0, g.new_zeros(()), g)  # g where a is NaN
    if activation == "hardswish":
        return _where(a <= -3, g.new_zeros(()), _where(a >= 3, g, g * (a / 3 + 0.5)))
    if activation == "sigmoid":
        return g * (1 - a) * a  # PyTorch's order of the products, as the kernel's
    return g * _derivative(a, activation, params)


def _derivative(a, activation, params):
    """f'(a) of the activation ``activation`` (real ``a``; sigmoid's and tanh's output)."""
    one = a.new_ones(())
    if activation == "sigmoid":
        return a * (1 - a)
    if activation == "tanh":
        return 1 - a * a
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
        t = log_one_plus_exp(a).tanh()
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
                Kernels.leaky_relu, sloped_below_zero, _LEAKY_RELU,
                "``input`` where positive, else ``input * negative_slope``.",
                (("[-2.0, 3.0]", "0.5", "tensor([-1.,  3.])"),), inplace=True),
    _activation("elu(Tensor x, *, float alpha=1.0) -> Tensor", Kernels.elu, expm1_below_zero, _ELU,
                "``input`` where positive, else ``alpha * (exp(input) - 1)``.",
                (("[-1.0, 2.0]", "tensor([-0.6321,  2.0000])"),), inplace=True),
    _activation("selu(Tensor x) -> Tensor", Kernels.selu, scaled_expm1_below_zero, _SELU,
                "``scale * elu(input, alpha)`` with alpha = 1.6733 and scale = 1.0507.",
                (("[-1.0, 1.0]", "tensor([-1.1113,  1.0507])"),), inplace=True),
    _activation("celu(Tensor x, *, float alpha=1.0) -> Tensor", Kernels.celu,
                expm1_over_alpha_below_zero, _CELU,
                "``max(0, input) + min(0, alpha * (exp(input / alpha) - 1))``.",
                (("[-1.0, 2.0]", "tensor([-0.6321,  2.0000])"),), inplace=True,
                checks=_check_celu),
    _activation("gelu(Tensor x, *, str approximate='none') -> Tensor", Kernels.gelu,
                times_normal_cdf, _GELU,
                "``input * Phi(input)`` (Phi the standard normal CDF); "
                "``approximate=\"tanh\"`` uses\n"
                "``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.",
                (("[-1.0, 0.0, 1.0]", "tensor([-0.1587,  0.0000,  0.8413])"),
                 ("[1.0]", 'approximate="tanh"', "tensor([0.8412])")),
                checks=_check_gelu),
    _activation("silu(Tensor x) -> Tensor", Kernels.silu, times_sigmoid, _SILU,
                "``input * sigmoid(input)``.",
                (("[0.0, 1.0]", "tensor([0.0000, 0.7311])"),), inplace=True),
    _activation("mish(Tensor x) -> Tensor", Kernels.mish, times_tanh_log_one_plus_exp, _MISH,
                "``input * tanh(softplus(input))``.",
                (("[0.0, 1.0]", "tensor([0.0000, 0.8651])"),), inplace=True),
    # PyTorch runs softplus in float32 under CUDA autocast
    _activation("softplus(Tensor x, *, float beta=1.0, float threshold=20.0) -> Tensor",
                Kernels.softplus, log_one_plus_exp, _SOFTPLUS,
                "``log(1 + exp(beta * input)) / beta``, linear where "
                "``beta * input > threshold``.",
                (("[0.0, 30.0]", "tensor([ 0.6931, 30.0000])"),),
                autocast={"cuda": "float32"}),
    _activation("hardtanh(Tensor x, *, float min_val=-1.0, float max_val=1.0) -> Tensor",
                Kernels.hardtanh, clamped_to_limits, _HARDTANH,
                "``input`` clipped to ``[min_val, max_val]``.",
                (("[-2.0, 0.5, 2.0]", "tensor([-1.0000,  0.5000,  1.0000])"),),
                inplace=True, checks=_check_hardtanh, floating_inputs=False),
    _activation("hardswish(Tensor x) -> Tensor", Kernels.hardswish, times_ramp_to_one, _HARDSWISH,
                "``input * relu6(input + 3) / 6``.",
                (("[0.0, 1.0, 4.0]", "tensor([0.0000, 0.6667, 4.0000])"),), inplace=True),
    _activation("hardsigmoid(Tensor x) -> Tensor", Kernels.hardsigmoid, ramp_to_one,
                _HARDSIGMOID, "``relu6(input + 3) / 6``.",
                (("[-4.0, 0.0, 1.5]", "tensor([0.0000, 0.5000, 0.7500])"),), inplace=True),
    _activation("logsigmoid(Tensor x) -> Tensor", Kernels.logsigmoid, log_of_sigmoid,
                _LOGSIGMOID, "``log(sigmoid(input))``, computed without overflow.",
                (("[0.0, 2.0]", "tensor([-0.6931, -0.1269])"),)),
    _activation("softsign(Tensor x) -> Tensor", Kernels.softsign, over_one_plus_abs, {},
                "``input / (1 + |input|)``.",
                (("[-1.0, 3.0]", "tensor([-0.5000,  0.7500])"),)),
    _activation("tanhshrink(Tensor x) -> Tensor", Kernels.tanhshrink, minus_tanh, _TANHSHRINK,
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


# ----- public functions (functional.gelu, torcia.prelu...): checks, then the ops -------


def _runner(op):
    """``run(input, inplace_, **params)``: the declared activation ``op`` of ``input`` (in
    place with ``inplace_``) after its declaration's checks and refusals."""
    name, checks, decomposition = op.name, op.checks, op.decomposition
    # whether each dtype is refused, as dtypes are met: a call pays a dict lookup, and
    # import does not load ml_dtypes for bfloat16's NumPy dtype
    refused = {}
    # what is not refused of integers is PyTorch's composite, computed in their dtype
    # (softsign's 1 + |x| wraps: int8 127 gives -128)
    composite = frozenset(d for d in D.ALL if op.floating_inputs and d.category < 2)

    def run(input, inplace_, **params):
        check_tensor(input, "input", name)
        if checks is not None:
            checks(input, **params)
        dtype = input.dtype
        if refused.get(dtype) is None:
            refused[dtype] = refusal(op.refuses, dtype.to_numpy()) is not None
        if refused[dtype]:
            raise refusal(op.refuses, dtype.to_numpy())
        if dtype in composite:
            return decomposition(input, **params)
        if inplace_:
            return _opdef.INPLACE(lambda t: _opdef.CALL(name, (t,), params), input)
        return _opdef.CALL(name, (input,), params)

    return run


def _public(op):
    """The functional form of the declared activation ``op``, as ``torch.nn.functional``
    has it: ``input``, the schema's parameters with their defaults (a float one converted
    with ``float``), ``inplace=False`` where the declaration has ``inplace``; its docstring
    the declaration's doc and examples."""
    names = ["input", *op.params, *(["inplace"] if op.inplace else [])]
    given = "".join(f", {p}=float({p})" if isinstance(default, float) else f", {p}={p}"
                    for p, default in op.params.items())
    # written out and compiled, so that the function has the schema's signature (for
    # inspect.signature and for calls by keyword) at the cost of a plain call
    source = (f"def {op.name}({', '.join(names)}):\n"
              f"    return run(input, {'inplace' if op.inplace else 'False'}{given})\n")
    namespace = {"__name__": __name__, "run": _runner(op)}
    exec(source, namespace)
    fn = namespace[op.name]
    fn.__defaults__ = (*op.params.values(), *([False] if op.inplace else []))
    fn.__doc__ = op.doc + examples_section(f"F.{op.name}", op.examples,
                                           ("torcia", "torcia.nn.functional as F"))
    return fn


#: the functional forms made from the declarations of the activations (those of one input:
#: the backward ops take the gradient too), named here for the functions below
_made = types.SimpleNamespace(**{op.name: _public(op) for op in DECLARED
                                 if len(op.inputs) == 1})
globals().update(vars(_made))
# also at torcia.* (as torch.celu and torch.selu), named here for __all__ below
celu, selu = _made.celu, _made.selu


def relu6(input, inplace=False):
    """``min(max(0, input), 6)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.relu6(torcia.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """
    return _made.hardtanh(input, 0.0, 6.0, inplace)


@autocast_as("prelu")
def prelu(input, weight):
    """``input`` where positive, else ``weight * input``; ``weight`` has one element or
    one per channel (dim 1).

    Examples
    --------
    >>> import torcia
    >>> torcia.prelu(torcia.tensor([[-2.0, 3.0]]), torcia.tensor([0.25]))
    tensor([[-0.5000,  3.0000]])
    """
    n = weight.numel()
    if n != 1:
        channels = input.shape[1] if input.ndim >= 2 else input.shape[0] if input.ndim else 1
        if n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {channels}.")
        shape = [1] * input.ndim
        shape[1 if input.ndim >= 2 else 0] = n
        weight = weight.reshape(shape)
    elif weight.ndim:
        weight = weight.reshape(())
    return _opdef.PUBLIC.where(input > 0, input, input * weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rrelu(torcia.tensor([-2.0, 1.0]), 0.5, 0.5)
    tensor([-1.,  1.])
    """
    return functional().rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-2.0, 1.0])
    >>> torcia.rrelu_(x, 0.25, 0.25)
    tensor([-0.5000,  1.0000])
    """
    return functional().rrelu_(input, lower, upper, training)


def threshold(input, threshold, value):
    """``torch.threshold``: ``value`` where ``input <= threshold``.

    Examples
    --------
    >>> import torcia
    >>> torcia.threshold(torcia.tensor([0.5, 2.0]), 1.0, -1.0)
    tensor([-1.,  2.])
    """
    return functional().threshold(input, threshold, value)


def threshold_(input, threshold, value):
    """``torch.threshold_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([0.5, 2.0])
    >>> torcia.threshold_(x, 1.0, 0.0)
    tensor([0., 2.])
    """
    return functional().threshold_(input, threshold, value)


def hardshrink(input, lambd=0.5):
    """``torch.hardshrink``.

    Examples
    --------
    >>> import torcia
    >>> torcia.hardshrink(torcia.tensor([-1.0, 0.25]))
    tensor([-1.,  0.])
    """
    return functional().hardshrink(input, lambd)


def celu_(input, alpha=1.0):
    """``torch.celu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-1.0, 1.0])
    >>> torcia.celu_(x)
    tensor([-0.6321,  1.0000])
    """
    return functional().celu_(input, alpha)


def selu_(input):
    """``torch.selu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([0.0, 1.0])
    >>> torcia.selu_(x)
    tensor([0.0000, 1.0507])
    """
    return functional().selu_(input)


def prelu_method(self, weight):
    """``Tensor.prelu(weight)``: :func:`torcia.prelu` of ``self``.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([-2.0, 3.0]).prelu(torcia.tensor([0.25]))
    tensor([-0.5000,  3.0000])
    """
    return functional().prelu(self, weight)


#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = (*vars(_made), "prelu", "relu6")

#: the names ``torcia`` exports from here
__all__ = [
    "celu", "celu_", "hardshrink", "prelu", "rrelu", "rrelu_", "selu", "selu_", "threshold",
    "threshold_",
]
