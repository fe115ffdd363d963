"""``torcia.signal``: signal-processing helpers, as ``torch.signal`` (its window functions
are in :mod:`torcia.signal.windows`)."""

from torcia.signal import windows

__all__ = ["windows"]
