"""Timing code the way ``torch.utils.benchmark`` does.

:class:`Timer` times a Python statement (``stmt``, after ``setup``, in ``globals``):
:meth:`Timer.timeit` runs it a fixed number of times, :meth:`Timer.blocked_autorange`
picks a block size and runs blocks for at least ``min_run_time`` seconds, and
:meth:`Timer.adaptive_autorange` runs until the spread of the blocks is small. Each returns a
:class:`Measurement` (per-run times, their median, mean and interquartile range, and a
warning when the spread is large); :class:`Compare` lays many measurements out as a table,
rows by ``sub_label``, columns by ``description``, one table per ``label``. :class:`Fuzzer`
draws random parameters and tensors (:class:`FuzzedParameter`, :class:`FuzzedTensor`,
:class:`FuzzedSparseTensor`) to benchmark over.

Instruction counting (``Timer.collect_callgrind``) needs PyTorch's Valgrind bindings, which
torcia does not have; its result types (:class:`CallgrindStats`, :class:`FunctionCounts`)
are here for code that handles them.

Examples
--------
>>> import torcia
>>> from torcia.utils.benchmark import Timer, Compare
>>> x = torcia.ones(16, 16)
>>> results = []
>>> for name, stmt in (("matmul", "x @ x"), ("add", "x + x")):
...     t = Timer(stmt, globals={"x": x}, label="ops", sub_label=name, description="16x16")
...     results.append(t.timeit(100))
>>> results[0].number_per_run, len(results[0].times)
(100, 1)
>>> print(Compare(results))  # doctest: +SKIP
[----- ops ------]
          |  16x16
1 threads: -------
      matmul  |   2.1
      add     |   1.2
<BLANKLINE>
Times are in microseconds (us).
"""

from torcia.utils.benchmark.callgrind import (
    CallgrindStats,
    CopyIfCallgrind,
    FunctionCount,
    FunctionCounts,
)
from torcia.utils.benchmark.common import (
    Measurement,
    TaskSpec,
    ordered_unique,
    select_unit,
    set_torch_threads,
    trim_sigfig,
    unit_to_english,
)
from torcia.utils.benchmark.compare import Colorize, Compare
from torcia.utils.benchmark.fuzzer import (
    FuzzedParameter,
    FuzzedSparseTensor,
    FuzzedTensor,
    Fuzzer,
    ParameterAlias,
)
from torcia.utils.benchmark.timer import Language, Timer, timer

__all__ = [
    "CallgrindStats", "Colorize", "Compare", "CopyIfCallgrind", "FunctionCount",
    "FunctionCounts", "FuzzedParameter", "FuzzedSparseTensor", "FuzzedTensor", "Fuzzer",
    "Language", "Measurement", "ParameterAlias", "TaskSpec", "Timer", "ordered_unique",
    "select_unit", "set_torch_threads", "timer", "trim_sigfig", "unit_to_english",
]
