"""What a process-group backend implements, and the handles its operations return."""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time

from torcia.backend import device


class ReduceOp:
    """Reduction operations for collectives (``torcia.distributed.ReduceOp.SUM``...).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.ReduceOp.SUM, dist.ReduceOp.MAX
    ('sum', 'max')
    """

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    ALL = (SUM, AVG, PRODUCT, MIN, MAX)


#: The environment variable ``torcia-run`` sets to a folder where a failing rank leaves a
#: note (file ``rank<N>``, holding why), so that the launcher can end the whole job at once
#: and name the rank, instead of waiting for peers that wait for it.
FAILURES_ENV = "TORCIA_RUN_FAILURES"

_failures: list[str] = []


def report_failure(rank: int, message: str) -> None:
    """Record that a collective of this process failed (timed out, or a rank raised).

    The process then ends with exit status 1 when the interpreter exits, whatever ended
    it (even ``sys.exit(0)`` after catching the error), without the backend's finalisation:
    MPI's ``Finalize`` waits for the peer that stopped answering, which kept the process,
    and so the job, alive forever. Under ``torcia-run``, the note it leaves makes the
    launcher end the job within seconds.

    Parameters
    ----------
    rank : int
        The failing process's rank.
    message : str
        What went wrong, for the launcher's report.

    Examples
    --------
    A backend whose communicator broke::

        from torcia.distributed.group import report_failure
        report_failure(rank, "the NCCL communicator was aborted")
    """
    if not _failures:
        atexit.register(_exit_failed)
    _failures.append(message)
    folder = os.environ.get(FAILURES_ENV)
    if folder:
        try:
            with open(os.path.join(folder, f"rank{rank}"), "a") as f:
                f.write(message.replace("\n", " ") + "\n")
        except OSError:
            pass  # the launcher is gone: the exit status still tells


def _exit_failed():
    # registered at the first failure, so it runs before the handlers registered at import
    # (MPI's finalisation among them, which would block)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(1)


class Work:
    """The handle of an operation (``async_op=True`` returns it).

    A backend subclasses it or passes ``test`` (returns True once done) and ``finish``
    (runs once, after completion, e.g. to divide a sum for AVG). ``on_timeout``, when
    given, runs when a wait times out and returns what the error should say happened
    (which peer died, say); it may also clean up, e.g. abort a communicator.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> x = torcia.tensor([1.0, 2.0])
    >>> work = dist.all_reduce(x, async_op=True)
    >>> work.wait()
    True
    >>> work.is_completed()
    True
    >>> dist.destroy_process_group()
    """

    def __init__(self, test, finish=None, what="collective", timeout=None, rank=-1,
                 on_timeout=None):
        self._test = test
        self._finish = finish
        self._done = False
        self._what = what
        self._timeout = timeout
        self._rank = rank
        self._on_timeout = on_timeout
        self._result = None  # what the future's value is: the collective's output tensors
        self._on_done = []

    def is_completed(self) -> bool:
        if not self._done and self._test():
            self._complete()
        return self._done

    def _complete(self):
        self._done = True
        if self._finish is not None:
            self._finish()
        callbacks, self._on_done = self._on_done, []
        for callback in callbacks:
            callback()

    def get_future(self):
        """A :class:`torcia.futures.Future` completed with the operation's output tensors
        (a list) once it finishes; waiting on the future waits on the operation.

        Examples
        --------
        >>> import torcia
        >>> import torcia.distributed as dist
        >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
        >>> work = dist.all_reduce(torcia.ones(2), async_op=True)
        >>> work.get_future().then(lambda f: f.value()[0] * 10).wait()
        tensor([10., 10.])
        >>> dist.destroy_process_group()
        """
        from torcia.futures import Future

        future = Future(drive=self.wait)
        if self._done:
            future.set_result(self._result)
        else:
            self._on_done.append(lambda: future.set_result(self._result))
        return future

    def wait(self, timeout=None) -> bool:
        """Block until the operation completes; raise if it takes longer than the timeout.

        The wait polls (with backoff up to a millisecond) rather than blocking in the
        backend, so that a peer that died or never joined gives an error, not a hang.
        """
        if self._done:
            return True
        limit = timeout if timeout is not None else self._timeout
        deadline = None if limit is None else time.monotonic() + _seconds(limit)
        pause = 0.0
        while not self._test():
            if deadline is not None and time.monotonic() > deadline:
                why = (self._on_timeout() if self._on_timeout is not None
                       else "a peer may have died or not called it")
                message = (f"{self._what} on rank {self._rank} timed out after "
                           f"{_seconds(limit):g} s: {why}")
                report_failure(self._rank, message)
                raise RuntimeError(message)
            time.sleep(pause)
            pause = min(0.001, pause * 2 + 1e-5)
        self._complete()
        return True

    def result(self):
        self.wait()
        return None


def _seconds(t) -> float:
    return t.total_seconds() if hasattr(t, "total_seconds") else float(t)


class ProcessGroup:
    """A set of processes that run collectives together; backends subclass it.

    A group moves the tensors of one device type, ``device_type`` ("cpu" for MPI, "cuda"
    for NCCL; with ``device_index`` set, only that device's). Every method works on
    arrays of that device's array module (:attr:`xp`: NumPy, CuPy), contiguous (the caller
    guarantees it), in place where the collective writes into its input, and returns a
    :class:`Work`. ``rank`` and ``size`` are this process's rank in the group and the
    group's size. Ranks passed to the methods (``src``, ``dst``, ``peer``) are ranks
    within this group.
    """

    backend_name = "base"
    device_type = "cpu"
    device_index = None

    def __init__(self, rank: int, size: int, timeout):
        self.rank = rank
        self.size = size
        self.timeout = timeout

    @functools.cached_property
    def xp(self):
        """The array module of the group's device (numpy for "cpu", cupy for "cuda")."""
        return device(self.device_type).backend.xp

    def _unsupported(self, what):
        raise NotImplementedError(f"the {self.backend_name!r} process group does not "
                                  f"implement {what}")

    def allreduce(self, array, op) -> Work:
        self._unsupported("all_reduce")

    def broadcast(self, array, src) -> Work:
        self._unsupported("broadcast")

    def reduce(self, array, dst, op) -> Work:
        self._unsupported("reduce")

    def allgather(self, out, array) -> Work:
        """``out`` has shape ``(size, *array.shape)``."""
        self._unsupported("all_gather")

    def gather(self, out, array, dst) -> Work:
        """``out`` (only on ``dst``) has shape ``(size, *array.shape)``."""
        self._unsupported("gather")

    def scatter(self, out, array, src) -> Work:
        """``array`` (only on ``src``) has shape ``(size, *out.shape)``."""
        self._unsupported("scatter")

    def reduce_scatter(self, out, array, op) -> Work:
        """``array`` has shape ``(size, *out.shape)``."""
        self._unsupported("reduce_scatter")

    def alltoall(self, out, array) -> Work:
        """Both have shape ``(size, ...)``: slice i goes to rank i."""
        self._unsupported("all_to_all")

    def send(self, array, dst, tag) -> Work:
        self._unsupported("send")

    def recv(self, array, src, tag) -> Work:
        """``src`` None receives from any rank; ``Work.source`` tells which."""
        self._unsupported("recv")

    def barrier(self) -> Work:
        self._unsupported("barrier")

    def subgroup(self, ranks):
        """A group of the given ranks (of this group); None on processes not in it."""
        self._unsupported("new_group")

    def destroy(self) -> None:
        return None
