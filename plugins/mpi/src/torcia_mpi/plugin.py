"""torcia-mpi's plugin: registers the "mpi" process-group backend."""

from torcia.plugins import hookimpl


@hookimpl
def torcia_register_process_group_backends(registry):
    from torcia_mpi.group import MPIProcessGroup

    registry.add("mpi", MPIProcessGroup.create)
