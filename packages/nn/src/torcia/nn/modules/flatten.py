"""``Flatten`` and ``Unflatten``."""

from __future__ import annotations

from torcia.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dimensions ``start_dim`` to ``end_dim`` into one.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Flatten()(torcia.ones(2, 3, 4, 5)).shape
    torcia.Size([2, 60])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Unflatten(1, (2, 5))(torcia.ones(3, 10)).shape
    torcia.Size([3, 2, 5])
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
