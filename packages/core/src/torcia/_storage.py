"""Storages: PyTorch's view of the flat memory under a tensor.

A torcia tensor holds an array of its device's array module; the storage of a tensor is
the flat memory of the tensor it is a view of (its ``_base``, or itself), seen as bytes
(:class:`UntypedStorage`) or as elements of a dtype (:class:`TypedStorage` and the legacy
``FloatStorage``, ``LongStorage``...). Storages share that memory: writing through a
storage changes the tensors over it, and ``Tensor.set_(storage, ...)`` makes a tensor
over a storage.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._grad_mode import STATE
from torcia._tensor import AUTOGRAD, Tensor, _address, canonical_device
from torcia.backend import CPU


def _flat_memory(t: Tensor):
    """The flat array of the memory under ``t``: its base's array, in memory order."""
    root = t._base if t._base is not None else t
    arr = root._data
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return arr.ravel(order="K"), root._device
    # a base over scattered memory (a strided NumPy array given to from_numpy): only the
    # tensor's own elements can be shown, as a copy
    return t._data.reshape(-1), t._device


def _storage_root(t: Tensor) -> Tensor:
    """The tensor whose memory is ``t``'s storage: the base ``t`` is a view of, or itself."""
    return t._base if t._base is not None else t


def storage_offset(self) -> int:
    """The offset of the first element in the storage, in elements: where a view starts in
    its base's memory.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(12).view(3, 4)
    >>> x.storage_offset(), x[1:, 2:].storage_offset(), x.t()[1].storage_offset()
    (0, 6, 1)
    """
    root = _storage_root(self)
    if root is self:
        return 0
    # NOTE: an empty view reports where NumPy left its pointer, which for a slice past the
    # end is not the slice's start (PyTorch's answer there)
    return (_address(self._data) - _address(root._data)) // self._data.itemsize


def holder(t: Tensor) -> Tensor:
    """A tensor over ``t``'s present memory, outside any graph and sharing its version
    counter: the base ``t`` becomes a view of when it takes other strides or another
    offset in place (``as_strided_``, ``set_``)."""
    out = Tensor._make(t._data, t._device)
    out._vc = t._vc
    return out


def storage_size(t: Tensor) -> int:
    """The number of elements of ``t``'s storage: its base's memory, first to last element."""
    root = _storage_root(t)._data
    if not root.size:
        return 0
    return 1 + sum((n - 1) * abs(s) for n, s in zip(root.shape, root.strides)) // root.itemsize


def inplace_view(self, view_fn, *args):
    """Make ``self`` the view ``view_fn(self, *args)``, as PyTorch's ``t_`` and friends: same
    storage, new shape and strides, and (when recording) the view's node as history."""
    recording = self._requires_grad and STATE.enabled
    if recording:
        AUTOGRAD.engine.check_inplace(self)
    out = view_fn(self, *args)
    if self._base is None:
        # self becomes a view of its old memory (which stays its storage, for
        # storage_offset and as_strided)
        self._base = holder(self)
    self._data = out._data
    if recording:
        self.grad_fn = out.grad_fn
        self._out_nr = out._out_nr
    self._vc[0] += 1
    return self


# the public functions of torcia._ops.views, below the Tensor class, reach these here
_opdef.STORAGE_SIZE, _opdef.INPLACE_VIEW = storage_size, inplace_view


def _host(arr, device):
    return arr if device is CPU else device.backend.to_host(arr)


class _StorageBase:
    """What byte and typed storages share: length, items, copies and device moves."""

    __slots__ = ("_data", "_device")

    def size(self) -> int:
        """The number of elements (bytes for an untyped storage)."""
        return int(self._data.size)

    def __len__(self) -> int:
        return int(self._data.size)

    def nbytes(self) -> int:
        """The size in bytes."""
        return int(self._data.nbytes)

    def element_size(self) -> int:
        """The size of one element in bytes."""
        return int(self._data.itemsize)

    @property
    def device(self):
        """The device the memory is on."""
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_sparse(self) -> bool:
        return False

    def data_ptr(self) -> int:
        """The address of the first element (0 off the host)."""
        return self._data.__array_interface__["data"][0] if self._device is CPU else 0

    def tolist(self) -> list:
        """The elements as a Python list."""
        return _host(self._data, self._device).tolist()

    def __getitem__(self, index):
        if isinstance(index, slice):
            if index.step not in (None, 1):
                raise RuntimeError(f"Trying to slice with a step of {index.step}, but only a "
                                   "step of 1 is supported")
            return self._wrap(self._data[index])  # the same memory, as PyTorch's
        return _host(self._data, self._device)[index].tolist()

    def __setitem__(self, index, value):
        self._data[index] = value.tolist() if isinstance(value, _StorageBase) else value

    def __iter__(self):
        return iter(self.tolist())

    def fill_(self, value):
        """Set every element to ``value``."""
        self._data[...] = value
        return self

    def copy_(self, source, non_blocking=None):
        """Copy ``source`` (a storage of the same size) into this memory."""
        if len(source) != len(self):
            raise RuntimeError(f"size mismatch, got {len(self)}, {len(source)}")
        src = source._data.view(self._data.dtype) if isinstance(source, UntypedStorage) \
            and not isinstance(self, UntypedStorage) else source._data
        self._data[...] = src.astype(self._data.dtype, copy=False)
        return self

    def clone(self):
        """A copy in new memory."""
        return self._wrap(self._data.copy())

    def cpu(self):
        """This storage on the host (itself when it is there)."""
        if self._device is CPU:
            return self
        return self._wrap(self._device.backend.to_host(self._data), CPU)

    def is_shared(self) -> bool:
        """Whether the memory is in shared memory for other processes: never here."""
        return False

    def is_pinned(self, device="cuda") -> bool:
        return False

    def __repr__(self):
        items = "\n".join(f" {v}" for v in self.tolist())
        return f"{items}\n[{self._type_name()} of size {len(self)}]"


class UntypedStorage(_StorageBase):
    """The bytes of memory under tensors (``Tensor.untyped_storage()``).

    ``UntypedStorage(n)`` is ``n`` zero bytes; ``UntypedStorage(sequence)`` holds the given
    byte values.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0])
    >>> s = x.untyped_storage()
    >>> s.nbytes(), s.data_ptr() == x.data_ptr()
    (8, True)
    """

    __slots__ = ()
    dtype = D.uint8

    def __init__(self, *args, device=None):
        dev = canonical_device(device)
        if not args:
            host = np.zeros(0, dtype=np.uint8)
        elif len(args) == 1 and isinstance(args[0], int):
            host = np.zeros(args[0], dtype=np.uint8)
        elif len(args) == 1:
            host = np.asarray(list(args[0]), dtype=np.uint8)
        else:
            raise TypeError(f"UntypedStorage(): expected a size or a sequence, got {args!r}")
        self._data = host if dev is CPU else dev.backend.from_host(host, dev.index)
        self._device = dev

    @classmethod
    def _of(cls, arr, device):
        out = cls.__new__(cls)
        out._data = arr.view(np.uint8) if arr.dtype != np.uint8 else arr
        out._device = device
        return out

    def _wrap(self, arr, device=None):
        return UntypedStorage._of(arr, device or self._device)

    def _type_name(self) -> str:
        return f"torcia.storage.UntypedStorage(device={self._device})"

    @classmethod
    def from_file(cls, filename, shared: bool = False, nbytes: int = 0) -> UntypedStorage:
        """The first ``nbytes`` bytes of the file ``filename``, memory-mapped: with
        ``shared`` writes go to the file (which is created or extended to ``nbytes`` as
        needed), without it they stay in this process's copy of the pages, and the file
        must hold ``nbytes`` bytes.

        Examples
        --------
        >>> import os, tempfile
        >>> import torcia
        >>> path = os.path.join(tempfile.mkdtemp(), "b.bin")
        >>> _ = open(path, "wb").write(bytes(range(6)))
        >>> s = torcia.UntypedStorage.from_file(path, shared=False, nbytes=6)
        >>> s[2:4].tolist(), torcia.asarray(s[0:4], dtype=torcia.int16).tolist()
        ([2, 3], [256, 770])
        """
        path = os.fspath(filename)
        if shared and nbytes and (not os.path.exists(path) or os.path.getsize(path) < nbytes):
            with open(path, "ab") as f:
                f.truncate(nbytes)
        size = os.path.getsize(path)
        if size < nbytes:
            raise RuntimeError(f"file <{path}> size <{size}> is smaller than the required "
                               f"mapping size <{nbytes}>")
        if nbytes == 0:
            return cls._of(np.zeros(0, dtype=np.uint8), CPU)
        mapped = np.memmap(path, dtype=np.uint8, mode="r+" if shared else "c",
                           shape=(nbytes,))
        return cls._of(mapped.view(np.ndarray), CPU)

    def element_size(self) -> int:
        return 1

    def untyped(self):
        return self


class TypedStorage(_StorageBase):
    """The memory under a tensor seen as elements of its dtype (``Tensor.storage()``;
    PyTorch deprecates it in favour of :class:`UntypedStorage`).

    ``TypedStorage(n, dtype=...)`` is ``n`` zeros, ``TypedStorage(sequence, dtype=...)``
    holds the values; ``wrap_storage=`` views an :class:`UntypedStorage` as ``dtype``.

    Examples
    --------
    >>> import torcia
    >>> torcia.TypedStorage([1.0, 2.0], dtype=torcia.float64).tolist()
    [1.0, 2.0]
    """

    __slots__ = ()
    _fixed_dtype = None

    def __init__(self, *args, dtype=None, device=None, wrap_storage=None, _internal=False):
        if not _internal:
            warnings.warn("TypedStorage is deprecated. It will be removed in the future and "
                          "UntypedStorage will be the only storage class.", UserWarning,
                          stacklevel=2)
        dt = self._fixed_dtype or dtype or D.get_default_dtype()
        if self._fixed_dtype is not None and dtype not in (None, self._fixed_dtype):
            raise RuntimeError(f"__init__ received an invalid combination of arguments: "
                               f"dtype {dtype} for {type(self).__name__}")
        if wrap_storage is not None:
            if args:
                raise RuntimeError("No positional arguments should be given when using "
                                   "'wrap_storage'")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(f"expected 'wrap_storage' to be an UntypedStorage, but got "
                                f"{type(wrap_storage).__name__}")
            self._data = wrap_storage._data.view(dt.to_numpy())
            self._device = wrap_storage._device
            return
        dev = canonical_device(device)
        if not args:
            host = np.zeros(0, dtype=dt.to_numpy())
        elif len(args) == 1 and isinstance(args[0], int):
            host = np.zeros(args[0], dtype=dt.to_numpy())
        elif len(args) == 1:
            host = np.asarray(list(args[0]), dtype=dt.to_numpy())
        else:
            raise TypeError(f"TypedStorage(): expected a size or a sequence, got {args!r}")
        self._data = host if dev is CPU else dev.backend.from_host(host, dev.index)
        self._device = dev

    @classmethod
    def _of(cls, arr, device):
        out = cls.__new__(cls)
        out._data = arr
        out._device = device
        return out

    def _wrap(self, arr, device=None):
        return type(self)._of(arr, device or self._device)

    @property
    def dtype(self):
        """The element dtype."""
        return D.FROM_NUMPY[self._data.dtype]

    def _type_name(self) -> str:
        return f"torcia.storage.TypedStorage(dtype={self.dtype}, device={self._device})"

    def untyped(self) -> UntypedStorage:
        """The same memory as bytes."""
        return UntypedStorage._of(self._data, self._device)

    @property
    def _untyped_storage(self) -> UntypedStorage:
        return self.untyped()

    def type(self, dtype=None):
        """The legacy type name (``"torcia.FloatStorage"``), or this storage as another
        legacy storage class."""
        if dtype is None:
            return f"torcia.{LEGACY_BY_DTYPE[self.dtype].__name__}"
        cls = dtype if isinstance(dtype, type) else _LEGACY_BY_NAME[dtype.rsplit(".", 1)[-1]]
        return cls._of(self._data.astype(cls._fixed_dtype.to_numpy()), self._device)


def _legacy(name, dt):
    cls = type(name, (TypedStorage,), {
        "__slots__": (), "_fixed_dtype": dt,
        "__doc__": (f"PyTorch's legacy storage of {dt} elements (a :class:`TypedStorage`)."
                    "\n\nExamples\n--------\n>>> import warnings\n>>> import torcia\n"
                    ">>> with warnings.catch_warnings():\n"
                    "...     warnings.simplefilter('ignore')  # TypedStorage is deprecated\n"
                    f"...     storage = torcia.{name}(3)\n>>> len(storage), storage.dtype\n"
                    f"(3, {dt})\n"),
    })

    def init(self, *args, device=None, dtype=None, wrap_storage=None):
        TypedStorage.__init__(self, *args, dtype=dtype, device=device,
                              wrap_storage=wrap_storage, _internal=True)

    cls.__init__ = init
    cls.__module__ = "torcia"
    return cls


LEGACY = {
    "BoolStorage": D.bool_, "ByteStorage": D.uint8, "CharStorage": D.int8,
    "ShortStorage": D.int16, "IntStorage": D.int32, "LongStorage": D.int64,
    "HalfStorage": D.float16, "BFloat16Storage": D.bfloat16, "FloatStorage": D.float32,
    "DoubleStorage": D.float64, "ComplexFloatStorage": D.complex64,
    "ComplexDoubleStorage": D.complex128,
}
LEGACY_CLASSES = {name: _legacy(name, dt) for name, dt in LEGACY.items()}
LEGACY_BY_DTYPE = {cls._fixed_dtype: cls for cls in LEGACY_CLASSES.values()}
_LEGACY_BY_NAME = LEGACY_CLASSES


# ---------------------------------------------------------------------------------------
# the Tensor methods
# ---------------------------------------------------------------------------------------


def untyped_storage(self) -> UntypedStorage:
    """The bytes of memory under this tensor (shared with it).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).untyped_storage().nbytes()
    24
    """
    flat, dev = _flat_memory(self)
    return UntypedStorage._of(flat, dev)


def storage(self) -> TypedStorage:
    """The memory under this tensor as a storage of its dtype (PyTorch deprecates it for
    :meth:`untyped_storage`).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, 2, 3])
    >>> x[1:].storage().tolist()
    [1, 2, 3]
    """
    warnings.warn("TypedStorage is deprecated. It will be removed in the future and "
                  "UntypedStorage will be the only storage class. To access UntypedStorage "
                  "directly, use tensor.untyped_storage() instead of tensor.storage()",
                  UserWarning, stacklevel=2)
    flat, dev = _flat_memory(self)
    return TypedStorage._of(flat, dev)


def storage_type(self):
    """The legacy storage class of this tensor's dtype (``torcia.FloatStorage``...).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(1).storage_type().__name__
    'FloatStorage'
    """
    return LEGACY_BY_DTYPE[self.dtype]


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """Make this tensor view ``source``: another tensor's memory, a storage (with
    ``storage_offset``, ``size`` and ``stride`` in elements), or, without ``source``,
    new empty memory.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.FloatStorage([1.0, 2.0, 3.0, 4.0])
    >>> torcia.empty(0).set_(s, 1, (2,), (1,))
    tensor([2., 3.])
    """
    if self._requires_grad and STATE.enabled:
        AUTOGRAD.engine.check_inplace(self)
    if source is None:
        self._data = self._device.backend.xp.zeros(0, dtype=self._data.dtype)
        self._base = None
    elif isinstance(source, Tensor):
        if source.dtype is not self.dtype:
            raise RuntimeError(f"Could not set tensor of type {source.dtype} to a tensor of "
                               f"type {self.dtype}")
        self._data = source._data
        self._device = source._device
        self._base = _storage_root(source)
    elif isinstance(source, _StorageBase):
        flat = source._data
        if isinstance(source, UntypedStorage):
            flat = flat.view(self._data.dtype)
        elif flat.dtype != self._data.dtype:
            raise RuntimeError(f"Expected a Storage of type {self.dtype} or an "
                               f"UntypedStorage, but got type {source.dtype} for argument "
                               "#1 'storage'")
        if size is None:
            size, stride = (flat.size - storage_offset,), (1,)
        size = tuple(int(s) for s in size)
        if stride is None:
            stride, acc = [], 1
            for s in reversed(size):
                stride.insert(0, acc)
                acc *= max(s, 1)
        stride = tuple(int(s) for s in stride)
        need = storage_offset + (0 if 0 in size else 1 + sum(
            (s - 1) * st for s, st in zip(size, stride)))
        if need > flat.size:
            raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, "
                               f"storage offset {storage_offset}, and itemsize "
                               f"{flat.itemsize} requiring a storage size of "
                               f"{need * flat.itemsize} are out of bounds for storage of "
                               f"size {flat.nbytes}")
        item = flat.itemsize
        self._data = source._device.backend.xp.lib.stride_tricks.as_strided(
            flat[storage_offset:], size, tuple(s * item for s in stride))
        self._device = source._device
        self._base = Tensor._make(flat, source._device)
    else:
        raise TypeError(f"set_(): expected a Tensor or a storage, got "
                        f"{type(source).__name__}")
    self._vc[0] += 1
    return self


def is_storage(obj) -> bool:
    """Whether ``obj`` is a storage (:class:`TypedStorage` or :class:`UntypedStorage`).

    Examples
    --------
    >>> import torcia
    >>> torcia.is_storage(torcia.zeros(1)), torcia.is_storage(torcia.zeros(1).untyped_storage())
    (False, True)
    """
    return isinstance(obj, _StorageBase)


METHODS = {"untyped_storage": untyped_storage, "storage": storage,
           "storage_type": storage_type, "set_": set_, "storage_offset": storage_offset}
