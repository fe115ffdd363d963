"""torcia.futures: the result of work that completes later, as ``torch.futures``.

A :class:`Future` is completed with :meth:`~Future.set_result` (or
:meth:`~Future.set_exception`); :meth:`~Future.wait` blocks until then and returns the
value. :meth:`~Future.then` chains a callback that runs once the future completes and
whose return value completes the future it returns. A producer may also give a future a
way to *drive* its completion (``Future(drive=fn)``): waiting on it then calls ``fn()``
first, so work that progresses only when polled (a collective of
``torcia.distributed``, ``Work.get_future()``) completes without a thread of its own.

Examples
--------
>>> import torcia
>>> from torcia.futures import Future
>>> fut = Future()
>>> doubled = fut.then(lambda f: f.value() * 2)
>>> fut.set_result(torcia.tensor([1.0, 2.0]))
>>> doubled.wait()
tensor([2., 4.])
"""

from __future__ import annotations

import threading

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """A value that arrives later.

    Parameters
    ----------
    devices : list, optional
        Accepted for PyTorch's signature (CUDA streams); unused on the host.
    drive : callable, optional
        Called (once) by :meth:`wait` before blocking: it completes the future itself.

    Examples
    --------
    >>> from torcia.futures import Future
    >>> fut = Future()
    >>> fut.done()
    False
    >>> fut.set_result(3); fut.done(), fut.wait()
    (True, 3)
    """

    def __init__(self, *, devices=None, drive=None):
        self._cond = threading.Condition()
        self._done = False
        self._value = None
        self._error = None
        self._callbacks = []
        self._drive = drive

    def done(self) -> bool:
        """Whether the future has a value or an error."""
        return self._done

    def set_result(self, result) -> None:
        """Complete the future with ``result`` and run the callbacks."""
        self._complete(result, None)

    def set_exception(self, result: BaseException) -> None:
        """Complete the future with an error that :meth:`wait` and :meth:`value` raise."""
        if not isinstance(result, BaseException):
            raise TypeError(f"set_exception expects an exception, got "
                            f"{type(result).__name__}")
        self._complete(None, result)

    def _complete(self, value, error):
        with self._cond:
            if self._done:
                raise RuntimeError("Future can only be marked completed once.")
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for callback in callbacks:
            callback(self)

    def wait(self):
        """Block until the future completes; return its value (raise its error)."""
        if not self._done and self._drive is not None:
            drive, self._drive = self._drive, None
            drive()
        with self._cond:
            while not self._done:
                self._cond.wait()
        return self.value()

    def value(self):
        """The value of a completed future (its error is raised)."""
        if not self._done:
            raise RuntimeError("Future is not completed yet: wait() for it first")
        if self._error is not None:
            raise self._error
        return self._value

    def add_done_callback(self, callback) -> None:
        """Run ``callback(self)`` once the future completes (now, if it has)."""
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback) -> Future:
        """A future completed with ``callback(self)`` once this one completes (with the
        error, when this one or the callback fails)."""
        child = Future(drive=self.wait)

        def run(parent):
            try:
                result = callback(parent)
            except Exception as exc:  # noqa: BLE001 - handed to whoever waits on the child
                child.set_exception(exc)
            else:
                child.set_result(result)

        self.add_done_callback(run)
        return child


def collect_all(futures) -> Future:
    """A future completed with the list of ``futures`` once all of them are.

    Examples
    --------
    >>> from torcia.futures import Future, collect_all
    >>> a, b = Future(), Future()
    >>> both = collect_all([a, b])
    >>> a.set_result(1); b.set_result(2)
    >>> [f.value() for f in both.wait()]
    [1, 2]
    """
    futures = list(futures)

    def drive():
        for f in futures:
            f.wait()

    out = Future(drive=drive)
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            out.set_result(futures)

    if not futures:
        out.set_result([])
    for f in futures:
        f.add_done_callback(one_done)
    return out


def wait_all(futures) -> list:
    """Wait for every future of ``futures``; their values, in order.

    Examples
    --------
    >>> from torcia.futures import Future, wait_all
    >>> f = Future(); f.set_result("done")
    >>> wait_all([f])
    ['done']
    """
    return [f.wait() for f in futures]
