"""Parameter initialisation: ``torcia.nn.init``.

Every function fills its tensor in place without recording gradients and returns it; the
random ones take ``generator=`` (the default generator otherwise). The formulas are
PyTorch's, so a torcia layer starts with the same distribution of weights as its PyTorch
counterpart (not the same values: the random streams differ).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from torcia import Tensor, no_grad
from torcia import tensor as _tensor
from torcia.random import rng_of

__all__ = [
    "calculate_gain", "constant_", "dirac_", "eye_", "kaiming_normal_", "kaiming_uniform_",
    "normal_", "ones_", "orthogonal_", "trunc_normal_", "uniform_", "xavier_normal_",
    "xavier_uniform_", "zeros_", "sparse_", "uniform", "normal", "constant", "eye", "dirac",
    "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal",
    "sparse",
]

_LINEAR_LIKE = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity, as PyTorch defines it.

    ========================= ===========================================
    nonlinearity              gain
    ========================= ===========================================
    linear, conv*, sigmoid    1
    tanh                      5/3
    relu                      sqrt(2)
    leaky_relu                sqrt(2 / (1 + negative_slope**2))
    selu                      3/4
    ========================= ===========================================

    ``param`` is leaky_relu's negative slope (default 0.01).

    Examples
    --------
    >>> from torcia.nn import init
    >>> init.calculate_gain("leaky_relu", 0.2)
    1.3867504905630728
    """
    if nonlinearity in _LINEAR_LIKE or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)``: input and output feature counts of a weight, times the
    receptive field (the product of the dimensions after the first two)."""
    if tensor.dim() < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive_field = 1
    for s in tensor.shape[2:]:
        receptive_field *= s
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        tensor.copy_(_tensor(values.astype(np.float64), device=tensor.device))
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with samples of U(a, b).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.nn.init.uniform_(torcia.empty(3, 5), -1, 1)
    >>> bool((w.abs() <= 1).all())
    True
    """
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with samples of N(mean, std²).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.init.normal_(torcia.empty(2, 2), std=0.02).shape
    torcia.Size([2, 2])
    """
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with samples of N(mean, std²) conditioned on lying in [a, b].

    Examples
    --------
    >>> import torcia
    >>> w = torcia.nn.init.trunc_normal_(torcia.empty(100), std=1.0, a=-0.5, b=0.5)
    >>> bool(((w >= -0.5) & (w <= 0.5)).all())
    True
    """
    if not a < b:
        raise ValueError(f"trunc_normal_ expects a < b, got a={a}, b={b}")
    rng = rng_of(generator)
    n = tensor.numel()
    out = np.empty(n)
    filled = 0
    # rejection keeps the exact conditional distribution; it stops quickly unless [a, b]
    # lies far in a tail, where inverse-CDF sampling would lose precision anyway
    while filled < n:
        draw = rng.normal(mean, std, max(2 * (n - filled), 16))
        draw = draw[(draw >= a) & (draw <= b)][: n - filled]
        out[filled:filled + draw.size] = draw
        filled += draw.size
    return _write(tensor, out.reshape(tuple(tensor.shape)))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.init.constant_(torcia.empty(2), 0.5)
    tensor([0.5000, 0.5000])
    """
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.init.ones_(torcia.empty(2))
    tensor([1., 1.])
    """
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.init.zeros_(torcia.empty(2))
    tensor([0., 0.])
    """
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the main diagonal).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.init.eye_(torcia.empty(2, 3))
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tuple(tensor.shape)))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D convolution weight so that the convolution is the identity
    (per group), keeping as many input channels as possible.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.nn.init.dirac_(torcia.empty(2, 2, 3))
    >>> w[:, :, 1]
    tensor([[1., 0.],
            [0., 1.]])
    """
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    values = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min_dim):
            values[(g * out_per_group + d, d) + centre] = 1
    return _write(tensor, values)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.nn.init.xavier_uniform_(torcia.empty(3, 5))
    >>> bool((w.abs() <= (6 / 8) ** 0.5).all())
    True
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std²) with ``std = gain * sqrt(2 / (fan_in + fan_out))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.init.xavier_normal_(torcia.empty(3, 5)).shape
    torcia.Size([3, 5])
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He uniform: U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``, where ``gain`` is
    :func:`calculate_gain` of ``nonlinearity`` (``a`` is leaky_relu's slope) and ``fan`` is
    fan_in or fan_out after ``mode``.

    Examples
    --------
    >>> import math, torcia
    >>> w = torcia.nn.init.kaiming_uniform_(torcia.empty(4, 6), a=math.sqrt(5))
    >>> bool((w.abs() <= 1 / math.sqrt(6)).all())
    True
    """
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He normal: N(0, std²) with ``std = gain / sqrt(fan)`` (see :func:`kaiming_uniform_`).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.init.kaiming_normal_(torcia.empty(4, 6), nonlinearity="relu").shape
    torcia.Size([4, 6])
    """
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (the dimensions after the first flattened),
    scaled by ``gain``: the QR factor of a Gaussian matrix with its signs fixed so that the
    result is uniformly distributed.

    Examples
    --------
    >>> import torcia
    >>> q = torcia.nn.init.orthogonal_(torcia.empty(3, 3))
    >>> bool(((q @ q.T - torcia.eye(3)).abs() < 1e-5).all())
    True
    """
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = rng_of(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q.reshape(tuple(tensor.shape)))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fill a 2-D ``tensor`` from ``N(0, std)`` and zero a ``sparsity`` fraction of each
    column (Martens, 2010).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.nn.init.sparse_(torcia.empty(10, 3), sparsity=0.3)
    >>> [int((w[:, j] == 0).sum()) for j in range(3)]
    [3, 3, 3]
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    normal_(tensor, 0.0, std, generator=generator)
    if num_zeros == 0:
        return tensor
    with no_grad():
        for col in range(cols):
            zero_rows = rng_of(generator).permutation(rows)[:num_zeros].tolist()
            tensor[zero_rows, col] = 0
    return tensor


def _deprecated(name, new, example_args="", shape="2, 2"):
    def old(*args, **kwargs):
        warnings.warn(f"`nn.init.{name}` is now deprecated in favor of "
                      f"`nn.init.{new.__name__}`.", FutureWarning, stacklevel=2)
        return new(*args, **kwargs)

    old.__name__ = name
    old.__doc__ = (
        f"Deprecated alias of :func:`{new.__name__}` (warns), as in PyTorch.\n\n"
        "Examples\n--------\n>>> import warnings\n>>> import torcia\n"
        f">>> w = torcia.empty({shape})\n"
        ">>> with warnings.catch_warnings(record=True) as caught:\n"
        '...     warnings.simplefilter("always")\n'
        f"...     out = torcia.nn.init.{name}(w{example_args})\n"
        ">>> print(caught[0].message)\n"
        f"`nn.init.{name}` is now deprecated in favor of `nn.init.{new.__name__}`.\n"
        ">>> out is w\nTrue\n")
    return old


# PyTorch's pre-0.4 names, kept as deprecated aliases so old code runs
uniform = _deprecated("uniform", uniform_)
normal = _deprecated("normal", normal_)
constant = _deprecated("constant", constant_, ", 0.5")
eye = _deprecated("eye", eye_)
dirac = _deprecated("dirac", dirac_, shape="2, 2, 3")
xavier_uniform = _deprecated("xavier_uniform", xavier_uniform_)
xavier_normal = _deprecated("xavier_normal", xavier_normal_)
kaiming_uniform = _deprecated("kaiming_uniform", kaiming_uniform_)
kaiming_normal = _deprecated("kaiming_normal", kaiming_normal_)
orthogonal = _deprecated("orthogonal", orthogonal_)
sparse = _deprecated("sparse", sparse_, ", 0.5")
