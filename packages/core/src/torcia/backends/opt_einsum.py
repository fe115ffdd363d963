"""``torcia.backends.opt_einsum``: torcia's einsum contracts through NumPy's optimiser;
the flags are accepted and inert.

Examples
--------
>>> import torcia
>>> torcia.backends.opt_einsum.strategy
'auto'
"""

enabled = True
strategy = "auto"


def is_available() -> bool:
    """Whether the opt_einsum package is importable.

    Examples
    --------
    >>> import torcia
    >>> from torcia.backends import opt_einsum
    >>> opt_einsum.is_available() == (opt_einsum.get_opt_einsum() is not None)
    True
    """
    import importlib.util

    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum module, or None when it is not installed.

    Examples
    --------
    >>> import torcia
    >>> module = torcia.backends.opt_einsum.get_opt_einsum()
    >>> (module is None) == (not torcia.backends.opt_einsum.is_available())
    True
    """
    if not is_available():
        return None
    import importlib

    return importlib.import_module("opt_einsum")
