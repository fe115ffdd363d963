"""Shape and movement: views (``view``, ``permute``, ``expand``, ``as_strided`` and their
in-place ``t_``/``squeeze_``...), joins and splits (``cat``, ``stack``, ``split``...), flips,
rolls, repeats, triangles, diagonals, padding and ``resize_``.
"""

from __future__ import annotations

import builtins
import functools
import math
import operator
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import _storage
from torcia._grad_mode import STATE as _GRAD
from torcia._oplib._common import _dims, _same_dtype
from torcia._ops import views as _declared
from torcia._ops.complex_numbers import conj
from torcia._ops.creation import arange, empty
from torcia._ops.views import pad
from torcia._storage import storage_size
from torcia._tensor import AUTOGRAD, Size, Tensor, _wrap_dim, call

#: the public functions declared beside their ops in torcia._ops.views (``flip``,
#: ``unfold``...)
globals().update({fn.__name__: fn for fn in _declared.PUBLIC})


def _shape_arg(shape) -> tuple:
    for s in shape:
        if s.__class__ is not int:
            break
    else:
        return shape  # already a tuple of ints (the common case)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Tensor)) or (
        len(shape) == 1 and hasattr(shape[0], "__len__")
    ):
        shape = tuple(shape[0])
    return tuple(map(int, shape))


def _infer_shape(shape, numel: int, src_shape) -> tuple:
    known = 1
    for s in shape:
        if s < 0:
            break
        known *= s
    else:
        if known == numel:
            return shape  # nothing to infer (the common case)
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _view_call(op, input, params):
    return call(op, (input,), params, view_of=input)


def view(input, *shape, dtype=None):
    """The same data with another shape; raises when no view is possible (use reshape).

    A dtype argument (``view(torcia.int16)`` or ``view(dtype=torcia.int16)``) reinterprets
    the bytes instead, as ``Tensor.view(dtype)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.view(torcia.arange(6), (3, 2))
    tensor([[0, 1],
            [2, 3],
            [4, 5]])
    """
    if dtype is None:
        known = 1
        for s in shape:
            if s.__class__ is not int or s < 0:
                break
            known *= s
        else:
            if known == input._data.size:
                # sizes as ints, none to infer (most calls): _shape_arg's and _infer_shape's
                # common case in one pass
                return call("view", (input,), {"shape": shape}, input)
    elif shape:
        raise TypeError("view() takes a shape or dtype=, not both")
    else:
        shape = (dtype,)
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        return Tensor._make(input._data.view(shape[0].to_numpy()), input.device, input)
    shape = _infer_shape(_shape_arg(shape), input._data.size, input._data.shape)
    return call("view", (input,), {"shape": shape}, input)


def reshape(input, *shape):
    """The same data with another shape: a view when possible, else a copy.

    Examples
    --------
    >>> import torcia
    >>> torcia.reshape(torcia.arange(6), (2, -1))
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    shape = _infer_shape(_shape_arg(shape), input.numel(), input.shape)
    if tuple(shape) == tuple(input.shape):
        return _view_call("view", input, {"shape": shape})
    out = call("reshape", (input,), {"shape": shape})
    if np.shares_memory(out._data, input._data) if input.device.type == "cpu" else False:
        out._vc = input._vc
        out._base = input._base if input._base is not None else input
    return out


def permute(input, *dims):
    """Reorder dimensions (a view).

    Examples
    --------
    >>> import torcia
    >>> torcia.permute(torcia.zeros(2, 3, 4), (2, 0, 1)).shape
    torcia.Size([4, 2, 3])
    """
    dims = tuple(_wrap_dim(d, input.ndim) for d in _shape_arg(dims))
    if len(dims) != input.ndim or sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match "
            f"the length of the desired ordering of dimensions i.e. input.dim() = {input.ndim} "
            f"is not equal to len(dims) = {len(dims)}" if len(dims) != input.ndim
            else f"permute(): duplicate dims are not allowed, got {list(dims)}"
        )
    return _view_call("permute", input, {"dims": dims})


def transpose(input, dim0, dim1):
    """Swap two dimensions (a view).

    Examples
    --------
    >>> import torcia
    >>> torcia.transpose(torcia.zeros(2, 3, 4), 0, 2).shape
    torcia.Size([4, 3, 2])
    """
    n = input.ndim
    d0, d1 = _wrap_dim(dim0, n), _wrap_dim(dim1, n)
    if not n:
        return _view_call("view", input, {"shape": ()})
    return _view_call("transpose", input, {"dim0": d0, "dim1": d1})


swapaxes = swapdims = transpose


def t(input):
    """Transpose of a tensor of at most 2 dimensions.

    Examples
    --------
    >>> import torcia
    >>> torcia.t(torcia.tensor([[1, 2, 3]]))
    tensor([[1],
            [2],
            [3]])
    """
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    if input.ndim < 2:
        return _view_call("view", input, {"shape": tuple(input.shape)})
    return transpose(input, 0, 1)


def squeeze(input, dim=None):
    """Remove dimensions of size 1 (all, or those in ``dim``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 1, 3, 1)
    >>> torcia.squeeze(x).shape
    torcia.Size([2, 3])
    >>> torcia.squeeze(x, 1).shape
    torcia.Size([2, 3, 1])
    """
    d = None if dim is None else _dims(dim, input.ndim)
    if input.ndim == 0:
        return _view_call("view", input, {"shape": ()})
    return _view_call("squeeze", input, {"dim": d})


def unsqueeze(input, dim):
    """Insert a dimension of size 1 at ``dim``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, 2])
    >>> torcia.unsqueeze(x, 0).shape
    torcia.Size([1, 2])
    >>> torcia.unsqueeze(x, -1).shape
    torcia.Size([2, 1])
    """
    return _view_call("unsqueeze", input, {"dim": _wrap_dim(dim, input.ndim + 1)})


def expand(input, *sizes):
    """Broadcast to a larger shape without copying (``-1`` keeps a dimension).

    Examples
    --------
    >>> import torcia
    >>> torcia.expand(torcia.tensor([[1], [2]]), 2, 3)
    tensor([[1, 1, 1],
            [2, 2, 2]])
    """
    sizes = _shape_arg(sizes)
    have = input._data.shape
    lead = len(sizes) - len(have)
    if lead >= 0 and -1 not in sizes:
        for n, s in zip(have, sizes[lead:]):
            if n != s and n != 1:
                break
        else:  # nothing to infer, every size fits (the common case)
            return call("expand", (input,), {"shape": tuple(sizes)}, input)
    if len(sizes) < input.ndim:
        raise RuntimeError(
            f"expand(torcia.{input.dtype.name}{{{list(input.shape)}}}, size={list(sizes)}): the "
            "number of sizes provided must be greater or equal to the number of dimensions in "
            "the tensor"
        )
    lead = len(sizes) - input.ndim
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dim")
            s = input.shape[i - lead]
        elif i >= lead and input.shape[i - lead] not in (1, s):
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size "
                f"({input.shape[i - lead]}) at non-singleton dimension {i}.  Target sizes: "
                f"{list(sizes)}.  Tensor sizes: {list(input.shape)}"
            )
        shape.append(s)
    return _view_call("expand", input, {"shape": tuple(shape)})


def expand_as(input, other):
    """``input`` broadcast to the shape of ``other``, as a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.expand_as(torcia.tensor([1, 2]), torcia.zeros(3, 2)).shape
    torcia.Size([3, 2])
    """
    return expand(input, other.shape)


def broadcast_to(input, shape):
    """``input`` broadcast to ``shape``, as a view.

    Examples
    --------
    >>> import torcia
    >>> torcia.broadcast_to(torcia.tensor([1, 2]), (2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    return expand(input, shape)


def broadcast_tensors(*tensors):
    """The ``tensors`` broadcast to their common shape (as views).

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.broadcast_tensors(torcia.tensor([[1], [2]]), torcia.tensor([10, 20, 30]))
    >>> a
    tensor([[1, 1, 1],
            [2, 2, 2]])
    >>> b.shape
    torcia.Size([2, 3])
    """
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def broadcast_shapes(*shapes):
    """The shape that tensors of the given ``shapes`` broadcast to.

    Examples
    --------
    >>> import torcia
    >>> torcia.broadcast_shapes((2, 1), (1, 3))
    torcia.Size([2, 3])
    """
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    ndim = builtins.max(map(len, shapes), default=0)
    out = [1] * ndim
    for index, shape in enumerate(shapes):
        for k in range(1, len(shape) + 1):
            if shape[-k] == out[-k] or shape[-k] == 1:
                continue
            if out[-k] != 1:
                # PyTorch's words: the first shape that does not fit the ones before it
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {shape[-k]} at {-k}! "
                    f"Mismatching argument at index {index} had {shape}; but expected shape "
                    f"should be broadcastable to {out}")
            out[-k] = shape[-k]
    return Size(out)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim..end_dim`` into one.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 3, 4)
    >>> torcia.flatten(x).shape
    torcia.Size([24])
    >>> torcia.flatten(x, start_dim=1).shape
    torcia.Size([2, 12])
    """
    s, e = _wrap_dim(start_dim, input.ndim), _wrap_dim(end_dim, input.ndim)
    if input.ndim == 0:
        return reshape(input, (1,))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = tuple(input.shape[:s]) + (-1,) + tuple(input.shape[e + 1:])
    if input.numel() == 0:
        shape = tuple(input.shape[:s]) + (math.prod(input.shape[s:e + 1]),) + tuple(
            input.shape[e + 1:])
    return reshape(input, shape)


def unflatten(input, dim, sizes):
    """Split dim ``dim`` into ``sizes``.

    Examples
    --------
    >>> import torcia
    >>> torcia.unflatten(torcia.zeros(2, 12), 1, (3, 4)).shape
    torcia.Size([2, 3, 4])
    """
    d = _wrap_dim(dim, input.ndim)
    sizes = tuple(sizes)
    inner = _infer_shape(sizes, input.shape[d], sizes)
    return view(input, tuple(input.shape[:d]) + inner + tuple(input.shape[d + 1:]))


def narrow(input, dim, start, length):
    """The slice ``start:start+length`` of dim ``dim`` (a view).

    Examples
    --------
    >>> import torcia
    >>> torcia.narrow(torcia.arange(10), 0, 2, 3)
    tensor([2, 3, 4])
    """
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(start, Tensor):
        start = int(start.item())
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _view_call("narrow", input, {"dim": d, "start": start, "length": length})


def movedim(input, source, destination):
    """Move dims from ``source`` positions to ``destination`` positions.

    Examples
    --------
    >>> import torcia
    >>> torcia.movedim(torcia.zeros(2, 3, 4), 0, -1).shape
    torcia.Size([3, 4, 2])
    """
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError("movedim: Invalid source or destination dims: source "
                           f"({src} dims) should contain the same number of dims as "
                           f"destination ({dst} dims)")
    n = input.ndim
    src = [_wrap_dim(s, n) for s in src]
    dst = [_wrap_dim(s, n) for s in dst]
    if not n:
        return _view_call("view", input, {"shape": ()})
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


def contiguous(input, memory_format=None):
    """``input`` itself when C-contiguous, else a contiguous copy.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6).reshape(2, 3).t()
    >>> x.is_contiguous(), torcia.contiguous(x).is_contiguous()
    (False, True)
    """
    if input.is_contiguous():
        return input
    return call("contiguous", (input,), {})


def clone(input, *, memory_format=None):
    """A copy with its own storage (gradients flow back to ``input``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, 2])
    >>> y = torcia.clone(x)
    >>> y[0] = 7
    >>> x, y
    (tensor([1, 2]), tensor([7, 2]))
    """
    return call("clone", (input,), {})


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal with ``offset`` of the 2-D planes (dim1, dim2), as a view.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(9).reshape(3, 3)
    >>> torcia.diagonal(x)
    tensor([0, 4, 8])
    >>> torcia.diagonal(x, offset=1)
    tensor([1, 5])
    """
    n = input.ndim
    d1, d2 = _wrap_dim(dim1, n), _wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _view_call("diagonal", input, {"offset": offset, "dim1": d1, "dim2": d2})


def as_strided(input, size, stride, storage_offset=None):
    """A view of ``input``'s storage with the given ``size``, ``stride`` and
    ``storage_offset`` (in elements; by default ``input``'s own). The storage is the memory
    of the tensor ``input`` is a view of: ``input``'s own shape and strides play no part.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6)
    >>> torcia.as_strided(x, (2, 2), (1, 2))
    tensor([[0, 2],
            [1, 3]])
    >>> torcia.as_strided(x[2:], (2,), (1,)), torcia.as_strided(x[2:], (2,), (1,), 0)
    (tensor([2, 3]), tensor([0, 1]))
    """
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: got {len(size)} sizes "
                           f"and {len(stride)} strides")
    if builtins.any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, "
                           f"got strides: {list(stride)}")
    if builtins.any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {builtins.min(size)}"
                           f": {list(size)}")
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    need = 0 if 0 in size else offset + 1 + builtins.sum(
        (n - 1) * st for n, st in zip(size, stride))
    have = storage_size(input)
    if need > have and input._device.type != "meta":  # a meta tensor holds no storage
        item = input._data.itemsize
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {offset}, and itemsize {item} requiring a storage size of "
                           f"{need * item} are out of bounds for storage of size {have * item}")
    params = {"size": size, "stride": stride, "storage_offset": offset}
    root = input._base
    if root is None or (not input.storage_offset() and input.is_contiguous()
                        and input.numel() == have):
        # input holds its whole storage in order: read it through input, which keeps what
        # the base lacks (a gradient path, a forward-mode tangent)
        return _view_call("as_strided", input, params)
    if input._requires_grad and not root._requires_grad:
        raise RuntimeError("as_strided of a view that requires grad while its base does "
                           "not reaches memory outside the view; call .clone() first")
    # the view's geometry is relative to the storage: take it from the base
    return _view_call("as_strided", root, params)


def detach(input):
    """A tensor sharing storage with ``input`` but outside the graph.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(2, requires_grad=True)
    >>> torcia.detach(x * 2).requires_grad
    False
    """
    t = Tensor._make(input._data, input._device)
    t._vc = input._vc
    return t


def cat(tensors, dim=0):
    """Concatenate along an existing ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cat([torcia.zeros(1, 2), torcia.ones(2, 2)]).shape
    torcia.Size([3, 2])
    """
    tensors = _same_dtype(tensors, "cat")
    n = tensors[0]._data.ndim
    if dim.__class__ is int and -n <= dim < n:
        try:
            return call("cat", tuple(tensors), {"dim": dim % n})
        except ValueError:
            pass  # the array module refused: find PyTorch's reason below
    # legacy: 1-D empty tensors are skipped whatever the others' shapes
    kept = [t for t in tensors if t._data.shape != (0,)] or tensors[:1]
    ref = kept[0]._data.shape
    if not ref:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    n = len(ref)
    d = dim if dim.__class__ is int and 0 <= dim < n else _wrap_dim(dim, n)
    rest = ref[:d] + ref[d + 1:]
    for i, t in enumerate(kept):
        shape = t._data.shape
        if shape[:d] + shape[d + 1:] != rest or len(shape) != n:
            _cat_mismatch(ref, shape, d, i)
    return call("cat", tuple(kept), {"dim": d})


def _cat_mismatch(ref, shape, d, i):
    if len(shape) != len(ref):
        raise RuntimeError(
            f"Tensors must have same number of dimensions: got {len(ref)} and {len(shape)}")
    for j in range(len(ref)):
        if j != d and shape[j] != ref[j]:
            raise RuntimeError(
                f"Sizes of tensors must match except in dimension {d}. Expected size "
                f"{ref[j]} but got size {shape[j]} for tensor number {i} in the list.")


concat = concatenate = cat


def stack(tensors, dim=0):
    """Join along a new ``dim``; all tensors must have the same shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.stack([torcia.tensor([1, 2]), torcia.tensor([3, 4])], dim=1)
    tensor([[1, 3],
            [2, 4]])
    """
    tensors = _same_dtype(tensors, "stack")
    ref = tensors[0]
    for i, t in enumerate(tensors):
        if t.shape != ref.shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(ref.shape)} at entry "
                f"0 and {list(t.shape)} at entry {i}")
    return call("stack", tuple(tensors), {"dim": _wrap_dim(dim, ref.ndim + 1)})


def hstack(tensors):
    """Concatenate ``tensors`` along their second dimension (the first for 1-D ones).

    Examples
    --------
    >>> import torcia
    >>> torcia.hstack([torcia.tensor([1, 2]), torcia.tensor([3])])
    tensor([1, 2, 3])
    >>> torcia.hstack([torcia.ones(2, 1), torcia.zeros(2, 2)])
    tensor([[1., 0., 0.],
            [1., 0., 0.]])
    """
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenate ``tensors`` along their first dimension (1-D ones as rows).

    Examples
    --------
    >>> import torcia
    >>> torcia.vstack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[1, 2],
            [3, 4]])
    """
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


def split(tensor, split_size_or_sections, dim=0):
    """Split into chunks of a size (the last may be smaller) or of the listed sizes.

    Examples
    --------
    >>> import torcia
    >>> torcia.split(torcia.arange(5), 2)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    >>> torcia.split(torcia.arange(5), [1, 4])
    (tensor([0]), tensor([1, 2, 3, 4]))
    """
    d = _wrap_dim(dim, tensor.ndim)
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {size}")
        sections = [step] * (size // step) + ([size % step] if size % step else []) if step else [0]
    else:
        sections = [int(s) for s in split_size_or_sections]
        if builtins.sum(sections) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sections}")
    if len(sections) == 1:
        return (_view_call("view", tensor, {"shape": tuple(tensor.shape)}),)
    outs = call("split", (tensor,), {"sections": tuple(sections), "dim": d})
    for o in outs:
        o._vc = tensor._vc
        o._base = tensor._base if tensor._base is not None else tensor
    return outs


def chunk(input, chunks, dim=0):
    """Split into ``chunks`` pieces of equal size (the last may be smaller).

    Examples
    --------
    >>> import torcia
    >>> torcia.chunk(torcia.arange(5), 2)
    (tensor([0, 1, 2]), tensor([3, 4]))
    """
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    size = input.shape[_wrap_dim(dim, input.ndim)]
    step = -(-size // chunks) if size else 1
    return split(input, step, dim)


def unbind(input, dim=0):
    """The slices along ``dim``, each without that dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.unbind(torcia.tensor([[1, 2], [3, 4]]), dim=1)
    (tensor([1, 3]), tensor([2, 4]))
    """
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] == 0:
        return ()
    # one split node: its backward concatenates the slices' gradients once, where a select
    # per slice would scatter each into a zero tensor of the input's size
    return tuple(squeeze(t, d) for t in split(input, 1, d))


def fliplr(input):
    """``input`` reversed along its second dimension (left-right).

    Examples
    --------
    >>> import torcia
    >>> torcia.fliplr(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[2, 1],
            [4, 3]])
    """
    return _declared.flip(input, (1,))


def flipud(input):
    """``input`` reversed along its first dimension (up-down).

    Examples
    --------
    >>> import torcia
    >>> torcia.flipud(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[3, 4],
            [1, 2]])
    """
    return _declared.flip(input, (0,))


def repeat(input, *sizes):
    """Tile ``input`` ``sizes`` times along each dim (PyTorch's ``Tensor.repeat``).

    Examples
    --------
    >>> import torcia
    >>> torcia.repeat(torcia.tensor([1, 2]), 2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    return call("repeat", (input,), {"sizes": sizes})


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (along ``dim``, or of the flattened input).

    Examples
    --------
    >>> import torcia
    >>> torcia.repeat_interleave(torcia.tensor([1, 2]), 2)
    tensor([1, 1, 2, 2])
    >>> torcia.repeat_interleave(torcia.tensor([[1, 2], [3, 4]]), torcia.tensor([1, 2]), dim=0)
    tensor([[1, 2],
            [3, 4],
            [3, 4]])
    """
    if repeats is None:
        # repeat_interleave(repeats): each index i repeated repeats[i] times
        input, repeats = arange(input.shape[0], device=input.device), input
    if isinstance(repeats, Tensor):
        rep = repeats._data
    else:
        rep = int(repeats)
    d = None if dim is None else _wrap_dim(dim, input.ndim)
    if d is not None and not input.ndim:
        # PyTorch reads the size of dim 0, which a 0-dim tensor lacks
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         "1)")
    if output_size is not None and isinstance(repeats, Tensor) and "meta" in (
            input.device.type, repeats.device.type):
        return _meta_repeated(input, repeats, d, int(output_size))
    out = call("repeat_interleave", (input,), {"repeats": rep, "dim": d})
    length = out.shape[0 if d is None else d]
    if output_size is not None and output_size != length:
        if isinstance(rep, int):
            raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {length} "
                               f"but got {output_size}")
        raise RuntimeError("allocated size does not match required size")
    return out


def _meta_repeated(input, repeats, d, output_size):
    """repeat_interleave's result where the repeats' values cannot be read (the meta
    device) but the caller gave its length, as PyTorch's meta kernel takes it."""
    along = input.numel() if d is None else input.shape[d]
    if repeats.ndim > 1 or (repeats.ndim == 1 and repeats.shape[0] not in (1, along)):
        raise RuntimeError("repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {repeats.shape[0] if repeats.ndim else 1} "
                           f"and input.size({0 if d is None else d}) = {along}")
    shape = [input.numel()] if d is None else list(input.shape)
    shape[0 if d is None else d] = output_size
    return empty(shape, dtype=input.dtype, device="meta")


def _each(fn, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fn(t) for t in tensors[0])
    out = tuple(fn(t) for t in tensors)
    return out[0] if len(out) == 1 else out


def atleast_1d(*tensors):
    """Each tensor with at least one dimension.

    Examples
    --------
    >>> import torcia
    >>> torcia.atleast_1d(torcia.tensor(5)).shape
    torcia.Size([1])
    """
    return _each(lambda t: t.reshape(1) if t.ndim == 0 else t, tensors)


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions (a vector becomes a row).

    Examples
    --------
    >>> import torcia
    >>> torcia.atleast_2d(torcia.tensor([1, 2])).shape
    torcia.Size([1, 2])
    """
    return _each(lambda t: t.reshape(1, -1) if t.ndim < 2 else t, tensors)


def atleast_3d(*tensors):
    """Each tensor with at least three dimensions, as ``numpy.atleast_3d``.

    Examples
    --------
    >>> import torcia
    >>> torcia.atleast_3d(torcia.tensor([1, 2])).shape
    torcia.Size([1, 2, 1])
    """
    def three(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        if t.ndim == 2:
            return t.unsqueeze(-1)
        return t
    return _each(three, tensors)


def column_stack(tensors):
    """Stack 0-d/1-d tensors as columns (and 2-d ones side by side).

    Examples
    --------
    >>> import torcia
    >>> torcia.column_stack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[1, 3],
            [2, 4]])
    """
    cols = [t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors]
    return cat(cols, 1)


def dstack(tensors):
    """Concatenate along the third dimension after :func:`atleast_3d`.

    Examples
    --------
    >>> import torcia
    >>> torcia.dstack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[[1, 3],
             [2, 4]]])
    """
    return cat([atleast_3d(t) for t in tensors], 2)


def ravel(input):
    """The flattened tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.ravel(torcia.tensor([[1, 2], [3, 4]]))
    tensor([1, 2, 3, 4])
    """
    return input.reshape(-1)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rot90(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[2, 4],
            [1, 3]])
    """
    d0, d1 = dims
    k %= 4
    if k == 1:
        return input.flip([d1]).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.transpose(d0, d1).flip([d1])
    return input.clone()


def diagflat(input, offset=0):
    """A matrix with the flattened ``input`` on diagonal ``offset``.

    Examples
    --------
    >>> import torcia
    >>> torcia.diagflat(torcia.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    return _declared.diag(input.reshape(-1), offset)


def adjoint(input):
    """The conjugate transpose of the last two dimensions: a view of a real tensor, a
    conjugated copy of a complex one (as :func:`conj`).

    Examples
    --------
    >>> import torcia
    >>> torcia.adjoint(torcia.tensor([[1 + 2j, 3j]]))
    tensor([[1.-2.j],
            [0.-3.j]])
    """
    return conj(input.transpose(-2, -1))


def split_with_sizes(input, split_sizes, dim=0):
    """Split into pieces of the given sizes along ``dim`` (which must add up to it).

    Examples
    --------
    >>> import torcia
    >>> torcia.split_with_sizes(torcia.arange(5), [2, 3])
    (tensor([0, 1]), tensor([2, 3, 4]))
    """
    if builtins.sum(split_sizes) != input.shape[dim]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                           f"{input.shape[dim]} (input tensor's size at dimension {dim}), "
                           f"but got split_sizes={list(split_sizes)}")
    return split(input, list(split_sizes), dim)


# constant_pad_nd's argument is named ``pad`` too, as PyTorch's
_pad_fn = pad


def constant_pad_nd(input, pad, value=0):
    """Pad with ``value`` (``F.pad``'s constant mode).

    Examples
    --------
    >>> import torcia
    >>> torcia.constant_pad_nd(torcia.tensor([1, 2]), (1, 2), value=9)
    tensor([9, 1, 2, 9, 9])
    """
    return _pad_fn(input, pad, "constant", value)


def _inplace_view(self, view_fn, *args):
    """Make ``self`` the view ``view_fn(self, *args)``, as PyTorch's ``t_`` and friends: same
    storage, new shape and strides, and (when recording) the view's node as history."""
    recording = self._requires_grad and _GRAD.enabled
    if recording:
        AUTOGRAD.engine.check_inplace(self)
    out = view_fn(self, *args)
    if self._base is None:
        # self becomes a view of its old memory (which stays its storage, for
        # storage_offset and as_strided)
        self._base = _storage.holder(self)
    self._data = out._data
    if recording:
        self.grad_fn = out.grad_fn
        self._out_nr = out._out_nr
    self._vc[0] += 1
    return self


def t_(self):
    """In-place :meth:`Tensor.t`: ``self`` becomes its transpose (a 2-D or smaller tensor).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 3)
    >>> x.t_().shape
    torcia.Size([3, 2])
    """
    return _inplace_view(self, t)


def transpose_(self, dim0, dim1):
    """In-place :meth:`Tensor.transpose`: ``self`` swaps dimensions ``dim0`` and ``dim1``."""
    return _inplace_view(self, transpose, dim0, dim1)


def swapaxes_(self, axis0, axis1):
    """In-place :meth:`Tensor.swapaxes` (:meth:`transpose_`)."""
    return _inplace_view(self, transpose, axis0, axis1)


def swapdims_(self, dim0, dim1):
    """In-place :meth:`Tensor.swapdims` (:meth:`transpose_`)."""
    return _inplace_view(self, transpose, dim0, dim1)


def squeeze_(self, dim=None):
    """In-place :meth:`Tensor.squeeze`: drops the size-1 dimensions (or ``dim``)."""
    if dim is None:
        return _inplace_view(self, squeeze)
    return _inplace_view(self, squeeze, dim)


def unsqueeze_(self, dim):
    """In-place :meth:`Tensor.unsqueeze`: inserts a size-1 dimension at ``dim``."""
    return _inplace_view(self, unsqueeze, dim)


def as_strided_(self, size, stride, storage_offset=None):
    """In-place :meth:`Tensor.as_strided`: ``self`` takes the given size and strides."""
    return _inplace_view(self, as_strided, tuple(size), tuple(stride), storage_offset)


def _size_arg(sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    shape = tuple(int(s) for s in sizes)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    return shape


def resize_(self, *sizes, memory_format=None):
    """Give ``self`` the shape ``sizes`` in place, as PyTorch: the elements keep their
    memory order; a smaller size keeps the same memory, a larger one reallocates (the
    new elements are zeros here, uninitialised in PyTorch).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6.0)
    >>> x.resize_(2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    shape = _size_arg(sizes)
    if shape == tuple(self._data.shape):
        return self
    n = functools.reduce(operator.mul, shape, 1)
    arr = self._data
    flat = arr.reshape(-1) if arr.flags.c_contiguous else arr.ravel(order="K")
    if n <= flat.size:
        self._data = flat[:n].reshape(shape)
    else:
        grown = self._device.backend.xp.zeros(n, dtype=arr.dtype)
        grown[:flat.size] = flat
        self._data = grown.reshape(shape)
    return self


def resize_as_(self, the_template, memory_format=None):
    """``self.resize_(the_template.shape)``."""
    return resize_(self, tuple(the_template.shape))


def resize(self, *sizes):
    """PyTorch's deprecated out-of-place resize: a reshape to ``sizes``, which must hold
    as many elements as ``self`` (differentiable).

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     y = torcia.arange(6).resize(2, 3)
    >>> y
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    warnings.warn("non-inplace resize is deprecated", stacklevel=2)
    shape = _size_arg(sizes)
    n = functools.reduce(operator.mul, shape, 1)
    if n != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, shape))} ({n} elements in total), but "
            f"the given tensor has a size of {'x'.join(map(str, self.shape))} "
            f"({self.numel()} elements). autograd's resize can only change the shape of a "
            "given tensor, while preserving the number of elements. ")
    return self.reshape(shape)


def resize_as(self, tensor):
    """PyTorch's deprecated out-of-place ``resize_as``: :meth:`resize` to
    ``tensor.shape``.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     y = torcia.arange(4).resize_as(torcia.zeros(2, 2))
    >>> y
    tensor([[0, 1],
            [2, 3]])
    """
    warnings.warn("non-inplace resize_as is deprecated", stacklevel=2)
    return self.reshape(tuple(tensor.shape)) if tensor.numel() == self.numel() else \
        resize(self, tuple(tensor.shape))


#: the functions here that are also Tensor methods, under the same name
METHODS = tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "view", "reshape", "permute", "transpose", "swapaxes", "swapdims", "t", "squeeze",
    "unsqueeze", "expand", "expand_as", "broadcast_to", "flatten", "unflatten", "narrow",
    "movedim", "moveaxis", "contiguous", "clone", "diagonal", "as_strided", "detach", "split",
    "chunk", "unbind", "fliplr", "flipud", "repeat", "repeat_interleave", "t_", "transpose_",
    "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_", "as_strided_", "resize_", "resize_as_",
    "resize", "resize_as",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = tuple(fn.__name__ for fn in _declared.PUBLIC if fn.__name__ in _declared.INPLACE)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "ravel", "rot90", "diagflat", "split_with_sizes",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "adjoint", "as_strided", "as_strided_", "atleast_1d", "atleast_2d", "atleast_3d",
    "broadcast_shapes", "broadcast_tensors", "broadcast_to", "cat", "chunk", "clone",
    "column_stack", "concat", "concatenate", "constant_pad_nd", "contiguous", "detach",
    "diagflat", "diagonal", "dstack", "expand", "expand_as", "flatten", "fliplr", "flipud",
    "hstack", "moveaxis", "movedim", "narrow", "permute", "ravel", "repeat", "repeat_interleave",
    "reshape", "resize_as_", "rot90", "split", "split_with_sizes", "squeeze", "stack",
    "swapaxes", "swapdims", "t", "transpose", "unbind", "unflatten", "unsqueeze", "view",
    "vstack",
))
