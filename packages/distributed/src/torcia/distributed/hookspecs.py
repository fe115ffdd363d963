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
    method per collective, on arrays of the device it declares in ``device_type``, each
    returning a :class:`Work`), called with keywords.

    A factory that also takes ``store`` is a backend that meets its peers through a
    key-value store (NCCL does): it is given the ``store`` passed to
    ``init_process_group``, or else a :class:`~torcia.distributed.TCPStore` served by
    rank 0 at the address ``init_method`` names, with ``rank`` and ``world_size`` already
    resolved from the environment. A factory whose ``needs_store(rank, world_size)``
    attribute answers False for a call (MPI's, when ``mpiexec`` started the job or the
    group is one process) is given ``store=None`` and finds its peers itself; a factory
    without ``store`` never gets one.

    A backend that is installed but cannot run on this machine (no GPU, say) registers a
    factory with an ``unavailable_reason`` attribute: ``is_backend_available`` is then
    False and ``init_process_group`` raises that reason.

    :param registry: a :class:`torcia.plugins.Registry`; call ``registry.add(name, factory)``.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_process_group_backends(registry):
            registry.add("mpi", MPIProcessGroup.create)

    .. versionadded:: 0.1
    """
