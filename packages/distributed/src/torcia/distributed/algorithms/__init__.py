"""torcia.distributed.algorithms: ``algorithms.join`` (uneven inputs across ranks) and
``algorithms.ddp_comm_hooks`` (how DistributedDataParallel reduces gradients), as
``torch.distributed.algorithms``."""

from torcia.distributed.algorithms.join import Join, Joinable, JoinHook

__all__ = ["Join", "JoinHook", "Joinable"]
