"""How many threads the matrix products run on.

OpenBLAS splits every product above a small size over all its threads, whose hand-offs
spin until the other thread arrives. On a crowded machine, where other processes keep
cores busy, a descheduled BLAS thread stalls its partner for a scheduler slice per
hand-off, so mid-sized products cost tens of times their single-thread time (on the loaded
2-core machine, load average 7: a transformer's (1024, 128) @ (128, 128) projection 1.2 ms
on one thread, 31 ms on two). And its rounding depends on the thread count (a (128, 784) @
(784, 512) product differs on one and two threads), so a thread count chosen by the load
would make a model's steps differ from run to run.

The extension therefore never uses OpenBLAS's threads: from :data:`PANEL_WORK`
multiply-adds, :func:`split` cuts a product into panels for torcia's thread count
(``torcia.set_num_threads``), each a single-threaded GEMM, taken in turn by libgomp's
threads, which the plugin has spin only briefly before they sleep (``GOMP_SPINCOUNT``, see
``torcia_cpu/__init__.py``; blas.cpp's ``gemm_panels``). The panels, and with them every
result, depend on the shape and the thread count alone; the load only decides how many
threads run them: one while the machine is crowded (:func:`crowded`), below
:data:`CROWDED_WORK`. So do the extension's other parallel regions whose split the shape
alone fixes (elementwise ops, sums, softmaxes, norms' rows, optimizer steps: team.h), on
either library.

MKL's threads are libgomp's too, and sleep between products the same way (after their
brief spin), but its rounding depends on the thread count, so its products get torcia's
thread count from :data:`SLEEPING_WORK` whatever the load (:func:`worth_threads`). The
price of sleeping was a wake-up per product (measured before the spin, when they slept at
once): an LSTM layer's steps, a product of (32, 128) @ (128, 512) then the
cell's arithmetic on the calling thread, 32 times, ran 5x slower on two MKL threads than
on one on the loaded 2-core machine (59 against 12 ms a training step), so products below
:data:`SLEEPING_WORK` stay on one thread (the LSTM layer splits its steps itself).

NumPy's own OpenBLAS (products of other dtypes, and layouts the extension does not take)
keeps the spinning threads: it gets torcia's thread count from :data:`PARALLEL_WORK`, or
from :data:`CROWDED_WORK` while the machine is crowded. Where NumPy's BLAS is not an
OpenBLAS this module finds (another BLAS, another OS), or ``OPENBLAS_NUM_THREADS`` is set
(the user chose), :func:`wide` says no and BLAS keeps its own policy. The setting is
process-wide: NumPy products outside torcia run on one thread too once the plugin has
loaded.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
from contextlib import contextmanager

import torcia
from torcia_cpu import _native

#: Multiply-adds from which a product runs on torcia's thread count on threads that spin
#: while they wait (a 102^3 GEMM; an LSTM step's (32, 128) @ (128, 512): 56 -> 34 us on two
#: threads).
PARALLEL_WORK = 1 << 20
#: Multiply-adds from which a product runs on MKL's threads, which sleep between products,
#: on torcia's thread count (161^3: an MLP's (256, 128) @ (128, 128) layers and their
#: gradients' products are above, an LSTM cell step's (32, 128) @ (128, 512) below).
#: Measured in training steps at 2 threads: a product alone on two threads wins from 2^20
#: (a (128, 128) @ (128, 128) one: 43 -> 31 us), but a step pays a wake-up per product:
#: 2^22 is the smallest power of two whose products win there (4 layers of 128 on 256
#: rows: 1.29 -> 0.94 ms, PyTorch's 0.86), 2^21 loses (on 128 rows: 0.79 -> 0.91 ms; an
#: LSTM cell at 32 rows: 15.1 -> 18.3 ms).
SLEEPING_WORK = 1 << 22
#: Multiply-adds from which :func:`split` cuts an OpenBLAS product into panels for torcia's
#: thread count (203^3: from 2^22 the same MLP's steps took 1.27 -> 1.37 ms, panels and
#: all, where a product alone wins from 2^20).
PANEL_WORK = 1 << 23
#: The same on a crowded machine, where only long products amortise a stall (645^3).
CROWDED_WORK = 1 << 28
#: Cores that other processes may keep busy before torcia's threads count as crowded.
SPARE_CORES = 0.5
#: The shortest and longest spans (seconds) over which :func:`crowded` measures the load.
CHECK_SECONDS = (0.2, 1.0)
#: A pause (seconds) between two products longer than this (a training step's are
#: milliseconds apart) means this process was idle or busy elsewhere: the span being
#: measured restarts at the later product.
IDLE_SECONDS = 0.1
#: A crowded answer that no measured span has confirmed for this long (seconds) is
#: dropped: where every span is cut short by a pause (a benchmark's rounds, a loop whose
#: steps wait on data), the answer of the first span, taken while its siblings started
#: too, would otherwise stand for good.
STALE_SECONDS = 2.0

# the symbol's name depends on how OpenBLAS was built: plain, with 64-bit integers, or
# prefixed as in the wheels of NumPy and SciPy
_SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads")


def _find_setter():
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return None
    try:
        with open("/proc/self/maps") as maps:
            # NumPy's OpenBLAS; the extension's own (scipy_openblas32) stays on one thread
            paths = {line.split()[-1] for line in maps
                     if "openblas" in line.lower() and "scipy_openblas32" not in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = [ctypes.c_int], None
                return fn
    return None


_setter = _find_setter()


def set_threads(n: int) -> None:
    """Run BLAS products on ``n`` threads (a no-op without a known OpenBLAS)."""
    if _setter is not None:
        _setter(n)


def _busy_seconds():
    """CPU seconds all cores have spent busy since boot (steal included: another guest
    on our core is as bad as another process), or None where /proc/stat is missing."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


_load = {"checked": -math.inf, "crowded": False, "busy": None, "own": 0.0,
         "called": -math.inf, "measured": -math.inf}


def crowded() -> bool:
    """Whether other processes use the cores torcia's threads would run on.

    Measured from ``/proc/stat`` (elsewhere: the load average) over the time since the
    previous measurement, less this process's own CPU time, at most every
    :data:`CHECK_SECONDS` [0]. Only spans in which this process asked for products without
    a pause longer than :data:`IDLE_SECONDS` count: after a pause (this process was idle or
    busy elsewhere: the other child of a benchmark's alternating rounds then has the
    cores, PyTorch's threads spinning after their own round, even in a round of 0.25 s),
    and after a span longer than :data:`CHECK_SECONDS` [1], a new span starts and the last
    answer stands, unless it is a crowded one older than :data:`STALE_SECONDS`.
    """
    now = time.monotonic()
    paused = now - _load["called"] > IDLE_SECONDS
    _load["called"] = now
    elapsed = now - _load["checked"]
    if elapsed < CHECK_SECONDS[0] and not paused:
        return _load["crowded"]
    cores = os.cpu_count() or 1
    threads = torcia.get_num_threads()
    busy, own = _busy_seconds(), sum(os.times()[:2])
    if busy is None:
        _load["crowded"] = os.getloadavg()[0] > cores + SPARE_CORES
        _load["measured"] = now
    elif _load["busy"] is not None and elapsed <= CHECK_SECONDS[1] and not paused:
        others = ((busy - _load["busy"]) - (own - _load["own"])) / elapsed
        _load["crowded"] = others > cores - threads + SPARE_CORES
        _load["measured"] = now
    elif now - _load["measured"] > STALE_SECONDS:
        _load["crowded"] = False
    _load.update(checked=now, busy=busy, own=own)
    # the elementwise ops, sums, softmaxes, norms and optimizer steps too (team.h)
    _native.set_crowded(_load["crowded"])
    return _load["crowded"]


#: Rows below which a product's time is its (K, N) operand's reading, not its multiply-adds:
#: a decoding step's (1, 768) @ (768, 2304) projection reads 7 MB for 1.8M multiply-adds,
#: as long on one thread as 16 rows (0.23 ms), and halves on two (torch: 0.22 -> 0.12 ms).
MEMORY_ROWS = 16


def product_work(rows: int, k: int, n: int) -> int:
    """The multiply-adds :func:`worth_threads` and :func:`split` weigh a (rows, k) @ (k, n)
    product by: those of at least :data:`MEMORY_ROWS` rows, as long as reading the (k, n)
    operand takes."""
    return max(rows, MEMORY_ROWS) * k * n


def worth_threads(work: int, spins: bool = True) -> bool:
    """Whether a product of ``work`` multiply-adds is worth torcia's threads now, on a
    library whose threads spin while they wait for each other (``spins``: NumPy's
    OpenBLAS) or soon sleep (MKL on libgomp: decided by the size alone, never by the
    load)."""
    if torcia.get_num_threads() == 1 or work < PARALLEL_WORK:
        return False
    if not spins:
        crowded()  # measured for the regions of a fixed split alone (team.h)
        return work >= SLEEPING_WORK
    return work >= CROWDED_WORK or not crowded()


def split(work: int, spins: bool = False) -> tuple[int, int]:
    """``(threads, team)`` for a product of ``work`` multiply-adds cut into panels
    (blas.cpp's ``gemm_panels``): the thread count the panels are cut for, by the size
    alone, from :data:`PANEL_WORK` (:data:`PARALLEL_WORK` on threads that spin:
    ``spins``), and the threads that run them, one while the machine is crowded, so that
    the load never changes the result."""
    threads = torcia.get_num_threads()
    if threads == 1 or work < (PARALLEL_WORK if spins else PANEL_WORK):
        return 1, 1
    return threads, (threads if work >= CROWDED_WORK or not crowded() else 1)


def wide(a, b) -> bool:
    """Whether ``a @ b`` (NumPy matmul shapes) is worth BLAS's threads."""
    if _setter is None or a.ndim == 1 or b.ndim == 1:
        return False
    return worth_threads(max(a.size * b.shape[-1],
                             b.size * a.shape[-2] * math.prod(a.shape[:-2])))


@contextmanager
def parallel():
    """BLAS on torcia's thread count inside the block, on one thread after it."""
    _setter(torcia.get_num_threads())
    try:
        yield
    finally:
        _setter(1)
