"""How a :class:`~torcia.distributed.tensor.DTensor` lies on each dimension of its
device mesh, as ``torch.distributed.tensor.placement_types``: split along a tensor
dimension (:class:`Shard`), copied whole (:class:`Replicate`), or as a sum still to be
reduced (:class:`Partial`)."""

from __future__ import annotations

__all__ = ["Partial", "Placement", "Replicate", "Shard"]


class Placement:
    """The base of the placements.

    Examples
    --------
    >>> from torcia.distributed.tensor import Placement, Shard
    >>> isinstance(Shard(0), Placement), Shard(0).is_shard(0), Shard(0).is_replicate()
    (True, True, False)
    """

    def is_shard(self, dim: int | None = None) -> bool:
        """Whether this is a :class:`Shard` (of tensor dimension ``dim``, when given)."""
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self) -> bool:
        """Whether this is :class:`Replicate`."""
        return isinstance(self, Replicate)

    def is_partial(self, reduce_op: str | None = None) -> bool:
        """Whether this is :class:`Partial` (with ``reduce_op``, when given)."""
        return isinstance(self, Partial) and (reduce_op is None
                                              or self.reduce_op == reduce_op)


class Shard(Placement):
    """Split along tensor dimension ``dim``: mesh coordinate i holds chunk i of
    ``torch.chunk``'s split (ceil(size / n) rows; the last chunks may be shorter or
    empty).

    Examples
    --------
    >>> from torcia.distributed.tensor import Shard
    >>> Shard(1), Shard(1) == Shard(1), str(Shard(1))
    (Shard(dim=1), True, 'S(1)')
    """

    def __init__(self, dim: int = 0):
        self.dim = dim

    def __eq__(self, other):
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self):
        return hash((type(self).__name__, self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class _StridedShard(Shard):
    """A shard of a tensor dimension that was split into ``split_factor`` pieces first
    (FSDP over tensor parallelism): rank i holds chunk i of each piece."""

    def __init__(self, dim: int, *, split_factor: int = 1, sf: int | None = None):
        super().__init__(dim)
        self.split_factor = sf if sf is not None else split_factor

    def __eq__(self, other):
        return (isinstance(other, _StridedShard) and other.dim == self.dim
                and other.split_factor == self.split_factor)

    def __hash__(self):
        return hash(("_StridedShard", self.dim, self.split_factor))

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self):
        return f"_S({self.dim}, {self.split_factor})"


class Replicate(Placement):
    """Every mesh coordinate holds the whole tensor.

    Examples
    --------
    >>> from torcia.distributed.tensor import Replicate
    >>> Replicate(), Replicate() == Replicate(), str(Replicate())
    (Replicate(), True, 'R')
    """

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


class Partial(Placement):
    """Every mesh coordinate holds a part; the tensor is their reduction
    (``reduce_op``: "sum", "avg", "max", "min").

    Examples
    --------
    >>> from torcia.distributed.tensor import Partial
    >>> Partial(), str(Partial("max"))
    (Partial(sum), 'P(max)')
    """

    def __init__(self, reduce_op: str = "sum"):
        self.reduce_op = reduce_op

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"
