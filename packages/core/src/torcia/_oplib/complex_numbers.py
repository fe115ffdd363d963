"""Complex numbers: ``real``/``imag``, ``view_as_real``/``view_as_complex``, ``conj`` and
its lazy-bit queries, ``angle``, ``sgn``, ``polar``.
"""

from __future__ import annotations

from torcia import _dtype as D
from torcia._tensor import Tensor, _torch_name, call, inplace


def _tensor(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")


def is_complex(input) -> bool:
    """Whether ``input`` has a complex dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_complex(torcia.tensor([1j])), torcia.is_complex(torcia.tensor([1.0]))
    (True, False)
    """
    return input.is_complex()


def real(input):
    """The real parts of a complex tensor, as a view (``input`` itself when real).

    Examples
    --------
    >>> import torcia
    >>> torcia.real(torcia.tensor([1 + 2j, 3 - 1j]))
    tensor([1., 3.])
    """
    _tensor(input, "real")
    if not input.is_complex():
        return input
    return call("real", (input,), {}, view_of=input)


def imag(input):
    """The imaginary parts of a complex tensor, as a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.imag(torcia.tensor([1 + 2j, 3 - 1j]))
    tensor([ 2., -1.])
    """
    _tensor(input, "imag")
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return call("imag", (input,), {}, view_of=input)


def view_as_real(input):
    """A complex tensor as a real one with a last dim of size 2 (real, imaginary): a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.view_as_real(torcia.tensor([1 + 2j]))
    tensor([[1., 2.]])
    """
    _tensor(input, "view_as_real")
    if not input.is_complex():
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return call("view_as_real", (input,), {}, view_of=input)


def view_as_complex(input):
    """A float tensor whose last dim (size 2, stride 1) holds real and imaginary parts, as a
    complex view.

    Examples
    --------
    >>> import torcia
    >>> torcia.view_as_complex(torcia.tensor([[1.0, 2.0], [3.0, -1.0]]))
    tensor([1.+2.j, 3.-1.j])
    """
    _tensor(input, "view_as_complex")
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {_torch_name(input.dtype)}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    # a meta tensor holds no storage: it has no strides to check
    if input.device.type != "meta" and input.stride(-1) != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if input.device.type != "meta" and any(s % 2 for s in input.stride()[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last "
                           "dimension")
    return call("view_as_complex", (input,), {}, view_of=input)


def conj(input):
    """The complex conjugate: a copy for a complex tensor (see the module notes), ``input``
    itself for a real one.

    Examples
    --------
    >>> import torcia
    >>> torcia.conj(torcia.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    _tensor(input, "conj")
    if not input.is_complex():
        return input
    return call("conj", (input,), {})


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


def angle(input):
    """The argument of each element in radians (0 or pi for real numbers).

    Examples
    --------
    >>> import torcia
    >>> torcia.angle(torcia.tensor([1j, -1.0 + 0j]))
    tensor([1.5708, 3.1416])
    """
    _tensor(input, "angle")
    if input.dtype.category < 2:
        input = input.to(D.get_default_dtype())
    return call("angle", (input,), {})


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


def complex(real, imag):
    """The complex tensor ``real + 1j * imag`` from two float tensors of one dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.complex(torcia.tensor([1.0]), torcia.tensor([2.0]))
    tensor([1.+2.j])
    """
    for name, x in (("real", real), ("imag", imag)):
        if not isinstance(x, Tensor):
            raise TypeError(f"complex(): argument '{name}' must be Tensor, not "
                            f"{type(x).__name__}")
    if real.dtype not in (D.float32, D.float64) or imag.dtype is not real.dtype:
        raise RuntimeError(f"Expected both inputs to be Float or Double tensors but got "
                           f"{_torch_name(real.dtype)} and {_torch_name(imag.dtype)}")
    return call("complex", (real, imag), {})


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
METHODS = (
    "conj", "conj_physical", "resolve_conj", "resolve_neg", "angle", "sgn", "conj_physical_",
    "is_neg", "cfloat", "cdouble",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = (
    "sgn",
)

#: the names ``torcia`` exports from here
__all__ = [
    "angle", "complex", "conj", "conj_physical", "conj_physical_", "imag", "is_complex",
    "is_conj", "is_neg", "polar", "real", "resolve_conj", "resolve_neg", "sgn",
    "view_as_complex", "view_as_real",
]
