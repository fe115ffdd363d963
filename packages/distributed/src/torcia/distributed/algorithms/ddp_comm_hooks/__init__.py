"""Communication hooks of DistributedDataParallel, as
``torch.distributed.algorithms.ddp_comm_hooks``: ``default_hooks`` (averaging,
float16/bfloat16 compression), ``powerSGD_hook`` (low-rank compression) and
``debugging_hooks``; :func:`register_ddp_comm_hook` registers one by its
:class:`DDPCommHookType`."""

from __future__ import annotations

import enum
import functools

from torcia.distributed.algorithms.ddp_comm_hooks import (
    debugging_hooks,
    default_hooks,
    powerSGD_hook,
)

__all__ = ["DDPCommHookType", "register_ddp_comm_hook"]


def _plain(hook, model, state):
    model.register_comm_hook(state, hook)


def _power_sgd(hook, rank, model, state):
    model.register_comm_hook(
        powerSGD_hook.PowerSGDState(state, matrix_approximation_rank=rank), hook)


class DDPCommHookType(enum.Enum):
    """The built-in hooks by name, each a function ``(model, state)`` registering itself.

    Examples
    --------
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import DDPCommHookType
    >>> DDPCommHookType.FP16_COMPRESS.name
    'FP16_COMPRESS'
    """

    ALLREDUCE = functools.partial(_plain, default_hooks.allreduce_hook)
    FP16_COMPRESS = functools.partial(_plain, default_hooks.fp16_compress_hook)
    BF16_COMPRESS = functools.partial(_plain, default_hooks.bf16_compress_hook)
    POWER_SGD = functools.partial(_power_sgd, powerSGD_hook.powerSGD_hook, 1)
    POWER_SGD_RANK2 = functools.partial(_power_sgd, powerSGD_hook.powerSGD_hook, 2)
    BATCHED_POWER_SGD = functools.partial(_power_sgd, powerSGD_hook.batched_powerSGD_hook, 1)
    BATCHED_POWER_SGD_RANK2 = functools.partial(_power_sgd,
                                                powerSGD_hook.batched_powerSGD_hook, 2)
    NOOP = functools.partial(_plain, debugging_hooks.noop_hook)


def register_ddp_comm_hook(comm_hook_type: DDPCommHookType, model, state=None) -> None:
    """Register the hook ``comm_hook_type`` on the DistributedDataParallel ``model``;
    ``state`` is the process group (None: the default one).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.algorithms import ddp_comm_hooks
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = dist.DistributedDataParallel(torcia.nn.Linear(2, 1))
    >>> ddp_comm_hooks.register_ddp_comm_hook(ddp_comm_hooks.DDPCommHookType.BF16_COMPRESS,
    ...                                       model)
    >>> dist.destroy_process_group()
    """
    comm_hook_type.value(model=model, state=state)
