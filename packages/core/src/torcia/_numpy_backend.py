"""The reference backend: a kernel for every op in :mod:`torcia.ops`, written against an
array module ``xp``.

These kernels define what each op means. They are plain and obvious rather than fast;
faster backends (torcia-cpu) override some of them and are tested against them. The same
class serves CuPy by setting ``xp`` (torcia-cuda subclasses it).
"""

from __future__ import annotations

import numpy as np

from torcia import ops
from torcia._dtype import FROM_NUMPY
from torcia._kernels_nn import NNKernels
from torcia._ops import DECLARED
from torcia._ops._common import refusal as _refusal
from torcia._tensor import _torch_name
from torcia.backend import Backend
from torcia.plugins import hookimpl

# Ops PyTorch has no kernel for on some dtypes, by NumPy kind ("c" complex, "b" bool):
# the error it raises, its message formatted with PyTorch's name of the dtype. NumPy would
# order complex numbers lexicographically and do bool arithmetic in its own way. They come
# from the ops' declarations.
_REFUSED = {name: op.refuses for name, op in DECLARED.items() if op.refuses}


# inputs PyTorch answers before it looks for the dtype's kernel (a scan of an empty tensor),
# from the declarations
_ANSWERED_EARLY = {name: op.answers_early for name, op in DECLARED.items() if op.answers_early}


def refusal(op: str, dtype) -> Exception | None:
    """PyTorch's error for ``op`` on NumPy ``dtype`` where it has no kernel for it (None
    where it has one): what the reference kernel raises, for a decomposition to raise."""
    return _refusal(_REFUSED.get(op, {}), dtype)


def _refusing(name, kernel, refused):
    """``kernel`` refusing operands of the NumPy kinds in ``refused`` with PyTorch's error.
    The array-module ufuncs get a wrapper of their exact arity, so the check costs a few
    attribute reads a call."""
    early = _ANSWERED_EARLY.get(name)

    def check(x):
        if x.__class__ is not complex and x.dtype.kind in refused and not (
                early is not None and early(x)):
            error, message = refused[x.dtype.kind]
            raise error(message.format(_torch_name(FROM_NUMPY[x.dtype])))

    nin = getattr(kernel, "nin", None)
    if nin == 1:
        def run(a):
            check(a)
            return kernel(a)
    elif nin == 2:
        def run(a, b):
            check(a)
            if hasattr(b, "dtype"):
                check(b)
            return kernel(a, b)
    else:
        def run(a, *rest, **params):
            check(a)
            return kernel(a, *rest, **params)

    run.__name__ = name
    # the record's kernel names the kernel it checks (Kernels.softplus)
    run.__qualname__ = getattr(kernel, "__qualname__", name)
    run.__wrapped__ = kernel  # the op's schema is read from the kernel's signature
    run.__doc__ = kernel.__doc__
    return run


#: the kernels of the declared ops (torcia._ops), each a method named as its op
DeclaredKernels = type("DeclaredKernels", (), {
    "__doc__": "The reference kernels of the ops declared in :mod:`torcia._ops`.",
    "__module__": __name__, **{name: op.kernel for name, op in DECLARED.items()}})


class Reference(DeclaredKernels, NNKernels):
    """Kernels on ``xp`` arrays. Methods named like ops are kernels; ``table()`` lists them.

    The kernels of every op come from its declaration in :mod:`torcia._ops` through
    :class:`DeclaredKernels`; :class:`~torcia._kernels_nn.NNKernels` adds
    ``logsumexp_rows``, the cross-entropy kernels' helper that torcia-cpu runs natively.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> kernels = library.ReferenceKernels()
    >>> "add" in kernels.table(), "conv2d" in kernels.table()
    (True, False)
    """

    xp = np

    def table(self) -> dict:
        out = {}
        for name in ops.ALL:
            fn = getattr(self, name, None)
            if fn is not None and callable(fn):
                out[name] = fn
        for name, refused in _REFUSED.items():
            out[name] = _refusing(name, out[name], refused)
        return out


# ---------------------------------------------------------------------------------------
# the built-in plugin: core registers its own backend through the same hooks as others
# ---------------------------------------------------------------------------------------


class NumpyPlugin:
    """Core's built-in plugin: the "cpu" device on NumPy, with the reference kernels."""

    @hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("cpu", np, fallback="reference"))

    @hookimpl
    def torcia_register_kernels(self, registry):
        for name, fn in Reference().table().items():
            registry.add(name, "cpu", fn, priority=0)
