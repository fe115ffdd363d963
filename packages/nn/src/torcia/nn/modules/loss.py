"""Loss modules. They are registered by name through the ``torcia_register_losses`` hook
(see :mod:`torcia.nn.losses`); each calls its ``torcia.nn.functional`` counterpart."""

from __future__ import annotations

import warnings

from torcia.nn import functional as F
from torcia.nn.modules.module import Module

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CosineEmbeddingLoss", "CrossEntropyLoss",
           "HingeEmbeddingLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss",
           "MarginRankingLoss", "MultiMarginLoss", "NLLLoss", "PoissonNLLLoss",
           "SmoothL1Loss", "SoftMarginLoss", "TripletMarginLoss"]

_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce) -> str:
    """PyTorch's deprecated ``size_average``/``reduce`` pair as a ``reduction`` string."""
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='mean', 'sum' or 'none' instead.", stacklevel=4)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


class _Loss(Module):
    """Base of the losses: the ``reduction`` argument (``"none"``, ``"mean"``, ``"sum"``)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _legacy_reduction(size_average, reduce)
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.reduction = reduction


class _WeightedLoss(_Loss):
    """A loss with a per-class ``weight`` buffer."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean (or sum) of ``|input - target|``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.L1Loss()(torcia.tensor([1.0, 2.0]), torcia.tensor([0.0, 0.0]))
    tensor(1.5000)
    """

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean (or sum) of ``(input - target)²``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.MSELoss()(torcia.tensor([1.0, 2.0]), torcia.tensor([0.0, 0.0]))
    tensor(2.5000)
    """

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """``0.5 * d² / beta`` where ``|d| < beta``, ``|d| - 0.5 * beta`` elsewhere
    (``d = input - target``).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.SmoothL1Loss()(torcia.tensor([0.5, 3.0]), torcia.tensor([0.0, 0.0]))
    tensor(1.3125)
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``0.5 * d²`` where ``|d| < delta``, ``delta * (|d| - 0.5 * delta)`` elsewhere.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.HuberLoss(delta=2.0)(torcia.tensor([1.0, 4.0]), torcia.tensor([0.0, 0.0]))
    tensor(3.2500)
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class indices given log-probabilities ``(N, C, ...)``.

    Examples
    --------
    >>> import torcia
    >>> logp = torcia.tensor([[-0.5, -1.0], [-2.0, -0.1]])
    >>> torcia.nn.NLLLoss()(logp, torcia.tensor([0, 1]))
    tensor(0.3000)
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy between logits ``(N, C, ...)`` and class indices or class
    probabilities, with optional class ``weight``, ``ignore_index`` and
    ``label_smoothing``.

    Examples
    --------
    >>> import torcia
    >>> logits = torcia.tensor([[0.0, 0.0], [0.0, 0.0]])
    >>> torcia.nn.CrossEntropyLoss()(logits, torcia.tensor([0, 1]))
    tensor(0.6931)
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, size_average, reduce, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(
                f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"
            )
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities ``input`` against ``target`` in [0, 1].

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.BCELoss()(torcia.tensor([0.5, 0.5]), torcia.tensor([1.0, 0.0]))
    tensor(0.6931)
    """

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits;
    ``pos_weight`` scales the positive term per class.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.BCEWithLogitsLoss()(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor(0.6931)
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence ``target * (log(target) - input)`` for log-probabilities
    ``input`` (and ``target`` too with ``log_target=True``); use ``reduction="batchmean"``
    for the mathematical KL divergence.

    Examples
    --------
    >>> import torcia
    >>> p = torcia.tensor([[0.5, 0.5]])
    >>> torcia.nn.KLDivLoss(reduction="batchmean")(p.log(), p)
    tensor(0.)
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False):
        if reduction == "batchmean":
            super().__init__(size_average, reduce, "mean")
            self.reduction = "batchmean"
        else:
            super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` for ``y = 1``, ``max(0, cos(x1, x2) - margin)`` for ``y = -1``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 0.0]])
    >>> torcia.nn.CosineEmbeddingLoss()(x, x, torcia.tensor([1]))
    tensor(0.)
    """

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -y * (x1 - x2) + margin)``.

    Examples
    --------
    >>> import torcia
    >>> loss = torcia.nn.MarginRankingLoss(margin=1.0)
    >>> loss(torcia.tensor([2.0]), torcia.tensor([0.5]), torcia.tensor([1.0]))
    tensor(0.)
    """

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the p-norm distance (``swap``
    uses the smaller of ``d(a, n)`` and ``d(p, n)``).

    Examples
    --------
    >>> import torcia
    >>> a = torcia.tensor([[0.0, 0.0]])
    >>> loss = torcia.nn.TripletMarginLoss(margin=1.0)
    >>> round(float(loss(a, a, a + 3.0)), 4)
    0.0
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(
                f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead"
            )
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` for ``y = 1``, ``max(0, margin - x)`` for ``y = -1``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.HingeEmbeddingLoss()(torcia.tensor([0.3, 0.4]), torcia.tensor([1.0, -1.0]))
    tensor(0.4500)
    """

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``log(1 + exp(-y * x))`` for labels ``y`` in {-1, 1}.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.SoftMarginLoss()(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor(0.6931)
    """

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """Negative log-likelihood of a Poisson ``target`` with rate ``exp(input)``
    (``log_input=True``) or ``input``; ``full`` adds Stirling's term.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.PoissonNLLLoss()(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor(1.)
    """

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss: the mean over classes ``i != y`` of
    ``max(0, margin - x[y] + x[i]) ** p``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.MultiMarginLoss()(torcia.tensor([[0.1, 0.2, 0.4, 0.8]]), torcia.tensor([3]))
    tensor(0.3250)
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                 reduce=None, reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p = p
        self.margin = margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated name for :class:`NLLLoss` on ``(N, C, H, W)`` inputs.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.NLLLoss2d()(torcia.zeros(1, 2, 1, 1), torcia.zeros(1, 1, 1).long())
    tensor(0.)
    """


class MultiLabelMarginLoss(_Loss):
    """Multi-class multi-label hinge loss; ``target`` lists the true classes of each
    sample, ended by -1.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> torcia.nn.MultiLabelMarginLoss()(x, torcia.tensor([[3, 0, -1, 1]]))
    tensor(0.8500)
    """

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Multi-label one-versus-all logistic loss, averaged over the classes.

    Examples
    --------
    >>> import torcia
    >>> loss = torcia.nn.MultiLabelSoftMarginLoss()
    >>> loss(torcia.zeros(1, 2), torcia.tensor([[1.0, 0.0]])).round(decimals=4)
    tensor(0.6931)
    """

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Negative log-likelihood of ``target`` under Gaussians with mean ``input`` and
    variance ``var`` (clamped at ``eps``; ``full`` adds the constant).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.GaussianNLLLoss()(torcia.zeros(2), torcia.zeros(2), torcia.ones(2))
    tensor(0.)
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet loss with any ``distance_function`` (default pairwise L2 distance).

    Examples
    --------
    >>> import torcia
    >>> loss = torcia.nn.TripletMarginWithDistanceLoss(margin=1.0)
    >>> a = torcia.zeros(1, 2)
    >>> loss(a, a, a + 3.0).item()
    0.0
    """

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean"):
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """Connectionist temporal classification loss of log-probabilities ``(T, N, C)``
    against unaligned target sequences.

    Examples
    --------
    >>> import torcia
    >>> log_probs = torcia.randn(5, 1, 3).log_softmax(2)
    >>> loss = torcia.nn.CTCLoss()(log_probs, torcia.tensor([[1, 2]]), [5], [2])
    >>> bool(loss > 0)
    True
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(None, None, reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)
