"""Leak checks shared by the worker tests: this process's children and its segments."""

import os
import time

import pytest

from torcia.data import _shm

# Helpers multiprocessing starts once and keeps for the life of the process (spawn and
# forkserver start them); they are not workers.
_HELPERS = (b"resource_tracker", b"forkserver")


def child_pids() -> set[int]:
    """Live (non-zombie) processes whose parent is this one, read from /proc, not counting
    multiprocessing's own helpers."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces: split after it
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == me and state != "Z" and not _is_helper(entry):
            found.add(int(entry))
    return found


def _is_helper(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return any(h in cmdline for h in _HELPERS)


def my_segments() -> list[str]:
    """This process's segments: named ones in /dev/shm (none should ever be there), and
    the anonymous ones it holds descriptors of."""
    prefix = f"tc{os.getpid()}_"
    found = _shm.leftovers(prefix)
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"/memfd:{prefix}"):
            found.append(target)
    return found


@pytest.fixture
def segments():
    """A function listing this process's shared-memory segments."""
    return my_segments


@pytest.fixture
def no_leaks():
    """Fail the test if it leaves a worker process or a shared-memory segment behind."""
    if not os.path.isdir("/proc") or not os.path.isdir(_shm.SHM_DIR):
        pytest.skip("leak checks read /proc and /dev/shm (Linux)")
    before = child_pids()
    yield
    deadline = time.monotonic() + 5
    while (child_pids() - before or my_segments()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids() - before == set(), "worker processes left running"
    assert my_segments() == [], "shared-memory segments left in /dev/shm"
