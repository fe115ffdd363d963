"""Observers: modules that watch the values flowing through them and choose a scale and
zero point for them (``torch.ao.quantization.observer``).

Each observer passes its input through unchanged, records what it needs (a running
min/max, per channel or not, or a histogram), and answers :meth:`calculate_qparams`
with PyTorch's formulas: affine ``scale = (max - min) / (qmax - qmin)``,
``zero_point = qmin - round(min / scale)``; symmetric ``scale = max(|min|, max) /
((qmax - qmin) / 2)`` with the zero point at the middle of the range; the range always
includes 0, so that 0.0 (padding, ReLU's floor) is exact.
"""

from __future__ import annotations

import functools
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum, auto

import numpy as np

import torcia
from torcia import nn
from torcia.ao._qtensor import (
    per_channel_affine,
    per_channel_affine_float_qparams,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qint8,
    qint32,
    quint4x2,
    quint8,
    reduced_range,
)

__all__ = [
    "FixedQParamsObserver", "HistogramObserver", "MinMaxObserver", "MovingAverageMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver", "NoopObserver", "ObserverBase",
    "PerChannelMinMaxObserver", "PlaceholderObserver", "default_debug_observer",
    "default_dynamic_quant_observer", "default_float_qparams_observer",
    "default_histogram_observer", "default_observer", "default_per_channel_weight_observer",
    "default_placeholder_observer", "default_weight_observer", "get_observer_state_dict",
    "load_observer_state_dict", "per_channel_weight_observer_range_neg_127_to_127",
    "weight_observer_range_neg_127_to_127",
    "default_fixed_qparams_range_0to1_observer", "default_fixed_qparams_range_neg1to1_observer",
    "AffineQuantizedObserverBase", "Granularity", "MappingType", "PerAxis", "PerBlock",
    "PerGroup", "PerRow", "PerTensor", "PerToken", "RecordingObserver", "ReuseInputObserver",
    "TorchAODType", "UniformQuantizationObserverBase", "ZeroPointDomain",
    "default_affine_fixed_qparams_observer", "default_float_qparams_observer_4bit",
    "default_reuse_input_observer", "default_symmetric_fixed_qparams_observer",
    "get_block_size",
]

_EPS = float(np.finfo(np.float32).eps)


class _PartialWrapper:
    """``Observer.with_args(...)``: a factory of observers with those arguments, itself
    extendable with ``with_args``."""

    def __init__(self, p):
        self.p = p

    def __call__(self, *args, **kwargs):
        return self.p(*args, **kwargs)

    def with_args(self, **kwargs):
        return _PartialWrapper(functools.partial(self.p, **kwargs))

    def __repr__(self):
        return repr(self.p)


class ObserverBase(nn.Module):
    """Base class of observers: a dtype, and what :meth:`calculate_qparams` returns."""

    def __init__(self, dtype=quint8, is_dynamic: bool = False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    @classmethod
    def with_args(cls, **kwargs):
        """A factory making this observer with ``kwargs`` (for a :class:`QConfig`).

        Examples
        --------
        >>> from torcia.ao.quantization import MinMaxObserver
        >>> MinMaxObserver.with_args(reduce_range=True)().quant_max
        127
        """
        return _PartialWrapper(functools.partial(cls, **kwargs))

    with_callable_args = with_args


class UniformQuantizationObserverBase(ObserverBase):
    """Base of the observers of a quantized dtype with a uniform grid: its scheme, its
    integer range, and the scale and zero point of a range of values
    (``torch.ao.quantization.UniformQuantizationObserverBase``)."""

    def __init__(self, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype, is_dynamic)
        if qscheme not in (per_tensor_affine, per_tensor_symmetric, per_channel_affine,
                           per_channel_symmetric, per_channel_affine_float_qparams):
            raise NotImplementedError(f"Default Observer only works for per_tensor_affine, "
                                      f"per_tensor_symmetric, per_channel_affine, "
                                      f"per_channel_symmetric and per_channel_float_qparams "
                                      f"quantization scheme, got {qscheme}")
        if dtype not in (qint8, quint8, quint4x2, qint32) and quant_min is None:
            raise ValueError(f"Default Observer only works for qint8, quint8 and quint4x2 "
                             f"data type, got {dtype}")
        self.qscheme = qscheme
        self.reduce_range = reduce_range
        self.eps = eps
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        if quant_min is not None and quant_max is not None:
            if not quant_min <= 0 <= quant_max:
                raise ValueError("Used-specified quantization range must include 0.")
            if quant_min >= quant_max:
                raise ValueError("qmin must be strictly less than qmax for user-specified "
                                 "quantization range.")
            # reduce_range halves a user's range too, as PyTorch's calculate_qmin_qmax does
            self.quant_min, self.quant_max = (quant_min // 2, quant_max // 2) if reduce_range \
                else (quant_min, quant_max)
        else:
            self.quant_min, self.quant_max = reduced_range(dtype, reduce_range)

    def _qparams(self, lo, hi):
        """Scale and zero point (NumPy arrays of one or one per channel)."""
        qmin, qmax = self.quant_min, self.quant_max
        if self.qscheme is per_channel_affine_float_qparams:
            # the row's own range, not widened to hold 0.0 (PyTorch's embedding scheme)
            lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
            scale = np.where(hi - lo > self.eps, (hi - lo) / (qmax - qmin), 1.0)
            return scale.astype(np.float32), (-lo / scale).astype(np.float32)
        # in float32, as PyTorch computes them: a scale one ulp away moves zero points
        lo = np.minimum(np.asarray(lo, np.float32), np.float32(0))
        hi = np.maximum(np.asarray(hi, np.float32), np.float32(0))
        eps = np.float32(self.eps)
        if self.qscheme in (per_tensor_symmetric, per_channel_symmetric):
            bound = np.maximum(-lo, hi)
            scale = np.maximum(bound / np.float32((qmax - qmin) / 2), eps)
            # PyTorch's: 128 for quint8 (even where reduce_range halves the range), the
            # middle rounded down of a range the user gave
            mid = ((qmin + qmax) // 2 if self.has_customized_qrange else 128) \
                if self.dtype is quint8 else 0
            zero = np.full(scale.shape, mid, np.int64)
        else:
            scale = np.maximum((hi - lo) / np.float32(qmax - qmin), eps)
            zero = np.clip(qmin - np.round(lo / scale), qmin, qmax).astype(np.int64)
        return scale.astype(np.float32), zero


def _refuse_reduced_symmetric(observer, scheme) -> None:
    # PyTorch's min/max observers refuse it: quint8's symmetric zero point stays 128,
    # outside the halved range
    if observer.qscheme is scheme and observer.reduce_range and observer.dtype is quint8:
        raise NotImplementedError("Cannot reduce range for symmetric quantization for quint8")


def _as_pair(scale, zero):
    return (torcia.from_numpy(np.asarray(scale, np.float32).reshape(-1)),
            torcia.from_numpy(np.asarray(zero).reshape(-1)))


class MinMaxObserver(UniformQuantizationObserverBase):
    """The running minimum and maximum of everything seen
    (``torch.ao.quantization.MinMaxObserver``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import MinMaxObserver
    >>> obs = MinMaxObserver()
    >>> _ = obs(torcia.tensor([-1.0, 0.5, 3.0]))
    >>> scale, zero = obs.calculate_qparams()
    >>> round(scale.item(), 6), zero.item()  # (3 - -1) / 255, 0 - round(-1 / scale)
    (0.015686, 64)
    """

    def __init__(self, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs,
                         eps, is_dynamic, **kwargs)
        _refuse_reduced_symmetric(self, per_tensor_symmetric)
        self.register_buffer("min_val", torcia.tensor(float("inf")))
        self.register_buffer("max_val", torcia.tensor(float("-inf")))

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        data = x_orig.detach().numpy()
        self.min_val = torcia.tensor(float(min(self.min_val.item(), data.min())))
        self.max_val = torcia.tensor(float(max(self.max_val.item(), data.max())))
        return x_orig

    def calculate_qparams(self):
        """``(scale, zero_point)`` as one-element tensors."""
        lo, hi = self.min_val.item(), self.max_val.item()
        if lo == float("inf"):
            lo = hi = 0.0  # nothing observed: PyTorch warns and answers scale 1, zp 0
            return _as_pair(1.0, 0)
        return _as_pair(*self._qparams(lo, hi))

    def reset_min_max_vals(self):
        self.min_val = torcia.tensor(float("inf"))
        self.max_val = torcia.tensor(float("-inf"))

    def extra_repr(self):
        return f"min_val={self.min_val.item()}, max_val={self.max_val.item()}"


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Minimum and maximum as exponential moving averages (what QAT's activations use).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import MovingAverageMinMaxObserver
    >>> obs = MovingAverageMinMaxObserver(averaging_constant=0.5)
    >>> _ = obs(torcia.tensor([0.0, 2.0])); _ = obs(torcia.tensor([0.0, 4.0]))
    >>> obs.max_val.item()  # 2 + 0.5 * (4 - 2)
    3.0
    """

    def __init__(self, averaging_constant=0.01, dtype=quint8, qscheme=per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps,
                         is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        data = x_orig.detach().numpy()
        lo, hi = float(data.min()), float(data.max())
        old_lo, old_hi = self.min_val.item(), self.max_val.item()
        if old_lo != float("inf"):
            c = self.averaging_constant
            lo, hi = old_lo + c * (lo - old_lo), old_hi + c * (hi - old_hi)
        self.min_val, self.max_val = torcia.tensor(lo), torcia.tensor(hi)
        return x_orig


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """Minimum and maximum per slice along ``ch_axis`` (weights' output channels).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import PerChannelMinMaxObserver
    >>> obs = PerChannelMinMaxObserver(dtype=torcia.qint8,
    ...                                qscheme=torcia.per_channel_symmetric)
    >>> _ = obs(torcia.tensor([[1.0, -2.0], [0.5, 0.25]]))
    >>> [round(s, 5) for s in obs.calculate_qparams()[0].tolist()]  # 2 / 127.5, 0.5 / 127.5
    [0.01569, 0.00392]
    """

    def __init__(self, ch_axis=0, dtype=quint8, qscheme=per_channel_affine,
                 reduce_range=False, quant_min=None, quant_max=None, factory_kwargs=None,
                 eps=_EPS, is_dynamic=False, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs,
                         eps, is_dynamic, **kwargs)
        _refuse_reduced_symmetric(self, per_channel_symmetric)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", torcia.tensor([]))
        self.register_buffer("max_val", torcia.tensor([]))

    def _extremes(self, data):
        moved = np.moveaxis(data, self.ch_axis, 0).reshape(data.shape[self.ch_axis], -1)
        return moved.min(axis=1), moved.max(axis=1)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._extremes(x_orig.detach().numpy())
        if self.min_val.numel():
            lo = np.minimum(lo, self.min_val.numpy())
            hi = np.maximum(hi, self.max_val.numpy())
        self.min_val = torcia.from_numpy(lo.astype(np.float32))
        self.max_val = torcia.from_numpy(hi.astype(np.float32))
        return x_orig

    def calculate_qparams(self):
        if not self.min_val.numel():
            return _as_pair(1.0, 0)
        return _as_pair(*self._qparams(self.min_val.numpy(), self.max_val.numpy()))


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """:class:`PerChannelMinMaxObserver` with moving averages."""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=quint8,
                 qscheme=per_channel_affine, reduce_range=False, quant_min=None,
                 quant_max=None, eps=_EPS, is_dynamic=False, **kwargs):
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme,
                         reduce_range=reduce_range, quant_min=quant_min, quant_max=quant_max,
                         eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._extremes(x_orig.detach().numpy())
        if self.min_val.numel():
            c = self.averaging_constant
            old_lo, old_hi = self.min_val.numpy(), self.max_val.numpy()
            lo, hi = old_lo + c * (lo - old_lo), old_hi + c * (hi - old_hi)
        self.min_val = torcia.from_numpy(np.asarray(lo, np.float32))
        self.max_val = torcia.from_numpy(np.asarray(hi, np.float32))
        return x_orig


class HistogramObserver(UniformQuantizationObserverBase):
    """A histogram of the values, and the range whose quantization loses least (the L2
    error of the values binned, as PyTorch's search does): outliers are clipped when
    that costs less than the resolution they would take.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import HistogramObserver
    >>> obs = HistogramObserver()
    >>> _ = obs(torcia.linspace(0, 1, 10001))
    >>> scale, zero = obs.calculate_qparams()
    >>> round(scale.item() * 255, 2), zero.item()  # uniform values: their whole range
    (1.0, 0)
    """

    UPSAMPLE = 16  # parts of each bin when the histogram widens, as PyTorch's

    def __init__(self, bins: int = 2048, dtype=quint8, qscheme=per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, factory_kwargs=None,
                 eps=_EPS, is_dynamic=False, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs,
                         eps, is_dynamic, **kwargs)
        if qscheme not in (per_tensor_affine, per_tensor_symmetric):
            raise NotImplementedError("HistogramObserver's qscheme only support "
                                      "torch.per_tensor_symmetric and torch.per_tensor_affine.")
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        self.bins = bins
        # the error is measured on the levels of the stored integer type, as PyTorch does
        self.levels = 2 ** 32 if dtype is qint32 else 256
        self.register_buffer("histogram", torcia.zeros(bins))
        self.register_buffer("min_val", torcia.tensor(float("inf")))
        self.register_buffer("max_val", torcia.tensor(float("-inf")))

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        data = x_orig.detach().numpy().astype(np.float32).reshape(-1)
        if np.isinf(data).any():
            warnings.warn("torch.inf detected in input tensor, ignoring input", stacklevel=2)
            data = data[~np.isinf(data)]
            if data.size == 0:
                return x_orig
        lo, hi = data.min(), data.max()
        old_lo = np.float32(self.min_val.item())
        old_hi = np.float32(self.max_val.item())
        if np.isinf(old_lo) or np.isinf(old_hi):
            merged, new_lo, new_hi = _histc(data, self.bins, lo, hi), lo, hi
        else:
            new_lo, new_hi = min(old_lo, lo), max(old_hi, hi)
            merged = _histc(data, self.bins, new_lo, new_hi)
            old = self.histogram.numpy().astype(np.float32)
            if new_lo == old_lo and new_hi == old_hi:
                merged = merged + old
            elif old_lo == old_hi:
                merged = merged + _histc(np.array([old_lo]), self.bins, new_lo, new_hi) \
                    * old.sum(dtype=np.float32)
            else:
                merged = merged + self._upscaled(old, old_lo, old_hi, new_lo, new_hi)
        self.histogram = torcia.from_numpy(merged.astype(np.float32))
        self.min_val, self.max_val = torcia.tensor(float(new_lo)), torcia.tensor(float(new_hi))
        return x_orig

    def _upscaled(self, hist, old_lo, old_hi, new_lo, new_hi):
        """``hist`` over [old_lo, old_hi] redistributed on the bins of [new_lo, new_hi]:
        each bin split in ``UPSAMPLE`` equal parts, each part counted at its middle."""
        rate = self.UPSAMPLE
        parts = np.repeat(hist, rate) / np.float32(rate)
        width = (old_hi - old_lo) / np.float32(self.bins * rate)
        middles = _linspace(old_lo, old_hi, self.bins * rate + 1)[:-1] + np.float32(0.5) * width
        edges = _linspace(new_lo, new_hi, self.bins + 1)
        bins = np.clip(np.searchsorted(edges, middles, side="right") - 1, 0, self.bins - 1)
        out = np.zeros(self.bins, np.float32)
        np.add.at(out, bins, parts)  # one by one in float32, as torch.bincount sums
        return out

    def _error(self, hist, width, start: int, end: int) -> float:
        """The L2 error of quantizing ``hist`` (bins of ``width``) with bins [start, end]
        as the range on ``2 ** bits`` levels, the values spread evenly within each bin."""
        dst_width = np.float32(width * (end - start + 1) / self.levels)
        if dst_width == 0:
            return 0.0
        begin = (np.arange(self.bins) - start).astype(np.float32) * width
        stop = begin + width
        levels = np.float32(self.levels - 1)
        dst_begin = np.clip(np.floor(begin / dst_width), 0, levels)
        dst_end = np.clip(np.floor(stop / dst_width), 0, levels)
        density = hist / width
        half = dst_width / np.float32(2)
        norm = _cube_norm(begin - (dst_begin + np.float32(0.5)) * dst_width, half, density)
        norm = norm + (dst_end - dst_begin - 1) * _cube_norm(-half, half, density)
        norm = norm + _cube_norm(-half, stop - (dst_end * dst_width + half), density)
        return float(norm.sum(dtype=np.float32))

    def _search(self) -> tuple[int, int]:
        """The bins of the range to quantize: PyTorch's greedy search (after Caffe2's
        norm minimisation), dropping the tail that holds fewer values, a 1e-5 of them
        at a time, while the L2 error decreases."""
        hist = self.histogram.numpy().astype(np.float32)
        width = np.float32((self.max_val.item() - self.min_val.item()) / self.bins)
        total = float(hist.sum(dtype=np.float32))
        cumsum = np.cumsum(hist, dtype=np.float32)
        alpha, beta, step = 0.0, 1.0, 1e-5
        start, end = 0, self.bins - 1
        best = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + step, beta - step
            left = start
            while left < end and cumsum[left] < next_alpha * total:
                left += 1
            right = end
            while right > start and cumsum[right] > next_beta * total:
                right -= 1
            next_start, next_end = start, end
            if left - start > end - right:
                next_start, alpha = left, next_alpha
            else:
                next_end, beta = right, next_beta
            if (next_start, next_end) == (start, end):
                continue
            norm = self._error(hist, width, next_start, next_end)
            if norm > best:
                break
            best, start, end = norm, next_start, next_end
        return start, end

    def calculate_qparams(self):
        lo, hi = np.float32(self.min_val.item()), np.float32(self.max_val.item())
        if np.isinf(lo) and np.isinf(hi):
            warnings.warn("must run observer before calling calculate_qparams. Returning "
                          "default scale and zero point ", stacklevel=2)
            return _as_pair(1.0, 0)
        start, end = self._search()
        width = (hi - lo) / np.float32(self.bins)
        return _as_pair(*self._qparams(lo + width * np.float32(start),
                                       lo + width * np.float32(end + 1)))


def _histc(data, bins: int, lo, hi):
    """``torch.histc``: ``bins`` equal bins over [lo, hi] (the last one closed), values
    outside left out, in float32 arithmetic."""
    lo, hi = np.float32(lo), np.float32(hi)
    if lo == hi:
        lo, hi = lo - np.float32(1), hi + np.float32(1)
    data = np.asarray(data, np.float32)
    data = data[(data >= lo) & (data <= hi)]
    pos = ((data - lo) * np.float32(bins) / (hi - lo)).astype(np.int64)
    return np.bincount(np.minimum(pos, bins - 1), minlength=bins).astype(np.float32)


def _linspace(start, end, steps: int):
    """``torch.linspace`` in float32: a float32 step, the first half stepped from
    ``start`` and the second from ``end`` (both ends exact), each point rounded once
    (a fused multiply-add)."""
    start, end = np.float32(start), np.float32(end)
    step = np.float64((end - start) / np.float32(steps - 1))
    i = np.arange(steps)
    return np.where(i < steps // 2, np.float64(start) + step * i,
                    np.float64(end) - step * (steps - 1 - i)).astype(np.float32)


def _cube_norm(begin, end, density):
    """The L2 norm of values spread at ``density`` between ``begin`` and ``end`` around
    their quantized value: ``density * (end^3 - begin^3) / 3``."""
    return density * ((end * end * end - begin * begin * begin) / np.float32(3))


class PlaceholderObserver(ObserverBase):
    """Observes nothing; carries a dtype (and whether it is chosen at run time) for
    dynamic quantization and float16.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import PlaceholderObserver
    >>> PlaceholderObserver(dtype=torcia.float16).dtype
    torcia.float16
    """

    def __init__(self, dtype=torcia.float32, custom_op_name: str = "", compute_dtype=None,
                 quant_min=None, quant_max=None, qscheme=None, eps=None,
                 is_dynamic: bool = False):
        super().__init__(dtype, is_dynamic)
        self.qscheme = qscheme if qscheme is not None else per_tensor_affine
        self.quant_min, self.quant_max = quant_min, quant_max

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")  # noqa: TRY002


class FixedQParamsObserver(ObserverBase):
    """Observes nothing; its scale and zero point are given (``torch.ao.quantization.
    FixedQParamsObserver``): the parameters of an output whose range is known in advance,
    a sigmoid's [0, 1] or a tanh's [-1, 1].

    Examples
    --------
    >>> from torcia.ao.quantization import FixedQParamsObserver
    >>> scale, zero = FixedQParamsObserver(scale=1.0 / 256, zero_point=0).calculate_qparams()
    >>> scale.tolist(), zero.tolist()
    ([0.00390625], [0])
    """

    def __init__(self, scale, zero_point, dtype=quint8, qscheme=per_tensor_affine,
                 quant_min=0, quant_max=255, is_dynamic=False, **kwargs):
        if is_dynamic:
            raise NotImplementedError("FixedQParamsObserver doesn't support dynamic "
                                      "quantization")
        super().__init__(dtype, is_dynamic)
        self.quant_min, self.quant_max = quant_min, quant_max
        self.qscheme = qscheme
        self.register_buffer("scale", torcia.tensor([float(scale)]))
        self.register_buffer("zero_point", torcia.tensor([int(zero_point)],
                                                         dtype=torcia.int32))

    def forward(self, X):
        return X

    def calculate_qparams(self):
        return self.scale, self.zero_point


class NoopObserver(ObserverBase):
    """Observes nothing (a float16 activation's observer)."""

    def __init__(self, dtype=torcia.float16, custom_op_name=""):
        super().__init__(dtype)

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for NoopObserver")  # noqa: TRY002


class RecordingObserver(ObserverBase):
    """Keeps a copy of every tensor it sees, for debugging (``torch.ao.quantization.
    RecordingObserver``, the default debug observer).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import RecordingObserver
    >>> obs = RecordingObserver()
    >>> _ = obs(torcia.tensor([1.0, 2.0])); _ = obs(torcia.tensor([3.0]))
    >>> [t.tolist() for t in obs.get_tensor_value()]
    [[1.0, 2.0], [3.0]]
    """

    def __init__(self, dtype=quint8):
        super().__init__(dtype, False)
        self.tensor_val = []

    def forward(self, x):
        self.tensor_val.append(x.clone())
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for RecordingObserver")  # noqa: TRY002

    def get_tensor_value(self):
        return self.tensor_val


class ReuseInputObserver(ObserverBase):
    """Observes nothing: marks an output (a reshape's) that takes the parameters of its
    input (``torch.ao.quantization.ReuseInputObserver``)."""

    def __init__(self):
        super().__init__(quint8, False)

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for ReuseInputObserver")  # noqa: TRY002


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_placeholder_observer = PlaceholderObserver
default_debug_observer = RecordingObserver
default_reuse_input_observer = ReuseInputObserver
default_weight_observer = MinMaxObserver.with_args(dtype=qint8, qscheme=per_tensor_symmetric)
weight_observer_range_neg_127_to_127 = MinMaxObserver.with_args(
    dtype=qint8, qscheme=per_tensor_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=qint8, qscheme=per_channel_symmetric)
per_channel_weight_observer_range_neg_127_to_127 = PerChannelMinMaxObserver.with_args(
    dtype=qint8, qscheme=per_channel_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_dynamic_quant_observer = PlaceholderObserver.with_args(
    dtype=quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=quint8, qscheme=per_channel_affine_float_qparams, ch_axis=0)
default_float_qparams_observer_4bit = PerChannelMinMaxObserver.with_args(
    dtype=quint4x2, qscheme=per_channel_affine_float_qparams, ch_axis=0)


def get_observer_state_dict(mod) -> dict:
    """The state of every observer in ``mod`` (their buffers), by name.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import MinMaxObserver, get_observer_state_dict
    >>> sorted(get_observer_state_dict(torcia.nn.Sequential(MinMaxObserver())))
    ['0.max_val', '0.min_val']
    """
    return {name: t for name, t in mod.state_dict().items()
            if isinstance(mod.get_submodule(name.rpartition(".")[0]) if "." in name else mod,
                          ObserverBase)}


def load_observer_state_dict(mod, obs_dict) -> None:
    """Load what :func:`get_observer_state_dict` returned into ``mod``'s observers."""
    for name, t in obs_dict.items():
        owner, _, leaf = name.rpartition(".")
        setattr(mod.get_submodule(owner) if owner else mod, leaf, t.clone())
# the fixed output parameters of torch's quantized sigmoid and tanh
default_fixed_qparams_range_0to1_observer = FixedQParamsObserver.with_args(
    scale=1.0 / 256.0, zero_point=0, dtype=quint8, quant_min=0, quant_max=255)
default_fixed_qparams_range_neg1to1_observer = FixedQParamsObserver.with_args(
    scale=2.0 / 256.0, zero_point=128, dtype=quint8, quant_min=0, quant_max=255)
default_symmetric_fixed_qparams_observer = default_fixed_qparams_range_neg1to1_observer
default_affine_fixed_qparams_observer = default_fixed_qparams_range_0to1_observer


# ---------------------------------------------------------------------------------------
# affine quantization's vocabulary (torchao's, as torch.ao.quantization re-exports it)
# ---------------------------------------------------------------------------------------


class MappingType(Enum):
    """How a float range maps onto the integer range: ``SYMMETRIC`` (``[-m, m]`` with
    ``m`` the largest magnitude), ``SYMMETRIC_NO_CLIPPING_ERR`` (the larger of the
    negative and the positive side's scale, so that neither side clips) or
    ``ASYMMETRIC`` (``[min, max]`` itself)."""

    SYMMETRIC = auto()
    SYMMETRIC_NO_CLIPPING_ERR = auto()
    ASYMMETRIC = auto()


class ZeroPointDomain(Enum):
    """Where the zero point lives: ``INT`` (``q = x / scale + zp``), ``FLOAT``
    (``q = (x - (zp - scale * mid)) / scale``) or ``NONE`` (``q = x / scale``)."""

    INT = auto()
    FLOAT = auto()
    NONE = auto()


class TorchAODType(Enum):
    """Sub-byte integer types named before they were dtypes (``INT1`` ... ``INT7``)."""

    INT1 = auto()
    INT2 = auto()
    INT3 = auto()
    INT4 = auto()
    INT5 = auto()
    INT6 = auto()
    INT7 = auto()


@dataclass(frozen=True)
class Granularity:
    """Base of the granularities: which elements share a scale and zero point."""


@dataclass(frozen=True)
class PerBlock(Granularity):
    """One set of parameters per block of ``block_size`` elements."""

    block_size: tuple[int, ...]


@dataclass(frozen=True)
class PerTensor(Granularity):
    """One set of parameters for the whole tensor."""


@dataclass(frozen=True)
class PerAxis(Granularity):
    """One set of parameters per index along ``axis``."""

    axis: int


@dataclass(frozen=True)
class PerGroup(Granularity):
    """One set of parameters per group of ``group_size`` consecutive elements of a row
    (2-D tensors)."""

    group_size: int


@dataclass(frozen=True)
class PerRow(Granularity):
    """One set of parameters per row: blocks of the last dimension's whole length."""


@dataclass(frozen=True)
class PerToken(Granularity):
    """One set of parameters per token, the last dimension being a token's features."""


def get_block_size(input_shape, granularity) -> tuple[int, ...]:
    """The block of elements sharing one scale and zero point in a tensor of
    ``input_shape`` quantized at ``granularity`` (``torch.ao.quantization.get_block_size``).

    Examples
    --------
    >>> from torcia.ao.quantization import PerAxis, PerGroup, PerToken, get_block_size
    >>> get_block_size((8, 16), PerAxis(0)), get_block_size((8, 16), PerGroup(4))
    ((1, 16), (1, 4))
    >>> get_block_size((2, 3, 4), PerToken())
    (1, 1, 4)
    """
    if not isinstance(granularity, Granularity):
        raise AssertionError("Please provide an instance of Granularity, not subclass of it")
    shape = tuple(input_shape)
    if isinstance(granularity, PerTensor):
        return shape
    if isinstance(granularity, PerAxis):
        block = list(shape)
        block[granularity.axis] = 1
        return tuple(block)
    if isinstance(granularity, (PerRow, PerToken)):
        return (1,) * (len(shape) - 1) + shape[-1:]
    if isinstance(granularity, PerGroup):
        if len(shape) != 2:
            raise AssertionError(f"Expecting input shape dim to be 2 for per group "
                                 f"quantization, gotinput shape: {shape}")
        return (1, granularity.group_size)
    raise ValueError(f"Unsupported Granularity: {granularity}")


class AffineQuantizedObserverBase(ABC, nn.Module):
    """Base of observers for affine quantization at a :class:`Granularity`
    (``torch.ao.quantization.AffineQuantizedObserverBase``): a subclass records what it
    needs in ``forward`` (setting ``block_size`` and ``original_dtype``) and answers
    ``calculate_qparams`` with ``(scale, zero_point)`` per block.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import (AffineQuantizedObserverBase, MappingType,
    ...                                     PerTensor, get_block_size)
    >>> class AbsMax(AffineQuantizedObserverBase):
    ...     def forward(self, x):
    ...         self.block_size, self.original_dtype = get_block_size(x.shape,
    ...                                                               self.granularity), x.dtype
    ...         self.absmax = x.abs().max()
    ...         return x
    ...     def calculate_qparams(self):
    ...         return self.absmax / 127, torcia.tensor(0)
    >>> obs = AbsMax(MappingType.SYMMETRIC, torcia.int8, PerTensor())
    >>> _ = obs(torcia.tensor([-2.54, 1.0]))
    >>> round(obs.calculate_qparams()[0].item(), 4), obs.block_size
    (0.02, (2,))
    """

    with_args = classmethod(ObserverBase.with_args.__func__)

    def __init__(self, mapping_type, target_dtype, granularity, quant_min=None,
                 quant_max=None, eps=None, scale_dtype=None, zero_point_dtype=None,
                 preserve_zero=True, zero_point_domain=ZeroPointDomain.INT, **kwargs):
        super().__init__()
        if granularity is None:
            raise AssertionError("granularity is None")
        self.mapping_type = mapping_type
        self.target_dtype = target_dtype
        self.granularity = granularity
        self.quant_min, self.quant_max = quant_min, quant_max
        self.eps = eps
        self.scale_dtype, self.zero_point_dtype = scale_dtype, zero_point_dtype
        self.preserve_zero = preserve_zero
        self.zero_point_domain = zero_point_domain
        # set by forward, from the first input seen
        self.block_size = None
        self.original_dtype = None

    @abstractmethod
    def forward(self, input):
        """Record what the parameters need of ``input``; return ``input`` unchanged."""

    @abstractmethod
    def calculate_qparams(self):
        """``(scale, zero_point)`` of what was recorded."""
