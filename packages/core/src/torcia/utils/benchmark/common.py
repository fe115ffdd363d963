"""The task description (:class:`TaskSpec`), the result (:class:`Measurement`) and the
formatting helpers of :mod:`torcia.utils.benchmark`."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import textwrap

import numpy as np

import torcia

__all__ = ["Measurement", "TaskSpec", "ordered_unique", "select_unit", "set_torch_threads",
           "trim_sigfig", "unit_to_english"]

_MAX_SIGNIFICANT_FIGURES = 4
#: the narrowest confidence interval claimed: timer resolution is about this
_MIN_CONFIDENCE_INTERVAL = 25e-9
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(frozen=True, repr=False)
class TaskSpec:
    """What a :class:`~torcia.utils.benchmark.Timer` times (everything but its globals).

    Examples
    --------
    >>> from torcia.utils.benchmark import TaskSpec
    >>> TaskSpec("x + y", "pass", label="add", sub_label="float").title
    'add: float'
    """

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label (or the one-line statement), with the sub-label."""
        sub = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + sub
        if "\n" not in self.stmt:
            return self.stmt + sub
        return (f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n"
                f"{textwrap.indent(self.stmt, '  ')}")

    def setup_str(self) -> str:
        """The setup as shown in a summary (empty for none)."""
        if self.setup in ("pass", ""):
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """Title, description and setup, one per line."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(repr=False)
class Measurement:
    """The times of one statement: ``raw_times`` are the times of blocks of
    ``number_per_run`` runs each; :attr:`times` are per run. The fields of its
    :class:`TaskSpec` read as attributes (``m.label``, ``m.stmt``...).

    Examples
    --------
    >>> from torcia.utils.benchmark import Measurement, TaskSpec
    >>> m = Measurement(4, [4.0, 8.0, 12.0, 40.0], TaskSpec("f()", "pass"))
    >>> m.times
    [1.0, 2.0, 3.0, 10.0]
    >>> m.median, m.iqr
    (2.5, 3.0)
    """

    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict | None = None

    def __post_init__(self):
        self._sorted_times: tuple = ()
        self._warnings: tuple = ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name):
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    def __getstate__(self):
        return {k: getattr(self, k) for k in ("number_per_run", "raw_times", "task_spec",
                                              "metadata")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__post_init__()

    @property
    def times(self) -> list:
        """Seconds per run, one per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        self._lazy_init()
        return self._median

    @property
    def mean(self) -> float:
        self._lazy_init()
        return self._mean

    @property
    def iqr(self) -> float:
        """The interquartile range of :attr:`times` (linear interpolation)."""
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self) -> int:
        """How many figures of the median the spread of the middle half supports (1 to 4):
        a 90% confidence interval of the interquartile points, with z = 1.645."""
        self._lazy_init()
        n = len(self._sorted_times)
        middle = self._sorted_times[n // 4: math.ceil(3 * n / 4)]
        # in tensors of the default dtype, as PyTorch computes it (a boundary case rounds
        # the same way)
        std = torcia.tensor(middle).std(unbiased=False).item()
        sqrt_n = torcia.tensor(len(middle)).sqrt().item()
        interval = max(1.645 * std / sqrt_n, _MIN_CONFIDENCE_INTERVAL)
        figures = int(torcia.tensor(self._median / interval).log10().floor())
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        """Whether the spread is large (an interquartile range over 10% of the median)."""
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self) -> None:
        if self.raw_times and not self._sorted_times:
            self._sorted_times = tuple(sorted(self.times))
            values = np.array(self._sorted_times, dtype=np.float64)
            self._median = float(np.quantile(values, 0.5))
            self._mean = float(values.mean())
            self._p25 = float(np.quantile(values, 0.25))
            self._p75 = float(np.quantile(values, 0.75))
            for threshold, why in ((_IQR_GROSS_WARN_THRESHOLD,
                                    "This suggests significant environmental influence."),
                                   (_IQR_WARN_THRESHOLD, "This could indicate system "
                                                         "fluctuation.")):
                if not self.meets_confidence(threshold):
                    self._warnings += (
                        f"  WARNING: Interquartile range is "
                        f"{self.iqr / self.median * 100:.1f}% of the median measurement.\n"
                        f"           {why}",)
                    break

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """Whether the interquartile range is below ``threshold`` times the median."""
        return self.iqr / self.median < threshold

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> str:
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self) -> str:
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self) -> str:
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to "
                         f"{self._p75 / scale:.2f})")
        threads = self.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} "
                     f"thread{'s' if threads > 1 else ''}")
        lines.extend(self._warnings)
        return "\n".join(lines)

    @staticmethod
    def merge(measurements) -> list:
        """Replicates of one task (equal :class:`TaskSpec`) as one measurement of per-run
        times (``number_per_run=1``); metadata is dropped.

        Examples
        --------
        >>> from torcia.utils.benchmark import Measurement, TaskSpec
        >>> spec = TaskSpec("f()", "pass")
        >>> merged = Measurement.merge([Measurement(2, [4.0], spec), Measurement(1, [3.0], spec)])
        >>> len(merged), merged[0].times
        (1, [2.0, 3.0])
        """
        groups: dict = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].append(m)
        return [Measurement(1, [t for m in group for t in m.times], spec)
                for spec, group in groups.items()]


def select_unit(t: float) -> tuple:
    """The unit (and its scale in seconds) that shows ``t`` seconds with one to three
    integer digits.

    Examples
    --------
    >>> from torcia.utils.benchmark import select_unit
    >>> select_unit(3.2e-5), select_unit(2.0)
    (('us', 1e-06), ('s', 1))
    """
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(torcia.tensor(t).log10().item() // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def unit_to_english(u: str) -> str:
    """``"us"`` -> ``"microsecond"``.

    Examples
    --------
    >>> from torcia.utils.benchmark import unit_to_english
    >>> unit_to_english("ms")
    'millisecond'
    """
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures.

    Examples
    --------
    >>> from torcia.utils.benchmark import trim_sigfig
    >>> round(trim_sigfig(3.14159, 2), 6)
    3.1
    """
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = int(torcia.tensor(x).abs().log10().ceil().item())
    scale = 10 ** (magnitude - n)
    # in a tensor of the dtype torcia.tensor infers from x, as PyTorch computes it
    return float(torcia.tensor(x / scale).round() * scale)


def ordered_unique(elements) -> list:
    """The distinct elements in first-seen order.

    Examples
    --------
    >>> from torcia.utils.benchmark import ordered_unique
    >>> ordered_unique([3, 1, 3, 2, 1])
    [3, 1, 2]
    """
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n: int):
    """Run the body with ``torcia.set_num_threads(n)``, then restore the count.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.benchmark import set_torch_threads
    >>> before = torcia.get_num_threads()
    >>> with set_torch_threads(1):
    ...     torcia.get_num_threads()
    1
    >>> torcia.get_num_threads() == before
    True
    """
    prior = torcia.get_num_threads()
    try:
        torcia.set_num_threads(n)
        yield
    finally:
        torcia.set_num_threads(prior)
