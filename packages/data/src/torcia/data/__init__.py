"""torcia-data: datasets, samplers and a multi-process ``DataLoader``, with PyTorch's names
and semantics. Also importable as ``torcia.utils.data``.

Examples
--------
>>> import torcia
>>> from torcia.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(torcia.arange(6).float(), torcia.tensor([0, 1, 0, 1, 0, 1]))
>>> loader = DataLoader(ds, batch_size=4, shuffle=True, generator=torcia.Generator().manual_seed(0))
>>> [len(y) for _, y in loader]
[4, 2]
"""

import sys

from torcia import utils
from torcia.data._collate import default_collate, default_convert
from torcia.data._fetch import _DatasetKind
from torcia.data._worker import WorkerInfo, get_worker_info
from torcia.data.dataloader import DataLoader
from torcia.data.datapipes import (
    DataChunk,
    DFIterDataPipe,
    IterDataPipe,
    MapDataPipe,
    argument_validation,
    functional_datapipe,
    guaranteed_datapipes_determinism,
    non_deterministic,
    runtime_validation,
    runtime_validation_disabled,
)
from torcia.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from torcia.data.distributed import DistributedSampler
from torcia.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DFIterDataPipe", "DataChunk",
    "DataLoader", "Dataset", "DistributedSampler", "IterDataPipe", "IterableDataset",
    "MapDataPipe", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
    "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "WorkerInfo",
    "_DatasetKind", "argument_validation", "default_collate", "default_convert",
    "functional_datapipe", "get_worker_info", "guaranteed_datapipes_determinism",
    "non_deterministic", "random_split", "runtime_validation", "runtime_validation_disabled",
]

# Core aliases ``torcia.utils.data`` to this package, but not its submodules: without these
# entries ``import torcia.utils.data.sampler`` would load sampler.py a second time, with
# classes that are not this package's (and rebind ``torcia.data.sampler`` to that copy).
# The package itself is registered too, so that the alias works whichever is imported first.
utils.data = sys.modules[__name__]
for _name, _module in list(sys.modules.items()):
    if _name == __name__ or _name.startswith(__name__ + "."):
        sys.modules.setdefault("torcia.utils" + _name[len("torcia"):], _module)
del _name, _module
