"""Public functions for sorting, selection, scans, counting and shaping extras.

As in :mod:`torcia._ops`: arguments are checked and normalised here, in PyTorch's words,
and the kernel runs through :func:`torcia._tensor.call` so that autograd sees every op.
Multi-output ops return named tuples (``values``/``indices``...).
"""

from __future__ import annotations

from torcia import _dtype as D
from torcia._grad_mode import STATE as _GRAD
from torcia._ops import (
    _along_dim,
    _check_range,
    _index_tensor,
    _return_type,
    _size_at,
    _to_float,
    isnan,
    reshape,
    take_along_dim,
    to_dtype,
    where,
)
from torcia._ops_complex import complex as _complex_of
from torcia._tensor import Tensor, _wrap_dim, call
from torcia.amp import autocast_as

_Sort = _return_type("sort", ("values", "indices"))
_Topk = _return_type("topk", ("values", "indices"))
_Kth = _return_type("kthvalue", ("values", "indices"))
_Median = _return_type("median", ("values", "indices"))
_Mode = _return_type("mode", ("values", "indices"))
_Cummax = _return_type("cummax", ("values", "indices"))
_Cummin = _return_type("cummin", ("values", "indices"))


def _nonempty_dim(input, d, name):
    if input.numel() == 0 and _size_at(input, d) == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


# ----- sorting and selection -------------------------------------------------------------


def sort(input, dim=-1, descending=False, stable=False):
    """Sort along ``dim``; returns ``(values, indices)``. Equal elements keep their order.

    Examples
    --------
    >>> import torcia
    >>> torcia.sort(torcia.tensor([3, 1, 2])).values
    tensor([1, 2, 3])
    """
    d = _wrap_dim(dim, input.ndim)
    v, i = _along_dim("sort", (input,), {"dim": d, "descending": bool(descending),
                                   "stable": bool(stable)})
    return _Sort(v, i)


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.argsort(torcia.tensor([3, 1, 2]), descending=True)
    tensor([0, 2, 1])
    """
    return sort(input, dim, descending, stable).indices


def msort(input):
    """Sort along the first dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.msort(torcia.tensor([[3, 1], [1, 2]]))
    tensor([[1, 1],
            [3, 2]])
    """
    return sort(input, 0).values


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest) elements along ``dim``, with their indices.

    Examples
    --------
    >>> import torcia
    >>> torcia.topk(torcia.tensor([1.0, 5.0, 3.0]), 2).indices
    tensor([1, 2])
    """
    d = _wrap_dim(dim, input.ndim)
    if not 0 <= k <= _size_at(input, d):
        raise RuntimeError("selected index k out of range")
    v, i = _along_dim("topk", (input,), {"k": int(k), "dim": d, "largest": bool(largest),
                                   "sorted": bool(sorted)})
    return _Topk(v, i)


def kthvalue(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element (1-based) along ``dim``, with its index.

    Examples
    --------
    >>> import torcia
    >>> torcia.kthvalue(torcia.tensor([3.0, 1.0, 2.0]), 2)
    torcia.return_types.kthvalue(
    values=tensor(2.),
    indices=tensor(2))
    """
    d = _wrap_dim(dim, input.ndim)
    if not 1 <= k <= _size_at(input, d):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    v, i = _along_dim("kthvalue", (input,), {"k": int(k), "dim": d, "keepdim": bool(keepdim)})
    return _Kth(v, i)


def median(input, dim=None, keepdim=False):
    """The lower median of all elements, or ``(values, indices)`` along ``dim``.

    NaN propagates: a row holding NaN has median NaN.

    Examples
    --------
    >>> import torcia
    >>> torcia.median(torcia.tensor([4.0, 1.0, 3.0, 2.0]))
    tensor(2.)
    """
    if dim is None:
        if input.numel() == 0:
            from torcia._creation import full

            return full((), float("nan"), dtype=input.dtype, device=input.device)
        flat = reshape(input, (-1,))
        value = call("median_dim", (flat,), {"dim": 0, "keepdim": False})[0]
        if not (input._requires_grad and _GRAD.enabled):
            return value
        # PyTorch spreads the gradient evenly over the elements equal to the median (NaN
        # ones, when it is NaN): value + sum((x - value) * tied) / count is value exactly,
        # as x - value is 0 where tied, and its derivative is tied / count
        value = value.detach()
        tied = isnan(flat) if bool(isnan(value)) else flat == value
        return value + where(tied, flat - value, 0).sum() / tied.sum()
    d = _wrap_dim(dim, input.ndim)
    _nonempty_dim(input, d, "median")
    v, i = _along_dim("median_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Median(v, i)


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest among ties) and its last index.

    Examples
    --------
    >>> import torcia
    >>> torcia.mode(torcia.tensor([1, 3, 3, 1, 2])).values
    tensor(1)
    """
    d = _wrap_dim(dim, input.ndim)
    _nonempty_dim(input, d, "mode")
    v, i = _along_dim("mode_dim", (input,), {"dim": d, "keepdim": bool(keepdim)})
    return _Mode(v, i)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The sorted unique elements (or slices along ``dim``), optionally with the inverse
    indices and the counts.

    Examples
    --------
    >>> import torcia
    >>> torcia.unique(torcia.tensor([3, 1, 3]), return_counts=True)
    (tensor([1, 3]), tensor([1, 2]))
    """
    d = None if dim is None else _wrap_dim(dim, input.ndim)
    values, inverse, counts = call("unique", (input,), {"dim": d})
    out = (values,) + ((inverse,) if return_inverse else ()) + (
        (counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def nonzero(input, *, as_tuple=False):
    """Indices of the nonzero elements: an ``(n, ndim)`` int64 tensor, or one index tensor
    per dim with ``as_tuple``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nonzero(torcia.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    idx = call("nonzero", (input,), {})
    if not as_tuple:
        return idx
    if input.ndim == 0:
        return (idx.reshape(-1),)
    return tuple(idx[:, j] for j in range(input.ndim))


def argwhere(input):
    """As ``nonzero(input)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.argwhere(torcia.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    return nonzero(input)


def masked_select(input, mask):
    """The elements of ``input`` where the bool ``mask`` (broadcast) is True, as 1-D.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, -2], [-3, 4]])
    >>> torcia.masked_select(x, x > 0)
    tensor([1, 4])
    """
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype.name}")
    _broadcast_check(input.shape, mask.shape)
    return call("masked_select", (input, mask), {})


def _broadcast_check(a, b):
    for i, (x, y) in enumerate(zip(reversed(a), reversed(b))):
        if x != y and x != 1 and y != 1:
            dim = max(len(a), len(b)) - 1 - i
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension {dim}")


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Indices where ``input`` would be inserted into the innermost dim of
    ``sorted_sequence`` to keep it sorted (``right`` or ``side="right"``: after equals).

    Examples
    --------
    >>> import torcia
    >>> torcia.searchsorted(torcia.tensor([1, 3, 5]), torcia.tensor([3, 4]))
    tensor([1, 2])
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"we got '{side}'")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites")
        right = side == "right"
    if not isinstance(input, Tensor):
        from torcia._creation import tensor

        input = tensor(input, dtype=sorted_sequence.dtype, device=sorted_sequence.device)
    if sorter is not None:
        sorted_sequence = take_along_dim(sorted_sequence, sorter, -1)
    seq_shape, val_shape = tuple(sorted_sequence.shape), tuple(input.shape)
    if len(seq_shape) > 1 and seq_shape[:-1] != val_shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq_shape)} and input value tensor {list(val_shape)}")
    dt = D.promote_types(sorted_sequence.dtype, input.dtype)
    return call("searchsorted", (to_dtype(sorted_sequence, dt), to_dtype(input, dt)),
                {"right": bool(right), "out_int32": bool(out_int32)})


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element of ``input`` among the 1-D sorted ``boundaries``.

    Examples
    --------
    >>> import torcia
    >>> torcia.bucketize(torcia.tensor([0.5, 1.0, 2.5]), torcia.tensor([1.0, 2.0]))
    tensor([0, 0, 2])
    """
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def bincount(input, weights=None, minlength=0):
    """Count the occurrences of each value in a 1-D tensor of non-negative integers
    (summing ``weights`` instead when given).

    Examples
    --------
    >>> import torcia
    >>> torcia.bincount(torcia.tensor([0, 2, 2]))
    tensor([1, 0, 2])
    """
    if input.ndim != 1 or input.dtype.category != 1 or (
        input.numel() and int(input._data.min()) < 0
    ):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    return call("bincount", (input, weights), {"minlength": int(minlength)})


def histc(input, bins=100, min=0, max=0):
    """Histogram of ``bins`` equal-width bins over [min, max] (the data's range when both
    are 0); elements outside are ignored.

    Examples
    --------
    >>> import torcia
    >>> torcia.histc(torcia.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {min} "
                           f"max {max}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"torch.histc: input tensor must be of floating point dtype, got "
                           f"{input.dtype.name}")
    return call("histc", (input,), {"bins": int(bins), "min": float(min), "max": float(max)})


# ----- scans ------------------------------------------------------------------------------


def cummax(input, dim):
    """Running maximum along ``dim`` and the index where it was reached.

    Examples
    --------
    >>> import torcia
    >>> torcia.cummax(torcia.tensor([1, 3, 2, 5]), dim=0)
    torcia.return_types.cummax(
    values=tensor([1, 3, 3, 5]),
    indices=tensor([0, 1, 1, 3]))
    """
    d = _wrap_dim(dim, input.ndim)
    return _Cummax(*_along_dim("cummax", (input,), {"dim": d}))


def cummin(input, dim):
    """Running minimum along ``dim`` and the index where it was reached.

    Examples
    --------
    >>> import torcia
    >>> torcia.cummin(torcia.tensor([4, 2, 3, 1]), dim=0)
    torcia.return_types.cummin(
    values=tensor([4, 2, 2, 1]),
    indices=tensor([0, 1, 1, 3]))
    """
    d = _wrap_dim(dim, input.ndim)
    return _Cummin(*_along_dim("cummin", (input,), {"dim": d}))


def logcumsumexp(input, dim):
    """``log(cumsum(exp(input)))`` along ``dim``, without overflow.

    Examples
    --------
    >>> import torcia
    >>> torcia.logcumsumexp(torcia.tensor([0.0, 0.0, 1000.0]), dim=0)
    tensor([0.0000e+00, 6.9315e-01, 1.0000e+03])
    """
    input = _to_float(input)
    d = _wrap_dim(dim, input.ndim)
    return _along_dim("logcumsumexp", (input,), {"dim": d})


# ----- scatter, pad, diagonals -------------------------------------------------------------

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Reduce ``src`` into a copy of ``input`` at ``index`` along ``dim`` with ``reduce``
    ("sum", "prod", "mean", "amax" or "amin"); ``include_self`` counts input's own values.

    Examples
    --------
    >>> import torcia
    >>> torcia.scatter_reduce(torcia.zeros(2), 0, torcia.tensor([0, 0, 1]),
    ...                       torcia.tensor([1.0, 2.0, 3.0]), "amax")
    tensor([2., 3.])
    """
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = _wrap_dim(dim, input.ndim)
    _index_tensor(index, "scatter_reduce")
    _check_range(index._data, _size_at(input, d), d, RuntimeError)
    if src.dtype is not input.dtype:
        raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype, got "
                           f"{input.dtype.name} and {src.dtype.name}")
    return call("scatter_reduce", (input, index, src),
                {"dim": d, "reduce": reduce, "include_self": bool(include_self)})


def pad(input, pad, mode="constant", value=None):
    """Pad ``input`` as ``torch.nn.functional.pad``: ``pad`` lists (left, right) amounts
    from the last dim backwards; ``mode`` is "constant" (with ``value``, negative amounts
    crop), "reflect", "replicate" or "circular".

    Examples
    --------
    >>> import torcia
    >>> from torcia._ops_extra import pad
    >>> pad(torcia.tensor([[1, 2]]), (1, 0), value=9)
    tensor([[9, 1, 2]])
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {input.ndim}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant":
        if value not in (None, 0):
            raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
        for i in range(len(pad) // 2):
            d = input.ndim - 1 - i
            size, lo, hi = input.shape[d], pad[2 * i], pad[2 * i + 1]
            too_big = (lo >= size or hi >= size) if mode == "reflect" else (
                (lo > size or hi > size) if mode == "circular" else size == 0)
            if too_big or min(lo, hi) < 0:
                raise RuntimeError(
                    f"Argument #4: Padding size should be less than the corresponding input "
                    f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of input "
                    f"{list(input.shape)}")
    else:
        for i in range(len(pad) // 2):
            # negative amounts crop first (PyTorch narrows by them), and no crop may pass
            # the dim's size
            size = input.shape[input.ndim - 1 - i] + min(pad[2 * i], 0)
            if size < 0 or size + min(pad[2 * i + 1], 0) < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
    params = {"pad": pad, "mode": mode, "value": 0 if value is None else value}
    if mode in _PAD_AUTOCAST:
        return _PAD_AUTOCAST[mode](input, params)
    return call("pad", (input,), params)


def _pad(input, params):
    return call("pad", (input,), params)


# PyTorch's autocast runs reflection and replication padding in float32, constant and
# circular padding (composites there) in the input's dtype
_PAD_AUTOCAST = {"reflect": autocast_as("reflection_pad")(_pad),
                 "replicate": autocast_as("replication_pad")(_pad)}


def diag(input, diagonal=0):
    """A 1-D input as the ``diagonal``-th diagonal of a square matrix; a 2-D input's
    ``diagonal``-th diagonal as 1-D.

    Examples
    --------
    >>> import torcia
    >>> torcia.diag(torcia.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    if input.ndim not in (1, 2):
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")
    return call("diag", (input,), {"diagonal": int(diagonal)})


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Put the last dim of ``input`` on the ``offset`` diagonals of new 2-D planes
    spanning dims ``dim1`` and ``dim2`` of the result.

    Examples
    --------
    >>> import torcia
    >>> torcia.diag_embed(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[[1, 0],
             [0, 2]],
    <BLANKLINE>
            [[3, 0],
             [0, 4]]])
    """
    n = input.ndim + 1
    d1, d2 = _wrap_dim(dim1, n), _wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return call("diag_embed", (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


# ----- the top-level linear algebra names of PyTorch -----------------------------------------


def det(input):
    """The determinant of each square matrix (as :func:`torcia.linalg.det`).

    Examples
    --------
    >>> import torcia
    >>> torcia.det(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(-2.)
    """
    from torcia import linalg

    return linalg.det(input)


def slogdet(input):
    """``(sign, logabsdet)`` of the determinant (as :func:`torcia.linalg.slogdet`).

    Examples
    --------
    >>> import torcia
    >>> torcia.slogdet(torcia.tensor([[-2.0, 0.0], [0.0, 3.0]]))
    torcia.return_types.linalg_slogdet(
    sign=tensor(-1.),
    logabsdet=tensor(1.7918))
    """
    from torcia import linalg

    return linalg.slogdet(input)


def logdet(input):
    """``log(det(input))``: NaN for a negative determinant, -inf for a zero one.

    Examples
    --------
    >>> import torcia
    >>> torcia.logdet(torcia.eye(2) * 3)
    tensor(2.1972)
    """
    import numpy as np

    from torcia._ops import log

    sign, logabs = slogdet(input)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) and log(-1) are the point
        return logabs + log(sign)


def inverse(input):
    """The inverse of each square matrix (as :func:`torcia.linalg.inv`).

    Examples
    --------
    >>> import torcia
    >>> torcia.inverse(torcia.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    from torcia import linalg

    return linalg.inv(input)


def pinverse(input, rcond=1e-15):
    """The pseudo-inverse, singular values below ``rcond * max`` dropped.

    Examples
    --------
    >>> import torcia
    >>> torcia.pinverse(torcia.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    """
    from torcia import linalg

    return linalg.pinv(input, rtol=rcond)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows of ``input`` (variables x observations; a 1-D input is one
    variable), with optional integer frequency and float observation weights, as
    ``numpy.cov``/PyTorch.

    Examples
    --------
    >>> import torcia
    >>> torcia.cov(torcia.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    if input.ndim > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if x.dtype is D.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = _to_float(x)  # complex inputs keep their imaginary part
    n = x.shape[1]
    w = None
    for name, weights in (("fweights", fweights), ("aweights", aweights)):
        if weights is None:
            continue
        if weights.ndim > 1 or weights.numel() != n:
            raise RuntimeError(f"cov(): expected {name} to have one dimension and the same "
                               f"number of elements as the observations ({n}), but got "
                               f"{list(weights.shape)}")
        if name == "fweights" and weights.is_floating_point():
            raise RuntimeError("cov(): expected fweights to have integral dtype")
        if bool((weights < 0).any()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        weights = weights.to(x.dtype)
        w = weights if w is None else w * weights
    if w is None:
        avg = x.mean(1, keepdim=True)
        norm = n - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1, keepdim=True) / w_sum
        if aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights.to(x.dtype)).sum() / w_sum
    xm = x - avg
    weighted = xm if w is None else xm * w
    if isinstance(norm, (int, float)):
        norm = max(norm, 0)
    else:
        norm = norm.clamp(min=0)
    out = (weighted @ xm.mH) / norm  # conjugated: a complex covariance is Hermitian
    # one variable (a 1-D input, or a single row): its variance, 0-d as PyTorch
    return out.reshape(()) if x.shape[0] == 1 else out


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input``, clipped to [-1, 1].

    Examples
    --------
    >>> import torcia
    >>> torcia.corrcoef(torcia.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    out = c / std.unsqueeze(1) / std.unsqueeze(0)
    if out.is_complex():
        # clipped part by part, as PyTorch
        return _complex_of(out.real.clamp(-1, 1), out.imag.clamp(-1, 1))
    return out.clamp(-1, 1)


METHODS = ("sort", "argsort", "msort", "topk", "kthvalue", "median", "mode", "unique",
           "nonzero", "argwhere", "masked_select", "bincount", "histc", "cummax", "cummin",
           "logcumsumexp", "scatter_reduce", "diag", "diag_embed", "det", "slogdet", "logdet",
           "inverse", "pinverse", "cov", "corrcoef")
INPLACE = ("scatter_reduce",)

__all__ = list(METHODS) + ["searchsorted", "bucketize"]
