"""Tensors without a dense array of their own: sparse layouts (their values) and
``MaskedTensor`` (its data and mask). Such a tensor holds a backing tensor, ``_inner``,
which carries the dtype, the device and the autograd state; reading its missing dense data
(``_data``, what every kernel reads) raises an error naming the operation that tried.
"""

from __future__ import annotations

import os
import sys

from torcia import _dtype
from torcia._tensor import OVERRIDES, Tensor, disabled_torch_function_impl

_PACKAGE = os.sep + "torcia" + os.sep
#: the dispatch entry points, whose ``op`` argument names the op being run
_DISPATCHERS = frozenset({"call", "unary", "binary", "_binary_in_modes", "_unary_in_modes"})
#: the ``__torch_function__`` protocol's frames around a function (torcia.overrides)
_PROTOCOL = frozenset({"dispatch", "_handle", "handle_torch_function",
                       "methods_torch_function", "default_torch_function"})


def calling_op() -> str:
    """The op that reached for dense data: the ``op`` a dispatcher was running, else the
    outermost torcia function called (``Tensor.softmax``, not the helpers under it)."""
    frame = sys._getframe(2)
    name = "this operation"
    while frame is not None and _PACKAGE in frame.f_code.co_filename:
        code = frame.f_code.co_name
        if code in _DISPATCHERS and isinstance(frame.f_locals.get("op"), str):
            return frame.f_locals["op"]
        if not code.startswith("<") and code not in _PROTOCOL:
            name = code
        frame = frame.f_back
    return name


class WrappedTensor(Tensor):
    """The attributes such tensors take from their backing tensor ``_inner`` (the
    subclass names the slot it is in)."""

    __slots__ = ()
    #: their ops go by the layout's own rules (``Tensor._layout_binary``, the methods), not
    #: by the ``__torch_function__`` protocol, which defining them must not switch on
    __torch_function__ = disabled_torch_function_impl

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def _init_tensor_slots(self, inner: Tensor) -> None:
        """Fill the slots every Tensor has (no data of its own, no autograd state: the
        backing tensor has them)."""
        self._device = inner._device
        self._requires_grad = False
        self._grad = None
        self._vc = [0]
        self._base = None
        self._out_nr = 0
        self._hooks = None
        self._retains_grad = False

    @property
    def _inner(self) -> Tensor:
        raise NotImplementedError

    @property
    def _data(self):
        raise NotImplementedError(self._no_dense_data(calling_op()))

    def _no_dense_data(self, op: str) -> str:
        raise NotImplementedError

    @property
    def grad_fn(self):
        return self._inner.grad_fn

    @property
    def dtype(self):
        return self._inner.dtype

    @property
    def device(self):
        return self._inner.device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        return self._device.type == "meta"

    def is_floating_point(self) -> bool:
        return self._inner.is_floating_point()

    def is_complex(self) -> bool:
        return self._inner.is_complex()

    def is_signed(self) -> bool:
        return self._inner.is_signed()

    def element_size(self) -> int:
        return self._inner.element_size()

    @property
    def itemsize(self) -> int:
        return self._inner.element_size()

    @property
    def requires_grad(self) -> bool:
        return self._inner.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True):
        self._inner.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._inner.is_leaf

    def __hash__(self):
        return id(self)

    # ----- moves and casts: through the subclass's ``to`` -----------------------------
    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device)

    def float(self):
        return self.to(_dtype.float32)

    def double(self):
        return self.to(_dtype.float64)

    def half(self):
        return self.to(_dtype.float16)

    def bfloat16(self):
        return self.to(_dtype.bfloat16)

    def long(self):
        return self.to(_dtype.int64)

    def int(self):
        return self.to(_dtype.int32)

    def bool(self):
        return self.to(_dtype.bool_)


def methods_torch_function(cls, func, types, args=(), kwargs=None):
    """The ``__torch_function__`` of a wrapped tensor whose ops are its own methods
    (``MaskedTensor``, ``NestedTensor``): ``torcia.exp(mt)`` runs ``mt.exp()``, as PyTorch's
    classes answer the function forms; a function the class has no method for runs as it
    is (and names itself if it reaches for the missing dense data)."""
    kwargs = kwargs or {}
    name = getattr(func, "__name__", None)
    if name and args and isinstance(args[0], cls):
        for klass in type(args[0]).__mro__:
            if klass is WrappedTensor:
                break
            method = vars(klass).get(name)
            if callable(method):
                return method(*args, **kwargs)
    # torcia.overrides, above the Tensor, loads when a subclass first needs it
    with OVERRIDES.load().DisableTorchFunctionSubclass():
        return func(*args, **kwargs)
