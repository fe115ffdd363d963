"""VGG-11 and VGG-16, with and without batch norm (Simonyan and Zisserman, 2014)."""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.vision.models import _weights
from torcia.vision.models._utils import init_conv_bn_linear

# output channels of each 3x3 convolution; "M" is a 2x2 max pool
CONFIGS = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
          512, 512, 512, "M"],
}


def make_layers(config, batch_norm: bool = False) -> nn.Sequential:
    """The ``features`` stack of a configuration (indices give torchvision's keys).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models.vgg import make_layers
    >>> features = make_layers([8, "M", 16, "M"], batch_norm=True)
    >>> features(torcia.zeros(1, 3, 16, 16)).shape
    torcia.Size([1, 16, 4, 4])
    """
    layers, channels = [], 3
    for v in config:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(channels, v, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU(inplace=True))
        channels = v
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """VGG: ``features``, a 7x7 adaptive average pool, and a three-layer ``classifier``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models.vgg import CONFIGS, make_layers
    >>> features = make_layers(CONFIGS["A"], batch_norm=True)  # vgg11_bn's
    >>> features(torcia.randn(1, 3, 32, 32)).shape
    torcia.Size([1, 512, 1, 1])
    """

    def __init__(self, features, num_classes: int = 1000, init_weights: bool = True,
                 dropout: float = 0.5):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            init_conv_bn_linear(self, linear_std=0.01)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torcia.flatten(x, 1))


def _vgg(arch: str, config: str, batch_norm: bool, weights, pretrained, progress,
         kwargs) -> VGG:
    def builder(**kw):
        return VGG(make_layers(CONFIGS[config], batch_norm), **kw)

    return _weights.build(arch, builder, weights, pretrained, progress, kwargs)


def vgg11(*, weights=None, progress: bool = True, pretrained=None, **kwargs) -> VGG:
    """VGG-11 (configuration "A"): 132,863,336 parameters with 1000 classes."""
    return _vgg("vgg11", "A", False, weights, pretrained, progress, kwargs)


def vgg11_bn(*, weights=None, progress: bool = True, pretrained=None, **kwargs) -> VGG:
    """VGG-11 with batch norm: 132,868,840 parameters with 1000 classes."""
    return _vgg("vgg11_bn", "A", True, weights, pretrained, progress, kwargs)


def vgg16(*, weights=None, progress: bool = True, pretrained=None, **kwargs) -> VGG:
    """VGG-16 (configuration "D"): 138,357,544 parameters with 1000 classes."""
    return _vgg("vgg16", "D", False, weights, pretrained, progress, kwargs)


def vgg16_bn(*, weights=None, progress: bool = True, pretrained=None, **kwargs) -> VGG:
    """VGG-16 with batch norm: 138,365,992 parameters with 1000 classes."""
    return _vgg("vgg16_bn", "D", True, weights, pretrained, progress, kwargs)
