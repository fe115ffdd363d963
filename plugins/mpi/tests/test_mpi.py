"""Collectives, point-to-point, objects, sub-groups, timeouts and DDP across two real
MPI processes (the MPI that pip installs: the mpich wheel)."""

import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("mpi4py")
HERE = os.path.dirname(__file__)


def _mpiexec():
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.access(local, os.X_OK) else shutil.which("mpiexec")


def _launch(n, scenario):
    cmd = [_mpiexec(), "-n", str(n), sys.executable, os.path.join(HERE, "mpi_worker.py"),
           scenario]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


needs_mpiexec = pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec: pip install mpich")


@needs_mpiexec
@pytest.mark.parametrize("n, scenario", [
    (2, "collectives"), (4, "collectives"), (2, "point_to_point"), (2, "objects"),
    (2, "groups"), (2, "timeout"), (2, "ddp"), (2, "ddp_steps"), (4, "ddp_steps"),
    (2, "unused"), (2, "mismatch"), (2, "mixed_dtypes"), (4, "mixed_dtypes"),
])
def test_processes(n, scenario):
    rc, out = _launch(n, scenario)
    if scenario == "timeout":
        # the rank that timed out ends with status 1 even though it caught the error
        assert rc != 0 and "PASS timeout raised" in out, out
    else:
        assert rc == 0, out
        assert out.count(f"PASS {scenario} rank") == n, out


@needs_mpiexec
def test_a_rank_that_raises_ends_the_job_naming_it():
    rc, out = _launch(2, "raises")
    assert rc != 0
    assert "rank 1 fails on purpose" in out and "rank 1 raised ValueError" in out, out


@needs_mpiexec
def test_a_rank_killed_by_a_signal_ends_the_job():
    rc, out = _launch(2, "dies")
    assert rc != 0 and "KILLED" in out.upper(), out


def test_launcher_runs_the_script_in_n_processes(tmp_path):
    if _mpiexec() is None:
        pytest.skip("no mpiexec: pip install mpich")
    script = tmp_path / "hello.py"
    script.write_text(
        "import torcia, torcia.distributed as dist\n"
        "dist.init_process_group('mpi')\n"
        "t = torcia.tensor([1.0]); dist.all_reduce(t)\n"
        "import sys, pathlib\n"
        "out = pathlib.Path(sys.argv[1]) / f'rank{dist.get_rank()}'\n"
        "out.write_text(f'{dist.get_world_size()} {t.item()}')\n"
    )
    cmd = [sys.executable, "-m", "torcia.distributed.run", "--nproc-per-node", "2", str(script),
           str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rank0").read_text() == "2 2.0"
    assert (tmp_path / "rank1").read_text() == "2 2.0"


HANGS = """
import sys, time, pathlib
import torcia, torcia.distributed as dist
dist.init_process_group("mpi", timeout={timeout})
if dist.get_rank() == 1:
    while True:
        time.sleep(60)  # never joins, never ends by itself
pathlib.Path(sys.argv[1]).write_text(str(time.time()))
try:
    dist.all_reduce(torcia.ones(2))
except RuntimeError as exc:
    print("rank 0:", exc, flush=True)
    sys.exit(1)
"""


@needs_mpiexec
def test_a_hung_rank_ends_the_job_within_the_timeout(tmp_path):
    # issue #20: the rank that timed out stayed alive in MPI's finalisation and the
    # launcher waited forever; torchrun ends such a job in seconds
    timeout = 2.0
    script = tmp_path / "hangs.py"
    script.write_text(HANGS.format(timeout=timeout))
    started = tmp_path / "started"
    cmd = [sys.executable, "-m", "torcia.distributed.run", "--nproc-per-node", "2",
           str(script), str(started)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    ended = time.time()
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert ended - float(started.read_text()) < timeout + 5, proc.stdout + proc.stderr
    # (the all-gather that checks the ranks agree is the collective that times out)
    assert "torcia-run: rank 0 failed (all_gather on rank 0 timed out" in proc.stderr, \
        proc.stderr
