"""torcia.distributed.optim: optimizers for data parallelism, as
``torch.distributed.optim``: :class:`ZeroRedundancyOptimizer`."""

from torcia.distributed.optim.zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
