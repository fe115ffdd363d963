"""Pooling: ``MaxPool1d/2d/3d``, ``AvgPool1d/2d/3d``, ``AdaptiveAvgPool1d/2d``,
``AdaptiveMaxPool1d/2d``.

Each class names its functional op and its number of spatial dimensions; the shared bases
check the input's rank and call the op."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules._utils import _single, shape_error, shape_of
from torcia.nn.modules.module import Module

__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AvgPool1d", "AvgPool2d", "AvgPool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d"]

_LAYOUTS = {1: "[N, C, L] or [C, L]", 2: "[N, C, H, W] or [C, H, W]",
            3: "[N, C, D, H, W] or [C, D, H, W]"}


class _Pool(Module):
    _n = 2
    _function = "max_pool2d"

    def _check_dims(self, input) -> None:
        n = self._n
        if len(shape_of(input, self._function)) not in (n + 1, n + 2):
            raise shape_error(self, f"a {n + 1}-D or {n + 2}-D input ({_LAYOUTS[n]})", input)


class _MaxPoolNd(_Pool):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        self._check_dims(input)
        return getattr(F, self._function)(input, self.kernel_size, self.stride, self.padding,
                                          self.dilation, ceil_mode=self.ceil_mode,
                                          return_indices=self.return_indices)

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

    _n = 1
    _function = "max_pool1d"


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


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.MaxPool3d(2)(torcia.ones(1, 2, 4, 4, 4)).shape
    torcia.Size([1, 2, 2, 2, 2])
    """

    _n = 3
    _function = "max_pool3d"


class _AvgPoolNd(_Pool):
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
        self._check_dims(input)
        return getattr(F, self._function)(input, self.kernel_size, self.stride, self.padding,
                                          self.ceil_mode, self.count_include_pad,
                                          self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AvgPool1d(2)(torcia.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    tensor([[[2., 1.]]])
    """

    _n = 1
    _function = "avg_pool1d"

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        # PyTorch keeps AvgPool1d's sizes as 1-tuples (and prints them so)
        super().__init__(_single(kernel_size),
                         _single(stride if stride is not None else kernel_size),
                         _single(padding), ceil_mode, count_include_pad)

    def forward(self, input):
        self._check_dims(input)
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    >>> torcia.nn.AvgPool2d(2)(x)
    tensor([[[[ 2.5000,  4.5000],
              [10.5000, 12.5000]]]])
    """

    _function = "avg_pool2d"


class AvgPool3d(_AvgPoolNd):
    """3-D average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AvgPool3d(2)(torcia.ones(1, 2, 4, 4, 4)).shape
    torcia.Size([1, 2, 2, 2, 2])
    """

    _n = 3
    _function = "avg_pool3d"


class _AdaptivePool(_Pool):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        self._check_dims(input)
        return getattr(F, self._function)(input, self.output_size, *self._extra())

    def _extra(self) -> tuple:
        return (self.return_indices,)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _AdaptiveAvgPool(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__(output_size)

    def _extra(self) -> tuple:
        return ()


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    """Average pooling of ``(N, C, L)`` to a fixed length.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveAvgPool1d(2)(torcia.tensor([[[1.0, 3.0, 5.0, 7.0]]]))
    tensor([[[2., 6.]]])
    """

    _n = 1
    _function = "adaptive_avg_pool1d"


class AdaptiveAvgPool2d(_AdaptiveAvgPool):
    """Average pooling to a fixed output size ``(H_out, W_out)`` (None keeps that size).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveAvgPool2d(1)(torcia.ones(2, 3, 5, 7)).shape
    torcia.Size([2, 3, 1, 1])
    """

    _function = "adaptive_avg_pool2d"


class AdaptiveMaxPool1d(_AdaptivePool):
    """Max pooling of ``(N, C, L)`` to a fixed length.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveMaxPool1d(2)(torcia.tensor([[[1.0, 3.0, 5.0, 7.0]]]))
    tensor([[[3., 7.]]])
    """

    _n = 1
    _function = "adaptive_max_pool1d"


class AdaptiveMaxPool2d(_AdaptivePool):
    """Max pooling to a fixed output size ``(H_out, W_out)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveMaxPool2d((2, 2))(torcia.ones(1, 3, 5, 7)).shape
    torcia.Size([1, 3, 2, 2])
    """

    _function = "adaptive_max_pool2d"


class AdaptiveAvgPool3d(_AdaptiveAvgPool):
    """Average pooling of ``(N, C, D, H, W)`` to a fixed output size.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveAvgPool3d(1)(torcia.ones(2, 3, 4, 4, 4)).shape
    torcia.Size([2, 3, 1, 1, 1])
    """

    _n = 3
    _function = "adaptive_avg_pool3d"


class AdaptiveMaxPool3d(_AdaptivePool):
    """Max pooling of ``(N, C, D, H, W)`` to a fixed output size.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.AdaptiveMaxPool3d((1, 2, 2))(torcia.ones(1, 1, 4, 4, 4)).shape
    torcia.Size([1, 1, 1, 2, 2])
    """

    _n = 3
    _function = "adaptive_max_pool3d"


class _LPPool(_Pool):
    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        self._check_dims(input)
        return getattr(F, self._function)(input, float(self.norm_type), self.kernel_size,
                                          self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    """Power-average pooling ``(sum x**p)**(1/p)`` over windows of ``(N, C, L)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LPPool1d(2, 2)(torcia.tensor([[[3.0, 4.0]]]))
    tensor([[[5.]]])
    """

    _n = 1
    _function = "lp_pool1d"


class LPPool2d(_LPPool):
    """Power-average pooling over windows of ``(N, C, H, W)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LPPool2d(1, 2)(torcia.ones(1, 1, 4, 4)).shape
    torcia.Size([1, 1, 2, 2])
    """

    _function = "lp_pool2d"


class LPPool3d(_LPPool):
    """Power-average pooling over windows of ``(N, C, D, H, W)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LPPool3d(2, 2)(torcia.ones(1, 1, 2, 4, 4)).shape
    torcia.Size([1, 1, 1, 2, 2])
    """

    _n = 3
    _function = "lp_pool3d"


class _FractionalMaxPool(_Pool):
    def __init__(self, kernel_size, output_size=None, output_ratio=None,
                 return_indices: bool = False, _random_samples=None):
        super().__init__()
        n = self._n

        def tup(v):
            return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n

        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size) if output_size is not None else None
        self.output_ratio = tup(output_ratio) if output_ratio is not None else None
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a "
                             "pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return getattr(F, self._function)(input, self.kernel_size, self.output_size,
                                          self.output_ratio, self.return_indices,
                                          _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPool):
    """Fractional max pooling (Graham, 2014) over ``(N, C, H, W)``: ``kernel_size``
    windows placed pseudo-randomly (anew each call unless ``_random_samples`` is given)
    so that the output has ``output_size`` or ``output_ratio`` times the input's size.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.FractionalMaxPool2d(3, output_ratio=0.5)(torcia.randn(1, 2, 8, 10)).shape
    torcia.Size([1, 2, 4, 5])
    """

    _function = "fractional_max_pool2d"


class FractionalMaxPool3d(_FractionalMaxPool):
    """Fractional max pooling over ``(N, C, T, H, W)``; see :class:`FractionalMaxPool2d`.

    Examples
    --------
    >>> import torcia
    >>> pool = torcia.nn.FractionalMaxPool3d(2, output_size=(2, 3, 3))
    >>> pool(torcia.randn(1, 1, 4, 6, 6)).shape
    torcia.Size([1, 1, 2, 3, 3])
    """

    _n = 3
    _function = "fractional_max_pool3d"


class _MaxUnpool(_Pool):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return getattr(F, self._function)(input, indices, self.kernel_size, self.stride,
                                          self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """The partial inverse of :class:`MaxPool1d`: values back at their argmax positions,
    zeros elsewhere.

    Examples
    --------
    >>> import torcia
    >>> pool = torcia.nn.MaxPool1d(2, return_indices=True)
    >>> out, idx = pool(torcia.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    >>> torcia.nn.MaxUnpool1d(2)(out, idx)
    tensor([[[0., 3., 2., 0.]]])
    """

    _n = 1
    _function = "max_unpool1d"


class MaxUnpool2d(_MaxUnpool):
    """The partial inverse of :class:`MaxPool2d`.

    Examples
    --------
    >>> import torcia
    >>> out, idx = torcia.nn.MaxPool2d(2, return_indices=True)(torcia.ones(1, 1, 4, 4))
    >>> torcia.nn.MaxUnpool2d(2)(out, idx).shape
    torcia.Size([1, 1, 4, 4])
    """

    _function = "max_unpool2d"


class MaxUnpool3d(_MaxUnpool):
    """The partial inverse of :class:`MaxPool3d`.

    Examples
    --------
    >>> import torcia
    >>> out, idx = torcia.nn.MaxPool3d(2, return_indices=True)(torcia.ones(1, 1, 2, 2, 2))
    >>> torcia.nn.MaxUnpool3d(2)(out, idx).shape
    torcia.Size([1, 1, 2, 2, 2])
    """

    _n = 3
    _function = "max_unpool3d"
