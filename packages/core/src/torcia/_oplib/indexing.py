"""Indexing: ``tensor[key]`` and its assignment, the slices written with it (``select``,
``tensor_split``, ``hsplit``...), gathers and scatters, ``index_*``, masked ops,
``nonzero``, ``take``/``put`` and the ``*_scatter`` functions.
"""

from __future__ import annotations

import builtins

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia._creation import tensor
from torcia._grad_mode import STATE as _GRAD
from torcia._oplib._common import _nonzero_tuple, _readable_value, _size_at
from torcia._oplib.elementwise import to_dtype, where
from torcia._oplib.views import cat, contiguous, expand, permute, split
from torcia._ops import indexing as _declared
from torcia._ops.indexing import check_range as _check_range
from torcia._ops.indexing import index_tensor as _index_tensor
from torcia._tensor import Tensor, _torch_name, _wrap_dim, call, check_overlap, write_inplace

#: the public functions declared beside their ops in torcia._ops.indexing (``gather``,
#: ``scatter``, ``index_add``...)
globals().update({fn.__name__: fn for fn in _declared.PUBLIC})


def masked_fill(input, mask, value):
    """Fill ``input`` with ``value`` where the bool ``mask`` (broadcast) is True.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, -2.0, 3.0])
    >>> torcia.masked_fill(x, x < 0, 0.0)
    tensor([1., 0., 3.])
    """
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with "
                           f"dtype {mask.dtype.name}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
        number = None if value._requires_grad else _readable_value(value)
        if number is None:
            # a value in the graph (where() differentiates both), or one without a number
            # to read (meta, batched by vmap), is a tensor operand
            return where(mask, to_dtype(value, input.dtype), input)
        value = number
    return call("masked_fill", (input, mask), {"value": D.checked_scalar(value, input.dtype)})


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


def nonzero(input, *, as_tuple=False):
    """Indices of the nonzero elements: an ``(n, ndim)`` int64 tensor, or one index tensor
    per dim with ``as_tuple``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nonzero(torcia.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    if as_tuple:
        return _nonzero_tuple(input)
    return call("nonzero", (input,), {})


def argwhere(input):
    """As ``nonzero(input)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.argwhere(torcia.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    return nonzero(input)


def masked_select(input, mask):
    """The elements of ``input`` where the bool ``mask`` (broadcast) is True, as 1-D.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, -2], [-3, 4]])
    >>> torcia.masked_select(x, x > 0)
    tensor([1, 4])
    """
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype.name}")
    _broadcast_check(input.shape, mask.shape)
    return call("masked_select", (input, mask), {})


def _broadcast_check(a, b):
    for i, (x, y) in enumerate(zip(reversed(a), reversed(b))):
        if x != y and x != 1 and y != 1:
            dim = max(len(a), len(b)) - 1 - i
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension {dim}")


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Reduce ``src`` into a copy of ``input`` at ``index`` along ``dim`` with ``reduce``
    ("sum", "prod", "mean", "amax" or "amin"); ``include_self`` counts input's own values.

    Examples
    --------
    >>> import torcia
    >>> torcia.scatter_reduce(torcia.zeros(2), 0, torcia.tensor([0, 0, 1]),
    ...                       torcia.tensor([1.0, 2.0, 3.0]), "amax")
    tensor([2., 3.])
    """
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = _wrap_dim(dim, input.ndim)
    _index_tensor(index, "scatter_reduce")
    _check_range(index._data, _size_at(input, d), d, RuntimeError)
    if src.dtype is not input.dtype:
        raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype, got "
                           f"{input.dtype.name} and {src.dtype.name}")
    if input.is_complex() and reduce in ("amax", "amin"):
        raise NotImplementedError(f'"scatter_gather_tensor_cpu_reduce_{reduce}" not '
                                  f"implemented for '{_torch_name(input.dtype)}'")
    if input.is_complex() and (input._requires_grad or src._requires_grad) and _GRAD.enabled:
        # its gradients are real formulas (prod's, mean's): torch refuses as well
        raise RuntimeError("scatter_reduce does not support automatic differentiation for "
                           "outputs with complex dtype.")
    return call("scatter_reduce", (input, index, src),
                {"dim": d, "reduce": reduce, "include_self": bool(include_self)})


def take(input, index):
    """Elements of the flattened ``input`` at ``index``; the result has ``index``'s shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.take(torcia.tensor([[1, 2], [3, 4]]), torcia.tensor([0, 3]))
    tensor([1, 4])
    """
    return input.reshape(-1)[_flat_index(index, input.numel())].reshape(index.shape)


def _flat_index(index, numel):
    """``take``/``put``'s indices into the flattened input, negative ones counted from the
    end, as a 1-D tensor; one outside ``[-numel, numel)`` raises PyTorch's IndexError."""
    idx = index.reshape(-1)
    # min and max, not a boolean selection, which vmap's batched indices cannot answer
    _check_range(idx._data, numel, 0, message=lambda bad: f"out of range: tried to access "
                 f"index {bad} on a tensor of {numel} elements.")
    return where(idx < 0, idx + numel, idx)


def unravel_index(indices, shape):
    """Flat indices into ``shape`` as a tuple of coordinate tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.unravel_index(torcia.tensor([5, 1]), (2, 3))
    (tensor([1, 0]), tensor([2, 1]))
    """
    idx = indices if isinstance(indices, Tensor) else C.tensor(indices)
    if idx.is_floating_point():
        raise TypeError("expected 'indices' to be integer dtype, but got "
                        f"{idx.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = int(np.prod(shape))
    if not total:
        if idx.numel():
            raise RuntimeError("ZeroDivisionError")  # PyTorch's words
        return tuple(C.zeros(idx.shape, dtype=D.int64, device=idx.device) for _ in shape)
    # with tensor ops (they run on the meta device and under vmap); an index out of range
    # wraps around, as PyTorch's (which does not check)
    rest = idx.long() % total
    coords = []
    for size in reversed(shape):
        coords.append(rest % size)
        rest = rest // size
    return tuple(reversed(coords))


def index_fill(input, dim, index, value):
    """A copy of ``input`` with the slices at ``index`` along ``dim`` set to ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.index_fill(torcia.zeros(2, 3), 1, torcia.tensor([0, 2]), 1.0)
    tensor([[1., 0., 1.],
            [1., 0., 1.]])
    """
    d = _wrap_dim(dim, input.ndim)
    size = _size_at(input, d)
    _check_range(index._data, size, d, IndexError)
    mask_shape = [1] * input.ndim
    if input.ndim:
        mask_shape[d] = size
    # out of place: an index batched by vmap writes a batched mask
    mask = C.zeros(size, dtype=D.bool_, device=input.device).scatter(0, index.reshape(-1), True)
    return input.masked_fill(mask.reshape(mask_shape), value)


def masked_scatter(input, mask, source):
    """A copy of ``input`` with the positions where ``mask`` is True filled, in order, from
    ``source``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(4)
    >>> mask = torcia.tensor([True, False, True, False])
    >>> torcia.masked_scatter(x, mask, torcia.tensor([1.0, 2.0]))
    tensor([1., 0., 2., 0.])
    """
    m = mask.expand(*input.shape) if mask.shape != input.shape else mask
    flat_mask = m.reshape(-1)
    taken = flat_mask.long().cumsum(0)  # how many masked positions up to each
    src = source.reshape(-1)
    # the count read from the array, as _check_range reads indices: the meta device's
    # stand-ins and vmap's batched arrays answer max()
    if taken.numel() and int(taken._data.max()) > src.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many "
                           "elements as ones in mask")
    gathered = src[(taken - 1).clamp(min=0)]
    return where(flat_mask, gathered.to(input.dtype), input.reshape(-1)).reshape(
        input.shape)


def put(input, index, source, accumulate=False):
    """A copy of ``input`` with the flattened positions ``index`` set from ``source`` (or
    increased by it with ``accumulate``).

    Examples
    --------
    >>> import torcia
    >>> torcia.put(torcia.zeros(2, 2), torcia.tensor([0, 3]), torcia.tensor([5.0, 6.0]))
    tensor([[5., 0.],
            [0., 6.]])
    """
    flat = input.reshape(-1)
    idx = _flat_index(index, flat.numel())
    if accumulate:
        out = flat.index_add(0, idx, source.reshape(-1).to(input.dtype))
    else:
        out = flat.index_copy(0, idx, source.reshape(-1).to(input.dtype))
    return out.reshape(input.shape)


def select_scatter(input, src, dim, index):
    """A copy of ``input`` with ``input.select(dim, index)`` replaced by ``src``.

    Examples
    --------
    >>> import torcia
    >>> torcia.select_scatter(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]), 0, 1)
    tensor([[0., 0.],
            [1., 2.]])
    """
    out = input.clone()
    key = [slice(None)] * input.ndim
    key[dim] = index
    out[tuple(key)] = src
    return out


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of ``input`` with the slice ``start:end:step`` along ``dim`` replaced.

    Examples
    --------
    >>> import torcia
    >>> torcia.slice_scatter(torcia.zeros(4), torcia.ones(2), start=0, step=2)
    tensor([1., 0., 1., 0.])
    """
    out = input.clone()
    key = [slice(None)] * input.ndim
    key[dim] = slice(start, end, step)
    out[tuple(key)] = src
    return out


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of ``input`` with the diagonal ``(offset, dim1, dim2)`` replaced by ``src``.

    Examples
    --------
    >>> import torcia
    >>> torcia.diagonal_scatter(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    out = input.clone()
    out.diagonal(offset, dim1, dim2).copy_(src)
    return out


def fill(input, value):
    """A tensor like ``input`` filled with ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fill(torcia.zeros(2), 7.0)
    tensor([7., 7.])
    """
    return C.full_like(input, value.item() if isinstance(value, Tensor) else value)


def fill_diagonal(input, fill_value, wrap=False):
    """A copy of ``input`` (2-D, or N-D with equal sizes) with its main diagonal set to
    ``fill_value``; ``wrap`` continues the diagonal below a tall matrix, as NumPy's.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(3, 2).fill_diagonal(5.0)
    tensor([[5., 0.],
            [0., 5.],
            [0., 0.]])
    >>> torcia.zeros(5, 2).fill_diagonal(5.0, wrap=True)
    tensor([[5., 0.],
            [0., 5.],
            [0., 0.],
            [5., 0.],
            [0., 5.]])
    """
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(tuple(input.shape), dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return where(C.tensor(mask, device=input.device),
                      C.full_like(input, fill_value), input)


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


_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """Reduce the slices of ``source`` into ``input`` at ``index`` along ``dim`` with
    ``reduce`` ("prod", "mean", "amax" or "amin"); ``include_self=False`` leaves the
    indexed values of ``input`` out of the reduction.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(3)
    >>> torcia.index_reduce(x, 0, torcia.tensor([0, 0, 2]), torcia.tensor([2.0, 3.0, 4.0]),
    ...                     "prod")
    tensor([6., 1., 4.])
    """
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if index.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (D.int64, D.int32):
        raise IndexError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                         f"{index.dtype}")
    d = dim % max(input.ndim, 1)
    src = source if source.ndim else source.reshape(1)
    if index.numel() != (src.shape[d] if src.ndim else 1):
        raise IndexError(f"index_reduce_(): Number of indices ({index.numel()}) should be "
                         f"equal to source.size(dim) ({src.shape[d]})")
    if input.is_complex() and (not include_self or reduce in ("amax", "amin")):
        # PyTorch's kernels: no complex one without the input's values, nor an order
        kernel = ("index_reduce_func_exclude_input_init" if not include_self else
                  "maximum_cpu" if reduce == "amax" else "minimum_cpu")
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_torch_name(input.dtype)}'")
    if input.ndim == 0:
        return input.reshape(1).scatter_reduce(0, index.reshape(-1).long(), src, reduce,
                                               include_self=include_self).reshape(())
    shape = [1] * input.ndim
    shape[d] = -1
    idx = index.reshape(-1).long().reshape(shape).expand(*src.shape)
    return input.scatter_reduce(d, idx, src, reduce, include_self=include_self)


def nonzero_static(input, *, size, fill_value=-1):
    """The indices of the nonzero elements (as :func:`torcia.nonzero`), cut or padded with
    ``fill_value`` rows to exactly ``size`` rows.

    Examples
    --------
    >>> import torcia
    >>> torcia.nonzero_static(torcia.tensor([0, 3, 0, 5]), size=3)
    tensor([[ 1],
            [ 3],
            [-1]])
    """
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got "
                           f"{size}")
    nz = input.nonzero()
    n = nz.shape[0]
    if n >= size:
        return nz[:size]
    pad = C.full((size - n, input.ndim), fill_value, dtype=D.int64, device=input.device)
    return cat([nz, pad], 0)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of ``input`` with ``src`` written into its ``as_strided(size, stride,
    storage_offset)`` view (differentiable in both).

    Examples
    --------
    >>> import torcia
    >>> torcia.as_strided_scatter(torcia.zeros(4), torcia.tensor([1.0, 2.0]), (2,), (2,))
    tensor([1., 0., 2., 0.])
    """
    out = input.clone()
    out.as_strided(tuple(size), tuple(stride), storage_offset or 0).copy_(src)
    return out


def select(input, dim, index):
    """The slice of ``input`` at ``index`` along ``dim``, without that dimension (a view).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.select(x, 1, 0)
    tensor([1, 3])
    """
    d = _wrap_dim(dim, input.ndim)
    return getitem(input, (slice(None),) * d + (index,))


def tensor_split(input, indices_or_sections, dim=0):
    """Split into ``n`` nearly equal pieces (the first ones larger), or at indices.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor_split(torcia.arange(7), 3)
    (tensor([0, 1, 2]), tensor([3, 4]), tensor([5, 6]))
    >>> torcia.tensor_split(torcia.arange(7), [1, 5])
    (tensor([0]), tensor([1, 2, 3, 4]), tensor([5, 6]))
    """
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.ndim > 1 or indices_or_sections.dtype is not D.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor of dtype long, but "
                               f"got a tensor with {indices_or_sections.ndim} dims and dtype "
                               f"{indices_or_sections.dtype}")
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        sections = [size // n + (1 if i < size % n else 0) for i in range(n)]
        return split(input, sections, d)
    # each piece is input[start:end] along d, with a Python slice's reading of negative and
    # out-of-range bounds: pieces can be empty, or overlap when the indices decrease
    bounds = [0, *(int(i) for i in indices_or_sections), None]
    head = (slice(None),) * d
    return tuple(getitem(input, (*head, slice(a, b))) for a, b in zip(bounds, bounds[1:]))


def _split_by(name, dim_needed, dim, example):
    def split(input, indices_or_sections):
        if input.ndim < dim_needed:
            raise RuntimeError(f"torcia.{name} requires a tensor with at least {dim_needed} "
                               f"dimension, but got a tensor with {input.ndim} dimensions!")
        d = 0 if (name == "hsplit" and input.ndim == 1) else dim
        if isinstance(indices_or_sections, int) and input.shape[d] % indices_or_sections:
            raise RuntimeError(f"torcia.{name} attempted to split along dimension {d}, but "
                               f"the size of the dimension {input.shape[d]} is not "
                               f"divisible by the split_size {indices_or_sections}!")
        return tensor_split(input, indices_or_sections, d)

    split.__name__ = name
    split.__doc__ = (f"Split ``input`` into pieces along dimension {dim}, as ``numpy.{name}``."
                     f"\n\nExamples\n--------\n>>> import torcia\n{example}\n")
    return split


hsplit = _split_by("hsplit", 1, 1, """>>> torcia.hsplit(torcia.arange(6).reshape(2, 3), [1])
(tensor([[0],
        [3]]), tensor([[1, 2],
        [4, 5]]))""")


vsplit = _split_by("vsplit", 2, 0, """>>> torcia.vsplit(torcia.arange(6).reshape(3, 2), [1])
(tensor([[0, 1]]), tensor([[2, 3],
        [4, 5]]))""")


dsplit = _split_by("dsplit", 3, 2, """>>> [t.shape for t in torcia.dsplit(torcia.zeros(2, 2, 4), 2)]
[torcia.Size([2, 2, 2]), torcia.Size([2, 2, 2])]""")


#: the functions here that are also Tensor methods, under the same name
METHODS = tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "masked_fill", "index_put", "nonzero", "argwhere", "masked_select", "scatter_reduce",
    "index_reduce", "nonzero_static", "as_strided_scatter", "select", "tensor_split",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = tuple(fn.__name__ for fn in _declared.PUBLIC
                if fn.__name__ in _declared.INPLACE) + (
    "index_put", "scatter_reduce", "index_reduce",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "take", "index_fill", "masked_scatter", "put", "select_scatter", "slice_scatter",
    "diagonal_scatter", "fill_diagonal", "hsplit", "vsplit", "dsplit",
)

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = (
    "index_fill", "masked_scatter", "put", "fill_diagonal",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "argwhere", "as_strided_scatter", "diagonal_scatter", "dsplit", "fill", "getitem", "hsplit",
    "index_fill", "index_put", "index_reduce", "masked_fill", "masked_scatter", "masked_select",
    "nonzero", "nonzero_static", "put", "scatter_reduce", "select", "select_scatter", "setitem",
    "slice_scatter", "take", "tensor_split", "unravel_index", "vsplit",
))
