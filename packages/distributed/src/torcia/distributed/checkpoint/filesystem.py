"""Where a distributed checkpoint lives: a folder on a file system every rank can reach,
as ``torch.distributed.checkpoint.filesystem``.

Each rank writes one data file, ``__<rank>_0.distcp``: the raw bytes of its tensor boxes,
one after the other. Rank 0 writes ``.metadata`` (JSON: every box's global position and
where its bytes are, and the non-tensor values through torcia's object codec, never
pickle) once every rank's file is in place. Every file is written under a temporary name
and renamed, and ``.metadata`` is removed first and written last: a folder whose
``.metadata`` exists holds a complete checkpoint.
"""

from __future__ import annotations

import json
import os

import numpy as np

from torcia.distributed import _objects

__all__ = ["FileSystemReader", "FileSystemWriter"]

METADATA = ".metadata"


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class FileSystemWriter:
    """Writes a checkpoint into the folder ``path`` (created if needed).

    Examples
    --------
    >>> import tempfile
    >>> from torcia.distributed.checkpoint import FileSystemWriter
    >>> FileSystemWriter(tempfile.mkdtemp()).single_file_per_rank
    True
    """

    def __init__(self, path, single_file_per_rank: bool = True, sync_files: bool = True,
                 thread_count: int = 1, per_thread_copy_ahead: int = 10_000_000,
                 cache_staged_state_dict: bool = False, overwrite: bool = True):
        self.path = os.fspath(path)
        self.single_file_per_rank = single_file_per_rank
        self.sync_files = sync_files
        self.overwrite = overwrite

    def prepare(self) -> None:
        """Make the folder; drop the old ``.metadata`` (so that a checkpoint half
        overwritten is never taken for complete)."""
        os.makedirs(self.path, exist_ok=True)
        old = os.path.join(self.path, METADATA)
        if os.path.exists(old):
            if not self.overwrite:
                raise RuntimeError(f"a checkpoint exists at {self.path} and overwrite=False")
            os.remove(old)

    def data_file(self, rank: int) -> str:
        return f"__{rank}_0.distcp"

    def layout(self, items, rank: int) -> list:
        """Where each tensor item's bytes go: ``[{key, offsets, sizes, dtype, file,
        offset, length}]``, the records rank 0 puts into ``.metadata``."""
        records, position = [], 0
        for item in items:
            if not item.is_tensor:
                continue
            length = int(item.tensor.__torcia_data__.nbytes)
            records.append({"key": item.key, "offsets": list(item.offsets),
                            "sizes": list(item.sizes), "global": list(item.global_size),
                            "dtype": str(item.tensor.dtype).removeprefix("torcia."),
                            "file": self.data_file(rank), "offset": position,
                            "length": length})
            position += length
        return records

    def write_data(self, arrays, rank: int) -> None:
        """Write this rank's arrays (in the order of :meth:`layout`) into its file."""
        blob = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
        _atomic_write(os.path.join(self.path, self.data_file(rank)), blob)

    def write_metadata(self, records: list, values: dict) -> None:
        """Write ``.metadata``: the tensor records of every rank and the values."""
        tensors: dict = {}
        for r in records:
            entry = tensors.setdefault(r["key"], {"dtype": r["dtype"], "size": r["global"],
                                                  "chunks": []})
            entry["chunks"].append({k: r[k] for k in ("offsets", "sizes", "file", "offset",
                                                      "length")})
        document = {"version": "1", "tensors": tensors,
                    "values": {k: _objects.dumps(v).decode() for k, v in values.items()}}
        _atomic_write(os.path.join(self.path, METADATA), json.dumps(document).encode())


class FileSystemReader:
    """Reads a checkpoint from the folder ``path``.

    Examples
    --------
    >>> import tempfile
    >>> from torcia.distributed.checkpoint import FileSystemReader
    >>> FileSystemReader(tempfile.mkdtemp()).path != ""
    True
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    def read_metadata(self) -> dict:
        path = os.path.join(self.path, METADATA)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no complete checkpoint at {self.path}: {METADATA} is "
                                    "missing (never saved, or the save did not finish)")
        with open(path, "rb") as f:
            document = json.loads(f.read().decode())
        document["values"] = {k: _objects.loads(v.encode())
                              for k, v in document["values"].items()}
        return document

    def read_chunk(self, chunk: dict, dtype) -> np.ndarray:
        """The saved box ``chunk`` as an array of ``dtype`` (a NumPy dtype)."""
        with open(os.path.join(self.path, chunk["file"]), "rb") as f:
            f.seek(chunk["offset"])
            data = f.read(chunk["length"])
        if len(data) != chunk["length"]:
            raise RuntimeError(f"checkpoint file {chunk['file']} is truncated")
        return np.frombuffer(data, dtype=dtype).reshape(chunk["sizes"])
