"""torcia-distributed's built-in plugin.

It registers no process-group backend of its own: the engines are MPI (torcia-mpi) and
NCCL (torcia-cuda); this entry makes the part and its hookspecs visible in
``python -m torcia plugins``, and lends ``DistributedDataParallel`` to torcia-nn, which
shows it as ``torcia.nn.parallel.DistributedDataParallel`` but may not import this part.
"""

import torcia
from torcia.distributed import DistributedDataParallel, hookspecs  # noqa: F401  (added to the manager on import)


@torcia.hookimpl
def torcia_register_names(registry):
    registry.add("torcia.nn.parallel.DistributedDataParallel", DistributedDataParallel)
