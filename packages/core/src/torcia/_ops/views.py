"""The view ops, each declared once: schema, reference kernel, meta shape and
decomposition. :data:`torcia.ops.VIEW` (``view``, ``permute``, ``expand``,
``as_strided``...: their results are views of their input, as PyTorch's); the movement ops
(``cat``, ``flip``, ``repeat``, ``pad``...: copies) are :mod:`torcia._ops.movement`'s.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy). A view's kernel returns a view of its input array; its public function (in
:mod:`torcia._oplib.views`, or at the end of this module: ``unfold``) checks the arguments
and marks the result as a view (``_base``, the version counter). A decomposition is
written with Tensor methods, the public functions (:data:`torcia._opdef.PUBLIC`) and
:data:`torcia._opdef.CALL` (an op by name, as a view of its input where it is one): it
runs on any device, and this module is below the Tensor class. Their derivatives are
torcia-autograd's.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import first_shape, random_floats, with_size, wrap_dim

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

    def getitem(self, a, key):
        if key.__class__ is tuple and len(key) == 2 and key[0].__class__ is np.ndarray and (
                key[1] is Ellipsis and a.ndim == 1 and key[0].ndim):
            # one index array into a vector, (array, ...): NumPy's own path for a[array],
            # the same copy at a fifth of the cost
            return a[key[0]]
        return a[key]

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


def _is_stand_in(arr) -> bool:
    return arr.ndim > 0 and arr.size > 1 and not any(arr.strides)


def _getitem_shape(x, key, **params):
    """``x[key]`` under NumPy's rules (the kernel's): basic indices keep their place; the
    advanced ones (arrays, and integers alongside an array) broadcast together, and their
    dims go where the first is when they are adjacent in the key, else first. A boolean
    mask of a meta tensor has no shape without its values."""
    key = key if isinstance(key, tuple) else (key,)

    def is_mask(k):
        return isinstance(k, (bool, np.bool_)) or (
            isinstance(k, np.ndarray) and k.dtype.kind == "b")

    has_array = any(isinstance(k, np.ndarray) or is_mask(k) for k in key)
    consumed = sum(np.ndim(k) if is_mask(k) else 1 for k in key
                   if k is not None and k is not Ellipsis)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    out, arrays, where, dim = [], [], [], 0
    for i, k in enumerate(key):
        if k is None:
            out.append(1)
        elif k is Ellipsis:
            n = x.ndim - consumed
            out.extend(x.shape[dim:dim + n])
            dim += n
        elif isinstance(k, slice):
            out.append(len(range(*k.indices(x.shape[dim]))))
            dim += 1
        elif is_mask(k):
            k = np.asarray(k)
            if _is_stand_in(k):
                raise NotImplementedError(
                    "getitem: indexing a meta tensor with a boolean mask has no shape "
                    "without the mask's values (it depends on how many are True)")
            where.append((i, len(out)))
            arrays.append((int(k.sum()),))
            dim += k.ndim
        elif isinstance(k, np.ndarray) or has_array:
            where.append((i, len(out)))
            arrays.append(np.shape(k))
            dim += 1
        else:
            n = x.shape[dim]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with "
                                 f"size {n}")
            dim += 1
    out.extend(x.shape[dim:])
    if arrays:
        adjacent = [i for i, _ in where] == list(range(where[0][0], where[-1][0] + 1))
        at = where[0][1] if adjacent else 0
        out[at:at] = np.broadcast_shapes(*arrays)
    return tuple(out), x.dtype


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


def view(a, shape):
    strides = view_strides(a.shape, a.stride(), shape)
    if strides is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return _strided("view", a, {"shape": shape}, shape, strides)


def reshape(a, shape):
    strides = view_strides(a.shape, a.stride(), shape)
    if strides is not None:
        return _strided("reshape", a, {"shape": shape}, shape, strides)
    return copied("reshape", a, {"shape": shape}, shape)


def permute(a, dims):
    stride = a.stride()
    return _strided("permute", a, {"dims": dims}, (a.shape[d] for d in dims),
                    (stride[d] for d in dims))


def expand(a, shape):
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


def diagonal(a, offset=0, dim1=0, dim2=1):
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


def view_call(op, a, params):
    """The op ``op`` on ``a`` with ``params``, its result a view of ``a``."""
    return _opdef.CALL(op, (a,), params, view_of=a)


def squeeze(a, dim=None):
    dims = set(range(a.ndim)) if dim is None else {d % max(a.ndim, 1) for d in dim}
    shape = tuple(n for d, n in enumerate(a.shape) if n != 1 or d not in dims)
    return view_call("view", a, {"shape": shape})


def unsqueeze(a, dim):
    dim %= a.ndim + 1
    return view_call("view", a, {"shape": tuple(a.shape[:dim]) + (1,) + tuple(a.shape[dim:])})


def transpose(a, dim0, dim1):
    dims = list(range(a.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return view_call("permute", a, {"dims": tuple(dims)})


def along(a, dim, key):
    """``a[..., key, ...]`` with ``key`` at ``dim``: a view."""
    return view_call("getitem", a, {"key": (slice(None),) * (dim % a.ndim) + (key,)})


def narrow(a, dim, start, length):
    return along(a, dim, slice(start, start + length))


def _a_view(schema, kernel, **declared):
    return define(schema, kernel, group="view", **declared)


#: the view ops, in the order of torcia.ops.VIEW
DECLARED = (
    _a_view("view(Tensor x, *, shape=None) -> Tensor", Kernels.view, shape=_view_shape,
            decomposition=view),
    _a_view("reshape(Tensor x, *, shape=None) -> Tensor", Kernels.reshape, shape=_view_shape,
            decomposition=reshape),
    _a_view("permute(Tensor x, *, dims=None) -> Tensor", Kernels.permute, shape=_permute_shape,
            decomposition=permute),
    _a_view("transpose(Tensor x, *, dim0=None, dim1=None) -> Tensor", Kernels.transpose,
            shape=_transpose_shape, decomposition=transpose,
            inplace_example=("[[1, 2], [3, 4]]", "0, 1", "tensor([[1, 3],\n        [2, 4]])")),
    _a_view("squeeze(Tensor x, *, dim=None) -> Tensor", Kernels.squeeze, shape=_squeeze_shape,
            decomposition=squeeze,
            inplace_example=("[[1, 2]]", "", "tensor([1, 2])")),
    _a_view("unsqueeze(Tensor x, *, dim=None) -> Tensor", Kernels.unsqueeze,
            shape=_unsqueeze_shape, decomposition=unsqueeze,
            inplace_example=("[1, 2]", "0", "tensor([[1, 2]])")),
    _a_view("expand(Tensor x, *, shape=None) -> Tensor", Kernels.expand, shape=_view_shape,
            decomposition=expand),
    _a_view("narrow(Tensor x, *, dim=None, start=None, length=None) -> Tensor", Kernels.narrow,
            shape=_narrow_shape, decomposition=narrow),
    _a_view("unfold(Tensor x, *, dimension=None, size=None, step=None) -> Tensor", Kernels.unfold,
            shape=_unfold_shape, decomposition=windows),
    _a_view("diagonal(Tensor x, *, offset=0, dim1=0, dim2=1) -> Tensor", Kernels.diagonal,
            shape=diagonal_shape, decomposition=diagonal),
    _a_view("as_strided(Tensor x, *, size=None, stride=None, storage_offset=0) -> Tensor",
            Kernels.as_strided, shape=_as_strided_shape,
            samples=lambda rng: [((random_floats(rng, 3, 4),),
                                  {"size": (2, 2), "stride": (1, 2), "storage_offset": 1})],
            inplace_example=("[1, 2, 3, 4]", "(2,), (2,)", "tensor([1, 3])")),
    _a_view("getitem(Tensor x, *, key=None) -> Tensor", Kernels.getitem, shape=_getitem_shape),
    _a_view("detach_view(Tensor x) -> Tensor", Kernels.detach_view, shape=first_shape,
            decomposition=detach_view),
)


# ----- public functions (torcia.unfold): the ops' calls by name ------------------------


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
    return _opdef.CALL("unfold", (input,), {"dimension": d, "size": size, "step": step},
                       view_of=input)


#: the public functions above that torcia exports (through torcia._oplib.views) and Tensor
#: has as methods
PUBLIC = (unfold,)
