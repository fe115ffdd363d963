"""Helpers shared by the distributions, as ``torch.distributions.utils``."""

from __future__ import annotations

import functools
import numbers

import numpy as np

import torcia

__all__ = [
    "broadcast_all", "clamp_probs", "finfo", "lazy_property", "logits_to_probs",
    "probs_to_logits", "tril_matrix_to_vec", "vec_to_tril_matrix",
]


class finfo:  # noqa: N801 - torch.finfo's name
    """Machine limits of a floating dtype: ``eps``, ``tiny``, ``max``, ``min``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import finfo
    >>> finfo(torcia.float32).eps == torcia.finfo(torcia.float32).eps
    True
    """

    def __init__(self, dtype):
        info = np.finfo(dtype.to_numpy())
        self.eps = float(info.eps)
        self.tiny = float(info.tiny)
        self.max = float(info.max)
        self.min = float(info.min)
        self.resolution = float(info.resolution)


def broadcast_all(*values):
    """Broadcast tensors and numbers to one shape; numbers become tensors of the tensors'
    dtype (or of the default dtype).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import broadcast_all
    >>> a, b = broadcast_all(torcia.zeros(3), 1.0)
    >>> tuple(b.shape), b.dtype
    ((3,), torcia.float32)
    """
    if not all(isinstance(v, torcia.Tensor) or isinstance(v, numbers.Number) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "torcia.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, torcia.Tensor) for v in values):
        options = {"dtype": torcia.get_default_dtype()}
        for value in values:
            if isinstance(value, torcia.Tensor):
                options = {"dtype": value.dtype, "device": value.device}
                break
        values = [v if isinstance(v, torcia.Tensor) else torcia.tensor(v, **options)
                  for v in values]
    return torcia.broadcast_tensors(*values)


def _sum_rightmost(value, dim: int):
    """Sum out the ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    required_shape = tuple(value.shape[:value.dim() - dim]) + (-1,)
    return value.reshape(required_shape).sum(-1)


def logits_to_probs(logits, is_binary: bool = False):
    """Logits to probabilities: a sigmoid for binary logits, a softmax otherwise.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import logits_to_probs
    >>> logits_to_probs(torcia.tensor([0.0, 0.0]))
    tensor([0.5000, 0.5000])
    >>> logits_to_probs(torcia.tensor([0.0, 2.0]), is_binary=True)
    tensor([0.5000, 0.8808])
    """
    if is_binary:
        return torcia.sigmoid(logits)
    return torcia.softmax(logits, dim=-1)


def clamp_probs(probs):
    """Clamp probabilities into the open interval (0, 1) by the dtype's eps.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import clamp_probs
    >>> p = clamp_probs(torcia.tensor([0.0, 0.5, 1.0]))
    >>> bool((p > 0).all() and (p < 1).all())
    True
    """
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary: bool = False):
    """Probabilities to logits: log-odds for binary probabilities, logs otherwise.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import probs_to_logits
    >>> probs_to_logits(torcia.tensor([0.5, 0.25]), is_binary=True)
    tensor([ 0.0000, -1.0986])
    """
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return torcia.log(ps_clamped) - torcia.log1p(-ps_clamped)
    return torcia.log(ps_clamped)


class lazy_property:  # noqa: N801 - torch's name
    """A property computed once per instance on first access (the ``probs`` or ``logits``
    that a distribution was not built from).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import lazy_property
    >>> class Thing:
    ...     calls = 0
    ...     @lazy_property
    ...     def value(self):
    ...         Thing.calls += 1
    ...         return 42
    >>> thing = Thing()
    >>> thing.value, thing.value, Thing.calls
    (42, 42, 1)
    """

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with torcia.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):  # noqa: N801
    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def tril_matrix_to_vec(mat, diag: int = 0):
    """The lower triangle (from diagonal ``diag``) of the last two dims, row by row.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import tril_matrix_to_vec
    >>> tril_matrix_to_vec(torcia.tensor([[1, 0], [2, 3]]))
    tensor([1, 2, 3])
    """
    n = mat.shape[-1]
    if not -n <= diag < n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = np.tril_indices(n, k=diag)
    return mat[..., torcia.tensor(rows), torcia.tensor(cols)]


def vec_to_tril_matrix(vec, diag: int = 0):
    """The inverse of :func:`tril_matrix_to_vec`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions.utils import vec_to_tril_matrix
    >>> vec_to_tril_matrix(torcia.tensor([1.0, 2.0, 3.0]))
    tensor([[1., 0.],
            [2., 3.]])
    """
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1] + 4 * abs(diag)
                            * (diag + 1)) ** 0.5) / 2
    eps = finfo(vec.dtype).eps
    if not round(n) - n < eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be "
                         "expressed as the lower triangular part of a square D x D matrix.")
    n = round(n)
    rows, cols = np.tril_indices(n, k=diag)
    flat = rows * n + cols
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n * n,))
    index = torcia.tensor(flat).expand(tuple(vec.shape[:-1]) + (len(flat),))
    mat = mat.scatter(-1, index, vec)
    return mat.reshape(tuple(vec.shape[:-1]) + (n, n))
