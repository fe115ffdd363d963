"""The safe-globals allowlist ``load(weights_only=True)`` consults beyond its own."""

from __future__ import annotations

import contextlib
import threading

from torcia._switches import Switches

_user_globals: dict[str, object] = {}
_user_lock = threading.Lock()


class _Scoped(Switches):
    stack = ()  # the allowlists of the safe_globals blocks entered, innermost last


_SCOPED = _Scoped()


def _global_name(entry) -> tuple[str, object]:
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError("a safe global given as a tuple must be (object, "
                            "'module.qualified_name')")
        return entry[1], entry[0]
    module = getattr(entry, "__module__", None)
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None)
    if module is None or name is None:
        raise TypeError(f"{entry!r} has no __module__ and __qualname__; pass it as "
                        "(object, 'module.qualified_name')")
    return f"{module}.{name}", entry


def add_safe_globals(safe_globals: list) -> None:
    """Allow :func:`load` with ``weights_only=True`` to use these classes and functions.

    Parameters
    ----------
    safe_globals : list
        Classes or functions, or ``(object, "module.qualified_name")`` tuples for objects
        pickled under another name. Only add what you trust: unpickling calls them with
        arguments taken from the file.

    Examples
    --------
    >>> import io, fractions, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save({"ratio": fractions.Fraction(1, 3)}, buf)
    >>> torcia.serialization.add_safe_globals([fractions.Fraction])
    >>> _ = buf.seek(0)
    >>> torcia.load(buf)
    {'ratio': Fraction(1, 3)}
    >>> torcia.serialization.clear_safe_globals()
    """
    entries = [_global_name(g) for g in safe_globals]
    with _user_lock:
        _user_globals.update(entries)


def get_safe_globals() -> list:
    """The objects added with :func:`add_safe_globals` (not those of :func:`safe_globals`).

    Examples
    --------
    >>> import collections, torcia
    >>> torcia.serialization.add_safe_globals([collections.deque])
    >>> torcia.serialization.get_safe_globals()
    [<class 'collections.deque'>]
    >>> torcia.serialization.clear_safe_globals()
    """
    with _user_lock:
        return list(_user_globals.values())


def clear_safe_globals() -> None:
    """Forget every object added with :func:`add_safe_globals`.

    Examples
    --------
    >>> import collections, torcia
    >>> torcia.serialization.add_safe_globals([collections.deque])
    >>> torcia.serialization.clear_safe_globals()
    >>> torcia.serialization.get_safe_globals()
    []
    """
    with _user_lock:
        _user_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list):
    """Allow these globals in :func:`load` while the ``with`` block runs (in this thread).

    Examples
    --------
    >>> import collections, io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save(collections.deque([1, 2]), buf)
    >>> _ = buf.seek(0)
    >>> with torcia.serialization.safe_globals([collections.deque]):
    ...     torcia.load(buf)
    deque([1, 2])
    """
    entries = dict(_global_name(g) for g in safe_globals)
    with _SCOPED.switched(stack=_SCOPED.stack + (entries,)):
        yield


def _allowed_by_user(full_name: str):
    for entries in reversed(_SCOPED.stack):
        if full_name in entries:
            return entries[full_name]
    with _user_lock:
        return _user_globals.get(full_name)
