"""``torcia.masked``: reductions and normalizations that ignore masked-out elements, and
:class:`MaskedTensor`, as ``torch.masked``.

Each function takes a dense ``input`` and a bool ``mask`` (broadcastable to it; True keeps
an element), or a :class:`MaskedTensor`. A masked-out element is replaced by the identity
of the operation before it runs (0 for sums, 1 for products, -inf for maxima and
log-sum-exp...), so a slice with nothing kept gives that identity (or NaN where there is
none: mean, var, median), exactly as PyTorch's. Gradients flow to the kept elements.

Examples
--------
>>> import torcia
>>> x = torcia.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
>>> mask = torcia.tensor([[True, False, True], [False, False, False]])
>>> torcia.masked.sum(x, 1, mask=mask)
tensor([4., 0.])
>>> torcia.masked.mean(x, 1, mask=mask)
tensor([2., nan])
>>> torcia.masked.softmax(x, 1, mask=mask)[0]
tensor([0.1192, 0.0000, 0.8808])
>>> torcia.masked.masked_tensor(x, mask).amax(1)
MaskedTensor(
  [  3.0000,       --]
)
"""

from __future__ import annotations

from torcia.masked._ops import (
    amax,
    amin,
    argmax,
    argmin,
    cumprod,
    cumsum,
    log_softmax,
    logaddexp,
    logsumexp,
    mean,
    median,
    norm,
    normalize,
    prod,
    softmax,
    softmin,
    std,
    sum,
    var,
)
from torcia.masked.maskedtensor import (
    MaskedTensor,
    as_masked_tensor,
    is_masked_tensor,
    masked_tensor,
)

__all__ = [
    "MaskedTensor", "amax", "amin", "argmax", "argmin", "as_masked_tensor", "cumprod",
    "cumsum", "is_masked_tensor", "log_softmax", "logaddexp", "logsumexp", "masked_tensor",
    "mean", "median", "norm", "normalize", "prod", "softmax", "softmin", "std", "sum", "var",
]
