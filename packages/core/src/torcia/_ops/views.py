"""The view ops, each declared once: schema, reference kernel, meta shape and
decomposition. :data:`torcia.ops.VIEW` (``view``, ``permute``, ``expand``,
``as_strided``...: their results are views of their input, as PyTorch's), but ``getitem``
(``tensor[key]``), declared in :mod:`torcia._ops.indexing` beside its public function, which
the decompositions here call by name; the movement ops (``cat``, ``flip``, ``repeat``,
``pad``...: copies) are :mod:`torcia._ops.movement`'s.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy). A view's kernel returns a view of its input array; its public function (at the
end of this module: ``view``, ``reshape``, ``permute``, ``unfold``..., with the in-place
views ``t_``, ``squeeze_``... and ``resize_``) checks the arguments and marks the result
as a view (``_base``, the version counter). A decomposition is
written with Tensor methods, the public functions (:data:`torcia._opdef.PUBLIC`) and
:data:`torcia._opdef.CALL` (an op by name, as a view of its input where it is one): it
runs on any device, and this module is below the Tensor class. Their derivatives are
torcia-autograd's.
"""

from __future__ import annotations

import builtins
import functools
import math
import operator
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import (
    broadcast_error,
    dim_tuple,
    first_shape,
    random_floats,
    with_size,
    wrap_dim,
)
from torcia._ops.complex_numbers import conj
from torcia._size import Size

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels of the view ops (see the module's doc)."""

    def view(self, a, shape):
        if a.flags.c_contiguous:
            return a.reshape(shape)  # always a view, without copy=False's slower path
        try:
            return a.reshape(shape, copy=False)
        except ValueError as exc:
            if "copy" in str(exc) or "view" in str(exc):
                raise RuntimeError(
                    "view size is not compatible with input tensor's size and stride (at least "
                    "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                    "instead."
                ) from None
            raise

    def reshape(self, a, shape):
        return self.xp.reshape(a, shape)

    def permute(self, a, dims):
        return self.xp.transpose(a, dims)

    def transpose(self, a, dim0, dim1):
        return self.xp.swapaxes(a, dim0, dim1)

    def squeeze(self, a, dim=None):
        xp = self.xp
        if dim is None:
            return xp.squeeze(a)
        dims = tuple(d for d in dim if a.shape[d] == 1)
        return xp.squeeze(a, axis=dims) if dims else a.view()

    def unsqueeze(self, a, dim):
        return self.xp.expand_dims(a, dim)

    def expand(self, a, shape):
        # a writable view (np.broadcast_to's is read-only): PyTorch writes into an expanded
        # tensor whose stride-0 dims have size 1, and refuses the others before any write
        # (torcia._tensor.check_overlap)
        lead = len(shape) - a.ndim
        strides = [0] * lead
        for n, size, stride in zip(a.shape, shape[lead:], a.strides):
            strides.append(stride if n == size else 0)
        if self.xp is np and a.__class__ is np.ndarray and a.flags.c_contiguous:
            # NOTE: as_strided costs 2 us in Python; a strided ndarray over the same buffer
            # is the same view in a quarter of that
            return np.ndarray(shape, a.dtype, a, 0, strides)
        return self.xp.lib.stride_tricks.as_strided(a, shape, strides)

    def narrow(self, a, dim, start, length):
        idx = [slice(None)] * a.ndim
        idx[dim] = slice(start, start + length)
        return a[tuple(idx)]

    def unfold(self, a, dimension, size, step):
        xp = self.xp
        n = (a.shape[dimension] - size) // step + 1
        strides = list(a.strides)
        shape = list(a.shape)
        shape[dimension] = n
        strides[dimension] = a.strides[dimension] * step
        shape.append(size)
        strides.append(a.strides[dimension])
        return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)

    def diagonal(self, a, offset=0, dim1=0, dim2=1):
        d = self.xp.diagonal(a, offset=offset, axis1=dim1, axis2=dim2)
        # NumPy hands out the diagonal read-only, PyTorch's is a writable view; CuPy's
        # arrays are always writable (their flags have no "writeable")
        if not getattr(d.flags, "writeable", True) and a.flags.writeable:
            d.flags.writeable = True
        return d

    def as_strided(self, a, size, stride, storage_offset=0):
        # a is a storage (a tensor that is no view): its memory, in memory order, is the
        # flat array indexed here; the public function checks the bounds
        xp = self.xp
        item = a.itemsize
        if a.flags.c_contiguous or a.flags.f_contiguous:
            flat = a.ravel(order="K")
        else:
            span = 1 + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) // item
            flat = xp.lib.stride_tricks.as_strided(a, shape=(span,), strides=(item,))
        return xp.lib.stride_tricks.as_strided(
            flat[storage_offset:], shape=size, strides=tuple(s * item for s in stride)
        )

    def detach_view(self, a):
        return a


# ----- meta shapes -----------------------------------------------------------------------


def _view_shape(x, shape, **params):
    return tuple(shape), x.dtype


def _permute_shape(x, dims, **params):
    return tuple(x.shape[d] for d in dims), x.dtype


def _transpose_shape(x, dim0, dim1, **params):
    shape = list(x.shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    return tuple(shape), x.dtype


def _squeeze_shape(x, dim=None, **params):
    if dim is None:
        return tuple(n for n in x.shape if n != 1), x.dtype
    dims = {d % x.ndim for d in ((dim,) if isinstance(dim, int) else dim)} if x.shape else set()
    return tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1)), x.dtype


def _unsqueeze_shape(x, dim, **params):
    shape = list(x.shape)
    shape.insert(dim, 1)
    return tuple(shape), x.dtype


def _narrow_shape(x, dim, start, length, **params):
    shape = list(x.shape)
    shape[dim] = length
    return tuple(shape), x.dtype


def diagonal_shape(x, offset=0, dim1=0, dim2=1, **params):
    n1, n2 = x.shape[dim1], x.shape[dim2]
    size = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    rest = tuple(n for i, n in enumerate(x.shape) if i not in (dim1 % x.ndim, dim2 % x.ndim))
    return rest + (size,), x.dtype


def _unfold_shape(x, dimension, size, step, **params):
    return with_size(x.shape, dimension, (x.shape[dimension] - size) // step + 1) + (size,), \
        x.dtype


def _as_strided_shape(x, size, stride, storage_offset=0, **params):
    return tuple(size), x.dtype


# ----- decompositions ---------------------------------------------------------------------
# The views whose result is strides arithmetic over their input (view, reshape, permute,
# expand, unfold, diagonal, detach_view) decompose into as_strided of the input's memory,
# so that a device needs as_strided (and clone, for reshape's copy) for all of them.


def _strided(op, a, params, size, stride, offset=0):
    """``op``'s result: ``a``'s memory seen as ``size`` and ``stride`` from ``offset``
    (elements, from ``a``'s first one), a view of ``a`` as PyTorch's (``_base``, version
    counter). The modes and autograd see ``op`` itself, as they would its
    kernel's (as_strided runs on the detached input): as_strided's derivatives map
    positions in their input's row-major order, its memory's only where it is contiguous."""
    out = _opdef.CALL("as_strided", (a.detach(),),
                      {"size": tuple(size), "stride": tuple(stride), "storage_offset": offset},
                      view_of=a)
    return _opdef.RAN(op, (a,), params, out)


def copied(op, a, params, size):
    """``op``'s result: a copy of ``a``'s elements in row-major order, seen as ``size``,
    C-contiguous, a view of nothing (PyTorch's ``contiguous`` and reshape's copy; clone
    keeps a dense layout, as PyTorch's). The modes and autograd see ``op``."""
    buf = a.new_empty(tuple(a.shape))
    buf.copy_(a.detach())
    out = _opdef.CALL("as_strided", (buf,), {"size": tuple(size), "storage_offset": 0,
                                              "stride": _contiguous_strides(size)})
    return _opdef.RAN(op, (a,), params, out)


def view_strides(shape, stride, size):
    """The strides of a view of ``shape`` and ``stride`` with ``size`` (a shape of as many
    elements), or None where its elements are not one stride apart within each dim:
    PyTorch's rule (``computeStride``), chunk by chunk of dims contiguous among
    themselves."""
    shape, stride, size = tuple(shape), tuple(stride), tuple(size)
    if not shape:
        return (1,) * len(size)
    numel = math.prod(shape)
    if numel == 0 and shape == size:
        return stride
    out = [0] * len(size)
    if numel == 0:
        for d in range(len(size) - 1, -1, -1):
            out[d] = 1 if d == len(size) - 1 else max(size[d + 1], 1) * out[d + 1]
        return tuple(out)
    d, base, chunk, seen = len(size) - 1, stride[-1], 1, 1
    for t in range(len(shape) - 1, -1, -1):
        chunk *= shape[t]
        if t == 0 or (shape[t - 1] != 1 and stride[t - 1] != chunk * base):
            while d >= 0 and (seen < chunk or size[d] == 1):
                out[d] = seen * base
                seen *= size[d]
                d -= 1
            if seen != chunk:
                return None
            if t > 0:
                base, chunk, seen = stride[t - 1], 1, 1
    return tuple(out) if d == -1 else None


def _contiguous_strides(size):
    out, step = [], 1
    for n in reversed(tuple(size)):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def strided_view(a, shape):
    strides = view_strides(a.shape, a.stride(), shape)
    if strides is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return _strided("view", a, {"shape": shape}, shape, strides)


def strided_or_copied(a, shape):
    strides = view_strides(a.shape, a.stride(), shape)
    if strides is not None:
        return _strided("reshape", a, {"shape": shape}, shape, strides)
    return copied("reshape", a, {"shape": shape}, shape)


def permuted_strides(a, dims):
    stride = a.stride()
    return _strided("permute", a, {"dims": dims}, (a.shape[d] for d in dims),
                    (stride[d] for d in dims))


def broadcast_strides(a, shape):
    lead = len(shape) - a.ndim
    strides = [0] * lead + [s if n == size else 0 for n, size, s in
                            zip(a.shape, shape[lead:], a.stride())]
    return _strided("expand", a, {"shape": shape}, shape, strides)


def windows(a, dimension, size, step):
    shape, stride = list(a.shape), list(a.stride())
    shape[dimension] = (shape[dimension] - size) // step + 1
    stride[dimension] *= step
    params = {"dimension": dimension, "size": size, "step": step}
    return _strided("unfold", a, params, shape + [size], stride + [a.stride(dimension)])


def diagonal_strides(a, offset=0, dim1=0, dim2=1):
    dim1, dim2 = dim1 % a.ndim, dim2 % a.ndim
    size = diagonal_shape(a, offset, dim1, dim2)[0][-1]
    stride = a.stride()
    start = 0 if size == 0 else offset * stride[dim2] if offset >= 0 else -offset * stride[dim1]
    keep = [d for d in range(a.ndim) if d not in (dim1, dim2)]
    params = {"offset": offset, "dim1": dim1, "dim2": dim2}
    return _strided("diagonal", a, params, [a.shape[d] for d in keep] + [size],
                    [stride[d] for d in keep] + [stride[dim1] + stride[dim2]], start)


def detach_view(a):
    return _strided("detach_view", a, {}, a.shape, a.stride())


#: dispatch (:data:`torcia._opdef.CALL`), bound on first call: the hottest public
#: functions (``view``, ``reshape``, ``permute``, ``transpose``, ``expand``) reach it as a
#: global
_call = _opdef.bind_on_first_call(globals(), "_call", lambda: _opdef.CALL)


def view_call(op, a, params):
    """The op ``op`` on ``a`` with ``params``, its result a view of ``a``."""
    return _call(op, (a,), params, view_of=a)


def without_unit_dims(a, dim=None):
    dims = set(range(a.ndim)) if dim is None else {d % max(a.ndim, 1) for d in dim}
    shape = tuple(n for d, n in enumerate(a.shape) if n != 1 or d not in dims)
    return view_call("view", a, {"shape": shape})


def with_unit_dim(a, dim):
    dim %= a.ndim + 1
    return view_call("view", a, {"shape": tuple(a.shape[:dim]) + (1,) + tuple(a.shape[dim:])})


def swapped_dims(a, dim0, dim1):
    dims = list(range(a.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return view_call("permute", a, {"dims": tuple(dims)})


def sliced(a, key):
    """``a[key]``, ``key`` a tuple of slices: a view."""
    return view_call("getitem", a, {"key": key})


def along(a, dim, key):
    """``a[..., key, ...]`` with ``key`` at ``dim``: a view."""
    return sliced(a, (slice(None),) * (dim % a.ndim) + (key,))


def slice_along(a, dim, start, length):
    return along(a, dim, slice(start, start + length))


def _a_view(schema, kernel, **declared):
    return define(schema, kernel, group="view", **declared)


#: the view ops, in the order of torcia.ops.VIEW (whose last, getitem, is _ops.indexing's)
DECLARED = (
    _a_view("view(Tensor x, *, shape=None) -> Tensor", Kernels.view, shape=_view_shape,
            decomposition=strided_view),
    _a_view("reshape(Tensor x, *, shape=None) -> Tensor", Kernels.reshape, shape=_view_shape,
            decomposition=strided_or_copied),
    _a_view("permute(Tensor x, *, dims=None) -> Tensor", Kernels.permute, shape=_permute_shape,
            decomposition=permuted_strides),
    _a_view("transpose(Tensor x, *, dim0=None, dim1=None) -> Tensor", Kernels.transpose,
            shape=_transpose_shape, decomposition=swapped_dims,
            inplace_example=("[[1, 2], [3, 4]]", "0, 1", "tensor([[1, 3],\n        [2, 4]])")),
    _a_view("squeeze(Tensor x, *, dim=None) -> Tensor", Kernels.squeeze, shape=_squeeze_shape,
            decomposition=without_unit_dims,
            inplace_example=("[[1, 2]]", "", "tensor([1, 2])")),
    _a_view("unsqueeze(Tensor x, *, dim=None) -> Tensor", Kernels.unsqueeze,
            shape=_unsqueeze_shape, decomposition=with_unit_dim,
            inplace_example=("[1, 2]", "0", "tensor([[1, 2]])")),
    _a_view("expand(Tensor x, *, shape=None) -> Tensor", Kernels.expand, shape=_view_shape,
            decomposition=broadcast_strides),
    _a_view("narrow(Tensor x, *, dim=None, start=None, length=None) -> Tensor", Kernels.narrow,
            shape=_narrow_shape, decomposition=slice_along),
    _a_view("unfold(Tensor x, *, dimension=None, size=None, step=None) -> Tensor", Kernels.unfold,
            shape=_unfold_shape, decomposition=windows),
    _a_view("diagonal(Tensor x, *, offset=0, dim1=0, dim2=1) -> Tensor", Kernels.diagonal,
            shape=diagonal_shape, decomposition=diagonal_strides),
    _a_view("as_strided(Tensor x, *, size=None, stride=None, storage_offset=0) -> Tensor",
            Kernels.as_strided, shape=_as_strided_shape,
            samples=lambda rng: [((random_floats(rng, 3, 4),),
                                  {"size": (2, 2), "stride": (1, 2), "storage_offset": 1})],
            inplace_example=("[1, 2, 3, 4]", "(2,), (2,)", "tensor([1, 3])")),
    _a_view("detach_view(Tensor x) -> Tensor", Kernels.detach_view, shape=first_shape,
            decomposition=detach_view),
)


# ----- public functions (torcia.view, torcia.permute, the in-place views...) ------------


def unfold(input, dimension, size, step):
    """Sliding windows of ``size`` with ``step`` along ``dimension``, as a new last dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.unfold(torcia.arange(6), 0, 3, 2)
    tensor([[0, 1, 2],
            [2, 3, 4]])
    """
    d = wrap_dim(dimension, input.ndim)
    if size > (input.shape[d] if input.ndim else 1):
        raise RuntimeError(f"maximum size for tensor at dimension {d} is "
                           f"{input.shape[d]} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return _call("unfold", (input,), {"dimension": d, "size": size, "step": step},
                 view_of=input)


def shape_arg(shape) -> tuple:
    for s in shape:
        if s.__class__ is not int:
            break
    else:
        return shape  # already a tuple of ints (the common case)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, _opdef.PUBLIC.Tensor)) or (
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
                # sizes as ints, none to infer (most calls): shape_arg's and _infer_shape's
                # common case in one pass
                return _call("view", (input,), {"shape": shape}, input)
    elif shape:
        raise TypeError("view() takes a shape or dtype=, not both")
    else:
        shape = (dtype,)
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        return _opdef.PUBLIC.Tensor._make(input._data.view(shape[0].to_numpy()), input.device,
                                          input)
    shape = _infer_shape(shape_arg(shape), input._data.size, input._data.shape)
    return _call("view", (input,), {"shape": shape}, input)


def reshape(input, *shape):
    """The same data with another shape: a view when possible, else a copy.

    Examples
    --------
    >>> import torcia
    >>> torcia.reshape(torcia.arange(6), (2, -1))
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    shape = _infer_shape(shape_arg(shape), input.numel(), input.shape)
    if tuple(shape) == tuple(input.shape):
        return view_call("view", input, {"shape": shape})
    out = _call("reshape", (input,), {"shape": shape})
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
    dims = tuple(wrap_dim(d, input.ndim) for d in shape_arg(dims))
    if len(dims) != input.ndim or sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match "
            f"the length of the desired ordering of dimensions i.e. input.dim() = {input.ndim} "
            f"is not equal to len(dims) = {len(dims)}" if len(dims) != input.ndim
            else f"permute(): duplicate dims are not allowed, got {list(dims)}"
        )
    return view_call("permute", input, {"dims": dims})


def transpose(input, dim0, dim1):
    """Swap two dimensions (a view).

    Examples
    --------
    >>> import torcia
    >>> torcia.transpose(torcia.zeros(2, 3, 4), 0, 2).shape
    torcia.Size([4, 3, 2])
    """
    n = input.ndim
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    if not n:
        return view_call("view", input, {"shape": ()})
    return view_call("transpose", input, {"dim0": d0, "dim1": d1})


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
        return view_call("view", input, {"shape": tuple(input.shape)})
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
    d = None if dim is None else dim_tuple(dim, input.ndim)
    if input.ndim == 0:
        return view_call("view", input, {"shape": ()})
    return view_call("squeeze", input, {"dim": d})


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
    return view_call("unsqueeze", input, {"dim": wrap_dim(dim, input.ndim + 1)})


def expand(input, *sizes):
    """Broadcast to a larger shape without copying (``-1`` keeps a dimension).

    Examples
    --------
    >>> import torcia
    >>> torcia.expand(torcia.tensor([[1], [2]]), 2, 3)
    tensor([[1, 1, 1],
            [2, 2, 2]])
    """
    sizes = shape_arg(sizes)
    have = input._data.shape
    lead = len(sizes) - len(have)
    if lead >= 0 and -1 not in sizes:
        for n, s in zip(have, sizes[lead:]):
            if n != s and n != 1:
                break
        else:  # nothing to infer, every size fits (the common case)
            return _call("expand", (input,), {"shape": tuple(sizes)}, input)
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
    return view_call("expand", input, {"shape": tuple(shape)})


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
    shape = ()
    for t in tensors:
        error = broadcast_error(shape, tuple(t.shape))
        if error is not None:
            raise error
        shape = np.broadcast_shapes(shape, tuple(t.shape))
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
    s, e = wrap_dim(start_dim, input.ndim), wrap_dim(end_dim, input.ndim)
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
    d = wrap_dim(dim, input.ndim)
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
    d = wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(start, _opdef.PUBLIC.Tensor):
        start = int(start.item())
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return view_call("narrow", input, {"dim": d, "start": start, "length": length})


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
    src = [wrap_dim(s, n) for s in src]
    dst = [wrap_dim(s, n) for s in dst]
    if not n:
        return view_call("view", input, {"shape": ()})
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


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
    d1, d2 = wrap_dim(dim1, n), wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return view_call("diagonal", input, {"offset": offset, "dim1": d1, "dim2": d2})


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
    have = _opdef.STORAGE_SIZE(input)
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
        return view_call("as_strided", input, params)
    if input._requires_grad and not root._requires_grad:
        raise RuntimeError("as_strided of a view that requires grad while its base does "
                           "not reaches memory outside the view; call .clone() first")
    # the view's geometry is relative to the storage: take it from the base
    return view_call("as_strided", root, params)


def detach(input):
    """A tensor sharing storage with ``input`` but outside the graph.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(2, requires_grad=True)
    >>> torcia.detach(x * 2).requires_grad
    False
    """
    t = _opdef.PUBLIC.Tensor._make(input._data, input._device)
    t._vc = input._vc
    return t


def ravel(input):
    """The flattened tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.ravel(torcia.tensor([[1, 2], [3, 4]]))
    tensor([1, 2, 3, 4])
    """
    return input.reshape(-1)


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


def t_(self):
    """In-place :meth:`Tensor.t`: ``self`` becomes its transpose (a 2-D or smaller tensor).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 3)
    >>> x.t_().shape
    torcia.Size([3, 2])
    """
    return _opdef.INPLACE_VIEW(self, t)


def transpose_(self, dim0, dim1):
    """In-place :meth:`Tensor.transpose`: ``self`` swaps dimensions ``dim0`` and ``dim1``."""
    return _opdef.INPLACE_VIEW(self, transpose, dim0, dim1)


def swapaxes_(self, axis0, axis1):
    """In-place :meth:`Tensor.swapaxes` (:meth:`transpose_`)."""
    return _opdef.INPLACE_VIEW(self, transpose, axis0, axis1)


def swapdims_(self, dim0, dim1):
    """In-place :meth:`Tensor.swapdims` (:meth:`transpose_`)."""
    return _opdef.INPLACE_VIEW(self, transpose, dim0, dim1)


def squeeze_(self, dim=None):
    """In-place :meth:`Tensor.squeeze`: drops the size-1 dimensions (or ``dim``)."""
    if dim is None:
        return _opdef.INPLACE_VIEW(self, squeeze)
    return _opdef.INPLACE_VIEW(self, squeeze, dim)


def unsqueeze_(self, dim):
    """In-place :meth:`Tensor.unsqueeze`: inserts a size-1 dimension at ``dim``."""
    return _opdef.INPLACE_VIEW(self, unsqueeze, dim)


def as_strided_(self, size, stride, storage_offset=None):
    """In-place :meth:`Tensor.as_strided`: ``self`` takes the given size and strides."""
    return _opdef.INPLACE_VIEW(self, as_strided, tuple(size), tuple(stride), storage_offset)


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
METHODS = ("unfold", "view", "reshape", "permute", "transpose", "swapaxes", "swapdims", "t",
           "squeeze", "unsqueeze", "expand", "expand_as", "broadcast_to", "flatten", "unflatten",
           "narrow", "movedim", "moveaxis", "diagonal", "as_strided", "detach", "t_",
           "transpose_", "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_", "as_strided_",
           "resize_", "resize_as_", "resize", "resize_as")

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = ("ravel",)

#: the names ``torcia`` exports from here
__all__ = ["adjoint", "as_strided", "as_strided_", "broadcast_shapes", "broadcast_tensors",
           "broadcast_to", "detach", "diagonal", "expand", "expand_as", "flatten", "moveaxis",
           "movedim", "narrow", "permute", "ravel", "reshape", "resize_as_", "squeeze",
           "swapaxes", "swapdims", "t", "transpose", "unflatten", "unfold", "unsqueeze", "view"]
