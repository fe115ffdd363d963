"""torcia.distributed.algorithms: :mod:`.join` (uneven inputs across ranks) and
:mod:`.ddp_comm_hooks` (how DistributedDataParallel reduces gradients), as
``torch.distributed.algorithms``."""

from torcia.distributed.algorithms.join import Join, Joinable, JoinHook

__all__ = ["Join", "JoinHook", "Joinable"]
