"""Indexing: ``tensor[key]`` and its assignment (``getitem``, ``setitem``, ``index_put``),
which write in place through the Tensor class, and the exports and Tensor methods of the
indexing written beside its ops' declarations in :mod:`torcia._ops.indexing` (gathers and
scatters, ``index_*``, masked ops, ``take``/``put``, ``select``, ``tensor_split``, the
``*_scatter`` functions...).
"""

from __future__ import annotations

import builtins

import numpy as np

from torcia._creation import tensor
from torcia._oplib._common import to_dtype
from torcia._ops import indexing as _declared
from torcia._ops.indexing import check_range as _check_range
from torcia._ops.movement import contiguous
from torcia._ops.pointwise import where
from torcia._ops.views import expand, permute
from torcia._tensor import Tensor, call, check_overlap, write_inplace

#: the public functions written beside the ops' declarations in torcia._ops.indexing
#: (``gather``, ``scatter``, ``masked_fill``, ``take``, ``select``...)
globals().update({fn.__name__: fn for fn in _declared.PUBLIC + _declared.FALLBACK_METHODS})


def _basic_key(shape, key):
    """``key`` as a tuple when it is only in-range ints and slices of ints (the common case,
    checked without the general walk), else None.

    Keys end in an Ellipsis: NumPy then gives a 0-d view for all-int keys, not a scalar
    copy, as PyTorch does."""
    if key.__class__ is int:
        return (key, Ellipsis) if shape and -shape[0] <= key < shape[0] else None
    if key.__class__ is not tuple:
        key = (key,)
    if len(key) > len(shape):
        return None
    for k, size in zip(key, shape):
        cls = k.__class__
        if cls is int:
            if not -size <= k < size:
                return None
        elif cls is not slice or not (
            (k.start is None or k.start.__class__ is int)
            and (k.stop is None or k.stop.__class__ is int)
            and (k.step is None or (k.step.__class__ is int and k.step > 0))
        ):
            return None
    return key + (Ellipsis,)


def _index_key(input, key):
    """Turn a user index into a key of arrays; report out-of-range and bad keys like PyTorch."""
    shape = input._data.shape
    dev = input._device
    if key.__class__ is Tensor and key._device is dev and key._data.dtype.kind in "iu" and (
        shape and dev.backend.xp is np
    ):
        # one integer index tensor on NumPy: NumPy checks the range itself (see getitem)
        return (key._data, Ellipsis), True
    basic = _basic_key(shape, key)
    if basic is not None:
        return basic, False
    # a Python range indexes as the list of its ints, as in PyTorch (not a basic key)
    if isinstance(key, range):
        key = list(key)
    elif isinstance(key, tuple) and builtins.any(isinstance(k, range) for k in key):
        key = tuple(list(k) if isinstance(k, range) else k for k in key)
    if not isinstance(key, tuple):
        key = (key,)
    ndim = len(shape)
    out = []
    dim = 0
    advanced = False
    n_specified = 0
    for k in key:
        if k is None or k is Ellipsis:
            continue
        is_mask = (isinstance(k, Tensor) and k._data.dtype.kind == "b") or (
            isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype.kind == "b")
        n_specified += np.ndim(k._data if isinstance(k, Tensor) else k) if is_mask else 1
    if n_specified > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    for k in key:
        if k is None:
            out.append(None)
            continue
        if k is Ellipsis:
            out.append(Ellipsis)
            dim = ndim - (n_specified - dim)
            continue
        if isinstance(k, (Tensor, list, np.ndarray)):
            if isinstance(k, Tensor):
                if k._device is not dev and k._device.type != "cpu":
                    raise RuntimeError(
                        f"indices should be either on cpu or on the same device as the indexed "
                        f"tensor ({dev})")
                host = k._data if k._device.type == "cpu" else None
                arr = k._data if k._device is dev else dev.backend.from_host(k._data, dev.index)
            else:
                host = arr = np.asarray(k)
                if dev.type != "cpu":
                    arr = dev.backend.xp.asarray(arr)
            kind = arr.dtype.kind
            if kind == "b":
                _check_mask(arr.shape, shape, dim)
                dim += arr.ndim
            elif kind in "iu":
                _check_range(host if host is not None else arr, shape[dim], dim)
                dim += 1
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            out.append(arr)
            advanced = True
            continue
        if isinstance(k, slice):
            step = k.step.item() if isinstance(k.step, Tensor) else k.step
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            out.append(slice(*(int(v) if isinstance(v, Tensor) else v
                               for v in (k.start, k.stop, k.step))))
            dim += 1
            continue
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            size = shape[dim]
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {size}")
            out.append(int(k))
            dim += 1
            continue
        if isinstance(k, bool):
            out.append(k)
            advanced = True
            continue
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
            f"are valid indices (got {type(k).__name__})"
        )
    if not builtins.any(k is Ellipsis for k in out):
        out.append(Ellipsis)  # all-int keys then give a 0-d view, as in _basic_key
    return tuple(out), advanced


def _check_mask(mask_shape, shape, dim):
    for j, m in enumerate(mask_shape):
        if m != shape[dim + j]:
            raise IndexError(
                f"The shape of the mask {list(mask_shape)} at index {j} does not match the "
                f"shape of the indexed tensor {list(shape)} at index {dim + j}")


def _is_array_key(k):
    return not (k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)))


def _consumed(key):
    """How many dimensions of the indexed tensor ``key`` uses (``...`` takes the rest)."""
    return builtins.sum(
        (k.ndim if k.dtype.kind == "b" else 1) if _is_array_key(k) else 1
        for k in key if k is not None and k is not Ellipsis)


def _torch_placement(key, shape):
    """Where PyTorch puts the broadcast dimensions when NumPy would put them elsewhere.

    NumPy counts an integer beside an index array as one more advanced index, so
    ``x[1, :, [0, 4]]`` has its advanced indices apart and the broadcast dimensions go
    first; PyTorch selects with the integer first and only the list is advanced, so they
    stay in place. Returns ``(nb, p)`` (``nb`` broadcast dimensions that NumPy puts first
    and PyTorch at output position ``p``), or None when both rules agree.
    """
    if len(key) == 2 and key[1] is Ellipsis:
        return None  # one index and the Ellipsis (a[idx]): nothing beside it to place
    ints = [i for i, k in enumerate(key) if isinstance(k, (int, np.integer))]
    if not ints or builtins.any(isinstance(k, bool) for k in key):
        return None  # (a bool is an int: without ints, no bools either)
    arrays = [i for i, k in enumerate(key) if _is_array_key(k)]
    if not arrays:
        return None
    numpy_adv = sorted(ints + arrays)
    if numpy_adv[-1] - numpy_adv[0] == len(numpy_adv) - 1:
        return None  # adjacent in NumPy, hence in PyTorch too, at the same place
    rest = [k for k in key if not isinstance(k, (int, np.integer))]
    torch_adv = [i for i, k in enumerate(rest) if _is_array_key(k)]
    if torch_adv[-1] - torch_adv[0] != len(torch_adv) - 1:
        return None  # apart in both: the broadcast dimensions go first in both
    consumed = _consumed(key)
    p = 0
    for k in rest[:torch_adv[0]]:
        p += len(shape) - consumed if k is Ellipsis else 1
    nb = len(np.broadcast_shapes(*(
        (1,) if k.dtype.kind == "b" else k.shape for k in key if _is_array_key(k))))
    return nb, p


def _indexed_shape(key, shape, placement):
    """The shape of ``input[key]`` under PyTorch's rule (``placement`` from above)."""
    nb, p = placement
    arrays = []
    rest = []
    dim = 0
    consumed = _consumed(key)
    for k in key:
        if k is None:
            rest.append(1)
        elif k is Ellipsis:
            n = len(shape) - consumed
            rest.extend(shape[dim:dim + n])
            dim += n
        elif isinstance(k, slice):
            rest.append(len(range(*k.indices(shape[dim]))))
            dim += 1
        elif isinstance(k, (int, np.integer)):
            dim += 1
        elif k.dtype.kind == "b":
            arrays.append((int(k.sum()),))
            dim += k.ndim
        else:
            arrays.append(k.shape)
            dim += 1
    return tuple(rest[:p]) + tuple(np.broadcast_shapes(*arrays)) + tuple(rest[p:])


def _moved(nb, p, n, to_torch):
    """The permutation between NumPy's layout (broadcast dimensions first) and PyTorch's."""
    if to_torch:
        return list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, n))
    return list(range(p, p + nb)) + list(range(p)) + list(range(p + nb, n))


def getitem(input, key):
    """``input[key]``: a view for basic indexing, a copy for advanced indexing.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6).reshape(2, 3)
    >>> torcia.getitem(x, (slice(None), 1))
    tensor([1, 4])
    """
    key, advanced = _index_key(input, key)
    try:
        out = call("getitem", (input,), {"key": key}, view_of=None if advanced else input)
    except IndexError as exc:
        # NumPy's range error, in PyTorch's words
        raise IndexError(str(exc).replace(" for axis ", " for dimension ")) from None
    placement = _torch_placement(key, input._data.shape) if advanced else None
    if placement is not None:
        out = contiguous(permute(out, _moved(*placement, out.ndim, True)))
    return out


def setitem(input, key, value):
    """``input[key] = value`` in place (recorded for autograd as an ``index_put``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(3)
    >>> torcia.setitem(x, 1, 5.0)
    >>> x
    tensor([0., 5., 0.])
    """
    k, advanced = _index_key(input, key)
    if not isinstance(value, Tensor):
        value = tensor(value, dtype=input.dtype, device=input.device)
    elif value.dtype is not input.dtype:
        value = to_dtype(value, input.dtype)
    placement = _torch_placement(k, input._data.shape) if advanced else None
    if placement is not None and value.ndim:
        target = _indexed_shape(k, input._data.shape, placement)
        try:
            np.broadcast_shapes(tuple(value.shape), target)
            if value.ndim > len(target):
                raise ValueError
        except ValueError:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                f"broadcast to indexing result of shape {list(target)}") from None
        value = permute(expand(value, *target), _moved(*placement, len(target), False))
    if not advanced:
        # PyTorch copies into the region input[key]: what the value may not partly overlap
        check_overlap(call("getitem", (input,), {"key": k}, view_of=input), (value,))
    write_inplace(lambda x, v: call("index_put", (x, v), {"key": k, "accumulate": False}),
                  input, (value,), {}, (value,) if advanced else ())


def index_put(input, indices, values, accumulate=False):
    """Out-of-place ``input[indices] = values`` (or ``+=`` with ``accumulate``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(4)
    >>> torcia.index_put(x, (torcia.tensor([0, 2]),), torcia.tensor(5.0))
    tensor([5., 0., 5., 0.])
    >>> torcia.index_put(x, (torcia.tensor([1, 1]),), torcia.tensor(1.0), accumulate=True)
    tensor([0., 2., 0., 0.])
    """
    k, _ = _index_key(input, tuple(indices))
    return call("index_put", (input, values), {"key": k, "accumulate": bool(accumulate)})


def where_method(self, condition, y):
    """``Tensor.where(condition, y)``: ``torcia.where(condition, self, y)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, -2, 3])
    >>> x.where(x > 0, 0)
    tensor([1, 0, 3])
    """
    return where(condition, self, y)


#: the functions here that are also Tensor methods, under the same name
METHODS = tuple(fn.__name__ for fn in _declared.METHODS) + ("index_put",)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = _declared.INPLACE + ("index_reduce",)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = tuple(fn.__name__ for fn in _declared.FALLBACK_METHODS)

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = (
    "index_fill", "masked_scatter", "put", "fill_diagonal",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "getitem", "index_put", "setitem",
))
