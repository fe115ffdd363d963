"""``torcia.backends.mha``: the fast-path switch of ``nn.MultiheadAttention``; torcia has
one path, so the flag is accepted and inert.

Examples
--------
>>> import torcia
>>> torcia.backends.mha.get_fastpath_enabled()
True
"""

_fastpath = [True]


def get_fastpath_enabled() -> bool:
    """Whether the fast path may be used.

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.mha.get_fastpath_enabled()
    True
    """
    return _fastpath[0]


def set_fastpath_enabled(value: bool) -> None:
    """Allow or forbid the fast path (inert).

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.mha.set_fastpath_enabled(False)
    >>> torcia.backends.mha.get_fastpath_enabled()
    False
    >>> torcia.backends.mha.set_fastpath_enabled(True)
    """
    _fastpath[0] = bool(value)
