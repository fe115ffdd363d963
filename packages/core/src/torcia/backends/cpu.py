"""``torcia.backends.cpu``: the CPU's vector capability.

Examples
--------
>>> import torcia
>>> torcia.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")
True
"""


def get_cpu_capability() -> str:
    """``"AVX512"``, ``"AVX2"`` or ``"DEFAULT"``, read from the CPU's flags (Linux).

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
    True
    """
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return "DEFAULT"
    if "avx512f" in flags:
        return "AVX512"
    return "AVX2" if "avx2" in flags else "DEFAULT"
