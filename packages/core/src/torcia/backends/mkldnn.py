"""``torcia.backends.mkldnn``: accepted and inert; torcia does not use oneDNN.

Examples
--------
>>> import torcia
>>> torcia.backends.mkldnn.is_available()
False
"""

import contextlib

enabled = True
deterministic = False


def is_available() -> bool:
    """Whether oneDNN (MKLDNN) is used: never.

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.mkldnn.is_available()
    False
    """
    return False


@contextlib.contextmanager
def flags(enabled=False, deterministic=False):
    """Set ``enabled``/``deterministic`` for a ``with`` block (inert).

    Examples
    --------
    >>> import torcia
    >>> with torcia.backends.mkldnn.flags(enabled=False):
    ...     torcia.backends.mkldnn.enabled
    False
    """
    module = globals()
    saved = (module["enabled"], module["deterministic"])
    module.update(enabled=enabled, deterministic=deterministic)
    try:
        yield
    finally:
        module["enabled"], module["deterministic"] = saved
