"""One MPI communicator over processes that MPI did not start, met through a store.

Processes started by ``torcia.multiprocessing.spawn``, by ``torcia-run`` on several
machines or by hand each initialise MPI alone (a "singleton": its ``COMM_WORLD`` is
itself). MPI's dynamic process management joins them: rank 0 opens a port
(``MPI_Open_port``) and publishes its name in the rendezvous store; then, one rank per
round, the ranks already joined accept (``MPI_Comm_accept``, collective over them) while
rank k connects (``MPI_Comm_connect``), and the inter-communicator is merged into one
intra-communicator with rank k last. After ``world_size - 1`` rounds every process holds
the same communicator, ranks in the order of the store's ranks, and the collectives run
on MPI as under ``mpiexec``.

The store also keeps the rounds apart (a connection made during the previous round's
accept would join the wrong rank) and bounds the wait for a rank that never comes: the
ranks waiting for it raise ``DistStoreError`` after the group's timeout instead of
blocking in ``MPI_Comm_accept``, which has no timeout.
"""

from __future__ import annotations

import re

from torcia.distributed import DistStoreError


def check_library(MPI) -> None:
    """Raise if this MPI library cannot connect singleton processes.

    MPICH 5.0.0-5.0.2 give every singleton the same process identity, so that
    ``MPI_Comm_connect`` between two of them fails ("Local and remote groups ... both
    contain process 0"; pmodels/mpich#7805). MPICH 4.x and Open MPI 4/5 under their own
    launchers are unaffected.
    """
    version = MPI.Get_library_version()
    if re.match(r"MPICH Version:\s*5\.0\.[0-2]\b", version):
        found = version.splitlines()[0].split(":", 1)[1].strip()
        raise RuntimeError(
            f"MPICH {found} cannot join processes that mpiexec did not start (its singleton "
            "connect/accept is broken: pmodels/mpich#7805). Install MPICH 4.3 "
            "(pip install 'mpich>=4.3,<5'), or start the job with mpiexec")


def connect(MPI, store, rank: int, world_size: int, generation: int):
    """The intra-communicator of ``world_size`` singleton processes, this one with rank
    ``rank``; every process calls it with the same ``store`` and ``generation`` (a count
    that keeps the keys of successive groups apart)."""
    check_library(MPI)
    key = f"torcia_mpi/{generation}/".__add__
    if rank == 0:
        port = MPI.Open_port()
        store.set(key("port"), port)
    else:
        store.set(key(f"ready/{rank}"), b"")
    comm = MPI.COMM_SELF
    try:
        for k in range(1, world_size):
            if rank < k:
                _wait(store, key(f"ready/{k}"), k, rank)
                if rank == 0:
                    store.set(key(f"round/{k}"), b"")
                    inter = comm.Accept(port, root=0)
                else:
                    inter = comm.Accept("", root=0)  # the port matters at the root only
                merged = inter.Merge(high=False)
            elif rank == k:
                _wait(store, key(f"round/{k}"), 0, rank)
                inter = MPI.COMM_SELF.Connect(store.get(key("port")).decode(), root=0)
                merged = inter.Merge(high=True)
            else:
                continue
            inter.Free()
            if comm != MPI.COMM_SELF:
                comm.Free()
            comm = merged
    finally:
        if rank == 0:
            MPI.Close_port(port)
    if comm.Get_rank() != rank or comm.Get_size() != world_size:
        raise RuntimeError(f"MPI joined this process as rank {comm.Get_rank()} of "
                           f"{comm.Get_size()}, expected rank {rank} of {world_size}")
    return comm


def _wait(store, key, peer, rank):
    try:
        store.wait([key])
    except DistStoreError:
        raise DistStoreError(
            f"rank {rank} waited {store.timeout.total_seconds():g} s for rank {peer} to join "
            "the process group: it never called init_process_group (or died first)") from None
