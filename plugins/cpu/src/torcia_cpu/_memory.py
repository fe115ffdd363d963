"""How glibc's malloc hands large buffers back to the system, and where NumPy puts arrays.

A training step allocates the same large arrays every step (im2col columns, activations,
their gradients). By default glibc serves each from a fresh ``mmap`` and unmaps it when
freed, so every step pays a page fault per 4 KiB page it writes (in a virtual machine,
several microseconds each): measured 56-67 ms against 38-47 ms for the CNN benchmark
step. The plugin raises the size from which malloc maps memory to its maximum (32 MiB)
and keeps up to :data:`KEEP_FREED` bytes of freed memory in the heap, so that the next
step reuses pages already mapped, as a caching allocator does; the process's resident
memory stays at its high-water mark instead of shrinking between steps.

Nothing is changed where the C library is not glibc, or where the user tuned malloc
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES``).

Reused heap blocks of one size lie 16 bytes apart modulo the 4 KiB page, where a kernel's
loads wait on its stores (``csrc/memory.cpp`` says why):
:func:`align_arrays` has NumPy start the data of every array of 64 KiB or more on a page.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np

from torcia_cpu import _native

#: Bytes of freed memory the heap keeps before returning any to the system.
KEEP_FREED = 256 << 20
#: glibc's largest allowed mmap threshold on 64-bit systems.
MMAP_THRESHOLD = 32 << 20

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def _glibc():
    """The C library when it is glibc (it alone has ``gnu_get_libc_version``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc


def keep_freed_memory(libc=None) -> bool:
    """Tune malloc as the module docstring says; True when it was changed."""
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    libc = libc if libc is not None else _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, KEEP_FREED))


def align_arrays() -> None:
    """Have NumPy allocate the data of arrays made from now on in this thread's context
    (``numpy._core.multiarray.get_handler_name()`` names it) with the plugin's page-aligning
    allocator; arrays of 4 MiB or more are advised into huge pages as NumPy's own allocator
    does, unless NumPy's ``_set_madvise_hugepage(False)`` turned that off."""
    huge_pages = getattr(np._core.multiarray, "_get_madvise_hugepage", lambda: True)()
    _native.use_page_aligned_arrays(huge_pages=bool(huge_pages))
