"""Hook specifications of torcia-distributed.

Call hooks with keyword arguments only. Each is called once, lazily, the first time a
process group is created.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")


@hookspec
def torcia_register_process_group_backends(registry) -> None:
    """Add process-group backends ("mpi", "nccl", ...).

    Called once, the first time :func:`torcia.distributed.init_process_group` or
    :func:`torcia.distributed.is_backend_available` runs. A backend is a factory
    ``factory(rank, world_size, timeout, init_method) -> ProcessGroup`` (see
    :class:`torcia.distributed.ProcessGroup` for the methods a group implements: one
    method per collective, on arrays, each returning a :class:`Work`).

    :param registry: a :class:`torcia.plugins.Registry`; call ``registry.add(name, factory)``.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_process_group_backends(registry):
            registry.add("mpi", MPIProcessGroup.create)

    .. versionadded:: 0.1
    """
