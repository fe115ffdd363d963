"""``make_tensor``: random test inputs of any dtype, as ``torch.testing.make_tensor``."""

from __future__ import annotations

import math
import warnings

import torcia
from torcia import _dtype as D

_INTEGRAL = (D.uint8, D.int8, D.int16, D.int32, D.int64)
_FLOATING = (D.float16, D.bfloat16, D.float32, D.float64)
_COMPLEX = (D.complex64, D.complex128)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` with values drawn uniformly from ``[low, high)``.

    Defaults: ``[0, 2)`` for bool, ``[-9, 10)`` for integers and ``[-9, 9)`` for floating
    and complex dtypes (both parts of a complex number); ``low`` and ``high`` outside the
    dtype's finite range are clamped to it, integer bounds are rounded up.

    Parameters
    ----------
    *shape : int or sequence of int
    dtype : torcia.dtype
    device : str or torcia.device
    low, high : float, optional
    requires_grad : bool
        Floating and complex dtypes only.
    noncontiguous : bool
        A non-contiguous view (every other element of a larger tensor) when it has more
        than one element.
    exclude_zero : bool
        Replace zeros by 1 (bool, integers) or the dtype's smallest normal number.
    memory_format : torcia.memory_format, optional
        The layout of the result (exclusive with ``noncontiguous``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.testing import make_tensor
    >>> t = make_tensor(2, 3, dtype=torcia.float32, device="cpu", low=-1, high=1)
    >>> t.shape, bool(((t >= -1) & (t < 1)).all())
    (torcia.Size([2, 3]), True)
    >>> make_tensor((4,), dtype=torcia.int64, device="cpu", low=3, high=4).tolist()
    [3, 3, 3, 3]
    """
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got noncontiguous={noncontiguous} and "
                         f"memory_format={memory_format}")
    integral = dtype is D.bool_ or dtype in _INTEGRAL
    if requires_grad and integral:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral "
                         f"dtypes, but got dtype={dtype}")

    def bounds(lowest, highest, default_low, default_high):
        lo = default_low if low is None else low
        hi = default_high if high is None else high
        if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={lo} and high={hi}")
        if lo == hi and not integral:
            warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or "
                          "complex types is deprecated since 2.1 and will be removed in 2.3. "
                          "Use `torch.full(...)` instead.", FutureWarning, stacklevel=3)
        elif lo >= hi:
            raise ValueError(f"`low` must be less than `high`, but got {lo} >= {hi}")
        elif hi < lowest or lo >= highest:
            raise ValueError(f"The value interval specified by `low` and `high` is [{lo}, "
                             f"{hi}), but {dtype} only supports [{lowest}, {highest})")
        lo, hi = min(max(lo, lowest), highest), min(max(hi, lowest), highest)
        if integral:
            # up, so that no value falls below low; high is exclusive already
            return math.ceil(lo), math.ceil(hi)
        return lo, hi

    if math.prod(shape) <= 1:
        noncontiguous = False
    # a complex number's parts: its limits and its random draws are those of the real dtype
    real = {D.complex64: D.float32, D.complex128: D.float64}.get(dtype, dtype)
    full = (*shape[:-1], 2 * shape[-1]) if noncontiguous else shape
    if dtype is D.bool_:
        lo, hi = bounds(0, 2, 0, 2)
        result = torcia.randint(lo, hi, full, device=device, dtype=dtype)
    elif dtype in _INTEGRAL:
        info = torcia.iinfo(dtype)
        lo, hi = bounds(info.min, info.max + (1 if dtype is not D.int64 else 0), -9, 10)
        result = torcia.randint(lo, hi, full, device=device, dtype=dtype)
    elif dtype in _FLOATING or dtype in _COMPLEX:
        info = torcia.finfo(real)
        lo, hi = bounds(info.min, info.max, -9, 9)
        # uniform_ needs high - low within the dtype's range: halve both and double after
        halve = hi - lo >= torcia.finfo(real).max

        def draw():
            values = torcia.empty(full, device=device, dtype=real)
            if halve:
                return values.uniform_(lo / 2, hi / 2).mul_(2)
            return values.uniform_(lo, hi)

        result = torcia.complex(draw(), draw()) if dtype in _COMPLEX else draw()
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        "torcia.testing.make_tensor().")
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        tiny = 1 if integral else torcia.finfo(real).tiny
        # a complex zero becomes tiny in both parts
        result[result == 0] = complex(tiny, tiny) if dtype in _COMPLEX else tiny
    if not integral:
        result.requires_grad = requires_grad
    return result
