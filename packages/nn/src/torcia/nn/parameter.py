"""``Parameter`` and ``Buffer``: tensors that a :class:`~torcia.nn.Module` registers when
they are assigned as attributes."""

from __future__ import annotations

from torcia import Tensor, empty


def _alias(cls, data: Tensor) -> Tensor:
    """A ``cls`` instance sharing ``data``'s storage and version counter."""
    if data is None:
        data = empty(0)
    if not isinstance(data, Tensor):
        raise TypeError(f"{cls.__name__} expects a Tensor as data, got {type(data).__name__}")
    t = Tensor._make(data._data, data._device)
    t._vc = data._vc
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

    def __new__(cls, data=None, requires_grad=True):
        t = _alias(cls, data)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (Tensor.detach(self).clone(), self._requires_grad))


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
