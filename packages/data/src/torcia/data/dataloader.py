"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` the main process keeps the sampler and hands each worker lists of
indices (round robin, at most ``prefetch_factor`` per worker outstanding); workers send
collated batches back through a pipe each, their arrays in shared memory (see
:mod:`torcia.data._shm`), and the main process yields them in the sampler's order. It waits
on the pipes and on the worker processes' sentinels together, so a worker that dies is
noticed at once, not after a timeout.

Workers start with the ``fork`` method on Linux: it is the fastest, and the dataset, the
collate function and ``worker_init_fn`` need not be picklable (a dataset class defined in a
notebook works). Forking is unsafe when other threads of the main process hold locks the
child will need (a CUDA context, threads of your own); pass
``multiprocessing_context="forkserver"`` or ``"spawn"`` then. Elsewhere the platform's
default method is used.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import time
import warnings
import weakref

from torcia.data import _shm
from torcia.data._collate import default_collate, default_convert
from torcia.data._fetch import Fetcher
from torcia.data._worker import ExceptionWrapper, IterableEnd, Reset, Task, worker_loop
from torcia.data.dataset import IterableDataset
from torcia.data.sampler import BatchSampler, RandomSampler, SequentialSampler
from torcia.random import default_generator

__all__ = ["DataLoader"]

#: DataLoader attributes that cannot change after construction.
_FROZEN = frozenset(("dataset", "batch_size", "batch_sampler", "sampler", "drop_last",
                     "persistent_workers"))
#: Batches each worker loads ahead when prefetch_factor is not given.
DEFAULT_PREFETCH = 2
#: How long a worker told to stop may take to finish its batch before it is terminated.
SHUTDOWN_GRACE = 1.0


class DataLoader:
    """Iterate over a dataset in batches.

    Parameters
    ----------
    dataset : Dataset or IterableDataset
        Where the samples come from.
    batch_size : int or None
        Samples per batch (default 1); None turns automatic batching off: each sample is
        yielded on its own, passed through ``collate_fn`` (default :func:`default_convert`).
    shuffle : bool
        Visit a map-style dataset in a new random order each epoch.
    sampler : Sampler or iterable, optional
        The order of indices; excludes ``shuffle``.
    batch_sampler : Sampler or iterable, optional
        Yields whole lists of indices; excludes ``batch_size``, ``shuffle``, ``sampler`` and
        ``drop_last``.
    num_workers : int
        Worker processes; 0 loads in the main process.
    collate_fn : callable, optional
        Turns a list of samples into a batch (default :func:`default_collate`).
    pin_memory : bool
        Put each batch's tensors in page-locked memory (:meth:`Tensor.pin_memory`), from
        which copies to the GPU run asynchronously. Without CUDA it warns once and
        batches stay in ordinary memory, as PyTorch does.
    drop_last : bool
        Drop the last batch when it is smaller than ``batch_size``.
    timeout : float
        With workers, how long to wait for a batch before raising (0: forever).
    worker_init_fn : callable, optional
        Called in each worker with its id, after seeding and before any sample is loaded.
    multiprocessing_context : str or multiprocessing context, optional
        How workers start: ``"fork"`` (the Linux default), ``"forkserver"`` or ``"spawn"``.
    generator : torcia.Generator, optional
        Draws the workers' base seed and, with ``shuffle``, the order; the order never
        depends on ``num_workers``.
    prefetch_factor : int, optional
        Batches each worker loads ahead (default 2 with workers; must be None without).
    persistent_workers : bool
        Keep the workers between epochs.
    pin_memory_device : str
        Accepted for compatibility, as ``pin_memory``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(torcia.arange(10), torcia.arange(10) * 2)
    >>> loader = DataLoader(ds, batch_size=4)
    >>> len(loader)
    3
    >>> [x.tolist() for x, _ in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device=""):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing. Let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = DEFAULT_PREFETCH
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int)
                                            or prefetch_factor < 1):
            raise ValueError(f"prefetch_factor should be a positive integer, got "
                             f"{prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError("multiprocessing_context can only be used with multi-process "
                             f"loading (num_workers > 0), but got num_workers={num_workers}")

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value!r}")
        elif sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        if sampler is None and not self._iterable:
            if shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self._pin = None  # what pins a batch, chosen at the first iteration
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = _context(multiprocessing_context)
        self.generator = generator
        self.persistent_workers = persistent_workers
        self._auto_collation = batch_sampler is not None or (self._iterable and
                                                              batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None
        self._checked_workers = False
        self._initialized = True

    def __setattr__(self, name, value):
        # the batch sampler and iterators are built from these: a later change would be
        # silently ignored
        if name in _FROZEN and self.__dict__.get("_initialized"):
            raise ValueError(f"{name} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _index_sampler(self):
        return self.batch_sampler if self.batch_sampler is not None else self.sampler

    def __len__(self) -> int:
        if not self._iterable:
            return len(self._index_sampler)
        n = len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        if self.pin_memory and self._pin is None:
            self._pin = _batch_pinner()
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self._checked_workers:
            _check_worker_number(self.num_workers)
            self._checked_workers = True
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator._workers.done:
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset(self)
        return self._iterator

    def _fetcher(self) -> Fetcher:
        return Fetcher(self.dataset, self._iterable, self._auto_collation, self.collate_fn,
                       self.drop_last, self.batch_size)


def _check_worker_number(num_workers: int) -> None:
    """Warn when there are more workers than CPUs this process may run on: they would
    only take turns, each holding its batches in memory."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    if num_workers > cpus:
        warnings.warn(
            f"This DataLoader will create {num_workers} worker processes in total, but this "
            f"process may only use {cpus} CPUs; more workers than that are likely to slow "
            "loading down. Lower num_workers if loading is slow.",
            UserWarning,
            stacklevel=3,
        )


def _base_seed(loader) -> int:
    # drawn whatever num_workers is, so that the random state the sampler then draws from,
    # and thus the order, does not depend on the number of workers
    return (loader.generator or default_generator).spawn_seed()


def _batch_pinner():
    """What pins a batch: :func:`_pin_batch` with CUDA, else (after a warning) None."""
    import torcia

    if torcia.cuda.is_available():
        return _pin_batch
    warnings.warn("pin_memory=True, but CUDA is not available: batches stay in ordinary "
                  "memory", stacklevel=3)
    return None


def _pin_batch(batch):
    """``batch`` with every tensor in it pinned (through lists, tuples and mappings)."""
    import torcia

    if isinstance(batch, torcia.Tensor):
        return batch.pin_memory()
    if isinstance(batch, dict):
        return type(batch)((k, _pin_batch(v)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(_pin_batch(v) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pin_batch(v) for v in batch)
    return batch


class _SingleProcessIter:
    def __init__(self, loader):
        _base_seed(loader)
        self._sampler_iter = None if loader._iterable else iter(loader._index_sampler)
        self._fetcher = loader._fetcher()
        self._pin = loader._pin

    def __iter__(self):
        return self

    def __next__(self):
        indices = None if self._sampler_iter is None else next(self._sampler_iter)
        batch = self._fetcher.fetch(indices)
        return batch if self._pin is None else self._pin(batch)


def _context(choice):
    """The multiprocessing context for ``multiprocessing_context=choice``."""
    if choice is None:
        return mp.get_context("fork" if sys.platform == "linux" else None)
    if isinstance(choice, str):
        return mp.get_context(choice)
    return choice


def _death_message(worker_id: int, proc) -> str:
    proc.join(1.0)  # the sentinel fires on exit, a moment before the exit code can be read
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            how = f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exit code {code}"
    return (f"DataLoader worker {worker_id} (pid {proc.pid}) exited unexpectedly ({how}). "
            "If it ran out of memory, try fewer workers or a smaller batch_size.")


_prefixes = itertools.count()


class _Workers:
    """The worker processes of one iterator and their channels.

    Kept apart from the iterator, with no reference to it, so that a ``weakref.finalize``
    can shut them down when the iterator is dropped (a ``break`` out of an epoch) or at
    interpreter exit.
    """

    def __init__(self, loader, base_seed: int):
        ctx = loader.multiprocessing_context
        self.owner = os.getpid()
        self.prefix = f"tc{self.owner}_{next(_prefixes)}_"
        self.done = False
        self.procs, self.tasks, self.readers = [], [], []
        try:
            for i in range(loader.num_workers):
                tasks = ctx.Queue()
                # a socket pair, not a pipe: batches' segments travel as descriptors
                reader, writer = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=worker_loop,
                    args=(loader.dataset, loader._iterable, loader._auto_collation,
                          loader.collate_fn, loader.drop_last, loader.batch_size, tasks, writer,
                          i, loader.num_workers, base_seed, loader.worker_init_fn,
                          self.prefix),
                    daemon=True,
                )
                proc.start()
                writer.close()  # the worker's copy is the only one: its exit gives EOF
                self.procs.append(proc)
                self.tasks.append(tasks)
                self.readers.append(reader)
        except BaseException:
            self.shutdown()
            raise

    def shutdown(self) -> None:
        """Stop every worker, then remove every shared-memory segment they left."""
        # a forked worker inherits its parent's iterators: never let it stop their workers
        if self.done or os.getpid() != self.owner:
            return
        self.done = True
        for tasks, proc in zip(self.tasks, self.procs):
            if proc.is_alive():
                tasks.put(None)
        # Drain while waiting: a worker blocked sending a batch must be read to exit,
        # and a drained batch's segment must be unlinked.
        deadline = time.monotonic() + SHUTDOWN_GRACE
        live = [i for i, p in enumerate(self.procs) if p.is_alive()]
        while live and time.monotonic() < deadline:
            waitables = [self.readers[i] for i in live] + [self.procs[i].sentinel for i in live]
            for ready in mp.connection.wait(waitables, deadline - time.monotonic()):
                if ready in self.readers:
                    self._drain(ready)
            live = [i for i in live if self.procs[i].is_alive()]
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(1.0)
            if proc.is_alive():
                proc.kill()
            proc.join()
        for reader in self.readers:
            while self._drain(reader):
                pass
            reader.close()
        for tasks in self.tasks:
            tasks.cancel_join_thread()  # its feeder may be stuck writing to a dead worker
            tasks.close()
        for name in _shm.leftovers(self.prefix):
            _shm.unlink(name)

    @staticmethod
    def _drain(reader) -> bool:
        """Read and discard one message if there is one; whether there was."""
        try:
            if not reader.poll():
                return False
            payload = reader.recv()[2]
            if isinstance(payload, _shm.Packed):
                payload = _shm.receive(reader, payload)
        except (EOFError, OSError):
            return False
        if isinstance(payload, _shm.Packed):
            _shm.discard(payload)
        return True


class _MultiProcessIter:
    def __init__(self, loader):
        self._num_workers = loader.num_workers
        self._iterable = loader._iterable
        # num_workers may be set after construction, leaving prefetch_factor None
        self._prefetch = (loader.prefetch_factor or DEFAULT_PREFETCH) * loader.num_workers
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._pin = loader._pin
        self._workers = _Workers(loader, _base_seed(loader))
        self._finalizer = weakref.finalize(self, self._workers.shutdown)
        self._epoch = 0
        self._start_epoch(loader)

    def _reset(self, loader) -> None:
        """Start another epoch on the same (persistent) workers."""
        _base_seed(loader)  # unused, but drawn so the order does not depend on persistence
        self._epoch += 1
        for tasks in self._workers.tasks:
            tasks.put(Reset(self._epoch))
        self._start_epoch(loader)

    def _start_epoch(self, loader) -> None:
        self._sampler_iter = None if self._iterable else iter(loader._index_sampler)
        self._sampler_done = False
        self._send_idx = 0  # index of the next task to hand out
        self._rcvd_idx = 0  # index of the next batch to yield
        self._task_worker: dict[int, int] = {}  # tasks handed out and not yet yielded
        self._ready: dict[int, object] = {}  # batches that came before their turn
        self._active = [True] * self._num_workers  # workers whose iterable has not ended
        self._next_worker = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch):
            self._dispatch()

    def __iter__(self):
        return self

    def _dispatch(self) -> None:
        """Hand the next task to the next active worker, if there is one."""
        if self._sampler_done or not any(self._active):
            return
        worker = next(w for w in self._next_worker if self._active[w])
        indices = None
        if self._sampler_iter is not None:
            try:
                indices = next(self._sampler_iter)
            except StopIteration:
                self._sampler_done = True
                return
        self._workers.tasks[worker].put(Task(self._epoch, self._send_idx, indices))
        self._task_worker[self._send_idx] = worker
        self._send_idx += 1

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx and self._rcvd_idx not in self._ready:
                if self._active[self._task_worker[self._rcvd_idx]]:
                    break
                # handed to a worker whose iterable had already ended: nothing will come
                del self._task_worker[self._rcvd_idx]
                self._rcvd_idx += 1
            if self._rcvd_idx == self._send_idx:
                if not self._persistent:
                    self._finalizer()
                raise StopIteration
            if self._rcvd_idx in self._ready:
                del self._task_worker[self._rcvd_idx]
                batch = self._ready.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                self._dispatch()
                if isinstance(batch, ExceptionWrapper):
                    batch.reraise()
                return batch if self._pin is None else self._pin(batch)
            self._receive()

    def _receive(self) -> None:
        """Wait for at least one message from a worker and file it."""
        workers = self._workers
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = mp.connection.wait(workers.readers + [p.sentinel for p in workers.procs],
                                       remaining)
            got = False
            for w, reader in enumerate(workers.readers):
                if reader in ready:
                    got |= self._read(w)
            if got:
                return
            for w, proc in enumerate(workers.procs):
                # a worker that ended may have left messages (its error among them) behind
                # the one just read: those are read first
                if proc.sentinel in ready and not workers.readers[w].poll():
                    self._fail(RuntimeError(_death_message(w, proc)))
            if deadline is not None and time.monotonic() >= deadline:
                self._fail(RuntimeError(f"DataLoader timed out after {self._timeout} seconds"))

    def _read(self, w: int) -> bool:
        """File one message from worker ``w``; False when it was stale or none came."""
        reader = self._workers.readers[w]
        try:
            epoch, idx, payload = reader.recv()
            if isinstance(payload, _shm.Packed):
                payload = _shm.receive(reader, payload)
        except (EOFError, OSError):
            self._fail(RuntimeError(_death_message(w, self._workers.procs[w])))
        if epoch is None:  # worker_init_fn or the dataset's setup failed
            self._finalizer()
            payload.reraise()
        if epoch != self._epoch:  # left over from an epoch that was abandoned
            if isinstance(payload, _shm.Packed):
                _shm.discard(payload)
            return False
        if isinstance(payload, IterableEnd):
            self._active[w] = False
            self._dispatch()
            return True
        if isinstance(payload, _shm.Packed):
            payload = _shm.unpack(payload)
        self._ready[idx] = payload
        return True

    def _fail(self, error: Exception):
        self._finalizer()
        try:
            raise error
        finally:
            del error  # see ExceptionWrapper.reraise: no cycle through this frame
