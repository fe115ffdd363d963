"""Tensors from data: ``tensor``, ``as_tensor``, ``asarray``, ``from_numpy`` (and
``from_dlpack``), with PyTorch's inference of a dtype from the data. The creation ops'
public functions (``zeros``, ``arange``...) are written beside their declarations in
:mod:`torcia._ops.creation`, the random ops' (``rand``, ``normal``...) in
:mod:`torcia._ops.random`."""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia import _storage
from torcia._dlpack import from_dlpack  # noqa: F401 - torcia.from_dlpack's home
from torcia._ops.creation import _dtype_arg, empty
from torcia._tensor import FACTORIES, Tensor, canonical_device
from torcia.backend import CPU


def _finish(arr, dev, requires_grad=False) -> Tensor:
    t = Tensor._make(arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


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
            return D.convert(arr, dtype.to_numpy()), False
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
        arr = D.convert(arr, dtype.to_numpy(), copy=False)
    arr = np.array(arr, copy=True)
    if device is None and isinstance(data, Tensor):
        device = data.device
    dev = canonical_device(device)
    return _finish(_to_device(arr, dev), dev, requires_grad)



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
        arr = data if dtype is None else D.convert(data, _dtype_arg(dtype).to_numpy(),
                                                   copy=False)
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


# Tensor's methods make tensors with these (Tensor sits below this module)
FACTORIES.tensor, FACTORIES.empty, FACTORIES.rebuild = tensor, empty, _rebuild
