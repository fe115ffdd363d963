"""The other neural-network functions at ``torcia.*``: the dropout family. The pixel and
channel shuffles are written in :mod:`torcia._ops.movement`, ``cosine_similarity``,
``pairwise_distance`` and ``bilinear`` in :mod:`torcia._ops.linalg`.
"""

from __future__ import annotations

import warnings

from torcia import _tensor
from torcia._ops import creation
from torcia._ops.random import draw, drawing
from torcia._tensor import Tensor, inplace
from torcia.random import rng_of


def _check_p(p):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_mask(input, shape, p):
    dev = input._device
    if not _tensor._modes_on:  # the no-mode path: draw's, without its call
        return Tensor._make(drawing(dev, "dropout_mask")(
            shape=tuple(shape), p=float(p), dtype=input._data.dtype, rng=rng_of(None)), dev)
    # through dispatch: vmap batches the mask, torcia.compile replays a fresh draw
    return draw("dropout_mask", dev, (), {"shape": tuple(shape), "p": float(p),
                                          "dtype": input._data.dtype, "rng": rng_of(None)})


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (training only; the default generator draws, so ``torcia.manual_seed`` repeats it).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(4)
    >>> from torcia._oplib.nn import dropout
    >>> dropout(x, 0.5, training=False)
    tensor([1., 1., 1., 1.])
    """
    _check_p(p)
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0
    else:
        out = input * _dropout_mask(input, input.shape, p)
    if inplace:
        return _write(input, out)
    return out


def _write(input, out):
    return inplace(lambda t: out, input)


def _feature_dropout(input, p, training, inplace_, batched_ndim, fn):
    _check_p(p)
    if not training or p == 0:
        return input
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise ValueError(f"{fn}: Received a {input.ndim}-D input, expected "
                         f"{batched_ndim - 1}-D (unbatched) or {batched_ndim}-D (batched)")
    lead = 2 if input.ndim == batched_ndim else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    out = input * 0 if p == 1 else input * _dropout_mask(input, shape, p)
    return _write(input, out) if inplace_ else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``input`` (N, C, L) or (C, L) with probability ``p``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.ones(1, 2, 3)
    >>> F.dropout1d(x, 0.5, training=False).equal(x)
    True
    """
    return _feature_dropout(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``input`` (N, C, H, W) with probability ``p``, scaling the
    rest by ``1 / (1 - p)``.

    Other ranks behave as in PyTorch, with its warnings: a 3-D input is read as (N, C, L)
    (channel-wise 1-D dropout, not an unbatched image), a 2-D one as (N, C), which drops
    single elements.

    Examples
    --------
    >>> import torcia
    >>> from torcia.library import functional
    >>> functional.dropout2d(torcia.ones(1, 2, 3, 3), p=0.0).sum().item()
    18.0
    """
    ndim = input.ndim
    if ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {ndim}-D input to dropout2d, which is deprecated and will "
            "result in an error in a future release. To retain the behavior and silence this "
            "warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 3D or 4D inputs).", stacklevel=2)
    if ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret "
            "the input as one without a batch dimension, i.e. shape (C, H, W). To maintain "
            "the 1D channel-wise dropout behavior, please switch to using dropout1d "
            "instead.", stacklevel=2)
    if ndim < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, "
                           f"got {ndim}")
    # PyTorch's feature dropout: one draw per (dim 0, dim 1) entry, whatever the rank
    return _feature_dropout(input, p, training, inplace, ndim, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``input`` (N, C, D, H, W) or (C, D, H, W) with probability
    ``p``.

    Other ranks behave as in PyTorch, with its warning: the input is read as unbatched,
    dim 0 being the channels.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.ones(1, 2, 1, 1, 3)
    >>> F.dropout3d(x, 0.5, training=False).equal(x)
    True
    """
    ndim = input.ndim
    if ndim in (4, 5):
        return _feature_dropout(input, p, training, inplace, 5, "dropout3d")
    warnings.warn(
        f"dropout3d: Received a {ndim}-D input to dropout3d, which is deprecated and will "
        "result in an error in a future release. To retain the behavior and silence this "
        "warning, please use dropout instead. Note that dropout3d exists to provide "
        "channel-wise dropout on inputs with 3 spatial dimensions, a channel dimension, and "
        "an optional batch dimension (i.e. 4D or 5D inputs).", stacklevel=2)
    if ndim < 1:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, "
                           f"got {ndim + 1}")
    _check_p(p)
    if not training or p == 0:
        return input
    # PyTorch adds a batch dim of one, so dim 0 holds the channels
    out = _feature_dropout(input.unsqueeze(0), p, training, False, ndim + 1, "dropout3d")
    out = out.squeeze(0)
    return _write(input, out) if inplace else out


def _alpha_dropout(input, p, training, inplace_, shape):
    _check_p(p)
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0
        return _write(input, out) if inplace_ else out
    neg = -1.0507009873554804934193349852946 * 1.6732632423543772848170429916717
    keep = _dropout_mask(input, shape, p) * (1 - p)  # 0 or 1
    a = ((1 - p) * (1 + p * neg * neg)) ** -0.5
    b = -a * neg * p
    out = (input * keep + neg * (1 - keep)) * a + b
    return _write(input, out) if inplace_ else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's zero mean and unit variance: dropped elements become
    SELU's negative saturation value, then an affine map restores the statistics.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, -1.0])
    >>> torcia.alpha_dropout(x, 0.5, training=False)
    tensor([ 1., -1.])
    """
    return _alpha_dropout(input, p, training, inplace, input.shape)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """:func:`alpha_dropout` of whole channels (dim 1) of ``input`` ``(N, C, *)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(1, 2, 3)
    >>> torcia.feature_alpha_dropout(x, 0.5, training=False).equal(x)
    True
    """
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _alpha_dropout(input, p, training, inplace, shape)


def dropout_(input, p=0.5, train=True):
    """In-place :func:`torcia.dropout` (``torch.dropout_(input, p, train)``)."""
    return inplace(dropout, input, p, train)


def alpha_dropout_(input, p=0.5, train=False):
    """In-place :func:`torcia.alpha_dropout`."""
    return inplace(alpha_dropout, input, p, train)


def feature_alpha_dropout_(input, p=0.5, train=False):
    """In-place :func:`torcia.feature_alpha_dropout`."""
    return inplace(feature_alpha_dropout, input, p, train)


def feature_dropout(input, p=0.5, train=True):
    """Dropout of whole feature maps: each ``(sample, channel)`` slice of ``input``
    (at least 2-D: ``N x C x ...``) is zeroed with probability ``p`` and the rest scaled
    by ``1 / (1 - p)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.feature_dropout(torcia.ones(2, 3, 4), 0.5, False).sum().item()
    24.0
    """
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not train or p == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1:
        return input * creation.zeros_like(input)
    noise = creation.empty(*input.shape[:2], *([1] * (input.ndim - 2)), dtype=input.dtype,
                    device=input.device).bernoulli_(1 - p)
    return input * (noise / (1 - p))


def feature_dropout_(input, p=0.5, train=True):
    """In-place :func:`feature_dropout`."""
    return inplace(feature_dropout, input, p, train)


#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = (
    "alpha_dropout", "dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout",
)

#: the names ``torcia`` exports from here
__all__ = [
    "alpha_dropout", "alpha_dropout_", "dropout", "dropout_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "feature_dropout", "feature_dropout_",
]
