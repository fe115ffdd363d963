"""The complex-number ops, each declared once: schema, reference kernel, meta shape,
decomposition. ``real``, ``imag``, ``view_as_real`` and ``view_as_complex`` are views of
their input (their public functions mark them so); ``conj`` is a copy, ``angle`` the
argument (of a real number: 0, or pi below 0), ``complex`` builds one from two real
tensors. Their public functions are at the end of this module, next to their
declarations, and after them those built on them (``polar``, ``sgn``, ``conj_physical``,
the lazy-bit queries, ``Tensor.cfloat``...), which :mod:`torcia._oplib` registers as a
family; their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import torch_type_name as _torch_name
from torcia._opdef import define
from torcia._ops._common import check_tensor, first_shape, floating_dtype, op, real_dtype, real_like
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


def _complex_of(dtype):
    return np.dtype(np.complex128 if dtype == np.float64 else np.complex64)


class Kernels:
    """The reference kernels (``self.xp`` the array module)."""

    def real(self, a):
        return a.real

    def imag(self, a):
        return a.imag

    def view_as_real(self, a):
        real = a.real.dtype
        return self.xp.expand_dims(a, -1).view(real)

    def view_as_complex(self, a):
        xp = self.xp
        cplx = _complex_of(a.dtype)
        return a.view(cplx)[..., 0] if a.ndim > 1 else xp.squeeze(a.view(cplx), -1)

    def conj(self, a):
        return self.xp.conj(a)

    def angle(self, a):
        xp = self.xp
        out = xp.angle(a)
        if a.dtype.kind != "c":
            # pi for negative numbers only: NumPy's angle(-0.0) is pi (the sign bit), and
            # NaN stays NaN
            out = xp.where(xp.isnan(a), a, xp.where(a < 0, out, 0))
        return out.astype(a.real.dtype, copy=False)

    def complex(self, re, im):
        xp = self.xp
        shape = xp.broadcast_shapes(re.shape, im.shape)
        out = xp.empty(shape, dtype=_complex_of(re.dtype))
        out.real = re
        out.imag = im
        return out


# ----- meta shapes -----------------------------------------------------------------------


def _angle_shape(x, **params):
    dtype = floating_dtype(x.dtype)
    return x.shape, real_dtype(dtype) if dtype.kind == "c" else dtype


def _view_as_real_shape(x, **params):
    return x.shape + (2,), real_dtype(x.dtype)


def _view_as_complex_shape(x, **params):
    if not x.shape or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return x.shape[:-1], _complex_of(x.dtype)


def _complex_shape(re, im, **params):
    return np.broadcast_shapes(re.shape, im.shape), _complex_of(re.dtype)


# ----- decompositions ----------------------------------------------------------------------


def angle_of_parts(a):
    if a.is_complex():
        return a.imag.atan2(a.real)
    # pi for negative numbers only (not for -0.0), NaN kept; the gradient is 0
    return _where(a.isnan(), a, _where(a < 0, a.new_full((), math.pi), a.new_zeros(())))


def conj_of_parts(a):
    if not a.is_complex():
        return a.clone()  # the kernel's copy
    return op("complex", a.real, -a.imag)  # -0.0 where the part was 0.0, as the kernel's


def complex_of_parts(re, im):
    # the parts side by side along a new last dim, read as complex numbers: exact, where
    # re + 1j * im would turn an infinite part's product with 0 into NaN
    part = D.float64 if re.dtype == D.float64 else D.float32  # as the kernel's _complex_of
    re, im = _opdef.PUBLIC.broadcast_tensors(re.to(part), im.to(part))
    return op("view_as_complex", _opdef.PUBLIC.stack((re, im), -1))


# ----- the declarations ------------------------------------------------------------------


def _one(name, kernel, shape, **fields):
    return define(f"{name}(Tensor x) -> Tensor", kernel, shape=shape, group="complex",
                  **fields)


DECLARED = (
    _one("real", Kernels.real, real_like),
    _one("imag", Kernels.imag, real_like),
    _one("view_as_real", Kernels.view_as_real, _view_as_real_shape),
    _one("view_as_complex", Kernels.view_as_complex, _view_as_complex_shape),
    _one("conj", Kernels.conj, first_shape, decomposition=conj_of_parts),
    _one("angle", Kernels.angle, _angle_shape, decomposition=angle_of_parts),
    define("complex(Tensor re, Tensor im) -> Tensor", Kernels.complex, shape=_complex_shape,
           decomposition=complex_of_parts, group="complex"),
)


# ----- public functions (torcia.real, torcia.view_as_complex...): the ops' calls by name --


def real(input):
    """The real parts of a complex tensor, as a view (``input`` itself when real).

    Examples
    --------
    >>> import torcia
    >>> torcia.real(torcia.tensor([1 + 2j, 3 - 1j]))
    tensor([1., 3.])
    """
    check_tensor(input, "input", "real")
    if not input.is_complex():
        return input
    return _opdef.CALL("real", (input,), {}, input)


def imag(input):
    """The imaginary parts of a complex tensor, as a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.imag(torcia.tensor([1 + 2j, 3 - 1j]))
    tensor([ 2., -1.])
    """
    check_tensor(input, "input", "imag")
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _opdef.CALL("imag", (input,), {}, input)


def view_as_real(input):
    """A complex tensor as a real one with a last dim of size 2 (real, imaginary): a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.view_as_real(torcia.tensor([1 + 2j]))
    tensor([[1., 2.]])
    """
    check_tensor(input, "input", "view_as_real")
    if not input.is_complex():
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return _opdef.CALL("view_as_real", (input,), {}, input)


def view_as_complex(input):
    """A float tensor whose last dim (size 2, stride 1) holds real and imaginary parts, as a
    complex view.

    Examples
    --------
    >>> import torcia
    >>> torcia.view_as_complex(torcia.tensor([[1.0, 2.0], [3.0, -1.0]]))
    tensor([1.+2.j, 3.-1.j])
    """
    check_tensor(input, "input", "view_as_complex")
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
    return _opdef.CALL("view_as_complex", (input,), {}, input)


def conj(input):
    """The complex conjugate: a copy for a complex tensor (see the module notes), ``input``
    itself for a real one.

    Examples
    --------
    >>> import torcia
    >>> torcia.conj(torcia.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    check_tensor(input, "input", "conj")
    if not input.is_complex():
        return input
    return _opdef.CALL("conj", (input,), {})


def angle(input):
    """The argument of each element in radians (0 or pi for real numbers).

    Examples
    --------
    >>> import torcia
    >>> torcia.angle(torcia.tensor([1j, -1.0 + 0j]))
    tensor([1.5708, 3.1416])
    """
    check_tensor(input, "input", "angle")
    if input.dtype.category < 2:
        input = input.to(D.get_default_dtype())
    return _opdef.CALL("angle", (input,), {})


def complex(real, imag):
    """The complex tensor ``real + 1j * imag`` from two float tensors of one dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.complex(torcia.tensor([1.0]), torcia.tensor([2.0]))
    tensor([1.+2.j])
    """
    for name, x in (("real", real), ("imag", imag)):
        if not isinstance(x, _opdef.PUBLIC.Tensor):
            raise TypeError(f"complex(): argument '{name}' must be Tensor, not "
                            f"{type(x).__name__}")
    if real.dtype not in (D.float32, D.float64) or imag.dtype is not real.dtype:
        raise RuntimeError(f"Expected both inputs to be Float or Double tensors but got "
                           f"{_torch_name(real.dtype)} and {_torch_name(imag.dtype)}")
    return _opdef.CALL("complex", (real, imag), {})


#: the public functions of the ops above, which torcia exports
PUBLIC = (real, imag, view_as_real, view_as_complex, conj, angle, complex)


# ----- public functions built on the ops (torcia.polar, torcia.sgn...) ---------------------


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
    return _opdef.INPLACE(conj_physical, self)


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


#: the functions here that are also Tensor methods, under the same name (``real`` and
#: ``imag`` are properties)
METHODS = (
    "conj", "angle", "conj_physical", "resolve_conj", "resolve_neg", "sgn", "conj_physical_",
    "is_neg", "cfloat", "cdouble",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = (
    "sgn",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in PUBLIC) + (
    "conj_physical", "conj_physical_", "is_complex", "is_conj", "is_neg", "polar",
    "resolve_conj", "resolve_neg", "sgn",
))
