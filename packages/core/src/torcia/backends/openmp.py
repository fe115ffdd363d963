"""``torcia.backends.openmp``: whether torcia-cpu's OpenMP kernels are installed.

Examples
--------
>>> import torcia
>>> isinstance(torcia.backends.openmp.is_available(), bool)
True
"""


def is_available() -> bool:
    """Whether torcia-cpu's native kernels (built with OpenMP) are installed.

    Examples
    --------
    >>> import torcia
    >>> isinstance(torcia.backends.openmp.is_available(), bool)
    True
    """
    import importlib.util

    return importlib.util.find_spec("torcia_cpu") is not None
