"""torcia-distributed's built-in plugin.

It registers no process-group backend of its own: the engines are MPI (torcia-mpi) and
NCCL (torcia-cuda); this entry makes the part and its hookspecs visible in
``python -m torcia plugins``.
"""

from torcia.distributed import hookspecs  # noqa: F401  (added to the manager on import)
