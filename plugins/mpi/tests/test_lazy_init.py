"""MPI starts only with an "mpi" process group (issue #20: every torcia process called
MPI_Init on its first op, since the package imported mpi4py.MPI, and printed a warning
where no MPI library could be loaded)."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")


def _python(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_torcia_and_the_plugin_do_not_start_mpi():
    r = _python(
        "import sys, torcia, torcia_mpi\n"
        "torcia.ones(2) + 1\n"
        "import torcia.distributed as dist\n"
        "assert dist.is_mpi_available()\n"
        "m = sys.modules.get('mpi4py.MPI')\n"
        "print('initialized' if m is not None and m.Is_initialized() else 'not initialized')\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "not initialized"


def test_creating_the_group_starts_mpi():
    r = _python(
        "import sys, torcia.distributed as dist\n"
        "dist.init_process_group('mpi')\n"
        "print(sys.modules['mpi4py.MPI'].Is_initialized(), dist.get_world_size())\n"
        "dist.destroy_process_group()\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True 1"


NO_MPI = {"MPI4PY_LIBMPI": "/nonexistent/libmpi.so"}


def test_without_an_mpi_library_the_backend_is_unavailable_and_quiet():
    r = _python("import runpy, sys; sys.argv = ['torcia', 'plugins']; "
                "runpy.run_module('torcia', run_name='__main__')", **NO_MPI)
    assert r.returncode == 0, r.stderr
    for name in ("gloo", "mpi"):
        assert f"{name} (unavailable: RuntimeError: cannot load MPI library" in r.stdout, \
            r.stdout
    assert "Warning" not in r.stderr and "mpi" not in r.stderr.lower(), r.stderr
    r = _python(
        "import torcia, torcia.distributed as dist\n"
        "torcia.ones(2) + 1\n"
        "assert not dist.is_mpi_available()\n"
        "try:\n"
        "    dist.init_process_group('mpi')\n"
        "except RuntimeError as e:\n"
        "    print(e)\n", **NO_MPI)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "the 'mpi' process group backend cannot be used here: RuntimeError: cannot " \
           "load MPI library" in r.stdout


def test_an_mpich_that_cannot_join_singletons_is_named_with_the_fix():
    from torcia_mpi.connect import check_library

    class Fake:
        def __init__(self, version):
            self.version = version

        def Get_library_version(self):
            return self.version

    with pytest.raises(RuntimeError, match=r"MPICH 5\.0\.2 cannot join .*mpich>=4\.3,<5"):
        check_library(Fake("MPICH Version:      5.0.2\nMPICH Release date: ..."))
    check_library(Fake("MPICH Version:      4.3.2\n"))
    check_library(Fake("Open MPI v5.0.3, package: Open MPI"))
