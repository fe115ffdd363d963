"""One rank of a job whose processes were started independently (not by ``mpiexec``) and
meet through a store: ``python store_worker.py BACKEND INIT_METHOD SCENARIO...`` with
``RANK`` and ``WORLD_SIZE`` (and for env://, ``MASTER_ADDR``/``MASTER_PORT``) in the
environment. It runs the scenarios of mpi_worker.py, which assert with values worked out
by hand, over the MPI communicator that the rendezvous joined."""

import datetime
import os
import sys

import mpi_worker

import torcia.distributed as dist

if __name__ == "__main__":
    backend, init_method, *scenarios = sys.argv[1:]
    dist.init_process_group(backend, init_method=init_method,
                            timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and size == int(os.environ["WORLD_SIZE"])
    assert dist.get_backend() == backend
    for scenario in scenarios:
        mpi_worker.SCENARIOS[scenario](rank, size)
        print(f"PASS {scenario} rank {rank}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
