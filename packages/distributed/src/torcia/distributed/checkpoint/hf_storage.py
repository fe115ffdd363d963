"""Distributed checkpoints as Hugging Face safetensors files, as
``torch.distributed.checkpoint.hf_storage``.

:class:`HuggingFaceStorageWriter` plugs into :func:`~torcia.distributed.checkpoint.save`
where :class:`~torcia.distributed.checkpoint.FileSystemWriter` does, but each rank writes its
tensor boxes as one safetensors file, named as PyTorch names it
(``model-00001-of-00001.safetensors``; with ``save_distributed=True``, one per rank:
``shard-00000-model-00001-of-00001.safetensors``), where a box of a sharded tensor carries
its place in the whole tensor in the file's header (``DCP_SHARDING_INFO``); rank 0 then
writes ``model.safetensors.index.json`` (each tensor's file). Safetensors holds tensors
only: a state dict with other values is refused.

:class:`HuggingFaceStorageReader` plugs into :func:`~torcia.distributed.checkpoint.load`:
it reads every ``*.safetensors`` file of a folder, so it loads what the writer wrote (on any
number of ranks) and any Hugging Face model folder. Files are read through
:mod:`torcia.utils.safetensors` (the ``safetensors`` package: ``torcia-core[safetensors]``).

Examples
--------
>>> import tempfile, torcia
>>> import torcia.distributed.checkpoint as dcp
>>> from torcia.distributed.checkpoint.hf_storage import (
...     HuggingFaceStorageReader, HuggingFaceStorageWriter)
>>> folder = tempfile.mkdtemp()
>>> _ = dcp.save({"w": torcia.arange(4.0)}, storage_writer=HuggingFaceStorageWriter(folder))
>>> sorted(__import__("os").listdir(folder))
['model-00001-of-00001.safetensors', 'model.safetensors.index.json']
>>> target = {"w": torcia.zeros(4)}
>>> dcp.load(target, storage_reader=HuggingFaceStorageReader(folder)); target["w"]
tensor([0., 1., 2., 3.])
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np

import torcia
from torcia.distributed.checkpoint.filesystem import _atomic_write
from torcia.utils import safetensors

__all__ = ["HuggingFaceStorageReader", "HuggingFaceStorageWriter"]

#: the header entry holding each box's place in its whole tensor
SHARDING_INFO = "DCP_SHARDING_INFO"
INDEX = "model.safetensors.index.json"


class HuggingFaceStorageWriter:
    """Writes a checkpoint's tensors into the folder ``path`` as safetensors files.

    Examples
    --------
    >>> import tempfile
    >>> from torcia.distributed.checkpoint.hf_storage import HuggingFaceStorageWriter
    >>> HuggingFaceStorageWriter(tempfile.mkdtemp(), save_distributed=True).data_file(1)
    'shard-00001-model-00001-of-00001.safetensors'
    """

    def __init__(self, path, fqn_to_index_mapping: dict | None = None, thread_count: int = 1,
                 save_distributed: bool = False, enable_consolidation: bool = False,
                 thread_count_consolidation: int = 1):
        if fqn_to_index_mapping is not None or enable_consolidation:
            raise NotImplementedError(
                "HuggingFaceStorageWriter: spreading tensors over several model files "
                "(fqn_to_index_mapping) and consolidation are not supported here; each rank "
                "writes one file")
        self.path = os.fspath(path)
        self.save_distributed = save_distributed
        self._boxes: dict[int, list] = {}

    def prepare(self) -> None:
        """Make the folder."""
        os.makedirs(self.path, exist_ok=True)

    def data_file(self, rank: int) -> str:
        name = "model-00001-of-00001.safetensors"
        return f"shard-{rank:05d}-{name}" if self.save_distributed else name

    def layout(self, items, rank: int) -> list:
        """The records of this rank's tensor boxes (their file and place); values other
        than tensors are refused, as safetensors cannot hold them."""
        values = [i.key for i in items if not i.is_tensor]
        if values:
            raise ValueError(f"HuggingFaceStorageWriter stores tensors only (safetensors); "
                             f"not tensors: {', '.join(values[:5])}")
        self._boxes[rank] = [i for i in items if i.is_tensor]
        return [{"key": i.key, "offsets": list(i.offsets), "sizes": list(i.sizes),
                 "global": list(i.global_size),
                 "dtype": str(i.tensor.dtype).removeprefix("torcia."),
                 "file": self.data_file(rank)} for i in self._boxes[rank]]

    def write_data(self, arrays, rank: int) -> None:
        """Write this rank's boxes (``arrays``, in the order of :meth:`layout`)."""
        boxes = self._boxes.pop(rank)
        tensors = {b.key: torcia.from_numpy(np.ascontiguousarray(a))
                   for b, a in zip(boxes, arrays, strict=True)}
        places = {b.key: {"saved_offsets": list(b.offsets), "global_size": list(b.global_size)}
                  for b in boxes if tuple(b.sizes) != tuple(b.global_size)}
        safetensors.save_file(tensors, os.path.join(self.path, self.data_file(rank)),
                              metadata={SHARDING_INFO: json.dumps(places)})

    def write_metadata(self, records: list, values: dict) -> None:
        """Write ``model.safetensors.index.json``: the file of each tensor (the files of
        its boxes, for a sharded one) and the bytes they hold."""
        files: dict = {}
        total = 0
        for r in records:
            files.setdefault(r["key"], []).append(r["file"])
            total += int(np.prod(r["sizes"])) * torcia.library.dtype_by_name(r["dtype"]).itemsize
        weight_map = {k: v[0] if len(v) == 1 else v for k, v in files.items()}
        document = {"metadata": {"total_size": total}, "weight_map": weight_map}
        _atomic_write(os.path.join(self.path, INDEX), json.dumps(document, indent=2).encode())


class HuggingFaceStorageReader:
    """Reads the tensors of every safetensors file in the folder ``path``.

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> from torcia.utils import safetensors
    >>> from torcia.distributed.checkpoint.hf_storage import HuggingFaceStorageReader
    >>> folder = tempfile.mkdtemp()
    >>> safetensors.save_file({"b": torcia.ones(2)}, os.path.join(folder, "m.safetensors"))
    >>> HuggingFaceStorageReader(folder).read_metadata()["tensors"]["b"]["size"]
    [2]
    """

    def __init__(self, path, thread_count: int = 1, key_filter=None):
        self.path = os.fspath(path)
        self.key_filter = key_filter
        self._loaded: dict = {}

    def read_metadata(self) -> dict:
        """Every tensor box of the folder's files, as :func:`load` reads a checkpoint's
        metadata (a tensor saved whole is one box at its origin)."""
        names = sorted(glob.glob(os.path.join(self.path, "*.safetensors")))
        if not names:
            raise FileNotFoundError(f"no safetensors file in {self.path}")
        tensors: dict = {}
        for path in names:
            name = os.path.basename(path)
            boxes = safetensors.load_file(path)
            self._loaded[name] = boxes
            places = json.loads(safetensors.load_metadata(path).get(SHARDING_INFO) or "{}")
            for key, t in boxes.items():
                if self.key_filter is not None and key not in self.key_filter:
                    continue
                place = places.get(key, {})
                sizes = list(t.shape)
                entry = tensors.setdefault(key, {
                    "dtype": str(t.dtype).removeprefix("torcia."),
                    "size": place.get("global_size", sizes), "chunks": []})
                entry["chunks"].append({"offsets": place.get("saved_offsets", [0] * len(sizes)),
                                        "sizes": sizes, "file": name, "key": key})
        return {"version": "1", "tensors": tensors, "values": {}}

    def read_chunk(self, chunk: dict, dtype) -> np.ndarray:
        """The saved box ``chunk`` as an array of ``dtype`` (a NumPy dtype)."""
        return self._loaded[chunk["file"]][chunk["key"]].numpy().astype(dtype, copy=False)
