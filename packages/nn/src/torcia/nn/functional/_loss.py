"""Loss functions (their shape checks: :mod:`torcia.nn.functional`)."""

from __future__ import annotations

import math

import torcia
from torcia.autograd import Function
from torcia.library import Tensor, autocast_as, call
from torcia.library import check_async as _check_async
from torcia.library.functional import log_softmax, logsigmoid, pairwise_distance
from torcia.nn.functional._common import _scalar


def _reduction(size_average, reduce, reduction):
    """The legacy ``size_average``/``reduce`` pair mapped to a reduction, as PyTorch."""
    if size_average is None and reduce is None:
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _same_shape(input, target, fn):
    if input.shape != target.shape:
        raise ValueError(f"{fn}: target size ({list(target.shape)}) must be the same as input "
                         f"size ({list(input.shape)}); broadcasting them would compute a "
                         "different loss")


@autocast_as("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error ``(input - target) ** 2``, reduced.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.mse_loss(torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 4.0]))
    tensor(2.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "mse_loss")
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_as("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|``, reduced.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.l1_loss(torcia.tensor([1.0, 2.0]), torcia.tensor([2.0, 4.0]))
    tensor(1.5000)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "l1_loss")
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_as("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
                   beta=1.0):
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``
    (``d = input - target``); ``beta=0`` is the L1 loss.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.smooth_l1_loss(torcia.tensor([0.0, 0.0]), torcia.tensor([0.5, 3.0]), reduction="none")
    tensor([0.1250, 2.5000])
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "smooth_l1_loss")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _check_float_operands(input, target, "smooth_l1_cpu")
    d = (input - target).abs()
    if beta == 0:
        loss = d
    else:
        loss = torcia.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce(loss, reduction)


@autocast_as("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 * d**2`` where ``|d| <= delta``, else ``delta * (|d| - 0.5 * delta)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.huber_loss(torcia.tensor([0.0, 0.0]), torcia.tensor([0.5, 3.0]), reduction="none")
    tensor([0.1250, 2.5000])
    """
    reduction = _reduction(None, None, reduction)
    _same_shape(input, target, "huber_loss")
    _check_float_operands(input, target, "huber_cpu")
    d = (input - target).abs()
    loss = torcia.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _check_float_input(input, kernel):
    """PyTorch's error for a loss on integer scores: its kernel has no integer version."""
    if isinstance(input, Tensor) and not input.is_floating_point():
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{_scalar(input.dtype)}'")


def _check_float_operands(input, target, kernel):
    """PyTorch's error for a loss of two integer (or bool) tensors: its kernel runs in
    their common dtype and has no integer version (a difference of uint8 would wrap)."""
    if not (input.is_floating_point() or target.is_floating_point()):
        _check_float_input(input if input.dtype == target.dtype else
                           torcia.empty(0, dtype=torcia.promote_types(input.dtype,
                                                                      target.dtype)), kernel)


def _class_target(input, target, fn):
    """Class-index form of (input, target): input as (rows, C), target as (rows,), and
    the shape the 'none' loss has."""
    if target.dtype not in (torcia.int64, torcia.int32, torcia.uint8, torcia.int16, torcia.int8):
        raise RuntimeError(f"expected scalar type Long but found {_scalar(target.dtype)}")
    if input.ndim == 0:
        raise RuntimeError(f"{fn}: input must have at least 1 dimension, got a 0-d tensor")
    if input.ndim == 1:
        if target.ndim != 0:
            raise RuntimeError(f"0D or 1D target tensor expected, multi-target not supported "
                               f"(got target of size {list(target.shape)} for input of size "
                               f"{list(input.shape)})")
        return input.unsqueeze(0), target.reshape(1), ()
    if target.shape[:1] != input.shape[:1]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 0}).")
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got "
                           f"{list(target.shape)}")
    c = input.shape[1]
    if input.ndim > 2:
        input = input.movedim(1, -1).reshape(-1, c)
    if target.ndim != 1:
        target = target.reshape(-1)
    if target.dtype is not torcia.int64:
        target = target.to(torcia.int64)
    return input, target, expected


def _check_targets(target, c, ignore_index):
    t = target.__torcia_data__
    bad = (t != ignore_index) & ((t < 0) | (t >= c))
    _check_async(target.device, bad.any(),
                 lambda: IndexError(f"Target {int(t[bad][0])} is out of bounds."))


def _check_class_weight(weight, c):
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
        raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no "
                           f"classes but got weight tensor of shape: {list(weight.shape)}")


@autocast_as("nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood of log-probabilities ``input`` ``(N, C, *)`` or ``(C,)`` at the
    class indices ``target``, weighted per class; 'mean' divides by the summed weights
    of the non-ignored targets.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.nll_loss(torcia.tensor([[-1.0, -2.0], [-3.0, -4.0]]), torcia.tensor([1, 0]))
    tensor(2.5000)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _check_float_input(input, "nll_loss_out_frame" if input.ndim <= 2 else
                       "nll_loss2d_forward_out_frame")
    rows, tgt, shape = _class_target(input, target, "nll_loss")
    c = rows.shape[1]
    _check_targets(tgt, c, ignore_index)
    _check_class_weight(weight, c)
    out = call("nll_loss", (rows, tgt, weight), {"reduction": reduction,
                                                 "ignore_index": int(ignore_index)})
    return out.reshape(shape) if reduction == "none" else out


@autocast_as("cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits ``input`` ``(N, C, *)`` or ``(C,)`` and ``target``: class
    indices ``(N, *)`` (fused log_softmax and nll_loss, with ``weight``, ``ignore_index`` and
    ``label_smoothing``), or class probabilities of ``input``'s shape.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.0, 0.0]])
    >>> F.cross_entropy(x, torcia.tensor([1]))
    tensor(0.6931)
    >>> F.cross_entropy(x, torcia.tensor([[0.5, 0.5]]))
    tensor(0.6931)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                         f"{label_smoothing}")
    # without it, integer logits gave an integer loss
    _check_float_input(input, "log_softmax_lastdim_kernel_impl" if input.ndim <= 2 else
                       "log_softmax_kernel_impl")
    if target.is_floating_point():
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing)
    if input.ndim > 2 and input.dtype in (torcia.float16, torcia.bfloat16) and \
            not label_smoothing:
        # PyTorch's composite: its log_softmax along dim 1, not the last, rounds half
        # floats otherwise than the fused kernel's rows do (15% of losses differed)
        return nll_loss(log_softmax(input, 1), target, weight, ignore_index=ignore_index,
                        reduction=reduction)
    rows, tgt, shape = _class_target(input, target, "cross_entropy")
    c = rows.shape[1]
    _check_targets(tgt, c, ignore_index)
    _check_class_weight(weight, c)
    out = call("cross_entropy", (rows, tgt, weight), {
        "reduction": reduction, "ignore_index": int(ignore_index),
        "label_smoothing": float(label_smoothing)})
    return out.reshape(shape) if reduction == "none" else out


def _cross_entropy_probs(input, target, weight, reduction, label_smoothing):
    if input.shape != target.shape:
        raise RuntimeError(f"Expected target size {list(input.shape)}, got "
                           f"{list(target.shape)}")
    dim = 0 if input.ndim == 1 else 1
    c = input.shape[dim]
    _check_class_weight(weight, c)
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    terms = log_softmax(input, dim) * target
    if weight is not None:
        terms = terms * weight.reshape((c,) + (1,) * (input.ndim - dim - 1))
    loss = -terms.sum(dim)
    if reduction == "mean":
        # per element of the batch (and positions), whatever the weights
        return loss.sum() / (input.numel() // c) if input.numel() else loss.sum() * math.nan
    return _reduce(loss, reduction)


def _clamped_log(x):
    """``log(x)`` clamped at -100 without evaluating ``log(0)``."""
    positive = x > 0
    return torcia.where(positive, torcia.where(positive, x, 1).log(), -100.0).clamp(min=-100)


class _BinaryCrossEntropy(Function):
    """Elementwise binary cross-entropy with PyTorch's gradient.

    The logs are clamped at -100, and the input gradient is
    ``(input - target) / max(input * (1 - input), 1e-12)`` as PyTorch computes it: the
    gradient of the clamped expression would be 0 * inf = NaN at input 0 or 1.
    """

    @staticmethod
    def forward(ctx, input, target):
        ctx.save_for_backward(input, target)
        ctx.save_for_forward(input, target)
        return -(target * _clamped_log(input) + (1 - target) * _clamped_log(1 - input))

    @staticmethod
    def _partials(input, target, needed):
        """The derivatives with respect to (input, target), those ``needed`` only."""
        return ((input - target) / ((1 - input) * input).clamp(min=1e-12) if needed[0]
                else None, (1 - input).log() - input.log() if needed[1] else None)

    @staticmethod
    def backward(ctx, grad):
        d_input, d_target = _BinaryCrossEntropy._partials(*ctx.saved_tensors,
                                                          ctx.needs_input_grad)
        return (None if d_input is None else grad * d_input,
                None if d_target is None else grad * d_target)

    @staticmethod
    def jvp(ctx, t_input, t_target):
        d_input, d_target = _BinaryCrossEntropy._partials(*ctx.saved_tensors, (True, True))
        return t_input * d_input + t_target * d_target


@autocast_as("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """``-(target * log(input) + (1 - target) * log(1 - input))`` with the logs clamped
    at -100, as PyTorch, so that probabilities of exactly 0 or 1 give finite losses.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.binary_cross_entropy(torcia.tensor([0.5]), torcia.tensor([1.0]))
    tensor(0.6931)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "binary_cross_entropy")
    data = input.__torcia_data__
    if data.size and (data.min() < 0 or data.max() > 1):
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = _BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


class _LogitsCrossEntropy(Function):
    """``(1 - t) x - (1 + (p - 1) t) logsigmoid(x)``, times the weight and reduced, with
    PyTorch's gradients in its order: ``sigmoid(x) - t`` for the logits (with
    ``pos_weight`` p: ``(p t + 1 - t) sigmoid(x) - p t``) and ``logsigmoid(-x) -
    logsigmoid(x) p`` for the target, times the incoming gradient, then the weight, then
    divided for 'mean'. Autograd through the loss's ops subtracted two nearly equal terms
    for the logits, ``(1 - t) - sigmoid(-x)``, which in half floats lost every digit where
    sigmoid(x) is near t (bfloat16 gradients off by up to 5x)."""

    @staticmethod
    def forward(ctx, input, target, weight, pos_weight, reduction):
        ctx.save_for_backward(input, target, weight, pos_weight)
        ctx.save_for_forward(input, target, weight, pos_weight)
        ctx.reduction = reduction
        log_sig = logsigmoid(input)
        if pos_weight is None:
            loss = (1 - target) * input - log_sig
        else:
            loss = (1 - target) * input - (1 + (pos_weight - 1) * target) * log_sig
        if weight is not None:
            loss = loss * weight
        # PyTorch accumulates the loss in place into ``1 - target``: the target's dtype
        kept = (1 - target).dtype
        if kept.is_floating_point and loss.dtype is not kept:
            loss = loss.to(kept)
        return _reduce(loss, reduction)

    @staticmethod
    def _partials(ctx, grad, needed):
        """The gradients with respect to (input, target) given the loss's ``grad``, those
        ``needed`` only."""
        input, target, weight, p = ctx.saved_tensors

        def scaled(d):
            d = d * grad
            if weight is not None:
                d = d * weight
            return d / input.numel() if ctx.reduction == "mean" else d

        d_input = d_target = None
        if needed[0]:
            d_input = scaled(input.sigmoid() - target if p is None else
                             (p * target + 1 - target) * input.sigmoid() - p * target)
        if needed[1]:
            d_target = scaled(-input if p is None else
                              logsigmoid(-input) - logsigmoid(input) * p)
        return d_input, d_target

    @staticmethod
    def backward(ctx, grad):
        return (*_LogitsCrossEntropy._partials(ctx, grad, ctx.needs_input_grad), None, None,
                None)

    @staticmethod
    def jvp(ctx, t_input, t_target, *_):
        one = torcia.ones((), dtype=ctx.saved_tensors[0].dtype)
        terms = [d * t for d, t in zip(_LogitsCrossEntropy._partials(ctx, one, (True, True)),
                                       (t_input, t_target)) if t is not None]
        out = sum(terms)
        return out if ctx.reduction == "none" else out.sum()


@autocast_as("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Binary cross-entropy of ``sigmoid(input)``, computed from the logits without
    overflow: ``(1 - t) * x - (1 + (pos_weight - 1) * t) * logsigmoid(x)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.binary_cross_entropy_with_logits(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor(0.6931)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is not None and t.requires_grad and torcia.is_grad_enabled():
            raise RuntimeError(f"The function 'binary_cross_entropy_with_logits' is not "
                               f"differentiable with respect to argument '{name}'. This "
                               f"input cannot have requires_grad True.")
    return _LogitsCrossEntropy.apply(input, target, weight, pos_weight, reduction)


@autocast_as("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence ``target * (log(target) - input)`` of log-probabilities
    ``input``; ``log_target`` means ``target`` holds log-probabilities too; 'batchmean'
    divides the sum by the batch size (the mathematically correct KL).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> p = torcia.tensor([[0.5, 0.5]])
    >>> F.kl_div(p.log(), p, reduction="batchmean")
    tensor(0.)
    """
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction != "batchmean":
        reduction = _reduction(size_average, reduce, reduction)
    if input.is_complex() or target.is_complex():
        raise RuntimeError("kl_div: Complex inputs not supported.")
    if not (input.is_floating_point() and target.is_floating_point()):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    _same_shape(input, target, "kl_div")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = torcia.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction)


@autocast_as("ctc_loss")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification loss: minus the log of the total probability
    of all alignments of each target to its input. ``log_probs`` (T, N, C) or (T, C)
    holds log-probabilities; ``targets`` is (N, S) padded or 1-D concatenated; 'mean'
    divides each loss by its target length, then averages. First derivatives only.

    The gradient is the true derivative with respect to ``log_probs`` (PyTorch's own
    adds ``exp(log_probs)``, which cancels when ``log_probs`` comes from log_softmax).

    Examples
    --------
    >>> import math, torcia
    >>> import torcia.nn.functional as F
    >>> lp = torcia.full((2, 1, 2), math.log(0.5))
    >>> # target [1] over two steps: alignments "1 1", "_ 1", "1 _", each 1/4
    >>> round(F.ctc_loss(lp, torcia.tensor([[1]]), [2], [1], reduction="sum").item(), 4)
    0.2877
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    added = log_probs.ndim == 2
    if added:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.reshape(1, -1)
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 or 3 dimensions, got "
                           f"{log_probs.ndim}")
    t_max, n, c = log_probs.shape
    if any(isinstance(x, Tensor) and x.device.type == "meta"
           for x in (input_lengths, target_lengths)):
        raise RuntimeError("ctc_loss with tensor lengths cannot run on the meta device: the "
                           "loss reads the lengths' values, which a meta tensor does not "
                           "hold (PyTorch has no meta kernel for it either)")
    dev = log_probs.device
    # tensor ops, and the checks on the arrays themselves (under vmap an array's any() and
    # max() see every sample at once): the lengths and targets may be batched. On the meta
    # device they hold values only where they are: the targets' device, or the host
    tgt = targets.long()
    home = tgt.device
    il, tl = (torcia.as_tensor(x, device=home).long().reshape(-1)
              for x in (input_lengths, target_lengths))
    if tuple(il.shape) != (n,) or tuple(tl.shape) != (n,):
        raise RuntimeError(f"ctc_loss: expected input_lengths and target_lengths of size {n}, "
                           f"got {list(il.shape)} and {list(tl.shape)}")
    if _any((il > t_max) | (il < 1)):
        raise RuntimeError(f"Expected input_lengths to have value at most {t_max}, but got "
                           f"value {_most(il)} (while checking arguments for ctc_loss_cpu)")
    if tgt.ndim == 1:
        # concatenated targets: split by target_lengths into padded rows
        total = tl.sum()
        if _any(total != tgt.shape[0]):
            raise RuntimeError(f"Expected tensor to have size {_most(total)} at dimension 0, "
                               f"but got size {tgt.shape[0]} for argument #2 'targets' (while "
                               f"checking arguments for ctc_loss_allocate_outputs)")
        width = max(_most(tl), 1)
        at = (tl.cumsum(0) - tl).unsqueeze(1) + torcia.arange(width, device=home)
        tgt = tgt.take(at.clamp(max=max(tgt.shape[0] - 1, 0))) if tgt.shape[0] else \
            torcia.full((n, width), blank, dtype=torcia.int64, device=home)
    tgt = tgt.reshape(n, -1)
    if _any(tl > tgt.shape[1]):
        raise RuntimeError(f"Expected tensor to have size at least {_most(tl)} at "
                           f"dimension 1, but got size {tgt.shape[1]} for argument #2 "
                           "'targets' (while checking arguments for ctc_loss_cpu)")
    inside = torcia.arange(tgt.shape[1], device=home).unsqueeze(0) < tl.unsqueeze(1)
    if _any(((tgt < 0) | (tgt >= c) | (tgt == blank)) & inside):
        raise RuntimeError(f"ctc_loss: targets must be class indices in [0, {c}) other than "
                           f"the blank {blank}")
    tgt = tgt.masked_fill(~inside, blank)
    tgt, il, tl = tgt.to(dev), il.to(dev), tl.to(dev)
    nll = call("ctc_loss", (log_probs, tgt, il, tl), {"blank": int(blank)})
    if zero_infinity:
        nll = torcia.where(nll.isinf(), torcia.zeros_like(nll), nll)
    if reduction == "mean":
        return (nll / tl.clamp(min=1).to(nll.dtype)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll.reshape(()) if added else nll


def _any(mask) -> bool:
    """Whether any element of ``mask`` is set (under vmap: of any sample)."""
    return bool(mask.__torcia_data__.any())


def _most(t) -> int:
    """The largest value of an integer tensor (under vmap: of any sample), for a message."""
    return int(t.__torcia_data__.max()) if t.numel() else 0


@autocast_as("poisson_nll_loss")
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Negative log likelihood of ``target`` under Poisson(``input``) (or
    Poisson(exp(input)) with ``log_input``); ``full`` adds Stirling's term.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.poisson_nll_loss(torcia.tensor([0.0, 1.0]), torcia.tensor([1.0, 2.0]))
    tensor(0.8591)
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "poisson_nll_loss")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


@autocast_as("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)`` where
    it is -1.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[1.0, 0.0]])
    >>> F.cosine_embedding_loss(x, x, torcia.tensor([1.0]))
    tensor(0.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or input1.shape != input2.shape:
        raise RuntimeError(f"cosine_embedding_loss: expected 1D or 2D inputs of equal size, "
                           f"got {list(input1.shape)} and {list(input2.shape)}")
    dim = input1.ndim - 1
    eps = 1e-12
    dot = (input1 * input2).sum(dim)
    m1 = (input1 * input1).sum(dim) + eps
    m2 = (input2 * input2).sum(dim) + eps
    cos = dot / (m1 * m2).sqrt()
    zero = torcia.zeros_like(cos)
    loss = torcia.where(target == 1, 1 - cos, zero) + torcia.where(
        target == -1, (cos - margin).clamp(min=0), zero)
    return _reduce(loss, reduction)


@autocast_as("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.margin_ranking_loss(torcia.tensor([1.0]), torcia.tensor([2.0]), torcia.tensor([1.0]))
    tensor(1.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not (input1.shape == input2.shape == target.shape):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {list(input1.shape)}, input2: "
                           f"{list(input2.shape)}, target: {list(target.shape)} ")
    loss = (-target * (input1 - input2) + margin).clamp(min=0)
    return _reduce(loss, reduction)


@autocast_as("hinge_embedding_loss")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x, y = torcia.tensor([0.3, 2.0]), torcia.tensor([1.0, -1.0])
    >>> F.hinge_embedding_loss(x, y, reduction="none")
    tensor([0.3000, 0.0000])
    """
    reduction = _reduction(size_average, reduce, reduction)
    zero = torcia.zeros_like(input)
    # PyTorch fills ``margin`` into a tensor of the input's dtype (an integer input stays
    # integer) and adds both terms where ``target`` is neither 1 nor -1
    hinge = (torcia.full_like(input, margin) - input).clamp(min=0)
    loss = torcia.where(target != 1, hinge, zero) + torcia.where(target != -1, input, zero)
    return _reduce(loss, reduction)


@autocast_as("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.soft_margin_loss(torcia.tensor([0.0, 2.0]), torcia.tensor([1.0, -1.0]), reduction="none")
    tensor([0.6931, 2.1269])
    """
    reduction = _reduction(size_average, reduce, reduction)
    _same_shape(input, target, "soft_margin_loss")
    if not (input.is_floating_point() or input.is_complex()):
        # PyTorch computes in place in the input's dtype, which cannot hold the exp: its
        # chain raises its error
        input.neg().mul_(target).exp_()
    # PyTorch's formula in the input's dtype, overflow included
    loss = (input.neg() * target).to(input.dtype).exp().log1p()
    return _reduce(loss, reduction)


@autocast_as("triplet_margin_loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, d(anchor, positive) - d(anchor, negative) + margin)`` with ``d`` the
    ``p``-norm :func:`pairwise_distance`; ``swap`` uses the smaller of d(a, n), d(p, n).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> a = torcia.tensor([[0.0, 0.0]])
    >>> F.triplet_margin_loss(a, a, a + 3, eps=0.0)
    tensor(0.)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions (1 or 2), but got: anchor "
                           f"{anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    d_ap = pairwise_distance(anchor, positive, p, eps)
    d_an = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_an = torcia.minimum(d_an, pairwise_distance(positive, negative, p, eps))
    loss = (margin + d_ap - d_an).clamp(min=0)
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """:func:`triplet_margin_loss` with any ``distance_function`` (default
    :func:`pairwise_distance`).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> anchor = torcia.tensor([[0.0, 0.0]])
    >>> positive = torcia.tensor([[0.0, 1.0]])
    >>> negative = torcia.tensor([[3.0, 0.0]])
    >>> l1 = lambda a, b: (a - b).abs().sum(-1)
    >>> F.triplet_margin_with_distance_loss(anchor, positive, negative,
    ...                                     distance_function=l1, margin=3.0)
    tensor(1.)
    """
    reduction = _reduction(None, None, reduction)
    dist = pairwise_distance if distance_function is None else distance_function
    d_ap = dist(anchor, positive)
    d_an = dist(anchor, negative)
    if swap:
        d_an = torcia.minimum(d_an, dist(positive, negative))
    loss = (margin + d_ap - d_an).clamp(min=0)
    return _reduce(loss, reduction)


@autocast_as("multilabel_margin_loss")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: for each sample, the sum over its target classes ``j``
    (``target`` lists them, ending at the first -1) and non-target classes ``i`` of
    ``max(0, 1 - (x[j] - x[i]))``, over the number of classes.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> y = torcia.tensor([[3, 0, -1, 1]])
    >>> F.multilabel_margin_loss(x, y)
    tensor(0.8500)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input.shape != target.shape or input.ndim not in (1, 2):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    t = target.reshape(x.shape)
    c = x.shape[1]
    # slots before the first -1 name targets; all in tensor ops, so that vmap maps them
    valid = (t != -1).long().cumprod(1) != 0
    safe = torcia.where(valid, t, torcia.zeros_like(t))
    is_target = torcia.zeros_like(t).scatter_add(1, safe, valid.long()) != 0
    picked = x.gather(1, safe)  # (N, slots)
    hinge = (1 - picked.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (hinge * mask).sum((1, 2)) / c
    if input.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


@autocast_as("multi_margin_loss")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss: the mean over classes ``i != y`` of
    ``max(0, margin - x[y] + x[i]) ** p`` (times ``weight[y]``).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> F.multi_margin_loss(x, torcia.tensor([3]))
    tensor(0.3250)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    rows = input if input.ndim == 2 else input.unsqueeze(0)
    t = target.reshape(-1, 1)
    picked = rows.gather(1, t)
    terms = (margin - picked + rows).clamp(min=0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * weight[t.reshape(-1)].unsqueeze(1)
    terms = terms.scatter(1, t, 0.0)
    loss = terms.sum(1) / rows.shape[1]
    if input.ndim != 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-06, reduction="mean"):
    """Negative log likelihood of ``target`` under N(``input``, ``var``):
    ``0.5 * (log(max(var, eps)) + (input - target)**2 / max(var, eps))`` (plus
    ``0.5 * log(2 pi)`` with ``full``); ``var`` may have one fewer trailing dim or a last
    dim of 1 (one variance per sample).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.gaussian_nll_loss(torcia.tensor([1.0]), torcia.tensor([3.0]), torcia.tensor([4.0]))
    tensor(1.1931)
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if (var.__torcia_data__ < 0).any():
        raise ValueError("var has negative entry/entries")
    with torcia.no_grad():
        clamped = var.clamp(min=eps)
    # the clamp is invisible to the gradient, as PyTorch's in-place clamp under no_grad
    var = var + (clamped - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Mean over classes of the binary cross-entropy of ``sigmoid(input)`` against the
    0/1 ``target``, per sample.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([[0.0, 2.0]])
    >>> F.multilabel_soft_margin_loss(x, torcia.tensor([[1.0, 0.0]]))
    tensor(1.4100)
    """
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.mean(input.ndim - 1)
    # PyTorch's composite checks the reduction last, after its log-sigmoid's dtype check
    return _reduce(loss, _reduction(size_average, reduce, reduction))
