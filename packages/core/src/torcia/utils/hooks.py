"""Handles for registered hooks, as ``torch.utils.hooks``."""

from __future__ import annotations

import itertools

__all__ = ["RemovableHandle"]

_ids = itertools.count()


class RemovableHandle:
    """What every ``register_*_hook`` returns: ``remove()`` takes the hook out again.

    ``hooks_dict`` holds the hook under this handle's ``id`` (PyTorch's convention); a
    list holding the hook itself works too when ``hook`` is given. ``extra_dict`` names
    further dicts or sets keyed by the same id (per-hook flags) to clean up with it.
    Removing twice does nothing; as a context manager the hook is removed on exit.

    Examples
    --------
    >>> from torcia.utils.hooks import RemovableHandle
    >>> hooks = {}
    >>> handle = RemovableHandle(hooks)
    >>> hooks[handle.id] = print
    >>> handle.remove()
    >>> hooks
    {}
    """

    def __init__(self, hooks_dict, *, extra_dict=None, hook=None):
        self.hooks_dict_ref = hooks_dict
        self.id = next(_ids)
        self._hook = hook
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, (dict, set)):
            extra_dict = (extra_dict,)
        self.extra_dict_ref = tuple(extra_dict)

    def remove(self) -> None:
        holder = self.hooks_dict_ref
        if isinstance(holder, dict):
            holder.pop(self.id, None)
        else:
            try:
                holder.remove(self._hook)
            except ValueError:
                pass
        for extra in self.extra_dict_ref:
            if isinstance(extra, dict):
                extra.pop(self.id, None)
            else:
                extra.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
