"""What runs inside a DataLoader worker process, and what a worker tells the main process."""

from __future__ import annotations

import os
import pickle
import queue
import random
import signal
import sys
import traceback
from dataclasses import dataclass

import numpy as np

import torcia
from torcia.data import _shm
from torcia.data._fetch import Fetcher

__all__ = ["WorkerInfo", "get_worker_info"]

#: How often a waiting worker checks that the main process is still alive (seconds).
POLL_INTERVAL = 1.0


@dataclass(frozen=True)
class WorkerInfo:
    """Who this worker is; :func:`get_worker_info` returns it inside a worker process.

    Attributes
    ----------
    id : int
        This worker's index, ``0 .. num_workers - 1``.
    num_workers : int
        How many workers the DataLoader runs.
    seed : int
        The seed of this worker's random generators (``base_seed + id``).
    dataset : Dataset
        This worker's copy of the dataset.

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import get_worker_info
    >>> get_worker_info() is None  # in the main process
    True
    >>> info = torcia.data.WorkerInfo(id=1, num_workers=4, seed=7, dataset=[10, 20, 30])
    >>> info.dataset[info.id::info.num_workers]  # the share of worker 1
    [20]
    """

    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Information about the current DataLoader worker, or None in the main process.

    An ``IterableDataset`` uses it to shard its stream, and a ``worker_init_fn`` to configure
    the worker's copy of the dataset.

    Examples
    --------
    >>> from torcia.data import get_worker_info
    >>> get_worker_info() is None  # not inside a worker
    True
    """
    return _worker_info


# ---------------------------------------------------------------------------------------
# messages between the main process and a worker
# ---------------------------------------------------------------------------------------


@dataclass
class Task:
    """Fetch one batch: ``indices`` for a map-style dataset, None for an iterable one."""

    epoch: int
    index: int
    indices: list | None


@dataclass
class Reset:
    """A new epoch starts (persistent workers): restart the iterable dataset's iterator."""

    epoch: int


class IterableEnd:
    """This worker's copy of the iterable dataset is exhausted."""


@dataclass
class ExceptionWrapper:
    """An exception raised in a worker, with its traceback as text."""

    name: str  # the exception's class name
    exc_type: bytes | None  # the pickled class; None when it cannot be pickled
    where: str
    text: str

    @classmethod
    def capture(cls, where: str) -> ExceptionWrapper:
        exc_type, exc, tb = sys.exc_info()
        try:
            pickled = pickle.dumps(exc_type)
        except Exception:  # noqa: BLE001 - a class defined in a closure cannot be pickled
            pickled = None
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        return cls(exc_type.__name__, pickled, where, text)

    def reraise(self):
        msg = f"Caught {self.name} {self.where}.\nOriginal {self.text}"
        try:
            exc_type = pickle.loads(self.exc_type)
        except Exception:  # noqa: BLE001 - None, or a class this process cannot import
            exc_type = RuntimeError
        if issubclass(exc_type, StopIteration):  # raised from __next__ it would end the epoch
            exc_type = RuntimeError
        if exc_type is KeyError:  # KeyError shows its argument's repr, which garbles text
            msg = _KeyErrorMessage(msg)
        try:
            exc = exc_type(msg)
        except Exception:  # noqa: BLE001 - the constructor takes other arguments
            exc = RuntimeError(msg)
        try:
            raise exc
        finally:
            # exc -> traceback -> this frame -> exc would be a cycle, keeping the
            # DataLoader iterator (and its workers) alive until the garbage collector runs
            del exc


class _KeyErrorMessage(str):
    def __repr__(self):
        return str(self)


# ---------------------------------------------------------------------------------------
# the worker
# ---------------------------------------------------------------------------------------


def _seed_everything(seed: int) -> None:
    torcia.manual_seed(seed)
    random.seed(seed)
    np.random.seed([seed & 0xFFFFFFFF, seed >> 32])


def worker_loop(dataset, iterable, auto_collation, collate_fn, drop_last, batch_size,
                tasks, results, worker_id, num_workers, base_seed, init_fn, shm_prefix):
    """Serve tasks from ``tasks`` until a None arrives, sending each batch on ``results``.

    Errors in fetching a batch go back as :class:`ExceptionWrapper` and the worker goes on;
    an error in ``init_fn`` or in starting an iterable dataset's iterator is sent with no
    epoch and ends the worker. The worker also ends when the main
    process is gone, so a killed main process leaves no orphans.
    """
    global _worker_info
    # the process that started this worker: the main process under fork and spawn, the fork
    # server under forkserver (which exits with the main process); its exit reparents us
    parent = os.getppid()
    # Ctrl-C reaches the whole process group: the main process handles it and shuts
    # the workers down, which a worker dying on its own would only confuse.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    seed = base_seed + worker_id
    _seed_everything(seed)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    where = f"in DataLoader worker process {worker_id}"
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = Fetcher(dataset, iterable, auto_collation, collate_fn, drop_last, batch_size)
    except Exception:  # noqa: BLE001 - every failure goes back to the main process
        results.send((None, None, ExceptionWrapper.capture(where)))
        return
    try:
        _serve(fetcher, tasks, results, where, f"{shm_prefix}{worker_id}_", parent)
    except BrokenPipeError:  # the main process closed its end: it is shutting down
        return


def _serve(fetcher, tasks, results, where, shm_prefix, parent):
    use_shm = _shm.available()
    count = 0
    exhausted = False
    while True:
        try:
            task = tasks.get(timeout=POLL_INTERVAL)
        except queue.Empty:
            if os.getppid() != parent:
                return
            continue
        if task is None:
            return
        if isinstance(task, Reset):
            try:
                fetcher.restart()
            except Exception:  # noqa: BLE001 - the dataset's __iter__ failed: as at start-up
                results.send((None, None, ExceptionWrapper.capture(where)))
                return
            exhausted = False
            continue
        if exhausted:  # tasks queued before the main process learnt of the end
            results.send((task.epoch, task.index, IterableEnd()))
            continue
        try:
            batch = fetcher.fetch(task.indices)
            if use_shm:
                count += 1
                batch = _shm.pack(batch, f"{shm_prefix}{count}")
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the main process
            # StopIteration ends an iterable dataset; from a map-style one it is a bug to report
            exhausted = isinstance(exc, StopIteration) and fetcher.iterable
            batch = IterableEnd() if exhausted else ExceptionWrapper.capture(where)
        if isinstance(batch, _shm.Packed):
            # the descriptors follow the message; this process's copies close either way
            _shm.send(results, (task.epoch, task.index, batch._replace(fds=[])), batch)
        else:
            results.send((task.epoch, task.index, batch))
        del batch  # free this batch's arrays before waiting for the next task
