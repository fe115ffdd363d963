"""torcia.distributed.fsdp: fully sharded data parallelism, as ``torch.distributed.fsdp``:
the module wrapper :class:`FullyShardedDataParallel` (FSDP1) and :func:`fully_shard`
(FSDP2) over the same engine (``fsdp/_engine.py``), with their options and state dicts."""

from torcia.distributed.fsdp._fully_shard import (
    FSDPModule,
    UnshardHandle,
    fully_shard,
    register_fsdp_forward_method,
)
from torcia.distributed.fsdp.api import (
    BackwardPrefetch,
    CPUOffload,
    CPUOffloadPolicy,
    FullOptimStateDictConfig,
    FullStateDictConfig,
    LocalOptimStateDictConfig,
    LocalStateDictConfig,
    MixedPrecision,
    MixedPrecisionPolicy,
    OffloadPolicy,
    OptimStateDictConfig,
    OptimStateKeyType,
    ShardedOptimStateDictConfig,
    ShardedStateDictConfig,
    ShardingStrategy,
    StateDictConfig,
    StateDictSettings,
    StateDictType,
)
from torcia.distributed.fsdp.fully_sharded_data_parallel import FullyShardedDataParallel

__all__ = ["BackwardPrefetch", "CPUOffload", "CPUOffloadPolicy", "FSDPModule",
           "FullOptimStateDictConfig", "FullStateDictConfig", "FullyShardedDataParallel",
           "LocalOptimStateDictConfig", "LocalStateDictConfig", "MixedPrecision",
           "MixedPrecisionPolicy", "OffloadPolicy", "OptimStateDictConfig",
           "OptimStateKeyType", "ShardedOptimStateDictConfig", "ShardedStateDictConfig",
           "ShardingStrategy", "StateDictConfig", "StateDictSettings", "StateDictType",
           "UnshardHandle", "fully_shard", "register_fsdp_forward_method"]
