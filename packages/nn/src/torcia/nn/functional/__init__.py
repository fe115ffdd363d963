"""``torcia.nn.functional``: layers and losses as functions, with PyTorch's signatures.

The heavy primitives (convolution, pooling, softmax, normalisation, embedding, the fused
cross-entropy) are core ops with kernels a backend can replace; they live in torcia-core
(reached through :mod:`torcia.library`) and are re-exported here. What is defined here is
a composition of differentiable ops: its gradient comes from theirs.

Loss functions raise on input and target shapes that differ (PyTorch warns and
broadcasts, which silently computes something else).

Examples
--------
>>> import torcia
>>> import torcia.nn.functional as F
>>> x = torcia.tensor([[2.0, 0.0, 0.0]])
>>> round(F.cross_entropy(x, torcia.tensor([0])).item(), 4)
0.2395
"""

from __future__ import annotations

from torcia.library import Tensor, autocast_as, call, inplace  # noqa: F401

# core's functional forms (conv2d, gelu, softmax...), named by its op families
from torcia.library.functional import *  # noqa: F403

# isort: off
# What is defined here is in one module per family, named as the sections of PyTorch's
# reference for torch.nn.functional; each family's public names are bound here in this
# order, which ``__all__`` below keeps.
from torcia.nn.functional._linear import *  # noqa: F403
from torcia.nn.functional._activation import *  # noqa: F403
from torcia.nn.functional._pooling import *  # noqa: F403
from torcia.nn.functional._sparse import *  # noqa: F403
from torcia.nn.functional._vision import *  # noqa: F403
from torcia.nn.functional._conv import *  # noqa: F403
from torcia.nn.functional._distance import *  # noqa: F403
from torcia.nn.functional._norm import *  # noqa: F403
from torcia.nn.functional._attention import *  # noqa: F403
from torcia.nn.functional._loss import *  # noqa: F403
from torcia.nn.functional._torchscript import *  # noqa: F403

# last: they call this module's functions
from torcia.nn._mha import multi_head_attention_forward  # noqa: F401
from torcia.nn.linear_cross_entropy import linear_cross_entropy  # noqa: F401
# isort: on

__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and callable(v)
           and n not in ("Tensor", "call", "inplace", "annotations")
           and not isinstance(v, type) and getattr(v, "__module__", "").startswith("torcia")]

