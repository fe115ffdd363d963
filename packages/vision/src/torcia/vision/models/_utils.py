"""Building blocks shared by the models."""

from __future__ import annotations

from torcia import nn


def make_divisible(value: float, divisor: int, min_value: int | None = None) -> int:
    """``value`` rounded to the nearest multiple of ``divisor`` (at least ``min_value``),
    never more than 10% below ``value``; MobileNet's channel widths are made so.

    Examples
    --------
    >>> from torcia.vision.models.mobilenetv2 import make_divisible
    >>> make_divisible(32 * 0.75, 8), make_divisible(37, 8), make_divisible(3, 8)
    (24, 40, 8)
    """
    min_value = divisor if min_value is None else min_value
    new = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if new < 0.9 * value:
        new += divisor
    return new


class Conv2dNormActivation(nn.Sequential):
    """Conv2d (no bias), BatchNorm2d, activation: keys ``0.*``, ``1.*`` as torchvision's
    ``ops.Conv2dNormActivation``; ``padding`` defaults to keep the size at stride 1.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models._utils import Conv2dNormActivation
    >>> block = Conv2dNormActivation(3, 8, kernel_size=3, stride=2)
    >>> block(torcia.randn(1, 3, 8, 8)).shape
    torcia.Size([1, 8, 4, 4])
    """

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None,
                 groups=1, activation_layer=nn.ReLU):
        if padding is None:
            padding = (kernel_size - 1) // 2
        layers = [
            nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, groups=groups,
                      bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        if activation_layer is not None:
            layers.append(activation_layer(inplace=True))
        super().__init__(*layers)
        self.out_channels = out_channels


def init_conv_bn_linear(model, linear_std: float | None = None,
                        conv_nonlinearity: str = "relu") -> None:
    """torchvision's initialisation: convolutions He-normal (fan out), batch norms 1 and 0,
    linear layers N(0, ``linear_std``) with zero bias when ``linear_std`` is given.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.vision.models.mobilenetv2 import init_conv_bn_linear
    >>> model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4, 2))
    >>> init_conv_bn_linear(model, linear_std=0.01)
    >>> model[1].weight, model[2].bias
    (Parameter containing:
    tensor([1., 1., 1., 1.], requires_grad=True), Parameter containing:
    tensor([0., 0.], requires_grad=True))
    """
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity=conv_nonlinearity)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear) and linear_std is not None:
            nn.init.normal_(m.weight, 0, linear_std)
            nn.init.zeros_(m.bias)

