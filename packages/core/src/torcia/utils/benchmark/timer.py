"""``Timer``: time a Python statement, as ``torch.utils.benchmark.Timer``."""

from __future__ import annotations

import enum
import textwrap
import timeit

import numpy as np

import torcia
from torcia.utils.benchmark import common
from torcia.utils.benchmark.callgrind import CopyIfCallgrind

__all__ = ["Language", "Timer", "timer"]

#: the clock: torcia's ops have finished when they return (the CPU's semantics, and CuPy
#: synchronises where a result is read), so the wall clock of the host is right
timer = timeit.default_timer


class Language(enum.Enum):
    """The language of a timed statement; torcia times Python.

    Examples
    --------
    >>> from torcia.utils.benchmark import Language
    >>> Language.PYTHON.value
    0
    """

    PYTHON = 0
    CPP = 1


class Timer:
    """Time ``stmt`` after running ``setup``, with ``globals`` as its namespace.

    Parameters
    ----------
    stmt : str
        The statement timed (dedented; a leading newline is dropped).
    setup : str
        Run once before the statement's timings.
    global_setup : str
        C++ only in PyTorch; must be empty.
    timer : callable
        The clock, :data:`timer` by default.
    globals : dict, optional
        The statement's namespace; ``torch`` and ``torcia`` name torcia unless given.
    label, sub_label, description, env : str, optional
        How :class:`~torcia.utils.benchmark.Compare` groups and names the measurement:
        tables by ``label``, rows by ``sub_label``, columns by ``description``.
    num_threads : int, default 1
        ``torcia.set_num_threads`` while timing.
    language : Language or str
        ``"python"``; C++ statements (PyTorch's JIT-compiled ones) are refused.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.benchmark import Timer
    >>> t = Timer("x.sum()", setup="x = torcia.ones(8)", label="sum")
    >>> m = t.blocked_autorange(min_run_time=0.01)
    >>> m.label, m.median > 0, m.number_per_run >= 1
    ('sum', True, True)
    """

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timer, globals=None,
                 label=None, sub_label=None, description=None, env=None, num_threads=1,
                 language=Language.PYTHON):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise ValueError("C++ statements are not supported: PyTorch times them through "
                             "its C++ JIT, which torcia does not have; time Python code")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely "
                             "this code can simply be moved to `setup`.")
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", torcia)
        self._globals.setdefault("torcia", torcia)
        stmt, setup = _clean(stmt), _clean(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer,
                                   globals=CopyIfCallgrind.unwrap_all(self._globals))
        self._task_spec = common.TaskSpec(
            stmt=stmt, setup=setup, global_setup=global_setup, label=label,
            sub_label=sub_label, description=description, env=env, num_threads=num_threads)

    def _timeit(self, number: int) -> float:
        # a zero time would make the overhead ratio and the rates infinite
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> common.Measurement:
        """Run the statement ``number`` times (after a warm-up of ``number // 100``);
        one measurement of that block.

        Examples
        --------
        >>> from torcia.utils.benchmark import Timer
        >>> m = Timer("1 + 1").timeit(1000)
        >>> m.number_per_run, len(m.raw_times)
        (1000, 1)
        """
        with common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(max(int(number // 100), 2))
            return common.Measurement(number, [self._timeit(number)], self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        """Not offered, as in PyTorch: see :meth:`blocked_autorange`."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        """Not offered, as in PyTorch: see :meth:`blocked_autorange`."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _measurement_loop(self, number, stop_hook, min_run_time, max_run_time=None,
                          callback=None) -> list:
        total, can_stop, times = 0.0, False, []
        with common.set_torch_threads(self._task_spec.num_threads):
            while total < min_run_time or not can_stop:
                spent = self._timeit(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                can_stop = stop_hook(times)
                if max_run_time and total > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time: float) -> int:
        """The smallest power of ten of runs whose block time dwarfs the timer's own
        overhead (1e-4 of it) and lasts a thousandth of ``min_run_time``."""
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = float(np.median([self._timeit(0) for _ in range(5)]))
            number = 1
            while True:
                taken = self._timeit(number)
                if overhead / taken <= 1e-4 and taken >= min_run_time / 1000:
                    break
                if taken > min_run_time or number * 10 > 2147483647:
                    break
                number *= 10
        return number

    def blocked_autorange(self, callback=None, min_run_time=0.2) -> common.Measurement:
        """Pick a block size (:meth:`_estimate_block_size`), then time blocks until
        ``min_run_time`` seconds have passed; ``callback(number, seconds)`` sees each.

        Examples
        --------
        >>> from torcia.utils.benchmark import Timer
        >>> seen = []
        >>> m = Timer("sum(range(10))").blocked_autorange(
        ...     callback=lambda n, t: seen.append(n), min_run_time=0.01)
        >>> len(seen) == len(m.raw_times) >= 1
        True
        """
        number = self._estimate_block_size(min_run_time)
        times = self._measurement_loop(number, lambda times: True, min_run_time,
                                       callback=callback)
        return common.Measurement(number, times, self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None) -> common.Measurement:
        """Time blocks until their interquartile range is below ``threshold`` times the
        median (after at least four blocks and ``min_run_time`` seconds), or until
        ``max_run_time`` seconds.

        Examples
        --------
        >>> from torcia.utils.benchmark import Timer
        >>> m = Timer("sum(range(10))").adaptive_autorange(max_run_time=0.2)
        >>> len(m.raw_times) >= 4 or sum(m.raw_times) > 0.2
        True
        """
        number = self._estimate_block_size(min_run_time=0.05)

        def stop_hook(times):
            return len(times) > 3 and common.Measurement(
                number, times, self._task_spec).meets_confidence(threshold=threshold)

        times = self._measurement_loop(number, stop_hook, min_run_time, max_run_time,
                                       callback=callback)
        return common.Measurement(number, times, self._task_spec)

    def collect_callgrind(self, number=100, *, repeats=None, collect_baseline=True,
                          retain_out_file=False):
        """Instruction counts under Valgrind's Callgrind: PyTorch collects them through
        bindings compiled into its C++ core, which torcia does not have; always an error.

        Examples
        --------
        >>> from torcia.utils.benchmark import Timer
        >>> Timer("1 + 1").collect_callgrind()
        Traceback (most recent call last):
        ...
        RuntimeError: collect_callgrind needs PyTorch's Valgrind bindings ...
        """
        if repeats is not None and repeats < 1:
            raise ValueError("If specified, `repeats` must be >= 1")
        raise RuntimeError("collect_callgrind needs PyTorch's Valgrind bindings (compiled "
                           "into its C++ core), which torcia does not have; use "
                           "blocked_autorange or adaptive_autorange for wall-clock times")


def _clean(code: str) -> str:
    code = textwrap.dedent(code)
    return (code[1:] if code and code[0] == "\n" else code).rstrip()
