"""``torcia-run`` (``python -m torcia.distributed.run``): start the workers of a training
script on this machine, as ``torchrun``, with its options and environment.

One ``torcia-run`` runs on each machine ("node") of a job; it is that node's agent. The
agents meet in a key-value store (a :class:`~torcia.distributed.TCPStore`) served by the
agent of node 0 (``--rdzv-backend static``, at ``--master-addr``/``--master-port``) or by
the first agent to bind the endpoint (``--rdzv-backend c10d``, ``--rdzv-endpoint``; node
ranks in order of arrival). Each then starts ``--nproc-per-node`` workers with torchrun's
variables: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``GROUP_WORLD_SIZE``, ``ROLE_RANK``, ``ROLE_NAME``, ``ROLE_WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``, ``TORCHELASTIC_RESTART_COUNT``,
``TORCHELASTIC_MAX_RESTARTS``, ``TORCHELASTIC_RUN_ID`` and
``TORCHELASTIC_USE_AGENT_STORE``: the workers' ``init_process_group`` joins the agents'
store, under a prefix per attempt, as PyTorch's workers do.

The agents watch their workers every ``--monitor-interval`` seconds. When a worker fails
(a non-zero exit, a signal, or a note left by a rank whose collective timed out: see
:func:`torcia.distributed.group.report_failure`), its agent ends its workers (SIGTERM,
then SIGKILL ``--grace`` seconds later) and, while restarts are left
(``--max-restarts``), asks every agent for a new round: all of them end their workers,
meet again and start them anew, ``TORCHELASTIC_RESTART_COUNT`` one higher, so that a
script that resumes from its checkpoint finishes. Out of restarts, every agent ends its
workers and exits non-zero, naming the failed rank. An agent whose workers all succeeded
waits for the other nodes before it exits (the store lives in one of them).

Examples
--------
::

    torcia-run --nproc-per-node 2 train.py --epochs 3        # one machine
    torcia-run --standalone --nproc-per-node 4 train.py      # the same, a fresh store
    # two machines, node 0 at 10.0.0.1, each running:
    torcia-run --nnodes 2 --node-rank 0|1 --master-addr 10.0.0.1 --master-port 29500 \\
        --nproc-per-node 8 --max-restarts 3 train.py
    torcia-run --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29400 \\
        --rdzv-id job42 --nproc-per-node 8 train.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from torcia.distributed.elastic.multiprocessing.errors import ProcessFailure
from torcia.distributed.store import DistStoreError, TCPStore

__all__ = ["get_args_parser", "main"]

FAILURES_ENV = "TORCIA_RUN_FAILURES"  # torcia.distributed.group.FAILURES_ENV

# what an MPI launcher sets: a worker that inherited them would take MPI's world for its own
_MPI_LAUNCH_VARS = ("PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMI_ID", "MPI_LOCALNRANKS",
                    "MPI_LOCALRANKID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")


def get_args_parser() -> argparse.ArgumentParser:
    """torchrun's command line (the options torcia-run implements, under both spellings).

    Examples
    --------
    >>> from torcia.distributed.run import get_args_parser
    >>> args = get_args_parser().parse_args(["--nproc_per_node", "2", "train.py", "--lr", "1"])
    >>> args.nproc_per_node, args.training_script, args.training_script_args
    ('2', 'train.py', ['--lr', '1'])
    """
    p = argparse.ArgumentParser(
        prog="torcia-run", description="Start the workers of a training script on this "
        "node, as torchrun: rendezvous with the other nodes, restarts on failure.")

    def opt(*names, **kw):
        spelled = []
        for n in names:
            spelled.append(n)
            if "-" in n[2:]:
                spelled.append("--" + n[2:].replace("-", "_"))
        p.add_argument(*spelled, **kw)

    opt("--nnodes", default="1:1", help="number of nodes, or MIN:MAX for an elastic range")
    opt("--nproc-per-node", default="1",
        help="workers per node: a number, or 'cpu'/'auto' (the CPU count)")
    opt("--rdzv-backend", default="static", choices=["static", "c10d"],
        help="static: node 0 serves the store at --master-addr:--master-port and ranks "
             "are given by --node-rank; c10d: at --rdzv-endpoint, ranks by arrival")
    opt("--rdzv-endpoint", default="", help="HOST[:PORT] of the c10d rendezvous store")
    opt("--rdzv-id", default="none", help="the job's id: agents of one job share it")
    opt("--rdzv-conf", default="",
        help="KEY=VALUE,...: join_timeout (s, default 600), last_call_timeout (s, 30)")
    p.add_argument("--standalone", action="store_true",
                   help="a one-node job with a fresh store on a free port")
    opt("--max-restarts", type=int, default=0, help="restarts of the workers on failure")
    opt("--monitor-interval", type=float, default=0.1,
        help="seconds between checks of the workers")
    opt("--start-method", default="spawn", choices=["spawn", "fork", "forkserver"],
        help="accepted for torchrun's sake: workers are always new interpreters")
    p.add_argument("--role", default="default", help="the workers' role name")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the script argument as a module, like python -m")
    opt("--no-python", action="store_true",
        help="run the script argument as a program, without python")
    opt("--run-path", action="store_true", help="run the script with runpy.run_path")
    opt("--node-rank", type=int, default=0, help="this node's rank (static rendezvous)")
    opt("--master-addr", default="127.0.0.1", help="address of node 0 (static)")
    opt("--master-port", type=int, default=None, help="port of the store on node 0 (static)")
    opt("--local-addr", default=None, help="this node's address, as the others reach it")
    p.add_argument("--grace", type=float, default=3.0,
                   help="seconds failed workers' peers get to end by themselves before "
                        "SIGKILL (default 3)")
    p.add_argument("training_script", help="the training script (or module with -m)")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _nodes(spec: str) -> tuple[int, int]:
    lo, _, hi = spec.partition(":")
    lo, hi = int(lo), int(hi or lo)
    if not 0 < lo <= hi:
        raise ValueError(f"--nnodes {spec!r}: expected N or MIN:MAX with 0 < MIN <= MAX")
    return lo, hi


def _nproc(spec: str) -> int:
    if spec in ("cpu", "auto"):
        return os.cpu_count() or 1
    if spec == "gpu":
        raise ValueError("--nproc-per-node gpu: torcia-run does not count GPUs; give a number")
    n = int(spec)
    if n < 1:
        raise ValueError("--nproc-per-node must be at least 1")
    return n


def _conf(spec: str) -> dict:
    conf = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--rdzv-conf: {item!r} is not KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Agent:
    """One node's agent: the rendezvous store, the rounds, and this node's workers."""

    def __init__(self, args):
        self.args = args
        self.min_nodes, self.max_nodes = _nodes(args.nnodes)
        self.nproc = _nproc(args.nproc_per_node)
        conf = _conf(args.rdzv_conf)
        self.join_timeout = float(conf.get("join_timeout", 600))
        self.last_call = float(conf.get("last_call_timeout", 30))
        self.run_id = args.rdzv_id
        backend = args.rdzv_backend
        if args.standalone:
            backend, self.min_nodes = "c10d", 1
            self.max_nodes, self.run_id = 1, str(uuid.uuid4())
            host, port = "localhost", _free_port()
        elif backend == "c10d":
            if not args.rdzv_endpoint:
                raise ValueError("--rdzv-backend c10d needs --rdzv-endpoint HOST[:PORT]")
            host, _, port = args.rdzv_endpoint.rpartition(":")
            if not host:
                host, port = port, "29400"
            port = int(port)
        else:
            if self.min_nodes != self.max_nodes:
                raise ValueError("--nnodes MIN:MAX needs --rdzv-backend c10d")
            host = args.master_addr
            port = args.master_port
            if port is None:
                port = _free_port() if self.max_nodes == 1 else 29500
            if not 0 <= args.node_rank < self.max_nodes:
                raise ValueError(f"--node-rank {args.node_rank} is out of range for "
                                 f"--nnodes {self.max_nodes}")
        self.backend, self.host, self.port = backend, host, port
        self.store, self.serving = self._store()
        self.local_addr = args.local_addr or socket.getfqdn()
        self.failures = tempfile.mkdtemp(prefix="torcia-run-")
        self.workers: list[subprocess.Popen] = []

    def _store(self) -> tuple[TCPStore, bool]:
        """The agents' store, and whether this agent serves it."""
        timeout = datetime.timedelta(seconds=self.join_timeout)
        serves = self.backend == "static" and self.args.node_rank == 0
        if self.backend == "c10d":
            try:
                return TCPStore(self.host, self.port, is_master=True, timeout=timeout,
                                wait_for_workers=False), True
            except OSError:
                pass  # another agent of the job serves it (or will): join it
        return TCPStore(self.host, self.port, is_master=serves, timeout=timeout,
                        wait_for_workers=False), serves

    def _key(self, *parts) -> str:
        return "/".join(("torcia_run", self.run_id, *map(str, parts)))

    def _peek(self, key):
        """The value of ``key``, or None when it is not set (without waiting)."""
        return self.store.get(key) if self.store.check([key]) else None

    # ----- rounds ---------------------------------------------------------------------
    def rendezvous(self, round_: int) -> dict:
        """Meet the other agents for round ``round_``; returns this node's place in it."""
        store, key = self.store, lambda *p: self._key("round", round_, *p)
        arrival = store.add(key("arrived"), 1)
        node = self.args.node_rank if self.backend == "static" else arrival - 1
        store.set(key("node", node), json.dumps({"nproc": self.nproc,
                                                 "addr": self.local_addr}))
        nodes = self._close(key, arrival)
        if node >= nodes:
            raise RuntimeError(f"torcia-run: round {round_} closed with {nodes} nodes before "
                               "this one joined")
        info = [json.loads(store.get(key("node", n))) for n in range(nodes)]
        first = sum(i["nproc"] for i in info[:node])
        return {"group_rank": node, "group_world_size": nodes, "first_rank": first,
                "world_size": sum(i["nproc"] for i in info)}

    def _close(self, key, arrival) -> int:
        """The number of nodes of the round: ``max_nodes`` once they all arrived, else as
        many as arrived (at least ``min_nodes``) after ``last_call_timeout``."""
        store = self.store
        started = time.monotonic()
        while True:
            closed = self._peek(key("closed"))
            if closed is not None:
                return int(closed)
            count = int(store.add(key("arrived"), 0))
            waited = time.monotonic() - started
            if count >= self.max_nodes or (count >= self.min_nodes and waited > self.last_call
                                           and self.min_nodes < self.max_nodes):
                # the first agent to see the round full writes its size; others read it
                return int(store.compare_set(key("closed"), "", str(min(count,
                                                                        self.max_nodes))))
            if waited > self.join_timeout:
                raise DistStoreError(f"torcia-run: {count} of {self.min_nodes} nodes joined "
                                     f"within {self.join_timeout:g} s")
            time.sleep(0.05)

    # ----- workers --------------------------------------------------------------------
    def _command(self) -> list[str]:
        args = self.args
        if args.no_python:
            return [args.training_script, *args.training_script_args]
        if args.module:
            return [sys.executable, "-u", "-m", args.training_script,
                    *args.training_script_args]
        if args.run_path:
            return [sys.executable, "-u", "-c", "import runpy, sys; sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')", args.training_script,
                    *args.training_script_args]
        return [sys.executable, "-u", args.training_script, *args.training_script_args]

    def start(self, place: dict, round_: int) -> None:
        base = {k: v for k, v in os.environ.items() if k not in _MPI_LAUNCH_VARS}
        if self.nproc > 1 and "OMP_NUM_THREADS" not in base:
            # as torchrun: N workers of N threads each would oversubscribe the machine
            base["OMP_NUM_THREADS"] = "1"
            if round_ == 0:
                sys.stderr.write("torcia-run: OMP_NUM_THREADS set to 1 for each worker (set "
                                 "it yourself to choose another number)\n")
        for name in os.listdir(self.failures):
            os.remove(os.path.join(self.failures, name))
        world = place["world_size"]
        for local in range(self.nproc):
            rank = place["first_rank"] + local
            env = dict(base, LOCAL_RANK=str(local), RANK=str(rank), GROUP_RANK=str(
                place["group_rank"]), ROLE_RANK=str(rank), ROLE_NAME=self.args.role,
                LOCAL_WORLD_SIZE=str(self.nproc), WORLD_SIZE=str(world),
                GROUP_WORLD_SIZE=str(place["group_world_size"]), ROLE_WORLD_SIZE=str(world),
                MASTER_ADDR=self.host, MASTER_PORT=str(self.port),
                TORCHELASTIC_RESTART_COUNT=str(round_),
                TORCHELASTIC_MAX_RESTARTS=str(self.args.max_restarts),
                TORCHELASTIC_RUN_ID=self.run_id, TORCHELASTIC_USE_AGENT_STORE="True",
                TORCHELASTIC_ERROR_FILE=self._error_file(rank),
                **{FAILURES_ENV: self.failures})
            self.workers.append(subprocess.Popen(self._command(), env=env,
                                                 start_new_session=True))
        self.first_rank = place["first_rank"]

    def _error_file(self, rank: int) -> str:
        return os.path.join(self.failures, f"error{rank}.json")

    def failed_worker(self):
        """(rank, why) of a failed worker, or None: a rank's note (its collective timed
        out) first, else a worker that ended with an error (what its ``@record``-ed main
        raised, when it did)."""
        for name in sorted(os.listdir(self.failures)):
            if name.startswith("rank"):
                with open(os.path.join(self.failures, name)) as f:
                    return int(name.removeprefix("rank")), f.readline().strip()
        for local, w in enumerate(self.workers):
            code = w.poll()
            if code not in (None, 0):
                rank = self.first_rank + local
                what = (f"killed by {signal.Signals(-code).name}" if code < 0
                        else f"exit code {code}")
                failure = ProcessFailure(local, w.pid, code, self._error_file(rank))
                if failure.error_file_data:
                    what += f": {failure.message}"
                return rank, what
        return None

    def stop(self, grace: float) -> None:
        """End the workers: SIGTERM, then SIGKILL after ``grace`` seconds."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
            for w in self.workers:
                if w.poll() is None:
                    try:
                        os.killpg(w.pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + (wait or 0)
            for w in self.workers:
                try:
                    w.wait(None if wait is None else max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        self.workers = []

    # ----- the job --------------------------------------------------------------------
    def run(self) -> int:
        round_ = 0
        while True:
            place = self.rendezvous(round_)
            self.start(place, round_)
            try:
                outcome = self._watch(round_, place["group_world_size"])
            except DistStoreError as exc:
                # the agent serving the store ended: the job is over for this node too
                self.stop(self.args.grace)
                sys.stderr.write(f"torcia-run: lost the rendezvous store ({exc}); ending\n")
                return 1
            if outcome != "restart":
                self._leave(place["group_world_size"])
                return outcome
            round_ += 1

    def _leave(self, nodes: int) -> None:
        """Say this agent is done; the one serving the store waits (a little) for the
        others, which may still be reading it."""
        try:
            left = self.store.add(self._key("left"), 1)
            deadline = time.monotonic() + 30
            while (self.serving and left < nodes
                   and time.monotonic() < deadline):
                time.sleep(0.05)
                left = self.store.add(self._key("left"), 0)
        except DistStoreError:
            pass  # the serving agent is gone already: nothing to wait for

    def _watch(self, round_: int, nodes: int):
        """Monitor this round: 0 when every node's workers succeeded, "restart" when a
        new round begins, a non-zero status when the job failed."""
        args = self.args
        restart_key, abort_key = self._key("restart"), self._key("abort")
        done_key = self._key("round", round_, "done")
        done = False
        while True:
            time.sleep(args.monitor_interval)
            if int(self.store.add(restart_key, 0)) > round_:
                self.stop(args.grace)
                return "restart"
            abort = self._peek(abort_key)
            if abort is not None:
                self.stop(args.grace)
                sys.stderr.write(f"torcia-run: {abort.decode()}; ending the job\n")
                return 1
            if done:
                if int(self.store.add(done_key, 0)) >= nodes:
                    return 0
                continue
            failed = self.failed_worker()
            if failed is not None:
                rank, why = failed
                self.stop(args.grace)
                if round_ < args.max_restarts:
                    sys.stderr.write(f"torcia-run: rank {rank} failed ({why}); restarting "
                                     f"the workers ({round_ + 1} of {args.max_restarts})\n")
                    # two nodes failing at once ask for the same round: one wins, both go
                    self.store.compare_set(restart_key, str(round_), str(round_ + 1))
                    return "restart"
                message = f"rank {rank} failed ({why})"
                self.store.compare_set(abort_key, "", message)
                sys.stderr.write(f"torcia-run: {message}; no restarts left, ending the job\n")
                return 1
            if all(w.poll() == 0 for w in self.workers):
                self.store.add(done_key, 1)
                done = True

    def close(self) -> None:
        self.stop(self.args.grace)
        shutil.rmtree(self.failures, ignore_errors=True)


def main(argv=None) -> int:
    """Run this node's agent with the command line ``argv`` (``sys.argv[1:]`` when None);
    returns the job's exit status.

    Examples
    --------
    What ``torcia-run --standalone --nproc-per-node 2 train.py --lr 0.1`` does::

        from torcia.distributed.run import main
        status = main(["--standalone", "--nproc-per-node", "2", "train.py", "--lr", "0.1"])
    """
    args = get_args_parser().parse_args(argv)
    try:
        agent = Agent(args)
    except ValueError as exc:
        get_args_parser().error(str(exc))
    try:
        return agent.run()
    except KeyboardInterrupt:
        return 130
    except DistStoreError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    finally:
        agent.close()


if __name__ == "__main__":
    sys.exit(main())
