"""Loading torcia's earlier archive format (``structure.json`` + ``.npy``)."""

from __future__ import annotations

import io
import json
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from torcia import _dtype as D
from torcia._tensor import Size, Tensor
from torcia.backend import device as _device
from torcia.serialization._format import (
    _LEGACY_STRUCTURE,
    _MAX_DEPTH,
    _MAX_RATIO,
    _MAX_STRUCTURE_BYTES,
    _place,
    _torcia_dtype,
)

# zipfile is imported where an archive is read, as in _load: not a cost of import torcia
if TYPE_CHECKING:
    import zipfile


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
        import zipfile

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
        import hashlib  # loads OpenSSL: with its first use, not with import torcia

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
