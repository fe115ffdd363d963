"""``torcia.special``: PyTorch's special functions.

The Bessel, error-function, gamma-family and zeta functions run on SciPy's
``scipy.special`` (``cupyx.scipy.special`` on CUDA), the optional ``torcia-core[scipy]``
extra; without SciPy they raise an error naming it. ``sinc``, ``entr``, ``xlog1py``,
``logit``, ``spherical_bessel_j0`` and the orthogonal polynomials need NumPy only. Integer
inputs give the default float dtype. Gradients follow PyTorch: the Bessel functions of the
``bessel_*``/``modified_bessel_*`` family, ``airy_ai`` and the polynomials give results that
do not require grad, ``zeta`` differentiates in ``other`` only and ``gammainc``/``gammaincc``
in ``other`` only.

Examples
--------
>>> import torcia
>>> torcia.special.ndtr(torcia.tensor([0.0]))
tensor([0.5000])
>>> torcia.special.hermite_polynomial_h(torcia.tensor([0.5]), 3)
tensor([-5.])
"""

from __future__ import annotations

import math
import types

from torcia import _dtype, _oplib
from torcia import ops as _oplist
from torcia._ops import DECLARED
from torcia._ops._common import examples_section, to_float
from torcia._ops.creation import arange
from torcia._ops.nn_norm import log_softmax as _log_softmax
from torcia._ops.nn_norm import softmax as _softmax
from torcia._ops.pointwise import to_dtype
from torcia._ops.unary import digamma, lgamma, sigmoid
from torcia._tensor import Tensor, _torch_name, binary, call, unary

# torch.special's other names of three of them
psi = digamma
gammaln = lgamma
expit = sigmoid


def _public(op):
    """The function of ``torch.special`` made from the declared special function ``op``:
    its docstring is the declaration's ``doc`` and examples."""
    if op.group == "special_unary":
        def fn(input):
            return unary(op.name, input, True)

        doc = (f"Elementwise ``{op.name}`` (as ``torch.special.{op.name}``); integer inputs "
               "give the default float dtype.")
    else:
        def fn(input, other):
            return binary(op.name, input, other, True)

        doc = (f"Elementwise ``{op.name}(input, other)`` (as ``torch.special.{op.name}``), "
               "with broadcasting; either argument may be a number.")
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = ((f"{op.doc}\n\n{doc}" if op.doc else doc)
                  + examples_section(f"torcia.special.{op.name}", op.examples))
    return fn


#: the public functions made from the declarations (the functions below call them as
#: attributes)
_made = types.SimpleNamespace(**{name: _public(DECLARED[name]) for name in
                                 _oplist.SPECIAL_UNARY + _oplist.SPECIAL_BINARY})
globals().update(vars(_made))
#: the ops of other families that torch.special exports under their names too (their
#: declarations' tag "special"): their public functions, as they are
SHARED = _oplist.tagged("special")
globals().update({name: getattr(_oplib, name) for name in SHARED})


def logit(input, eps=None):
    """``log(p / (1 - p))``, with ``input`` first clamped to ``[eps, 1 - eps]`` when ``eps``
    is given.

    Examples
    --------
    >>> import torcia
    >>> torcia.special.logit(torcia.tensor([0.0, 0.5, 1.0]), eps=0.1)
    tensor([-2.1972,  0.0000,  2.1972])
    """
    x = to_float(input)
    if x.dtype.category == 3:
        raise NotImplementedError(f"\"logit_cpu\" not implemented for '{_torch_name(x.dtype)}'")
    if eps is not None:
        # the bounds in the dtype, as PyTorch's kernel takes them: 1 - eps rounded after eps
        lo = x.dtype.np.type(eps)
        x = x.clamp(float(lo), float(x.dtype.np.type(1) - lo))
    # PyTorch's order of operations (each rounded, in half floats too): log(x) -
    # log1p(-x) put 29-31% of float16/bfloat16 results a step off
    return (x / (1 - x)).log()


def multigammaln(input, p):
    """The multivariate log-gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum_{i < p} lgamma(input - i / 2)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.special.multigammaln(torcia.tensor([2.5]), 3)
    tensor([1.8810])
    """
    if not isinstance(p, int) or p < 1:
        raise RuntimeError(f"p has to be greater than or equal to 1, but got {p}")
    if input.dtype.category == 3 or input.dtype is _dtype.bool_:
        raise NotImplementedError(f"\"mvlgamma\" not implemented for "
                                  f"'{_torch_name(input.dtype)}'")
    input = to_float(input)  # integers as the default float dtype
    steps = arange(p, dtype=input.dtype, device=input.device) / 2
    terms = (input.unsqueeze(-1) - steps).lgamma().sum(-1)
    return terms + p * (p - 1) / 4 * math.log(math.pi)


def polygamma(n, input):
    """The ``n``-th derivative of the digamma function (``n = 0`` is :func:`digamma`).

    Examples
    --------
    >>> import torcia
    >>> torcia.special.polygamma(1, torcia.tensor([1.0]))  # pi ** 2 / 6
    tensor([1.6449])
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n, got n={n}")
    if not isinstance(input, Tensor):
        raise TypeError(f"polygamma(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if n == 0:
        return digamma(input)
    if input.is_complex():
        # SciPy's polygamma drops the imaginary part; torch has no complex kernel either
        kernel = "trigamma" if n == 1 else "polygamma"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{_torch_name(input.dtype)}'")
    x = input if input.dtype.is_floating_point else to_dtype(
        input, _dtype.get_default_dtype())
    return call("polygamma", (x,), {"n": n})


def softmax(input, dim, *, dtype=None):
    """Softmax over ``dim`` (as :func:`torcia.softmax`).

    Examples
    --------
    >>> import torcia
    >>> torcia.special.softmax(torcia.tensor([0.0, 1.0, 2.0]), dim=0)
    tensor([0.0900, 0.2447, 0.6652])
    """
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """Log-softmax over ``dim`` (as :func:`torcia.log_softmax`).

    Examples
    --------
    >>> import torcia
    >>> torcia.special.log_softmax(torcia.tensor([0.0, 1.0, 2.0]), dim=0)
    tensor([-2.4076, -1.4076, -0.4076])
    """
    return _log_softmax(input, dim, dtype=dtype)


# ----- PyTorch's top-level and Tensor-method names for some of these ------------------------


def mvlgamma(input, p):
    """As :func:`multigammaln` (``torch.mvlgamma``).

    Examples
    --------
    >>> import torcia
    >>> torcia.mvlgamma(torcia.tensor([2.5, 3.0]), p=2)
    tensor([0.8570, 1.5502])
    """
    return multigammaln(input, p)


def _polygamma_method(input, n):
    """``polygamma(n, self)``: the ``n``-th derivative of the digamma function.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([1.0, 2.0]).polygamma(1)
    tensor([1.6449, 0.6449])
    """
    return polygamma(n, input)


def igamma(input, other):
    """As :func:`gammainc` (``torch.igamma``).

    Examples
    --------
    >>> import torcia
    >>> torcia.igamma(torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 1.0]))
    tensor([0.6321, 0.2642])
    """
    return _made.gammainc(input, other)


def igammac(input, other):
    """As :func:`gammaincc` (``torch.igammac``).

    Examples
    --------
    >>> import torcia
    >>> torcia.igammac(torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 1.0]))
    tensor([0.3679, 0.7358])
    """
    return _made.gammaincc(input, other)


#: torcia.<name> for these (PyTorch's top-level aliases)
TOP_LEVEL = ("i0", "sinc", "logit", "polygamma", "mvlgamma", "igamma", "igammac")
#: Tensor.<name> (and an in-place ``name_``) for these; polygamma takes (n) as a method
METHODS = {"i0": _made.i0, "sinc": _made.sinc, "logit": logit, "mvlgamma": mvlgamma,
           "igamma": igamma, "igammac": igammac, "polygamma": _polygamma_method}

__all__ = sorted(
    _oplist.SPECIAL_UNARY + _oplist.SPECIAL_BINARY + SHARED
    + ("expit", "gammaln", "log_softmax", "logit", "multigammaln", "polygamma", "psi",
       "softmax")
)
