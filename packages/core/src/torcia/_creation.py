"""Tensor creation: from data, filled, ranges, and random."""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia import _opdef, _storage, _tensor
from torcia._dlpack import from_dlpack  # noqa: F401 - torcia.from_dlpack's home
from torcia._tensor import DECOMPOSITIONS, FACTORIES, Tensor, call, canonical_device
from torcia.backend import CPU
from torcia.random import rng_of


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if s.__class__ is not int or s < 0:
            break
    else:
        return size  # plain non-negative ints: nothing to convert or report
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s.item())
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(
                f"size must be a tuple of ints, but got an element of type {type(s).__name__}"
            )
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


def _finish(arr, dev, requires_grad=False) -> Tensor:
    t = Tensor._make(arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _create(op, dtype, device, requires_grad=False, **params) -> Tensor:
    dev = canonical_device(device)
    kernels = dev.kernels if dev.kernels is not None else dev.backend.kernels
    dt = (dtype or D._default[0]).to_numpy()
    try:
        kernel = kernels[op]
    except (KeyError, NotImplementedError):  # a KernelTable raises the latter
        if op not in DECOMPOSITIONS:
            raise
        # a composite the device lacks (zeros...): its decomposition, given the device
        out = DECOMPOSITIONS[op](dtype=dt, device=dev, **params)
        return out.requires_grad_(True) if requires_grad else out
    # zeros/ones/empty name their one parameter: a call without ** costs half as much
    arr = kernel(dtype=dt, **params) if len(params) != 1 else kernel(
        dtype=dt, shape=params["shape"])
    return _finish(arr, dev, requires_grad) if requires_grad else Tensor._make(arr, dev)


def _to_device(arr: np.ndarray, dev):
    if dev is CPU:
        return arr
    return dev.backend.from_host(arr, dev.index)


def _infer_array(data, dtype=None):
    """``data`` as a NumPy array with PyTorch's dtype inference (or in ``dtype``, converted
    once from the values as given, so that float64 data keeps its precision)."""
    if isinstance(data, Tensor):
        return data.detach().cpu().numpy(), True
    if isinstance(data, np.ndarray):
        return D.native_array(data), True
    if isinstance(data, np.generic):
        return D.native_array(np.asarray(data)), True
    if hasattr(data, "__dlpack__") and not isinstance(data, (list, tuple)):
        return D.native_array(np.from_dlpack(data)), True
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        data = _lists_of(data)
    try:
        arr = np.asarray(data)
    except ValueError:
        raise ValueError(_ragged_message(data)) from None
    if dtype is not None and arr.dtype != object:
        with np.errstate(over="ignore"):  # out-of-range floats become inf, as in PyTorch
            return arr.astype(dtype.to_numpy()), False
    if arr.dtype == object:
        raise TypeError(f"Could not infer dtype of {type(data).__name__}: nested sequences must "
                        "be rectangular and hold numbers")
    if arr.dtype.kind == "f":
        arr = arr.astype(D.get_default_dtype().to_numpy())
    elif arr.dtype.kind in "iu":
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "c":
        arr = arr.astype(D.default_complex().to_numpy())
    elif arr.dtype.kind not in "b":
        raise TypeError(f"Could not infer dtype of {arr.dtype}")
    return arr, False


def _ragged_message(data, dim=0):
    """PyTorch's message for nested sequences of unequal lengths."""
    level = [data]
    while level and all(isinstance(x, (list, tuple)) for x in level):
        lengths = [len(x) for x in level]
        for n in lengths[1:]:
            if n != lengths[0]:
                return f"expected sequence of length {lengths[0]} at dim {dim} (got {n})"
        level = [y for x in level for y in x]
        dim += 1
    return "nested sequences must be rectangular and hold numbers"


def _flat(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _lists_of(data):
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_lists_of(x) for x in data]
    return data


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """Build a tensor by copying ``data`` (a number, nested sequence, array or tensor).

    Python floats take the default dtype (float32), ints int64, bools bool; NumPy arrays
    keep their dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([[1, 2], [3, 4]])
    tensor([[1, 2],
            [3, 4]])
    >>> torcia.tensor([1.5, 2.0], dtype=torcia.float64)
    tensor([1.5000, 2.0000], dtype=torcia.float64)
    """
    dtype = None if dtype is None else _dtype_arg(dtype)
    arr, _ = _infer_array(data, dtype)
    if dtype is not None:
        arr = arr.astype(dtype.to_numpy(), copy=False)
    arr = np.array(arr, copy=True)
    if device is None and isinstance(data, Tensor):
        device = data.device
    dev = canonical_device(device)
    return _finish(_to_device(arr, dev), dev, requires_grad)


_dtype_arg = D.dtype_arg


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like :func:`tensor`, but shares memory with ``data`` where it can (a NumPy array or
    tensor already of the right dtype and device).

    Examples
    --------
    >>> import numpy as np, torcia
    >>> a = np.array([1.0, 2.0])
    >>> t = torcia.as_tensor(a); a[0] = 9.0
    >>> t
    tensor([9., 2.], dtype=torcia.float64)
    """
    if isinstance(data, Tensor):
        out = data
        if dtype is not None and data.dtype is not _dtype_arg(dtype):
            out = out.to(_dtype_arg(dtype))
        if device is not None:
            out = out.to(device)
        return out
    if isinstance(data, np.ndarray) and canonical_device(device) is CPU:
        arr = data if dtype is None else data.astype(_dtype_arg(dtype).to_numpy(), copy=False)
        D.from_numpy_dtype(arr.dtype)
        return Tensor._make(D.native_array(arr), CPU)
    return tensor(data, dtype=dtype, device=device)


_UNSET = object()


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=_UNSET) -> Tensor:
    """``obj`` as a tensor, sharing its memory where it can: a tensor, a NumPy array, an
    object with DLPack or the buffer protocol (``bytes``, ``bytearray``), or a storage
    (an untyped one read as ``dtype``, int64 by default); numbers and sequences are
    copied. As ``torch.asarray``.

    ``copy=True`` always copies; ``copy=False`` never does, and raises where sharing is
    impossible (a sequence, another dtype or device). ``requires_grad`` defaults to that
    of a tensor given (which is then returned itself, its graph kept); ``False`` gives a
    detached alias of it.

    Examples
    --------
    >>> import numpy as np, torcia
    >>> a = np.zeros(2, dtype=np.float32)
    >>> t = torcia.asarray(a); a[0] = 5
    >>> t, torcia.asarray(bytearray(b"\\x01\\x00"), dtype=torcia.int16)
    (tensor([5., 0.]), tensor([1], dtype=torcia.int16))
    >>> torcia.asarray([1, 2], copy=False)
    Traceback (most recent call last):
    ...
    ValueError: can't alias arbitrary sequence into a tensor.
    """
    want = None if dtype is None else _dtype_arg(dtype)
    shared = None
    if isinstance(obj, Tensor):
        shared = obj
    elif isinstance(obj, _storage._StorageBase):
        data = obj._data
        if isinstance(obj, _storage.UntypedStorage):
            kind = (want or D.int64).to_numpy()
            data = data[:data.size - data.size % kind.itemsize].view(kind)
        shared = Tensor._make(data, obj._device)
    elif isinstance(obj, np.ndarray) or hasattr(obj, "__dlpack__"):
        shared = Tensor._make(_infer_array(obj)[0], CPU)
    elif not isinstance(obj, (list, tuple, str)):
        try:
            view = memoryview(obj)
        except TypeError:
            view = None
        if view is not None:
            raw = np.frombuffer(view, dtype=(want or D.uint8).to_numpy()) if \
                view.format in ("B", "b", "c") else np.asarray(view)
            shared = Tensor._make(raw, CPU)
    if shared is None:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        out = tensor(obj, dtype=want, device=device)
    else:
        out = shared
        dev = canonical_device(device) if device is not None else out._device
        if (want is not None and want is not out.dtype) or dev is not out._device:
            if copy is False:
                what = (f"dtype '{D.torch_type_name(out.dtype)}' into dtype "
                        f"'{D.torch_type_name(want)}'" if want not in (None, out.dtype) else
                        f"device '{out._device}' into device '{dev}'")
                raise ValueError(f"can't alias tensor with {what}.")
            out = out.to(device=dev, dtype=want or out.dtype)
        if copy and out is shared:
            out = out.clone()
    if requires_grad is _UNSET:
        return out
    if requires_grad:
        return out.requires_grad_(True)  # the tensor given itself, as in PyTorch
    return out.detach() if out.requires_grad else out


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with a NumPy array (changes show in both).

    Examples
    --------
    >>> import numpy as np, torcia
    >>> a = np.zeros(2, dtype=np.float32); t = torcia.from_numpy(a); a[0] = 5
    >>> t
    tensor([5., 0.])
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    D.from_numpy_dtype(ndarray.dtype)
    return Tensor._make(D.native_array(ndarray), CPU)


def _rebuild(arr, device, requires_grad):
    t = tensor(arr, device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


# ----- filled ---------------------------------------------------------------------------


def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor of zeros of the given size.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).shape
    torcia.Size([2, 3])
    """
    return _create("zeros", dtype, device, requires_grad, shape=_size(size))


def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor of ones of the given size.

    Examples
    --------
    >>> import torcia
    >>> torcia.ones(2, 2, dtype=torcia.int64)
    tensor([[1, 1],
            [1, 1]])
    """
    return _create("ones", dtype, device, requires_grad, shape=_size(size))


def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=None,
          pin_memory=False) -> Tensor:
    """An uninitialised tensor of the given size: its values are whatever the memory held.

    Examples
    --------
    >>> import torcia
    >>> torcia.empty(3, 2).shape
    torcia.Size([3, 2])
    """
    return _create("empty", dtype, device, requires_grad, shape=_size(size))


def full(size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor filled with ``fill_value``; its dtype is inferred from the value.

    Examples
    --------
    >>> import torcia
    >>> torcia.full((2,), 7)
    tensor([7, 7])
    """
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    dtype = D.scalar_dtype(fill_value) if dtype is None else _dtype_arg(dtype)
    return _create("full", dtype, device, requires_grad, shape=_size((size,)),
                   fill_value=D.checked_scalar(fill_value, dtype))


def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Zeros of ``input``'s shape, and of its dtype and device unless given.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros_like(torcia.tensor([[1, 2, 3]]))
    tensor([[0, 0, 0]])
    """
    return zeros(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Ones of ``input``'s shape, and of its dtype and device unless given.

    Examples
    --------
    >>> import torcia
    >>> torcia.ones_like(torcia.zeros(2), dtype=torcia.int64)
    tensor([1, 1])
    """
    return ones(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """An uninitialised tensor of ``input``'s shape, and of its dtype and device unless given.

    Examples
    --------
    >>> import torcia
    >>> torcia.empty_like(torcia.zeros(2, 5)).shape
    torcia.Size([2, 5])
    """
    return empty(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False,
              memory_format=None):
    """``fill_value`` in ``input``'s shape, and of its dtype and device unless given.

    Examples
    --------
    >>> import torcia
    >>> torcia.full_like(torcia.zeros(3), 0.5)
    tensor([0.5000, 0.5000, 0.5000])
    """
    return full(input.shape, fill_value, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def rand_like(input, dtype=None, device=None, requires_grad=False, generator=None):
    """:func:`rand` samples in ``input``'s shape, dtype and device (unless given).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.rand_like(torcia.zeros(4, dtype=torcia.float64))
    >>> x.dtype, bool(((x >= 0) & (x < 1)).all())
    (torcia.float64, True)
    """
    return rand(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad, generator=generator)


def randn_like(input, dtype=None, device=None, requires_grad=False, generator=None):
    """:func:`randn` samples in ``input``'s shape, dtype and device (unless given).

    Examples
    --------
    >>> import torcia
    >>> torcia.randn_like(torcia.zeros(2, 3)).shape
    torcia.Size([2, 3])
    """
    return randn(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad, generator=generator)


def randint_like(input, low=0, high=None, dtype=None, device=None, generator=None):
    """:func:`randint` samples from [low, high) in ``input``'s shape, dtype and device
    (unless given); with one bound, it is ``high`` and ``low`` is 0.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.randint_like(torcia.zeros(6), 3)
    >>> x.dtype, bool(((x >= 0) & (x < 3)).all())
    (torcia.float32, True)
    """
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype,
                   device=device or input.device, generator=generator)


# ----- ranges ---------------------------------------------------------------------------


def _num(x):
    return x.item() if isinstance(x, Tensor) else x


def arange(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 when all are ints.

    Examples
    --------
    >>> import torcia
    >>> torcia.arange(5)
    tensor([0, 1, 2, 3, 4])
    >>> torcia.arange(0, 1, 0.25)
    tensor([0.0000, 0.2500, 0.5000, 0.7500])
    """
    start, end, step = _num(start), _num(end), _num(step)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            f"upper bound and larger bound inconsistent with step sign (start={start}, "
            f"end={end}, step={step})"
        )
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = D.int64 if is_int else D.get_default_dtype()
    if _dtype_arg(dtype) is D.int64:
        # PyTorch computes an int64 range in int64: bounds and step truncated first
        start, end, step = int(start), int(end), int(step)
        if step == 0:
            raise ValueError("step must be nonzero")
    return _create("arange", _dtype_arg(dtype), device, requires_grad, start=start, end=end,
                   step=step)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive.

    Examples
    --------
    >>> import torcia
    >>> torcia.linspace(0, 1, 5)
    tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _create("linspace", _dtype_arg(dtype) if dtype else None, device, requires_grad,
                   start=_num(start), end=_num(end), steps=int(steps))


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values from ``base**start`` to ``base**end``, evenly spaced in log.

    Examples
    --------
    >>> import torcia
    >>> torcia.logspace(0, 3, 4)
    tensor([   1.,   10.,  100., 1000.])
    """
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _create("logspace", _dtype_arg(dtype) if dtype else None, device, requires_grad,
                   start=_num(start), end=_num(end), steps=int(steps), base=float(base))


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The identity matrix (ones on the diagonal) of ``n`` rows and ``m`` columns.

    Examples
    --------
    >>> import torcia
    >>> torcia.eye(2, 3)
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    return _create("eye", _dtype_arg(dtype) if dtype else None, device, requires_grad,
                   n=int(n), m=int(n if m is None else m))


# ----- random ---------------------------------------------------------------------------


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples on [0, 1) (for a complex dtype, real and imaginary parts each).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.rand(2, 3); bool(((x >= 0) & (x < 1)).all())
    True
    """
    return _sample("rand", size, generator, dtype, device, requires_grad, 1.0)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples (mean 0, variance 1); for a complex dtype, real and imaginary
    parts each of variance 1/2 (so that ``E[|z|**2] = 1``, as PyTorch).

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> x = torcia.randn(10_000)
    >>> abs(x.mean().item()) < 0.05, abs(x.std().item() - 1) < 0.05
    (True, True)
    """
    return _sample("randn", size, generator, dtype, device, requires_grad, 0.5 ** 0.5)


def _sample(op, size, generator, dtype, device, requires_grad, complex_scale):
    d = _dtype_arg(dtype) if dtype is not None else None
    if d is not None and d.is_complex:
        parts = [_draw_new(op, d.to_real(), device, shape=_size(size), rng=rng_of(generator))
                 * complex_scale for _ in range(2)]
        out = call("complex", tuple(parts), {})  # torcia.complex of two float parts
        return out.requires_grad_() if requires_grad else out
    return _draw_new(op, _float_dtype(dtype, op), device, requires_grad, shape=_size(size),
                     rng=rng_of(generator))


def draw(op, dev, inputs, params) -> Tensor:
    """Run random op ``op`` (a record with a kernel that takes ``rng``) on the tensors
    ``inputs`` with the keyword ``params`` through the dispatch modes, so that vmap
    batches its draws and a tracer records it as a node that draws again on each replay.
    Not differentiable: autograd does not record it. Without a mode it is the kernel call
    it always was, on the same generator, so a seed gives the same numbers."""
    kernels = dev.kernels if dev.kernels is not None else dev.backend.kernels
    try:
        kernel = kernels[op]
    except (KeyError, NotImplementedError):  # a KernelTable raises the latter
        decomposition = DECOMPOSITIONS.get(op)
        if decomposition is None:
            raise
        # a composite the device lacks (uniform...): the draws it is made of, each through
        # here; an op without a tensor input is told the device
        return decomposition(*inputs, **params) if inputs else decomposition(device=dev,
                                                                             **params)
    if not _tensor._modes_on or not _tensor.MODES.modes:
        if inputs:
            return Tensor._make(kernel(*[x._data for x in inputs], **params), dev)
        return Tensor._make(kernel(**params), dev)
    modes = _tensor.MODES.modes
    for mode in modes:
        inputs = mode.on_inputs(op, inputs)
    kernel = _tensor._in_modes(modes, op, kernel, dev)
    result = Tensor._make(kernel(*[x._data for x in inputs], **params), dev)
    for mode in modes:
        mode.on_result(op, inputs, params, result)
    return result


def _draw_on(op, device, params) -> Tensor:
    """:func:`draw` of an op without tensor inputs on ``device`` (a device or its name,
    its index implied)."""
    return draw(op, canonical_device(device), (), params)


def drawing(dev, op):
    """The kernel of random op ``op`` without a tensor input on device ``dev``, called
    outside the dispatch modes (``Tensor.uniform_``...); on a device without one, a
    function of the same arguments that draws through the op's decomposition there and
    returns the array."""
    kernels = dev.kernels if dev.kernels is not None else dev.backend.kernels
    kernel = kernels.get(op)
    if kernel is not None or op not in DECOMPOSITIONS:
        return kernels[op]  # the device's own, or its error for a missing primitive

    def run(*args, **params):
        return DECOMPOSITIONS[op](*args, device=dev, **params)._data

    return run


def _draw_new(op, dtype, device, requires_grad=False, **params) -> Tensor:
    """A random creation op (no tensor inputs) through :func:`draw`."""
    params["dtype"] = dtype.to_numpy()
    out = draw(op, canonical_device(device), (), params)
    return out.requires_grad_() if requires_grad else out


def _float_dtype(dtype, name):
    d = _dtype_arg(dtype) if dtype is not None else D.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating point dtype, got {d}")
    return d


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers drawn uniformly from [low, high); int64 unless ``dtype`` says otherwise.

    Examples
    --------
    >>> import torcia
    >>> torcia.randint(3, 5, (4,)).dtype
    torcia.int64
    """
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    return _draw_new("randint", _dtype_arg(dtype) if dtype else D.int64, device, requires_grad,
                     shape=_size((size,)), low=int(low), high=int(high), rng=rng_of(generator))


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1``.

    Examples
    --------
    >>> import torcia
    >>> torcia.randperm(5).sort().values
    tensor([0, 1, 2, 3, 4])
    """
    return _draw_new("randperm", _dtype_arg(dtype) if dtype else D.int64, device,
                     requires_grad, n=int(n), rng=rng_of(generator))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Normal samples; ``mean`` and ``std`` may be tensors (broadcast) or numbers.

    Examples
    --------
    >>> import torcia
    >>> torcia.normal(torcia.tensor([0.0, 100.0]), 0.01).round().abs()
    tensor([  0., 100.])
    >>> torcia.normal(2.0, 3.0, size=(2, 2)).shape
    torcia.Size([2, 2])
    """
    if isinstance(std, Tensor):
        sa = std.detach()._data
        if sa.size and sa.min() < 0:
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = np.broadcast_shapes(*(tuple(x.shape) if isinstance(x, Tensor) else ()
                                      for x in (mean, std)))
        z = randn(shape, generator=generator, dtype=ref.dtype, device=ref.device)
        return z * std + mean
    if size is None:
        raise TypeError("normal() with scalar mean and std needs a size")
    return _draw_new("normal", _float_dtype(dtype, "normal"), device, requires_grad,
                     shape=_size((size,)), mean=float(mean), std=float(std),
                     rng=rng_of(generator))


def bernoulli(input, p=None, *, generator=None):
    """Draw 0 or 1 with probability ``input`` (or ``p``), elementwise, in input's dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.bernoulli(torcia.tensor([0.0, 1.0, 1.0]))
    tensor([0., 1., 1.])
    """
    probs = input if p is None else full_like(input, p)
    pa = probs.detach()._data
    if pa.size and (pa.min() < 0 or pa.max() > 1):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return draw("bernoulli", input.device, (probs.detach(),), {"rng": rng_of(generator)})


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Sample category indices from rows of (unnormalised) non-negative weights.

    Examples
    --------
    >>> import torcia
    >>> torcia.multinomial(torcia.tensor([0.0, 0.0, 1.0]), 2, replacement=True)
    tensor([2, 2])
    """
    if input.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.ndim}")
    if not replacement and num_samples > input.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    return draw("multinomial", input.device, (input.detach(),),
                {"num_samples": int(num_samples), "replacement": bool(replacement),
                 "rng": rng_of(generator)})


# Tensor's methods make tensors with these (Tensor sits below this module)
FACTORIES.tensor, FACTORIES.empty, FACTORIES.rebuild = tensor, empty, _rebuild
# the random ops' decompositions draw with it (torcia._ops sits below this module)
_opdef.DRAW = _draw_on
