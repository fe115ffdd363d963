"""The archive format's constants, the limits that stop crafted archives, and what both
readers (the zip archive's and the legacy formats') restore tensors with."""

from __future__ import annotations

from torcia import _dtype as D
from torcia._tensor import Tensor
from torcia.backend import device as _device

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


def _torcia_dtype(name: str):
    try:
        return D._by_name(name)
    except KeyError:
        return None


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
