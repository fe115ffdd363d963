"""What the op families of :mod:`torcia._ops` share: the common shape rules, the kernels
that are one function of the array module, the dtypes an op refuses and the
half-precision wrapper of decompositions. Imports nothing of torcia but dtypes, so that
:mod:`torcia.ops` (below the Tensor) can read the declarations."""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D

#: the dtypes whose decompositions compute in float32 and round once, as the reference
#: kernels (and PyTorch's opmath) do: rounding after each step would drift by several ulps
HALF = (D.float16, D.bfloat16)


#: NumPy kinds of :attr:`torcia._opdef.Declaration.refuses`: complex and bool inputs
COMPLEX, BOOL = "c", "b"


def no_kernel(kernel: str) -> tuple:
    """PyTorch's refusal of a dtype its kernel named ``kernel`` has no loop for: an entry
    of :attr:`torcia._opdef.Declaration.refuses`."""
    return NotImplementedError, f'"{kernel}" not implemented for \'{{}}\''


def refusal(refuses: dict, dtype) -> Exception | None:
    """PyTorch's error for NumPy ``dtype`` in ``refuses`` (kind -> (error class, message
    with ``{}`` for PyTorch's name of the dtype)); None where the dtype is not refused."""
    found = refuses.get(np.dtype(dtype).kind)
    if found is None:
        return None
    error, message = found
    return error(message.format(D.torch_type_name(D.FROM_NUMPY[np.dtype(dtype)])))


class ArrayFunction:
    """A reference kernel that is one function of the array module: read from a backend,
    ``backend.<op>`` is ``backend.xp.<attr>`` itself (``np.exp``, or CuPy's for
    torcia-cuda's subclass), so the kernel table holds the ufunc and a call costs no
    Python frame of torcia's."""

    __slots__ = ("attr",)

    def __init__(self, attr: str):
        self.attr = attr

    def __get__(self, backend, owner=None):
        return self if backend is None else getattr(backend.xp, self.attr)

    def __repr__(self):
        return f"ArrayFunction({self.attr!r})"


def first_shape(x, *rest, **params):
    """The first input's shape and dtype: ``x`` with the same shape as ``g`` (backward
    of activations, ``masked_fill``, ``softmax``...)."""
    return x.shape, x.dtype


def broadcast(*xs, **params):
    """Several inputs broadcast together (Python numbers count as 0-dim), in the first
    tensor's dtype (the dispatcher has promoted them; float32 where none is a tensor)."""
    dtypes = [x.dtype for x in xs if hasattr(x, "dtype")]
    return (np.broadcast_shapes(*(getattr(x, "shape", ()) for x in xs)),
            dtypes[0] if dtypes else np.dtype(np.float32))


def bool_like(x, *rest, **params):
    """The broadcast of the inputs (Python numbers count as 0-dim), as bool: the tests
    (``isnan``, ``eq``...)."""
    return np.broadcast_shapes(*(getattr(v, "shape", ()) for v in (x, *rest))), np.dtype(bool)


def real_like(x, **params):
    """The input's shape, in its real dtype: ``abs``, ``real``, ``imag``."""
    return x.shape, np.empty(0, x.dtype).real.dtype


def grad_like(g, x, *rest, **params):
    """The broadcast of a gradient and an input, in their common dtype (the fused
    ``*_backward`` ops of elementwise functions)."""
    return np.broadcast_shapes(g.shape, x.shape), np.result_type(g.dtype, x.dtype)


def where(condition, a, b):
    """``a`` where ``condition``, else ``b`` (tensors), as ``torcia.where``, for the
    decompositions (this module is below the function)."""
    return a.where(condition, b)


def opmath(fn):
    """``fn`` computed in float32 for half-precision tensors, its result rounded back.
    Tensors are told by their torcia dtype (this module is below the Tensor class)."""
    def run(a, *args, **kw):
        if getattr(a, "dtype", None) in HALF:
            wide = [t.float() if getattr(t, "dtype", None) in HALF else t for t in args]
            return fn(a.float(), *wide, **kw).to(a.dtype)
        return fn(a, *args, **kw)

    run.__name__ = fn.__name__
    run.__wrapped__ = fn  # its signature and source (the op reference shows the source)
    return run


def low_precision(a) -> bool:
    """float16 or bfloat16 (an array): kernels that PyTorch runs in float32 on the CPU."""
    return a.dtype.itemsize == 2 and D.np_floating(a.dtype)


def in_float32(*arrays):
    """``arrays`` in float32 (None and bool masks as they are)."""
    return tuple(a if a is None or a.dtype == bool else a.astype(np.float32) for a in arrays)
