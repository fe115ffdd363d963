"""``torcia.backends.mkl``: whether MKL is used, answered from NumPy's build.

Examples
--------
>>> import torcia
>>> isinstance(torcia.backends.mkl.is_available(), bool)
True
"""


def is_available() -> bool:
    """Whether the NumPy torcia computes with links MKL.

    Examples
    --------
    >>> import torcia
    >>> isinstance(torcia.backends.mkl.is_available(), bool)
    True
    """
    import numpy as np

    config = getattr(np, "__config__", None)
    info = getattr(config, "CONFIG", {}) if config is not None else {}
    blas = str(info.get("Build Dependencies", {}).get("blas", {}).get("name", ""))
    return "mkl" in blas.lower()
