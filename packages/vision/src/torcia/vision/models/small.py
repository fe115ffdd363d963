"""A small CNN for tiny images, the model ``torcia-train`` trains on ``Digits``."""

from __future__ import annotations

import torcia
from torcia import nn


class SmallCNN(nn.Module):
    """Three 3x3 convolutions (32, 32, 64 maps, each with batch norm and ReLU, max pooling
    after the second and third), average-pooled to 2x2, dropout, and a linear classifier.

    Built for 8x8 inputs (``Digits``), where the pooling leaves 2x2 maps; any input of at
    least 4x4 works. 30,762 parameters with one input channel and 10 classes.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models import small_cnn
    >>> small_cnn()(torcia.randn(3, 1, 8, 8)).shape
    torcia.Size([3, 10])
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1, dropout: float = 0.2):
        super().__init__()

        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                    nn.ReLU()]

        self.features = nn.Sequential(
            *block(in_channels, 32), *block(32, 32), nn.MaxPool2d(2),
            *block(32, 64), nn.MaxPool2d(2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(64 * 4, num_classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torcia.flatten(x, 1))


def small_cnn(**kwargs) -> SmallCNN:
    """Build a :class:`SmallCNN`.

    Examples
    --------
    >>> import torcia
    >>> model = torcia.vision.models.small_cnn()
    >>> type(model).__name__
    'SmallCNN'
    """
    return SmallCNN(**kwargs)
