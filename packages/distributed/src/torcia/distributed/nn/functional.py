"""Collectives that autograd differentiates through, as ``torch.distributed.nn.functional``.

Each returns new tensors (its inputs are left alone) and has the adjoint collective as its
backward: the gradient of a broadcast is a sum-reduce to the source, of an all-gather a
reduce-scatter, of an all-to-all the reverse all-to-all, of a sum all-reduce a sum
all-reduce (every rank's loss depends on every rank's input). Model-parallel layers are
written with them.

Examples
--------
>>> import torcia
>>> import torcia.distributed as dist
>>> import torcia.distributed.nn.functional as dnn
>>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
>>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
>>> dnn.all_reduce(x * 3).sum().backward()
>>> x.grad
tensor([3., 3.])
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import torcia
from torcia.autograd import Function
from torcia.distributed import collectives as C
from torcia.distributed.group import ReduceOp

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_single", "broadcast",
           "gather", "reduce", "reduce_scatter", "scatter"]


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, group, tensor):
        ctx.src, ctx.group = src, group
        out = tensor.clone()
        C.broadcast(out, src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        C.reduce(grad, ctx.src, op=ReduceOp.SUM, group=ctx.group)
        if C.get_rank() != ctx.src:
            grad.zero_()
        return None, None, grad


class _Reduce(Function):
    @staticmethod
    def forward(ctx, dst, op, group, tensor):
        ctx.dst, ctx.group = dst, group
        out = tensor.clone()
        C.reduce(out, dst, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        C.broadcast(grad, ctx.dst, group=ctx.group)
        return None, None, None, grad


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        if op not in (ReduceOp.SUM, ReduceOp.AVG):
            raise RuntimeError(f"all_reduce with {op!r} has no gradient here; use SUM or AVG")
        ctx.op, ctx.group = op, group
        out = tensor.clone()
        C.all_reduce(out, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        C.all_reduce(grad, op=ctx.op, group=ctx.group)
        return None, None, grad


class _AllGather(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        out = [torcia.empty_like(tensor) for _ in range(C.get_world_size(group))]
        C.all_gather(out, tensor.contiguous(), group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        out = torcia.zeros_like(grads[0])
        C.reduce_scatter(out, [g.contiguous() for g in grads], group=ctx.group)
        return None, out


class _Gather(Function):
    @staticmethod
    def forward(ctx, dst, group, tensor):
        ctx.dst, ctx.group = dst, group
        size = C.get_world_size(group)
        out = [torcia.zeros_like(tensor) for _ in range(size)]
        C.gather(tensor.contiguous(), out if C.get_rank() == dst else None, dst=dst,
                 group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        out = torcia.zeros_like(grads[0])
        mine = [g.contiguous() for g in grads] if C.get_rank() == ctx.dst else None
        C.scatter(out, mine, src=ctx.dst, group=ctx.group)
        return None, None, out


class _Scatter(Function):
    @staticmethod
    def forward(ctx, src, group, *tensors):
        ctx.src, ctx.group = src, group
        out = torcia.zeros_like(tensors[C.get_rank(group)])
        mine = [t.contiguous() for t in tensors] if C.get_rank() == src else None
        C.scatter(out, mine, src=src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        size = C.get_world_size(ctx.group)
        out = [torcia.zeros_like(grad) for _ in range(size)]
        C.gather(grad.contiguous(), out if C.get_rank() == ctx.src else None, dst=ctx.src,
                 group=ctx.group)
        return (None, None, *out)


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, op, group, output, *inputs):
        ctx.group = group
        out = torcia.zeros_like(output)
        C.reduce_scatter(out, [t.contiguous() for t in inputs], op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        size = C.get_world_size(ctx.group)
        out = [torcia.empty_like(grad) for _ in range(size)]
        C.all_gather(out, grad.contiguous(), group=ctx.group)
        return (None, None, None, *out)


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, group, outputs, *inputs):
        ctx.group = group
        out = [torcia.empty_like(t) for t in outputs]
        C.all_to_all(out, [t.contiguous() for t in inputs], group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        out = [torcia.empty_like(g) for g in grads]
        C.all_to_all(out, [g.contiguous() for g in grads], group=ctx.group)
        return (None, None, *out)


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, group, output, output_split_sizes, input_split_sizes, input):
        ctx.group = group
        ctx.in_rows, ctx.out_rows = input_split_sizes, output_split_sizes
        ctx.input_shape = input.shape
        out = torcia.empty_like(output)
        C.all_to_all_single(out, input.contiguous(), output_split_sizes, input_split_sizes,
                            group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = torcia.empty(ctx.input_shape, dtype=grad.dtype, device=grad.device)
        C.all_to_all_single(out, grad.contiguous(), ctx.in_rows, ctx.out_rows,
                            group=ctx.group)
        return None, None, None, None, out


def broadcast(tensor, src, group=None):
    """``tensor`` of global rank ``src``, on every rank; the gradient flows back to
    ``src`` summed over the ranks.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.broadcast(torcia.tensor([4.0]), src=0)
    tensor([4.])
    >>> dist.destroy_process_group()
    """
    return _Broadcast.apply(src, group, tensor)


def gather(tensor, dst=0, group=None):
    """Every rank's ``tensor``, as a tuple on global rank ``dst`` (zeros elsewhere); the
    gradient of entry i flows back to rank i.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.gather(torcia.tensor([4.0]), dst=0)
    (tensor([4.]),)
    >>> dist.destroy_process_group()
    """
    return _Gather.apply(dst, group, tensor)


def scatter(tensors, src=0, group=None):
    """Entry i of ``tensors`` (given on global rank ``src``; on the others, tensors of
    the right shapes) on rank i; the gradients flow back to ``src``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.scatter([torcia.tensor([4.0])], src=0)
    tensor([4.])
    >>> dist.destroy_process_group()
    """
    return _Scatter.apply(src, group, *tensors)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None):
    """The reduction of ``tensor`` over the ranks, on global rank ``dst`` (each rank's
    own input elsewhere); the gradient is ``dst``'s, broadcast.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.reduce(torcia.tensor([4.0]), dst=0)
    tensor([4.])
    >>> dist.destroy_process_group()
    """
    return _Reduce.apply(dst, op, group, tensor)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """The reduction over the ranks of entry i of ``input_list``, on rank i (``output``
    gives its shape); the gradient is all-gathered back.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.reduce_scatter(torcia.zeros(1), [torcia.tensor([4.0])])
    tensor([4.])
    >>> dist.destroy_process_group()
    """
    return _ReduceScatter.apply(op, group, output, *input_list)


def all_gather(tensor, group=None):
    """Every rank's ``tensor``, as a tuple in rank order; the gradient is the
    reduce-scatter of the gradients of the tuple.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.all_gather(torcia.tensor([4.0]))
    (tensor([4.]),)
    >>> dist.destroy_process_group()
    """
    return _AllGather.apply(group, tensor)


def all_to_all(output_tensor_list, input_tensor_list, group=None):
    """Entry j of rank i's ``input_tensor_list`` becomes entry i of rank j's result (a
    tuple shaped as ``output_tensor_list``); the gradient goes the opposite way.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.all_to_all([torcia.zeros(1)], [torcia.tensor([4.0])])
    (tensor([4.]),)
    >>> dist.destroy_process_group()
    """
    return _AllToAll.apply(group, output_tensor_list, *input_tensor_list)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None):
    """:func:`torcia.distributed.all_to_all_single` as a new tensor shaped as
    ``output``; the gradient goes the opposite way.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.all_to_all_single(torcia.zeros(2), torcia.tensor([4.0, 5.0]))
    tensor([4., 5.])
    >>> dist.destroy_process_group()
    """
    return _AllToAllSingle.apply(group, output, output_split_sizes, input_split_sizes, input)


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The reduction of ``tensor`` over the ranks (SUM or AVG), as a new tensor; its
    gradient is the same reduction of the gradients.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> import torcia.distributed.nn.functional as dnn
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dnn.all_reduce(torcia.tensor([4.0]))
    tensor([4.])
    >>> dist.destroy_process_group()
    """
    return _AllReduce.apply(op, group, tensor)
