"""torcia-mpi's plugin: registers the "mpi" process-group backend, also under the name
"gloo" (PyTorch's CPU backend, which scripts ask for by name).

Registering loads the MPI library (to know whether the backend can run here) but does not
initialise MPI; creating the group does. Where mpi4py or the MPI library is missing, the
backend is registered as unavailable, with the reason (``python -m torcia plugins`` shows
it, ``init_process_group("mpi")`` raises it), and nothing is printed.
"""

from __future__ import annotations

import os
import sys

from torcia.plugins import hookimpl


@hookimpl
def torcia_register_process_group_backends(registry):
    registry.add("mpi", backend_factory("mpi"))
    registry.add("gloo", backend_factory("gloo"))


def load_mpi():
    """mpi4py's ``MPI`` module, loaded without initialising MPI if nothing loaded it yet.

    mpi4py initialises MPI when ``mpi4py.MPI`` is first imported, unless told otherwise
    through ``mpi4py.rc``; finalisation at exit is asked for explicitly, since mpi4py
    finalises by default only what it initialised at import.
    """
    import mpi4py

    if "mpi4py.MPI" not in sys.modules:
        saved = mpi4py.rc.initialize, mpi4py.rc.finalize
        mpi4py.rc.initialize, mpi4py.rc.finalize = False, True
        try:
            from mpi4py import MPI  # noqa: F401
        finally:
            mpi4py.rc.initialize, mpi4py.rc.finalize = saved
    from mpi4py import MPI

    return MPI


def initialized_mpi():
    """``MPI``, initialised (with thread support, as mpi4py's default) if it was not."""
    MPI = load_mpi()
    if not MPI.Is_initialized():
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
    return MPI


def launched_by_mpi() -> bool:
    """Whether an MPI launcher (``mpiexec``, ``srun`` with PMI) started this process among
    several: MPI's ``COMM_WORLD`` then holds the job, and no store is needed."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if int(os.environ.get(var, "1")) > 1:
            return True
    return False


def backend_factory(name):
    """The factory of backend ``name``, or where MPI cannot be loaded a stand-in whose
    ``unavailable_reason`` says why."""
    try:
        load_mpi()
    except Exception as exc:  # noqa: BLE001 - ImportError, or mpi4py's RuntimeError
        why = f"{type(exc).__name__}: " + "; ".join(str(exc).splitlines()[:2])
    else:
        def create(rank, world_size, timeout, init_method, store=None):
            initialized_mpi()
            from torcia_mpi.group import MPIProcessGroup

            return MPIProcessGroup.create(rank, world_size, timeout, init_method, store,
                                          backend_name=name)

        # a group of one process, or a job mpiexec started, needs no rendezvous
        create.needs_store = lambda rank, world_size: world_size > 1 and not launched_by_mpi()
        return create

    def unavailable(**kwargs):
        raise RuntimeError(why)

    unavailable.unavailable_reason = why
    return unavailable
