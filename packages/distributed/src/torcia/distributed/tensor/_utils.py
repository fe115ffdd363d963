"""Helpers of DTensor that libraries import, as ``torch.distributed.tensor._utils``."""

from __future__ import annotations

from torcia.distributed.tensor._api import local_shape_and_offset


def compute_local_shape_and_global_offset(global_shape, mesh, placements, skip_offset=False):
    """(shape, offset in the global tensor) of this rank's part of a tensor of
    ``global_shape`` spread over ``mesh`` with ``placements``."""
    return local_shape_and_offset(tuple(global_shape), mesh, tuple(placements))
