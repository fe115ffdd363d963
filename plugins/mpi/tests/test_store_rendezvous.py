"""Process groups of processes that MPI did not start: each rank is a separate
``python`` process, the ranks meet through a store (env://, tcp://, file://) and MPI's
dynamic process management joins them into one communicator (torcia_mpi.connect)."""

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")

from torcia_mpi.connect import check_library  # noqa: E402
from torcia_mpi.plugin import load_mpi  # noqa: E402

HERE = os.path.dirname(__file__)


def _library_problem():
    try:
        check_library(load_mpi())
    except Exception as exc:  # noqa: BLE001 - the reason to skip
        return str(exc)
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.multiprocess,
    pytest.mark.skipif(_library_problem() is not None, reason=str(_library_problem())),
]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(n, backend, init_method, scenarios, **env):
    procs = []
    for rank in range(n):
        environ = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(n), **env}
        for var in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE"):
            environ.pop(var, None)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "store_worker.py"), backend, init_method,
             *scenarios], env=environ, cwd=HERE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    out = "\n".join(outputs)
    assert all(p.returncode == 0 for p in procs), out
    for scenario in scenarios:
        assert out.count(f"PASS {scenario} rank") == n, out


def test_env_rendezvous_gloo_runs_every_collective():
    _run(2, "gloo", "env://", ["collectives", "point_to_point", "objects", "groups",
                               "ddp", "ddp_steps", "unused", "mixed_dtypes"],
         MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))


def test_tcp_rendezvous_three_processes():
    _run(3, "mpi", f"tcp://127.0.0.1:{_free_port()}", ["collectives", "mismatch"])


def test_file_rendezvous_four_processes(tmp_path):
    _run(4, "gloo", f"file://{tmp_path / 'store'}", ["collectives", "ddp_steps", "mismatch"])
