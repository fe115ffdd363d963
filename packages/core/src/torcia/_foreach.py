"""PyTorch's ``torch._foreach_*`` ops: one op over lists of tensors, as optimizers and EMA
libraries call them. Each takes a list of tensors (and a scalar, a list of scalars, a tensor
or a list of tensors as the other operand); ``_foreach_op`` returns a tuple of results,
``_foreach_op_`` updates the tensors in place and returns None, as in PyTorch. They run one
op per tensor: the names are there for the libraries, the speed of fused kernels is not."""

from __future__ import annotations

from types import ModuleType

from torcia import ops as _oplist
from torcia._tensor import Tensor

#: PyTorch's ``_foreach_*`` ops: the declared ones (torcia.ops.tagged), and these
_UNARY = _oplist.tagged("foreach", "unary_float", "unary_same") + ("round",)
_BINARY = _oplist.tagged("foreach", "binary", "binary_float") + ("clamp_min", "clamp_max")
_TERNARY = ("addcmul", "addcdiv")
# in-place forms PyTorch lacks for these (maximum_ and minimum_ are PyTorch's too)
_NO_INPLACE = frozenset({"maximum", "minimum"})


def _check(tensors, name: str) -> list:
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"_foreach_{name}(): argument 'self' must be a list of Tensors")
    return list(tensors)


def _spread(other, n: int, name: str) -> list:
    """``other`` once per tensor: a list as is (of the same length), else repeated."""
    if isinstance(other, (list, tuple)):
        if len(other) != n:
            raise RuntimeError(f"_foreach_{name}: Tensor lists must have the same number of "
                               f"tensors, got {n} and {len(other)}")
        return list(other)
    return [other] * n


def _unary(name, public):
    def out_of_place(self):
        return tuple(getattr(public, name)(t) for t in _check(self, name))

    def in_place(self):
        for t in _check(self, name):
            getattr(t, name + "_")()

    return out_of_place, in_place


def _binary(name, public):
    def out_of_place(self, other, *, alpha=None):
        self = _check(self, name)
        fn = getattr(public, name)
        kw = {} if alpha is None else {"alpha": alpha}
        return tuple(fn(t, o, **kw) for t, o in zip(self, _spread(other, len(self), name)))

    def in_place(self, other, *, alpha=None):
        self = _check(self, name)
        kw = {} if alpha is None else {"alpha": alpha}
        for t, o in zip(self, _spread(other, len(self), name)):
            if name in _NO_INPLACE:
                t.copy_(getattr(public, name)(t, o))
            else:
                getattr(t, name + "_")(o, **kw)

    return out_of_place, in_place


def _ternary(name, public):
    def out_of_place(self, tensor1, tensor2, value=1):
        self = _check(self, name)
        n = len(self)
        fn = getattr(public, name)
        return tuple(fn(t, a, b, value=v) for t, a, b, v in zip(
            self, _spread(tensor1, n, name), _spread(tensor2, n, name),
            _values(value, n, name)))

    def in_place(self, tensor1, tensor2, value=1):
        self = _check(self, name)
        n = len(self)
        for t, a, b, v in zip(self, _spread(tensor1, n, name), _spread(tensor2, n, name),
                              _values(value, n, name)):
            getattr(t, name + "_")(a, b, value=v)

    return out_of_place, in_place


def _values(value, n, name):
    if isinstance(value, Tensor) and value.ndim == 1:
        return value.tolist()
    return _spread(value, n, name)


def _foreach_lerp_(self, tensors1, weight):
    self = _check(self, "lerp")
    n = len(self)
    for t, e, w in zip(self, _spread(tensors1, n, "lerp"), _spread(weight, n, "lerp")):
        t.lerp_(e, w)


def _foreach_max(self):
    return tuple(t.max() for t in _check(self, "max"))


def _foreach_clone(self):
    return tuple(t.clone() for t in _check(self, "clone"))


def _foreach_zero_(self):
    for t in _check(self, "zero"):
        t.zero_()


def _foreach_copy_(self, src, non_blocking=False):
    for t, s in zip(_check(self, "copy"), _spread(src, len(self), "copy")):
        t.copy_(s)


def _through(public):
    """The functions that call an op of ``public`` by a fixed name."""
    def _foreach_lerp(self, tensors1, weight):
        self = _check(self, "lerp")
        n = len(self)
        return tuple(public.lerp(t, e, w) for t, e, w in zip(
            self, _spread(tensors1, n, "lerp"), _spread(weight, n, "lerp")))

    def _foreach_norm(self, ord=2, dtype=None):
        return tuple(public.linalg.vector_norm(t, ord, dtype=dtype)
                     for t in _check(self, "norm"))

    return _foreach_lerp, _foreach_norm


def namespace(public: ModuleType) -> dict:
    """Every ``_foreach_*`` function by name, running each op as ``public`` names it.

    ``public`` is the package ``torcia``, which hands itself down as it loads: the ops are
    its public functions, looked up at each call, so that once ``__torch_function__``
    dispatch is on they go through it as a user's own calls do, and this module, below
    the package, does not import it."""
    out = {}
    for kind, names in ((_unary, _UNARY), (_binary, _BINARY), (_ternary, _TERNARY)):
        for name in names:
            fn, fn_ = kind(name, public)
            fn.__name__, fn_.__name__ = f"_foreach_{name}", f"_foreach_{name}_"
            out[fn.__name__], out[fn_.__name__] = fn, fn_
    for fn in (*_through(public), _foreach_lerp_, _foreach_max, _foreach_clone,
               _foreach_zero_, _foreach_copy_):
        out[fn.__name__] = fn
    return out
