"""The "nccl" process group: collectives on CUDA tensors through NCCL, as CuPy exposes it.

Rank 0 makes NCCL's unique id and publishes it in the rendezvous store; once every rank
has said in the store that it is there, all join the communicator. Each operation is
enqueued on the current CUDA stream, so it is ordered with the kernels around it, and a
CUDA event recorded after it tells when it is done: the :class:`Work` polls that event,
so a timeout turns a dead peer into an error instead of a hang.

To say *which* peer died, every process bumps a counter in the store twice a second from
a background thread; when an operation times out, the ranks whose counter stood still are
named, and the communicator is aborted (its kernels would otherwise wait forever). A rank
whose exception goes uncaught says so in the store before it exits, and the others' next
wait raises with its message within a beat, rather than at the timeout.

NCCL has no bool type: bools reduce as uint8, with MAX for "or" (SUM, MAX) and MIN for
"and" (MIN, PRODUCT). AVG is a SUM divided afterwards, as NCCL's own AVG is for floating
types only. Data that is only moved travels as raw bytes.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time

import numpy as np

from torcia.distributed.group import ProcessGroup, ReduceOp, Work, _seconds
from torcia.distributed.store import DistStoreError

_TYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
          "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
          "float16": "NCCL_FLOAT16", "bfloat16": "NCCL_BFLOAT16", "float32": "NCCL_FLOAT32",
          "float64": "NCCL_FLOAT64"}
_OPS = {ReduceOp.SUM: "NCCL_SUM", ReduceOp.AVG: "NCCL_SUM", ReduceOp.PRODUCT: "NCCL_PROD",
        ReduceOp.MIN: "NCCL_MIN", ReduceOp.MAX: "NCCL_MAX"}
_BOOL_OPS = {ReduceOp.SUM: "NCCL_MAX", ReduceOp.MAX: "NCCL_MAX", ReduceOp.MIN: "NCCL_MIN",
             ReduceOp.PRODUCT: "NCCL_MIN"}
_FAILED = "nccl/failed"  # the store key of the first uncaught error's message


def _ptr(arr) -> int:
    """The device address of ``arr``'s first element."""
    return arr.data.ptr


def _reducible(nccl, arr, op):
    """(array to reduce, NCCL datatype, NCCL op) for reducing ``arr`` with ``op``."""
    if arr.dtype.kind == "b":
        if op == ReduceOp.AVG:
            raise RuntimeError("all_reduce with AVG is not defined for bool tensors")
        return arr.view(np.uint8), nccl.NCCL_UINT8, getattr(nccl, _BOOL_OPS[op])
    if arr.dtype.name not in _TYPES:
        raise TypeError(f"NCCL cannot reduce {arr.dtype.name} tensors; it reduces "
                        + ", ".join(_TYPES) + " (and bool)")
    return arr, getattr(nccl, _TYPES[arr.dtype.name]), getattr(nccl, _OPS[op])


def backend_factory(probe):
    """The factory to register as "nccl": :meth:`NCCLProcessGroup.create`, or where NCCL
    cannot run, a stand-in whose ``unavailable_reason`` says why.

    ``probe()`` returns ``(cupy, None)`` when a GPU can be used, else ``(None, why)``.
    """
    cupy, why = probe()
    if cupy is not None:
        from cupy.cuda import nccl

        if not nccl.available:
            why = ("CuPy could not load the NCCL library; install NCCL for your CUDA version "
                   "where CuPy finds it (CuPy's installation guide, 'optional libraries')")
    if why is None:
        return NCCLProcessGroup.create

    def unavailable(**kwargs):
        raise RuntimeError(why)

    unavailable.unavailable_reason = why
    return unavailable


class _Liveness:
    """Each process bumps its counter in the store every ``interval`` seconds; the ranks
    whose counter stands still are gone."""

    interval = 0.5

    def __init__(self, store, rank):
        # its own connection: a beat must not queue behind a blocking get of the caller
        self.store = store.clone() if hasattr(store, "clone") else store
        self.rank = rank
        self.groups = 0
        self.failed = None  # what a rank that raised said, once one has
        self._stop = threading.Event()
        threading.Thread(target=self._beat, name="nccl-liveness", daemon=True).start()

    def _beat(self):
        while not self._stop.is_set():
            try:
                self.store.add(f"nccl/alive/{self.rank}", 1)
                if self.failed is None and self.store.check([_FAILED]):
                    self.failed = self.store.get(_FAILED).decode()
            except (OSError, DistStoreError):
                return  # the store went away: a timeout will say so
            self._stop.wait(self.interval)

    def report_uncaught_errors(self):
        """Make an uncaught exception in this process tell the other ranks, through the
        store, before the process exits."""
        previous = sys.excepthook

        def report(exc_type, exc, tb):
            previous(exc_type, exc, tb)
            try:
                self.store.set(_FAILED, f"rank {self.rank} raised {exc_type.__name__}: "
                                        f"{exc}".encode())
                if self.rank == 0:
                    # its process serves the store: give the others a beat to read it
                    time.sleep(3 * self.interval)
            except (OSError, DistStoreError):
                pass

        sys.excepthook = report

    def silent(self, ranks) -> list[int]:
        """The ranks among ``ranks`` that beat no more (takes a few intervals)."""
        before = [self.store.add(f"nccl/alive/{r}", 0) for r in ranks]
        time.sleep(3 * self.interval)
        return [r for r, b in zip(ranks, before) if self.store.add(f"nccl/alive/{r}", 0) == b]

    def next_group_key(self) -> str:
        """A store prefix for the next communicator (every process makes groups in the
        same order, as new_group requires, so they agree on it)."""
        self.groups += 1
        return f"nccl/{self.groups}"

    def stop(self):
        self._stop.set()


def _pack_id(uid) -> bytes:
    """NCCL's unique id for the store, as CuPy hands it out: ``bytes`` (CuPy 14) or a
    tuple of 128 char values (older CuPy), so that every rank gives the communicator
    exactly what ``get_unique_id`` returned."""
    if isinstance(uid, (bytes, bytearray)):
        return b"B" + bytes(uid)
    return b"T" + json.dumps(list(uid)).encode()


def _unpack_id(data: bytes):
    return data[1:] if data[:1] == b"B" else tuple(json.loads(data[1:].decode()))


def _communicator(nccl, store, key, rank, ranks, timeout):
    """Join the communicator of the processes with global ranks ``ranks`` (this one is
    ``ranks[rank]``), once all of them have said in the store that they are there."""
    if rank == 0:
        store.set(f"{key}/id", _pack_id(nccl.get_unique_id()))
    store.set(f"{key}/joined/{rank}", b"1")
    try:
        store.wait([f"{key}/joined/{r}" for r in range(len(ranks))], timeout)
    except DistStoreError:
        missing = [g for r, g in enumerate(ranks) if not store.check([f"{key}/joined/{r}"])]
        raise RuntimeError(f"nccl process group: rank(s) {missing} did not join within "
                           f"{_seconds(timeout):g} s") from None
    uid = _unpack_id(store.get(f"{key}/id"))
    return nccl.NcclCommunicator(len(ranks), uid, rank)


class NCCLProcessGroup(ProcessGroup):
    """A process group over an NCCL communicator, on the current CUDA device.

    Made by ``init_process_group("nccl")``; each process uses the device current when it
    is created (call ``torcia.cuda.set_device(local_rank)`` first on a machine with
    several GPUs).
    """

    backend_name = "nccl"
    device_type = "cuda"

    def __init__(self, comm, rank, size, timeout, cupy, liveness, ranks, world=False):
        super().__init__(rank, size, timeout)
        from cupy.cuda import nccl

        self.comm = comm
        self.cp = cupy
        self.nccl = nccl
        self.device_index = cupy.cuda.runtime.getDevice()
        self.ranks = ranks
        self._liveness = liveness
        self._world = world
        self._aborted = None

    @classmethod
    def create(cls, rank, world_size, timeout, init_method, store):
        import cupy
        from cupy.cuda import nccl

        ranks = list(range(world_size))
        liveness = _Liveness(store, rank)
        comm = _communicator(nccl, store, "nccl/0", rank, ranks, timeout)
        if world_size > 1:
            liveness.report_uncaught_errors()
        return cls(comm, rank, world_size, timeout, cupy, liveness, ranks, world=True)

    # ----- plumbing -----------------------------------------------------------------
    def _stream(self) -> int:
        if self._aborted is not None:
            raise RuntimeError(f"the nccl process group was aborted ({self._aborted}); "
                               "destroy it and make a new one")
        return self.cp.cuda.get_current_stream().ptr

    def _abort(self, why: str) -> str:
        """Abort the communicator (its kernels would wait forever); returns the message."""
        self.comm.abort()
        self._aborted = why
        return why + "; the NCCL communicator was aborted"

    def _work(self, what, *buffers, finish=None):
        event = self.cp.cuda.Event(block=False, disable_timing=True)
        event.record()

        def test():
            if event.done:
                return True
            if self._liveness.failed is not None:
                raise RuntimeError(f"{what} on rank {self.rank}: "
                                   + self._abort(self._liveness.failed))
            return False

        work = Work(test, finish, what, self.timeout, self.rank, on_timeout=self._on_timeout)
        work.buffers = buffers  # NCCL reads and writes them until the event
        return work

    def _on_timeout(self) -> str:
        others = [g for g in self.ranks if g != self.ranks[self.rank]]
        try:
            dead = self._liveness.silent(others)
            why = (f"rank {', '.join(map(str, dead))} stopped responding (its process has "
                   "likely died)" if dead else "every rank is alive: a peer may not have "
                   "called it, or called another collective")
        except (OSError, DistStoreError) as exc:
            why = f"the store on rank 0 is unreachable, so rank 0 has likely died ({exc})"
        return self._abort(why)

    def _average(self, arr, op):
        if op != ReduceOp.AVG:
            return None
        divide = self.cp.floor_divide if arr.dtype.kind in "iu" else self.cp.true_divide
        return lambda: divide(arr, self.size, out=arr)

    @contextlib.contextmanager
    def _grouped(self):
        """Point-to-point calls issued together, so that their order cannot deadlock."""
        self.nccl.groupStart()
        try:
            yield
        finally:
            self.nccl.groupEnd()

    # ----- collectives ----------------------------------------------------------------
    def allreduce(self, array, op):
        buf, dtype, nccl_op = _reducible(self.nccl, array, op)
        self.comm.allReduce(_ptr(buf), _ptr(buf), buf.size, dtype, nccl_op, self._stream())
        return self._work("all_reduce", array, finish=self._average(array, op))

    def broadcast(self, array, src):
        self.comm.bcast(_ptr(array), array.nbytes, self.nccl.NCCL_UINT8, src, self._stream())
        return self._work("broadcast", array)

    def reduce(self, array, dst, op):
        buf, dtype, nccl_op = _reducible(self.nccl, array, op)
        self.comm.reduce(_ptr(buf), _ptr(buf), buf.size, dtype, nccl_op, dst, self._stream())
        finish = self._average(array, op) if self.rank == dst else None
        return self._work("reduce", array, finish=finish)

    def allgather(self, out, array):
        self.comm.allGather(_ptr(array), _ptr(out), array.nbytes, self.nccl.NCCL_UINT8,
                            self._stream())
        return self._work("all_gather", out, array)

    def reduce_scatter(self, out, array, op):
        buf, dtype, nccl_op = _reducible(self.nccl, array, op)
        target = _reducible(self.nccl, out, op)[0]
        self.comm.reduceScatter(_ptr(buf), _ptr(target), target.size, dtype, nccl_op,
                                self._stream())
        return self._work("reduce_scatter", out, array, finish=self._average(out, op))

    def _exchange(self, sends, recvs):
        """Send ``array`` to each ``(array, rank)`` in ``sends`` and receive from each in
        ``recvs``, as one NCCL group."""
        stream = self._stream()
        uint8 = self.nccl.NCCL_UINT8
        with self._grouped():
            for arr, peer in sends:
                self.comm.send(_ptr(arr), arr.nbytes, uint8, peer, stream)
            for arr, peer in recvs:
                self.comm.recv(_ptr(arr), arr.nbytes, uint8, peer, stream)

    def gather(self, out, array, dst):
        if self.rank == dst:
            self._exchange([], [(out[r], r) for r in range(self.size) if r != dst])
            out[dst] = array
        else:
            self._exchange([(array, dst)], [])
        return self._work("gather", out, array)

    def scatter(self, out, array, src):
        if self.rank == src:
            self._exchange([(array[r], r) for r in range(self.size) if r != src], [])
            out[...] = array[src]
        else:
            self._exchange([], [(out, src)])
        return self._work("scatter", out, array)

    def alltoall(self, out, array):
        peers = [r for r in range(self.size) if r != self.rank]
        self._exchange([(array[r], r) for r in peers], [(out[r], r) for r in peers])
        out[self.rank] = array[self.rank]
        return self._work("all_to_all", out, array)

    def send(self, array, dst, tag):
        self._exchange([(array, dst)], [])
        return self._work("send", array)

    def recv(self, array, src, tag):
        if src is None:
            raise ValueError("the nccl backend cannot receive from any rank (NCCL has no "
                             "wildcard receive): pass src")
        self._exchange([], [(array, src)])
        work = self._work("recv", array)
        work.source = src
        return work

    def barrier(self):
        flag = self.cp.zeros(1, dtype=np.float32)
        self.comm.allReduce(_ptr(flag), _ptr(flag), 1, self.nccl.NCCL_FLOAT32,
                            self.nccl.NCCL_SUM, self._stream())
        return self._work("barrier", flag)

    def subgroup(self, ranks):
        key = self._liveness.next_group_key()
        if self.rank not in ranks:
            return None
        members = [self.ranks[r] for r in ranks]
        rank = ranks.index(self.rank)
        comm = _communicator(self.nccl, self._liveness.store, key, rank, members, self.timeout)
        return NCCLProcessGroup(comm, rank, len(ranks), self.timeout, self.cp, self._liveness,
                                members)

    def destroy(self):
        if self._aborted is None:
            self.comm.destroy()
        if self._world:
            self._liveness.stop()
