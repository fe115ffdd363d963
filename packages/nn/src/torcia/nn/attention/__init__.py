"""Attention controls, as ``torch.nn.attention``: which scaled-dot-product attention
backends may serve a call (:func:`sdpa_kernel`, :class:`SDPBackend`), the registry of
flash-attention implementations, and :mod:`torcia.nn.attention.flex_attention`.

torcia has one implementation of :func:`torcia.nn.functional.scaled_dot_product_attention`
(the math of the definition, in differentiable ops). The backend switches decide, as in
PyTorch, whether a call is accepted: on the CPU, PyTorch has the math and flash kernels, so
a call is refused (``No viable backend``) when both are switched off; on other devices any
enabled backend accepts it. The switches are those of :mod:`torcia.backends.cuda`
(``flash_sdp_enabled()``...), as in PyTorch.

Examples
--------
>>> import torcia
>>> import torcia.nn.functional as F
>>> from torcia.nn.attention import SDPBackend, sdpa_kernel
>>> q = torcia.randn(1, 2, 4, 8)
>>> with sdpa_kernel([SDPBackend.MATH]):
...     torcia.backends.cuda.flash_sdp_enabled(), F.scaled_dot_product_attention(q, q, q).shape
(False, torcia.Size([1, 2, 4, 8]))
>>> with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
...     F.scaled_dot_product_attention(q, q, q)
Traceback (most recent call last):
...
RuntimeError: No viable backend for scaled_dot_product_attention was found. ...
"""

from __future__ import annotations

import contextlib
import enum
import logging

from torcia.backends import cuda as _cuda

__all__ = [
    "SDPBackend", "WARN_FOR_UNFUSED_KERNELS", "activate_flash_attention_impl",
    "current_flash_attention_impl", "list_flash_attention_impls",
    "register_flash_attention_impl", "restore_flash_attention_impl", "sdpa_kernel",
]

#: PyTorch warns why its fused kernels could not run when this is True; torcia has no
#: fused kernels to explain, so it is kept for scripts that set it and changes nothing
WARN_FOR_UNFUSED_KERNELS = False

logger = logging.getLogger(__name__)


class SDPBackend(enum.IntEnum):
    """The scaled-dot-product attention backends, with PyTorch's values.

    Examples
    --------
    >>> from torcia.nn.attention import SDPBackend
    >>> SDPBackend.FLASH_ATTENTION, int(SDPBackend.MATH)
    (<SDPBackend.FLASH_ATTENTION: 1>, 0)
    """

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


#: the switches of torcia.backends.cuda behind each backend; OVERRIDEABLE (a device
#: plugin's own kernel in PyTorch) has no public switch there, so it is kept here
_SWITCHES = {
    SDPBackend.CUDNN_ATTENTION: (_cuda.enable_cudnn_sdp, _cuda.cudnn_sdp_enabled),
    SDPBackend.FLASH_ATTENTION: (_cuda.enable_flash_sdp, _cuda.flash_sdp_enabled),
    SDPBackend.EFFICIENT_ATTENTION: (_cuda.enable_mem_efficient_sdp,
                                     _cuda.mem_efficient_sdp_enabled),
    SDPBackend.MATH: (_cuda.enable_math_sdp, _cuda.math_sdp_enabled),
}
_overrideable = [True]
#: the order PyTorch tries its backends in (``set_priority=True`` reorders it)
_priority = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
             SDPBackend.CUDNN_ATTENTION, SDPBackend.OVERRIDEABLE]


def _enabled(backend) -> bool:
    if backend is SDPBackend.OVERRIDEABLE:
        return _overrideable[0]
    return _SWITCHES[backend][1]()


def _set(backend, enabled: bool) -> None:
    if backend is SDPBackend.OVERRIDEABLE:
        _overrideable[0] = enabled
    else:
        _SWITCHES[backend][0](enabled)


def _current(with_priority=False) -> list:
    enabled = [b for b in (*_SWITCHES, SDPBackend.OVERRIDEABLE) if _enabled(b)]
    return sorted(enabled, key=_priority.index) if with_priority else enabled


def _apply(backends, set_priority) -> None:
    for backend in (*_SWITCHES, SDPBackend.OVERRIDEABLE):
        _set(backend, backend in backends)
    if set_priority:
        _priority[:] = list(backends) + [b for b in _priority if b not in backends]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Allow only ``backends`` (one :class:`SDPBackend` or a list) to serve scaled-dot-
    product attention inside the block; ``set_priority`` also tries them in the given
    order. The previous switches (and order) come back on exit.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention import SDPBackend, sdpa_kernel
    >>> with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
    ...     torcia.backends.cuda.mem_efficient_sdp_enabled()
    False
    >>> torcia.backends.cuda.mem_efficient_sdp_enabled()
    True
    """
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    backends = [backends] if isinstance(backends, SDPBackend) else list(dict.fromkeys(backends))
    previous = _current(with_priority=set_priority)
    saved_priority = list(_priority)
    try:
        _apply(backends, set_priority)
        yield {}
    finally:
        _apply(previous, False)
        _priority[:] = saved_priority


#: the devices whose PyTorch kernels are the math and the flash ones only
_MATH_AND_FLASH_ONLY = ("cpu",)


def check_viable(device_type: str) -> None:
    """Refuse, in PyTorch's words, a scaled-dot-product attention call on ``device_type``
    that no enabled backend of PyTorch could serve (torcia's implementation serves every
    accepted call)."""
    if device_type in _MATH_AND_FLASH_ONLY:
        viable = _enabled(SDPBackend.MATH) or _enabled(SDPBackend.FLASH_ATTENTION)
    else:
        viable = bool(_current())
    if not viable:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. "
                           "This is likely due to turning off both the math kernel and the "
                           "fused kernels.")


# ----- flash-attention implementations -------------------------------------------------

_IMPLS: dict = {}
_active: list = [None]  # (name, handle) of the activated implementation


def register_flash_attention_impl(impl: str, *, register_fn) -> None:
    """Make ``impl`` (``"FA3"``, ``"FA4"`` or a plugin's name) available: activating it
    calls ``register_fn()``, which installs the kernels and may return a handle whose
    ``remove()`` uninstalls them.

    Examples
    --------
    >>> from torcia.nn import attention
    >>> installed = []
    >>> class Handle:
    ...     def remove(self):
    ...         installed.pop()
    >>> def install():
    ...     installed.append("my-flash")
    ...     return Handle()
    >>> attention.register_flash_attention_impl("my-flash", register_fn=install)
    >>> attention.activate_flash_attention_impl("my-flash")
    >>> attention.current_flash_attention_impl(), installed
    ('my-flash', ['my-flash'])
    >>> attention.restore_flash_attention_impl()
    >>> attention.current_flash_attention_impl(), installed
    (None, [])
    """
    _IMPLS[impl] = register_fn


def activate_flash_attention_impl(impl: str) -> None:
    """Uninstall the active implementation, if any, and install ``impl``."""
    restore_flash_attention_impl(_raise_warn=False)
    register_fn = _IMPLS.get(impl)
    if register_fn is None:
        raise ValueError(f"Unknown flash attention impl '{impl}'. Available implementations: "
                         f"{list_flash_attention_impls()}")
    handle = register_fn()
    if handle is not None:
        _active[0] = (impl, handle)


def list_flash_attention_impls() -> list:
    """The registered implementations' names, sorted.

    Examples
    --------
    >>> from torcia.nn.attention import list_flash_attention_impls
    >>> isinstance(list_flash_attention_impls(), list)
    True
    """
    return sorted(_IMPLS)


def current_flash_attention_impl():
    """The activated implementation's name, or None for the default."""
    return None if _active[0] is None else _active[0][0]


def restore_flash_attention_impl(_raise_warn: bool = True) -> None:
    """Uninstall the activated implementation (the default serves again)."""
    if _active[0] is not None:
        _active[0][1].remove()
    elif _raise_warn:
        logger.warning("Trying to restore default FA2 impl when no custom impl was activated")
    _active[0] = None
