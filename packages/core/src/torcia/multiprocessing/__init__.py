"""torcia.multiprocessing: Python's :mod:`multiprocessing`, with tensors that travel through
shared memory, and :func:`spawn` to run one function in N processes, as
``torch.multiprocessing``.

Everything of the standard module is here under the same names (``Process``, ``Queue``,
``Pool``, ``get_context``, ``set_start_method``...). Importing this module registers a
reduction with multiprocessing's pickler, so that a CPU tensor put on a queue, sent
through a pipe, given to a pool or passed as an argument to a new process moves into
shared memory (``share_memory_()``) and the receiver sees the same memory, not a copy.
Processes started by :func:`spawn` and :func:`start_processes` are watched as one job:
the first failure ends the others and is raised in the parent with the child's traceback
(:class:`ProcessRaisedException`).

Examples
--------
>>> import torcia, torcia.multiprocessing as mp
>>> def double(t):
...     t.mul_(2)           # writes the memory the parent sees
>>> x = torcia.ones(3)
>>> p = mp.get_context("fork").Process(target=double, args=(x,))
>>> x.share_memory_() is x
True
>>> p.start(); p.join()
>>> x
tensor([2., 2., 2.])
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from torcia.multiprocessing import _reductions as reductions
from torcia.multiprocessing.spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)

__all__ = ["get_all_sharing_strategies", "get_sharing_strategy",
           "set_sharing_strategy"] + list(multiprocessing.__all__)

# the names torch.multiprocessing has outside its __all__
__all__ += ["ProcessContext", "ProcessException", "ProcessExitedException",
            "ProcessRaisedException", "SpawnContext", "spawn", "start_processes"]

_strategy = ["file_descriptor"]


def set_sharing_strategy(new_strategy: str) -> None:
    """Choose how tensors are shared between processes. torcia shares by passing the file
    descriptor of an anonymous shared-memory file ("file_descriptor"), which leaves
    nothing to clean up when a process dies; it is the only strategy.

    Examples
    --------
    >>> import torcia.multiprocessing as mp
    >>> mp.set_sharing_strategy("file_descriptor")
    >>> mp.get_sharing_strategy()
    'file_descriptor'
    """
    if new_strategy not in reductions.STRATEGIES:
        raise ValueError(f"unknown sharing strategy {new_strategy!r}; torcia has "
                         f"{sorted(reductions.STRATEGIES)}")
    _strategy[0] = new_strategy


def get_sharing_strategy() -> str:
    """The strategy tensors are shared with (see :func:`set_sharing_strategy`).

    Examples
    --------
    >>> import torcia.multiprocessing as mp
    >>> mp.get_sharing_strategy()
    'file_descriptor'
    """
    return _strategy[0]


def get_all_sharing_strategies() -> set:
    """The strategies :func:`set_sharing_strategy` accepts.

    Examples
    --------
    >>> import torcia.multiprocessing as mp
    >>> mp.get_all_sharing_strategies()
    {'file_descriptor'}
    """
    return set(reductions.STRATEGIES)


reductions.init_reductions()
