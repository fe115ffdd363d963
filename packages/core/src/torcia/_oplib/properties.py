"""Tensor queries and conveniences kept as functions: ``is_signed``, ``is_nonzero``,
``get_device``, ``dim_order``, ``sparse_dim``, ``as_subclass``, ``map_``...
"""

from __future__ import annotations

import warnings

import numpy as np

from torcia._grad_mode import STATE as _GRAD
from torcia._grad_mode import no_grad as _no_grad
from torcia._ops.views import view
from torcia._tensor import Tensor


def is_signed(input) -> bool:
    """Whether the dtype is signed.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_signed(torcia.tensor([-1]))
    True
    >>> torcia.is_signed(torcia.tensor([1], dtype=torcia.uint8))
    False
    """
    return input.dtype.name not in ("uint8", "bool")


def is_nonzero(input) -> bool:
    """The truth of a one-element tensor (errors otherwise, as PyTorch).

    Examples
    --------
    >>> import torcia
    >>> torcia.is_nonzero(torcia.tensor([0.5]))
    True
    >>> torcia.is_nonzero(torcia.tensor(0))
    False
    """
    if input.numel() != 1:
        if input.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


def is_same_size(input, other) -> bool:
    """Whether two tensors have the same shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_same_size(torcia.zeros(2, 3), torcia.ones(2, 3))
    True
    """
    return input.shape == other.shape


def is_inference(input) -> bool:
    """Whether the tensor was made under ``inference_mode``: torcia tensors never are.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_inference(torcia.zeros(1))
    False
    """
    return False


def ndimension(input) -> int:
    """Alias of ``dim()``.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).ndimension()
    2
    """
    return input.ndim


def get_device(input) -> int:
    """The tensor's device index (-1 on the CPU).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_device(torcia.zeros(1))
    -1
    """
    return input.get_device()


def is_distributed(input) -> bool:
    """Whether the tensor is a distributed tensor: torcia's never are.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_distributed(torcia.zeros(1))
    False
    """
    return False


def dim_order(self, *, ambiguity_check=False):
    """The dimensions from outermost to innermost in memory (by decreasing stride).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).t().dim_order()
    (1, 0)
    """
    strides = self.stride()
    order = sorted(range(self.ndim), key=lambda d: (-strides[d], d))
    if ambiguity_check:
        shape = self.shape
        if any(shape[d] == 1 for d in range(self.ndim)) or len(set(strides)) < len(strides):
            raise RuntimeError("The tensor does not have unique dim order, or cannot map to "
                               "exact one of the given memory formats.")
    return tuple(order)


def is_set_to(self, tensor) -> bool:
    """Whether ``self`` and ``tensor`` view the same memory with the same size, strides
    and device.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(4)
    >>> x.is_set_to(x.view(4)), x.is_set_to(x.clone())
    (True, False)
    """
    return (self._device == tensor._device and self.data_ptr() == tensor.data_ptr()
            and self.shape == tensor.shape and self.stride() == tensor.stride()
            and self.dtype is tensor.dtype)


def map_(self, tensor, callable):  # noqa: A002 - PyTorch's argument name
    """Apply ``callable(a, b)`` to each element ``a`` of ``self`` and ``b`` of ``tensor``
    (broadcast to ``self``), writing the results into ``self`` (CPU tensors, as
    PyTorch).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0])
    >>> x.map_(torcia.tensor([10.0, 20.0]), lambda a, b: a + b)
    tensor([11., 22.])
    """
    return _map(self, [tensor], callable)


def map2_(self, x, y, callable):  # noqa: A002 - PyTorch's argument name
    """Apply ``callable(a, b, c)`` elementwise over ``self``, ``x`` and ``y`` into
    ``self``.

    Examples
    --------
    >>> import torcia
    >>> a = torcia.tensor([1.0, 2.0])
    >>> a.map2_(torcia.tensor([10.0, 20.0]), torcia.tensor([3.0, 4.0]), lambda a, b, c: a + b * c)
    tensor([31., 82.])
    """
    return _map(self, [x, y], callable)


def _map(self, others, fn):
    if self._device.type != "cpu":
        raise RuntimeError("map_ is only implemented on CPU tensors")
    if self._requires_grad and _GRAD.enabled:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    arrays = [np.broadcast_to(o.detach().cpu().numpy(), self.shape) for o in others]
    out = self._data
    for pos in np.ndindex(*out.shape):
        out[pos] = fn(out[pos].item(), *(a[pos].item() for a in arrays))
    self._vc[0] += 1
    return self


def module_load(self, other, assign=False):
    """What ``nn.Module.load_state_dict`` stores for parameter ``self`` given ``other``:
    ``other`` detached when ``assign``, else ``self`` with ``other`` copied in.

    Examples
    --------
    >>> import torcia
    >>> weight = torcia.zeros(2)
    >>> weight.module_load(torcia.tensor([1.0, 2.0])) is weight, weight
    (False, tensor([1., 2.]))
    """
    if assign:
        return other.detach()
    with _no_grad():
        return self.copy_(other).detach()


def as_subclass(self, cls):
    """A tensor of class ``cls`` (a subclass of :class:`torcia.Tensor`) sharing ``self``'s
    data and attached to its graph (an alias: gradients flow back to ``self``).

    Examples
    --------
    >>> import torcia
    >>> class Mine(torcia.Tensor):
    ...     pass
    >>> type(torcia.ones(2).as_subclass(Mine)).__name__
    'Mine'
    """
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: expected a subclass of torcia.Tensor, got {cls!r}")
    alias = view(self, tuple(self.shape))
    out = object.__new__(cls)
    for slot in Tensor.__slots__:
        if slot not in ("__weakref__", "__dict__"):
            setattr(out, slot, getattr(alias, slot))
    return out


def sparse_dim(self) -> int:
    """The number of sparse dimensions: 0 for a dense tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).sparse_dim()
    0
    """
    return 0


def dense_dim(self) -> int:
    """The number of dense dimensions: all of a dense tensor's.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).dense_dim()
    2
    """
    return self.ndim


def _name(self):
    """The tensor's name: None, as in PyTorch (a name only Python-side code sets).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2).name is None
    True
    """
    return None


def _volatile(self):
    """Removed in PyTorch 0.4: always False, with PyTorch's warning.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     volatile = torcia.zeros(2).volatile
    >>> volatile
    False
    """
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=2)
    return False


#: the functions here that are also Tensor methods, under the same name
METHODS = (
    "dim_order", "is_set_to", "map_", "map2_", "module_load", "as_subclass", "sparse_dim",
    "dense_dim",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "is_signed", "is_nonzero", "is_same_size", "is_inference", "ndimension", "get_device",
)

#: the names ``torcia`` exports from here
__all__ = [
    "get_device", "is_distributed", "is_inference", "is_nonzero", "is_same_size", "is_signed",
]
