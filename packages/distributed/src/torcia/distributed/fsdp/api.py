"""The options of FullyShardedDataParallel and fully_shard, as
``torch.distributed.fsdp.api`` (and FSDP2's policies)."""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["BackwardPrefetch", "CPUOffload", "CPUOffloadPolicy", "FullOptimStateDictConfig",
           "FullStateDictConfig", "LocalOptimStateDictConfig", "LocalStateDictConfig",
           "MixedPrecision", "MixedPrecisionPolicy", "OffloadPolicy", "OptimStateDictConfig",
           "OptimStateKeyType", "ShardedOptimStateDictConfig", "ShardedStateDictConfig",
           "ShardingStrategy", "StateDictConfig", "StateDictSettings", "StateDictType"]


class ShardingStrategy(enum.Enum):
    """What FullyShardedDataParallel shards: FULL_SHARD parameters, gradients and optimizer
    state (parameters gathered again for backward); SHARD_GRAD_OP keeps the gathered
    parameters from forward to backward; NO_SHARD replicates (DDP's data parallelism).
    HYBRID_SHARD and _HYBRID_SHARD_ZERO2 (sharding within a node, replicas across) are
    named for PyTorch's sake and refused.

    Examples
    --------
    >>> from torcia.distributed.fsdp import ShardingStrategy
    >>> ShardingStrategy.FULL_SHARD.name
    'FULL_SHARD'
    """

    FULL_SHARD = enum.auto()
    SHARD_GRAD_OP = enum.auto()
    NO_SHARD = enum.auto()
    HYBRID_SHARD = enum.auto()
    _HYBRID_SHARD_ZERO2 = enum.auto()


class BackwardPrefetch(enum.Enum):
    """When the next unit's parameters are gathered in backward (accepted; torcia gathers
    a unit's when its backward begins).

    Examples
    --------
    >>> from torcia.distributed.fsdp import BackwardPrefetch
    >>> BackwardPrefetch.BACKWARD_PRE.value
    1
    """

    BACKWARD_PRE = enum.auto()
    BACKWARD_POST = enum.auto()


class StateDictType(enum.Enum):
    """What ``state_dict()`` of a FullyShardedDataParallel returns: whole tensors
    (FULL_STATE_DICT), DTensor shards (SHARDED_STATE_DICT), or this rank's shards as
    plain tensors (LOCAL_STATE_DICT).

    Examples
    --------
    >>> from torcia.distributed.fsdp import StateDictType
    >>> StateDictType.SHARDED_STATE_DICT.name
    'SHARDED_STATE_DICT'
    """

    FULL_STATE_DICT = enum.auto()
    LOCAL_STATE_DICT = enum.auto()
    SHARDED_STATE_DICT = enum.auto()


class OptimStateKeyType(enum.Enum):
    """How an optimizer state dict names parameters: by name or by index.

    Examples
    --------
    >>> from torcia.distributed.fsdp import OptimStateKeyType
    >>> OptimStateKeyType.PARAM_NAME.name
    'PARAM_NAME'
    """

    PARAM_NAME = enum.auto()
    PARAM_ID = enum.auto()


@dataclasses.dataclass
class CPUOffload:
    """Keep parameters on the host between uses (they always are, for CPU training).

    Examples
    --------
    >>> from torcia.distributed.fsdp import CPUOffload
    >>> CPUOffload(offload_params=True).offload_params
    True
    """

    offload_params: bool = False


@dataclasses.dataclass
class MixedPrecision:
    """Mixed precision for FullyShardedDataParallel: parameters gathered and used in
    ``param_dtype``, gradients reduced in ``reduce_dtype`` (``param_dtype`` when None),
    buffers kept in ``buffer_dtype``; the shards and their gradients stay in float32
    (``keep_low_precision_grads`` keeps the gradients in the low precision). Floating
    inputs are cast to ``param_dtype`` at the root (``cast_root_forward_inputs``) or at
    every unit (``cast_forward_inputs``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.fsdp import MixedPrecision
    >>> MixedPrecision(param_dtype=torcia.bfloat16).reduce_dtype is None
    True
    """

    param_dtype: object = None
    reduce_dtype: object = None
    buffer_dtype: object = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True


@dataclasses.dataclass(frozen=True)
class MixedPrecisionPolicy:
    """fully_shard's mixed precision: gather and compute in ``param_dtype``, reduce
    gradients in ``reduce_dtype``, cast outputs to ``output_dtype``, and (by default)
    cast floating inputs to ``param_dtype``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.fsdp import MixedPrecisionPolicy
    >>> MixedPrecisionPolicy(param_dtype=torcia.bfloat16).cast_forward_inputs
    True
    """

    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


@dataclasses.dataclass
class OffloadPolicy:
    """fully_shard's offloading: none (the parameters are host memory already).

    Examples
    --------
    >>> from torcia.distributed.fsdp import OffloadPolicy
    >>> OffloadPolicy()
    OffloadPolicy()
    """


@dataclasses.dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Keep sharded parameters on the host (CPU training: where they are).

    Examples
    --------
    >>> from torcia.distributed.fsdp import CPUOffloadPolicy
    >>> CPUOffloadPolicy().pin_memory
    True
    """

    pin_memory: bool = True


@dataclasses.dataclass
class StateDictConfig:
    """The base of the state dict settings (``offload_to_cpu``: results on the host).

    Examples
    --------
    >>> from torcia.distributed.fsdp import StateDictConfig
    >>> StateDictConfig().offload_to_cpu
    False
    """

    offload_to_cpu: bool = False


@dataclasses.dataclass
class FullStateDictConfig(StateDictConfig):
    """FULL_STATE_DICT settings; ``rank0_only`` gives the tensors on rank 0 only (an empty
    dict elsewhere).

    Examples
    --------
    >>> from torcia.distributed.fsdp import FullStateDictConfig
    >>> FullStateDictConfig(offload_to_cpu=True, rank0_only=True).rank0_only
    True
    """

    rank0_only: bool = False


@dataclasses.dataclass
class LocalStateDictConfig(StateDictConfig):
    """LOCAL_STATE_DICT settings.

    Examples
    --------
    >>> from torcia.distributed.fsdp import LocalStateDictConfig
    >>> LocalStateDictConfig().offload_to_cpu
    False
    """


@dataclasses.dataclass
class ShardedStateDictConfig(StateDictConfig):
    """SHARDED_STATE_DICT settings (the shards are always DTensors here).

    Examples
    --------
    >>> from torcia.distributed.fsdp import ShardedStateDictConfig
    >>> ShardedStateDictConfig().offload_to_cpu
    False
    """

    _use_dtensor: bool = False


@dataclasses.dataclass
class OptimStateDictConfig:
    """The base of the optimizer state dict settings.

    Examples
    --------
    >>> from torcia.distributed.fsdp import OptimStateDictConfig
    >>> OptimStateDictConfig().offload_to_cpu
    True
    """

    offload_to_cpu: bool = True


@dataclasses.dataclass
class FullOptimStateDictConfig(OptimStateDictConfig):
    """Whole optimizer state (``rank0_only``: on rank 0 only).

    Examples
    --------
    >>> from torcia.distributed.fsdp import FullOptimStateDictConfig
    >>> FullOptimStateDictConfig(rank0_only=True).rank0_only
    True
    """

    rank0_only: bool = False


@dataclasses.dataclass
class LocalOptimStateDictConfig(OptimStateDictConfig):
    """This rank's optimizer state as it is.

    Examples
    --------
    >>> from torcia.distributed.fsdp import LocalOptimStateDictConfig
    >>> LocalOptimStateDictConfig().offload_to_cpu
    False
    """

    offload_to_cpu: bool = False


@dataclasses.dataclass
class ShardedOptimStateDictConfig(OptimStateDictConfig):
    """Sharded optimizer state (DTensors).

    Examples
    --------
    >>> from torcia.distributed.fsdp import ShardedOptimStateDictConfig
    >>> ShardedOptimStateDictConfig().offload_to_cpu
    True
    """

    _use_dtensor: bool = False


@dataclasses.dataclass
class StateDictSettings:
    """What ``FullyShardedDataParallel.get_state_dict_type`` returns.

    Examples
    --------
    >>> from torcia.distributed.fsdp import (StateDictSettings, StateDictType,
    ...     FullStateDictConfig, FullOptimStateDictConfig)
    >>> StateDictSettings(StateDictType.FULL_STATE_DICT, FullStateDictConfig(),
    ...                   FullOptimStateDictConfig()).state_dict_type.name
    'FULL_STATE_DICT'
    """

    state_dict_type: StateDictType
    state_dict_config: StateDictConfig
    optim_state_dict_config: OptimStateDictConfig
