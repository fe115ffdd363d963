"""``torcia.save`` and ``torcia.load``: checkpoints that cannot run code when loaded.

PyTorch's checkpoints are pickles, and unpickling a file can execute arbitrary code. A
torcia checkpoint is a zip archive holding only data:

- ``structure.json``: the saved object as JSON. Containers and scalars are tagged nodes
  (``{"t": "dict", "items": [[key, value], ...]}``, ``{"t": "tuple", "items": [...]}``,
  ``{"t": "int", "v": 3}``, ``{"t": "float", "v": "inf"}``, ``{"t": "str", "v": "a"}``,
  ``{"t": "none"}``, ``{"t": "dtype", "v": "float32"}``, ``{"t": "device", "v": "cuda:0"}``,
  ...) and a tensor is ``{"t": "tensor", "id": "0"}``, pointing into ``"tensors"``: its
  file, dtype name, shape, device, ``requires_grad`` and the sha256 of its file.
- ``tensors/<id>.npy``: each tensor's values in NumPy's ``.npy`` format, written and read
  with ``allow_pickle=False``. bfloat16 values are stored as their raw uint16 bits; the
  dtype name in ``structure.json`` says how to read them back.

A tensor referenced twice is stored once and loads as one tensor. Loading checks the zip
structure, every array's sha256, dtype and shape, and raises :class:`RuntimeError` naming
the file and the problem when something does not match.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import zipfile
from collections import OrderedDict

import numpy as np

from torcia import _dtype as D
from torcia._tensor import Size, Tensor
from torcia.backend import device as _device

__all__ = ["load", "save"]

FORMAT = "torcia-archive"
VERSION = 1
_STRUCTURE = "structure.json"


# ---------------------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------------------


class _Writer:
    def __init__(self, archive: zipfile.ZipFile):
        self.archive = archive
        self.tensors: dict[str, dict] = {}
        self.ids: dict[int, str] = {}
        self.keep_alive: list = []

    def tensor(self, t: Tensor) -> dict:
        key = self.ids.get(id(t))
        if key is None:
            key = str(len(self.tensors))
            self.ids[id(t)] = key
            self.keep_alive.append(t)  # ids stay unique while the tensor is alive
            arr = Tensor.detach(t).cpu().numpy()
            if t.dtype is D.bfloat16:
                arr = arr.view(np.uint16)
            buf = io.BytesIO()
            np.save(buf, arr, allow_pickle=False)
            data = buf.getvalue()
            name = f"tensors/{key}.npy"
            self.archive.writestr(name, data)
            self.tensors[key] = {
                "file": name, "dtype": t.dtype.name, "shape": list(t.shape),
                "device": str(t.device), "requires_grad": bool(t.requires_grad),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        return {"t": "tensor", "id": key}

    def node(self, obj, path: str) -> dict:
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if obj is None:
            return {"t": "none"}
        if isinstance(obj, (bool, np.bool_)):
            return {"t": "bool", "v": bool(obj)}
        if isinstance(obj, (int, np.integer)):
            return {"t": "int", "v": int(obj)}
        if isinstance(obj, (float, np.floating)):
            v = float(obj)
            return {"t": "float", "v": v if math.isfinite(v) else repr(v)}
        if isinstance(obj, str):
            return {"t": "str", "v": obj}
        if isinstance(obj, D.dtype):
            return {"t": "dtype", "v": obj.name}
        if isinstance(obj, _device):
            return {"t": "device", "v": str(obj)}
        if isinstance(obj, Size):
            return {"t": "size", "v": [int(s) for s in obj]}
        if isinstance(obj, dict):
            kind = "ordered_dict" if isinstance(obj, OrderedDict) else "dict"
            items = [[self.node(k, f"{path} key {k!r}"), self.node(v, f"{path}[{k!r}]")]
                     for k, v in obj.items()]
            return {"t": kind, "items": items}
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {"t": kind, "items": [self.node(v, f"{path}[{i}]")
                                         for i, v in enumerate(obj)]}
        raise TypeError(
            f"torcia.save cannot store an object of type {type(obj).__qualname__} at {path}: "
            "only tensors, dicts, lists, tuples, numbers, strings, None, dtypes and devices "
            "can be saved (save a module's or optimizer's state_dict(), not the object)"
        )


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True):
    """Save tensors, state dicts and nested containers of them to ``f``.

    ``obj`` may hold tensors, dicts (any hashable keys of the kinds below), lists, tuples,
    ints, floats, bools, strings, None, dtypes and devices, nested to any depth: a module's
    ``state_dict()``, an optimizer's, or a dict of both with an epoch number. The file is
    a zip archive of ``.npy`` arrays and a JSON description (see this module's docstring);
    loading it never runs code.

    Parameters
    ----------
    obj : object
        What to save.
    f : str, os.PathLike or binary file object
        Where to write.
    pickle_module, pickle_protocol
        Accepted so that PyTorch calls run; nothing is pickled, so ``pickle_protocol`` has
        no effect and a ``pickle_module`` is an error.

    Examples
    --------
    >>> import io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save({"w": torcia.tensor([1.0, 2.0]), "step": 3}, buf)
    >>> _ = buf.seek(0)
    >>> torcia.load(buf)
    {'w': tensor([1., 2.]), 'step': 3}
    """
    if pickle_module is not None:
        raise ValueError("torcia.save does not pickle: pickle_module is not supported")
    target = _open(f, "wb")
    try:
        with zipfile.ZipFile(target.handle, "w", zipfile.ZIP_STORED) as archive:
            writer = _Writer(archive)
            root = writer.node(obj, "the top level")
            structure = {"format": FORMAT, "version": VERSION, "root": root,
                         "tensors": writer.tensors}
            archive.writestr(_STRUCTURE, json.dumps(structure, indent=1))
    finally:
        target.close()


# ---------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, archive: zipfile.ZipFile, name: str, tensors: dict, map_location):
        self.archive = archive
        self.name = name
        self.specs = tensors
        self.loaded: dict[str, Tensor] = {}
        self.map_location = map_location

    def fail(self, problem: str) -> RuntimeError:
        return RuntimeError(f"torcia.load: {self.name}: {problem}")

    def tensor(self, key: str) -> Tensor:
        if key in self.loaded:
            return self.loaded[key]
        spec = self.specs.get(key) if isinstance(self.specs, dict) else None
        if not isinstance(spec, dict):
            raise self.fail(f"structure.json refers to tensor {key!r}, which it does not "
                            "describe")
        try:
            file, dtype_name, shape = spec["file"], spec["dtype"], spec["shape"]
            location, digest = spec["device"], spec["sha256"]
        except KeyError as exc:
            raise self.fail(f"tensor {key!r} lacks its {exc.args[0]!r} entry") from None
        try:
            data = self.archive.read(file)
        except KeyError:
            raise self.fail(f"the archive lacks {file}") from None
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise self.fail(f"{file} cannot be read ({exc})") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise self.fail(f"{file} does not match its sha256 in structure.json "
                            "(the file was modified or corrupted)")
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as exc:
            raise self.fail(f"{file} is not a plain .npy array ({exc})") from None
        try:
            dt = D._by_name(dtype_name)
        except KeyError:
            raise self.fail(f"tensor {key!r} has unknown dtype {dtype_name!r}") from None
        if dt is D.bfloat16:
            if arr.dtype != np.uint16:
                raise self.fail(f"{file} holds {arr.dtype}, expected the uint16 bits of "
                                "bfloat16")
            arr = arr.view(dt.to_numpy())
        elif arr.dtype != dt.to_numpy():
            raise self.fail(f"{file} holds {arr.dtype}, but structure.json says {dtype_name}")
        if list(arr.shape) != list(shape):
            raise self.fail(f"{file} has shape {list(arr.shape)}, but structure.json says "
                            f"{list(shape)}")
        t = Tensor._make(arr, _device("cpu"))
        t = self.place(t, location)
        if spec.get("requires_grad"):
            t.requires_grad_(True)
        self.loaded[key] = t
        return t

    def place(self, t: Tensor, location: str) -> Tensor:
        ml = self.map_location
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
            raise self.fail(f"a tensor saved on {location} cannot be restored to {target} "
                            f"({type(exc).__name__}: {exc}); pass map_location='cpu' to load "
                            "it on the CPU") from None

    def node(self, node):
        if not isinstance(node, dict) or "t" not in node:
            raise self.fail(f"structure.json holds a malformed entry: {node!r:.80}")
        kind = node["t"]
        if kind == "tensor":
            return self.tensor(node.get("id"))
        if kind == "none":
            return None
        if kind in ("bool", "int", "str"):
            value = node.get("v")
            expected = {"bool": bool, "int": int, "str": str}[kind]
            if type(value) is not expected:
                raise self.fail(f"structure.json holds a malformed {kind}: {value!r:.80}")
            return value
        if kind == "float":
            return float(node.get("v"))
        if kind == "dtype":
            return D._by_name(node["v"])
        if kind == "device":
            return _device(node["v"])
        if kind == "size":
            return Size(int(s) for s in node["v"])
        if kind in ("list", "tuple"):
            items = [self.node(v) for v in node.get("items", [])]
            return items if kind == "list" else tuple(items)
        if kind in ("dict", "ordered_dict"):
            out = OrderedDict() if kind == "ordered_dict" else {}
            for pair in node.get("items", []):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise self.fail("structure.json holds a malformed dict item")
                out[self.node(pair[0])] = self.node(pair[1])
            return out
        raise self.fail(f"structure.json holds an entry of unknown type {kind!r}")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **kwargs):
    """Load what :func:`save` wrote.

    Parameters
    ----------
    f : str, os.PathLike or binary file object
        The checkpoint.
    map_location : str, torcia.device, dict or callable, optional
        Where tensors go: by default the device each was saved from; a device (``"cpu"``)
        for all of them; a dict from saved device strings to devices (``{"cuda:1":
        "cuda:0"}``, unlisted ones unchanged); or ``fn(tensor, saved_device) -> tensor``
        called with each tensor on the CPU.
    weights_only : bool
        Accepted for PyTorch compatibility. A torcia archive only ever holds data, so
        loading is always as restricted as PyTorch's ``weights_only=True``.

    Returns
    -------
    object
        The saved object, with dicts, lists and tuples rebuilt as they were.

    Raises
    ------
    RuntimeError
        When ``f`` is not a torcia archive, is truncated, or was modified (an array whose
        sha256, dtype or shape does not match ``structure.json``); the message names the
        file and the problem.

    Examples
    --------
    >>> import io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save([torcia.arange(3), (1.5, None)], buf)
    >>> _ = buf.seek(0)
    >>> torcia.load(buf, map_location="cpu")
    [tensor([0, 1, 2]), (1.5, None)]
    """
    if pickle_module is not None:
        raise ValueError("torcia.load does not unpickle: pickle_module is not supported")
    if mmap:
        raise ValueError("torcia.load does not memory-map archives: mmap=True is not supported")
    if kwargs:
        raise TypeError(f"torcia.load got unexpected keyword arguments {sorted(kwargs)}: a "
                        "torcia archive is not a pickle, so unpickling options do not apply")
    source = _open(f, "rb")
    name = source.name
    try:
        try:
            archive = zipfile.ZipFile(source.handle)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise RuntimeError(
                f"torcia.load: {name}: not a torcia archive, or a truncated one ({exc})"
            ) from None
        with archive:
            names = set(archive.namelist())
            if _STRUCTURE not in names:
                hint = (" It looks like a PyTorch pickle checkpoint: torcia does not unpickle "
                        "files, since that can run arbitrary code." if any(
                            n.endswith("data.pkl") for n in names) else "")
                raise RuntimeError(f"torcia.load: {name}: not a torcia archive (it has no "
                                   f"{_STRUCTURE}).{hint}")
            try:
                structure = json.loads(archive.read(_STRUCTURE))
            except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
                raise RuntimeError(
                    f"torcia.load: {name}: {_STRUCTURE} cannot be read ({exc})"
                ) from None
            if not isinstance(structure, dict) or structure.get("format") != FORMAT:
                raise RuntimeError(f"torcia.load: {name}: {_STRUCTURE} does not describe a "
                                   "torcia archive")
            if structure.get("version") != VERSION:
                raise RuntimeError(
                    f"torcia.load: {name}: archive version {structure.get('version')!r} is "
                    f"not supported by this torcia (which reads version {VERSION})"
                )
            reader = _Reader(archive, name, structure.get("tensors", {}), map_location)
            return reader.node(structure.get("root"))
    finally:
        source.close()


# ---------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------


class _Source:
    """A binary handle with a display name, closed only if we opened it."""

    def __init__(self, handle, name: str, owned: bool):
        self.handle = handle
        self.name = name
        self.owned = owned

    def close(self):
        if self.owned:
            self.handle.close()


def _open(f, mode: str) -> _Source:
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        try:
            return _Source(open(path, mode), repr(path), True)
        except OSError as exc:
            raise type(exc)(exc.errno, f"torcia.{'save' if 'w' in mode else 'load'}: "
                            f"{exc.strerror}", path) from None
    name = repr(getattr(f, "name", None) or f"<{type(f).__name__}>")
    if "r" in mode:
        if not hasattr(f, "read"):
            raise TypeError(f"torcia.load expects a path or a binary file object, got "
                            f"{type(f).__name__}")
        seekable = getattr(f, "seekable", lambda: False)()
        if not seekable:
            # zipfile needs to seek: read a stream (a socket, a pipe) into memory first
            return _Source(io.BytesIO(f.read()), name, True)
        return _Source(f, name, False)
    if not hasattr(f, "write"):
        raise TypeError(f"torcia.save expects a path or a binary file object, got "
                        f"{type(f).__name__}")
    return _Source(f, name, False)
