"""Pattern vocabulary of fusion (``torch.ao.quantization.utils``): a pattern is a module
type or function, or a tuple of patterns naming a chain from its last op back to its
first, as graph-mode fusion writes it; :class:`MatchAllNode` matches any op there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

__all__ = ["MatchAllNode", "Pattern"]

Pattern = Union[Callable, tuple[Any, ...], Any]  # noqa: UP007 - a typing form, as PyTorch's


class MatchAllNode:
    """A pattern element that matches every op (in :func:`get_fuser_method_new`'s
    patterns)."""
