"""What a distributed checkpoint's ``.metadata`` file records, as
``torch.distributed.checkpoint.metadata``: for each entry of the state dict, a tensor's
global size and the boxes (chunks) saved of it, or a non-tensor value."""

from __future__ import annotations

import dataclasses

__all__ = ["BytesStorageMetadata", "ChunkStorageMetadata", "Metadata",
           "TensorStorageMetadata"]


@dataclasses.dataclass(frozen=True)
class ChunkStorageMetadata:
    """One saved box of a tensor: where it starts in the global tensor, and its sizes.

    Examples
    --------
    >>> from torcia.distributed.checkpoint import ChunkStorageMetadata
    >>> ChunkStorageMetadata(offsets=(4, 0), sizes=(4, 3)).sizes
    (4, 3)
    """

    offsets: tuple
    sizes: tuple


@dataclasses.dataclass
class TensorStorageMetadata:
    """A tensor of the checkpoint: ``properties`` (its dtype), its global ``size`` and
    its saved ``chunks``.

    Examples
    --------
    >>> from torcia.distributed.checkpoint import TensorStorageMetadata
    >>> TensorStorageMetadata({"dtype": "float32"}, (8, 3), []).size
    (8, 3)
    """

    properties: dict
    size: tuple
    chunks: list


@dataclasses.dataclass
class BytesStorageMetadata:
    """A non-tensor value of the checkpoint (a number, a string, a list...).

    Examples
    --------
    >>> from torcia.distributed.checkpoint import BytesStorageMetadata
    >>> isinstance(BytesStorageMetadata(), BytesStorageMetadata)
    True
    """


@dataclasses.dataclass
class Metadata:
    """A checkpoint's table of contents: ``state_dict_metadata`` maps each (flattened)
    key to its :class:`TensorStorageMetadata` or :class:`BytesStorageMetadata`;
    ``storage_data`` says where each chunk's bytes are.

    Examples
    --------
    >>> from torcia.distributed.checkpoint import Metadata
    >>> Metadata(state_dict_metadata={}).version
    '1'
    """

    state_dict_metadata: dict
    planner_data: object = None
    storage_data: object = None
    storage_meta: object = None
    version: str = "1"
