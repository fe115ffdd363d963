"""Batched point-to-point, objects to one peer, single-tensor and coalesced collectives,
sub-group families, DeviceMesh and SyncBatchNorm across real processes (the "mpi"
backend, started with the mpiexec that pip's mpich installs)."""

import os
import shutil
import subprocess
import sys

import pytest

import torcia.distributed as dist

HERE = os.path.dirname(__file__)


def _mpiexec():
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.access(local, os.X_OK) else shutil.which("mpiexec")


pytestmark = pytest.mark.skipif(
    _mpiexec() is None or not dist.is_backend_available("mpi"),
    reason="needs mpiexec and the 'mpi' backend (pip install mpich, torcia-mpi)")


@pytest.mark.parametrize("n, scenario", [
    (2, "p2p"), (3, "p2p"), (2, "collectives"), (3, "collectives"), (4, "subgroups"),
    (4, "mesh"), (2, "sync_bn"), (3, "sync_bn"),
])
def test_processes(n, scenario):
    cmd = [_mpiexec(), "-n", str(n), sys.executable, os.path.join(HERE, "c10d_worker.py"),
           scenario]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert out.count(f"PASS {scenario} rank") == n, out
