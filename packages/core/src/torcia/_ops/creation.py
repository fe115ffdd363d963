"""The creation ops without randomness, each declared once: schema, reference kernel, meta
shape, decomposition. They take no tensor: their arguments (the shape, the range, the
NumPy dtype) are positional inputs of the record, as the kernel is given them (by name, from
their public functions), and they carry no gradient.

A decomposition is given the same arguments and the device to make the tensor on (a
creation op has no input to tell it); it builds with ``full`` and ``arange`` of the
``torcia`` package (this module is below it). The random ops are in
:mod:`torcia._ops.random`; both are :data:`torcia.ops.CREATION`, in this order.

The public functions of these ops (``zeros``, ``ones``, ``full``, ``empty`` and their
``*_like`` forms, ``arange``, ``linspace``, ``logspace``, ``eye``) are written after the
declarations: they run the op's kernel on the device (its decomposition where the device has
none), making the tensor with :mod:`torcia._tensor`'s ``Tensor``, reached late-bound
(:data:`torcia._opdef.TENSOR`). The factories beyond them follow: index grids
(``meshgrid``, ``tril_indices``, ``cartesian_prod``, ``combinations``), strided and
permuted ``empty``, ``frombuffer``, ``from_file``, ``scalar_tensor`` and the deprecated
``torch.range`` (``inclusive_range``), built on the public factories reached late-bound
(:data:`torcia._opdef.PUBLIC`). ``torcia`` exports ``__all__``, Tensor has ``METHODS``.
"""

from __future__ import annotations

import builtins
import itertools
import math
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import FLOAT32, INT64, keyword_samples
from torcia._ops._common import where as _where

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels (``self.xp`` the array module, NumPy or CuPy)."""

    def zeros(self, shape, dtype):
        return self.xp.zeros(shape, dtype=dtype)

    def ones(self, shape, dtype):
        return self.xp.ones(shape, dtype=dtype)

    def full(self, shape, fill_value, dtype):
        return self.xp.full(shape, fill_value, dtype=dtype)

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    def arange(self, start, end, step, dtype):
        if np.dtype(dtype).kind in "iu":
            n = max(0, math.ceil((end - start) / step))
            return (self.xp.arange(n, dtype=np.int64) * step + start).astype(dtype)
        return self.xp.arange(start, end, step, dtype=np.float64).astype(dtype)

    def linspace(self, start, end, steps, dtype):
        return self.xp.linspace(start, end, steps, dtype=np.float64).astype(dtype)

    def logspace(self, start, end, steps, base, dtype):
        return self.xp.logspace(start, end, steps, base=base, dtype=np.float64).astype(dtype)

    def eye(self, n, m, dtype):
        return self.xp.eye(n, m, dtype=dtype)


# ----- meta shapes -----------------------------------------------------------------------


def created(*names):
    """A creation op's shape function; ``names`` are its kernel's positional arguments,
    among them ``shape`` and ``dtype`` (passed by position or by name)."""
    def shape_fn(*args, **params):
        bound = dict(zip(names, args), **params)
        return tuple(bound["shape"]), np.dtype(bound["dtype"])

    shape_fn.__name__ = "created"
    return shape_fn


def _eye_shape(n, m, dtype, **params):
    return (n, n if m is None else m), np.dtype(dtype)


def _linspace_shape(start, end, steps, dtype, **params):
    return (steps,), np.dtype(dtype)


def _logspace_shape(start, end, steps, base, dtype, **params):
    return (steps,), np.dtype(dtype)


def _arange_shape(start, end, step, dtype, **params):
    return (max(0, math.ceil((end - start) / step)),), np.dtype(dtype)


# ----- decompositions: given the NumPy dtype a kernel is given, and the device ------------


def zero_filled(shape, dtype, device=None):
    return _opdef.PUBLIC.full(shape, 0, dtype=D.FROM_NUMPY[np.dtype(dtype)], device=device)


def empty_as_zeros(shape, dtype, device=None):
    return zero_filled(shape, dtype, device)  # any values will do


def one_filled(shape, dtype, device=None):
    return _opdef.PUBLIC.full(shape, 1, dtype=D.FROM_NUMPY[np.dtype(dtype)], device=device)


def rows_equal_columns(n, m, dtype, device=None):
    rows = _opdef.PUBLIC.arange(n, device=device).unsqueeze(1)
    return (rows == _opdef.PUBLIC.arange(m, device=device)).to(D.FROM_NUMPY[np.dtype(dtype)])


def _float64(value, device):
    """``value`` as a 0-dim float64 tensor on ``device``."""
    return _opdef.PUBLIC.full((), value, dtype=D.float64, device=device)


def _linspace(start, end, steps, device):
    """NumPy's linspace in float64, step for step (the reference kernel's)."""
    arange = _opdef.PUBLIC.arange
    y = arange(steps, dtype=D.float64, device=device)
    delta, div = float(end) - float(start), steps - 1
    if div > 0:
        step = delta / div
        # NumPy divides first where the step underflows to 0
        y = y / div * delta if step == 0 else y * step
    else:
        y = y * delta
    y = y + start
    if steps > 1:
        y = _where(arange(steps, device=device) == steps - 1, _float64(end, device), y)
    return y


def evenly_spaced(start, end, steps, dtype, device=None):
    return _linspace(start, end, steps, device).to(D.FROM_NUMPY[np.dtype(dtype)])


def evenly_spaced_powers(start, end, steps, base, dtype, device=None):
    exponents = _linspace(start, end, steps, device)
    return (_float64(base, device) ** exponents).to(D.FROM_NUMPY[np.dtype(dtype)])


# ----- the declarations ------------------------------------------------------------------


def _creation(schema, kernel, shape, **fields):
    """A creation op: no tensor input, no gradient."""
    return define(schema, kernel, shape=shape, differentiable=False, group="creation",
                  **fields)


#: in the order of :data:`torcia.ops.CREATION` (the random ops follow)
DECLARED = (
    _creation("zeros(int[] shape, ScalarType dtype) -> Tensor", Kernels.zeros,
              created("shape", "dtype"), decomposition=zero_filled,
              samples=keyword_samples({"shape": (2, 3), "dtype": FLOAT32},
                                      {"shape": (4,), "dtype": INT64})),
    _creation("ones(int[] shape, ScalarType dtype) -> Tensor", Kernels.ones,
              created("shape", "dtype"), decomposition=one_filled,
              samples=keyword_samples({"shape": (2, 3), "dtype": FLOAT32},
                                      {"shape": (), "dtype": INT64})),
    _creation("full(int[] shape, Scalar fill_value, ScalarType dtype) -> Tensor", Kernels.full,
              created("shape", "fill_value", "dtype"),
              samples=keyword_samples({"shape": (2, 3), "fill_value": 2.5, "dtype": FLOAT32},
                                      {"shape": (3,), "fill_value": 7, "dtype": INT64})),
    _creation("empty(int[] shape, ScalarType dtype) -> Tensor", Kernels.empty,
              created("shape", "dtype"), decomposition=empty_as_zeros,
              samples=keyword_samples({"shape": (2, 3), "dtype": FLOAT32})),
    _creation("arange(Scalar start, Scalar end, Scalar step, ScalarType dtype) -> Tensor",
              Kernels.arange, _arange_shape,
              samples=keyword_samples({"start": 0, "end": 5, "step": 1, "dtype": INT64},
                                      {"start": 0.0, "end": 1.0, "step": 0.25, "dtype": FLOAT32},
                                      {"start": 5, "end": -1, "step": -2, "dtype": INT64})),
    _creation("linspace(Scalar start, Scalar end, int steps, ScalarType dtype) -> Tensor",
              Kernels.linspace, _linspace_shape, decomposition=evenly_spaced,
              samples=keyword_samples({"start": 0.0, "end": 1.0, "steps": 5, "dtype": FLOAT32})),
    _creation("logspace(Scalar start, Scalar end, int steps, float base, ScalarType dtype) "
              "-> Tensor", Kernels.logspace, _logspace_shape, decomposition=evenly_spaced_powers,
              samples=keyword_samples({"start": 0.0, "end": 2.0, "steps": 3, "base": 10.0,
                                       "dtype": FLOAT32})),
    _creation("eye(int n, int m, ScalarType dtype) -> Tensor", Kernels.eye, _eye_shape,
              decomposition=rows_equal_columns,
              samples=keyword_samples({"n": 3, "m": 4, "dtype": FLOAT32},
                                      {"n": 2, "m": 2, "dtype": INT64})),
)


# ----- public functions (torcia.zeros, torcia.arange...): the op's kernel on the device --


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
        if isinstance(s, _opdef.TENSOR.Tensor):
            s = int(s.item())
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(
                f"size must be a tuple of ints, but got an element of type {type(s).__name__}"
            )
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


def _creator(tensors):
    """:func:`_create`, given :mod:`torcia._tensor` (above this module)."""
    canonical_device, make, decompositions = (
        tensors.canonical_device, tensors.Tensor._make, tensors.DECOMPOSITIONS)
    default = D._default

    def create(op, dtype, device, requires_grad=False, **params):
        dev = canonical_device(device)
        kernels = dev.kernels if dev.kernels is not None else dev.backend.kernels
        dt = (dtype or default[0]).to_numpy()
        try:
            kernel = kernels[op]
        except (KeyError, NotImplementedError):  # a KernelTable raises the latter
            if op not in decompositions:
                raise
            # a composite the device lacks (zeros...): its decomposition, given the device
            out = decompositions[op](dtype=dt, device=dev, **params)
            return out.requires_grad_(True) if requires_grad else out
        # zeros/ones/empty name their one parameter: a call without ** costs half as much
        arr = kernel(dtype=dt, **params) if len(params) != 1 else kernel(
            dtype=dt, shape=params["shape"])
        return make(arr, dev).requires_grad_(True) if requires_grad else make(arr, dev)

    return create


def _create(op, dtype, device, requires_grad=False, **params):
    """A tensor made by creation op ``op`` on ``device`` (its decomposition there where the
    device has no kernel of its own). The first call replaces this function by one with
    what it takes of :mod:`torcia._tensor` bound: looked up through
    :data:`torcia._opdef.TENSOR` on each call, they cost ``torcia.zeros(4, 4)`` 5% of its
    time."""
    global _create
    _create = _creator(_opdef.TENSOR)
    return _create(op, dtype, device, requires_grad, **params)


_dtype_arg = D.dtype_arg


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros of the given size.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).shape
    torcia.Size([2, 3])
    """
    return _create("zeros", dtype, device, requires_grad, shape=_size(size))


def ones(*size, dtype=None, device=None, requires_grad=False):
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
          pin_memory=False):
    """An uninitialised tensor of the given size: its values are whatever the memory held.

    Examples
    --------
    >>> import torcia
    >>> torcia.empty(3, 2).shape
    torcia.Size([3, 2])
    """
    return _create("empty", dtype, device, requires_grad, shape=_size(size))


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ``fill_value``; its dtype is inferred from the value.

    Examples
    --------
    >>> import torcia
    >>> torcia.full((2,), 7)
    tensor([7, 7])
    """
    if isinstance(fill_value, _opdef.TENSOR.Tensor):
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


# ----- ranges


def _num(x):
    return x.item() if isinstance(x, _opdef.TENSOR.Tensor) else x


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


# ----- public functions (torcia.meshgrid, torcia.empty_strided...): built on the factories


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding the number ``s`` (default dtype float).

    Examples
    --------
    >>> import torcia
    >>> torcia.scalar_tensor(3)
    tensor(3.)
    """
    return _opdef.PUBLIC.tensor(s, dtype=dtype or D.get_default_dtype(), device=device,
                                requires_grad=requires_grad)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (``indexing`` "ij", the default, or "xy").

    Examples
    --------
    >>> import torcia
    >>> gx, gy = torcia.meshgrid(torcia.tensor([1, 2]), torcia.tensor([3, 4, 5]),
    ...                          indexing="ij")
    >>> gx.shape
    torcia.Size([2, 3])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", "
                           f"but received: {indexing}")
    if any(t.ndim > 1 for t in tensors):
        raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    vecs = [t.reshape(-1) for t in tensors]
    shape = [v.shape[0] for v in vecs]
    grids = []
    for k, v in enumerate(vecs):
        view = [1] * len(vecs)
        view[k] = -1
        grid = v.reshape(view).expand(*shape)
        # "xy" is "ij" with the first two axes exchanged
        grids.append(grid.transpose(0, 1) if indexing == "xy" and len(vecs) >= 2 else grid)
    return tuple(grids)


def cartesian_prod(*tensors):
    """All combinations of one element of each 1-D tensor, one per row.

    Examples
    --------
    >>> import torcia
    >>> torcia.cartesian_prod(torcia.tensor([1, 2]), torcia.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _opdef.PUBLIC.stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of a 1-D tensor's elements, one per row.

    Examples
    --------
    >>> import torcia
    >>> torcia.combinations(torcia.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    n = input.shape[0]
    pick = (itertools.combinations_with_replacement if with_replacement
            else itertools.combinations)(range(n), r)
    idx = _opdef.PUBLIC.tensor(list(pick), dtype=D.int64, device=input.device).reshape(-1, r)
    return input[idx] if idx.numel() else _opdef.PUBLIC.empty(0, r, dtype=input.dtype)


def _tri_indices(fn, row, col, offset, dtype, device):
    r, c = fn(row, offset, col)
    return _opdef.PUBLIC.tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or D.int64,
                                device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """Row and column indices of the lower triangle of a ``row x col`` matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.tril_indices(3, 3)
    tensor([[0, 1, 1, 2, 2, 2],
            [0, 0, 1, 0, 1, 2]])
    """
    return _tri_indices(np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """Row and column indices of the upper triangle of a ``row x col`` matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.triu_indices(3, 3, offset=1)
    tensor([[0, 0, 1],
            [1, 2, 2]])
    """
    return _tri_indices(np.triu_indices, row, col, offset, dtype, device)


def inclusive_range(start=0, end=None, step=1, *, dtype=None, device=None,
                    requires_grad=False):
    """PyTorch's deprecated inclusive ``range``: ``start, start + step, ..., end``
    (float by default).

    Examples
    --------
    >>> import torcia
    >>> torcia.range(1, 4)
    tensor([1., 2., 3., 4.])
    """
    if end is None:
        start, end = 0, start
    count = int(math.floor((end - start) / step)) + 1
    values = [start + k * step for k in builtins.range(max(count, 0))]
    return _opdef.PUBLIC.tensor(values, dtype=dtype or D.get_default_dtype(), device=device,
                                requires_grad=requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An uninitialised tensor of ``size`` with the given ``stride`` (in elements), laid on
    a buffer just long enough for it.

    Examples
    --------
    >>> import torcia
    >>> torcia.empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} and "
                           f"{len(stride)}")
    n = 0 if 0 in size else 1 + sum((s - 1) * st for s, st in zip(size, stride))
    buf = _opdef.PUBLIC.empty(n, dtype=dtype, device=device)
    item = buf._data.itemsize
    arr = buf._device.backend.xp.lib.stride_tricks.as_strided(
        buf._data, size, tuple(s * item for s in stride))
    out = _opdef.PUBLIC.Tensor._make(arr, buf._device)
    return out.requires_grad_() if requires_grad else out


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                      layout=None, pin_memory=False):
    """:func:`torcia.empty_strided` with ``self``'s dtype and device unless given.

    Examples
    --------
    >>> import torcia
    >>> y = torcia.tensor([1.0], dtype=torcia.float64).new_empty_strided((2, 3), (1, 2))
    >>> y.shape, y.stride(), y.dtype
    (torcia.Size([2, 3]), (1, 2), torcia.float64)
    """
    return empty_strided(size, stride, dtype=dtype or self.dtype,
                         device=device or self.device, requires_grad=requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialised tensor of ``size`` whose dimensions are laid out in memory in the
    order ``physical_layout`` (outermost first).

    Examples
    --------
    >>> import torcia
    >>> torcia.empty_permuted((2, 3, 4), (0, 2, 1)).stride()
    (12, 1, 3)
    """
    size, perm = tuple(int(s) for s in size), tuple(int(p) for p in physical_layout)
    if len(size) != len(perm):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(perm)}")
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError(f"Dimension {perm} is not a permutation of the dimensions")
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    buf = _opdef.PUBLIC.empty(*[size[p] for p in perm], dtype=dtype, device=device)
    out = _opdef.PUBLIC.Tensor._make(buf._data.transpose(inverse), buf._device)
    return out.requires_grad_() if requires_grad else out


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over the bytes of a Python buffer (``bytearray``, ``memoryview``,
    ``array.array``...), sharing its memory, from byte ``offset`` on, ``count`` elements
    (all by default). A read-only buffer is copied, with PyTorch's warning.

    Examples
    --------
    >>> import torcia
    >>> torcia.frombuffer(bytearray([1, 0, 2, 0]), dtype=torcia.int16)
    tensor([1, 2], dtype=torcia.int16)
    """
    view = memoryview(buffer)
    nbytes = view.nbytes
    item = dtype.to_numpy().itemsize
    if nbytes <= 0:
        raise ValueError(f"both buffer length ({nbytes}) and count ({count}) must not be 0")
    if offset < 0 or offset >= nbytes:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({nbytes} bytes) minus 1")
    if count <= 0 and (nbytes - offset) % item:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} "
                         f"bytes) must be a multiple of element size ({item})")
    if count > 0 and count * item > nbytes - offset:
        raise ValueError(f"requested buffer length ({count} * {item} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length "
                         f"({nbytes} bytes)")
    arr = np.frombuffer(buffer, dtype=dtype.to_numpy(), count=count, offset=offset)
    if not arr.flags.writeable:
        warnings.warn("The given buffer is not writable: torcia copies it, since tensors "
                      "are writable.", UserWarning, stacklevel=2)
        arr = arr.copy()
    out = _opdef.PUBLIC.from_numpy(arr)
    return out.requires_grad_() if requires_grad else out


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None,
              pin_memory=False, requires_grad=False):
    """A 1-D tensor of ``size`` elements read from ``filename``; with ``shared=True`` the
    tensor maps the file, so writes to either are seen by the other.

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> torcia.tensor([1.0, 2.0]).numpy().tofile(path)
    >>> torcia.from_file(path, size=2)
    tensor([1., 2.])
    """
    dt = (dtype or D.get_default_dtype()).to_numpy()
    if shared:
        arr = np.memmap(filename, dtype=dt, mode="r+", shape=(size,))
    else:
        arr = np.fromfile(filename, dtype=dt, count=size)
        if arr.size < size:
            raise RuntimeError(f"unexpected EOF, expected {size - arr.size} more bytes. The "
                               "file might be corrupted.")
    out = _opdef.PUBLIC.from_numpy(np.asarray(arr) if not shared else arr)
    if device is not None:
        out = out.to(device)
    return out.requires_grad_() if requires_grad else out


#: the functions here that are also Tensor methods, under the same name
METHODS = (
    "new_empty_strided",
)

#: the names ``torcia`` exports from here
__all__ = [
    "arange", "empty", "empty_like", "eye", "full", "full_like", "linspace", "logspace", "ones",
    "ones_like", "zeros", "zeros_like",
    "cartesian_prod", "combinations", "empty_permuted", "empty_strided", "from_file",
    "frombuffer", "meshgrid", "scalar_tensor", "tril_indices", "triu_indices",
]
