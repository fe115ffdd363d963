"""Handles for registered hooks, as ``torch.utils.hooks``."""

from __future__ import annotations

import itertools
import warnings

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]

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
        elif isinstance(holder, list):
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


def unserializable_hook(f):
    """Mark a tensor hook as one not to be saved: :func:`warn_if_has_hooks` keeps quiet
    about it.

    Examples
    --------
    >>> from torcia.utils.hooks import unserializable_hook
    >>> @unserializable_hook
    ... def hook(grad):
    ...     return grad
    >>> hook.__torch_unserializable__
    True
    """
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor) -> None:
    """Warn about each backward hook of ``tensor`` that saving it would lose (hooks are not
    serialized), unless marked with :func:`unserializable_hook`.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> from torcia.utils.hooks import warn_if_has_hooks
    >>> t = torcia.ones(1, requires_grad=True)
    >>> _ = t.register_hook(lambda g: g)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_has_hooks(t)
    >>> "will not be serialized" in str(caught[0].message)
    True
    """
    meta = getattr(tensor, "_hooks", None)
    for hook in list(getattr(meta, "hooks", None) or ()):
        if not getattr(hook, "__torch_unserializable__", False):
            warnings.warn(f"backward hook {hook!r} on tensor will not be serialized.  If this "
                          "is expected, you can decorate the function with "
                          "@torch.utils.hooks.unserializable_hook to suppress this warning",
                          stacklevel=2)

