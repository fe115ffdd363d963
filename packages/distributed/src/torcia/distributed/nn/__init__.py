"""torcia.distributed.nn: collectives with gradients (``torcia.distributed.nn.functional``), as
``torch.distributed.nn``."""

from torcia.distributed.nn import functional
from torcia.distributed.nn.functional import *  # noqa: F401,F403
from torcia.distributed.nn.functional import __all__

__all__ = list(__all__) + ["functional"]
