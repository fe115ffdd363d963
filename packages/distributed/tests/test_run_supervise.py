"""``torcia-run`` ends a job whose rank failed, even when the rest of it would never end
by itself (issue #20: a hung rank held the job forever)."""

import os
import subprocess
import sys
import time

from torcia.distributed import group, run


def _job(seconds):
    # a job that ignores SIGTERM: only the SIGKILL that follows ends it
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            f"time.sleep({seconds})")
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_failure_note_ends_the_job_after_the_grace_period(tmp_path, capsys):
    (tmp_path / "rank1").write_text("all_reduce on rank 1 timed out after 2 s: ...\n")
    job = _job(600)
    start = time.monotonic()
    rc = run.supervise(job, str(tmp_path), grace=0.5, kill_after=0.5)
    took = time.monotonic() - start
    assert rc == 128 + 9  # SIGKILL, as a shell reports it
    assert took < 5
    assert "torcia-run: rank 1 failed (all_reduce on rank 1 timed out" in capsys.readouterr().err


def test_a_job_without_failures_keeps_its_status(tmp_path):
    job = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"],
                           start_new_session=True)
    assert run.supervise(job, str(tmp_path), grace=0.5) == 3
    job = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    assert run.supervise(job, str(tmp_path), grace=0.5) == 0


def test_a_job_that_ends_after_a_failure_is_non_zero(tmp_path):
    (tmp_path / "rank0").write_text("raised ValueError: boom\n")
    job = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    assert run.supervise(job, str(tmp_path), grace=5) == 1


def test_report_failure_leaves_a_note_and_exits_one(tmp_path):
    # in a child: the report makes the process end with 1, even after sys.exit(0)
    code = ("import sys; from torcia.distributed.group import report_failure; "
            "report_failure(3, 'barrier on rank 3 timed out'); sys.exit(0)")
    env = dict(os.environ, **{group.FAILURES_ENV: str(tmp_path)})
    r = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert r.returncode == 1
    assert (tmp_path / "rank3").read_text() == "barrier on rank 3 timed out\n"
    assert run.FAILURES_ENV == group.FAILURES_ENV
