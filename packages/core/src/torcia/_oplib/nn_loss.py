"""The losses PyTorch also exposes at ``torch.*`` (``torch.kl_div``,
``torch.ctc_loss``...), served by torcia-nn's functional API.
"""

from __future__ import annotations

from torcia._oplib._common import _F

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value) -> str:
    if isinstance(value, str):
        return value
    if value not in _REDUCTIONS:
        raise ValueError(f"{value} is not a valid value for reduction")
    return _REDUCTIONS[value]


def kl_div(input, target, reduction=0, log_target=False):
    """``torch.kl_div``: :func:`torcia.nn.functional.kl_div`.

    Examples
    --------
    >>> import torcia
    >>> p = torcia.tensor([0.5, 0.5])
    >>> torcia.kl_div(p.log(), p)
    tensor([0., 0.])
    """
    return _F().kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """``torch.hinge_embedding_loss``.

    Examples
    --------
    >>> import torcia
    >>> torcia.hinge_embedding_loss(torcia.tensor([0.25, 2.0]), torcia.tensor([-1.0, 1.0]))
    tensor([0.7500, 2.0000])
    """
    return _F().hinge_embedding_loss(input, target, margin=margin,
                                     reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.cosine_embedding_loss``.

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.tensor([[1.0, 0.0]]), torcia.tensor([[0.0, 1.0]])
    >>> torcia.cosine_embedding_loss(a, b, torcia.tensor([1.0]))
    tensor([1.])
    """
    return _F().cosine_embedding_loss(input1, input2, target, margin=margin,
                                      reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.margin_ranking_loss``.

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.tensor([1.0, 0.0]), torcia.tensor([0.0, 1.0])
    >>> torcia.margin_ranking_loss(a, b, torcia.tensor([1.0, 1.0]))
    tensor([0., 1.])
    """
    return _F().margin_ranking_loss(input1, input2, target, margin=margin,
                                    reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``torch.poisson_nll_loss`` (every argument required, as ATen's).

    Examples
    --------
    >>> import torcia
    >>> torcia.poisson_nll_loss(torcia.tensor([0.0]), torcia.tensor([1.0]), True, False, 1e-8, 1)
    tensor(1.)
    """
    return _F().poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                                 reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=0):
    """``torch.triplet_margin_loss``.

    Examples
    --------
    >>> import torcia
    >>> a, p, n = torcia.tensor([[0.0]]), torcia.tensor([[1.0]]), torcia.tensor([[1.5]])
    >>> torcia.triplet_margin_loss(a, p, n)
    tensor([0.5000])
    """
    return _F().triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps,
                                    swap=swap, reduction=_reduction(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=0):
    """``torch.binary_cross_entropy_with_logits`` (``pos_weight`` before ``reduction``).

    Examples
    --------
    >>> import torcia
    >>> torcia.binary_cross_entropy_with_logits(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor([0.6931])
    """
    return _F().binary_cross_entropy_with_logits(input, target, weight=weight,
                                                 reduction=_reduction(reduction),
                                                 pos_weight=pos_weight)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    """``torch.ctc_loss``.

    Examples
    --------
    >>> import torcia
    >>> log_probs = torcia.zeros(2, 1, 2).log_softmax(-1)
    >>> targets = torcia.tensor([[1]])
    >>> torcia.ctc_loss(log_probs, targets, torcia.tensor([2]), torcia.tensor([1]))
    tensor([0.2877])
    """
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                         reduction=_reduction(reduction), zero_infinity=zero_infinity)


#: the names ``torcia`` exports from here
__all__ = [
    "binary_cross_entropy_with_logits", "cosine_embedding_loss", "ctc_loss",
    "hinge_embedding_loss", "kl_div", "margin_ranking_loss", "poisson_nll_loss",
    "triplet_margin_loss",
]
