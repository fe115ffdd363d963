"""Saving: PyTorch's zip format, written atomically."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import sys
from collections import OrderedDict

import numpy as np

from torcia import _dtype as D
from torcia._tensor import Size, Tensor
from torcia.backend import device as _device
from torcia.serialization._format import (
    _ALIGNMENT,
    _COMMENT_TAG,
    _MANIFEST,
    _STORAGES,
    DEFAULT_PROTOCOL,
)
from torcia.serialization._names import _OPTIONS


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


# pickled by reference: checkpoints name it by the path it had before the package split
_rebuild_subclass.__module__ = "torcia.serialization"


def _frame_digest(buffer, skipped, end: int) -> bytes:
    """The sha256 of ``buffer[:end]`` without the byte ranges ``skipped``: the zip's
    headers, directory and small records, while the storages have their own sha256 in the
    manifest (so that no byte is hashed twice)."""
    import hashlib  # loads OpenSSL: with its first use, not with import torcia

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
    import hashlib
    import zipfile

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
    import tempfile  # with the first save to a path: not a cost of import torcia

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
