"""``torcia.Size``, the shape of a tensor: a module of its own, below every module of
core that uses it."""

from __future__ import annotations


class Size(tuple):
    """The shape of a tensor: a tuple of ints, printed as ``torcia.Size([2, 3])``.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.zeros(2, 3).shape
    >>> s
    torcia.Size([2, 3])
    >>> s.numel(), tuple(s), s[1]
    (6, (2, 3), 3)
    """

    def __repr__(self):
        return f"torcia.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n
