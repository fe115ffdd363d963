"""The ``torch.*`` functions PyTorch backs with its neural-network functional API
(``torch.kl_div``, ``torch.triplet_margin_loss``, ``torch.rrelu``...), with the signatures
PyTorch gives them there: ``reduction`` is an int (0 none, 1 mean, 2 sum) or a string, and
for the losses it defaults to 0 (no reduction), unlike ``torch.nn.functional``.

They live in torcia-nn, a separate distribution, which lends its functional module to
core (``torcia_register_names``): without torcia-nn the error names the distribution.
"""

from __future__ import annotations

from torcia import plugins

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _F():  # noqa: N802 - the usual name of the functional module
    return plugins.lent("torcia.nn.functional", "torcia-nn")


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


def bilinear(input1, input2, weight, bias=None):
    """``torch.bilinear``: ``x1^T W x2 + b``.

    Examples
    --------
    >>> import torcia
    >>> x1, x2 = torcia.tensor([[1.0, 2.0]]), torcia.tensor([[3.0]])
    >>> torcia.bilinear(x1, x2, torcia.ones(1, 2, 1))
    tensor([[9.]])
    """
    return _F().bilinear(input1, input2, weight, bias)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rrelu(torcia.tensor([-2.0, 1.0]), 0.5, 0.5)
    tensor([-1.,  1.])
    """
    return _F().rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-2.0, 1.0])
    >>> torcia.rrelu_(x, 0.25, 0.25)
    tensor([-0.5000,  1.0000])
    """
    return _F().rrelu_(input, lower, upper, training)


def threshold(input, threshold, value):
    """``torch.threshold``: ``value`` where ``input <= threshold``.

    Examples
    --------
    >>> import torcia
    >>> torcia.threshold(torcia.tensor([0.5, 2.0]), 1.0, -1.0)
    tensor([-1.,  2.])
    """
    return _F().threshold(input, threshold, value)


def threshold_(input, threshold, value):
    """``torch.threshold_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([0.5, 2.0])
    >>> torcia.threshold_(x, 1.0, 0.0)
    tensor([0., 2.])
    """
    return _F().threshold_(input, threshold, value)


def hardshrink(input, lambd=0.5):
    """``torch.hardshrink``.

    Examples
    --------
    >>> import torcia
    >>> torcia.hardshrink(torcia.tensor([-1.0, 0.25]))
    tensor([-1.,  0.])
    """
    return _F().hardshrink(input, lambd)


def celu_(input, alpha=1.0):
    """``torch.celu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-1.0, 1.0])
    >>> torcia.celu_(x)
    tensor([-0.6321,  1.0000])
    """
    return _F().celu_(input, alpha)


def selu_(input):
    """``torch.selu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([0.0, 1.0])
    >>> torcia.selu_(x)
    tensor([0.0000, 1.0507])
    """
    return _F().selu_(input)


def channel_shuffle(input, groups):
    """``torch.channel_shuffle``.

    Examples
    --------
    >>> import torcia
    >>> torcia.channel_shuffle(torcia.arange(4.0).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    return _F().channel_shuffle(input, groups)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """``torch.max_pool1d_with_indices``: ``(values, indices)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.max_pool1d_with_indices(torcia.tensor([[[1.0, 3.0, 2.0, 5.0]]]), 2)
    (tensor([[[3., 5.]]]), tensor([[[1, 3]]]))
    """
    return _F().max_pool1d_with_indices(input, kernel_size, stride, padding, dilation,
                                        ceil_mode)


def prelu_method(self, weight):
    """``Tensor.prelu(weight)``: :func:`torcia.prelu` of ``self``.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([-2.0, 3.0]).prelu(torcia.tensor([0.25]))
    tensor([-0.5000,  3.0000])
    """
    return _F().prelu(self, weight)


__all__ = [
    "bilinear", "binary_cross_entropy_with_logits", "celu_", "channel_shuffle",
    "cosine_embedding_loss", "ctc_loss", "hardshrink", "hinge_embedding_loss", "kl_div",
    "margin_ranking_loss", "max_pool1d_with_indices", "poisson_nll_loss", "rrelu", "rrelu_",
    "selu_", "threshold", "threshold_", "triplet_margin_loss",
]

#: Tensor methods PyTorch has for some of these
METHODS = {"hardshrink": hardshrink, "prelu": prelu_method}
