"""torcia.distributed: process groups, collectives and DistributedDataParallel.

The collectives run on an existing engine provided by a plugin: MPI through torcia-mpi
(CPU tensors), NCCL through torcia-cuda (GPU tensors). Launch with ``torcia-run
--nproc-per-node N script.py`` (``mpiexec -n N python script.py`` underneath).

Examples
--------
A script run as ``torcia-run --nproc-per-node 2 script.py``::

    import torcia, torcia.distributed as dist
    dist.init_process_group("mpi")
    t = torcia.tensor([float(dist.get_rank())])
    dist.all_reduce(t)              # every rank now holds tensor([1.])
    dist.destroy_process_group()
"""

from torcia.distributed import c10d as _c10d
from torcia.distributed import options as _options
from torcia.distributed import store as _store
from torcia.distributed.c10d import *  # noqa: F401,F403
from torcia.distributed.collectives import *  # noqa: F401,F403
from torcia.distributed.collectives import __all__ as _collectives_all
from torcia.distributed.collectives import backends
from torcia.distributed.device_mesh import DeviceMesh, init_device_mesh
from torcia.distributed.options import *  # noqa: F401,F403
from torcia.distributed.parallel import DistributedDataParallel, GradBucket
from torcia.distributed.store import *  # noqa: F401,F403

__all__ = sorted(set(_collectives_all) | set(_c10d.__all__) | set(_options.__all__)
                 | set(_store.__all__)
                 | {"DeviceMesh", "DistributedDataParallel", "GradBucket", "backends",
                    "init_device_mesh"})
