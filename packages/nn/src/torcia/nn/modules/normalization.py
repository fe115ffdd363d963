"""Normalisation layers: ``BatchNorm1d/2d/3d``, ``InstanceNorm1d/2d``, ``LayerNorm``,
``GroupNorm``."""

from __future__ import annotations

import numbers

import torcia
from torcia import empty, ones, tensor, zeros
from torcia.nn import functional as F
from torcia.nn import init
from torcia.nn.modules._utils import shape_error, shape_of
from torcia.nn.modules.module import Module
from torcia.nn.parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "LayerNorm"]


def _affine_parameters(module, shape, weight: bool, bias: bool, device, dtype) -> None:
    """Register ``weight`` and ``bias`` of ``shape`` (None where absent), uninitialised."""
    for name, wanted in (("weight", weight), ("bias", bias)):
        if wanted:
            module.register_parameter(name, Parameter(empty(shape, device=device, dtype=dtype)))
        else:
            module.register_parameter(name, None)


def _reset_affine(module) -> None:
    """Scale by one and shift by zero: the normalisation layers' initial affine map."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _BatchNorm(Module):
    """Batch normalisation over dimension 1, with running statistics.

    In training mode each batch is normalised with its own mean and (biased) variance, and
    the running estimates are updated with the unbiased variance:
    ``running = (1 - momentum) * running + momentum * batch``; ``momentum=None`` makes it a
    cumulative average over ``num_batches_tracked`` batches. In eval mode the running
    estimates are used (the batch's own when ``track_running_stats=False``).
    """

    _dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self._bias = affine and bias
        _affine_parameters(self, num_features, affine, self._bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device,
                                                       dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=torcia.int64,
                                                               device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input) -> None:
        dims = len(shape_of(input, "batch_norm"))
        if dims not in self._dims:
            allowed = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {allowed} input (got {dims}D input)")
        if input.shape[1] != self.num_features:
            raise shape_error(self, f"input with {self.num_features} channels in dimension 1",
                              input)

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self._bias}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)`` inputs over each channel.

    Parameters
    ----------
    num_features : int
        ``C``.
    eps : float
        Added to the variance. Default: 1e-5.
    momentum : float or None
        Weight of the new batch in the running estimates; None for a cumulative average.
        Default: 0.1.
    affine : bool
        Learnable scale (ones) and shift (zeros). Default: True.
    track_running_stats : bool
        Keep running estimates for eval mode. Default: True.

    Examples
    --------
    >>> import torcia
    >>> bn = torcia.nn.BatchNorm1d(2)
    >>> y = bn(torcia.tensor([[1.0, 10.0], [3.0, 30.0]]))
    >>> y.detach().round(decimals=3)
    tensor([[-1., -1.],
            [ 1.,  1.]])
    >>> bn.running_mean
    tensor([0.2000, 2.0000])
    """

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` inputs over each channel (see
    :class:`BatchNorm1d` for the arguments).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.BatchNorm2d(3)(torcia.randn(4, 3, 5, 5)).shape
    torcia.Size([4, 3, 5, 5])
    """

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)`` inputs over each channel (see
    :class:`BatchNorm1d` for the arguments).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.BatchNorm3d(3)(torcia.randn(2, 3, 2, 2, 2)).shape
    torcia.Size([2, 3, 2, 2, 2])
    """

    _dims = (5,)


class _InstanceNorm(_BatchNorm):
    """Normalisation of each sample and channel over its spatial dimensions; by default
    without affine parameters or running statistics (``track_running_stats=True`` keeps
    them for eval mode, as in :class:`BatchNorm1d`)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):
        dims = len(shape_of(input, "instance_norm"))
        if dims not in self._dims:
            allowed = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {allowed} input (got {dims}D input)")
        unbatched = dims == self._dims[0]
        if unbatched:
            input = input.unsqueeze(0)
        if self.affine and input.shape[1] != self.num_features:
            raise shape_error(self, f"input with {self.num_features} channels in the channel "
                                    "dimension", input)
        use_input_stats = self.training or not self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum
        out = F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                              self.bias, use_input_stats, momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` or ``(C, L)`` inputs.

    Examples
    --------
    >>> import torcia
    >>> y = torcia.nn.InstanceNorm1d(2)(torcia.tensor([[[1.0, 3.0], [0.0, 10.0]]]))
    >>> y.round(decimals=3)
    tensor([[[-1.,  1.],
             [-1.,  1.]]])
    """

    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` or ``(C, H, W)`` inputs.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.InstanceNorm2d(3, affine=True)(torcia.randn(2, 3, 4, 4)).shape
    torcia.Size([2, 3, 4, 4])
    """

    _dims = (3, 4)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dimensions of each sample, then
    scale (ones) and shift (zeros) elementwise.

    Examples
    --------
    >>> import torcia
    >>> ln = torcia.nn.LayerNorm(4)
    >>> ln
    LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)
    >>> y = ln(torcia.tensor([[1.0, 2.0, 3.0, 4.0]]))
    >>> round(float(y.mean()), 6), round(float(y.pow(2).mean()), 3)
    (0.0, 1.0)
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine,
                           elementwise_affine and bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        n = len(self.normalized_shape)
        shape_of(input, "layer_norm")
        if tuple(input.shape[input.dim() - n:]) != self.normalized_shape or input.dim() < n:
            dims = ", ".join(map(str, self.normalized_shape))
            raise shape_error(self, f"input of shape [*, {dims}]", input)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalise ``(N, C, *)`` inputs over groups of ``C // num_groups`` channels (and every
    other dimension), then scale and shift per channel.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.GroupNorm(2, 4)(torcia.randn(3, 4, 5)).shape
    torcia.Size([3, 4, 5])
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, num_channels, affine, affine and bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        if len(shape_of(input, "group_norm")) < 2 or input.shape[1] != self.num_channels:
            raise shape_error(self, f"input of shape [N, {self.num_channels}, *]", input)
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.InstanceNorm3d(2)(torcia.randn(1, 2, 3, 3, 3)).shape
    torcia.Size([1, 2, 3, 3, 3])
    """

    _dims = (4, 5)


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dimensions:
    ``x / sqrt(mean(x**2) + eps) * weight``; ``eps`` None means the dtype's ``finfo.eps``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.RMSNorm(2)(torcia.tensor([[3.0, 4.0]])).detach().round(decimals=4)
    tensor([[0.8485, 1.1314]])
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine: bool = True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, device=device,
                                         dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """Normalise each channel by the summed squares of its ``size`` neighbouring channels.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LocalResponseNorm(2)(torcia.ones(1, 4, 2, 2)).shape
    torcia.Size([1, 4, 2, 2])
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """Local response normalisation across channels of a 4-D input, PyTorch's legacy
    (Lua Torch) form: ``x / (k + alpha / size * S) ** beta`` with ``S`` a running sum of
    squares over channels.

    The channel window is Lua Torch's, reproduced exactly: channel ``c`` sums the squares
    of channels ``0 .. c + p - 1`` (``p = (size - 1) // 2 + 1``), less those of channels
    ``1 .. c - p`` (channel 0 is never dropped), which is wider than the centred window of
    :class:`LocalResponseNorm` from channel ``p`` on. PyTorch's hand-written backward is not
    the derivative of that forward (its own ``gradcheck`` fails); torcia's gradient is.

    Parameters
    ----------
    size : int
    alpha : float, default 1e-4
    beta : float, default 0.75
    k : float, default 1

    Examples
    --------
    >>> import torcia
    >>> lrn = torcia.nn.CrossMapLRN2d(3, alpha=1.0, beta=1.0, k=1.0)
    >>> [round(v, 4) for v in lrn(torcia.ones(1, 2, 1, 1)).reshape(-1).tolist()]
    [0.6, 0.6]
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D "
                             "instead.")
        channels = input.shape[1]
        square = input * input
        running = square.cumsum(1)
        p = (self.size - 1) // 2 + 1
        upper = [min(c + p - 1, channels - 1) for c in range(channels)]
        total = running[:, upper]
        if channels > p + 1:
            # channels c > p drop 1 .. c - p (Lua Torch's window never drops channel 0)
            dropped = running[:, 1:channels - p] - square[:, :1]
            total = torcia.cat([total[:, :p + 1], total[:, p + 1:] - dropped], 1)
        scale = total * (self.alpha / self.size) + self.k
        return input * scale ** -self.beta

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
