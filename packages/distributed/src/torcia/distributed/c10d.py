"""The rest of ``torch.distributed``'s process-group API: batched point-to-point
operations, objects sent to one peer, rank translation, sub-group families, coalesced
collectives, rendezvous handlers, and queries about the launch environment.

Everything here is built on the collectives of :mod:`torcia.distributed.collectives`,
so it runs on whichever backend the process group has.
"""

from __future__ import annotations

import contextlib
import os
import pdb
import sys
import urllib.parse
import warnings

import numpy as np

import torcia
from torcia.distributed import _objects
from torcia.distributed.collectives import (
    GroupMember,
    ProcessGroupHandle,
    _agree,
    _check_op,
    _contiguous,
    _finish,
    _InPlace,
    _pg,
    _rendezvous,
    _World,
    all_gather,
    all_reduce,
    get_rank,
    get_world_size,
    irecv,
    is_backend_available,
    isend,
    new_group,
    recv,
    send,
)
from torcia.distributed.group import ReduceOp, Work
from torcia.distributed.options import Backend, BackendConfig

__all__ = [
    "P2POp", "all_gather_coalesced", "all_gather_single", "all_reduce_coalesced",
    "batch_isend_irecv", "breakpoint", "get_backend_config", "get_default_backend_for_device",
    "get_global_rank",
    "get_group_rank", "get_node_local_rank", "get_pg_count", "is_gloo_available",
    "is_torchelastic_launched", "is_ucc_available", "is_xccl_available", "new_subgroups",
    "new_subgroups_by_enumeration", "record_comm", "recv_object_list", "reduce_scatter_single",
    "register_rendezvous_handler", "rendezvous", "send_object_list", "split_group",
]


# ---------------------------------------------------------------------------------------
# what is installed, and how this process was launched
# ---------------------------------------------------------------------------------------


def is_gloo_available() -> bool:
    """Whether a "gloo" backend is installed: torcia-mpi serves that name, on MPI.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.is_gloo_available() == dist.is_backend_available("gloo")
    True
    """
    return is_backend_available("gloo")


def is_ucc_available() -> bool:
    """Whether a "ucc" backend is installed (none of torcia's parts provides one).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.is_ucc_available() == dist.is_backend_available("ucc")
    True
    """
    return is_backend_available("ucc")


def is_xccl_available() -> bool:
    """Whether an "xccl" backend (Intel GPUs) is installed (none of torcia's parts
    provides one).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.is_xccl_available() == dist.is_backend_available("xccl")
    True
    """
    return is_backend_available("xccl")


def is_torchelastic_launched() -> bool:
    """Whether the process was started by torchelastic (``torchrun``): it sets
    ``TORCHELASTIC_RUN_ID``.

    Examples
    --------
    >>> import os, torcia.distributed as dist
    >>> dist.is_torchelastic_launched() == ("TORCHELASTIC_RUN_ID" in os.environ)
    True
    """
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank among those of its machine: ``LOCAL_RANK`` (torchrun sets it),
    else ``fallback_rank``.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> import os; os.environ.pop("LOCAL_RANK", None) and None
    >>> dist.get_node_local_rank(fallback_rank=0)
    0
    """
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing "
                       "fallback_rank to allow `get_node_local_rank` to work, but be aware "
                       "that devices may be shared if the launcher does not set LOCAL_RANK.")


def get_pg_count() -> int:
    """How many process groups this process has created (the default one included).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.get_pg_count() >= 0
    True
    """
    return _World.count


def get_default_backend_for_device(device) -> str:
    """The backend a device type gets by default: "gloo" for "cpu" (torcia-mpi serves it),
    "nccl" for "cuda".

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.get_default_backend_for_device("cuda:1")
    'nccl'
    """
    kind = device.type if isinstance(device, torcia.device) else torcia.device(device).type
    backend = Backend.default_device_backend_map.get(kind)
    if backend is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return backend


def get_backend_config(group=None) -> str:
    """The device-to-backend configuration of ``group`` (the default group when None),
    as ``"cpu:mpi"``.

    Examples
    --------
    Under ``torcia-run`` after ``init_process_group("mpi")``::

        dist.get_backend_config()    # 'cpu:mpi'

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.get_backend_config()
    'cpu:mpi'
    >>> dist.destroy_process_group()
    """
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified")
    pg = _pg(group)
    return str(BackendConfig(f"{pg.device_type}:{pg.backend_name}"))


@contextlib.contextmanager
def record_comm(name: str):
    """Inside the block, collectives go by ``name`` (in timeout errors and in the
    INFO/DETAIL debug output) instead of their backend's name for them.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> with dist.record_comm("FSDP::all_gather (layer1)"):
    ...     pass
    """
    previous, _World.comm_name = _World.comm_name, str(name)
    try:
        yield
    finally:
        _World.comm_name = previous


def breakpoint(rank: int = 0, skip: int = 0, timeout_s=3600):  # noqa: A001 - PyTorch's name
    """Stop in the debugger on one rank; the others wait at a barrier until it continues.

    Parameters
    ----------
    rank : int
        The global rank that stops.
    skip : int
        Pass the first ``skip`` calls from the same place without stopping.
    timeout_s : float or None
        How long the other ranks may wait (None: the group's timeout).

    Examples
    --------
    In a training loop run with ``torcia-run``::

        dist.breakpoint(rank=1)   # rank 1 gets a (Pdb) prompt, the others wait
    """
    if skip > 0:
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        _BREAKPOINTS[key] = _BREAKPOINTS.get(key, 0) + 1
        if _BREAKPOINTS[key] <= skip:
            return
    if get_rank() == rank:
        debugger = pdb.Pdb()
        debugger.message("\n!!! ATTENTION !!!\n\nType 'up' to get to the frame that called "
                         f"dist.breakpoint(rank={rank})\n")
        debugger.set_trace(sys._getframe(1))
    work = _pg().barrier()
    work.wait(timeout_s)


_BREAKPOINTS: dict = {}


# ---------------------------------------------------------------------------------------
# ranks
# ---------------------------------------------------------------------------------------


def _check_group(group):
    if group is None or group is GroupMember.WORLD:
        return None
    if not isinstance(group, ProcessGroupHandle):
        raise ValueError(f"Group {group} is not registered, please create group with "
                         "torch.distributed.new_group API")
    return group


def get_global_rank(group, group_rank: int) -> int:
    """The global rank of rank ``group_rank`` of ``group`` (identity for the default
    group).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.get_global_rank(dist.GroupMember.WORLD, 3)
    3
    """
    group = _check_group(group)
    if group is None:
        return group_rank
    if not 0 <= group_rank < len(group.ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return group.ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    """The rank within ``group`` of global rank ``global_rank`` (identity for the default
    group).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.get_group_rank(None, 2)
    2
    """
    group = _check_group(group)
    if group is None:
        return global_rank
    if global_rank not in group.ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return group.ranks.index(global_rank)


# ---------------------------------------------------------------------------------------
# batched point-to-point, and objects to one peer
# ---------------------------------------------------------------------------------------


class P2POp:
    """One point-to-point operation for :func:`batch_isend_irecv`.

    Parameters
    ----------
    op : callable
        :func:`~torcia.distributed.isend` or :func:`~torcia.distributed.irecv`.
    tensor : Tensor
        What to send, or where to receive.
    peer : int, optional
        The other side's global rank.
    group : process group, optional
    tag : int, default 0
    group_peer : int, optional
        The other side's rank within ``group`` (instead of ``peer``).

    Examples
    --------
    >>> import torcia, torcia.distributed as dist
    >>> dist.P2POp(dist.isend, torcia.ones(2), peer=1).peer
    1
    """

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``torch.distributed.isend`` or ``torch.distributed.irecv``.")
        if not isinstance(tensor, torcia.Tensor):
            raise TypeError(f"P2POp: tensor must be a Tensor, got {type(tensor).__name__}")
        if (peer is None) == (group_peer is None):
            raise ValueError("Exactly one of peer and group_peer must be given")
        self.op = op
        self.tensor = tensor
        self.group = group
        self.peer = peer if peer is not None else get_global_rank(group, group_peer)
        self.group_peer = group_peer
        self.tag = tag

    def __repr__(self):
        return (f"P2POp(op={self.op.__name__}, peer={self.peer}, tag={self.tag}, "
                f"shape={list(self.tensor.shape)})")


def batch_isend_irecv(p2p_op_list) -> list[Work]:
    """Start every send and receive of ``p2p_op_list`` at once; returns their handles
    (``wait()`` each). Order between different peers does not matter (no deadlock);
    between one pair of ranks in one direction it does, as in PyTorch.

    Examples
    --------
    A ring exchange under ``torcia-run --nproc-per-node N``::

        r, n = dist.get_rank(), dist.get_world_size()
        out, into = torcia.tensor([float(r)]), torcia.zeros(1)
        ops = [dist.P2POp(dist.isend, out, (r + 1) % n),
               dist.P2POp(dist.irecv, into, (r - 1) % n)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    In a group of one process the ring is a send to itself:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> y = torcia.zeros(2)
    >>> ops = [dist.P2POp(dist.isend, x, 0), dist.P2POp(dist.irecv, y, 0)]
    >>> for work in dist.batch_isend_irecv(ops):
    ...     _ = work.wait()
    >>> y
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    if not isinstance(p2p_op_list, list) or not p2p_op_list:
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    if not all(isinstance(op, P2POp) for op in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    group = p2p_op_list[0].group
    if not all(op.group is group for op in p2p_op_list):
        raise ValueError("All ops need to use the same group.")
    return [op.op(op.tensor, op.peer, op.group, op.tag) for op in p2p_op_list]


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None,
                     use_batch=False) -> None:
    """Send the objects of ``object_list`` to global rank ``dst`` (or ``group_dst`` in
    ``group``), which receives them with :func:`recv_object_list` into a list of the same
    length. Objects travel through torcia's safe serializer (tensors, arrays, numbers,
    strings, bytes, lists, tuples, dicts), never pickle.

    Examples
    --------
    Rank 0 sends, rank 1 receives::

        if dist.get_rank() == 0:
            dist.send_object_list([{"lr": 0.1}, "done"], dst=1)
        else:
            got = [None, None]
            dist.recv_object_list(got, src=0)
    """
    dst = _peer(group, dst, group_dst, "dst")
    if dst == get_rank():
        raise ValueError("Invalid destination rank: destination rank should not be the same "
                         "as the rank of the current process.")
    payloads = [_objects.dumps(obj) for obj in object_list]
    sizes = torcia.tensor([len(p) for p in payloads], dtype=torcia.int64)
    blob = np.frombuffer(b"".join(payloads), dtype=np.uint8).copy()
    send(sizes, dst, group)
    send(torcia.from_numpy(blob), dst, group)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None,
                     use_batch=False) -> int:
    """Receive ``len(object_list)`` objects sent by :func:`send_object_list` from global
    rank ``src`` (any rank when both ``src`` and ``group_src`` are None) into
    ``object_list``; returns the sender's global rank.

    Examples
    --------
    See :func:`send_object_list`.
    """
    if src is not None or group_src is not None:
        src = _peer(group, src, group_src, "src")
    sizes = torcia.zeros(len(object_list), dtype=torcia.int64)
    sender = recv(sizes, src, group)
    blob = torcia.zeros(int(sizes.sum().item()), dtype=torcia.uint8)
    recv(blob, sender, group)
    data, offset = blob.numpy().tobytes(), 0
    for i, n in enumerate(sizes.tolist()):
        object_list[i] = _objects.loads(data[offset:offset + n])
        offset += n
    return sender


def _peer(group, rank, group_rank, name):
    if (rank is None) == (group_rank is None):
        raise ValueError(f"Exactly one of {name} and group_{name} must be given")
    return rank if rank is not None else get_global_rank(group, group_rank)


# ---------------------------------------------------------------------------------------
# coalesced collectives
# ---------------------------------------------------------------------------------------


def _flat(tensors, what):
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise ValueError(f"{what}: all tensors must have one dtype, got "
                         f"{sorted(str(d) for d in dtypes)}")
    return torcia.cat([t.detach().reshape(-1) for t in tensors])


def _done_work(rank) -> Work:
    return Work(lambda: True, what="coalesced collective", rank=rank)


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """All-reduce several tensors (one dtype) in one collective, in place: they travel as
    one flat buffer. Deprecated in PyTorch (warns).

    Examples
    --------
    Under ``torcia-run --nproc-per-node 2``::

        a, b = torcia.ones(2), torcia.ones(3, 1)
        dist.all_reduce_coalesced([a, b])     # both now hold 2s

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> a, b = torcia.tensor([1.0]), torcia.tensor([2.0, 3.0])
    >>> dist.all_reduce_coalesced([a, b])
    >>> a, b
    (tensor([1.]), tensor([2., 3.]))
    >>> dist.destroy_process_group()
    """
    warnings.warn("`torch.distributed.all_reduce_coalesced` will be deprecated. If you must "
                  "use it, please revisit our documentation later at "
                  "https://pytorch.org/docs/main/distributed.html#collective-functions",
                  FutureWarning, stacklevel=2)
    tensors = [tensors] if isinstance(tensors, torcia.Tensor) else list(tensors)
    flat = _flat(tensors, "all_reduce_coalesced")
    all_reduce(flat, op, group)
    offset = 0
    for t in tensors:
        n = t.numel()
        with torcia.no_grad():
            t.copy_(flat[offset:offset + n].reshape(t.shape))
        offset += n
    return _finish(_done_work(_pg(group).rank), async_op)


def all_gather_coalesced(output_tensor_lists, input_tensor_list, group=None, async_op=False):
    """Gather several tensors from every rank in one collective:
    ``output_tensor_lists[r][i]`` receives rank r's ``input_tensor_list[i]``. Deprecated
    in PyTorch (warns).

    Examples
    --------
    Under ``torcia-run --nproc-per-node 2``::

        out = [[torcia.zeros(2), torcia.zeros(1)] for _ in range(2)]
        dist.all_gather_coalesced(out, [torcia.ones(2), torcia.zeros(1)])

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> out = [[torcia.zeros(1), torcia.zeros(2)]]
    >>> dist.all_gather_coalesced(out, [torcia.tensor([1.0]), torcia.tensor([2.0, 3.0])])
    >>> out
    [[tensor([1.]), tensor([2., 3.])]]
    >>> dist.destroy_process_group()
    """
    warnings.warn("`torch.distributed.all_gather_coalesced` will be deprecated. If you must "
                  "use it, please revisit our documentation later at "
                  "https://pytorch.org/docs/main/distributed.html#collective-functions",
                  FutureWarning, stacklevel=2)
    size = get_world_size(group)
    if len(output_tensor_lists) != size:
        raise ValueError(f"all_gather_coalesced: output_tensor_lists has "
                         f"{len(output_tensor_lists)} lists, the group has {size} ranks")
    flat = _flat(input_tensor_list, "all_gather_coalesced")
    gathered = [torcia.empty_like(flat) for _ in range(size)]
    all_gather(gathered, flat, group)
    for outputs, buffer in zip(output_tensor_lists, gathered):
        if len(outputs) != len(input_tensor_list):
            raise ValueError("all_gather_coalesced: each output list needs "
                             f"{len(input_tensor_list)} tensors")
        offset = 0
        for out, like in zip(outputs, input_tensor_list):
            n = like.numel()
            if tuple(out.shape) != tuple(like.shape):
                raise ValueError(f"all_gather_coalesced: an output has shape "
                                 f"{list(out.shape)}, its input {list(like.shape)}")
            with torcia.no_grad():
                out.copy_(buffer[offset:offset + n].reshape(out.shape))
            offset += n
    return _finish(_done_work(_pg(group).rank), async_op)


def all_gather_single(output_tensor, input_tensor, group=None, async_op=False):
    """Gather every rank's ``input_tensor`` (one size on all ranks) into
    ``output_tensor``, shaped as their concatenation along dim 0 or as their stack.

    Examples
    --------
    Two ranks, each with ``torcia.arange(2) + 2 * rank``::

        out = torcia.zeros(4, dtype=torcia.int64)   # or torcia.zeros(2, 2, ...)
        dist.all_gather_single(out, t)              # tensor([0, 1, 2, 3])

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = torcia.zeros(2)
    >>> dist.all_gather_single(out, x)
    >>> out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    src = _contiguous(input_tensor, pg, "input_tensor")
    if output_tensor.numel() != pg.size * src.size:
        raise ValueError(f"all_gather_single: output_tensor has {output_tensor.numel()} "
                         f"elements, expected {pg.size} x {src.size} (a concatenation or a "
                         "stack of every rank's input)")
    _agree(pg, src, "all_gather_single")
    buf = _InPlace(output_tensor, pg, "output_tensor")
    work = pg.allgather(buf.buf.reshape((pg.size,) + src.shape), src)
    return _finish(work, async_op, buf.done)


def reduce_scatter_single(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` across ranks and give rank i its i-th part in ``output``;
    ``input`` is the concatenation (along dim 0) or the stack of one ``output``-sized
    part per rank.

    Examples
    --------
    Two ranks, each with ``torcia.arange(4)``::

        out = torcia.zeros(2, dtype=torcia.int64)
        dist.reduce_scatter_single(out, t)   # rank 0: [0, 2]; rank 1: [4, 6]

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = torcia.zeros(2)
    >>> dist.reduce_scatter_single(out, x)
    >>> out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    buf = _InPlace(output, pg, "output")
    if input.numel() != pg.size * buf.buf.size:
        raise ValueError(f"reduce_scatter_single: input has {input.numel()} elements, "
                         f"expected {pg.size} x {buf.buf.size}")
    send_buf = _contiguous(input, pg, "input").reshape((pg.size,) + buf.buf.shape)
    _agree(pg, send_buf, "reduce_scatter_single", _check_op(op))
    work = pg.reduce_scatter(buf.buf, send_buf, op)
    return _finish(work, async_op, buf.done)


# ---------------------------------------------------------------------------------------
# families of sub-groups
# ---------------------------------------------------------------------------------------


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None,
                                 pg_options=None, group_desc=None):
    """Create one sub-group per list of global ranks (lists must not overlap); every
    process calls it. Returns ``(the group holding this rank or None, all groups)``.

    Examples
    --------
    Under ``torcia-run --nproc-per-node 4``::

        mine, groups = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])
        dist.all_reduce(t, group=mine)   # sums over ranks {0, 2} or {1, 3}

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> subgroup, subgroups = dist.new_subgroups_by_enumeration([[0]])
    >>> dist.get_process_group_ranks(subgroup)
    [0]
    >>> dist.destroy_process_group()
    """
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    seen = {}
    for ranks in ranks_per_subgroup_list:
        for r in ranks:
            if r in seen:
                raise ValueError(f"Rank {r} has appeared in both subgroup {seen[r]} and "
                                 f"{list(ranks)}")
            seen[r] = list(ranks)
    me = get_rank()
    current, groups = None, []
    for ranks in ranks_per_subgroup_list:
        group = new_group(ranks, timeout=timeout, backend=backend, pg_options=pg_options)
        groups.append(group)
        if me in ranks:
            current = group
    return current, groups


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None,
                  group_desc=None):
    """Split ``group`` (the whole world when None) into consecutive sub-groups of
    ``group_size`` ranks (default: the number of GPUs of a machine); every process of it
    calls this. Returns ``(this rank's sub-group, all sub-groups)``.

    Examples
    --------
    Under ``torcia-run --nproc-per-node 4``::

        mine, groups = dist.new_subgroups(group_size=2)   # {0, 1} and {2, 3}

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> subgroup, subgroups = dist.new_subgroups(group_size=1)
    >>> len(subgroups), dist.get_world_size(subgroup)
    (1, 1)
    >>> dist.destroy_process_group()
    """
    if group_size is None:
        if not torcia.cuda.is_available():
            raise ValueError("Default group size only takes effect when CUDA is available."
                             "If your subgroup using a backend that does not depend on "
                             "CUDA,please pass in 'group_size' correctly.")
        group_size = torcia.cuda.device_count()
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    ranks = list(range(get_world_size())) if group is None else list(group.ranks)
    if group_size > len(ranks):
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world "
                         f"size ({len(ranks)})")
    if len(ranks) % group_size != 0:
        raise ValueError("The world size must be divisible by 'group_size'")
    chunks = [ranks[i:i + group_size] for i in range(0, len(ranks), group_size)]
    return new_subgroups_by_enumeration(chunks, timeout, backend, pg_options, group_desc)


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None,
                group_desc=None, backend=None):
    """Split ``parent_pg`` (the default group when None) into disjoint groups, one per
    list of global ranks in ``split_ranks``; every process of the parent calls it with the
    same lists. Returns the group that holds this rank, or None.

    Examples
    --------
    Under ``torcia-run --nproc-per-node 4``::

        pg = dist.split_group(split_ranks=[[0, 1], [2, 3]])

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> group = dist.split_group(split_ranks=[[0]])
    >>> dist.get_process_group_ranks(group)
    [0]
    >>> dist.destroy_process_group()
    """
    if not split_ranks:
        raise ValueError("split_ranks cannot be None or empty")
    parent = _pg(parent_pg)
    parent_ranks = (list(range(parent.size)) if parent_pg is None
                    else list(parent_pg.ranks))
    me = parent_ranks[parent.rank]
    seen = set()
    for ranks in split_ranks:
        for r in ranks:
            if r in seen:
                raise ValueError(f"rank {r} appears in more than one split of split_ranks")
            if r not in parent_ranks:
                raise ValueError(f"rank {r} of split_ranks is not in the parent group")
            seen.add(r)
    for ranks in split_ranks:
        if me in ranks:
            ranks = sorted(ranks)
            pg = parent.subgroup([parent_ranks.index(r) for r in ranks])
            _World.count += 1
            return ProcessGroupHandle(pg, ranks)
    return None


# ---------------------------------------------------------------------------------------
# rendezvous
# ---------------------------------------------------------------------------------------


def _query_int(url, name, value):
    if value != -1:
        return value
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    return int(query[name]) if name in query else value


def _store_handler(url, rank=-1, world_size=-1, timeout=None, **kwargs):
    from torcia.distributed.collectives import default_pg_timeout

    rank = _query_int(url, "rank", rank)
    world_size = _query_int(url, "world_size", world_size)
    if url.startswith("env://"):
        rank = int(os.environ.get("RANK", rank))
        world_size = int(os.environ.get("WORLD_SIZE", world_size))
    if rank < 0 or world_size < 0:
        raise ValueError(f"rendezvous {url!r} needs rank and world_size (as arguments or "
                         "in the URL's query, ?rank=0&world_size=2)")
    base = url.split("?", 1)[0]
    yield _rendezvous(base, rank, world_size, timeout or default_pg_timeout), rank, world_size


_HANDLERS = {"env": _store_handler, "tcp": _store_handler, "file": _store_handler}


def register_rendezvous_handler(scheme, handler) -> None:
    """Make :func:`rendezvous` serve URLs ``scheme://...`` with ``handler(url, rank,
    world_size, **kwargs)``, a generator of ``(store, rank, world_size)``.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> def local(url, rank=0, world_size=1, **kwargs):
    ...     yield dist.HashStore(), rank, world_size
    >>> dist.register_rendezvous_handler("local", local)
    >>> store, rank, size = next(dist.rendezvous("local://", 0, 1))
    >>> rank, size
    (0, 1)
    """
    if scheme in _HANDLERS:
        raise RuntimeError(f"Rendezvous handler for {scheme}:// already registered")
    _HANDLERS[scheme] = handler


def rendezvous(url: str, rank: int = -1, world_size: int = -1, **kwargs):
    """The generator of ``(store, rank, world_size)`` that the handler of ``url``'s scheme
    gives: ``env://`` (``MASTER_ADDR``/``MASTER_PORT``, ``RANK``/``WORLD_SIZE``),
    ``tcp://HOST:PORT`` and ``file:///PATH`` (rank and world size may also come from the
    query, ``?rank=0&world_size=2``).

    Examples
    --------
    >>> import os, tempfile, torcia.distributed as dist
    >>> path = os.path.join(tempfile.mkdtemp(), "rdzv")
    >>> store, rank, size = next(dist.rendezvous(f"file://{path}?rank=0&world_size=1"))
    >>> type(store).__name__, rank, size
    ('FileStore', 0, 1)
    """
    import numbers

    if not isinstance(url, (str, bytes)):
        raise RuntimeError(f"`url` must be a string. {type(url)}: {url}")
    if not isinstance(rank, numbers.Integral):
        raise RuntimeError(f"`rank` must be an integer. {rank}")
    if not isinstance(world_size, numbers.Integral):
        raise RuntimeError(f"`world_size` must be an integer. {world_size}")
    url = url.decode() if isinstance(url, bytes) else url
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in _HANDLERS:
        raise RuntimeError(f"No rendezvous handler for {scheme}://")
    return _HANDLERS[scheme](url, rank, world_size, **kwargs)

