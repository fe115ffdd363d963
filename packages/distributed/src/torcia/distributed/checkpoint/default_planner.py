"""What each rank saves and loads of a state dict, as
``torch.distributed.checkpoint.default_planner``.

A state dict is *flattened* first: nested dicts and lists become dotted keys
(``optim.state.fc.weight.exp_avg``). Each tensor is described as boxes of its global
tensor: a DTensor by this rank's part (saved by one rank only where the mesh replicates
it), any other tensor whole (saved by rank 0). Loading reads, for each tensor of the
target state dict, the parts of the saved boxes that overlap the box the target holds:
so a checkpoint written by 4 ranks loads on 2, on 1, or with other placements.
"""

from __future__ import annotations

import dataclasses

from torcia import Tensor
from torcia.distributed.tensor import DTensor
from torcia.distributed.tensor._api import local_shape_and_offset

__all__ = ["DefaultLoadPlanner", "DefaultSavePlanner", "ReadItem", "WriteItem"]


@dataclasses.dataclass
class WriteItem:
    """One tensor box (or non-tensor value) this rank writes.

    Examples
    --------
    >>> from torcia.distributed.checkpoint.default_planner import WriteItem
    >>> WriteItem("fc.weight", offsets=(4, 0), sizes=(4, 3), global_size=(8, 3)).sizes
    (4, 3)
    """

    key: str
    offsets: tuple = ()
    sizes: tuple = ()
    global_size: tuple = ()
    tensor: object = None  # the local tensor, for tensor items
    value: object = None  # the value, for non-tensor items
    is_tensor: bool = True


@dataclasses.dataclass
class ReadItem:
    """One tensor (or value) of the target state dict to fill from the checkpoint.

    Examples
    --------
    >>> from torcia.distributed.checkpoint.default_planner import ReadItem
    >>> ReadItem("step", is_tensor=False).is_tensor
    False
    """

    key: str
    offsets: tuple = ()
    sizes: tuple = ()
    target: object = None
    is_tensor: bool = True


def flatten(state_dict) -> dict:
    """``{dotted key: leaf}`` of a nested state dict (dicts and lists unfolded)."""
    flat = {}

    def walk(obj, path):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, (*path, str(k)))
        elif isinstance(obj, (list, tuple)) and obj and any(
                isinstance(x, (Tensor, dict, list, tuple)) for x in obj):
            for i, v in enumerate(obj):
                walk(v, (*path, str(i)))
        else:
            flat[".".join(path)] = obj

    walk(state_dict, ())
    return flat


def set_flat(state_dict, key: str, value) -> None:
    """Replace the leaf at dotted ``key`` of a nested state dict by ``value`` (walking it
    as :func:`flatten` did: its own keys may hold dots, as module names do)."""
    if not _assign(state_dict, key.split("."), value):
        raise KeyError(f"no entry {key!r} in the state dict")


def _assign(obj, parts, value):
    if isinstance(obj, dict):
        for k in obj:
            head = str(k).split(".")
            if parts[:len(head)] == head:
                rest = parts[len(head):]
                if not rest:
                    obj[k] = value
                    return True
                if isinstance(obj[k], (dict, list, tuple)) and _assign(obj[k], rest, value):
                    return True
        return False
    if isinstance(obj, list):
        index = int(parts[0])
        if len(parts) == 1:
            obj[index] = value
            return True
        return _assign(obj[index], parts[1:], value)
    return False


class DefaultSavePlanner:
    """Plans the write of a flattened state dict: :meth:`create_local_plan` lists the
    boxes and values this rank writes.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint import DefaultSavePlanner
    >>> items = DefaultSavePlanner().create_local_plan({"w": torcia.ones(2, 3), "step": 4},
    ...                                                rank=0)
    >>> [(i.key, i.sizes) for i in items]
    [('w', (2, 3)), ('step', ())]
    """

    def create_local_plan(self, flat: dict, rank: int) -> list:
        items = []
        for key, value in flat.items():
            if isinstance(value, DTensor):
                if any(p.is_partial() for p in value.placements):
                    raise NotImplementedError(f"{key} is a Partial DTensor: redistribute "
                                              "it to Replicate or Shard before saving")
                coordinate = value.device_mesh.get_coordinate()
                if any(p.is_replicate() and coordinate[m] != 0
                       for m, p in enumerate(value.placements)):
                    continue  # a replica another rank writes
                sizes, offsets = local_shape_and_offset(tuple(value.global_shape),
                                                        value.device_mesh, value.placements)
                items.append(WriteItem(key, tuple(offsets), tuple(sizes),
                                       tuple(value.global_shape), Tensor.detach(value)))
            elif isinstance(value, Tensor):
                if rank == 0:
                    shape = tuple(value.shape)
                    items.append(WriteItem(key, (0,) * len(shape), shape, shape,
                                           value.detach()))
            elif rank == 0:
                items.append(WriteItem(key, value=value, is_tensor=False))
        return items


class DefaultLoadPlanner:
    """Plans the read into a flattened target state dict: :meth:`create_local_plan` lists
    the box each target tensor holds (a DTensor's local part, a tensor whole).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint import DefaultLoadPlanner
    >>> items = DefaultLoadPlanner().create_local_plan({"w": torcia.zeros(2, 3)})
    >>> [(i.key, i.offsets, i.sizes) for i in items]
    [('w', (0, 0), (2, 3))]
    """

    def __init__(self, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 allow_partial_load: bool = False):
        self.allow_partial_load = allow_partial_load

    def create_local_plan(self, flat: dict) -> list:
        items = []
        for key, value in flat.items():
            if isinstance(value, DTensor):
                sizes, offsets = local_shape_and_offset(tuple(value.global_shape),
                                                        value.device_mesh, value.placements)
                items.append(ReadItem(key, tuple(offsets), tuple(sizes), value))
            elif isinstance(value, Tensor):
                shape = tuple(value.shape)
                items.append(ReadItem(key, (0,) * len(shape), shape, value))
            else:
                items.append(ReadItem(key, target=value, is_tensor=False))
        return items
