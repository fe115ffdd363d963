"""``torcia.backends.cudnn``: accepted and inert. torcia's CUDA device runs on CuPy's own
kernels, not cuDNN, so :func:`is_available` is False and ``benchmark``, ``deterministic``,
``enabled`` and ``allow_tf32`` are plain flags: scripts may set them, nothing changes.
torcia's kernels pick no algorithm by timing, so they behave as ``benchmark = False``.

Examples
--------
>>> import torcia
>>> torcia.backends.cudnn.deterministic = True
>>> with torcia.backends.cudnn.flags(enabled=False):
...     torcia.backends.cudnn.enabled
False
>>> torcia.backends.cudnn.enabled
True
"""

import contextlib

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """Whether cuDNN can be used: never, torcia does not use it.

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.cudnn.is_available()
    False
    """
    return False


def version():
    """The cuDNN version: None, as PyTorch answers when cuDNN is absent.

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.cudnn.version() is None
    True
    """
    return None


def is_acceptable(tensor) -> bool:
    """Whether cuDNN would take ``tensor``: never.

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.cudnn.is_acceptable(torcia.zeros(2))
    False
    """
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True):
    """Set the flags for a ``with`` block and restore them after, as PyTorch's.

    Examples
    --------
    >>> import torcia
    >>> with torcia.backends.cudnn.flags(enabled=False, deterministic=True):
    ...     torcia.backends.cudnn.deterministic
    True
    >>> torcia.backends.cudnn.deterministic
    False
    """
    module = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    saved = {n: module[n] for n in names}
    module.update(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit,
                  deterministic=deterministic, allow_tf32=allow_tf32)
    try:
        yield
    finally:
        module.update(saved)
