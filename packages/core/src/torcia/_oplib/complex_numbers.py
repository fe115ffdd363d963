"""Complex numbers: ``real``/``imag``, ``view_as_real``/``view_as_complex``, ``conj`` and
its lazy-bit queries, ``angle``, ``sgn``, ``polar``. The public functions of the ops
(``real``... ``complex``) are written beside their declarations in
:mod:`torcia._ops.complex_numbers`; here are those built on them.
"""

from __future__ import annotations

from torcia import _dtype as D
from torcia._ops import complex_numbers as _declared
from torcia._ops.complex_numbers import complex, conj
from torcia._tensor import inplace

#: the public functions declared beside their ops in torcia._ops.complex_numbers
globals().update({fn.__name__: fn for fn in _declared.PUBLIC})


def is_complex(input) -> bool:
    """Whether ``input`` has a complex dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_complex(torcia.tensor([1j])), torcia.is_complex(torcia.tensor([1.0]))
    (True, False)
    """
    return input.is_complex()












def conj_physical(input):
    """The complex conjugate as a new tensor (as :func:`conj` here).

    Examples
    --------
    >>> import torcia
    >>> torcia.conj_physical(torcia.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    return conj(input)


def resolve_conj(input):
    """``input`` itself: conjugation is never lazy here.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1 - 1j]).conj()
    >>> torcia.resolve_conj(x)
    tensor([1.+1.j])
    """
    return input


def resolve_neg(input):
    """``input`` itself: negation is never lazy here.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0])
    >>> torcia.resolve_neg(x) is x
    True
    """
    return input




def sgn(input):
    """``input / |input|`` for complex tensors (0 at 0), :func:`torcia.sign` for real ones.

    Examples
    --------
    >>> import torcia
    >>> torcia.sgn(torcia.tensor([3 + 4j, 0j]))
    tensor([0.6000+0.8000j, 0.0000+0.0000j])
    """
    if not input.is_complex():
        return input.sign()
    size = input.abs()
    return (input / size.masked_fill(size == 0, 1)).masked_fill(size == 0, 0)




def polar(abs, angle):
    """The complex tensor with modulus ``abs`` and argument ``angle``.

    Examples
    --------
    >>> import torcia
    >>> torcia.polar(torcia.tensor([2.0]), torcia.tensor([0.0]))
    tensor([2.+0.j])
    """
    return complex(abs * angle.cos(), abs * angle.sin())


def conj_physical_(self):
    """In-place :func:`torcia.conj_physical` (a no-op on real tensors)."""
    return inplace(conj_physical, self)


def is_conj(input) -> bool:
    """Whether ``input`` is a lazily conjugated view: never in torcia, whose
    :func:`torcia.conj` returns a conjugated copy.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_conj(torcia.tensor([1 + 2j]).conj())
    False
    """
    return input.is_conj()


def is_neg(input) -> bool:
    """Whether ``input`` is a lazily negated view: never in torcia (negation is computed
    at once), so False.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_neg(-torcia.tensor([1.0]))
    False
    """
    return False


def cfloat(self):
    """``self.to(torcia.cfloat)`` (complex64).

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([1.0, 2.0]).cfloat()
    tensor([1.+0.j, 2.+0.j])
    """
    return self.to(D.complex64)


def cdouble(self):
    """``self.to(torcia.cdouble)`` (complex128).

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([1.0, 2.0]).cdouble()
    tensor([1.+0.j, 2.+0.j], dtype=torcia.complex128)
    """
    return self.to(D.complex128)


#: the functions here that are also Tensor methods, under the same name
METHODS = tuple(fn.__name__ for fn in _declared.METHODS) + (
    "conj_physical", "resolve_conj", "resolve_neg", "sgn", "conj_physical_", "is_neg",
    "cfloat", "cdouble",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = (
    "sgn",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "conj_physical", "conj_physical_", "is_complex", "is_conj", "is_neg", "polar",
    "resolve_conj", "resolve_neg", "sgn",
))
