"""Loading PyTorch's zip and legacy formats, safely (``weights_only``)."""

from __future__ import annotations

import _compat_pickle
import codecs
import io
import json
import math
import os
import pickle
import sys
import zlib
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from torcia import _dtype as D
from torcia import plugins
from torcia._tensor import Size, Tensor
from torcia.backend import device as _device
from torcia.serialization._allowlist import _allowed_by_user
from torcia.serialization._format import (
    _COMMENT_TAG,
    _LEGACY_STRUCTURE,
    _MANIFEST,
    _MAX_DIMS,
    _MAX_RATIO,
    _STORAGES,
    _TORCH_ONLY_DTYPES,
    _place,
    _torcia_dtype,
)
from torcia.serialization._legacy import _load_legacy
from torcia.serialization._names import _OPTIONS, _default_byteorder, _mapped
from torcia.serialization._save import _frame_digest

# zipfile and pickletools are imported by the functions that read an archive: import
# torcia loads this module, and they (with what zipfile imports: shutil, bz2, lzma) would
# add a twentieth to its time
if TYPE_CHECKING:
    import zipfile


class _StorageType:
    """What ``torch.FloatStorage`` and friends unpickle to: the element dtype."""

    __slots__ = ("torch_name", "dtype_name")

    def __init__(self, torch_name, dtype_name):
        self.torch_name, self.dtype_name = torch_name, dtype_name


class _LoadedStorage:
    __slots__ = ("array", "location", "loader")

    def __init__(self, array, location, loader):
        self.array, self.location, self.loader = array, location, loader


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
        import zipfile

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
        import zipfile

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
        import hashlib  # loads OpenSSL: with its first use, not with import torcia

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
    import pickletools

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
    import zipfile

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
    import pickletools
    import zipfile

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
