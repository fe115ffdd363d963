"""Process groups and collectives on tensors, as ``torch.distributed``.

The work is done by a process-group backend from a plugin ("mpi" from torcia-mpi for CPU
tensors, "nccl" from torcia-cuda for CUDA tensors); this module keeps the default group,
checks arguments, and moves tensors' arrays (NumPy or CuPy) in and out.
"""

from __future__ import annotations

import datetime
import inspect
import os
import sys
import time
import urllib.parse
import zlib

import numpy as np

from torcia import plugins
from torcia.distributed import _objects, hookspecs
from torcia.distributed.group import ProcessGroup, ReduceOp, Work, _seconds, report_failure
from torcia.distributed.options import DebugLevel, get_debug_level
from torcia.distributed.store import DistStoreError, FileStore, PrefixStore, TCPStore
from torcia.library import Tensor, bump_version, host_array

plugins.add_hookspecs(hookspecs)
backends = plugins.Registry("process group backend", "torcia_register_process_group_backends")

default_pg_timeout = datetime.timedelta(minutes=30)


class _World:
    default: ProcessGroup | None = None
    groups: dict = {}  # GroupHandle -> (ProcessGroup or None, global ranks)
    made: list = []  # the sub-groups of this process, to find them by their ranks
    count: int = 0  # process groups created (the default one included)
    comm_name: str | None = None  # what record_comm calls the collectives it wraps


class GroupMember:
    """Sentinels: ``WORLD`` is the default group; ``NON_GROUP_MEMBER`` is what
    :func:`new_group` returns on processes outside the new group.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.GroupMember.WORLD is None
    True
    """

    WORLD = None
    NON_GROUP_MEMBER = object()


class ProcessGroupHandle:
    """What :func:`new_group` returns: a sub-group, identified by its global ranks."""

    def __init__(self, pg: ProcessGroup, ranks):
        self.pg = pg
        self.ranks = list(ranks)

    def rank(self) -> int:
        return self.pg.rank

    def size(self) -> int:
        return self.pg.size

    def __repr__(self):
        return f"<ProcessGroup {self.pg.backend_name} ranks={self.ranks}>"


def is_available() -> bool:
    """Whether torcia.distributed can be used (always, once installed).

    Examples
    --------
    >>> import torcia
    >>> torcia.distributed.is_available()
    True
    """
    return True


def is_backend_available(backend: str) -> bool:
    """Whether an installed, allowed plugin provides ``backend`` and it can run here (the
    "nccl" backend needs CuPy, NCCL and a GPU).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.is_backend_available("no-such-backend")
    False
    """
    name = backend.lower()
    return name in backends and not getattr(backends.get(name), "unavailable_reason", None)


def is_mpi_available() -> bool:
    """Whether the "mpi" process-group backend (torcia-mpi) is installed.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.is_mpi_available() == dist.is_backend_available("mpi")
    True
    """
    return is_backend_available("mpi")


def is_nccl_available() -> bool:
    """Whether the "nccl" process-group backend (torcia-cuda with NCCL) is installed.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.is_nccl_available() == dist.is_backend_available("nccl")
    True
    """
    return is_backend_available("nccl")


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has run (and not been destroyed).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.is_initialized()
    True
    >>> dist.destroy_process_group()
    """
    return _World.default is not None


def _pg(group=None) -> ProcessGroup:
    if _World.default is None:
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call init_process_group.")
    if group is None:
        return _World.default
    if group is GroupMember.NON_GROUP_MEMBER:
        raise RuntimeError("this process is not a member of the group")
    return group.pg


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group.

    ``backend`` names a registered process-group backend: "gloo" or "mpi" (torcia-mpi:
    CPU tensors, on MPI) or "nccl" (torcia-cuda, CUDA tensors). ``timeout`` bounds every
    blocking collective: a peer that died gives an error, not a hang.

    The rank and world size are ``rank`` and ``world_size``, else those of the
    ``init_method`` URL's query, else the environment: ``RANK``/``WORLD_SIZE`` (as
    torchrun and torcia-run set them), ``PMI_RANK``/``PMI_SIZE`` (MPICH's mpiexec),
    ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE`` (Open MPI) or
    ``SLURM_PROCID``/``SLURM_NTASKS`` (srun). The processes meet through ``store`` when
    given, else the store ``init_method`` names: ``"env://"`` (the default) a
    :class:`~torcia.distributed.TCPStore` served by rank 0 at ``MASTER_ADDR`` and
    ``MASTER_PORT`` (or the launcher's store under torcia-run), ``"tcp://HOST:PORT"`` one
    at that address, ``"file:///PATH"`` a :class:`~torcia.distributed.FileStore`. An MPI
    job that ``mpiexec`` started, or a group of one process, needs no store.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.is_initialized()
    False

    Each of 2 processes started any way (``torcia.multiprocessing.spawn``, torcia-run, by
    hand)::

        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29500"
        dist.init_process_group("gloo", rank=rank, world_size=2)
    """
    if _World.default is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    name = str(backend or "mpi").lower()
    factory = _factory(name)
    timeout = timeout or default_pg_timeout
    init_method = init_method or "env://"
    if init_method != "env://" and store is not None:
        raise ValueError("Cannot specify both init_method and store.")
    if not _takes_store(factory):
        if init_method == "env://":
            rank = _from_env(rank, _RANK_VARS[:1])
            world_size = _from_env(world_size, _SIZE_VARS[:1])
        _World.default = factory(rank=rank, world_size=world_size, timeout=timeout,
                                 init_method=init_method)
        _World.count += 1
        return None
    init_method, rank, world_size = _from_url(init_method, rank, world_size)
    rank = _from_env(rank, _RANK_VARS)
    world_size = _from_env(world_size, _SIZE_VARS)
    needs_store = getattr(factory, "needs_store", lambda rank, world_size: True)
    if store is None and not needs_store(rank, world_size):
        _World.default = factory(rank=rank, world_size=world_size, timeout=timeout,
                                 init_method=init_method, store=None)
        _World.count += 1
        return None
    if not 0 <= rank < world_size:
        raise ValueError(
            f"init_process_group({name!r}) needs this process's rank and the world size; "
            f"got rank={rank}, world_size={world_size}. Pass rank= and world_size=, or set "
            "RANK and WORLD_SIZE (torchrun does), or start the processes with torcia-run, "
            "mpiexec or srun")
    if store is None:
        store = _rendezvous(init_method, rank, world_size, timeout)
    else:
        store.set_timeout(timeout)
    _World.default = factory(rank=rank, world_size=world_size, timeout=timeout,
                             init_method=init_method, store=store)
    _World.count += 1
    return None


def _from_url(init_method: str, rank: int, world_size: int):
    """``init_method`` without its query, and the rank and world size its query gives
    (``tcp://host:port?rank=0&world_size=2``, as PyTorch reads it) where not passed."""
    url = urllib.parse.urlsplit(init_method)
    query = dict(urllib.parse.parse_qsl(url.query))
    if rank < 0 and "rank" in query:
        rank = int(query["rank"])
    if world_size < 0 and "world_size" in query:
        world_size = int(query["world_size"])
    return init_method.split("?", 1)[0], rank, world_size


_RANK_VARS = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
_SIZE_VARS = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")


def _factory(name):
    """The registered factory of backend ``name``, or an error saying what to install, or
    why the backend cannot run here."""
    if name not in backends:
        hint = {"mpi": f"torcia-mpi with an MPI library such as mpich: "
                       f"{plugins.install_hint('torcia-mpi')}",
                "nccl": "torcia-cuda with NCCL"}.get(name, f"a plugin providing {name!r}")
        msg = plugins.missing_message("process group backend", name, backends.names())
        # the hint stays unless the message names the plugin that provides the backend
        if "is provided by plugin" not in msg:
            msg += f". Install {hint}"
        raise RuntimeError(msg)
    factory = backends.get(name)
    reason = getattr(factory, "unavailable_reason", None)
    if reason:
        raise RuntimeError(f"the {name!r} process group backend cannot be used here: {reason}")
    return factory


def _takes_store(factory) -> bool:
    """Whether ``factory`` takes a ``store`` (factories written before it existed do not)."""
    params = inspect.signature(factory).parameters.values()
    return any(p.name == "store" or p.kind is p.VAR_KEYWORD for p in params)


def _from_env(value: int, names) -> int:
    """``value`` when it is set (not negative), else the first of the variables ``names``
    in the environment."""
    if value >= 0:
        return value
    for var in names:
        if var in os.environ:
            return int(os.environ[var])
    return value


def _rendezvous(init_method: str, rank: int, world_size: int, timeout):
    """The store that ``init_method`` names, served by rank 0."""
    if init_method.startswith("env://"):
        missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
        if missing:
            raise ValueError(
                f"init_method='env://' needs {' and '.join(missing)} in the environment "
                "(torchrun and torcia-run set them); or pass init_method='tcp://HOST:PORT' "
                "or store=")
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    elif init_method.startswith("tcp://"):
        url = urllib.parse.urlsplit(init_method)
        if not url.hostname or url.port is None:
            raise ValueError(f"init_method {init_method!r} should be tcp://HOST:PORT")
        host, port = url.hostname, url.port
    elif init_method.startswith("file://"):
        path = urllib.parse.urlsplit(init_method).path
        if not path:
            raise ValueError(f"init_method {init_method!r} should be file:///PATH")
        store = FileStore(path, world_size)
        store.set_timeout(timeout)
        return store
    else:
        raise ValueError(f"init_method {init_method!r} is not supported; use 'env://', "
                         "'tcp://HOST:PORT', 'file:///PATH' or pass store=")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # under torcia-run (or torchrun) the agents serve the store: join it, apart from
        # the workers of earlier attempts
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        store = TCPStore(host, port, world_size, is_master=False, timeout=timeout)
        return PrefixStore(f"/worker/attempt_{attempt}", store)
    return TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout,
                    wait_for_workers=False)


def destroy_process_group(group=None) -> None:
    """Leave the group (the default one: the whole distributed state).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)
    >>> dist.destroy_process_group()
    >>> dist.is_initialized()
    False
    """
    if group is None or group is GroupMember.WORLD:
        if _World.default is not None:
            _World.default.destroy()
        _World.default = None
        _World.groups.clear()
        _World.made.clear()
    elif group is not GroupMember.NON_GROUP_MEMBER:
        group.pg.destroy()


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (the default group when None).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.get_rank()
    0
    >>> dist.destroy_process_group()
    """
    return _pg(group).rank


def get_world_size(group=None) -> int:
    """The number of processes in ``group``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.get_world_size()
    1
    >>> dist.destroy_process_group()
    """
    return _pg(group).size


def get_backend(group=None) -> str:
    """The name of the backend of ``group`` (the default group when None).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.get_backend()
    'mpi'
    >>> dist.destroy_process_group()
    """
    return _pg(group).backend_name


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A sub-group of the given global ranks (all when None). Every process must call
    it; processes outside get ``GroupMember.NON_GROUP_MEMBER``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> group = dist.new_group([0])
    >>> dist.get_world_size(group), dist.get_process_group_ranks(group)
    (1, [0])
    >>> dist.destroy_process_group()
    """
    world = _pg()
    ranks = sorted(range(world.size) if ranks is None else set(ranks))
    for r in ranks:
        if not 0 <= r < world.size:
            raise ValueError(f"new_group: rank {r} is out of range for world size {world.size}")
    pg = world.subgroup(ranks)
    if pg is None:
        return GroupMember.NON_GROUP_MEMBER
    _World.count += 1
    handle = ProcessGroupHandle(pg, ranks)
    _World.made.append(handle)
    return handle


def _group_of_ranks(ranks):
    """The sub-group of exactly the global ``ranks`` that this process created earlier
    (with :func:`new_group`), for APIs that name groups by their ranks."""
    for handle in _World.made:
        if handle.ranks == sorted(ranks):
            return handle
    raise ValueError(f"no process group of ranks {sorted(ranks)} was created; call "
                     "new_group(ranks) on every rank first")


def get_process_group_ranks(group) -> list[int]:
    """The global ranks of the members of ``group`` (the default group when None), in group-
    rank order.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.get_process_group_ranks(dist.GroupMember.WORLD)
    [0]
    >>> dist.destroy_process_group()
    """
    if group is None:
        return list(range(_pg().size))
    return list(group.ranks)


def _group_rank(group, global_rank: int) -> int:
    """A global rank (as PyTorch's APIs take) as a rank within ``group``."""
    if group is None or group is GroupMember.WORLD:
        return global_rank
    try:
        return group.ranks.index(global_rank)
    except ValueError:
        raise ValueError(f"global rank {global_rank} is not part of group {group}") from None


# ---------------------------------------------------------------------------------------
# tensors in and out
# ---------------------------------------------------------------------------------------


_MOVE_HINTS = {"cpu": "move it with .cpu(), or use the nccl backend",
               "cuda": "move it with .cuda(), or use the mpi backend"}


def _array(t: Tensor, pg: ProcessGroup, name="tensor"):
    """``t``'s array, once ``t`` is on the device that ``pg`` moves."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")
    dev = t.device
    if dev.type != pg.device_type or pg.device_index not in (None, dev.index):
        where = pg.device_type
        if pg.device_index is not None:
            where += f":{pg.device_index}"
        hint = f"move it with .to({where!r})"
        if dev.type != pg.device_type:
            hint = _MOVE_HINTS.get(pg.device_type, hint)
        raise RuntimeError(f"{name} is on {dev}; the {pg.backend_name!r} process group handles "
                           f"{where} tensors ({hint})")
    return t.__torcia_data__


def _contiguous(t: Tensor, pg: ProcessGroup, name="tensor"):
    return pg.xp.ascontiguousarray(_array(t, pg, name))


class _InPlace:
    """A contiguous buffer for a tensor; written back (and the version bumped) after."""

    def __init__(self, t: Tensor, pg: ProcessGroup, name="tensor"):
        arr = _array(t, pg, name)
        self.t = t
        self.contiguous = arr.flags.c_contiguous
        self.buf = arr if self.contiguous else pg.xp.ascontiguousarray(arr)

    def done(self):
        if not self.contiguous:
            self.t.__torcia_data__[...] = self.buf
        bump_version(self.t)


def _spread(tensors, out):
    """A callback copying slice i of the received array ``out`` into ``tensors[i]``."""

    def spread():
        for t, part in zip(tensors, out):
            t.__torcia_data__[...] = part
            bump_version(t)

    return spread


def _finish(work: Work, async_op: bool, *after, result=None):
    """Run ``after`` callbacks once the work completes; wait unless ``async_op``.
    ``result`` (the output tensors) is the value of the work's future."""
    if _World.comm_name is not None:
        work._what = _World.comm_name
    if get_debug_level() is not DebugLevel.OFF:
        print(f"[torcia.distributed rank {work._rank}] {work._what}", file=sys.stderr,
              flush=True)
    inner = work._finish

    def finish():
        if inner is not None:
            inner()
        for fn in after:
            if fn is not None:
                fn()

    work._finish = finish
    work._result = result
    if async_op:
        return work
    work.wait()
    return None


def _check_op(op):
    if op not in ReduceOp.ALL:
        raise ValueError(f"unknown reduce op {op!r}; use torcia.distributed.ReduceOp")
    return op


def _code(name: str) -> int:
    """A number for ``name`` that is the same in every process (Python's own ``hash`` of
    a string is salted per process; a first-seen numbering differs between ranks)."""
    return zlib.crc32(name.encode())


# the names a disagreement message can spell out: the dtypes a rank may send
_NAMES = {_code(n): n for n in ("bool", "uint8", "int8", "int16", "int32", "int64",
                                "float16", "bfloat16", "float32", "float64", "complex64",
                                "complex128")}
_NAMES.update({_code(op): op for op in ReduceOp.ALL})


def _agree(pg, array, what, op=None):
    """Raise on every rank, naming each rank's shape, dtype and reduction, when the ranks
    disagree.

    MPI and NCCL themselves would truncate, read past a buffer, reduce float32 bits as
    float64 or wait forever; one small all-gather of (dtype, op, shape) first turns that
    into an error, on every rank since every rank sees the whole table.
    """
    if pg.size == 1:
        return
    mine = np.zeros(11, dtype=np.int64)
    mine[0], mine[1], mine[2] = _code(array.dtype.name), _code(op or ""), array.ndim
    mine[3:3 + min(array.ndim, 8)] = array.shape[:8]
    table = _all_gather_host(pg, mine)
    if (table != table[0]).any():
        parts = [f"rank {r}: {row[3:3 + row[2]].tolist()} "
                 f"{_NAMES.get(int(row[0]), 'another dtype')}"
                 + (f" {_NAMES.get(int(row[1]), 'another op')}" if op is not None else "")
                 for r, row in enumerate(table)]
        raise RuntimeError(f"{what}: the tensors differ in shape, dtype or reduction across "
                           "ranks (" + "; ".join(parts) + ")")


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group, in place on every process.

    Examples
    --------
    Under ``torcia-run --nproc-per-node 2`` each rank holding ``[rank]`` gets ``[1]``::

        t = torcia.tensor([float(dist.get_rank())]); dist.all_reduce(t)

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> dist.all_reduce(x, op=dist.ReduceOp.SUM)
    >>> x
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    buf = _InPlace(tensor, _pg(group))
    _agree(_pg(group), buf.buf, "all_reduce", _check_op(op))
    work = _pg(group).allreduce(buf.buf, op)
    return _finish(work, async_op, buf.done, result=[tensor])


def broadcast(tensor, src, group=None, async_op=False):
    """Copy ``tensor`` from global rank ``src`` to every process of the group.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> dist.broadcast(x, src=0)
    >>> x
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    buf = _InPlace(tensor, _pg(group))
    _agree(_pg(group), buf.buf, "broadcast")
    work = _pg(group).broadcast(buf.buf, _group_rank(group, src))
    return _finish(work, async_op, buf.done, result=[tensor])


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group into the copy on global rank ``dst``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> dist.reduce(x, dst=0)
    >>> x
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    buf = _InPlace(tensor, _pg(group))
    _agree(_pg(group), buf.buf, "reduce", _check_op(op))
    work = _pg(group).reduce(buf.buf, _group_rank(group, dst), op)
    return _finish(work, async_op, buf.done, result=[tensor])


def _same_shape(tensors, ref, what):
    for i, t in enumerate(tensors):
        if tuple(t.shape) != tuple(ref.shape) or t.dtype is not ref.dtype:
            raise ValueError(f"{what}: tensor {i} has shape {list(t.shape)} and dtype "
                             f"{t.dtype}, expected {list(ref.shape)} and {ref.dtype}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fill ``tensor_list`` (one tensor per rank) with every rank's ``tensor``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = [torcia.zeros(2)]
    >>> dist.all_gather(out, x)
    >>> out
    [tensor([1., 2.])]
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    if len(tensor_list) != pg.size:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, the group "
                         f"has {pg.size} ranks")
    _same_shape(tensor_list, tensor, "all_gather")
    src = _contiguous(tensor, pg)
    _agree(pg, src, "all_gather")
    out = pg.xp.empty((pg.size,) + src.shape, dtype=src.dtype)
    work = pg.allgather(out, src)
    return _finish(work, async_op, _spread(tensor_list, out), result=tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Gather every rank's ``input_tensor`` concatenated along dim 0 into ``output_tensor``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = torcia.zeros(2)
    >>> dist.all_gather_into_tensor(out, x)
    >>> out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    src = _contiguous(input_tensor, pg, "input_tensor")
    n = src.shape[0] if src.ndim else 1
    want = (pg.size * n,) + src.shape[1:] if src.ndim else (pg.size,)
    if tuple(output_tensor.shape) != want:
        raise ValueError(f"all_gather_into_tensor: output_tensor has shape "
                         f"{list(output_tensor.shape)}, expected {list(want)}")
    buf = _InPlace(output_tensor, pg, "output_tensor")
    work = pg.allgather(buf.buf.reshape((pg.size,) + src.shape), src)
    return _finish(work, async_op, buf.done, result=[output_tensor])


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Collect every rank's ``tensor`` into ``gather_list`` on global rank ``dst``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = [torcia.zeros(2)]
    >>> dist.gather(x, out, dst=0)
    >>> out
    [tensor([1., 2.])]
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    root = _group_rank(group, dst)
    src = _contiguous(tensor, pg)
    out = None
    if pg.rank == root:
        if gather_list is None or len(gather_list) != pg.size:
            raise ValueError(f"gather: the destination needs a gather_list of {pg.size} tensors")
        _same_shape(gather_list, tensor, "gather")
        out = pg.xp.empty((pg.size,) + src.shape, dtype=src.dtype)
    elif gather_list:
        raise ValueError("gather: Argument ``gather_list`` must NOT be specified on "
                         "non-destination ranks.")
    work = pg.gather(out, src, root)
    return _finish(work, async_op, _spread(gather_list, out) if out is not None else None)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Send ``scatter_list[i]`` from global rank ``src`` into ``tensor`` on rank i.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> out = torcia.zeros(2)
    >>> dist.scatter(out, [torcia.tensor([1.0, 2.0])], src=0)
    >>> out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    root = _group_rank(group, src)
    buf = _InPlace(tensor, pg)
    send = None
    if pg.rank == root:
        if scatter_list is None or len(scatter_list) != pg.size:
            raise ValueError(f"scatter: the source needs a scatter_list of {pg.size} tensors")
        _same_shape(scatter_list, tensor, "scatter")
        send = pg.xp.stack([_array(t, pg) for t in scatter_list])
    elif scatter_list:
        raise ValueError("scatter: Argument ``scatter_list`` must NOT be specified on "
                         "non-source ranks.")
    work = pg.scatter(buf.buf, send, root)
    return _finish(work, async_op, buf.done)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input_list`` across ranks; rank i keeps the reduction of entry i.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> out = torcia.zeros(2)
    >>> dist.reduce_scatter(out, [torcia.tensor([1.0, 2.0])])
    >>> out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    if len(input_list) != pg.size:
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors, the "
                         f"group has {pg.size} ranks")
    _same_shape(input_list, output, "reduce_scatter")
    buf = _InPlace(output, pg, "output")
    send = pg.xp.stack([_array(t, pg) for t in input_list])
    _agree(pg, send, "reduce_scatter", _check_op(op))
    work = pg.reduce_scatter(buf.buf, send, op)
    return _finish(work, async_op, buf.done)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """As :func:`reduce_scatter`, with the inputs concatenated along dim 0 in ``input``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = torcia.zeros(2)
    >>> dist.reduce_scatter_tensor(out, x)
    >>> out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    buf = _InPlace(output, pg, "output")
    send = _contiguous(input, pg, "input").reshape((pg.size,) + buf.buf.shape)
    _agree(pg, send, "reduce_scatter_tensor", _check_op(op))
    work = pg.reduce_scatter(buf.buf, send, op)
    return _finish(work, async_op, buf.done, result=[output])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank i sends ``input_tensor_list[j]`` to rank j's ``output_tensor_list[i]``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = [torcia.zeros(2)]
    >>> dist.all_to_all(out, [x])
    >>> out
    [tensor([1., 2.])]
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    for name, lst in (("output_tensor_list", output_tensor_list),
                      ("input_tensor_list", input_tensor_list)):
        if len(lst) != pg.size:
            raise ValueError(f"all_to_all: {name} has {len(lst)} tensors, the group has "
                             f"{pg.size} ranks")
    _same_shape(output_tensor_list + input_tensor_list, input_tensor_list[0], "all_to_all")
    send = pg.xp.stack([_array(t, pg) for t in input_tensor_list])
    out = pg.xp.empty_like(send)
    work = pg.alltoall(out, send)
    return _finish(work, async_op, _spread(output_tensor_list, out))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Split ``input`` along dimension 0, send part i to rank i, and write the parts
    received, in rank order, into ``output``. The parts are equal unless
    ``input_split_sizes`` (rows sent to each rank) and ``output_split_sizes`` (rows
    received from each) say otherwise.

    Examples
    --------
    Two ranks; rank 0 sends 1 row to itself and 2 to rank 1, rank 1 sends 1 to each::

        dist.all_to_all_single(out, inp, output_split_sizes=[1, 1] if r == 0 else [2, 1],
                               input_split_sizes=[1, 2] if r == 0 else [1, 1])

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> out = torcia.zeros(2)
    >>> dist.all_to_all_single(out, x)
    >>> out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    if output_split_sizes is None and input_split_sizes is None:
        send = _contiguous(input, pg, "input").reshape((pg.size, -1))
        buf = _InPlace(output, pg, "output")
        work = pg.alltoall(buf.buf.reshape(send.shape), send)
        return _finish(work, async_op, buf.done, result=[output])
    return _all_to_all_uneven(output, input, output_split_sizes, input_split_sizes, pg,
                              async_op)


def _all_to_all_uneven(output, input, output_split_sizes, input_split_sizes, pg, async_op):
    """all_to_all_single with parts of different lengths: every part padded to the
    longest part of any rank (one small all-reduce finds it), one all-to-all, then the
    received rows copied out."""
    src = _contiguous(input, pg, "input")
    rows_in = _splits(input_split_sizes, src.shape[0], pg.size, "input")
    buf = _InPlace(output, pg, "output")
    rows_out = _splits(output_split_sizes, buf.buf.shape[0] if buf.buf.ndim else 0, pg.size,
                       "output")
    longest = pg.xp.asarray(np.array([max(rows_in + rows_out)], dtype=np.int64))
    pg.allreduce(longest, ReduceOp.MAX).wait()
    width = int(host_array(longest)[0])
    inner = src.shape[1:]
    send = pg.xp.zeros((pg.size, width) + inner, dtype=src.dtype)
    offset = 0
    for r, n in enumerate(rows_in):
        send[r, :n] = src[offset:offset + n]
        offset += n
    received = pg.xp.empty_like(send)
    work = pg.alltoall(received, send)

    def unpack():
        offset = 0
        for r, n in enumerate(rows_out):
            buf.buf[offset:offset + n] = received[r, :n]
            offset += n
        buf.done()

    return _finish(work, async_op, unpack, result=[output])


def _splits(sizes, rows, size, name):
    if sizes is None:
        if rows % size:
            raise ValueError(f"all_to_all_single: {name} has {rows} rows, not divisible by "
                             f"the {size} ranks; give {name}_split_sizes")
        return [rows // size] * size
    sizes = [int(n) for n in sizes]
    if len(sizes) != size or sum(sizes) != rows or min(sizes) < 0:
        raise ValueError(f"all_to_all_single: {name}_split_sizes {sizes} should be {size} "
                         f"non-negative row counts adding up to {rows}")
    return sizes


def isend(tensor, dst, group=None, tag=0) -> Work:
    """Send ``tensor`` to global rank ``dst`` without waiting; ``wait()`` the handle.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> y = torcia.zeros(2)
    >>> sending = dist.isend(x, dst=0)  # to this process itself
    >>> dist.irecv(y, src=0).wait()
    True
    >>> sending.wait()
    True
    >>> y
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    return pg.send(_contiguous(tensor, pg), _group_rank(group, dst), tag)


def irecv(tensor, src=None, group=None, tag=0) -> Work:
    """Receive into ``tensor`` from global rank ``src`` (any when None), without waiting.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> y = torcia.zeros(2)
    >>> sending = dist.isend(x, dst=0)
    >>> receiving = dist.irecv(y, src=0)
    >>> receiving.wait()
    True
    >>> sending.wait()
    True
    >>> y
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    buf = _InPlace(tensor, _pg(group))
    work = _pg(group).recv(buf.buf, None if src is None else _group_rank(group, src), tag)
    _finish(work, True, buf.done)
    return work


def send(tensor, dst, group=None, tag=0) -> None:
    """Send ``tensor`` to global rank ``dst`` and wait until it is sent.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> y = torcia.zeros(2)
    >>> receiving = dist.irecv(y, src=0)
    >>> dist.send(x, dst=0)
    >>> receiving.wait()
    True
    >>> y
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src=None, group=None, tag=0) -> int:
    """Receive into ``tensor``; returns the sender's rank.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> y = torcia.zeros(2)
    >>> sending = dist.isend(x, dst=0)
    >>> dist.recv(y, src=0)
    0
    >>> sending.wait()
    True
    >>> y
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    work = irecv(tensor, src, group, tag)
    work.wait()
    return getattr(work, "source", src)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every process of the group reaches this call.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.barrier()
    >>> dist.destroy_process_group()
    """
    return _finish(_pg(group).barrier(), async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A :func:`barrier` that names the ranks that do not reach it within ``timeout`` (the
    group's timeout when None): every rank reports to rank 0, which answers once all have.

    Rank 0 raises naming the first rank missing (every missing rank, with
    ``wait_all_ranks``); the others raise if rank 0 does not answer in time.

    Examples
    --------
    Under ``torcia-run --nproc-per-node 2``, rank 1 late by more than the timeout::

        dist.monitored_barrier(timeout=datetime.timedelta(seconds=5))
        # rank 0: RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 5000 ms

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dist.monitored_barrier()
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    limit = _seconds(timeout if timeout is not None else pg.timeout)
    if pg.size == 1:
        return
    deadline = time.monotonic() + limit
    token = pg.xp.zeros(1, dtype=np.uint8)
    if pg.rank != 0:
        sent = pg.send(token, 0, _MONITORED_TAG)
        answer = pg.recv(pg.xp.zeros(1, dtype=np.uint8), 0, _MONITORED_TAG)
        if not _poll([sent, answer], deadline):
            message = (f"[Rank {pg.rank}]: monitored_barrier timed out after "
                       f"{limit * 1000:.0f} ms waiting for rank 0 to answer")
            report_failure(pg.rank, message)
            raise RuntimeError(message)
        return
    arrivals = {r: pg.recv(pg.xp.zeros(1, dtype=np.uint8), r, _MONITORED_TAG)
                for r in range(1, pg.size)}
    _poll(list(arrivals.values()), deadline)
    missing = [r for r, work in arrivals.items() if not work.is_completed()]
    if missing:
        if not wait_all_ranks:
            missing = missing[:1]
        ranks = ", ".join(str(_global_rank(group, r)) for r in missing)
        message = (f"[Rank 0]: {'Ranks' if len(missing) > 1 else 'Rank'} {ranks} failed to "
                   f"pass monitoredBarrier in {limit * 1000:.0f} ms")
        report_failure(pg.rank, message)
        raise RuntimeError(message)
    answers = [pg.send(token, r, _MONITORED_TAG) for r in range(1, pg.size)]
    _poll(answers, deadline + _seconds(pg.timeout))


# the tag of monitored_barrier's messages, apart from those of send/recv (tag 0 by default)
_MONITORED_TAG = 32000


def _poll(works, deadline) -> bool:
    """Wait until every work completes (True) or ``deadline`` passes (False)."""
    pause = 0.0
    while True:
        pending = [w for w in works if not w.is_completed()]
        if not pending:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(0.005, pause * 2 + 1e-5)


def _global_rank(group, group_rank: int) -> int:
    return group_rank if group is None or group is GroupMember.WORLD else group.ranks[group_rank]


# ---------------------------------------------------------------------------------------
# objects, through a serializer that cannot run code on load
# ---------------------------------------------------------------------------------------


def _all_gather_host(pg, mine: np.ndarray) -> np.ndarray:
    """Every rank's ``mine`` (a host array), through the group's device."""
    out = pg.xp.empty((pg.size,) + mine.shape, dtype=mine.dtype)
    pg.allgather(out, pg.xp.asarray(mine)).wait()
    return host_array(out)


def _broadcast_host(pg, mine: np.ndarray, root: int) -> np.ndarray:
    """Rank ``root``'s ``mine`` (a host array), through the group's device."""
    buf = pg.xp.asarray(mine)
    pg.broadcast(buf, root).wait()
    return host_array(buf)


def _gather_bytes(payload: bytes, group) -> list[bytes]:
    pg = _pg(group)
    sizes = _all_gather_host(pg, np.array([len(payload)], dtype=np.int64))
    mine = np.zeros(int(sizes.max()), dtype=np.uint8)
    mine[: len(payload)] = np.frombuffer(payload, dtype=np.uint8)
    out = _all_gather_host(pg, mine)
    return [out[i, : int(sizes[i, 0])].tobytes() for i in range(pg.size)]


def all_gather_object(object_list, obj, group=None) -> None:
    """Fill ``object_list`` with every rank's ``obj`` (tensors, numbers, strings, lists,
    tuples, dicts; no arbitrary classes, since nothing is unpickled).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> out = [None]
    >>> dist.all_gather_object(out, {"rank": dist.get_rank()})
    >>> out
    [{'rank': 0}]
    >>> dist.destroy_process_group()
    """
    payloads = _gather_bytes(_objects.dumps(obj), group)
    if len(object_list) != len(payloads):
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries, the "
                         f"group has {len(payloads)} ranks")
    for i, p in enumerate(payloads):
        object_list[i] = _objects.loads(p)


def gather_object(obj, object_gather_list=None, dst=0, group=None) -> None:
    """Collect the picklable ``obj`` of every rank into ``object_gather_list`` (on ``dst``
    only; one entry per rank).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> out = [None]
    >>> dist.gather_object({"rank": dist.get_rank()}, out, dst=0)
    >>> out
    [{'rank': 0}]
    >>> dist.destroy_process_group()
    """
    payloads = _gather_bytes(_objects.dumps(obj), group)
    if _pg(group).rank == _group_rank(group, dst):
        for i, p in enumerate(payloads):
            object_gather_list[i] = _objects.loads(p)


def broadcast_object_list(object_list, src=0, group=None, device=None) -> None:
    """Replace ``object_list``'s entries on every rank with those of global rank ``src``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> objects = ["config", 3]
    >>> dist.broadcast_object_list(objects, src=0)
    >>> objects
    ['config', 3]
    >>> dist.destroy_process_group()
    """
    pg = _pg(group)
    root = _group_rank(group, src)
    payload = _objects.dumps(list(object_list)) if pg.rank == root else b""
    size = _broadcast_host(pg, np.array([len(payload)], dtype=np.int64), root)
    buf = np.zeros(int(size[0]), dtype=np.uint8)
    if pg.rank == root:
        buf[:] = np.frombuffer(payload, dtype=np.uint8)
    values = _objects.loads(_broadcast_host(pg, buf, root).tobytes())
    object_list[:] = values


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0,
                        group=None) -> None:
    """Send the i-th picklable object of ``scatter_object_input_list`` (given on ``src``) to
    rank i, which finds it in ``scatter_object_output_list[0]``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> out = [None]
    >>> dist.scatter_object_list(out, [{"part": 0}], src=0)
    >>> out
    [{'part': 0}]
    >>> dist.destroy_process_group()
    """
    objs = [scatter_object_input_list]
    broadcast_object_list(objs, src, group)
    scatter_object_output_list[0] = objs[0][_pg(group).rank]


__all__ = [
    "DistStoreError", "GroupMember", "ProcessGroup", "ReduceOp", "TCPStore", "Work",
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
    "all_to_all_single", "barrier",
    "broadcast", "broadcast_object_list", "destroy_process_group", "gather", "gather_object",
    "get_backend", "get_process_group_ranks", "get_rank", "get_world_size",
    "init_process_group", "irecv", "is_available", "is_backend_available", "is_initialized",
    "is_mpi_available", "is_nccl_available", "isend", "monitored_barrier", "new_group", "recv",
    "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list",
    "send",
]

