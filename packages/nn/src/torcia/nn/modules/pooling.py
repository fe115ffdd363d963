"""Pooling: ``MaxPool1d/2d``, ``AvgPool1d/2d``, ``AdaptiveAvgPool2d``,
``AdaptiveMaxPool2d``."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules._utils import _single, shape_error
from torcia.nn.modules.module import Module

__all__ = ["AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d",
           "MaxPool2d"]


def _check_dims(module, input, n: int, layout: str) -> None:
    if input.dim() not in (n + 1, n + 2):
        raise shape_error(module, f"a {n + 1}-D or {n + 2}-D input ({layout})", input)


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.MaxPool1d(2)(torcia.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    tensor([[[3., 2.]]])
    """

    def forward(self, input):
        _check_dims(self, input, 1, "[N, C, L] or [C, L]")
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling over ``(N, C, H, W)`` or ``(C, H, W)``; ``stride`` defaults to
    ``kernel_size``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    >>> torcia.nn.MaxPool2d(2)(x)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """

    def forward(self, input):
        _check_dims(self, input, 2, "[N, C, H, W] or [C, H, W]")
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AvgPool1d(2)(torcia.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    tensor([[[2., 1.]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        _check_dims(self, input, 1, "[N, C, L] or [C, L]")
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    >>> torcia.nn.AvgPool2d(2)(x)
    tensor([[[[ 2.5000,  4.5000],
              [10.5000, 12.5000]]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        _check_dims(self, input, 2, "[N, C, H, W] or [C, H, W]")
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size ``(H_out, W_out)`` (None keeps that size).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveAvgPool2d(1)(torcia.ones(2, 3, 5, 7)).shape
    torcia.Size([2, 3, 1, 1])
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        _check_dims(self, input, 2, "[N, C, H, W] or [C, H, W]")
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """Max pooling to a fixed output size ``(H_out, W_out)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveMaxPool2d((2, 2))(torcia.ones(1, 3, 5, 7)).shape
    torcia.Size([1, 3, 2, 2])
    """

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        _check_dims(self, input, 2, "[N, C, H, W] or [C, H, W]")
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
