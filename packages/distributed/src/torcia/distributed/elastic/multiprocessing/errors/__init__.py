"""How a worker of ``torcia-run`` reports the exception that ended it, as
``torch.distributed.elastic.multiprocessing.errors``.

``torcia-run`` gives each worker a file to write (``TORCHELASTIC_ERROR_FILE``); a main
function decorated with :func:`record` writes the exception that escapes it there, as
JSON, and the launcher then names it when it reports the failed rank.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import time
import traceback

__all__ = ["ChildFailedError", "ErrorHandler", "ProcessFailure", "get_error_handler",
           "record"]

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"


class ErrorHandler:
    """Writes a worker's uncaught exception to the file named by
    ``TORCHELASTIC_ERROR_FILE`` (nothing when unset).

    Examples
    --------
    >>> import json, os, tempfile
    >>> from torcia.distributed.elastic.multiprocessing.errors import ErrorHandler
    >>> path = os.path.join(tempfile.mkdtemp(), "error.json")
    >>> os.environ["TORCHELASTIC_ERROR_FILE"] = path
    >>> ErrorHandler().record_exception(ValueError("bad batch"))
    >>> json.load(open(path))["message"]["message"]
    'ValueError: bad batch'
    >>> del os.environ["TORCHELASTIC_ERROR_FILE"]
    """

    def _error_file_path(self):
        return os.environ.get(ERROR_FILE_ENV)

    def initialize(self) -> None:
        """Prepare for recording (nothing to do: the file is written on error)."""

    def record_exception(self, e: BaseException) -> None:
        """Write ``e`` (type, message, traceback, time) to the error file."""
        path = self._error_file_path()
        if not path:
            return
        data = {"message": {
            "message": f"{type(e).__name__}: {e}",
            "extraInfo": {"py_callstack": "".join(traceback.format_exception(e)),
                          "timestamp": str(int(time.time()))}}}
        with open(path, "w") as f:
            json.dump(data, f)

    def override_error_code_in_rootcause_data(self, rootcause_error_file: str,
                                              rootcause_error: dict,
                                              error_code: int = 0) -> None:
        """Put ``error_code`` into the root cause's record (where it has none)."""
        if isinstance(rootcause_error.get("message"), dict) and error_code:
            rootcause_error["message"].setdefault("errorCode", error_code)

    def dump_error_file(self, rootcause_error_file: str, error_code: int = 0) -> None:
        """Copy a child's error file (the root cause of a failure) to this process's."""
        with open(rootcause_error_file) as f:
            data = json.load(f)
        self.override_error_code_in_rootcause_data(rootcause_error_file, data, error_code)
        path = self._error_file_path()
        if path:
            with open(path, "w") as f:
                json.dump(data, f)


def get_error_handler() -> ErrorHandler:
    """The error handler :func:`record` uses by default.

    Examples
    --------
    >>> from torcia.distributed.elastic.multiprocessing.errors import get_error_handler
    >>> type(get_error_handler()).__name__
    'ErrorHandler'
    """
    return ErrorHandler()


@dataclasses.dataclass
class ProcessFailure:
    """A failed worker: its local rank, pid, exit code (negative: the signal) and error
    file, with the error recorded there (``message``, ``timestamp``) when it wrote one.

    Examples
    --------
    >>> from torcia.distributed.elastic.multiprocessing.errors import ProcessFailure
    >>> f = ProcessFailure(local_rank=1, pid=42, exitcode=-9, error_file="<none>")
    >>> f.signal_name(), f.message
    ('SIGKILL', 'Signal 9 (SIGKILL) received by PID 42')
    """

    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    error_file_data: dict = dataclasses.field(init=False)
    message: str = dataclasses.field(init=False)
    timestamp: int = dataclasses.field(init=False)

    def __post_init__(self):
        self.error_file_data = {}
        self.timestamp = int(time.time())
        if os.path.isfile(self.error_file):
            with open(self.error_file) as f:
                self.error_file_data = json.load(f)
            record = self.error_file_data.get("message", {})
            self.message = record.get("message", "") if isinstance(record, dict) else record
            if isinstance(record, dict):
                stamp = record.get("extraInfo", {}).get("timestamp")
                self.timestamp = int(stamp) if stamp else self.timestamp
        elif self.exitcode < 0:
            self.message = (f"Signal {-self.exitcode} ({self.signal_name()}) received by PID "
                            f"{self.pid}")
        else:
            self.message = ("To see the traceback, decorate the worker's main function "
                            "with torcia.distributed.elastic.multiprocessing.errors.record")

    def signal_name(self) -> str:
        """The name of the signal that ended the worker, or "<N/A>"."""
        if self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except ValueError:
                return "<N/A>"
        return "<N/A>"

    def timestamp_isoformat(self) -> str:
        """When the failure happened, ISO 8601."""
        import datetime

        return datetime.datetime.fromtimestamp(self.timestamp).isoformat(sep="_")


class ChildFailedError(Exception):
    """Workers of ``name`` failed: ``failures`` maps their global ranks to
    :class:`ProcessFailure`; the first of them in time is the root cause.

    Examples
    --------
    >>> from torcia.distributed.elastic.multiprocessing.errors import (
    ...     ChildFailedError, ProcessFailure)
    >>> e = ChildFailedError("train.py", {1: ProcessFailure(0, 42, 3, "<none>")})
    >>> e.get_first_failure()[0], "train.py FAILED" in str(e)
    (1, True)
    """

    def __init__(self, name: str, failures: dict):
        self.name = name
        self.failures = dict(failures)
        if not self.failures:
            raise ValueError("ChildFailedError needs at least one failure")
        super().__init__(self.format_msg())

    def get_first_failure(self) -> tuple:
        """``(rank, ProcessFailure)`` of the earliest failure."""
        rank = min(self.failures, key=lambda r: self.failures[r].timestamp)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim: str = "=", section_delim: str = "-") -> str:
        """A report of the failures, root cause first."""
        root, _ = self.get_first_failure()
        parts = [f"{self.name} FAILED", section_delim * 40, "Root Cause (first observed "
                 "failure):"]
        order = [root] + [r for r in self.failures if r != root]
        for i, rank in enumerate(order):
            if i == 1:
                parts += [section_delim * 40, "Other Failures:"]
            f = self.failures[rank]
            parts.append(f"[{i}]:\n  time      : {f.timestamp_isoformat()}\n  rank      : "
                         f"{rank} (local_rank: {f.local_rank})\n  exitcode  : {f.exitcode} "
                         f"(pid: {f.pid})\n  error_file: {f.error_file}\n  traceback : "
                         f"{f.message}")
        line = boarder_delim * 40
        return "\n".join([line, *parts, line])


def record(fn=None, error_handler: ErrorHandler | None = None):
    """Decorate a worker's main function: an exception that escapes it is written to the
    error file ``torcia-run`` reads (``TORCHELASTIC_ERROR_FILE``), then raised again.
    ``SystemExit(0)`` ends the function quietly.

    Examples
    --------
    >>> from torcia.distributed.elastic.multiprocessing.errors import record
    >>> @record
    ... def main():
    ...     return "trained"
    >>> main()
    'trained'
    """
    if fn is None:
        return functools.partial(record, error_handler=error_handler)
    handler = error_handler or get_error_handler()

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        handler.initialize()
        try:
            return fn(*args, **kwargs)
        except SystemExit as exc:
            if exc.code in (0, None):
                return None
            raise
        except ChildFailedError as exc:
            _, failure = exc.get_first_failure()
            if os.path.isfile(failure.error_file):
                handler.dump_error_file(failure.error_file, failure.exitcode)
            raise
        except Exception as exc:
            handler.record_exception(exc)
            raise

    return wrapper
