"""Loading a distributed checkpoint, as ``torch.distributed.checkpoint.state_dict_loader``."""

from __future__ import annotations

import numpy as np

from torcia import Tensor
from torcia.distributed.checkpoint.default_planner import (
    DefaultLoadPlanner,
    flatten,
    set_flat,
)
from torcia.distributed.checkpoint.filesystem import FileSystemReader
from torcia.distributed.checkpoint.stateful import Stateful
from torcia.distributed.tensor import DTensor
from torcia.library import bump_version, dtype_by_name

__all__ = ["load"]


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None,
         process_group=None, no_dist=False) -> None:
    """Load the checkpoint in the folder ``checkpoint_id`` into ``state_dict``, in place:
    each tensor (a DTensor: this rank's part) is filled with the overlapping parts of the
    saved boxes, whatever the number of ranks or the placements it was saved with; values
    are replaced; Stateful objects get ``load_state_dict``. Every tensor of the target
    must be in the checkpoint, with the same global shape.

    Examples
    --------
    >>> import tempfile, torcia
    >>> import torcia.distributed.checkpoint as dcp
    >>> folder = tempfile.mkdtemp()
    >>> _ = dcp.save({"model": {"w": torcia.ones(2)}}, checkpoint_id=folder)
    >>> target = {"model": {"w": torcia.zeros(2)}}
    >>> dcp.load(target, checkpoint_id=folder); target["model"]["w"]
    tensor([1., 1.])
    """
    reader = storage_reader or FileSystemReader(checkpoint_id)
    planner = planner or DefaultLoadPlanner()
    statefuls = {k: v for k, v in state_dict.items()
                 if isinstance(v, Stateful) and not isinstance(v, dict)}
    for key, value in statefuls.items():
        state_dict[key] = value.state_dict()
    try:
        document = reader.read_metadata()
        tensors, values = document["tensors"], document["values"]
        for item in planner.create_local_plan(flatten(state_dict)):
            if not item.is_tensor:
                if item.key in values:
                    set_flat(state_dict, item.key, values[item.key])
                elif not planner.allow_partial_load:
                    raise RuntimeError(f"Missing key in checkpoint state_dict: {item.key}.")
                continue
            entry = tensors.get(item.key)
            if entry is None:
                if planner.allow_partial_load:
                    continue
                raise RuntimeError(f"Missing key in checkpoint state_dict: {item.key}.")
            _fill(reader, item, entry)
    finally:
        for key, value in statefuls.items():
            loaded, state_dict[key] = state_dict[key], value
            value.load_state_dict(loaded)


def _fill(reader, item, entry) -> None:
    target = item.target
    global_shape = tuple(target.global_shape if isinstance(target, DTensor) else target.shape)
    if tuple(entry["size"]) != global_shape:
        raise RuntimeError(f"Size mismatch between saved {tuple(entry['size'])} and current: "
                           f"{global_shape} for {item.key}")
    local = Tensor.detach(target).__torcia_data__
    saved_dtype = dtype_by_name(entry["dtype"]).to_numpy()
    filled = 0
    for chunk in entry["chunks"]:
        lo = [max(a, b) for a, b in zip(item.offsets, chunk["offsets"])]
        hi = [min(a + n, b + m) for a, n, b, m in zip(item.offsets, item.sizes,
                                                      chunk["offsets"], chunk["sizes"])]
        if any(h <= low for low, h in zip(lo, hi)) and local.size:
            continue
        data = reader.read_chunk(chunk, saved_dtype)
        into = tuple(slice(low - o, h - o) for low, h, o in zip(lo, hi, item.offsets))
        out = tuple(slice(low - o, h - o) for low, h, o in zip(lo, hi, chunk["offsets"]))
        local[into] = data[out]
        filled += int(np.prod([h - low for low, h in zip(lo, hi)]))
    if filled != local.size:
        raise RuntimeError(f"the checkpoint holds {filled} of the {local.size} elements "
                           f"{item.key} needs here")
    bump_version(target)
