"""Read and write safetensors files: flat name-to-tensor maps that hold only data.

The ``safetensors`` package (Hugging Face's, optional: ``pip install
'torcia-core[safetensors]'``) reads and writes the format, so files are exactly what
``safetensors.torch`` writes and reads; torcia supplies the bridge between its tensors and
NumPy arrays, bfloat16 included (through ``ml_dtypes``). The functions mirror
``safetensors.torch``: :func:`save_file`, :func:`load_file`, :func:`save`, :func:`load`,
and :func:`load_metadata` for the header's string metadata.
"""

from __future__ import annotations

import os

import numpy as np

from torcia import _dtype as D
from torcia._tensor import Tensor
from torcia.backend import device as _device
from torcia.serialization._save import _replace_atomically

__all__ = ["load", "load_file", "load_metadata", "save", "save_file"]

# the safetensors header's dtype codes for torcia's dtypes
_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
           "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
           "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool"}


def _package():
    try:
        import safetensors
        import safetensors.numpy
    except ImportError:
        raise ImportError("torcia.utils.safetensors needs the safetensors package: pip "
                          "install 'torcia-core[safetensors]'") from None
    return safetensors


def _arrays(tensors) -> dict:
    if not isinstance(tensors, dict):
        raise TypeError(f"expected a dict of name -> tensor, got {type(tensors).__name__}")
    out = {}
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"safetensors names are strings, got {name!r}")
        if not isinstance(t, Tensor):
            raise TypeError(f"{name!r} is a {type(t).__name__}; safetensors stores tensors "
                            "only")
        out[name] = np.ascontiguousarray(Tensor.detach(t).cpu().numpy())
    return out


def _check_metadata(metadata):
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError("safetensors metadata must be a dict of str -> str")


def save(tensors: dict, metadata: dict | None = None) -> bytes:
    """The safetensors encoding of ``tensors`` (a dict of name -> tensor).

    Parameters
    ----------
    tensors : dict[str, Tensor]
        What to store; views are stored as their values.
    metadata : dict[str, str], optional
        Free-form text for the file's header.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils import safetensors
    >>> data = safetensors.save({"w": torcia.ones(2)})
    >>> safetensors.load(data)
    {'w': tensor([1., 1.])}
    """
    _check_metadata(metadata)
    return bytes(_package().numpy.save(_arrays(tensors), metadata=metadata))


def save_file(tensors: dict, filename, metadata: dict | None = None) -> None:
    """Write ``tensors`` (a dict of name -> tensor) to a safetensors file.

    The file is replaced atomically, as :func:`torcia.save` replaces its files.

    Parameters
    ----------
    tensors : dict[str, Tensor]
        What to store.
    filename : str or os.PathLike
        Where.
    metadata : dict[str, str], optional
        Free-form text for the file's header.

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> from torcia.utils import safetensors
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> safetensors.save_file({"w": torcia.zeros(2, dtype=torcia.int8)}, path,
    ...                       metadata={"format": "pt"})
    >>> safetensors.load_file(path)
    {'w': tensor([0, 0], dtype=torcia.int8)}
    """
    _replace_atomically(os.fspath(filename), [save(tensors, metadata)])


def _tensors(entries, device) -> dict:
    out = {}
    for name, spec in entries:
        kind = _DTYPES.get(spec["dtype"])
        if kind is None:
            raise RuntimeError(f"safetensors: {name!r} has dtype {spec['dtype']}, which torcia "
                               "does not have")
        np_dtype = D._by_name(kind).to_numpy()
        arr = np.frombuffer(spec["data"], dtype=np_dtype).reshape(spec["shape"])
        if not arr.flags.writeable:
            arr = arr.copy()
        t = Tensor._make(arr, _device("cpu"))
        out[name] = t if str(device) == "cpu" else t.to(device)
    return out


def load(data: bytes, device="cpu") -> dict:
    """The tensors of a safetensors encoding (see :func:`save`).

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils import safetensors
    >>> safetensors.load(safetensors.save({"b": torcia.tensor([1.5], dtype=torcia.bfloat16)}))
    {'b': tensor([1.5000], dtype=torcia.bfloat16)}
    """
    package = _package()
    try:
        entries = package.deserialize(bytes(data))
    except package.SafetensorError as exc:
        raise RuntimeError(f"safetensors: not a valid safetensors encoding ({exc})") from None
    return _tensors(entries, device)


def load_file(filename, device="cpu") -> dict:
    """The tensors of a safetensors file, as a dict that ``Module.load_state_dict`` takes.

    Parameters
    ----------
    filename : str or os.PathLike
        The file.
    device : str or torcia.device
        Where the tensors go.

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> from torcia.utils import safetensors
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> safetensors.save_file({"w": torcia.arange(3.0)}, path)
    >>> safetensors.load_file(path)["w"]
    tensor([0., 1., 2.])
    """
    package = _package()
    path = os.fspath(filename)
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = package.deserialize(data)
    except package.SafetensorError as exc:
        raise RuntimeError(f"safetensors: {path!r} is not a valid safetensors file ({exc})") \
            from None
    return _tensors(entries, device)


def load_metadata(filename) -> dict:
    """The string metadata in a safetensors file's header (empty when there is none).

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> from torcia.utils import safetensors
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> safetensors.save_file({"w": torcia.ones(1)}, path, metadata={"format": "pt"})
    >>> safetensors.load_metadata(path)
    {'format': 'pt'}
    """
    package = _package()
    with package.safe_open(os.fspath(filename), framework="numpy") as f:
        return dict(f.metadata() or {})
