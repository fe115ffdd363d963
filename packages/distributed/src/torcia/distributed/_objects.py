"""A serializer for object collectives that cannot run code when loading.

Objects become JSON; tensors and NumPy arrays travel as base64 of their raw bytes with
dtype and shape. Only None, bools, numbers, strings, bytes, lists, tuples, dicts with
string keys, tensors and arrays are accepted: unlike pickle, a peer cannot make this
process execute anything.
"""

from __future__ import annotations

import base64
import json

import numpy as np

import torcia
from torcia import Tensor
from torcia.library import dtype_by_name


def _encode(obj):
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, Tensor):
        arr = obj.detach().cpu().numpy()
        return {"__tensor__": _array(arr), "requires_grad": obj.requires_grad}
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": _array(obj)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, bytes):
        return {"__bytes__": base64.b64encode(obj).decode()}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(x) for x in obj]}
    if isinstance(obj, list):
        return [_encode(x) for x in obj]
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            return {"__dict_items__": [[_encode(k), _encode(v)] for k, v in obj.items()]}
        return {"__dict__": {k: _encode(v) for k, v in obj.items()}}
    raise TypeError(
        f"cannot send an object of type {type(obj).__name__}: object collectives carry "
        "tensors, arrays, numbers, strings, bytes and lists/tuples/dicts of them"
    )


def _array(arr):
    arr = np.ascontiguousarray(arr)
    return {"dtype": arr.dtype.str if arr.dtype.kind != "V" else arr.dtype.name,
            "shape": list(arr.shape), "data": base64.b64encode(arr.tobytes()).decode()}


def _decode_array(d):
    name = d["dtype"]
    try:
        dtype = dtype_by_name(name).to_numpy()
    except KeyError:
        dtype = np.dtype(name)
    if dtype.hasobject:
        raise ValueError("object arrays are not accepted")
    return np.frombuffer(base64.b64decode(d["data"]), dtype=dtype).reshape(d["shape"]).copy()


def _decode(obj):
    if isinstance(obj, list):
        return [_decode(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        t = torcia.from_numpy(_decode_array(obj["__tensor__"]))
        return t.requires_grad_(True) if obj.get("requires_grad") else t
    if "__ndarray__" in obj:
        return _decode_array(obj["__ndarray__"])
    if "__bytes__" in obj:
        return base64.b64decode(obj["__bytes__"])
    if "__tuple__" in obj:
        return tuple(_decode(x) for x in obj["__tuple__"])
    if "__dict__" in obj:
        return {k: _decode(v) for k, v in obj["__dict__"].items()}
    if "__dict_items__" in obj:
        return {_hashable(_decode(k)): _decode(v) for k, v in obj["__dict_items__"]}
    raise ValueError(f"unrecognised object record with keys {sorted(obj)}")


def _hashable(k):
    return tuple(k) if isinstance(k, list) else k


def dumps(obj) -> bytes:
    return json.dumps(_encode(obj), separators=(",", ":")).encode()


def loads(data: bytes):
    return _decode(json.loads(data.decode()))
