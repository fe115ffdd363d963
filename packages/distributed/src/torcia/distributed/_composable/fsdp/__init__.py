"""``torch.distributed._composable.fsdp``: fully_shard and its options, from
:mod:`torcia.distributed.fsdp`."""

from torcia.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    UnshardHandle,
    fully_shard,
    register_fsdp_forward_method,
)

__all__ = ["CPUOffloadPolicy", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy",
           "UnshardHandle", "fully_shard", "register_fsdp_forward_method"]
