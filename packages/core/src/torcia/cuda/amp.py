"""``torcia.cuda.amp``: PyTorch's older, CUDA-only spellings of :mod:`torcia.amp`.

PyTorch deprecates them in favour of ``torch.amp`` with ``device_type="cuda"``; they
warn here as there (``FutureWarning``) and do the same as :class:`torcia.amp.autocast`,
:class:`torcia.amp.GradScaler`, :func:`torcia.amp.custom_fwd` and
:func:`torcia.amp.custom_bwd` for "cuda".

Examples
--------
>>> import warnings
>>> import torcia
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", FutureWarning)
...     scaler = torcia.cuda.amp.GradScaler(init_scale=8.0)
>>> scaler.get_scale(), scaler.device
(8.0, 'cuda')
"""

from __future__ import annotations

import warnings

from torcia import _dtype as _D
from torcia import amp as _amp

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


def _deprecated(what: str, instead: str) -> None:
    warnings.warn(f"`torcia.cuda.amp.{what}(args...)` is deprecated. Please use "
                  f"`torcia.amp.{instead}` instead.", FutureWarning, stacklevel=3)


class autocast(_amp.autocast):  # noqa: N801 - PyTorch's name
    """``torcia.amp.autocast("cuda", ...)``: float16 by default."""

    def __init__(self, enabled: bool = True, dtype=_D.float16, cache_enabled: bool = True):
        _deprecated("autocast", "autocast('cuda', args...)")
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``torcia.amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        _deprecated("GradScaler", "GradScaler('cuda', args...)")
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torcia.amp.custom_fwd(..., device_type="cuda")``."""
    _deprecated("custom_fwd", "custom_fwd(args..., device_type='cuda')")
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``torcia.amp.custom_bwd(..., device_type="cuda")``."""
    _deprecated("custom_bwd", "custom_bwd(args..., device_type='cuda')")
    return _amp.custom_bwd(bwd, device_type="cuda")
