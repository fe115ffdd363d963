"""torcia-mpi: the "mpi" process-group backend for torcia.distributed, on mpi4py."""

from torcia_mpi.group import MPIProcessGroup

__all__ = ["MPIProcessGroup"]
