"""Mixed precision: ``autocast`` and ``GradScaler``, as ``torch.amp``.

Inside ``autocast(device_type, dtype)``, ops on that device's tensors run in the dtype
PyTorch's lists give them: matrix products and convolutions in the low-precision dtype,
losses, reductions that lose accuracy and linear algebra in float32, and ops that combine
several tensors (``cat``, ``stack``...) in the widest of their dtypes. The casts are
ordinary recorded ops, so gradients flow back to the parameters in their own dtype.

On the CPU, NumPy has no fast float16/bfloat16 matrix products: autocast there gives
PyTorch's numerics, not speed.

Examples
--------
>>> import torcia
>>> a = torcia.randn(4, 4)
>>> with torcia.autocast("cpu", dtype=torcia.bfloat16):
...     (a @ a).dtype, (a @ a).sum().dtype
(torcia.bfloat16, torcia.bfloat16)
"""

from __future__ import annotations

import functools
import math

from torcia import _dtype as D
from torcia import _tensor
from torcia._autocast import (  # noqa: F401 - the policy the ops declare with, published here
    BANNED,
    FLOAT32,
    LOWER_PRECISION,
    PROMOTE,
    autocast_as,
    check_lists,
    op_policy,
)
from torcia._switches import Switches
from torcia._tensor import AUTOCAST, AUTOCAST_ORDER, DispatchMode, Tensor, active_modes

_DEFAULTS = {"cpu": D.bfloat16, "cuda": D.float16}


class _Region:
    __slots__ = ("device_type", "dtype")

    def __init__(self, device_type, dtype):
        self.device_type = device_type
        self.dtype = dtype


def _cast_inputs(op, inputs):
    region = AUTOCAST.region
    banned = BANNED.get(region.device_type, {}).get(op)
    if banned is not None and any(
            isinstance(x, Tensor) and x.device.type == region.device_type for x in inputs):
        raise RuntimeError(banned.replace("torch.", "torcia."))
    policy = op_policy(region.device_type, op)
    if policy is None:
        return inputs
    if policy == "lower":
        target = region.dtype
    elif policy == "float32":
        target = D.float32
    else:
        floats = [x.dtype for x in inputs if isinstance(x, Tensor) and x.dtype.is_floating_point]
        if len(set(floats)) < 2:
            return inputs
        target = functools.reduce(D.promote_types, floats)
    return tuple(_cast(x, target, region.device_type) for x in inputs)


def _cast(x, dtype, device_type):
    if (isinstance(x, Tensor) and x.dtype is not dtype and x.dtype.is_floating_point
            and x.device.type == device_type):
        return _tensor.call("cast", (x,), {"dtype": dtype.to_numpy()})  # torcia.to_dtype
    return x


class _AutocastMode(DispatchMode):
    """Casts the inputs of the ops on autocast's lists; first among the dispatch modes."""

    order = AUTOCAST_ORDER

    def on_inputs(self, op, inputs):
        if not AUTOCAST.enabled:
            return inputs
        return _cast_inputs(op, inputs)


class autocast:
    """Context manager and decorator running ops of ``device_type`` in mixed precision.

    Parameters
    ----------
    device_type : str
        "cpu" or "cuda": only tensors on that device are cast.
    dtype : torcia.dtype, optional
        The low-precision dtype: bfloat16 on "cpu", float16 on "cuda" by default.
    enabled : bool
        False makes the region a no-op (and turns autocast off inside an outer one).

    Examples
    --------
    >>> import torcia
    >>> layer = torcia.nn.Linear(4, 2)
    >>> with torcia.autocast("cpu", dtype=torcia.bfloat16):
    ...     y = layer(torcia.randn(3, 4))
    >>> y.dtype
    torcia.bfloat16
    """

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        if device_type not in _DEFAULTS:
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got "
                             f"{device_type!r}")
        self.device_type = device_type
        self.dtype = dtype or _SWITCHES.dtypes[device_type]
        if self.dtype not in (D.float16, D.bfloat16):
            raise ValueError(f"autocast: dtype must be torcia.float16 or torcia.bfloat16, got "
                             f"{self.dtype}")
        self.enabled = bool(enabled)

    def __enter__(self):
        check_lists()  # the lists' first use, before any state changes
        self._prev = (AUTOCAST.enabled, getattr(AUTOCAST, "region", None))
        AUTOCAST.enabled = self.enabled
        AUTOCAST.region = _Region(self.device_type, self.dtype)
        # the outermost region of the thread enters the mode; inner ones change its state
        self._mode = None
        if self._prev[1] is None:
            self._mode = _AutocastMode().__enter__()
        return self

    def __exit__(self, *exc):
        AUTOCAST.enabled, AUTOCAST.region = self._prev
        if self._mode is not None:
            self._mode.__exit__(*exc)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_enabled(device_type=None) -> bool:
    """Whether autocast is on for ``device_type`` (the CUDA one when None).

    Examples
    --------
    >>> import torcia
    >>> with torcia.autocast("cpu"):
    ...     print(torcia.is_autocast_enabled("cpu"))
    True
    >>> torcia.is_autocast_enabled("cpu")
    False
    """
    if not AUTOCAST.enabled:
        return False
    return device_type is None or AUTOCAST.region.device_type == device_type


def get_autocast_dtype(device_type="cpu"):
    """The dtype that autocast casts to on ``device_type``.

    Examples
    --------
    >>> import torcia
    >>> torcia.get_autocast_dtype("cpu")
    torcia.bfloat16
    >>> with torcia.autocast("cpu", dtype=torcia.float16):
    ...     print(torcia.get_autocast_dtype("cpu"))
    torcia.float16
    """
    region = getattr(AUTOCAST, "region", None)
    if region is not None and region.device_type == device_type:
        return region.dtype
    return _SWITCHES.dtypes[device_type]


def _cast_all(value, dtype, device_type):
    """``value`` with every floating tensor in it (through tuples, lists and dicts) cast."""
    if isinstance(value, (tuple, list)):
        return type(value)(_cast_all(v, dtype, device_type) for v in value)
    if isinstance(value, dict):
        return {k: _cast_all(v, dtype, device_type) for k, v in value.items()}
    return _cast(value, dtype, device_type)


def is_autocast_cpu_enabled() -> bool:
    """``is_autocast_enabled("cpu")`` (PyTorch's older name).

    Examples
    --------
    >>> import torcia
    >>> torcia.is_autocast_cpu_enabled()
    False
    """
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    """``get_autocast_dtype("cpu")`` (PyTorch's older name).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_autocast_cpu_dtype()
    torcia.bfloat16
    """
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    """``get_autocast_dtype("cuda")`` (PyTorch's older name).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_autocast_gpu_dtype()
    torcia.float16
    """
    return get_autocast_dtype("cuda")


def is_autocast_cache_enabled() -> bool:
    """torcia's autocast casts at each op and keeps no cache of cast weights: False.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_autocast_cache_enabled()
    False
    """
    return False


def clear_autocast_cache() -> None:
    """Nothing to clear: torcia's autocast keeps no cache (see
    :func:`is_autocast_cache_enabled`).

    Examples
    --------
    >>> import torcia
    >>> torcia.clear_autocast_cache()
    """


class _Switches(Switches):
    """What the setter functions (``set_autocast_enabled``...) changed on this thread:
    the dtype per device type, the autocast mode they entered, and the nesting count."""

    mode = None
    nesting = 0
    cache_enabled = True

    def __init__(self):
        self.dtypes = dict(_DEFAULTS)  # a thread's own: set_autocast_dtype changes it


_SWITCHES = _Switches()


def _device_type_arg(device_type, fn):
    if device_type not in _DEFAULTS:
        raise RuntimeError(f"{fn}(): unsupported device type {device_type!r}: torcia's "
                           "autocast supports 'cpu' and 'cuda'")
    return device_type


def set_autocast_enabled(device_type, enabled=None) -> None:
    """Turn autocast on or off for ``device_type`` on this thread, outside any ``with
    autocast(...)`` block, as PyTorch's function (``set_autocast_enabled(enabled)`` alone
    means "cuda"). On, ops on that device run in the dtype of
    :func:`set_autocast_dtype` (bfloat16 on "cpu", float16 on "cuda" by default).

    Examples
    --------
    >>> import torcia
    >>> torcia.set_autocast_enabled("cpu", True)
    >>> (torcia.ones(2, 2) @ torcia.ones(2, 2)).dtype
    torcia.bfloat16
    >>> torcia.set_autocast_enabled("cpu", False)
    >>> torcia.is_autocast_enabled("cpu")
    False
    """
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _device_type_arg(device_type, "set_autocast_enabled")
    if enabled:
        check_lists()
        AUTOCAST.region = _Region(device_type, _SWITCHES.dtypes[device_type])
        AUTOCAST.enabled = True
        if _SWITCHES.mode is None and not any(isinstance(m, _AutocastMode)
                                              for m in active_modes()):
            _SWITCHES.mode = _AutocastMode().__enter__()
        return
    region = getattr(AUTOCAST, "region", None)
    if region is not None and region.device_type == device_type:
        AUTOCAST.enabled = False
    if _SWITCHES.mode is not None:
        _SWITCHES.mode.__exit__(None, None, None)
        _SWITCHES.mode = None
        AUTOCAST.region = None


def set_autocast_dtype(device_type, dtype) -> None:
    """The dtype autocast uses for ``device_type`` when none is given (float16 or
    bfloat16), on this thread.

    Examples
    --------
    >>> import torcia
    >>> before = torcia.get_autocast_dtype("cpu")
    >>> torcia.set_autocast_dtype("cpu", torcia.float16)
    >>> torcia.get_autocast_dtype("cpu")
    torcia.float16
    >>> torcia.set_autocast_dtype("cpu", before)
    """
    _device_type_arg(device_type, "set_autocast_dtype")
    if dtype not in (D.float16, D.bfloat16):
        raise ValueError(f"autocast: dtype must be torcia.float16 or torcia.bfloat16, got "
                         f"{dtype}")
    _SWITCHES.dtypes[device_type] = dtype
    region = getattr(AUTOCAST, "region", None)
    if region is not None and region.device_type == device_type and _SWITCHES.mode:
        region.dtype = dtype


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """``set_autocast_enabled("cpu", enabled)`` (PyTorch's older name).

    Examples
    --------
    >>> import torcia
    >>> torcia.set_autocast_cpu_enabled(True)
    >>> torcia.is_autocast_cpu_enabled()
    True
    >>> torcia.set_autocast_cpu_enabled(False)
    """
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype) -> None:
    """``set_autocast_dtype("cpu", dtype)`` (PyTorch's older name).

    Examples
    --------
    >>> import torcia
    >>> before = torcia.get_autocast_cpu_dtype()
    >>> torcia.set_autocast_cpu_dtype(torcia.float16)
    >>> torcia.get_autocast_cpu_dtype()
    torcia.float16
    >>> torcia.set_autocast_cpu_dtype(before)
    """
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype) -> None:
    """``set_autocast_dtype("cuda", dtype)`` (PyTorch's older name).

    Examples
    --------
    >>> import torcia
    >>> before = torcia.get_autocast_gpu_dtype()
    >>> torcia.set_autocast_gpu_dtype(torcia.bfloat16)
    >>> torcia.get_autocast_gpu_dtype()
    torcia.bfloat16
    >>> torcia.set_autocast_gpu_dtype(before)
    """
    set_autocast_dtype("cuda", dtype)


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Accepted and inert: torcia's autocast casts at each op and keeps no cache of cast
    weights (see :func:`is_autocast_cache_enabled`), so there is nothing to switch.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_autocast_cache_enabled(False)
    >>> torcia.is_autocast_cache_enabled()
    False
    >>> torcia.set_autocast_cache_enabled(True)
    """
    _SWITCHES.cache_enabled = bool(enabled)


def autocast_increment_nesting() -> int:
    """Count one more nested autocast region on this thread; returns the new depth.

    Examples
    --------
    >>> import torcia
    >>> depth = torcia.autocast_increment_nesting()
    >>> torcia.autocast_decrement_nesting() == depth - 1
    True
    """
    _SWITCHES.nesting += 1
    return _SWITCHES.nesting


def autocast_decrement_nesting() -> int:
    """Count one autocast region less; at depth 0 the (empty) cast cache is cleared, as
    PyTorch does. Returns the new depth.

    Examples
    --------
    >>> import torcia
    >>> depth = torcia.autocast_increment_nesting()
    >>> torcia.autocast_decrement_nesting() == depth - 1
    True
    """
    _SWITCHES.nesting -= 1
    if _SWITCHES.nesting == 0:
        clear_autocast_cache()
    return _SWITCHES.nesting


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` supports ``device_type`` ("cpu" and "cuda").

    Examples
    --------
    >>> import torcia
    >>> torcia.amp.is_autocast_available("cpu"), torcia.amp.is_autocast_available("mps")
    (True, False)
    """
    return device_type in _DEFAULTS


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorator for a custom autograd Function's ``forward`` under autocast.

    With ``cast_inputs`` None the forward runs in the caller's autocast state, which is
    recorded on ``ctx`` for :func:`custom_bwd`; with a dtype, inside an enabled autocast
    region the floating-point tensor arguments are cast to it and the forward runs with
    autocast off.

    Examples
    --------
    >>> import torcia
    >>> from torcia.amp import custom_bwd, custom_fwd
    >>> class Twice(torcia.autograd.Function):
    ...     @staticmethod
    ...     @custom_fwd(device_type="cpu", cast_inputs=torcia.float32)
    ...     def forward(ctx, x):
    ...         return x * 2
    ...     @staticmethod
    ...     @custom_bwd(device_type="cpu")
    ...     def backward(ctx, grad):
    ...         return grad * 2
    >>> with torcia.autocast("cpu"):
    ...     Twice.apply(torcia.ones(2, dtype=torcia.bfloat16)).dtype
    torcia.float32
    """
    if device_type not in _DEFAULTS:
        raise ValueError(f"custom_fwd: device_type must be 'cpu' or 'cuda', got "
                         f"{device_type!r}")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type,
                                 cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast_all(args, cast_inputs, device_type),
                           **_cast_all(kwargs, cast_inputs, device_type))
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator for a custom autograd Function's ``backward``: it runs in the autocast
    state its forward ran in (see :func:`custom_fwd`).

    Examples
    --------
    >>> import torcia
    >>> class Square(torcia.autograd.Function):
    ...     @staticmethod
    ...     @torcia.amp.custom_fwd(device_type="cpu")
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     @torcia.amp.custom_bwd(device_type="cpu")
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * grad
    >>> x = torcia.tensor([3.0], requires_grad=True)
    >>> Square.apply(x).backward()
    >>> x.grad
    tensor([6.])
    """
    if device_type not in _DEFAULTS:
        raise ValueError(f"custom_bwd: device_type must be 'cpu' or 'cuda', got "
                         f"{device_type!r}")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        enabled = getattr(ctx, "_fwd_used_autocast", False)
        dtype = getattr(ctx, "_dtype", _DEFAULTS[device_type])
        with autocast(device_type=device_type, enabled=enabled, dtype=dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd


class GradScaler:
    """Scale the loss so that small float16 gradients do not underflow, and skip the
    optimizer steps whose gradients overflowed.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> scaler = torcia.amp.GradScaler(init_scale=4.0)
    >>> scaler.scale((w * 2).sum()).backward(); w.grad
    tensor([8.])
    """

    def __init__(self, device="cpu", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self.device = device
        self._enabled = enabled
        self._scale = float(init_scale)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer: dict = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """``outputs`` (a tensor, or lists/tuples/dicts of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale, in place, noting any inf/NaN."""
        if not self._enabled:
            return
        state = self._per_optimizer.setdefault(id(optimizer), {"unscaled": False,
                                                               "found_inf": False})
        if state["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        inv = 1.0 / self._scale
        # one sum per gradient, added up on its device: an inf or NaN anywhere makes the
        # total non-finite, and reading it back is the one wait for the device per step
        totals: dict = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                data = p.grad._data
                total = _total(data)
                key = p.grad.device
                totals[key] = total if key not in totals else totals[key] + total
                data *= inv
                p.grad._vc[0] += 1
        state["unscaled"] = True
        state["found_inf"] = not all(math.isfinite(float(t)) for t in totals.values())

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` unless the (unscaled) gradients hold inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._per_optimizer.get(id(optimizer))
        if state is None or not state["unscaled"]:
            self.unscale_(optimizer)
            state = self._per_optimizer[id(optimizer)]
        if state["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        """Lower the scale after a skipped step; raise it after ``growth_interval`` good
        steps in a row."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        elif any(s["found_inf"] for s in self._per_optimizer.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: dict) -> None:
        if not self._enabled:
            return
        if not state:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state["scale"])
        self._growth_factor = float(state["growth_factor"])
        self._backoff_factor = float(state["backoff_factor"])
        self._growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])


def _total(arr):
    """The sum of ``arr``'s elements on its device (float64 for floats: no overflow of
    finite values), finite exactly when every element is."""
    return arr.sum(dtype="float64") if arr.dtype.kind == "f" else arr.sum()

