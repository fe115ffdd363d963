"""Factories beyond :mod:`torcia._creation`: index grids (``meshgrid``,
``tril_indices``, ``cartesian_prod``), strided and permuted ``empty``, ``frombuffer``,
``from_file``, ``scalar_tensor`` and the deprecated ``torch.range``.
"""

from __future__ import annotations

import builtins
import itertools
import math
import warnings

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia._ops.movement import stack
from torcia._tensor import Tensor, _legacy_new


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding the number ``s`` (default dtype float).

    Examples
    --------
    >>> import torcia
    >>> torcia.scalar_tensor(3)
    tensor(3.)
    """
    return C.tensor(s, dtype=dtype or D.get_default_dtype(), device=device,
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
        import warnings

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
    return stack([g.reshape(-1) for g in grids], 1)


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
    idx = C.tensor(list(pick), dtype=D.int64, device=input.device).reshape(-1, r)
    return input[idx] if idx.numel() else C.empty(0, r, dtype=input.dtype)


def _tri_indices(fn, row, col, offset, dtype, device):
    r, c = fn(row, offset, col)
    return C.tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or D.int64, device=device)


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


def new(self, *args, **kwargs):
    """``self.new(...)``: PyTorch's legacy constructor with ``self``'s dtype and device.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0], dtype=torcia.float64)
    >>> x.new([1, 2]), x.new(2, 3).shape
    (tensor([1., 2.], dtype=torcia.float64), torcia.Size([2, 3]))
    """
    return _legacy_new(self.dtype, args, kwargs.get("device", self.device))


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
    return C.tensor(values, dtype=dtype or D.get_default_dtype(), device=device,
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
    buf = C.empty(n, dtype=dtype, device=device)
    item = buf._data.itemsize
    arr = buf._device.backend.xp.lib.stride_tricks.as_strided(
        buf._data, size, tuple(s * item for s in stride))
    out = Tensor._make(arr, buf._device)
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
    buf = C.empty(*[size[p] for p in perm], dtype=dtype, device=device)
    out = Tensor._make(buf._data.transpose(inverse), buf._device)
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
    out = C.from_numpy(arr)
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
    out = C.from_numpy(np.asarray(arr) if not shared else arr)
    if device is not None:
        out = out.to(device)
    return out.requires_grad_() if requires_grad else out


#: the functions here that are also Tensor methods, under the same name
METHODS = (
    "new_empty_strided",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "new",
)

#: the names ``torcia`` exports from here
__all__ = [
    "cartesian_prod", "combinations", "empty_permuted", "empty_strided", "from_file",
    "frombuffer", "meshgrid", "scalar_tensor", "tril_indices", "triu_indices",
]
