"""Start N processes running one function, and watch them as one job, as
``torch.multiprocessing.spawn``.

Process i runs ``fn(i, *args)``. The first process to fail ends the job: the others are
terminated (SIGTERM, then SIGKILL after a grace period) and :meth:`ProcessContext.join`
raises in the parent, with the child's traceback when it raised
(:class:`ProcessRaisedException`), or its exit code or signal when it died
(:class:`ProcessExitedException`). A child reports its traceback as text in a file of a
temporary folder, so nothing is unpickled from it.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings

__all__ = ["ProcessContext", "ProcessException", "ProcessExitedException",
           "ProcessRaisedException", "SpawnContext", "spawn", "start_processes"]


class ProcessException(Exception):
    """A process of a :class:`ProcessContext` failed: ``error_index`` is its index in the
    job, ``pid`` its process id.

    Examples
    --------
    >>> from torcia.multiprocessing import ProcessException
    >>> ProcessException("failed", error_index=1, error_pid=42).error_index
    1
    """

    __slots__ = ("error_index", "pid")

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A process raised: the message ends with its traceback.

    Examples
    --------
    >>> import torcia.multiprocessing as mp
    >>> def fails(i):
    ...     raise ValueError(f"process {i} fails")
    >>> try:
    ...     mp.start_processes(fails, nprocs=1, start_method="fork")
    ... except mp.ProcessRaisedException as exc:
    ...     print(exc.error_index, "ValueError: process 0 fails" in str(exc))
    0 True
    """


class ProcessExitedException(ProcessException):
    """A process ended with a non-zero exit code, or was killed by a signal
    (``signal_name``, e.g. ``"SIGKILL"``).

    Examples
    --------
    >>> from torcia.multiprocessing import ProcessExitedException
    >>> e = ProcessExitedException("process 0 terminated with signal SIGKILL", 0, 42, -9,
    ...                            "SIGKILL")
    >>> e.exit_code, e.signal_name
    (-9, 'SIGKILL')
    """

    __slots__ = ("exit_code", "signal_name")

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return (type(self),
                (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name))


def _wrap(fn, i, args, error_file):
    """What process ``i`` runs: ``fn(i, *args)``, its traceback written to ``error_file``
    if it raises."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is ending the job (SIGINT to the process group)
    except Exception:  # noqa: BLE001 - any error is reported to the parent, then exit 1
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes of one :func:`start_processes` call.

    Parameters
    ----------
    processes : list of multiprocessing.Process
    error_files : list of str
        Where process i writes its traceback if it raises.

    Examples
    --------
    >>> import torcia.multiprocessing as mp
    >>> def work(i):
    ...     pass
    >>> context = mp.start_processes(work, nprocs=2, join=False, start_method="fork")
    >>> while not context.join():
    ...     pass
    >>> len(context.pids())
    2
    """

    def __init__(self, processes, error_files):
        self.error_files = list(error_files)
        self.processes = list(processes)
        self.sentinels = {p.sentinel: i for i, p in enumerate(self.processes)}
        self._folder = None

    def pids(self) -> list[int]:
        """The process ids, in index order."""
        return [int(p.pid) for p in self.processes]

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (forever when None) for the processes to end.

        Returns True once all have ended successfully, False if some still run. When one
        fails, the others get SIGTERM, and SIGKILL ``grace_period`` seconds later (at
        once when None), and the failure is raised: :class:`ProcessRaisedException` with
        the child's traceback, or :class:`ProcessExitedException` with its exit code or
        signal.
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0 and failed is None:
                failed = index
        if failed is None:
            if not self.sentinels:
                self._cleanup()
                return True
            return False
        self._terminate_others(grace_period)
        process = self.processes[failed]
        try:
            with open(self.error_files[failed]) as f:
                trace = f.read()
        except FileNotFoundError:
            trace = None
        self._cleanup()
        if trace:
            raise ProcessRaisedException(
                f"\n\n-- Process {failed} terminated with the following error:\n{trace}",
                failed, process.pid)
        code = process.exitcode
        if code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}",
                                         failed, process.pid, code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}",
                                     failed, process.pid, code)

    def _terminate_others(self, grace_period):
        alive = [p for p in self.processes if p.is_alive()]
        for p in alive:
            p.terminate()
        deadline = time.monotonic() + (grace_period or 0)
        for p in alive:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in alive:
            if p.is_alive():
                p.kill()
            p.join()
        self.sentinels.clear()

    def _cleanup(self):
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


class SpawnContext(ProcessContext):
    """The deprecated name of :class:`ProcessContext` (warns).

    Examples
    --------
    >>> from torcia.multiprocessing import ProcessContext, SpawnContext
    >>> issubclass(SpawnContext, ProcessContext)
    True
    """

    def __init__(self, processes, error_files):
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.",
                      stacklevel=2)
        super().__init__(processes, error_files)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes of ``start_method`` ("spawn", "fork" or "forkserver"),
    process i running ``fn(i, *args)``.

    With ``join`` (the default), wait for all of them and raise if one fails (see
    :meth:`ProcessContext.join`); else return the :class:`ProcessContext`. ``fn`` must be
    importable by the children (a module-level function) under "spawn".

    Examples
    --------
    In a script, ``if __name__ == "__main__":`` guards the start ("spawn" imports the
    script again in each child). With "fork", a function defined anywhere will do:

    >>> import torcia, torcia.multiprocessing as mp
    >>> out = torcia.zeros(3).share_memory_()
    >>> def fill(i, value):
    ...     out[i] = value * i
    >>> mp.start_processes(fill, args=(10.0,), nprocs=3, start_method="fork")
    >>> out
    tensor([ 0., 10., 20.])
    """
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    context = multiprocessing.get_context(start_method)
    folder = tempfile.mkdtemp(prefix="torcia-spawn-")
    error_files, processes = [], []
    for i in range(nprocs):
        error_file = os.path.join(folder, f"process{i}.error")
        process = context.Process(target=_wrap, args=(fn, i, args, error_file), daemon=daemon)
        process.start()
        error_files.append(error_file)
        processes.append(process)
    job = ProcessContext(processes, error_files)
    job._folder = folder
    if not join:
        return job
    while not job.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes with the "spawn" start method, process i running
    ``fn(i, *args)``; see :func:`start_processes`.

    Examples
    --------
    The canonical two-process job::

        import torcia.distributed as dist, torcia.multiprocessing as mp

        def run(rank, world_size):
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29500"
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
            ...

        if __name__ == "__main__":
            mp.spawn(run, args=(2,), nprocs=2)
    """
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      "To use a different start_method use:\n\t\t "
                      "torch.multiprocessing.start_processes(...)", FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method)
