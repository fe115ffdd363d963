"""Convolutions: ``Conv1d/2d/3d`` and ``ConvTranspose1d/2d``."""

from __future__ import annotations

from torcia.nn import functional as F
from torcia.nn.modules._utils import (
    _pair,
    _reverse_repeat_tuple,
    _single,
    _triple,
    add_weight_and_bias,
    reset_weight_and_bias,
    shape_error,
    shape_of,
)
from torcia.nn.modules.module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_PADDING_STRINGS = ("same", "valid")


class _ConvNd(Module):
    """What every convolution shares: argument checks, parameters, initialisation and the
    printed form."""

    _n = 2
    _layout = "N, C, H, W"

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in _PADDING_STRINGS:
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {_PADDING_STRINGS}"
                )
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {_PADDING_MODES}, but got "
                f"padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            # F.pad's order (last dimension first); "same" puts the odd pixel on the right
            pads = []
            for d, k in zip(reversed(dilation), reversed(kernel_size)):
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
            self._reversed_padding_repeated_twice = pads if padding == "same" else [0] * len(pads)
        else:
            self._reversed_padding_repeated_twice = list(_reverse_repeat_tuple(padding, 2))
        if transposed:
            shape = (in_channels, out_channels // groups, *kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *kernel_size)
        add_weight_and_bias(self, shape, out_channels, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_weight_and_bias(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.dilation):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _check_input(self, input) -> None:
        n = self._n
        shape = shape_of(input, self._function)
        if len(shape) not in (n + 1, n + 2) or shape[-n - 1] != self.in_channels:
            spatial = self._layout.split(", ", 2)[2]
            raise shape_error(
                self,
                f"input of shape [N, {self.in_channels}, {spatial}] or "
                f"[{self.in_channels}, {spatial}]",
                input,
            )

    def _conv_padding(self, input):
        """The input padded as ``padding_mode``/``padding`` ask, and the padding left for the
        convolution kernel itself."""
        pads = self._reversed_padding_repeated_twice
        if self.padding_mode != "zeros":
            return F.pad(input, pads, mode=self.padding_mode), (0,) * self._n
        if isinstance(self.padding, str):
            before, after = pads[0::2], pads[1::2]
            if before == after:
                return input, tuple(reversed(before))
            return F.pad(input, pads), (0,) * self._n
        return input, self.padding


class _Conv(_ConvNd):
    """A convolution of ``_n`` spatial dimensions computed by ``F.<_function>``."""

    _function = "conv2d"

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        nt = _TUPLES[self._n]
        super().__init__(in_channels, out_channels, nt(kernel_size), nt(stride),
                         padding if isinstance(padding, str) else nt(padding), nt(dilation),
                         False, nt(0), groups, bias, padding_mode, device, dtype)

    def forward(self, input):
        self._check_input(input)
        return self._conv_forward(input, self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        # PyTorch's name and signature: subclasses (QAT's, weight-standardising ones in
        # timm) run the layer's padding and geometry with a weight of their own
        input, padding = self._conv_padding(input)
        return getattr(F, self._function)(input, weight, bias, self.stride, padding,
                                          self.dilation, self.groups)


class Conv1d(_Conv):
    """1-D convolution over an input of shape ``(N, C_in, L)`` or ``(C_in, L)``.

    Arguments, defaults and initialisation are PyTorch's; ``padding`` may be an int, a
    tuple, ``"valid"`` or ``"same"``, and ``padding_mode`` one of ``"zeros"``,
    ``"reflect"``, ``"replicate"``, ``"circular"``.

    Examples
    --------
    >>> import torcia
    >>> conv = torcia.nn.Conv1d(2, 4, 3, padding="same")
    >>> conv(torcia.randn(1, 2, 10)).shape
    torcia.Size([1, 4, 10])
    """

    _n = 1
    _layout = "N, C, L"
    _function = "conv1d"


class Conv2d(_Conv):
    """2-D convolution over an input of shape ``(N, C_in, H, W)`` or ``(C_in, H, W)``.

    Arguments, defaults and initialisation are PyTorch's: ``kernel_size``, ``stride``,
    ``padding`` (int, pair, ``"valid"`` or ``"same"``), ``dilation``, ``groups``, ``bias``,
    ``padding_mode`` (``"zeros"``, ``"reflect"``, ``"replicate"``, ``"circular"``). The
    weight has shape ``(out_channels, in_channels // groups, kH, kW)``.

    Examples
    --------
    >>> import torcia
    >>> conv = torcia.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    >>> conv
    Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
    >>> conv(torcia.randn(2, 3, 16, 16)).shape
    torcia.Size([2, 8, 8, 8])
    """


class Conv3d(_Conv):
    """3-D convolution over an input of shape ``(N, C_in, D, H, W)`` or
    ``(C_in, D, H, W)`` (see :class:`Conv2d` for the arguments).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Conv3d(2, 4, 3)(torcia.randn(1, 2, 5, 5, 5)).shape
    torcia.Size([1, 4, 3, 3, 3])
    """

    _n = 3
    _layout = "N, C, D, H, W"
    _function = "conv3d"


class _ConvTranspose(_ConvNd):
    """A transposed convolution (the gradient of a convolution with respect to its input).

    The weight has shape ``(in_channels, out_channels // groups, *kernel_size)``.
    ``forward`` takes an optional ``output_size`` that picks ``output_padding`` when a
    stride makes the output size ambiguous.
    """

    _function = "conv_transpose2d"

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(
                f'Only "zeros" padding mode is supported for {type(self).__name__}'
            )
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__} does not support string padding, got "
                             f"padding={padding!r}")
        nt = _TUPLES[self._n]
        super().__init__(in_channels, out_channels, nt(kernel_size), nt(stride), nt(padding),
                         nt(dilation), True, nt(output_padding), groups, bias, padding_mode,
                         device, dtype)

    def _output_padding(self, input, output_size) -> tuple:
        if output_size is None:
            return self.output_padding
        n = self._n
        non_spatial = 2 if input.dim() == n + 2 else 1
        output_size = list(output_size)
        if len(output_size) == non_spatial + n:
            output_size = output_size[non_spatial:]
        if len(output_size) != n:
            raise ValueError(
                f"ConvTranspose{n}D: for {input.dim()}D input, output_size must have {n} or "
                f"{non_spatial + n} elements (got {len(output_size)})"
            )
        min_sizes, max_sizes = [], []
        for d in range(n):
            size = ((input.size(d + non_spatial) - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            min_sizes.append(size)
            max_sizes.append(size + self.stride[d] - 1)
        for d in range(n):
            if not min_sizes[d] <= output_size[d] <= max_sizes[d]:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range from "
                    f"{min_sizes} to {max_sizes} (for an input of {list(input.shape)[2:]})"
                )
        return tuple(output_size[d] - min_sizes[d] for d in range(n))

    def forward(self, input, output_size=None):
        self._check_input(input)
        output_padding = self._output_padding(input, output_size)
        return getattr(F, self._function)(input, self.weight, self.bias, self.stride,
                                          self.padding, output_padding, self.groups,
                                          self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution over ``(N, C_in, L)`` or ``(C_in, L)`` (see
    :class:`ConvTranspose2d`).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ConvTranspose1d(4, 2, 3, stride=2)(torcia.randn(1, 4, 5)).shape
    torcia.Size([1, 2, 11])
    """

    _n = 1
    _layout = "N, C, L"
    _function = "conv_transpose1d"


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution (the gradient of ``Conv2d`` with respect to its input).

    The weight has shape ``(in_channels, out_channels // groups, kH, kW)``. ``forward``
    takes an optional ``output_size`` that picks ``output_padding`` when a stride makes the
    output size ambiguous.

    Examples
    --------
    >>> import torcia
    >>> up = torcia.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
    >>> up(torcia.randn(1, 4, 5, 5)).shape
    torcia.Size([1, 2, 10, 10])
    """


_TUPLES = {1: _single, 2: _pair, 3: _triple}


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution over ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)`` (see
    :class:`ConvTranspose2d`).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ConvTranspose3d(2, 1, 2, stride=2)(torcia.randn(1, 2, 2, 2, 2)).shape
    torcia.Size([1, 1, 4, 4, 4])
    """

    _n = 3
    _layout = "N, C, D, H, W"
    _function = "conv_transpose3d"
