"""``Compare``: many measurements as tables, as ``torch.utils.benchmark.Compare``.

One table per ``label``; rows are ``(num_threads, env, sub_label or stmt)`` (a rule line
opens each thread count), columns are ``description``; each cell is the median in the
table's unit. Replicates (equal task specs) are merged first.
"""

from __future__ import annotations

import collections
import enum
import itertools
import math

from torcia.utils.benchmark import common

__all__ = ["Colorize", "Compare"]

BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"


class Colorize(enum.Enum):
    """How :meth:`Compare.colorize` marks the fast and slow cells.

    Examples
    --------
    >>> from torcia.utils.benchmark import Colorize
    >>> Colorize("rowwise")
    <Colorize.ROWWISE: 'rowwise'>
    """

    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _leading_digits(value: float) -> int:
    return math.ceil(math.log10(value))


class _Column:
    """One description's cells, formatted to a common width and number of decimals."""

    def __init__(self, grouped, scale, trim, highlight):
        self.grouped = grouped
        flat = [r for r in itertools.chain.from_iterable(grouped) if r is not None]
        self.trim = trim
        self.highlight = highlight and any(r.has_warnings for r in flat)
        digits = [_leading_digits(r.median / scale) for r in flat]
        decimals = min(max(r.significant_figures - d, 0) for d, r in zip(digits, flat)) \
            if trim else 1
        length = max(digits) + decimals + (1 if decimals else 0)
        self.template = f"{{:>{length}.{decimals}f}}{{:>{7 if self.highlight else 0}}}"

    def num_to_str(self, value, figures, spread):
        if value is None:
            return " " * len(self.num_to_str(1, figures, None))
        if self.trim:
            value = common.trim_sigfig(value, figures)
        return self.template.format(
            value, f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else "")


def _color(segment, value, best):
    if value <= best * 1.01 or value <= best + 100e-9:
        return BEST + BOLD + segment + TERMINATE * 2
    if value <= best * 1.1:
        return GOOD + BOLD + segment + TERMINATE * 2
    if value >= best * 5:
        return VERY_BAD + BOLD + segment + TERMINATE * 2
    if value >= best * 2:
        return BAD + segment + TERMINATE * 2
    return segment


class _Table:
    def __init__(self, results, colorize, trim, highlight):
        self.results = results
        self.colorize, self.highlight = colorize, highlight
        self.label = results[0].label
        self.unit, self.scale = common.select_unit(min(r.median for r in results))
        self.row_keys = common.ordered_unique(self._row_key(r) for r in results)
        # thread counts and envs in order, statements as they came
        self.row_keys.sort(key=lambda k: k[:2])
        self.col_keys = common.ordered_unique(r.description for r in results)
        where = {k: i for i, k in enumerate(self.row_keys)}
        col = {k: j for j, k in enumerate(self.col_keys)}
        self.cells = [[None] * len(self.col_keys) for _ in self.row_keys]
        for r in results:
            self.cells[where[self._row_key(r)]][col[r.description]] = r
        # rows grouped by thread count, for the columns' widths and the colouring
        self.groups, self.group_of = [], []
        prior = None
        for key, row in zip(self.row_keys, self.cells):
            if key[0] != prior:
                prior = key[0]
                self.groups.append([])
            self.groups[-1].append(row)
            self.group_of.append(len(self.groups) - 1)
        self.columns = [_Column([tuple(row[j] for row in g) for g in self.groups], self.scale,
                                trim, highlight) for j in range(len(self.col_keys))]

    @staticmethod
    def _row_key(m):
        return m.num_threads, m.env, m.as_row_name

    def _row_strings(self, i):
        envs = {r.env for r in self.results}
        show_env = len(envs) > 1
        env_width = max(len(e) for e in envs) if show_env else 0
        row = self.cells[i]
        first = next(r for r in row if r is not None)
        new_env = show_env and (i == 0 or self.row_keys[i - 1][1] != self.row_keys[i][1]
                                or self.row_keys[i - 1][0] != self.row_keys[i][0])
        env = (f"({first.env})" if new_env else "").ljust(env_width + 4)
        out = ["  " + env + first.as_row_name]
        for m, column in zip(row, self.columns):
            if m is None:
                out.append(column.num_to_str(None, 1, None))
            else:
                out.append(column.num_to_str(m.median / self.scale, m.significant_figures,
                                             m.iqr / m.median if m.has_warnings else None))
        return out

    def render(self) -> str:
        strings = [[""] + [str(k) if k is not None else "" for k in self.col_keys]]
        strings += [self._row_strings(i) for i in range(len(self.row_keys))]
        widths = [max(len(s) for s in col) for col in zip(*strings)]
        lines = ["  |  ".join(s.center(w) for s, w in zip(strings[0], widths))]
        overall = len(lines[0])
        for i, row_strings in enumerate(strings[1:]):
            threads = self.row_keys[i][0]
            if i == 0 or self.row_keys[i - 1][0] != threads:
                lines.append(f"{threads} threads: ".ljust(overall, "-"))
            lines.append("  |  ".join(self._finalize(i, row_strings, widths)))
        warned = self.highlight and any(r.has_warnings for r in self.results)
        title = (" " + (self.label or "") + " ").center(overall - 2, "-")
        note = ("(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n"
                if warned else "")
        return (f"[{title}]\n" + "\n".join(lines) + "\n\nTimes are in "
                f"{common.unit_to_english(self.unit)}s ({self.unit}).\n{note}")

    def _finalize(self, i, row_strings, widths):
        row = self.cells[i]
        if self.colorize is Colorize.ROWWISE:
            best = [min(r.median for r in row if r is not None)] * len(row)
        elif self.colorize is Colorize.COLUMNWISE:
            best = [min((r.median for r in col.grouped[self.group_of[i]] if r is not None),
                        default=None) for col in self.columns]
        else:
            best = [None] * len(row)
        out = [row_strings[0].ljust(widths[0])]
        for text, width, m, b in zip(row_strings[1:], widths[1:], row, best):
            text = text.center(width)
            if m is not None and b is not None:
                text = _color(text, m.median, b)
            out.append(text)
        return out


class Compare:
    """A table of measurements: one per ``label``, rows by ``sub_label`` (and thread
    count, env), columns by ``description``, medians in one unit a table.

    Examples
    --------
    >>> from torcia.utils.benchmark import Compare, Measurement, TaskSpec
    >>> spec = lambda sub, desc: TaskSpec("f()", "pass", label="add", sub_label=sub,
    ...                                   description=desc)
    >>> results = [Measurement(1, [t * 1e-6] * 4, spec(sub, desc))
    ...            for sub, desc, t in [("small", "float", 2.5), ("small", "int", 2.0),
    ...                                 ("large", "float", 12.0), ("large", "int", 8.0)]]
    >>> print(Compare(results))
    [----------- add -----------]
                 |  float  |  int
    1 threads: ------------------
          small  |    2.5  |  2.0
          large  |   12.0  |  8.0
    <BLANKLINE>
    Times are in microseconds (us).
    <BLANKLINE>
    """

    def __init__(self, results):
        self._results = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self) -> str:
        return "\n".join(self._render())

    def extend_results(self, results) -> None:
        """Add measurements."""
        for r in results:
            if not isinstance(r, common.Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} "
                                 "instead.")
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        """Show only the figures each measurement's spread supports."""
        self._trim_significant_figures = True

    def colorize(self, rowwise=False) -> None:
        """Colour cells by their time relative to the best of their column (or row)."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        """Mark the measurements whose spread is large with ``(! XX%)``."""
        self._highlight_warnings = True

    def print(self) -> None:
        print(str(self))

    def _render(self) -> list:
        by_label = collections.defaultdict(list)
        for r in common.Measurement.merge(self._results):
            by_label[r.label].append(r)
        return [_Table(group, self._colorize, self._trim_significant_figures,
                       self._highlight_warnings).render() for group in by_label.values()]
