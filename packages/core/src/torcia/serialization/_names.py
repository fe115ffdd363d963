"""The rest of ``torch.serialization``'s names: locations, storage types,
endianness, CRC and mmap options, ``skip_data``."""

from __future__ import annotations

import contextlib
import enum
import mmap as _mmap
import sys
import warnings

from torcia import _dtype as D
from torcia import backend
from torcia._legacy import CPU_TYPES
from torcia._storage import LEGACY_CLASSES, TypedStorage, UntypedStorage
from torcia.serialization._format import _STORAGES


class _Options:
    skip_data = False
    crc32 = True
    endianness = None
    mmap_flags = None


_OPTIONS = _Options()


class SourceChangeWarning(Warning):
    """The source of a pickled module's class changed since it was saved (PyTorch warns so
    when loading whole modules).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.serialization.SourceChangeWarning, Warning)
    True
    """


@contextlib.contextmanager
def mkdtemp():
    """A temporary directory for the block, removed after.

    Examples
    --------
    >>> import os
    >>> import torcia
    >>> with torcia.serialization.mkdtemp() as path:
    ...     os.path.isdir(path)
    True
    """
    # loaded with their first use: not a cost of import torcia
    import shutil
    import tempfile

    path = tempfile.mkdtemp()
    try:
        yield path
    finally:
        shutil.rmtree(path)


#: (priority, tagger, deserializer) of each storage location kind, by priority
_PACKAGE_REGISTRY: list = []


def register_package(priority: int, tagger, deserializer) -> None:
    """Add a location kind: ``tagger(storage) -> str or None`` names where a storage lives
    (``"cpu"``, ``"cuda:0"``), ``deserializer(storage, location) -> storage or None``
    moves one there; lower priorities are asked first.

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.location_tag(torcia.ones(1).untyped_storage())
    'cpu'
    """
    _PACKAGE_REGISTRY.append((priority, tagger, deserializer))
    _PACKAGE_REGISTRY.sort(key=lambda entry: entry[0])


def _device_of_storage(storage):
    device = getattr(storage, "device", None)
    return None if device is None else str(device) if device.index is not None or \
        device.type == "cpu" else f"{device.type}:0"


def _cpu_deserialize(storage, location):
    if location == "cpu":
        return storage
    return None


def _device_deserialize(storage, location):
    if location.startswith("cuda"):
        device = validate_cuda_device(location)
        return storage.to(f"cuda:{device}") if hasattr(storage, "to") else storage
    return None


register_package(10, lambda s: "cpu" if _device_of_storage(s) in (None, "cpu") else None,
                 _cpu_deserialize)
register_package(20, lambda s: _device_of_storage(s) if (_device_of_storage(s) or "")
                 .startswith("cuda") else None, _device_deserialize)


def location_tag(storage) -> str:
    """Where ``storage`` lives, as a checkpoint records it (``"cpu"``, ``"cuda:0"``).

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.location_tag(torcia.zeros(2).untyped_storage())
    'cpu'
    """
    for _, tagger, _ in _PACKAGE_REGISTRY:
        location = tagger(storage)
        if location:
            return location
    raise RuntimeError(f"don't know how to determine data location of "
                       f"{type(storage).__name__}")


def default_restore_location(storage, location: str):
    """``storage`` moved to ``location`` by the first registered deserializer that
    handles it.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.ones(1).untyped_storage()
    >>> torcia.serialization.default_restore_location(s, "cpu") is s
    True
    """
    for _, _, deserializer in _PACKAGE_REGISTRY:
        result = deserializer(storage, location)
        if result is not None:
            return result
    raise RuntimeError(f"don't know how to restore data location of {type(storage).__name__} "
                       f"(tagged with {location})")


def validate_cuda_device(location) -> int:
    """The CUDA device index of ``location``, which must exist here.

    Examples
    --------
    >>> import torcia
    >>> torcia.cuda.is_available() or torcia.serialization.validate_cuda_device("cuda:0")
    Traceback (most recent call last):
    ...
    RuntimeError: Attempting to deserialize object on a CUDA device but ...
    """
    device = backend.device(location)
    index = device.index or 0
    cuda = backend._cuda_backend()
    if cuda is None or not cuda.is_available():
        raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                           "torcia.cuda.is_available() is False. If you are running on a "
                           "CPU-only machine, please use torcia.load with "
                           "map_location=torcia.device('cpu') to map your storages to the CPU.")
    count = cuda.device_count()
    if index >= count:
        raise RuntimeError(f"Attempting to deserialize object on CUDA device {index} but "
                           f"torcia.cuda.device_count() is {count}. Please use torcia.load "
                           "with map_location to map your storages to an existing device.")
    return index


def validate_hpu_device(location) -> int:
    """HPUs (Habana Gaudi) have no torcia device: always an error.

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.validate_hpu_device("hpu:0")
    Traceback (most recent call last):
    ...
    RuntimeError: Attempting to deserialize object on a HPU device but torcia has no HPU device...
    """
    raise RuntimeError("Attempting to deserialize object on a HPU device but torcia has no HPU "
                       "device; please use torcia.load with map_location='cpu'")


def check_module_version_greater_or_equal(module, req_version_tuple,
                                          error_if_malformed=True) -> bool:
    """Whether ``module.__version__`` is at least ``req_version_tuple`` (compared part by
    part, each converted to the type of the required part).

    Examples
    --------
    >>> import numpy
    >>> import torcia
    >>> torcia.serialization.check_module_version_greater_or_equal(numpy, (1, 0))
    True
    """
    version = module.__version__.split(".")
    try:
        have = tuple(type(req)(part) for part, req in zip(version, req_version_tuple))
    except ValueError as exc:
        message = (f"'{module.__name__}' module version string is malformed '"
                   f"{module.__version__}' and cannot be compared with tuple "
                   f"{req_version_tuple}")
        if error_if_malformed:
            raise RuntimeError(message) from exc
        warnings.warn(message + ", but continuing assuming that requirement is met",
                      stacklevel=2)
        return True
    return have >= tuple(req_version_tuple)


class StorageType:
    """A legacy storage class named in a checkpoint, standing for its dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.StorageType("FloatStorage").dtype
    torcia.float32
    """

    def __init__(self, name: str):
        self._dtype = _storage_dtype(name)

    @property
    def dtype(self):
        return self._dtype

    def __str__(self):
        return f"StorageType(dtype={self.dtype})"


def _storage_dtype(name: str):
    for dtype_name, storage in _STORAGES.items():
        if storage == name:
            return D._by_name(dtype_name)
    raise AttributeError(f"no storage class {name}")


def normalize_storage_type(storage_type):
    """The torcia class of the same name as ``storage_type``.

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.normalize_storage_type(torcia.FloatStorage) is torcia.FloatStorage
    True
    """
    name = storage_type.__name__
    if name not in _STORAGE_CLASSES:
        raise AttributeError(f"module 'torcia' has no attribute {name!r}")
    return _STORAGE_CLASSES[name]


#: torcia's storage classes by name, as the package exports them
_STORAGE_CLASSES = {**LEGACY_CLASSES, "TypedStorage": TypedStorage,
                    "UntypedStorage": UntypedStorage}


def storage_to_tensor_type(storage):
    """The legacy tensor type matching a typed storage's dtype (``FloatStorage`` ->
    ``FloatTensor``).

    Examples
    --------
    >>> import torcia
    >>> s = torcia.FloatStorage(2)
    >>> torcia.serialization.storage_to_tensor_type(s).__name__
    'FloatTensor'
    """
    name = type(storage).__name__
    if name.endswith("Storage") and name[: -len("Storage")] + "Tensor" in CPU_TYPES:
        return CPU_TYPES[name[: -len("Storage")] + "Tensor"]
    dtype = storage.dtype
    for legacy in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
                   "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"):
        cls = CPU_TYPES.get(legacy)
        if cls is not None and getattr(cls, "dtype", None) is dtype:
            return cls
    raise TypeError(f"no tensor type for storage of dtype {dtype}")


class LoadEndianness(enum.Enum):
    """The byte order of a checkpoint that does not record one (old files).

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.LoadEndianness.LITTLE.value
    2
    """

    NATIVE = 1
    LITTLE = 2
    BIG = 3


def get_default_load_endianness():
    """The byte order assumed for checkpoints without a ``byteorder`` record (None:
    little-endian, as they were all written).

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.get_default_load_endianness() is None
    True
    """
    return _OPTIONS.endianness


def set_default_load_endianness(endianness) -> None:
    """Set the byte order :func:`get_default_load_endianness` reports (a
    :class:`LoadEndianness` or None)."""
    if endianness is not None and not isinstance(endianness, LoadEndianness):
        raise TypeError("Invalid argument type in function set_default_load_endianness")
    _OPTIONS.endianness = endianness


def _default_byteorder() -> str:
    kind = _OPTIONS.endianness
    if kind is LoadEndianness.BIG:
        return "big"
    if kind is LoadEndianness.NATIVE:
        return sys.byteorder
    return "little"


def get_crc32_options() -> bool:
    """Whether saving computes the CRC-32 of each record (True).

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.get_crc32_options()
    True
    """
    return _OPTIONS.crc32


def set_crc32_options(compute_crc32: bool) -> None:
    """PyTorch can skip the CRC-32 of records to save faster; torcia always computes them
    (its loader checks every record against them and against the manifest), so this
    records the wish, which :func:`get_crc32_options` reports."""
    _OPTIONS.crc32 = bool(compute_crc32)


def get_default_mmap_options():
    """The flags of ``torcia.load(..., mmap=True)``'s mapping: ``mmap.MAP_PRIVATE`` (None
    means that: copy-on-write) or ``mmap.MAP_SHARED`` (writes reach the file).

    Examples
    --------
    >>> import torcia
    >>> torcia.serialization.get_default_mmap_options() is None
    True
    """
    return _OPTIONS.mmap_flags


class set_default_mmap_options:  # noqa: N801 - PyTorch's name
    """Set the flags of ``load(mmap=True)``: ``mmap.MAP_PRIVATE`` or ``mmap.MAP_SHARED``;
    as a context manager, for the block only.

    Examples
    --------
    >>> import mmap
    >>> import torcia
    >>> with torcia.serialization.set_default_mmap_options(mmap.MAP_SHARED):
    ...     torcia.serialization.get_default_mmap_options() == mmap.MAP_SHARED
    True
    """

    def __init__(self, flags: int):
        if flags not in (_mmap.MAP_PRIVATE, _mmap.MAP_SHARED):
            raise ValueError("Invalid argument in function set_default_mmap_options, expected "
                             f"mmap.MAP_PRIVATE or mmap.MAP_SHARED, but got {flags}")
        self.previous = _OPTIONS.mmap_flags
        _OPTIONS.mmap_flags = flags

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _OPTIONS.mmap_flags = self.previous
        return False


def _mapped(path: str, handle):
    if _OPTIONS.mmap_flags == _mmap.MAP_SHARED:
        with open(path, "r+b") as shared:
            return _mmap.mmap(shared.fileno(), 0, access=_mmap.ACCESS_WRITE)
    return _mmap.mmap(handle.fileno(), 0, access=_mmap.ACCESS_COPY)


class skip_data:  # noqa: N801 - PyTorch's name
    """Inside the block, ``save`` writes every tensor's room but not its bytes (zeros),
    and ``load`` makes tensors of the right shapes without reading their bytes (zeros):
    a checkpoint's structure, cheaply.

    Examples
    --------
    >>> import io
    >>> import torcia
    >>> buf = io.BytesIO()
    >>> with torcia.serialization.skip_data():
    ...     torcia.save({"w": torcia.ones(3)}, buf)
    >>> _ = buf.seek(0)
    >>> torcia.load(buf)["w"]
    tensor([0., 0., 0.])
    """

    def __init__(self, materialize_fake_tensors: bool = False):
        self.materialize_fake_tensors = materialize_fake_tensors

    def __enter__(self):
        self._saved = _OPTIONS.skip_data
        _OPTIONS.skip_data = True
        return self

    def __exit__(self, *exc):
        _OPTIONS.skip_data = self._saved
        return False
