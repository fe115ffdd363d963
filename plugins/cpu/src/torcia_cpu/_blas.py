"""How many threads the matrix products run on.

OpenBLAS splits every product above a small size over all its threads, whose hand-offs
spin until the other thread arrives. That pays on an idle machine for products of a
million multiply-adds up (an MLP layer, a transformer's projections, an LSTM step), and
costs little below. On a crowded machine, where other processes keep cores busy, a
descheduled BLAS thread stalls its partner for a scheduler slice per hand-off, so the same
mid-sized products cost tens of times their single-thread time. The plugin therefore keeps BLAS on
one thread and gives torcia's thread count (``torcia.set_num_threads``) to products of at
least :data:`PARALLEL_WORK` multiply-adds, or, on a library whose threads spin, of
:data:`CROWDED_WORK` while the machine is crowded: while other processes use more than
:data:`SPARE_CORES` of the cores torcia's threads would need (measured from ``/proc/stat``
at most once a second, less this process's own CPU time; elsewhere from the load average).

MKL's threads do not spin: they are libgomp's, which the plugin has wait passively
(``OMP_WAIT_POLICY``, see ``torcia_cpu/__init__.py``), so its products get torcia's
thread count from :data:`SLEEPING_WORK` whatever the load. The price of sleeping is a
wake-up per product: an LSTM layer's steps, a product of (32, 128) @ (128, 512) then the
cell's arithmetic on the calling thread, 32 times, ran 5x slower on two MKL threads than
on one on the loaded 2-core machine (59 against 12 ms a training step), so products
below :data:`SLEEPING_WORK` stay on one thread. That keeps a product's result
a function of its shape and the thread count alone: a (128, 784) @ (784, 512) product rounds
differently on one MKL thread and on two, so a load test would make an MLP's steps at
``set_num_threads(2)`` differ from run to run. (On the loaded 2-core machine, a Linear
128x784x512 forward and backward at 2 threads: MKL 4.2 ms, OpenBLAS 96 ms against its
6.1 ms kept on one thread.)

Where NumPy's BLAS is not an OpenBLAS this module finds (another BLAS, another OS), or
``OPENBLAS_NUM_THREADS`` is set (the user chose), the functions do nothing and BLAS keeps
its own policy. The setting is process-wide: NumPy products outside torcia run on one
thread too once the plugin has loaded.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
from contextlib import contextmanager

import torcia

#: Multiply-adds from which a product runs on torcia's thread count (a 102^3 GEMM; an
#: LSTM step's (32, 128) @ (128, 512): 56 -> 34 us on two threads).
PARALLEL_WORK = 1 << 20
#: Multiply-adds from which a product runs on torcia's thread count on a library whose
#: threads sleep between products (203^3: a transformer's (1024, 128) @ (128, 128)
#: projections are above, an LSTM step's products below).
SLEEPING_WORK = 1 << 23
#: The same on a crowded machine, where only long products amortise a stall (645^3).
CROWDED_WORK = 1 << 28
#: Cores that other processes may keep busy before torcia's threads count as crowded.
SPARE_CORES = 0.5

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


_load = {"checked": -math.inf, "crowded": False, "busy": None, "own": 0.0}


def crowded() -> bool:
    """Whether other processes use the cores torcia's threads would run on (checked at
    most once a second, over the time since the previous check)."""
    now = time.monotonic()
    elapsed = now - _load["checked"]
    if elapsed < 1.0:
        return _load["crowded"]
    cores = os.cpu_count() or 1
    threads = torcia.get_num_threads()
    busy, own = _busy_seconds(), sum(os.times()[:2])
    if busy is None:
        _load["crowded"] = os.getloadavg()[0] > cores + SPARE_CORES
    elif _load["busy"] is not None and elapsed < 10.0:
        others = ((busy - _load["busy"]) - (own - _load["own"])) / elapsed
        _load["crowded"] = others > cores - threads + SPARE_CORES
    _load.update(checked=now, busy=busy, own=own)
    return _load["crowded"]


def worth_threads(work: int, spins: bool = True) -> bool:
    """Whether a product of ``work`` multiply-adds is worth torcia's threads now, on a
    library whose threads spin while they wait for each other (``spins``: OpenBLAS) or
    sleep (MKL on passive libgomp: decided by the size alone, never by the load)."""
    if torcia.get_num_threads() == 1 or work < PARALLEL_WORK:
        return False
    if not spins:
        return work >= SLEEPING_WORK
    return work >= CROWDED_WORK or not crowded()


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
