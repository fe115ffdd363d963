"""TorchScript's fusion switches (``torch.jit.set_fusion_strategy``,
``enable_onednn_fusion``, ``strict_fusion``), as scripts tuning a deployment call them.

torcia's compiled programs are captured once with dynamic sizes and fused by
torcia.compile (:func:`~torcia.jit.optimize_for_inference`), and torcia-cpu runs its
convolutions on oneDNN already, so neither setting changes what a program computes. They
keep PyTorch's values, checks and return values so that code saving and restoring them
(``old = set_fusion_strategy(...)``; ``set_fusion_strategy(old)``) works unchanged.
"""

from __future__ import annotations

import contextlib
import threading
import warnings

from torcia.jit._markers import is_scripting

_DEFAULT_STRATEGY = (("STATIC", 2), ("DYNAMIC", 10))
_lock = threading.Lock()
_strategy = list(_DEFAULT_STRATEGY)
_onednn = [False]


def set_fusion_strategy(strategy: list) -> list:
    """Set how many shape-specialised and how many dynamic-shape fusions a compiled
    function may make, and return the previous strategy (``torch.jit.set_fusion_strategy``).

    ``strategy`` is a list of ``("STATIC" | "DYNAMIC", depth)`` pairs; PyTorch's default is
    ``[("STATIC", 2), ("DYNAMIC", 10)]``.

    Examples
    --------
    >>> import torcia
    >>> old = torcia.jit.set_fusion_strategy([("DYNAMIC", 3)])
    >>> old
    [('STATIC', 2), ('DYNAMIC', 10)]
    >>> torcia.jit.set_fusion_strategy(old)
    [('DYNAMIC', 3)]
    """
    checked = []
    for entry in strategy:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2
                and isinstance(entry[0], str) and isinstance(entry[1], int)
                and not isinstance(entry[1], bool)):
            raise TypeError("set_fusion_strategy(): expected a list of (str, int) pairs, "
                            f"got {entry!r}")
        kind, depth = entry
        if kind not in ("STATIC", "DYNAMIC"):
            raise ValueError(f"FusionBehavior only supported 'STATIC' or 'DYNAMIC', got: "
                             f"{kind}")
        if depth < 0:
            raise TypeError(f"set_fusion_strategy(): a depth is a count, got {depth}")
        checked.append((kind, depth))
    global _strategy
    with _lock:
        previous, _strategy = _strategy, checked
    return previous


def enable_onednn_fusion(enabled: bool) -> None:
    """Switch TorchScript's oneDNN graph fusion on or off (``torch.jit.enable_onednn_fusion``).

    Examples
    --------
    >>> import torcia
    >>> torcia.jit.enable_onednn_fusion(True)
    >>> torcia.jit.onednn_fusion_enabled()
    True
    >>> torcia.jit.enable_onednn_fusion(False)
    """
    _onednn[0] = bool(enabled)


def onednn_fusion_enabled() -> bool:
    """Whether :func:`enable_onednn_fusion` switched oneDNN graph fusion on (off by default).

    Examples
    --------
    >>> import torcia
    >>> torcia.jit.onednn_fusion_enabled()
    False
    """
    return _onednn[0]


class strict_fusion:
    """A block whose ops a scripted program must fuse (``torch.jit.strict_fusion``).

    Outside a script capture it does nothing but warn, as PyTorch's does; inside one,
    torcia's programs fuse through torcia.compile as a whole, so the block holds.

    Examples
    --------
    >>> import torcia
    >>> @torcia.jit.script
    ... def triple(x):
    ...     with torcia.jit.strict_fusion():
    ...         return x + x + x
    >>> triple(torcia.ones(2))
    tensor([3., 3.])
    """

    def __init__(self) -> None:
        if not is_scripting():
            warnings.warn("Only works in script mode", stacklevel=2)

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb) -> None:
        return None


_FUSERS = ("fuser0", "fuser1", "fuser2", "fuser3", "none")
_optimize = [True]


@contextlib.contextmanager
def fuser(name: str):
    """A block run with one of TorchScript's fusers chosen (``torch.jit.fuser``):
    ``"fuser0"`` (legacy), ``"fuser1"`` (NNC), ``"fuser2"`` (nvFuser), ``"fuser3"``
    (oneDNN graph: :func:`onednn_fusion_enabled` is true inside) or ``"none"``; another
    name raises PyTorch's ``Exception``. The previous settings come back on exit.

    Examples
    --------
    >>> import torcia
    >>> with torcia.jit.fuser("fuser3"):
    ...     torcia.jit.onednn_fusion_enabled()
    True
    >>> torcia.jit.onednn_fusion_enabled()
    False
    """
    if name not in _FUSERS:
        raise Exception(f"unrecognized fuser option (name: {name})")  # noqa: TRY002
    old = _onednn[0]
    _onednn[0] = name == "fuser3"
    try:
        yield
    finally:
        _onednn[0] = old


@contextlib.contextmanager
def optimized_execution(should_optimize: bool):
    """A block in which compiled programs run with (or without) the executor's
    optimizations (``torch.jit.optimized_execution``); torcia's programs are optimized when
    made, so the switch is kept for the code that reads it back.

    Examples
    --------
    >>> import torcia
    >>> relu = torcia.jit.trace(torcia.nn.ReLU(), torcia.zeros(1))
    >>> with torcia.jit.optimized_execution(False):
    ...     relu(torcia.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    old = _optimize[0]
    _optimize[0] = bool(should_optimize)
    try:
        yield
    finally:
        _optimize[0] = old
