"""Functional collectives, as ``torch.distributed._functional_collectives`` (what
DTensor, FSDP2 and the model-parallel code of libraries such as transformers call): each
takes a tensor and returns a new one, the input untouched. ``group`` may be a process
group, a list of global ranks, a 1-D :class:`~torcia.distributed.DeviceMesh` or a
``(mesh, dim)`` pair. The results are complete when returned, so :func:`wait_tensor` has
nothing to wait for. The ``*_autograd`` variants are differentiable.

Examples
--------
>>> import torcia
>>> import torcia.distributed as dist
>>> from torcia.distributed import _functional_collectives as funcol
>>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
>>> funcol.all_gather_tensor(torcia.ones(2, 3), gather_dim=1, group=[0]).shape
torcia.Size([2, 3])
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import torcia
from torcia.distributed import collectives as C
from torcia.distributed.device_mesh import DeviceMesh
from torcia.distributed.nn import functional as _differentiable

__all__ = ["all_gather_tensor", "all_gather_tensor_autograd", "all_reduce",
           "all_reduce_coalesced", "all_to_all_single", "all_to_all_single_autograd",
           "broadcast", "reduce_scatter_tensor", "reduce_scatter_tensor_autograd",
           "wait_tensor"]

_OPS = {"sum": C.ReduceOp.SUM, "avg": C.ReduceOp.AVG, "max": C.ReduceOp.MAX,
        "min": C.ReduceOp.MIN, "product": C.ReduceOp.PRODUCT, "prod": C.ReduceOp.PRODUCT}


def _group(group):
    """A process group for the forms ``group`` may take."""
    if group is None or isinstance(group, C.ProcessGroupHandle):
        return group
    if isinstance(group, DeviceMesh):
        return group.get_group()
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return group[0].get_group(group[1])
    if isinstance(group, list) and all(isinstance(r, int) for r in group):
        if sorted(group) == list(range(C.get_world_size())):
            return None
        return C._group_of_ranks(group)
    raise ValueError(f"unsupported group {group!r}: pass a process group, a list of ranks, "
                     "a DeviceMesh or (mesh, dim)")


def _op(op):
    name = str(op).lower()
    if name not in _OPS:
        raise ValueError(f"unknown reduce op {op!r}; use one of {sorted(_OPS)}")
    return _OPS[name]


def wait_tensor(tensor):
    """``tensor`` itself: the collectives here return completed tensors."""
    return tensor


def all_reduce(self, reduceOp: str, group, tag: str = ""):
    """``self`` reduced over ``group`` (``reduceOp``: "sum", "avg", "max", ...)."""
    out = self.clone()
    C.all_reduce(out, op=_op(reduceOp), group=_group(group))
    return out


def all_reduce_coalesced(self, reduceOp: str, group, tag: str = ""):
    """:func:`all_reduce` of each tensor of the list ``self``."""
    return [all_reduce(t, reduceOp, group) for t in self]


def all_gather_tensor(self, gather_dim: int, group, tag: str = ""):
    """Every rank's ``self`` concatenated along ``gather_dim``, in rank order."""
    group = _group(group)
    size = C.get_world_size(group)
    stacked = torcia.empty((size * self.shape[0],) + tuple(self.shape[1:]), dtype=self.dtype,
                           device=self.device) if self.ndim else torcia.empty(
        size, dtype=self.dtype, device=self.device)
    C.all_gather_into_tensor(stacked, self.contiguous(), group=group)
    if gather_dim == 0 or self.ndim == 0:
        return stacked
    return torcia.cat(torcia.chunk(stacked, size, dim=0), dim=gather_dim)


def reduce_scatter_tensor(self, reduceOp: str, scatter_dim: int, group, tag: str = ""):
    """``self`` reduced over the ranks, split along ``scatter_dim``: rank i keeps part i."""
    group = _group(group)
    size = C.get_world_size(group)
    if self.shape[scatter_dim] % size:
        raise ValueError(f"reduce_scatter_tensor: dim {scatter_dim} of size "
                         f"{self.shape[scatter_dim]} is not divisible by {size} ranks")
    parts = torcia.chunk(self, size, dim=scatter_dim)
    out = torcia.empty_like(parts[0].contiguous())
    C.reduce_scatter_tensor(out, torcia.cat([p.contiguous() for p in parts]), op=_op(reduceOp),
                            group=group)
    return out


def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag: str = ""):
    """Rows of ``self`` sent to each rank (``input_split_sizes`` of them; equal parts when
    None), the rows received concatenated in rank order."""
    group = _group(group)
    size = C.get_world_size(group)
    rows = sum(output_split_sizes) if output_split_sizes is not None else self.shape[0]
    out = torcia.empty((rows,) + tuple(self.shape[1:]), dtype=self.dtype, device=self.device)
    if output_split_sizes is None and input_split_sizes is not None:
        output_split_sizes = [rows // size] * size
    C.all_to_all_single(out, self.contiguous(), output_split_sizes, input_split_sizes,
                        group=group)
    return out


def broadcast(self, src: int, group, tag: str = ""):
    """Global rank ``src``'s ``self`` on every rank."""
    out = self.clone()
    C.broadcast(out, src, group=_group(group))
    return out


def all_gather_tensor_autograd(self, gather_dim: int, group, tag: str = ""):
    """:func:`all_gather_tensor`, differentiable (the gradient is reduce-scattered)."""
    parts = _differentiable.all_gather(self.contiguous(), group=_group(group))
    return torcia.cat(parts, dim=gather_dim)


def reduce_scatter_tensor_autograd(self, reduceOp: str, scatter_dim: int, group,
                                   tag: str = ""):
    """:func:`reduce_scatter_tensor`, differentiable (the gradient is all-gathered)."""
    group = _group(group)
    parts = [p.contiguous() for p in torcia.chunk(self, C.get_world_size(group),
                                                   dim=scatter_dim)]
    return _differentiable.reduce_scatter(torcia.empty_like(parts[0]), parts,
                                          op=_op(reduceOp), group=group)


def all_to_all_single_autograd(self, output_split_sizes, input_split_sizes, group,
                               tag: str = ""):
    """:func:`all_to_all_single`, differentiable (the gradient goes the other way)."""
    group = _group(group)
    rows = sum(output_split_sizes) if output_split_sizes is not None else self.shape[0]
    out = torcia.empty((rows,) + tuple(self.shape[1:]), dtype=self.dtype, device=self.device)
    return _differentiable.all_to_all_single(out, self, output_split_sizes, input_split_sizes,
                                             group=group)
