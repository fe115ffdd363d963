"""The basic DDP communication hooks, as
``torch.distributed.algorithms.ddp_comm_hooks.default_hooks``: the averaging all-reduce,
and the same on gradients compressed to float16 or bfloat16 (half the bytes to move).

Each hook takes ``(process_group, bucket)`` (the state :meth:`register_comm_hook` was
given: a process group, or None for the default one) and returns a future of the
bucket's averaged flat gradients.
"""

from __future__ import annotations

import torcia
from torcia.distributed import collectives as C

__all__ = ["allreduce_hook", "bf16_compress_hook", "bf16_compress_wrapper",
           "fp16_compress_hook", "fp16_compress_wrapper"]


def _average(process_group, tensor):
    """A future of ``tensor`` averaged over the group, in place."""
    tensor.div_(C.get_world_size(process_group))
    work = C.all_reduce(tensor, group=process_group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def allreduce_hook(process_group, bucket):
    """Average the bucket over the group: what DDP does without a hook.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import default_hooks
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = dist.DistributedDataParallel(torcia.nn.Linear(2, 1))
    >>> model.register_comm_hook(None, default_hooks.allreduce_hook)
    >>> model(torcia.ones(1, 2)).sum().backward(); model.module.bias.grad
    tensor([1.])
    >>> dist.destroy_process_group()
    """
    return _average(process_group, bucket.buffer())


def _into(buffer):
    """A callback copying a future's value (a compressed bucket) back into ``buffer``,
    in its dtype, and returning it."""

    def decompress(fut):
        with torcia.no_grad():
            buffer.copy_(fut.value())
        return buffer

    return decompress


def _compress_hook(dtype, process_group, bucket):
    buffer = bucket.buffer()
    return _average(process_group, buffer.to(dtype)).then(_into(buffer))


def fp16_compress_hook(process_group, bucket):
    """Average the bucket in float16: half the bytes of float32 on the wire; the result
    is cast back to the gradients' dtype.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed import GradBucket
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import default_hooks
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> bucket = GradBucket(0, torcia.tensor([1.0, 1.0 + 2 ** -12]), [], True)
    >>> default_hooks.fp16_compress_hook(None, bucket).wait()   # float16 rounding
    tensor([1., 1.])
    >>> dist.destroy_process_group()
    """
    return _compress_hook(torcia.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """Average the bucket in bfloat16 (float32's range, 8 bits of mantissa).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed import GradBucket
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import default_hooks
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> bucket = GradBucket(0, torcia.tensor([3.0, 1e30]), [], True)
    >>> default_hooks.bf16_compress_hook(None, bucket).wait()
    tensor([3.0000e+00, 1.0003e+30])
    >>> dist.destroy_process_group()
    """
    return _compress_hook(torcia.bfloat16, process_group, bucket)


def _wrapper(dtype, hook):
    def wrapped(state, bucket):
        buffer = bucket.buffer()
        bucket.set_buffer(buffer.to(dtype))
        future = hook(state, bucket)
        bucket.set_buffer(buffer)
        return future.then(_into(buffer))

    return wrapped


def fp16_compress_wrapper(hook):
    """``hook`` run on the bucket cast to float16, its result cast back: compression
    around any hook (PowerSGD's, for one).

    Examples
    --------
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import default_hooks as d
    >>> hook = d.fp16_compress_wrapper(d.allreduce_hook)
    >>> callable(hook)
    True
    """
    return _wrapper(torcia.float16, hook)


def bf16_compress_wrapper(hook):
    """``hook`` run on the bucket cast to bfloat16, its result cast back.

    Examples
    --------
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import default_hooks as d
    >>> callable(d.bf16_compress_wrapper(d.allreduce_hook))
    True
    """
    return _wrapper(torcia.bfloat16, hook)
