"""How many threads NumPy's BLAS (OpenBLAS) runs a matrix product on.

OpenBLAS splits every product above a small size over all its threads, whose hand-offs
spin until the other thread arrives. When the machine has more runnable threads than
cores, a descheduled BLAS thread stalls its partner for a scheduler slice per hand-off, so
the mid-sized products of a training step (an MLP layer, a transformer's projections)
cost tens of times their single-thread time. The plugin therefore keeps BLAS on one
thread and gives torcia's thread count (``torcia.set_num_threads``) only to products of
at least :data:`PARALLEL_WORK` multiply-adds, whose work per hand-off is large.

Where NumPy's BLAS is not an OpenBLAS this module finds (another BLAS, another OS), or
``OPENBLAS_NUM_THREADS`` is set (the user chose), the functions do nothing and BLAS keeps
its own policy. The setting is process-wide: NumPy products outside torcia run on one
thread too once the plugin has loaded.
"""

from __future__ import annotations

import ctypes
import math
import os
from contextlib import contextmanager

import torcia

#: Multiply-adds from which a product runs on torcia's thread count (a 645^3 GEMM).
PARALLEL_WORK = 1 << 28

# the symbol's name depends on how OpenBLAS was built: plain, with 64-bit integers, or
# prefixed as in the wheels of NumPy and SciPy
_SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads")


def _find_setter():
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return None
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
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


def wide(a, b) -> bool:
    """Whether ``a @ b`` (NumPy matmul shapes) is worth BLAS's threads."""
    if _setter is None or torcia.get_num_threads() == 1:
        return False
    if a.ndim == 1 or b.ndim == 1:
        return False
    work = max(a.size * b.shape[-1], b.size * a.shape[-2] * math.prod(a.shape[:-2]))
    return work >= PARALLEL_WORK


@contextmanager
def parallel():
    """BLAS on torcia's thread count inside the block, on one thread after it."""
    _setter(torcia.get_num_threads())
    try:
        yield
    finally:
        _setter(1)
