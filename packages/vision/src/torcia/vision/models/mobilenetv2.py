"""MobileNetV2 (Sandler et al., 2018): inverted residual blocks with linear bottlenecks."""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.vision.models import _weights
from torcia.vision.models._utils import (
    Conv2dNormActivation,
    init_conv_bn_linear,
    make_divisible,
)

# expansion t, output channels c, repeats n, first stride s
SETTINGS = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1],
            [6, 160, 3, 2], [6, 320, 1, 1]]


class InvertedResidual(nn.Module):
    """1x1 expansion (skipped when ``expand_ratio`` is 1), 3x3 depthwise, 1x1 linear
    projection; a shortcut when the shape is kept.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models.mobilenetv2 import InvertedResidual
    >>> block = InvertedResidual(8, 16, stride=2, expand_ratio=6)
    >>> block(torcia.zeros(1, 8, 8, 8)).shape
    torcia.Size([1, 16, 4, 4])
    """

    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        self.stride = stride
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden, kernel_size=1,
                                               activation_layer=nn.ReLU6))
        layers += [
            Conv2dNormActivation(hidden, hidden, stride=stride, groups=hidden,
                                 activation_layer=nn.ReLU6),
            nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2: ``features`` (stem, 17 inverted residual blocks, 1x1 to 1280 channels)
    and ``classifier`` (dropout, linear).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models import mobilenet_v2
    >>> model = mobilenet_v2(num_classes=5, width_mult=0.25)
    >>> model(torcia.randn(2, 3, 32, 32)).shape
    torcia.Size([2, 5])
    """

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 round_nearest: int = 8, dropout: float = 0.2):
        super().__init__()
        channels = make_divisible(32 * width_mult, round_nearest)
        self.last_channel = make_divisible(1280 * max(1.0, width_mult), round_nearest)
        features = [Conv2dNormActivation(3, channels, stride=2, activation_layer=nn.ReLU6)]
        for t, c, n, s in SETTINGS:
            out = make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(InvertedResidual(channels, out, s if i == 0 else 1, t))
                channels = out
        features.append(Conv2dNormActivation(channels, self.last_channel, kernel_size=1,
                                             activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout),
                                        nn.Linear(self.last_channel, num_classes))
        # torchvision leaves MobileNet's convolutions at the leaky-ReLU gain of kaiming's
        # default
        init_conv_bn_linear(self, linear_std=0.01, conv_nonlinearity="leaky_relu")

    def forward(self, x):
        x = torcia.nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torcia.flatten(x, 1))


def mobilenet_v2(*, weights=None, progress: bool = True, pretrained=None,
                 **kwargs) -> MobileNetV2:
    """MobileNetV2: 3,504,872 parameters with 1000 classes and ``width_mult=1``;
    ``weights="DEFAULT"`` loads torchvision's ImageNet weights (IMAGENET1K_V2).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import models
    >>> model = models.mobilenet_v2(num_classes=10).eval()
    >>> with torcia.no_grad():
    ...     model(torcia.zeros(1, 3, 32, 32)).shape
    torcia.Size([1, 10])
    """
    return _weights.build("mobilenet_v2", MobileNetV2, weights, pretrained, progress, kwargs)
