from torcia import backend

"""``torcia.backends.mps``: torcia has no Metal device, so both answers are False.

Examples
--------
>>> import torcia
>>> torcia.backends.mps.is_available(), torcia.backends.mps.is_built()
(False, False)
"""


def is_available() -> bool:
    """Whether an Apple MPS device can be used: no (no torcia plugin provides one).

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.mps.is_available()
    False
    """
    b = backend.backends.build().get("mps")
    return b is not None and bool(b.is_available())


def is_built() -> bool:
    """Whether an MPS device plugin is installed.

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.mps.is_built()
    False
    """
    return "mps" in backend.backends.build()
