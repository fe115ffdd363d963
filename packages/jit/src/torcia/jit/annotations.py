"""Type names TorchScript annotations use (``torch.jit.annotations``).

``BroadcastingList2[int]`` annotates an argument given either as one value or as a
sequence of two (a kernel size ``3`` or ``(3, 5)``); the rest are :mod:`typing`'s.

Examples
--------
>>> from torcia.jit.annotations import BroadcastingList2
>>> def pool(x, kernel_size: BroadcastingList2[int]):
...     return kernel_size
>>> pool(None, 3)
3
"""

from __future__ import annotations

# torch.jit.annotations re-exports typing's names
from typing import Any, Dict, List, Optional, Tuple  # noqa: UP035

__all__ = ["Any", "BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "Dict",
           "List", "Optional", "Tuple"]


class _BroadcastingList:
    """``BroadcastingListN[T]``: a ``T`` or a sequence of N of them."""

    def __init__(self, n: int):
        self.n = n

    def __getitem__(self, item):
        return item | tuple[(item,) * self.n] | list[item]

    def __repr__(self):
        return f"BroadcastingList{self.n}"


BroadcastingList1 = _BroadcastingList(1)
BroadcastingList2 = _BroadcastingList(2)
BroadcastingList3 = _BroadcastingList(3)
