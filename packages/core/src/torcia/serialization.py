"""``torcia.save`` and ``torcia.load``: PyTorch's checkpoint format, loaded safely.

**The format.** :func:`save` writes PyTorch's zip format, so ``torch.load(path,
weights_only=True)`` reads a torcia checkpoint and :func:`load` reads one written by
``torch.save``, without importing torch. The archive holds, under ``archive/``:

- ``data.pkl``: the object, pickled with protocol 2 by default. A tensor pickles as
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``
  and a storage as the persistent id ``("storage", torch.FloatStorage, key, location,
  numel)``, exactly as PyTorch writes them; views of one array share one storage.
- ``data/<key>``: each storage's raw bytes, aligned to 64 bytes.
- ``byteorder``, ``version``, ``.format_version``, ``.storage_alignment``: PyTorch's records.
- ``.data/torcia_manifest.json``: the sha256 of every other record, which PyTorch ignores.

The zip comment holds ``torcia-sha256:<hex>``, the sha256 of every byte before it but the
records' data, which the manifest covers. Loading a torcia-written file checks that digest,
the manifest and every record's CRC-32 before it unpickles anything, so a flipped bit
anywhere in the file is a :class:`RuntimeError` (``torch.load`` notices about a third of
random bit flips in its own files). Files from ``torch.save`` have no manifest; for them the
zip's CRC-32 of each record is verified.

**Why PyTorch's format is the default.** Checkpoints travel: people bring weights saved by
PyTorch and take torcia's to PyTorch. The risk of a pickle is in *loading* it, and
:func:`load` removes that risk the way PyTorch 2.6 does: ``weights_only=True`` (the default)
unpickles through an allowlist of globals (the tensor rebuild functions, storages, dtypes,
``torch.Size``, ``torch.device``, ``OrderedDict`` and the primitive containers) and refuses
anything else *without calling it*. The allowlist is extended with :func:`add_safe_globals`
or :func:`safe_globals`.

:func:`load` also reads PyTorch's legacy format (before PyTorch 1.6, still the format of
many published checkpoints) with the same allowlist, and the files written by earlier torcia
versions (the ``torcia-archive`` format: ``structure.json`` and ``.npy`` arrays).

**Safe writes.** The whole object is pickled in memory before the file is touched: an
unsavable object found late leaves the previous file as it was. A path is written to a
temporary file in the same directory, flushed and fsynced, then renamed over the target with
:func:`os.replace`, so a full disk, a killed process or two processes saving at once never
leave a corrupt checkpoint (a killed process may leave its ``.<name>.*.tmp`` file behind).
"""

from __future__ import annotations

import _compat_pickle
import codecs
import contextlib
import enum
import hashlib
import io
import json
import math
import mmap as _mmap
import os
import pickle
import pickletools
import shutil
import sys
import tempfile
import threading
import warnings
import zipfile
import zlib
from collections import Counter, OrderedDict

import numpy as np

from torcia import _dtype as D
from torcia import plugins
from torcia._tensor import Size, Tensor
from torcia.backend import device as _device

__all__ = [
    "DEFAULT_PROTOCOL", "LoadEndianness", "SourceChangeWarning", "StorageType",
    "add_safe_globals", "check_module_version_greater_or_equal", "clear_safe_globals",
    "default_restore_location", "get_crc32_options", "get_default_load_endianness",
    "get_default_mmap_options", "get_safe_globals", "get_unsafe_globals_in_checkpoint",
    "load", "location_tag", "mkdtemp", "normalize_storage_type", "register_package",
    "safe_globals", "save", "set_crc32_options", "set_default_load_endianness",
    "set_default_mmap_options", "skip_data", "storage_to_tensor_type", "validate_cuda_device",
    "validate_hpu_device",
]

DEFAULT_PROTOCOL = 2
"""PyTorch's default pickle protocol, kept so that old PyTorch versions read the files."""

# Limits that stop crafted archives before they cost memory or time. A compressed record
# may expand at most _MAX_RATIO times (PyTorch stores records uncompressed; a deflated
# float array shrinks by a few percent, a zip bomb by a factor of a thousand).
_MAX_RATIO = 100
_MAX_STRUCTURE_BYTES = 64 << 20
_MAX_DEPTH = 200
_MAX_DIMS = 64

_ALIGNMENT = 64
_MANIFEST = ".data/torcia_manifest.json"
_COMMENT_TAG = b"torcia-sha256:"
_LEGACY_STRUCTURE = "structure.json"

# torch dtype name -> (legacy storage class name, torcia dtype name or None when torcia has
# no such dtype)
_STORAGES = {
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
    "bool": "BoolStorage", "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage", "qint8": "QInt8Storage",
    "quint8": "QUInt8Storage", "qint32": "QInt32Storage", "quint4x2": "QUInt4x2Storage",
    "quint2x4": "QUInt2x4Storage",
}
_TORCH_ONLY_DTYPES = (
    "complex32", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn",
    "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "qint8", "quint8", "qint32",
    "quint4x2", "quint2x4", "bits8", "bits16", "bits1x8", "bits2x4", "bits4x2",
)


# ---------------------------------------------------------------------------------------
# the safe-globals allowlist
# ---------------------------------------------------------------------------------------

_user_globals: dict[str, object] = {}
_user_lock = threading.Lock()
_scoped = threading.local()


def _global_name(entry) -> tuple[str, object]:
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError("a safe global given as a tuple must be (object, "
                            "'module.qualified_name')")
        return entry[1], entry[0]
    module = getattr(entry, "__module__", None)
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None)
    if module is None or name is None:
        raise TypeError(f"{entry!r} has no __module__ and __qualname__; pass it as "
                        "(object, 'module.qualified_name')")
    return f"{module}.{name}", entry


def add_safe_globals(safe_globals: list) -> None:
    """Allow :func:`load` with ``weights_only=True`` to use these classes and functions.

    Parameters
    ----------
    safe_globals : list
        Classes or functions, or ``(object, "module.qualified_name")`` tuples for objects
        pickled under another name. Only add what you trust: unpickling calls them with
        arguments taken from the file.

    Examples
    --------
    >>> import io, fractions, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save({"ratio": fractions.Fraction(1, 3)}, buf)
    >>> torcia.serialization.add_safe_globals([fractions.Fraction])
    >>> _ = buf.seek(0)
    >>> torcia.load(buf)
    {'ratio': Fraction(1, 3)}
    >>> torcia.serialization.clear_safe_globals()
    """
    entries = [_global_name(g) for g in safe_globals]
    with _user_lock:
        _user_globals.update(entries)


def get_safe_globals() -> list:
    """The objects added with :func:`add_safe_globals` (not those of :func:`safe_globals`).

    Examples
    --------
    >>> import collections, torcia
    >>> torcia.serialization.add_safe_globals([collections.deque])
    >>> torcia.serialization.get_safe_globals()
    [<class 'collections.deque'>]
    >>> torcia.serialization.clear_safe_globals()
    """
    with _user_lock:
        return list(_user_globals.values())


def clear_safe_globals() -> None:
    """Forget every object added with :func:`add_safe_globals`.

    Examples
    --------
    >>> import collections, torcia
    >>> torcia.serialization.add_safe_globals([collections.deque])
    >>> torcia.serialization.clear_safe_globals()
    >>> torcia.serialization.get_safe_globals()
    []
    """
    with _user_lock:
        _user_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list):
    """Allow these globals in :func:`load` while the ``with`` block runs (in this thread).

    Examples
    --------
    >>> import collections, io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save(collections.deque([1, 2]), buf)
    >>> _ = buf.seek(0)
    >>> with torcia.serialization.safe_globals([collections.deque]):
    ...     torcia.load(buf)
    deque([1, 2])
    """
    entries = dict(_global_name(g) for g in safe_globals)
    stack = getattr(_scoped, "stack", None)
    if stack is None:
        stack = _scoped.stack = []
    stack.append(entries)
    try:
        yield
    finally:
        stack.pop()


def _allowed_by_user(full_name: str):
    for entries in reversed(getattr(_scoped, "stack", None) or []):
        if full_name in entries:
            return entries[full_name]
    with _user_lock:
        return _user_globals.get(full_name)


# ---------------------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------------------


class _TorchName:
    """A global written as ``module\\nname`` without importing ``module`` (torch)."""

    __slots__ = ("module", "name")
    _cache: dict = {}

    def __new__(cls, module: str, name: str):
        key = (module, name)
        obj = cls._cache.get(key)
        if obj is None:
            obj = object.__new__(cls)
            obj.module, obj.name = module, name
            cls._cache[key] = obj
        return obj

    def __call__(self, *args):
        # pickle's save_reduce insists on a callable; this one only ever names a global
        raise TypeError(f"{self.module}.{self.name} is a name written into pickles")


class _Storage:
    """One storage being saved: the root array whose bytes it holds."""

    __slots__ = ("key", "array", "dtype", "location")

    def __init__(self, key, array, dtype, location):
        self.key, self.array, self.dtype, self.location = key, array, dtype, location


class _Pickler(pickle._Pickler):
    # The pure-Python pickler, because only it lets a dispatch entry write a GLOBAL for a
    # module (torch) that is not importable here.
    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.storages: dict[int, _Storage] = {}
        self.keep_alive: list = []

    def persistent_id(self, obj):
        if type(obj) is _Storage:
            return ("storage", _TorchName("torch", _STORAGES[obj.dtype.name]), obj.key,
                    obj.location, obj.array.size)
        return None

    def storage_of(self, t: Tensor):
        """The storage behind ``t`` and where ``t`` sits in it (offset, stride)."""
        arr = t._data if t.device.type == "cpu" else Tensor.detach(t).cpu()._data
        location = str(t.device)
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        item = arr.itemsize
        start = arr.__array_interface__["data"][0] if arr.size else 0
        origin = root.__array_interface__["data"][0] if root.size else 0
        shares = (root is not arr and location == "cpu" and arr.size > 0
                  and root.dtype == arr.dtype and root.flags.c_contiguous
                  and all(s >= 0 and s % item == 0 for s in arr.strides)
                  and (start - origin) % item == 0 and start >= origin)
        if not shares:
            root = np.ascontiguousarray(arr)
            offset, strides = 0, _contiguous(arr.shape)
        else:
            offset = (start - origin) // item
            strides = tuple(s // item for s in arr.strides)
        storage = self.storages.get(id(root))
        if storage is None:
            storage = _Storage(str(len(self.storages)), root.reshape(-1), t.dtype, location)
            self.storages[id(root)] = storage
            self.keep_alive.append(root)  # ids stay unique while the root is alive
        return storage, offset, strides

    def reducer_override(self, obj):
        if not isinstance(obj, Tensor):
            return NotImplemented
        if type(obj) is not Tensor:
            plain = Tensor.detach(obj)
            # torcia.nn.Parameter, named as torch names its own (core cannot import nn)
            if type(obj).__name__ == "Parameter":
                return (_TorchName("torch._utils", "_rebuild_parameter"),
                        (plain, obj.requires_grad, OrderedDict()))
            return (_rebuild_subclass, (type(obj), plain, obj.requires_grad))
        storage, offset, stride = self.storage_of(obj)
        return (_TorchName("torch._utils", "_rebuild_tensor_v2"),
                (storage, offset, tuple(obj.shape), stride, obj.requires_grad,
                 OrderedDict()))


def _contiguous(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def _save_torch_name(pickler, obj):
    pickler.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
    pickler.memoize(obj)


def _save_dtype(pickler, obj):
    pickler.save(_TorchName("torch", obj.name))


def _save_device(pickler, obj):
    args = (obj.type,) if obj.index is None else (obj.type, obj.index)
    pickler.save_reduce(_TorchName("torch", "device"), args, obj=obj)


def _save_size(pickler, obj):
    pickler.save_reduce(_TorchName("torch", "Size"), (tuple(int(n) for n in obj),), obj=obj)


_Pickler.dispatch[_TorchName] = _save_torch_name
_Pickler.dispatch[D.dtype] = _save_dtype
_Pickler.dispatch[_device] = _save_device
_Pickler.dispatch[Size] = _save_size


def _rebuild_subclass(cls, data, requires_grad):
    """Rebuilds a tensor subclass other than Parameter (only ``weights_only=False``)."""
    t = Tensor._make(data._data, data.device)
    t.__class__ = cls
    if requires_grad:
        t.requires_grad_(True)
    return t


def _frame_digest(buffer, skipped, end: int) -> bytes:
    """The sha256 of ``buffer[:end]`` without the byte ranges ``skipped``: the zip's
    headers, directory and small records, while the storages have their own sha256 in the
    manifest (so that no byte is hashed twice)."""
    digest = hashlib.sha256()
    view = memoryview(buffer)
    position = 0
    for start, stop in sorted(skipped):
        if not position <= start <= stop <= end:
            return b""
        digest.update(view[position:start])
        position = stop
    digest.update(view[position:end])
    return digest.hexdigest().encode()


def _archive(obj, protocol: int) -> list:
    """The checkpoint's bytes, as a list of chunks to write in order."""
    pkl = io.BytesIO()
    pickler = _Pickler(pkl, protocol)
    pickler.dump(obj)
    records = [("data.pkl", pkl.getvalue()), (".format_version", b"1"),
               (".storage_alignment", str(_ALIGNMENT).encode()),
               ("byteorder", sys.byteorder.encode())]
    for storage in pickler.storages.values():
        # under skip_data, the room of the bytes is kept and left empty
        records.append((f"data/{storage.key}", bytes(storage.array.nbytes) if
                        _OPTIONS.skip_data else storage.array.tobytes()))
    records.append(("version", b"3\n"))
    manifest = {"format": "torcia-manifest", "version": 1,
                "sha256": {name: hashlib.sha256(data).hexdigest() for name, data in records}}
    records.append((_MANIFEST, json.dumps(manifest, sort_keys=True).encode()))

    out = io.BytesIO()
    hashed = []  # where each record's data lies, but the manifest's
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for name, data in records:
            full = f"archive/{name}".encode()
            # PyTorch's alignment: pad the local header's extra field (id "FB") so that
            # the data starts on a 64-byte boundary and can be memory-mapped as arrays
            start = out.tell() + 30 + len(full) + 4
            pad = -start % _ALIGNMENT
            info = zipfile.ZipInfo(f"archive/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.extra = b"FB" + pad.to_bytes(2, "little") + b"Z" * pad
            archive.writestr(info, data)
            if name != _MANIFEST:
                hashed.append((out.tell() - len(data), out.tell()))
    # The end record closes with a 2-byte comment length: the digest covers what precedes
    buffer = out.getbuffer()
    comment = _COMMENT_TAG + _frame_digest(buffer, hashed, len(buffer) - 2)
    return [buffer[:-2], len(comment).to_bytes(2, "little") + comment]


def save(obj, f, pickle_module=None, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True):
    """Save ``obj`` in PyTorch's checkpoint format.

    ``obj`` may be anything picklable: a ``state_dict()``, a dict of model and optimizer
    states, a whole module, NumPy arrays. Tensors are stored as PyTorch stores them, so
    ``torch.load(f, weights_only=True)`` reads state dicts and nested containers of
    tensors written here. Loading anything beyond those with :func:`load` needs
    :func:`add_safe_globals` or ``weights_only=False``.

    The object is pickled completely before ``f`` is touched. A path is written through a
    temporary file in the same directory that replaces ``f`` only once it is complete and
    on disk, so a failure at any point leaves the previous file intact.

    Parameters
    ----------
    obj : object
        What to save.
    f : str, os.PathLike or binary file object
        Where to write.
    pickle_module : module, optional
        Only :mod:`pickle` (the default) is supported.
    pickle_protocol : int
        The pickle protocol of ``data.pkl`` (2, PyTorch's default, unless told).

    Examples
    --------
    >>> import io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save({"w": torcia.tensor([1.0, 2.0]), "step": 3}, buf)
    >>> _ = buf.seek(0)
    >>> torcia.load(buf)
    {'w': tensor([1., 2.]), 'step': 3}
    """
    if pickle_module not in (None, pickle):
        raise ValueError("torcia.save pickles with the pickle module only: pickle_module="
                         f"{pickle_module!r} is not supported")
    if not _use_new_zipfile_serialization:
        raise ValueError("torcia.save writes PyTorch's zip format only; the legacy format "
                         "(_use_new_zipfile_serialization=False) is not supported")
    if isinstance(f, (str, os.PathLike)):
        _replace_atomically(os.fspath(f), _archive(obj, pickle_protocol))
        return
    if not hasattr(f, "write"):
        raise TypeError(f"torcia.save expects a path or a binary file object, got "
                        f"{type(f).__name__}")
    for chunk in _archive(obj, pickle_protocol):
        f.write(chunk)
    if hasattr(f, "flush"):
        f.flush()


def _read_umask() -> int:
    # read once, at import: os.umask can only be read by setting it, which would race
    # with other threads creating files
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; a checkpoint gets the mode open() would give it
_FILE_MODE = 0o666 & ~_read_umask()


def _replace_atomically(path: str, chunks: list) -> None:
    path = os.path.realpath(path)  # through a symlink to its target, as open() writes
    folder = os.path.dirname(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=folder)
    except OSError as exc:
        raise type(exc)(exc.errno, f"torcia.save: {exc.strerror}", path) from None
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise type(exc)(exc.errno, f"torcia.save: {exc.strerror} (the previous file, "
                            "if any, is unchanged)", path) from None
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# ---------------------------------------------------------------------------------------
# loading PyTorch's zip format
# ---------------------------------------------------------------------------------------


class _StorageType:
    """What ``torch.FloatStorage`` and friends unpickle to: the element dtype."""

    __slots__ = ("torch_name", "dtype_name")

    def __init__(self, torch_name, dtype_name):
        self.torch_name, self.dtype_name = torch_name, dtype_name


class _LoadedStorage:
    __slots__ = ("array", "location", "loader")

    def __init__(self, array, location, loader):
        self.array, self.location, self.loader = array, location, loader


def _torcia_dtype(name: str):
    try:
        return D._by_name(name)
    except KeyError:
        return None


def _unsupported(what):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"the checkpoint holds {what}, which torcia does not support")
    return refuse


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _check_storage(storage).loader.tensor(storage, storage_offset, size, stride, None)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    t = _check_storage(storage).loader.tensor(storage, storage_offset, size, stride, None)
    return t.requires_grad_(True) if requires_grad else t


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None):
    loader = _check_storage(storage).loader
    t = loader.tensor(storage, storage_offset, size, stride, dtype)
    return t.requires_grad_(True) if requires_grad else t


def _check_storage(storage) -> _LoadedStorage:
    if type(storage) is not _LoadedStorage:
        raise RuntimeError(f"a tensor's storage is a {type(storage).__name__}, not a storage")
    return storage


def _parameter(data=None, requires_grad=True, *args):
    if not isinstance(data, Tensor):
        raise RuntimeError(f"a Parameter's data is a {type(data).__name__}, not a tensor")
    try:
        parameter = plugins.lent("torcia.nn.Parameter", "torcia-nn")
    except ImportError:  # a state dict of Parameters loads as tensors without torcia-nn
        return data.requires_grad_(bool(requires_grad))
    return parameter(data, bool(requires_grad))


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return _parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _parameter(data, requires_grad)


def _rebuild_from_type_v2(func, new_type, args, state):
    ret = func(*args)
    if new_type is _parameter:
        return _parameter(ret, ret.requires_grad)
    if new_type is not Tensor or state:
        raise RuntimeError("the checkpoint holds a tensor subclass or tensor attributes, "
                           "which torcia does not restore")
    return ret


def _bytearray(source=b"", *args):
    # bytearray(n) would allocate n bytes that the file never held: a pickle can only
    # rebuild a bytearray from its contents, as pickle writes them
    if isinstance(source, int):
        raise RuntimeError("the checkpoint asks for a bytearray by size, not by contents")
    return bytearray(source, *args)


def _get_layout(name):
    if name != "torch.strided":
        raise RuntimeError(f"the checkpoint holds a {name} tensor; torcia has strided "
                           "tensors only")
    return name


def _torch_globals() -> dict:
    """What torch's ``weights_only`` allowlist names, as torcia objects."""
    table = {
        "collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
        "builtins.set": set, "builtins.bytearray": _bytearray, "builtins.complex": complex,
        "_codecs.encode": codecs.encode,
        "torch.Size": Size, "torch.device": _device, "torch.Tensor": Tensor,
        "torch.nn.parameter.Parameter": _parameter,
        "torch.serialization._get_layout": _get_layout,
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.storage.UntypedStorage": _StorageType("UntypedStorage", "uint8"),
    }
    for what, fn in [("quantized tensors", "_rebuild_qtensor"),
                     ("sparse tensors", "_rebuild_sparse_tensor"),
                     ("meta tensors", "_rebuild_meta_tensor_no_storage"),
                     ("nested tensors", "_rebuild_nested_tensor"),
                     ("wrapper subclass tensors", "_rebuild_wrapper_subclass")]:
        table[f"torch._utils.{fn}"] = _unsupported(what)
    for dtype_name, storage in _STORAGES.items():
        table[f"torch.{storage}"] = _StorageType(storage, dtype_name)
    for dtype_name in ("float32", "float64", "float16", "bfloat16", "int64", "int32",
                       "int16", "int8", "uint8", "bool"):
        table[f"torch.{dtype_name}"] = D._by_name(dtype_name)
    for dtype_name in _TORCH_ONLY_DTYPES:
        table[f"torch.{dtype_name}"] = _unsupported(f"dtype torch.{dtype_name}")
    return table


_TORCH_GLOBALS = _torch_globals()

_UNSAFE_MESSAGE = (
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in "
    "`torch.load` from `False` to `True`; torcia.load has the same default. Re-running "
    "`torcia.load` with `weights_only` set to `False` will likely succeed, but it can result "
    "in arbitrary code execution. Do it only if you got the file from a trusted source."
)


class _Refused(Exception):
    def __init__(self, full_name):
        super().__init__(full_name)
        self.full_name = full_name


def _refusal(full_name: str) -> pickle.UnpicklingError:
    short = full_name.rpartition(".")[2]
    return pickle.UnpicklingError(
        "Weights only load failed. This file can still be loaded, to do so you have two "
        "options, do those steps only if you trust the source of the checkpoint. "
        f"\n\t(1) {_UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with `weights_only=True` "
        "please check the recommended steps in the following error message.\n\t"
        f"WeightsUnpickler error: Unsupported global: GLOBAL {full_name} was not an allowed "
        f"global by default. Please use `torcia.serialization.add_safe_globals([{short}])` "
        f"or the `torcia.serialization.safe_globals([{short}])` context manager to allowlist "
        "this global if you trust this class/function."
    )


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, loader, weights_only, encoding):
        super().__init__(file, encoding=encoding)
        self.loader = loader
        self.weights_only = weights_only

    def find_class(self, module, name):
        # protocol-2 pickles name Python 2 modules (__builtin__.set); map them as the
        # standard unpickler does before looking anything up
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        found = _TORCH_GLOBALS.get(full)
        if found is not None:
            return found
        found = _allowed_by_user(full)
        if found is not None:
            return found
        if self.weights_only:
            raise _Refused(full)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self.loader.storage(pid)


class _ZipLoader:
    """Checks a PyTorch zip checkpoint and turns its records into tensors."""

    def __init__(self, data, name: str, map_location, copy: bool):
        self.data = data
        self.name = name
        self.map_location = map_location
        self.copy = copy
        self.storages: dict[str, _LoadedStorage] = {}

    def fail(self, problem: str) -> RuntimeError:
        return RuntimeError(f"torcia.load: {self.name}: {problem}")

    # ----- integrity ------------------------------------------------------------------
    def open(self, archive: zipfile.ZipFile, prefix: str):
        self.archive = archive
        self.prefix = prefix
        self.records = {}
        size = len(self.data)
        for info in archive.infolist():
            if info.compress_type == zipfile.ZIP_STORED:
                if info.compress_size != info.file_size:
                    raise self.fail(f"{info.filename} is stored with two different sizes")
                start = self._data_start(info)
                if start + info.file_size > size:
                    raise self.fail(f"{info.filename} runs past the end of the file "
                                    "(truncated)")
                view = memoryview(self.data)[start:start + info.file_size]
                if zlib.crc32(view) != info.CRC:
                    raise self.fail(f"{info.filename} fails its CRC-32 check (the file was "
                                    "modified or corrupted)")
                self.records[info.filename] = (start, info)
            elif info.file_size > _MAX_RATIO * max(info.compress_size, 1):
                raise self.fail(f"{info.filename} would expand {info.compress_size} bytes to "
                                f"{info.file_size}, more than {_MAX_RATIO} times: refused as "
                                "a decompression bomb")
            else:
                self.records[info.filename] = (None, info)

    def _data_start(self, info) -> int:
        head = bytes(self.data[info.header_offset:info.header_offset + 30])
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise self.fail(f"the local header of {info.filename} is damaged")
        name_len = int.from_bytes(head[26:28], "little")
        extra_len = int.from_bytes(head[28:30], "little")
        return info.header_offset + 30 + name_len + extra_len

    def read(self, name: str):
        entry = self.records.get(f"{self.prefix}{name}")
        if entry is None:
            raise self.fail(f"the archive lacks {self.prefix}{name}")
        start, info = entry
        if start is not None:
            return memoryview(self.data)[start:start + info.file_size]
        try:
            return memoryview(self.archive.read(info))
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise self.fail(f"{info.filename} cannot be read ({exc})") from None

    def verify_manifest(self):
        """A torcia-written file: every byte is covered by the comment's sha256 or, for
        the records, by their sha256 in the manifest."""
        key = f"{self.prefix}{_MANIFEST}"
        comment = self.archive.comment
        if key not in self.records:
            if comment.startswith(_COMMENT_TAG):
                raise self.fail(f"the zip comment carries a torcia digest but {key} is "
                                "missing")
            return
        expected = _COMMENT_TAG + b"x" * 64
        if len(comment) != len(expected) or not comment.startswith(_COMMENT_TAG):
            raise self.fail("the zip comment does not hold the archive's sha256 (the file was "
                            "modified or corrupted)")
        end = len(self.data) - len(comment) - 2
        hashed = [(start, start + info.file_size) for name, (start, info)
                  in self.records.items() if name != key and start is not None]
        if _frame_digest(self.data, hashed, end) != comment[len(_COMMENT_TAG):]:
            raise self.fail("the archive does not match its sha256 (the file was modified or "
                            "corrupted)")
        try:
            manifest = json.loads(bytes(self.read(_MANIFEST)))
            hashes = manifest["sha256"]
        except (ValueError, TypeError, KeyError) as exc:
            raise self.fail(f"{key} is malformed ({exc})") from None
        listed = {f"{self.prefix}{n}" for n in hashes}
        present = set(self.records) - {key}
        if listed != present:
            raise self.fail(f"the records {sorted(listed ^ present)} do not match {key}")
        for rel, digest in hashes.items():
            if hashlib.sha256(self.read(rel)).hexdigest() != digest:
                raise self.fail(f"{self.prefix}{rel} does not match its sha256 in {key}")

    # ----- tensors ----------------------------------------------------------------------
    def storage(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self.fail(f"data.pkl holds an unknown persistent id {pid!r:.80}")
        _, kind, key, location, numel = pid
        if type(kind) is not _StorageType or not isinstance(key, str) or \
                not isinstance(location, str) or type(numel) is not int or numel < 0:
            raise self.fail(f"data.pkl holds a malformed storage reference {pid!r:.120}")
        found = self.storages.get(key)
        if found is not None:
            return found
        dtype = _torcia_dtype(kind.dtype_name)
        if dtype is None:
            raise self.fail(f"storage {key} is a torch.{kind.torch_name}, a dtype torcia does "
                            "not have")
        np_dtype = dtype.to_numpy()
        if _OPTIONS.skip_data:
            # under skip_data: the tensor's storage, without reading its bytes
            found = _LoadedStorage(np.zeros(numel, dtype=np_dtype), location, self)
            self.storages[key] = found
            return found
        raw = self.read(f"data/{key}")
        if len(raw) < numel * np_dtype.itemsize:
            raise self.fail(f"data/{key} holds {len(raw)} bytes, too few for {numel} "
                            f"{kind.dtype_name} elements")
        arr = np.frombuffer(raw, dtype=np_dtype, count=numel)
        if self.byteorder != sys.byteorder and np_dtype.itemsize > 1:
            arr = arr.byteswap()
        elif self.copy or not arr.flags.writeable:
            arr = arr.copy()
        found = _LoadedStorage(arr, location, self)
        self.storages[key] = found
        return found

    def tensor(self, storage, offset, size, stride, dtype):
        if not (type(offset) is int and isinstance(size, tuple) and isinstance(stride, tuple)
                and len(size) == len(stride) <= _MAX_DIMS
                and all(type(n) is int and n >= 0 for n in size)
                and all(type(s) is int and s >= 0 for s in stride) and offset >= 0):
            raise self.fail(f"a tensor has a malformed layout (offset {offset!r:.40}, size "
                            f"{size!r:.80}, stride {stride!r:.80})")
        arr = storage.array
        if dtype is not None:
            if not isinstance(dtype, D.dtype):
                raise self.fail(f"a tensor's dtype is {dtype!r:.40}")
            if arr.nbytes % dtype.itemsize:
                raise self.fail(f"a storage of {arr.nbytes} bytes cannot hold {dtype}")
            arr = arr.view(dtype.to_numpy())
        if math.prod(size) > 0:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= arr.size:
                raise self.fail(f"a tensor of size {list(size)} and stride {list(stride)} at "
                                f"offset {offset} runs past its storage of {arr.size} "
                                "elements")
        item = arr.itemsize
        view = np.lib.stride_tricks.as_strided(
            arr[offset:] if offset < arr.size else arr[:0], shape=size,
            strides=tuple(s * item for s in stride), writeable=arr.flags.writeable)
        t = Tensor._make(view, _device("cpu"))
        return _place(t, storage.location, self.map_location, self.fail)


def _place(t: Tensor, location: str, ml, fail) -> Tensor:
    if ml is None:
        target = location
    elif callable(ml) and not isinstance(ml, (str, _device)):
        result = ml(t, location)
        return t if result is None else result
    elif isinstance(ml, dict):
        target = ml.get(location, location)
    else:
        target = ml
    if str(target) == "cpu":
        return t
    try:
        return t.to(target)
    except Exception as exc:  # noqa: BLE001 - the device may not exist here
        raise fail(f"a tensor saved on {location} cannot be restored to {target} "
                   f"({type(exc).__name__}: {exc}); pass map_location='cpu' to load it on "
                   "the CPU") from None


def _load_zip(loader: _ZipLoader, archive: zipfile.ZipFile, weights_only: bool, encoding):
    names = archive.namelist()
    pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if len(pkl) != 1:
        raise loader.fail("not a PyTorch checkpoint (no single <archive>/data.pkl record)")
    loader.open(archive, pkl[0][:-len("data.pkl")])
    loader.verify_manifest()
    order = f"{loader.prefix}byteorder"
    loader.byteorder = bytes(loader.read("byteorder")).decode("ascii", "replace") \
        if order in loader.records else _default_byteorder()
    if loader.byteorder not in ("little", "big"):
        raise loader.fail(f"unknown byte order {loader.byteorder!r:.20}")
    return _unpickle(loader, io.BytesIO(loader.read("data.pkl")), weights_only, encoding,
                     "data.pkl")


# The opcodes PyTorch's weights-only unpickler accepts (protocol 2, what torch.save writes),
# and the harmless ones of protocols 3 and 4. Out-of-band buffers (protocol 5), the text
# opcodes of protocol 0 and the copyreg extension registry are refused before unpickling.
_WEIGHTS_ONLY_OPCODES = frozenset({
    "PROTO", "STOP", "MARK", "GLOBAL", "STACK_GLOBAL", "NEWOBJ", "REDUCE", "BUILD",
    "BINPERSID", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "TUPLE", "TUPLE1",
    "TUPLE2", "TUPLE3", "EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "FROZENSET",
    "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "LONG4",
    "BINFLOAT", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "SHORT_BINSTRING",
    "BINSTRING", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8", "BINGET", "LONG_BINGET",
    "BINPUT", "LONG_BINPUT", "MEMOIZE", "FRAME",
})


def _check_opcodes(loader, file, what: str) -> None:
    """Refuse a pickle using an opcode outside the weights-only set, before running it."""
    start = file.tell()
    try:
        for op, _, _ in pickletools.genops(file):
            if op.name not in _WEIGHTS_ONLY_OPCODES:
                raise pickle.UnpicklingError(
                    f"Weights only load failed. {_UNSAFE_MESSAGE}\n\tWeightsUnpickler error: "
                    f"Unsupported operand {op.code.encode('latin-1')[0]} ({op.name})")
    except (ValueError, EOFError) as exc:
        raise loader.fail(f"{what} is not a valid pickle ({exc})") from None
    file.seek(start)


def _unpickle(loader, file, weights_only: bool, encoding, what: str):
    """One pickle from ``file``, every failure but a refusal a RuntimeError naming it."""
    if weights_only:
        _check_opcodes(loader, file, what)
    try:
        return _Unpickler(file, loader, weights_only, encoding).load()
    except _Refused as exc:
        raise _refusal(exc.full_name) from None
    except RuntimeError as exc:
        if str(exc).startswith("torcia.load:"):
            raise
        raise loader.fail(str(exc)) from None
    except RecursionError:
        raise loader.fail(f"{what} is nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - any failure to unpickle is a malformed file
        raise loader.fail(f"{what} cannot be unpickled ({type(exc).__name__}: {exc})") \
            from exc


# ---------------------------------------------------------------------------------------
# loading PyTorch's legacy format (before PyTorch 1.6): pickles and raw storages in a row
# ---------------------------------------------------------------------------------------

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


class _LegacyTorchLoader(_ZipLoader):
    """The storages of a legacy file come after the pickle that refers to them: they are
    created empty while unpickling and filled afterwards."""

    def storage(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise self.fail(f"the pickle holds an unknown persistent id {pid!r:.80}")
        _, kind, key, location, numel, view = pid
        if type(kind) is not _StorageType or not isinstance(key, str) or \
                not isinstance(location, str) or type(numel) is not int or numel < 0:
            raise self.fail(f"the pickle holds a malformed storage reference {pid!r:.120}")
        root = self.storages.get(key)
        if root is None:
            dtype = _torcia_dtype(kind.dtype_name)
            if dtype is None:
                raise self.fail(f"storage {key} is a torch.{kind.torch_name}, a dtype torcia "
                                "does not have")
            if numel * dtype.itemsize > len(self.data):
                raise self.fail(f"storage {key} declares {numel} elements, more than the file "
                                "holds")
            root = _LoadedStorage(np.zeros(numel, dtype.to_numpy()), location, self)
            self.storages[key] = root
        if view is None:
            return root
        if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[0], str)
                and all(type(v) is int and v >= 0 for v in view[1:])
                and view[1] + view[2] <= root.array.size):
            raise self.fail(f"storage {key} has a malformed view {view!r:.80}")
        found = self.storages.get(view[0])
        if found is None:
            found = _LoadedStorage(root.array[view[1]:view[1] + view[2]], location, self)
            self.storages[view[0]] = found
        return found


def _load_legacy_torch(data: bytes, name: str, map_location, weights_only, encoding):
    loader = _LegacyTorchLoader(data, name, "cpu", copy=True)
    stream = io.BytesIO(data)
    for expected in (_LEGACY_MAGIC, _LEGACY_PROTOCOL):
        if _unpickle(loader, stream, True, encoding, "the header") != expected:
            raise loader.fail("not a PyTorch checkpoint (the legacy format's magic number or "
                              "protocol version is wrong)")
    sys_info = _unpickle(loader, stream, True, encoding, "the header")
    if not isinstance(sys_info, dict):
        raise loader.fail("the legacy header's system information is malformed")
    swap = sys_info.get("little_endian", True) != (sys.byteorder == "little")
    start = stream.tell()
    result = _unpickle(loader, stream, weights_only, encoding, "the pickle")
    end = stream.tell()
    keys = _unpickle(loader, stream, True, encoding, "the storage list")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise loader.fail("the storage list is malformed")
    for key in keys:
        storage = loader.storages.get(key)
        if storage is None:
            raise loader.fail(f"storage {key} is listed but never used")
        arr = storage.array
        count = int.from_bytes(stream.read(8), "little", signed=True)
        raw = stream.read(arr.nbytes)
        if count != arr.size or len(raw) != arr.nbytes:
            raise loader.fail(f"storage {key} is truncated or does not match its size")
        values = np.frombuffer(raw, dtype=arr.dtype)
        arr[...] = values.byteswap() if swap else values
    if str(map_location) == "cpu" or (map_location is None and all(
            s.location == "cpu" for s in loader.storages.values())):
        return result
    # the tensors go elsewhere: build them again from the now filled storages
    loader.map_location = map_location
    return _unpickle(loader, io.BytesIO(data[start:end]), weights_only, encoding, "the pickle")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load a checkpoint written by :func:`save` or by ``torch.save``.

    With ``weights_only=True`` (the default, as in PyTorch 2.6+) unpickling is restricted
    to tensors, storages, dtypes, devices, ``torch.Size``, ``OrderedDict`` and primitive
    containers, plus what :func:`add_safe_globals` or :func:`safe_globals` allow; any other
    global is refused before it is called, with :class:`pickle.UnpicklingError`.

    Parameters
    ----------
    f : str, os.PathLike or binary file object
        The checkpoint.
    map_location : str, torcia.device, dict or callable, optional
        Where tensors go: by default the device each was saved from; a device (``"cpu"``)
        for all of them; a dict from saved device strings to devices (``{"cuda:1":
        "cuda:0"}``, unlisted ones unchanged); or ``fn(tensor, saved_device) -> tensor``
        called with each tensor on the CPU.
    pickle_module : module, optional
        Only :mod:`pickle`, and only with ``weights_only=False``.
    weights_only : bool, optional
        ``True`` (the default) loads data only. ``False`` unpickles anything, which runs
        whatever code the file names: use it only for files you trust.
    mmap : bool, optional
        Map the file instead of reading it: tensors are copy-on-write views of the file's
        pages. ``f`` must be a path.
    encoding : str, optional
        How to decode Python 2 strings in old pickles (default ``"utf-8"``).

    Returns
    -------
    object
        The saved object.

    Raises
    ------
    RuntimeError
        When ``f`` is not a checkpoint, is truncated, was modified (a record whose CRC-32 or
        sha256 does not match), or is malformed; the message names the file and the problem.
    pickle.UnpicklingError
        With ``weights_only=True``, when the file names a global outside the allowlist.

    Examples
    --------
    >>> import io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save([torcia.arange(3), (1.5, None)], buf)
    >>> _ = buf.seek(0)
    >>> torcia.load(buf, map_location="cpu")
    [tensor([0, 1, 2]), (1.5, None)]
    """
    if weights_only is None:
        weights_only = True
    if pickle_module not in (None, pickle):
        raise ValueError("torcia.load unpickles with the pickle module only: pickle_module="
                         f"{pickle_module!r} is not supported")
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is "
                           "specified")
    encoding = pickle_load_args.pop("encoding", "utf-8")
    if pickle_load_args:
        raise TypeError(f"torcia.load got unexpected keyword arguments "
                        f"{sorted(pickle_load_args)}")
    data, name = _read_all(f, mmap)
    if data[:1] == b"\x80":  # a pickle: PyTorch's format before 1.6
        return _load_legacy_torch(bytes(data), name, map_location, weights_only, encoding)
    if data[:4] != b"PK\x03\x04" and data[:4] != b"PK\x05\x06":
        raise RuntimeError(f"torcia.load: {name}: not a checkpoint (neither a zip archive nor "
                           "PyTorch's legacy format)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise RuntimeError(f"torcia.load: {name}: not a checkpoint, or a truncated one "
                           f"({exc})") from None
    with archive:
        if _LEGACY_STRUCTURE in archive.namelist():
            return _load_legacy(archive, name, map_location)
        loader = _ZipLoader(data, name, map_location, copy=not mmap)
        return _load_zip(loader, archive, weights_only, encoding)


def _read_all(f, mmap):
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        try:
            with open(path, "rb") as handle:
                if mmap:
                    if os.fstat(handle.fileno()).st_size == 0:
                        return b"", repr(path)
                    return _mapped(path, handle), repr(path)
                return handle.read(), repr(path)
        except OSError as exc:
            raise type(exc)(exc.errno, f"torcia.load: {exc.strerror}", path) from None
    if mmap:
        raise ValueError("f must be a file path in order to use the mmap argument")
    if not hasattr(f, "read"):
        raise TypeError(f"torcia.load expects a path or a binary file object, got "
                        f"{type(f).__name__}")
    return bytes(f.read()), repr(getattr(f, "name", None) or f"<{type(f).__name__}>")


# ---------------------------------------------------------------------------------------
# loading torcia's earlier archive format (structure.json + .npy)
# ---------------------------------------------------------------------------------------


class _LegacyReader:
    def __init__(self, archive: zipfile.ZipFile, name: str, tensors, map_location):
        self.archive = archive
        self.name = name
        self.specs = tensors if isinstance(tensors, dict) else {}
        self.loaded: dict[str, Tensor] = {}
        self.map_location = map_location

    def fail(self, problem: str) -> RuntimeError:
        return RuntimeError(f"torcia.load: {self.name}: {problem}")

    def read(self, file: str) -> bytes:
        try:
            info = self.archive.getinfo(file)
        except KeyError:
            raise self.fail(f"the archive lacks {file}") from None
        if info.compress_type != zipfile.ZIP_STORED and \
                info.file_size > _MAX_RATIO * max(info.compress_size, 1):
            raise self.fail(f"{file} would expand more than {_MAX_RATIO} times: refused as a "
                            "decompression bomb")
        try:
            return self.archive.read(info)
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise self.fail(f"{file} cannot be read ({exc})") from None

    def tensor(self, key) -> Tensor:
        if not isinstance(key, str):
            raise self.fail(f"structure.json refers to a tensor by {key!r:.40}")
        if key in self.loaded:
            return self.loaded[key]
        spec = self.specs.get(key)
        if not isinstance(spec, dict):
            raise self.fail(f"structure.json refers to tensor {key!r}, which it does not "
                            "describe")
        try:
            file, dtype_name, shape = spec["file"], spec["dtype"], spec["shape"]
            location, digest = spec["device"], spec["sha256"]
        except KeyError as exc:
            raise self.fail(f"tensor {key!r} lacks its {exc.args[0]!r} entry") from None
        if not all(isinstance(v, str) for v in (file, dtype_name, location, digest)):
            raise self.fail(f"tensor {key!r} has a malformed description")
        data = self.read(file)
        if hashlib.sha256(data).hexdigest() != digest:
            raise self.fail(f"{file} does not match its sha256 in structure.json "
                            "(the file was modified or corrupted)")
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:
            raise self.fail(f"{file} is not a plain .npy array ({exc})") from None
        if not isinstance(arr, np.ndarray):
            # np.load opens a .npz archive as a dict-like of arrays
            arr.close()
            raise self.fail(f"{file} is not a plain .npy array (a {type(arr).__name__})")
        dt = _torcia_dtype(dtype_name)
        if dt is None:
            raise self.fail(f"tensor {key!r} has unknown dtype {dtype_name!r}")
        if dt is D.bfloat16:
            if arr.dtype != np.uint16:
                raise self.fail(f"{file} holds {arr.dtype}, expected the uint16 bits of "
                                "bfloat16")
            arr = arr.view(dt.to_numpy())
        elif arr.dtype != dt.to_numpy():
            raise self.fail(f"{file} holds {arr.dtype}, but structure.json says {dtype_name}")
        if not isinstance(shape, list) or list(arr.shape) != shape:
            raise self.fail(f"{file} has shape {list(arr.shape)}, but structure.json says "
                            f"{shape!r:.80}")
        t = _place(Tensor._make(arr, _device("cpu")), location, self.map_location, self.fail)
        if spec.get("requires_grad"):
            t.requires_grad_(True)
        self.loaded[key] = t
        return t

    def node(self, node, depth=0):
        if depth > _MAX_DEPTH:
            raise self.fail(f"structure.json is nested deeper than {_MAX_DEPTH} levels")
        if not isinstance(node, dict) or "t" not in node:
            raise self.fail(f"structure.json holds a malformed entry: {node!r:.80}")
        kind = node["t"]
        value = node.get("v")
        if kind == "tensor":
            return self.tensor(node.get("id"))
        if kind == "none":
            return None
        if kind in ("bool", "int", "str"):
            expected = {"bool": bool, "int": int, "str": str}[kind]
            if type(value) is not expected:
                raise self.fail(f"structure.json holds a malformed {kind}: {value!r:.80}")
            return value
        if kind == "float" and isinstance(value, (int, float, str)) and \
                not isinstance(value, bool):
            try:
                return float(value)
            except ValueError:
                raise self.fail(f"structure.json holds a malformed float: {value!r:.80}") \
                    from None
        if kind == "dtype" and isinstance(value, str) and _torcia_dtype(value) is not None:
            return _torcia_dtype(value)
        if kind == "device" and isinstance(value, str):
            try:
                return _device(value)
            except (RuntimeError, ValueError) as exc:
                raise self.fail(f"structure.json holds a malformed device ({exc})") from None
        if kind == "size" and isinstance(value, list) and \
                all(type(n) is int and n >= 0 for n in value):
            return Size(value)
        items = node.get("items")
        if kind in ("list", "tuple") and isinstance(items, list):
            out = [self.node(v, depth + 1) for v in items]
            return out if kind == "list" else tuple(out)
        if kind in ("dict", "ordered_dict") and isinstance(items, list):
            out = OrderedDict() if kind == "ordered_dict" else {}
            for pair in items:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise self.fail("structure.json holds a malformed dict item")
                k = self.node(pair[0], depth + 1)
                try:
                    out[k] = self.node(pair[1], depth + 1)
                except TypeError:
                    raise self.fail(f"structure.json holds an unhashable dict key {k!r:.40}") \
                        from None
            return out
        if kind in ("float", "dtype", "device", "size", "list", "tuple", "dict",
                    "ordered_dict"):
            raise self.fail(f"structure.json holds a malformed {kind}: {node!r:.80}")
        raise self.fail(f"structure.json holds an entry of unknown type {kind!r:.40}")


def _load_legacy(archive: zipfile.ZipFile, name: str, map_location):
    reader = _LegacyReader(archive, name, {}, map_location)
    info = archive.getinfo(_LEGACY_STRUCTURE)
    if info.file_size > _MAX_STRUCTURE_BYTES:
        raise reader.fail(f"{_LEGACY_STRUCTURE} is {info.file_size} bytes, more than the "
                          f"{_MAX_STRUCTURE_BYTES} allowed")
    try:
        structure = json.loads(reader.read(_LEGACY_STRUCTURE))
    except (ValueError, RecursionError) as exc:
        raise reader.fail(f"{_LEGACY_STRUCTURE} cannot be read ({exc})") from None
    if not isinstance(structure, dict) or structure.get("format") != "torcia-archive":
        raise reader.fail(f"{_LEGACY_STRUCTURE} does not describe a torcia archive")
    if structure.get("version") != 1:
        raise reader.fail(f"archive version {structure.get('version')!r:.20} is not supported "
                          "by this torcia (which reads version 1)")
    reader.specs = structure.get("tensors") if isinstance(structure.get("tensors"), dict) \
        else {}
    return reader.node(structure.get("root"))


# ---------------------------------------------------------------------------------------
# the rest of torch.serialization's names
# ---------------------------------------------------------------------------------------


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
    import torcia

    device = torcia.device(location)
    index = device.index or 0
    if not torcia.cuda.is_available():
        raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                           "torcia.cuda.is_available() is False. If you are running on a "
                           "CPU-only machine, please use torcia.load with "
                           "map_location=torcia.device('cpu') to map your storages to the CPU.")
    count = torcia.cuda.device_count()
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
    import torcia

    return getattr(torcia, storage_type.__name__)


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
    import torcia

    name = type(storage).__name__
    if name.endswith("Storage") and hasattr(torcia, name[: -len("Storage")] + "Tensor"):
        return getattr(torcia, name[: -len("Storage")] + "Tensor")
    dtype = storage.dtype
    for legacy in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
                   "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"):
        cls = getattr(torcia, legacy, None)
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


def get_unsafe_globals_in_checkpoint(f) -> list:
    """The globals a checkpoint's pickle names that ``load(weights_only=True)`` would
    refuse (neither PyTorch's allowlist nor :func:`add_safe_globals`'), without running
    it.

    Examples
    --------
    >>> import io, collections
    >>> import torcia
    >>> buf = io.BytesIO()
    >>> torcia.save({"w": torcia.ones(1), "c": collections.Counter()}, buf)
    >>> _ = buf.seek(0)
    >>> torcia.serialization.get_unsafe_globals_in_checkpoint(buf)
    []
    """
    data, name = _read_all(f, False)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        pkl = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise RuntimeError(f"{name} is not a PyTorch checkpoint (no single data.pkl)")
        raw = archive.read(pkl[0])
    found, strings = [], []
    for op, arg, _ in pickletools.genops(raw):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
            strings.append(arg)
        elif op.name == "GLOBAL":
            module, _, attr = arg.partition(" ")
            found.append(f"{module}.{attr}")
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.append(f"{strings[-2]}.{strings[-1]}")
    unsafe = []
    for full in found:
        module, _, attr = full.rpartition(".")
        if (module, attr) in _compat_pickle.NAME_MAPPING:
            module, attr = _compat_pickle.NAME_MAPPING[(module, attr)]
        name_ = f"{module}.{attr}"
        if name_ not in _TORCH_GLOBALS and _allowed_by_user(name_) is None and \
                name_ not in unsafe:
            unsafe.append(name_)
    return unsafe

