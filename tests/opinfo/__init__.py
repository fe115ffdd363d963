"""torcia's op database: an OpInfo-style record of every public op (sample inputs, the
dtypes PyTorch supports, the properties that hold), the checks run from it, and the one
list of where torcia departs from PyTorch on purpose.

- :mod:`opinfo.core`: records, samples, materialising a sample in torcia or torch;
- :mod:`opinfo.samples`: the sample generators;
- :mod:`opinfo.records`: the records, and the public callables that are not ops;
- :mod:`opinfo.checks`: the properties (torch agreement, gradients, forward AD, vmap,
  meta, native vs reference kernels, inputs left unwritten);
- :mod:`opinfo.known`: the documented differences;
- :mod:`opinfo.runner`: CI and long modes.

``tests/test_opinfo.py`` runs it under pytest; ``tools/opinfo.py`` runs it by hand and
writes ``docs/opinfo.rst``.
"""

from .core import OpInfo
from .known import KNOWN
from .records import NOT_OPS, RECORDS

__all__ = ["KNOWN", "NOT_OPS", "OpInfo", "RECORDS"]
