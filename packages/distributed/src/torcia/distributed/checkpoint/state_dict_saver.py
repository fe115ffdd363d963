"""Saving a distributed checkpoint, as ``torch.distributed.checkpoint.state_dict_saver``."""

from __future__ import annotations

import concurrent.futures
import copy
import os
import time
import uuid

import numpy as np

from torcia.distributed import collectives as C
from torcia.distributed.checkpoint.default_planner import DefaultSavePlanner, flatten
from torcia.distributed.checkpoint.filesystem import FileSystemWriter
from torcia.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    TensorStorageMetadata,
)
from torcia.distributed.checkpoint.stateful import Stateful

__all__ = ["async_save", "save"]


def _dist(process_group, no_dist) -> bool:
    return (not no_dist and C.is_initialized()
            and C.get_world_size(process_group) > 1)


def _states(state_dict) -> dict:
    """The state dict with each top-level Stateful replaced by its ``state_dict()``."""
    return {k: (v.state_dict() if isinstance(v, Stateful) and not isinstance(v, dict)
                else v) for k, v in state_dict.items()}


def _metadata(records, values) -> Metadata:
    table = {}
    for r in records:
        entry = table.setdefault(r["key"], TensorStorageMetadata({"dtype": r["dtype"]},
                                                                 tuple(r["global"]), []))
        entry.chunks.append(ChunkStorageMetadata(tuple(r["offsets"]), tuple(r["sizes"])))
    table.update({k: BytesStorageMetadata() for k in values})
    return Metadata(state_dict_metadata=table,
                    storage_data={r["key"]: r["file"] for r in records})


def _plan(state_dict, storage_writer, checkpoint_id, planner, process_group, no_dist):
    writer = storage_writer or FileSystemWriter(checkpoint_id)
    distributed = _dist(process_group, no_dist)
    rank = C.get_rank(process_group) if distributed else 0
    items = (planner or DefaultSavePlanner()).create_local_plan(flatten(_states(state_dict)),
                                                                 rank)
    if rank == 0:
        writer.prepare()
    if distributed:
        C.barrier(process_group)  # the old .metadata is gone before any data file changes
    records = writer.layout(items, rank)
    if distributed:
        everyone = [None] * C.get_world_size(process_group)
        C.all_gather_object(everyone, records, group=process_group)
        everyone = [r for part in everyone for r in part]
    else:
        everyone = records
    values = {i.key: i.value for i in items if not i.is_tensor}
    return writer, distributed, rank, items, everyone, values


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None,
         process_group=None, no_dist=False, use_collectives=True) -> Metadata:
    """Save ``state_dict`` (tensors, DTensors, values, nested dicts and lists, Stateful
    objects) into the folder ``checkpoint_id``; every rank calls it. Each rank writes its
    DTensors' parts (one rank per replica) and rank 0 the rest, then the metadata: see
    ``torcia.distributed.checkpoint.filesystem``.

    Examples
    --------
    >>> import tempfile, torcia
    >>> import torcia.distributed.checkpoint as dcp
    >>> folder = tempfile.mkdtemp()
    >>> meta = dcp.save({"w": torcia.arange(6.0).reshape(2, 3), "step": 3},
    ...                 checkpoint_id=folder)
    >>> meta.state_dict_metadata["w"].size
    (2, 3)
    >>> target = {"w": torcia.zeros(2, 3), "step": 0}
    >>> dcp.load(target, checkpoint_id=folder)
    >>> target["w"][1], target["step"]
    (tensor([3., 4., 5.]), 3)
    """
    writer, distributed, rank, items, records, values = _plan(
        state_dict, storage_writer, checkpoint_id, planner, process_group, no_dist)
    writer.write_data([i.tensor.__torcia_data__ for i in items if i.is_tensor], rank)
    if distributed:
        C.barrier(process_group)
    if rank == 0:
        writer.write_metadata(records, values)
    if distributed:
        C.barrier(process_group)
    return _metadata(records, values)


_EXECUTOR = None


def async_save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None,
               process_group=None, async_checkpointer_type=None, async_stager=None,
               no_dist=False, use_collectives=True) -> concurrent.futures.Future:
    """:func:`save` whose file writes run in a background thread: the tensors are copied
    (staged) and the ranks agree on the layout before it returns, so training may go on
    changing the parameters. The returned future completes once this rank's file is
    written (on rank 0: once the whole checkpoint, metadata included, is complete).

    Examples
    --------
    >>> import tempfile, torcia
    >>> import torcia.distributed.checkpoint as dcp
    >>> folder = tempfile.mkdtemp()
    >>> w = torcia.ones(3)
    >>> future = dcp.async_save({"w": w}, checkpoint_id=folder)
    >>> _ = w.add_(1)           # the checkpoint keeps the values of the call
    >>> future.result().state_dict_metadata["w"].size
    (3,)
    >>> target = {"w": torcia.zeros(3)}; dcp.load(target, checkpoint_id=folder); target["w"]
    tensor([1., 1., 1.])
    """
    global _EXECUTOR
    writer, distributed, rank, items, records, values = _plan(
        state_dict, storage_writer, checkpoint_id, planner, process_group, no_dist)
    staged = [np.array(i.tensor.__torcia_data__, copy=True) for i in items if i.is_tensor]
    values = copy.deepcopy(values)
    token = [uuid.uuid4().hex if rank == 0 else None]
    size = C.get_world_size(process_group) if distributed else 1
    if distributed:
        C.broadcast_object_list(token, src=C._global_rank(process_group, 0),
                                group=process_group)
    folder = writer.path
    marker = os.path.join(folder, f".{token[0]}.rank{{}}.done")
    timeout = C._pg(process_group).timeout if distributed else None

    def write():
        writer.write_data(staged, rank)
        with open(marker.format(rank), "w"):
            pass
        if rank == 0:
            _wait_for(marker, size, timeout)
            writer.write_metadata(records, values)
            for r in range(size):
                os.remove(marker.format(r))
        return _metadata(records, values)

    if _EXECUTOR is None:
        _EXECUTOR = concurrent.futures.ThreadPoolExecutor(1, "torcia-async-save")
    return _EXECUTOR.submit(write)


def _wait_for(marker, size, timeout):
    """Wait until every rank has left its marker (the writes of each are done)."""
    limit = None if timeout is None else time.monotonic() + C._seconds(timeout)
    while not all(os.path.exists(marker.format(r)) for r in range(size)):
        if limit is not None and time.monotonic() > limit:
            missing = [r for r in range(size) if not os.path.exists(marker.format(r))]
            raise RuntimeError(f"async_save: ranks {missing} did not finish writing within "
                               "the group's timeout; the checkpoint is incomplete")
        time.sleep(0.01)
