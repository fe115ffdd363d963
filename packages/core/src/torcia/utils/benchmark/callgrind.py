"""The result types of ``Timer.collect_callgrind`` (PyTorch's Valgrind interface):
per-function instruction counts and their arithmetic. torcia cannot collect them (see
:meth:`~torcia.utils.benchmark.Timer.collect_callgrind`), but code that loads, compares
or filters them runs."""

from __future__ import annotations

import collections
import dataclasses
import operator
import re
from typing import NamedTuple

from torcia.utils.benchmark import common

__all__ = ["CallgrindStats", "CopyIfCallgrind", "FunctionCount", "FunctionCounts"]


class FunctionCount(NamedTuple):
    """Instructions counted in one function.

    Examples
    --------
    >>> from torcia.utils.benchmark import FunctionCount
    >>> FunctionCount(120, "Python/ceval.c:_PyEval_EvalFrameDefault")
    FunctionCount(count=120, function='Python/ceval.c:_PyEval_EvalFrameDefault')
    """

    count: int
    function: str


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class FunctionCounts:
    """Counts per function, largest first; ``inclusive`` counts include callees.
    ``+``/``-`` merge by function name, ``*`` scales, :meth:`filter` and :meth:`transform`
    select and rename.

    Examples
    --------
    >>> from torcia.utils.benchmark import FunctionCount, FunctionCounts
    >>> a = FunctionCounts((FunctionCount(5, "f"), FunctionCount(2, "g")), inclusive=False)
    >>> b = FunctionCounts((FunctionCount(1, "g"),), inclusive=False)
    >>> (a - b).sum(), [c.function for c in (a - b)]
    (6, ['f', 'g'])
    """

    _data: tuple
    inclusive: bool
    truncate_rows: bool = True
    _linewidth: int | None = None

    def __iter__(self):
        yield from self._data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, item):
        """A slice is a :class:`FunctionCounts`, an index one :class:`FunctionCount`
        (PyTorch 2.13 wraps the latter in a FunctionCounts too, since a FunctionCount
        is itself a tuple)."""
        data = self._data[item]
        if isinstance(item, slice):
            return FunctionCounts(data, self.inclusive, truncate_rows=False)
        return data

    def __repr__(self) -> str:
        width = max((len(str(c)) + int(c < 0) for c, _ in self), default=0)
        fn_width = max((self._linewidth or 80) - width - 4, 40)
        lines = []
        for c, fn in self:
            if len(fn) > fn_width:
                left = (fn_width - 5) // 2
                fn = fn[:left] + " ... " + fn[-(fn_width - left - 5):]
            lines.append(f"  {c:>{width}}  {fn}")
        if self.truncate_rows and len(lines) > 18:
            lines = lines[:9] + ["...".rjust(width + 2)] + lines[-9:]
        if not self.inclusive:
            lines += ["", f"Total: {self.sum()}"]
        return "\n".join([object.__repr__(self)] + lines)

    def __add__(self, other):
        return self._merge(other, lambda c: c)

    def __sub__(self, other):
        return self._merge(other, operator.neg)

    def __mul__(self, other):
        return self._from_dict({fn: int(c * other) for c, fn in self._data}, self.inclusive)

    def transform(self, map_fn):
        """Rename every function with ``map_fn``; counts of equal new names add up."""
        counts: dict = collections.defaultdict(int)
        for c, fn in self._data:
            counts[map_fn(fn)] += c
        return self._from_dict(counts, self.inclusive)

    def filter(self, filter_fn):
        """The functions whose name ``filter_fn`` accepts."""
        return FunctionCounts(tuple(i for i in self if filter_fn(i.function)), self.inclusive)

    def sum(self) -> int:
        return sum(c for c, _ in self)

    def denoise(self):
        """Without CPython's dictionary lookups, whose counts vary from run to run."""
        return self.filter(lambda fn: "dictobject.c:lookdict_unicode" not in fn)

    def _merge(self, second, merge_fn):
        if self.inclusive != second.inclusive:
            raise AssertionError("Cannot merge inclusive and exclusive counts.")
        counts: dict = collections.defaultdict(int)
        for c, fn in self:
            counts[fn] += c
        for c, fn in second:
            counts[fn] += merge_fn(c)
        return self._from_dict(counts, self.inclusive)

    @staticmethod
    def _from_dict(counts, inclusive):
        flat = (FunctionCount(c, fn) for fn, c in counts.items() if c)
        return FunctionCounts(tuple(sorted(flat, reverse=True)), inclusive)


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class CallgrindStats:
    """The counts of a statement and of an empty baseline, inclusive and exclusive.

    Examples
    --------
    >>> from torcia.utils.benchmark import (CallgrindStats, FunctionCount, FunctionCounts,
    ...                                     TaskSpec)
    >>> counts = FunctionCounts((FunctionCount(7, "/src/Python/ceval.c:f [lib.so]"),), False)
    >>> stats = CallgrindStats(TaskSpec("f()", "pass"), 1, True, counts, counts, counts,
    ...                        counts, None)
    >>> stats.counts(), stats.as_standardized().stats()[0].function
    (7, 'Python/ceval.c:f')
    """

    task_spec: common.TaskSpec
    number_per_run: int
    built_with_debug_symbols: bool
    baseline_inclusive_stats: FunctionCounts
    baseline_exclusive_stats: FunctionCounts
    stmt_inclusive_stats: FunctionCounts
    stmt_exclusive_stats: FunctionCounts
    stmt_callgrind_out: str | None

    def __repr__(self) -> str:
        return (f"{object.__repr__(self)}\n{self.task_spec.summarize()}\n"
                f"  {self.counts():>12}{'':>4}{self.counts(denoise=True):>12} "
                f"(denoised instructions)\n"
                f"  {self.number_per_run} run{'s' if self.number_per_run > 1 else ''} per "
                "measurement")

    def stats(self, inclusive: bool = False) -> FunctionCounts:
        """The statement's counts per function."""
        return self.stmt_inclusive_stats if inclusive else self.stmt_exclusive_stats

    def counts(self, *, denoise: bool = False) -> int:
        """The statement's total instruction count."""
        stats = self.stmt_exclusive_stats
        return (stats.denoise() if denoise else stats).sum()

    def delta(self, other, inclusive: bool = False) -> FunctionCounts:
        """These counts minus ``other``'s, per function."""
        return self.stats(inclusive=inclusive) - other.stats(inclusive=inclusive)

    def as_standardized(self):
        """The counts with build paths and library names stripped from function names,
        so that those of different builds compare."""
        patterns = ((r"^.+build/\.\./", "build/../"), (r"^.+/build/aten/", "build/aten/"),
                    (r"^.+/Python/", "Python/"), (r"^.+/Objects/", "Objects/"),
                    (r"\s\[.+\]$", ""))

        def strip(stats):
            for before, after in patterns:
                stats = stats.transform(lambda fn, b=before, a=after: re.sub(b, a, fn))
            return stats

        return CallgrindStats(
            self.task_spec, self.number_per_run, self.built_with_debug_symbols,
            strip(self.baseline_inclusive_stats), strip(self.baseline_exclusive_stats),
            strip(self.stmt_inclusive_stats), strip(self.stmt_exclusive_stats), None)


class CopyIfCallgrind:
    """A global of a :class:`~torcia.utils.benchmark.Timer` that a Callgrind run would
    copy into its subprocess; elsewhere it stands for ``value``.

    Examples
    --------
    >>> from torcia.utils.benchmark import CopyIfCallgrind
    >>> CopyIfCallgrind.unwrap_all({"n": CopyIfCallgrind(3), "m": 4})
    {'n': 3, 'm': 4}
    """

    def __init__(self, value, *, setup=None):
        self._value = value
        self._setup = setup

    @property
    def value(self):
        return self._value

    @property
    def setup(self):
        return self._setup

    @staticmethod
    def unwrap_all(globals: dict) -> dict:
        return {k: v.value if isinstance(v, CopyIfCallgrind) else v for k, v in globals.items()}
