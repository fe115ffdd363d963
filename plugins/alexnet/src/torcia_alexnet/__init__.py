"""AlexNet as a torcia-vision model plugin.

Examples
--------
>>> import torcia
>>> from torcia_alexnet import AlexNet
>>> model = AlexNet(num_classes=10)
>>> model.features(torcia.randn(1, 3, 63, 63)).shape
torcia.Size([1, 256, 1, 1])
"""

import torcia
from torcia import nn

__version__ = "0.1.0"


class AlexNet(nn.Module):
    """Five convolutions (11x11 stride 4, 5x5, then three 3x3) with ReLU and three 3x3
    stride-2 max pools, a 6x6 adaptive average pool, and three linear layers with dropout.

    Parameters
    ----------
    num_classes : int
    dropout : float
        Dropout before each of the first two linear layers.
    """

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torcia.flatten(x, 1))


def alexnet(*, weights=None, **kwargs) -> AlexNet:
    """Build an :class:`AlexNet`; there are no pretrained weights (``weights`` must be
    None).

    Examples
    --------
    >>> import torcia
    >>> import torcia_alexnet
    >>> model = torcia_alexnet.alexnet(num_classes=10).eval()
    >>> with torcia.no_grad():
    ...     print(model(torcia.zeros(1, 3, 64, 64)).shape)
    torcia.Size([1, 10])
    """
    if weights is not None:
        raise ValueError("torcia-alexnet ships no pretrained weights and never downloads")
    return AlexNet(**kwargs)


@torcia.hookimpl
def torcia_register_models(registry):
    registry.add("alexnet", alexnet)
