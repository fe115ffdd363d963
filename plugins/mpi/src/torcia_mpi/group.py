"""Collectives on MPI communicators.

Every collective is started non-blocking (``Iallreduce``, ``Ibcast``...) and returns a
Work whose ``wait`` polls it, so a timeout can turn a dead peer into an error. MPI has no
16-bit floating types, so reductions of float16/bfloat16 run in float32 copies; data that
is only moved travels as raw bytes.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from torcia.distributed.group import ProcessGroup, ReduceOp, Work, report_failure
from torcia_mpi.connect import connect

_OPS = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
        ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX}
_BOOL_OPS = {ReduceOp.SUM: MPI.LOR, ReduceOp.MAX: MPI.LOR, ReduceOp.MIN: MPI.LAND,
             ReduceOp.PRODUCT: MPI.LAND}


def _raw(arr, parts=1):
    """A buffer spec moving ``arr``'s bytes as they are; ``parts`` splits it per process
    (MPI counts per process in gather/scatter-like collectives)."""
    return [arr, arr.nbytes // parts, MPI.BYTE]


def _reducible(arr, op):
    """(buffer to reduce, MPI op, copy-back function or None)."""
    if arr.dtype.kind == "b":
        if op == ReduceOp.AVG:
            raise RuntimeError("all_reduce with AVG is not defined for bool tensors")
        return arr, _BOOL_OPS[op], None
    if arr.dtype.itemsize == 2 and arr.dtype.kind in "fV":
        tmp = arr.astype(np.float32)

        def back():
            arr[...] = tmp.astype(arr.dtype)

        return tmp, _OPS[op], back
    return arr, _OPS[op], None


def _abort_peers_on_uncaught_error(rank):
    """An exception escaping one rank aborts every rank (as ``python -m mpi4py`` does):
    otherwise the others would wait in their next collective, and a finalizing rank can
    block too."""
    previous = sys.excepthook

    def abort(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        report_failure(rank, f"raised {exc_type.__name__}: {exc}")
        sys.stderr.write(f"torcia-mpi: rank {rank} raised {exc_type.__name__}; aborting "
                         "every rank\n")
        sys.stderr.flush()
        # the launcher forwards output asynchronously: give it the traceback before the
        # abort tears the job down
        time.sleep(0.5)
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort


def _report_uncaught_error(rank):
    """An exception escaping one rank of a group joined through a store ends that rank
    with a note for its launcher (``torcia-run``, ``torcia.multiprocessing.spawn``), which
    ends the others: ``MPI_Abort`` reaches only the processes one ``mpiexec`` started."""
    previous = sys.excepthook

    def report(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        report_failure(rank, f"raised {exc_type.__name__}: {exc}")

    sys.excepthook = report


# groups joined through a store so far: their keys in the store differ by it
_generation = 0


class MPIProcessGroup(ProcessGroup):
    """A process group over an MPI communicator (COMM_WORLD for the default group)."""

    backend_name = "mpi"

    def __init__(self, comm, timeout):
        super().__init__(comm.Get_rank(), comm.Get_size(), timeout)
        self.comm = comm

    @classmethod
    def create(cls, rank, world_size, timeout, init_method, store=None, backend_name="mpi"):
        """The default group: MPI's ``COMM_WORLD`` when ``mpiexec`` started the job, else
        the processes that meet through ``store``, joined by MPI's dynamic process
        management (:mod:`torcia_mpi.connect`)."""
        world = MPI.COMM_WORLD
        if world.Get_size() > 1 or store is None:
            if rank >= 0 and rank != world.Get_rank():
                raise ValueError(f"init_process_group: rank={rank} was given, but MPI says "
                                 f"this process is rank {world.Get_rank()}")
            if world_size >= 0 and world_size != world.Get_size():
                raise ValueError(f"init_process_group: world_size={world_size} was given, but "
                                 f"MPI started {world.Get_size()} processes")
            if world.Get_size() > 1:
                _abort_peers_on_uncaught_error(world.Get_rank())
            comm = world.Dup()
        else:
            global _generation
            _generation += 1
            comm = connect(MPI, store, rank, world_size, _generation)
            if world_size > 1:
                _report_uncaught_error(rank)
        group = cls(comm, timeout)
        group.backend_name = backend_name
        return group

    def _work(self, request, what, finish=None, status=None):
        test = (lambda: request.Test(status)) if status is not None else request.Test
        return Work(test, finish, what, self.timeout, self.rank)

    def _reduce_finish(self, arr, op, back):
        def finish():
            if back is not None:
                back()
            if op == ReduceOp.AVG:
                divide = np.floor_divide if arr.dtype.kind in "iu" else np.true_divide
                divide(arr, self.size, out=arr)

        return finish

    def allreduce(self, array, op):
        buf, mpi_op, back = _reducible(array, op)
        req = self.comm.Iallreduce(MPI.IN_PLACE, buf, mpi_op)
        return self._work(req, "all_reduce", self._reduce_finish(array, op, back))

    def broadcast(self, array, src):
        return self._work(self.comm.Ibcast(_raw(array), root=src), "broadcast")

    def reduce(self, array, dst, op):
        buf, mpi_op, back = _reducible(array, op)
        if self.rank == dst:
            req = self.comm.Ireduce(MPI.IN_PLACE, buf, mpi_op, root=dst)
            finish = self._reduce_finish(array, op, back)
        else:
            req = self.comm.Ireduce(buf, None, mpi_op, root=dst)
            finish = None
        return self._work(req, "reduce", finish)

    def allgather(self, out, array):
        return self._work(self.comm.Iallgather(_raw(array), _raw(out, self.size)), "all_gather")

    def gather(self, out, array, dst):
        recv = _raw(out, self.size) if self.rank == dst else None
        return self._work(self.comm.Igather(_raw(array), recv, root=dst), "gather")

    def scatter(self, out, array, src):
        send = _raw(array, self.size) if self.rank == src else None
        return self._work(self.comm.Iscatter(send, _raw(out), root=src), "scatter")

    def reduce_scatter(self, out, array, op):
        buf, mpi_op, back = _reducible(np.ascontiguousarray(array), op)
        target, _, out_back = _reducible(out, op)
        req = self.comm.Ireduce_scatter_block(buf, target, mpi_op)

        def finish():
            if out_back is not None:
                out_back()
            self._reduce_finish(out, op, None)()

        return self._work(req, "reduce_scatter", finish)

    def alltoall(self, out, array):
        req = self.comm.Ialltoall(_raw(array, self.size), _raw(out, self.size))
        return self._work(req, "all_to_all")

    def send(self, array, dst, tag):
        return self._work(self.comm.Isend(_raw(array), dest=dst, tag=tag), "send")

    def recv(self, array, src, tag):
        status = MPI.Status()
        source = MPI.ANY_SOURCE if src is None else src
        req = self.comm.Irecv(_raw(array), source=source, tag=tag)
        work = self._work(req, "recv", status=status)
        inner = work._finish

        def finish():
            work.source = status.Get_source()
            if inner is not None:
                inner()

        work._finish = finish
        return work

    def barrier(self):
        return self._work(self.comm.Ibarrier(), "barrier")

    def subgroup(self, ranks):
        if self.rank not in ranks:
            return None
        comm = self.comm.Create_group(self.comm.Get_group().Incl(list(ranks)))
        group = MPIProcessGroup(comm, self.timeout)
        group.backend_name = self.backend_name
        return group

    def destroy(self):
        if self.comm != MPI.COMM_NULL:
            self.comm.Free()
