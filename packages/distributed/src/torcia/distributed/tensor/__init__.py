"""torcia.distributed.tensor: tensors spread over a device mesh (:class:`DTensor`) and
their placements, as ``torch.distributed.tensor``. See ``tensor/_api.py`` for what a DTensor
is here (an ordinary torcia tensor holding this rank's part)."""

from torcia.distributed.tensor._api import (
    DTensor,
    distribute_module,
    distribute_tensor,
    empty,
    full,
    ones,
    rand,
    randn,
    zeros,
)
from torcia.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "Partial", "Placement", "Replicate", "Shard", "distribute_module",
           "distribute_tensor", "empty", "full", "ones", "rand", "randn", "zeros"]
