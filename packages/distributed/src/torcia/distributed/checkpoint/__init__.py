"""torcia.distributed.checkpoint: checkpoints of sharded state, as
``torch.distributed.checkpoint`` (DCP): :func:`save` and :func:`async_save` write each
rank's shards and the shared metadata, atomically; :func:`load` reads them into a state
dict of any sharding (4 ranks saved, 2 or 1 load);
``torcia.distributed.checkpoint.state_dict`` makes model and optimizer state dicts for
them."""

from torcia.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
from torcia.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter
from torcia.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    TensorStorageMetadata,
)
from torcia.distributed.checkpoint.state_dict_loader import load
from torcia.distributed.checkpoint.state_dict_saver import async_save, save
from torcia.distributed.checkpoint.stateful import Stateful

__all__ = ["BytesStorageMetadata", "ChunkStorageMetadata", "DefaultLoadPlanner",
           "DefaultSavePlanner", "FileSystemReader", "FileSystemWriter", "Metadata",
           "Stateful", "TensorStorageMetadata", "async_save", "load", "save"]
