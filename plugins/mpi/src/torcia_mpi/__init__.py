"""torcia-mpi: the "mpi" process-group backend for torcia.distributed, on mpi4py.

Importing the package, or torcia loading the plugin, does not start MPI: ``MPI_Init``
runs when an "mpi" process group is created (``init_process_group("mpi")``), so that
torcia programs that never use MPI do not pay for it (nor leave MPICH's ``/dev/shm``
files behind when they end abnormally). ``MPIProcessGroup`` is loaded on first access.
"""

__all__ = ["MPIProcessGroup"]


def __getattr__(name):
    if name == "MPIProcessGroup":
        from torcia_mpi.plugin import initialized_mpi

        initialized_mpi()
        from torcia_mpi.group import MPIProcessGroup

        return MPIProcessGroup
    raise AttributeError(f"module 'torcia_mpi' has no attribute {name!r}")
