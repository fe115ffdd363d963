"""A DDP communication hook for measuring, as
``torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks``."""

from __future__ import annotations

from torcia.futures import Future

__all__ = ["noop_hook"]


def noop_hook(_, bucket):
    """Communicate nothing: each rank keeps its own gradients (to time the rest of a
    step without the all-reduce).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed import GradBucket
    >>> from torcia.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
    >>> noop_hook(None, GradBucket(0, torcia.ones(2), [], True)).wait()
    tensor([1., 1.])
    """
    future = Future()
    future.set_result(bucket.buffer())
    return future
