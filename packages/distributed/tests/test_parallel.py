"""FSDP (each strategy, mixed precision, state dicts), fully_shard, ZeroRedundancyOptimizer,
DDP communication hooks and Join, functional collectives, DTensor and distributed
checkpoints, each across real processes started by torcia-run (parallel_worker.py holds
the checks: against one process training on every rank's data, or hand-worked values)."""

import os
import subprocess
import sys

import pytest

import torcia.distributed as dist

HERE = os.path.dirname(__file__)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.multiprocess,
    pytest.mark.skipif(not dist.is_backend_available("gloo"),
                       reason="needs the 'gloo' backend (torcia-mpi with mpich)"),
]

EVERYTHING = ["fsdp_strategies", "fsdp_mixed_precision", "fsdp_state_dicts",
              "fsdp_no_sync_and_clip", "fully_shard_training", "zero", "comm_hooks", "join",
              "functional", "dtensor", "sync_bn"]


def _run(n, scenarios, **env):
    cmd = [sys.executable, "-m", "torcia.distributed.run", "--standalone",
           "--nproc-per-node", str(n), os.path.join(HERE, "parallel_worker.py"), *scenarios]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=HERE,
                          env={**os.environ, **env})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for scenario in scenarios:
        assert out.count(f"PASS {scenario} rank") == n, out


@pytest.mark.parametrize("n", [2, 4])
def test_every_algorithm_matches_one_process(n):
    _run(n, EVERYTHING)


def test_three_ranks_uneven_inputs_and_uneven_shards():
    _run(3, ["join", "zero", "functional", "dtensor", "fsdp_strategies"])


def test_a_checkpoint_of_four_ranks_loads_on_two_and_on_one(tmp_path):
    _run(4, ["checkpoint_save"], CKPT_DIR=str(tmp_path))
    assert (tmp_path / "sync" / ".metadata").exists()
    assert (tmp_path / "async" / ".metadata").exists()
    assert sorted(p.name for p in (tmp_path / "sync").iterdir()) == [
        ".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"]
    _run(2, ["checkpoint_load"], CKPT_DIR=str(tmp_path))
    _run(1, ["checkpoint_load"], CKPT_DIR=str(tmp_path))
