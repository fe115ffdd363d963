"""torcia-run as torchrun: its options and environment, several launchers standing for
several nodes, and restarts after a worker dies (the job then ends with the parameters of
an uninterrupted run)."""

import json
import os
import socket
import subprocess
import sys

import pytest

import torcia.distributed as dist
from torcia.distributed import group, run
from torcia.distributed.run import get_args_parser, main

HERE = os.path.dirname(__file__)

needs_gloo = pytest.mark.skipif(not dist.is_backend_available("gloo"),
                                reason="needs the 'gloo' backend (torcia-mpi with mpich)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launcher(*args):
    return [sys.executable, "-m", "torcia.distributed.run", *map(str, args)]


def _start(*args):
    return subprocess.Popen(_launcher(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=HERE)


def _finish(*procs, timeout=240):
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


def test_torchrun_options_parse_under_both_spellings():
    args = get_args_parser().parse_args([
        "--nnodes=1:2", "--nproc_per_node=4", "--rdzv-backend=c10d",
        "--rdzv_endpoint=host:29400", "--rdzv-id=job", "--max_restarts=3",
        "--monitor-interval=0.5", "--node_rank=1", "--master-addr=h", "--master_port=7",
        "--standalone", "-m", "pkg.train", "--lr", "0.1"])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_backend, args.rdzv_endpoint,
            args.rdzv_id, args.max_restarts, args.monitor_interval, args.node_rank,
            args.master_addr, args.master_port, args.standalone, args.module) == (
        "1:2", "4", "c10d", "host:29400", "job", 3, 0.5, 1, "h", 7, True, True)
    assert args.training_script == "pkg.train" and args.training_script_args == ["--lr", "0.1"]


@pytest.mark.parametrize("argv, message", [
    (["--nnodes", "0", "x.py"], "--nnodes"),
    (["--nproc-per-node", "0", "x.py"], "--nproc-per-node"),
    (["--rdzv-backend", "c10d", "x.py"], "--rdzv-endpoint"),
    (["--nnodes", "1:2", "x.py"], "c10d"),
    (["--nnodes", "2", "--node-rank", "2", "x.py"], "--node-rank"),
])
def test_bad_options_are_refused_naming_them(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.multiprocess
@needs_gloo
def test_two_launchers_stand_for_two_nodes_with_torchruns_environment(tmp_path):
    port = _free_port()
    common = ["--nnodes", 2, "--master-addr", "127.0.0.1", "--master-port", port,
              "--rdzv-id", "envjob"]
    node1 = _start(*common, "--node-rank", 1, "--nproc-per-node", 2, "run_env.py", tmp_path)
    node0 = _start(*common, "--node-rank", 0, "--nproc-per-node", 1, "run_env.py", tmp_path)
    for rc, out, err in _finish(node0, node1):
        assert rc == 0, out + err
    seen = {r: json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)}
    assert [(s["RANK"], s["LOCAL_RANK"], s["GROUP_RANK"], s["LOCAL_WORLD_SIZE"])
            for s in seen.values()] == [("0", "0", "0", "1"), ("1", "0", "1", "2"),
                                        ("2", "1", "1", "2")]
    for r, s in seen.items():
        assert s["rank"] == r and s["size"] == 3 and s["sum"] == 3.0 and s["launched"]
        assert (s["WORLD_SIZE"], s["GROUP_WORLD_SIZE"], s["ROLE_NAME"], s["ROLE_RANK"]) == (
            "3", "2", "default", str(r))
        assert (s["MASTER_ADDR"], s["MASTER_PORT"]) == ("127.0.0.1", str(port))
        assert (s["TORCHELASTIC_RESTART_COUNT"], s["TORCHELASTIC_MAX_RESTARTS"],
                s["TORCHELASTIC_RUN_ID"]) == ("0", "0", "envjob")


def test_report_failure_leaves_a_note_and_exits_one(tmp_path):
    # in a worker: the report makes the process end with 1, even after sys.exit(0), and
    # the note names why for the launcher
    code = ("import sys; from torcia.distributed.group import report_failure; "
            "report_failure(3, 'barrier on rank 3 timed out'); sys.exit(0)")
    env = dict(os.environ, **{group.FAILURES_ENV: str(tmp_path)})
    r = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert r.returncode == 1
    assert (tmp_path / "rank3").read_text() == "barrier on rank 3 timed out\n"
    assert run.FAILURES_ENV == group.FAILURES_ENV


def _final(folder):
    return json.loads((folder / "final.json").read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("uninterrupted")
    [(rc, out, err)] = _finish(_start("--standalone", "--nproc-per-node", 2,
                                      "elastic_train.py", folder, 6, -1, -1))
    assert rc == 0, out + err
    return _final(folder)


@pytest.mark.slow
@pytest.mark.multiprocess
@needs_gloo
def test_a_killed_rank_is_restarted_and_the_job_ends_as_an_uninterrupted_one(
        tmp_path, uninterrupted):
    [(rc, out, err)] = _finish(_start("--standalone", "--nproc-per-node", 2,
                                      "--max-restarts", 2, "elastic_train.py", tmp_path, 6,
                                      1, 3))
    assert rc == 0, out + err
    assert "rank 1 failed (killed by SIGKILL); restarting the workers (1 of 2)" in err, err
    assert "rank 0 resumes at step 3" in out and "rank 1 resumes at step 3" in out, out
    assert _final(tmp_path) == uninterrupted  # the same bits


@pytest.mark.slow
@pytest.mark.multiprocess
@needs_gloo
def test_without_restarts_left_the_job_fails_naming_the_rank(tmp_path):
    [(rc, out, err)] = _finish(_start("--standalone", "--nproc-per-node", 2,
                                      "elastic_train.py", tmp_path, 6, 1, 2))
    assert rc != 0
    assert "torcia-run: rank 1 failed (killed by SIGKILL); no restarts left" in err, err
    assert not (tmp_path / "final.json").exists()


@pytest.mark.slow
@pytest.mark.multiprocess
@needs_gloo
def test_two_nodes_restart_together_after_a_worker_of_one_dies(tmp_path, uninterrupted):
    endpoint = f"127.0.0.1:{_free_port()}"
    common = ["--nnodes", 2, "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
              "--rdzv-id", "twonodes", "--nproc-per-node", 1, "--max-restarts", 1,
              "elastic_train.py", tmp_path, 6, 1, 2]
    outs = _finish(_start(*common), _start(*common))
    for rc, out, err in outs:
        assert rc == 0, out + err
    assert sum("restarting the workers (1 of 1)" in err for _, _, err in outs) == 1, outs
    assert _final(tmp_path) == uninterrupted


RECORDED = """
import os
from torcia.distributed.elastic.multiprocessing.errors import record

@record
def main():
    if os.environ["RANK"] == "1":
        raise ValueError("rank 1 fails on purpose")

main()
"""


@pytest.mark.slow
@pytest.mark.multiprocess
def test_the_exception_a_recorded_main_raised_is_named_by_the_launcher(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(RECORDED)
    [(rc, out, err)] = _finish(_start("--nproc-per-node", 2, script))
    assert rc != 0
    assert ("torcia-run: rank 1 failed (exit code 1: ValueError: rank 1 fails on purpose); "
            "no restarts left") in err, err


BARRIER = """
import datetime, time
import torcia.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
dist.monitored_barrier(timeout=datetime.timedelta(seconds=20))   # everyone arrives
print(f"PASS first barrier rank {rank}", flush=True)
if rank > 0:
    time.sleep(30)                        # late: rank 0 names it after 1 s
dist.monitored_barrier(timeout=datetime.timedelta(seconds=1), wait_all_ranks=True)
"""


@pytest.mark.slow
@pytest.mark.multiprocess
@needs_gloo
def test_monitored_barrier_names_the_ranks_that_did_not_arrive(tmp_path):
    script = tmp_path / "barrier.py"
    script.write_text(BARRIER)
    [(rc, out, err)] = _finish(_start("--standalone", "--nproc-per-node", 3, script))
    assert out.count("PASS first barrier") == 3, out + err
    assert rc != 0
    assert "[Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier in 1000 ms" in out + err, \
        out + err


@pytest.mark.slow
@pytest.mark.multiprocess
@needs_gloo
def test_an_elastic_range_starts_with_the_nodes_there_after_the_last_call(tmp_path):
    endpoint = f"127.0.0.1:{_free_port()}"
    [(rc, out, err)] = _finish(_start(
        "--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
        "--rdzv-conf", "last_call_timeout=1", "--nproc-per-node", 2, "run_env.py", tmp_path))
    assert rc == 0, out + err
    seen = json.loads((tmp_path / "rank1.json").read_text())
    assert (seen["WORLD_SIZE"], seen["GROUP_WORLD_SIZE"], seen["sum"]) == ("2", "1", 2.0)
