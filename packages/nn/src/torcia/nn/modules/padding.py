"""Padding layers: ``ZeroPad1d/2d``, ``ConstantPad1d/2d``, ``ReflectionPad1d/2d``,
``ReplicationPad1d/2d``, ``CircularPad1d/2d``; each calls ``F.pad``."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules.module import Module

__all__ = ["CircularPad1d", "CircularPad2d", "ConstantPad1d", "ConstantPad2d",
           "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
           "ZeroPad1d", "ZeroPad2d"]


class _Pad(Module):
    """Pads the last ``_n`` dimensions; ``padding`` is an int (every side) or a tuple in
    ``F.pad``'s order (left, right, top, bottom)."""

    _n = 2
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        sides = 2 * self._n
        self.padding = (padding,) * sides if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != sides:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of "
                             f"{sides} ints, got {padding!r}")

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    """Pad the last dimension with ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ConstantPad1d((1, 2), 9.0)(torcia.tensor([[1.0]]))
    tensor([[9., 1., 9., 9.]])
    """

    _n = 1


class ConstantPad2d(_ConstantPad):
    """Pad the last two dimensions with ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ConstantPad2d(1, 0.5)(torcia.ones(1, 1, 1)).shape
    torcia.Size([1, 3, 3])
    """


class ZeroPad1d(_Pad):
    """Pad the last dimension with zeros.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ZeroPad1d(1)(torcia.tensor([[1.0]]))
    tensor([[0., 1., 0.]])
    """

    _n = 1


class ZeroPad2d(_Pad):
    """Pad the last two dimensions with zeros.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ZeroPad2d((1, 0, 0, 1))(torcia.ones(1, 1, 1))
    tensor([[[0., 1.],
             [0., 0.]]])
    """


class ReflectionPad1d(_Pad):
    """Pad the last dimension with its reflection (the edge not repeated).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReflectionPad1d(2)(torcia.tensor([[1.0, 2.0, 3.0]]))
    tensor([[3., 2., 1., 2., 3., 2., 1.]])
    """

    _n = 1
    _mode = "reflect"


class ReflectionPad2d(_Pad):
    """Pad the last two dimensions with their reflection.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReflectionPad2d(1)(torcia.ones(1, 2, 2)).shape
    torcia.Size([1, 4, 4])
    """

    _mode = "reflect"


class ReplicationPad1d(_Pad):
    """Pad the last dimension by repeating its edge values.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReplicationPad1d(2)(torcia.tensor([[1.0, 2.0]]))
    tensor([[1., 1., 1., 2., 2., 2.]])
    """

    _n = 1
    _mode = "replicate"


class ReplicationPad2d(_Pad):
    """Pad the last two dimensions by repeating their edge values.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReplicationPad2d(1)(torcia.ones(1, 2, 2)).shape
    torcia.Size([1, 4, 4])
    """

    _mode = "replicate"


class CircularPad1d(_Pad):
    """Pad the last dimension by wrapping around.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.CircularPad1d(1)(torcia.tensor([[1.0, 2.0, 3.0]]))
    tensor([[3., 1., 2., 3., 1.]])
    """

    _n = 1
    _mode = "circular"


class CircularPad2d(_Pad):
    """Pad the last two dimensions by wrapping around.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.CircularPad2d(1)(torcia.ones(1, 2, 2)).shape
    torcia.Size([1, 4, 4])
    """

    _mode = "circular"


class ZeroPad3d(_Pad):
    """Pad the last three dimensions with zeros; ``padding`` is an int or
    ``(left, right, top, bottom, front, back)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ZeroPad3d(1)(torcia.ones(1, 1, 2, 2, 2)).shape
    torcia.Size([1, 1, 4, 4, 4])
    """

    _n = 3


class ConstantPad3d(_ConstantPad):
    """Pad the last three dimensions with ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ConstantPad3d(1, 2.0)(torcia.zeros(1, 1, 1, 1)).sum().item()
    52.0
    """

    _n = 3


class ReflectionPad3d(_Pad):
    """Pad the last three dimensions by reflecting at the edges.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReflectionPad3d(1)(torcia.ones(1, 1, 2, 2, 2)).shape
    torcia.Size([1, 1, 4, 4, 4])
    """

    _n = 3
    _mode = "reflect"


class ReplicationPad3d(_Pad):
    """Pad the last three dimensions by repeating their edge values.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReplicationPad3d(1)(torcia.ones(1, 1, 2, 2, 2)).shape
    torcia.Size([1, 1, 4, 4, 4])
    """

    _n = 3
    _mode = "replicate"


class CircularPad3d(_Pad):
    """Pad the last three dimensions by wrapping around.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.CircularPad3d(1)(torcia.ones(1, 1, 2, 2, 2)).shape
    torcia.Size([1, 1, 4, 4, 4])
    """

    _n = 3
    _mode = "circular"
