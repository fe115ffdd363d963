"""Cross entropy of linearly transformed inputs, as ``torch.nn.functional.
linear_cross_entropy``, with the chunked form that never holds the whole
``(batch, classes)`` logits (``LinearCrossEntropyOptions``)."""

from __future__ import annotations

import dataclasses
import warnings

import torcia
from torcia.autograd import Function

__all__ = ["LinearCrossEntropyOptions", "linear_cross_entropy"]

_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """How :func:`linear_cross_entropy` splits the batch into chunks, as
    ``torch.nn.LinearCrossEntropyOptions``.

    With options, the loss is computed chunk by chunk of ``batch_chunk_size`` rows (or as
    ``chunking_method="aspect_ratio:K"`` picks: chunks of about ``K * in_features`` rows;
    ``"auto"`` is ``"aspect_ratio:2"``), and backward recomputes each chunk's logits, so
    the whole ``(batch, classes)`` logits never exist at once. ``acc_policy`` and
    ``acc_dtype`` are accepted: torcia accumulates in the input's dtype.
    ``allow_retain_graph`` is accepted; since backward recomputes, a second backward
    always works. Configurations the chunked form does not cover (class probabilities as
    targets, class ``weight``, ``label_smoothing``, K-dimensional outputs) use the
    reference computation with a warning, as PyTorch's do.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LinearCrossEntropyOptions(batch_chunk_size=128).batch_chunk_size
    128
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            if not sep:
                factor = "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None
                or (isinstance(self.batch_chunk_size, int) and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got "
                             f"{self.batch_chunk_size!r}")
        floats = (torcia.float16, torcia.bfloat16, torcia.float32, torcia.float64)
        if self.acc_dtype is not None and self.acc_dtype not in floats:
            raise ValueError(f"acc_dtype must be one of {{None, torch.float16, "
                             f"torch.bfloat16, torch.float32, torch.float64}}, got "
                             f"{self.acc_dtype!r}. Pass acc_dtype=None to let the op pick "
                             "automatically.")

    def chunk_rows(self, num_batches: int, in_features: int) -> int:
        """The rows per chunk for a batch of ``num_batches`` rows of ``in_features``."""
        if self.batch_chunk_size is not None:
            return self.batch_chunk_size
        method = "aspect_ratio:2" if self.chunking_method in (None, "auto") \
            else self.chunking_method
        name, _, factor = method.partition(":")
        return max(1, min(num_batches, int(factor or 1) * in_features))


def _chunk_grads(x, weight, bias, target, keep, row_scale):
    """Gradients of ``sum(row_scale * CE(x @ W.T + b, target))`` over one chunk, from
    its recomputed probabilities: ``(softmax - onehot) * row_scale``."""
    logits = x @ weight.T
    if bias is not None:
        logits = logits + bias
    delta = torcia.softmax(logits, 1)
    rows = torcia.arange(len(target), device=x.device)
    delta[rows, target] -= 1
    delta = delta * (keep * row_scale).unsqueeze(1)
    return delta @ weight, delta.T @ x, delta.sum(0)


class _ChunkedLinearCrossEntropy(Function):
    @staticmethod
    def forward(ctx, input, weight, bias, target, reduction, ignore_index, rows):
        keep = (target != ignore_index).to(input.dtype)
        safe = torcia.where(target == ignore_index, torcia.zeros_like(target), target)
        losses = []
        for start in range(0, input.shape[0], rows):
            x = input[start:start + rows]
            logits = x @ weight.T
            if bias is not None:
                logits = logits + bias
            picked = logits.gather(1, safe[start:start + rows].unsqueeze(1)).squeeze(1)
            losses.append((torcia.logsumexp(logits, 1) - picked) * keep[start:start + rows])
        loss = torcia.cat(losses)
        ctx.save_for_backward(input, weight, bias, safe, keep)
        ctx.reduction, ctx.rows = reduction, rows
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        return loss.sum() / keep.sum()

    @staticmethod
    def backward(ctx, grad):
        input, weight, bias, safe, keep = ctx.saved_tensors
        if ctx.reduction == "none":
            scale = grad
        else:
            total = grad / keep.sum() if ctx.reduction == "mean" else grad
            scale = total.expand(input.shape[0])
        grad_input = torcia.empty_like(input)
        grad_weight = torcia.zeros_like(weight)
        grad_bias = torcia.zeros_like(bias) if bias is not None else None
        for start in range(0, input.shape[0], ctx.rows):
            part = slice(start, start + ctx.rows)
            gx, gw, gb = _chunk_grads(input[part], weight, bias, safe[part], keep[part],
                                      scale[part])
            grad_input[part] = gx
            grad_weight += gw
            if grad_bias is not None:
                grad_bias += gb
        return grad_input, grad_weight, grad_bias, None, None, None, None


def _reference(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
               label_smoothing):
    from torcia.nn import functional as F

    classes_and_out = tuple(linear_weight.shape[:-1])
    logits = input @ linear_weight.reshape(-1, linear_weight.shape[-1]).T
    if linear_bias is not None:
        logits = logits + linear_bias.reshape(-1)
    lead = tuple(input.shape[:-1])
    logits = logits.reshape(*lead, *classes_and_out)
    return F.cross_entropy(logits, target, weight=weight,
                           ignore_index=-100 if ignore_index is None else ignore_index,
                           reduction=reduction, label_smoothing=label_smoothing)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``, as
    ``torch.nn.functional.linear_cross_entropy``.

    ``linear_weight`` is ``(C, in_features)`` (or ``(C, d1, ..., dK, in_features)`` for a
    K-dimensional loss). With ``options`` (a :class:`LinearCrossEntropyOptions`) the
    batch is processed in chunks and the full logits are never held.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x, w = torcia.randn(6, 4), torcia.randn(10, 4)
    >>> t = torcia.tensor([1, 0, 9, 3, 3, 2])
    >>> a = F.linear_cross_entropy(x, w, t)
    >>> b = F.linear_cross_entropy(x, w, t,
    ...                            options=torcia.nn.LinearCrossEntropyOptions(batch_chunk_size=4))
    >>> bool(torcia.allclose(a, b)), bool(torcia.allclose(a, F.cross_entropy(x @ w.T, t)))
    (True, True)
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if input.shape[-1] != linear_weight.shape[-1]:
        raise RuntimeError(f"linear_cross_entropy: input has {input.shape[-1]} features, "
                           f"linear_weight expects {linear_weight.shape[-1]}")
    if options is not None:
        unsupported = []
        if target.dtype.is_floating_point:
            unsupported.append("class-probability targets")
        if weight is not None:
            unsupported.append("a class weight")
        if label_smoothing:
            unsupported.append("label_smoothing")
        if linear_weight.dim() != 2 or input.dim() != 2:
            unsupported.append("inputs other than (N, in_features) with a 2-D weight")
        if linear_bias is not None and linear_bias.dim() != 1:
            unsupported.append("a K-dimensional bias")
        if not unsupported:
            rows = options.chunk_rows(input.shape[0], input.shape[1])
            return _ChunkedLinearCrossEntropy.apply(
                input, linear_weight, linear_bias, target, reduction,
                -100 if ignore_index is None else ignore_index, rows)
        warnings.warn(f"linear_cross_entropy: the chunked implementation does not support "
                      f"{', '.join(unsupported)}; falling back to the reference "
                      "implementation", stacklevel=2)
    return _reference(input, linear_weight, target, linear_bias, weight, reduction,
                      ignore_index, label_smoothing)
