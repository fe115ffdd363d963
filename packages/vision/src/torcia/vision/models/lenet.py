"""LeNet-5 for 28x28 or 32x32 single-channel digits."""

from __future__ import annotations

import torcia
from torcia import nn


class LeNet(nn.Module):
    """LeNet-5 (LeCun et al., 1998) in its common modern form: ReLU instead of the scaled
    tanh, max pooling instead of trainable subsampling, and a full C3 connection table.

    conv1 5x5 -> 6 maps, pool 2, conv2 5x5 -> 16 maps, pool 2, then 400 -> 120 -> 84 ->
    ``num_classes``. For 32x32 inputs (the original) conv1 has no padding; for 28x28 (MNIST
    as distributed) it pads by 2, which gives the same 28x28 maps after conv1. 61,706
    parameters with 10 classes.

    Parameters
    ----------
    num_classes : int
    in_channels : int
    input_size : int
        28 or 32.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models import lenet
    >>> model = lenet()
    >>> model(torcia.randn(2, 1, 28, 28)).shape
    torcia.Size([2, 10])
    >>> sum(p.numel() for p in model.parameters())
    61706
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1, input_size: int = 28):
        super().__init__()
        if input_size not in (28, 32):
            raise ValueError(f"LeNet takes 28x28 or 32x32 inputs, got input_size={input_size}")
        self.conv1 = nn.Conv2d(in_channels, 6, 5, padding=2 if input_size == 28 else 0)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = self.pool(torcia.relu(self.conv1(x)))
        x = self.pool(torcia.relu(self.conv2(x)))
        x = torcia.flatten(x, 1)
        x = torcia.relu(self.fc1(x))
        x = torcia.relu(self.fc2(x))
        return self.fc3(x)


def lenet(**kwargs) -> LeNet:
    """Build a :class:`LeNet` (no published weights exist for it).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import models
    >>> model = models.lenet()
    >>> model(torcia.zeros(2, 1, 28, 28)).shape
    torcia.Size([2, 10])
    """
    return LeNet(**kwargs)
