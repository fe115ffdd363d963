"""``Parameter`` and ``Buffer``: tensors that a :class:`~torcia.nn.Module` registers when
they are assigned as attributes."""

from __future__ import annotations

from torcia import Tensor, empty
from torcia.library import alias, bump_version, disabled_torch_function_impl


def _alias(cls, data: Tensor) -> Tensor:
    """A ``cls`` instance sharing ``data``'s storage and version counter."""
    if data is None:
        data = empty(0)
    if not isinstance(data, Tensor):
        raise TypeError(f"{cls.__name__} expects a Tensor as data, got {type(data).__name__}")
    t = alias(data)
    t.__class__ = cls
    return t


class Parameter(Tensor):
    """A tensor that is a module's learnable parameter.

    Assigning a ``Parameter`` as a module attribute registers it, so that it appears in
    :meth:`Module.parameters` and the module's ``state_dict``. It shares storage with
    ``data`` and requires gradients unless told otherwise.

    Parameters
    ----------
    data : Tensor, optional
        The values (an empty tensor when omitted).
    requires_grad : bool
        Whether autograd records operations on it. Default: True.

    Examples
    --------
    >>> import torcia
    >>> p = torcia.nn.Parameter(torcia.zeros(2))
    >>> p
    Parameter containing:
    tensor([0., 0.], requires_grad=True)
    """

    __slots__ = ()
    # ops on a parameter give plain tensors, as in PyTorch
    __torch_function__ = disabled_torch_function_impl

    def __new__(cls, data=None, requires_grad=True):
        t = _alias(cls, data)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __reduce_ex__(self, protocol):
        # the data as a tensor over the same memory: pickled for another process of
        # torcia.multiprocessing, it travels through shared memory, as PyTorch's does
        return (_rebuild_parameter, (Tensor.detach(self), self.__torcia_requires_grad__))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


class Buffer(Tensor):
    """A tensor that a module registers as a buffer when assigned as an attribute.

    Buffers are state that is not learnt (running statistics, for instance); they move with
    the module in :meth:`Module.to` and, when ``persistent``, appear in its ``state_dict``.

    Parameters
    ----------
    data : Tensor
        The values, shared (not copied).
    persistent : bool
        Whether the buffer is part of the module's ``state_dict``. Default: True.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.nn.Module()
    >>> m.steps = torcia.nn.Buffer(torcia.tensor(0))
    >>> list(m.state_dict())
    ['steps']
    """

    __slots__ = ()
    # ops on a buffer give plain tensors, as in PyTorch
    __torch_function__ = disabled_torch_function_impl
    # persistence travels beside the object: Tensor's slot layout leaves no room for it
    _persistent: dict = {}

    def __new__(cls, data=None, *, persistent=True):
        t = _alias(cls, data)
        Buffer._persistent[id(t)] = persistent
        return t

    @property
    def persistent(self) -> bool:
        return Buffer._persistent.get(id(self), True)

    def __del__(self):
        Buffer._persistent.pop(id(self), None)


# ---------------------------------------------------------------------------------------
# placeholders of lazy modules
# ---------------------------------------------------------------------------------------


class UninitializedTensorMixin:
    """What :class:`UninitializedParameter` and :class:`UninitializedBuffer` share: no
    data yet (an empty tensor holding the device and dtype), until :meth:`materialize`
    gives them a shape.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> layer = nn.LazyLinear(3)
    >>> isinstance(layer.weight, nn.parameter.UninitializedTensorMixin)
    True
    >>> _ = layer(torcia.zeros(2, 4))
    >>> isinstance(layer.weight, nn.parameter.UninitializedTensorMixin), layer.weight.shape
    (False, torcia.Size([3, 4]))
    """

    __slots__ = ()
    cls_to_become = Tensor
    # a placeholder is no tensor-like of its own: the protocol stays off for it
    __torch_function__ = disabled_torch_function_impl

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Become a tensor of ``shape`` (uninitialised values) in place, the same object,
        of class ``cls_to_become``; ``device`` and ``dtype`` default to the
        placeholder's."""
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        made = empty(shape, device=device, dtype=dtype)
        self.__torcia_data__ = made.__torcia_data__
        self.__torcia_device__ = made.__torcia_device__
        bump_version(self)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. "
                           "This error usually happens in `load_state_dict` when trying to "
                           "load an uninitialized parameter into an initialized one. Call "
                           "`forward` to initialize the parameters before accessing their "
                           "attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call "
                           "`forward` to initialize the parameters before calling "
                           "`module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, proto):
        return (type(self), (self.requires_grad,))


def is_lazy(param) -> bool:
    """Whether ``param`` is a lazy module's placeholder, not materialised yet.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.parameter import is_lazy
    >>> fc = torcia.nn.LazyLinear(2)
    >>> is_lazy(fc.weight), (fc(torcia.ones(1, 3)) is not None) and is_lazy(fc.weight)
    (True, False)
    """
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter without a shape yet: lazy modules (``LazyLinear``...) hold these until
    their first forward infers the sizes and calls :meth:`materialize`, which turns it,
    in place, into a :class:`Parameter` (so an optimizer built before keeps it).

    Examples
    --------
    >>> import torcia
    >>> p = torcia.nn.UninitializedParameter()
    >>> p.materialize((2, 3))
    >>> type(p).__name__, tuple(p.shape), p.requires_grad
    ('Parameter', (2, 3), True)
    """

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer without a shape yet (a lazy normalisation layer's running statistics),
    until :meth:`materialize` turns it, in place, into a plain tensor.

    Examples
    --------
    >>> import torcia
    >>> b = torcia.nn.UninitializedBuffer()
    >>> b.materialize(4)
    >>> type(b).__name__, tuple(b.shape)
    ('Tensor', (4,))
    """

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        t = _alias(cls, empty(0, device=device, dtype=dtype))
        if requires_grad:
            t.requires_grad_(True)
        return t
