"""ResNet-18, -34 and -50 (He et al., 2015), with the stride in the bottleneck's 3x3
convolution (the "v1.5" layout torchvision uses)."""

from __future__ import annotations

from functools import partial

import torcia
from torcia import nn
from torcia.vision.models import _weights
from torcia.vision.models._utils import init_conv_bn_linear


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1) -> nn.Conv2d:
    """A 3x3 convolution without bias, padded to keep the size at stride 1.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models.resnet import conv3x3
    >>> conv3x3(4, 8, stride=2)(torcia.zeros(1, 4, 8, 8)).shape
    torcia.Size([1, 8, 4, 4])
    """
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=dilation, groups=groups,
                     bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1) -> nn.Conv2d:
    """A 1x1 convolution without bias: a change of the number of channels.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models.resnet import conv1x1
    >>> conv1x1(4, 16)(torcia.zeros(1, 4, 8, 8)).shape
    torcia.Size([1, 16, 8, 8])
    """
    return nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and a shortcut (ResNet-18/34).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models.resnet import BasicBlock
    >>> BasicBlock(8, 8)(torcia.zeros(1, 8, 4, 4)).shape
    torcia.Size([1, 8, 4, 4])
    """

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 4, and a shortcut (ResNet-50).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models.resnet import Bottleneck
    >>> Bottleneck(16, 4)(torcia.zeros(1, 16, 4, 4)).shape
    torcia.Size([1, 16, 4, 4])
    """

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """A ResNet: a 7x7 stem, four stages of residual blocks, global average pool, ``fc``.

    Parameters
    ----------
    block : BasicBlock or Bottleneck
    layers : list of 4 ints
        Blocks per stage.
    num_classes : int
    zero_init_residual : bool
        Start each block's last batch-norm scale at 0, so that blocks begin as identities.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.models import resnet18
    >>> model = resnet18(num_classes=4)
    >>> model(torcia.randn(2, 3, 32, 32)).shape
    torcia.Size([2, 4])
    """

    def __init__(self, block, layers, num_classes: int = 1000,
                 zero_init_residual: bool = False):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        init_conv_bn_linear(self)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.zeros_(m.bn3.weight)
                elif isinstance(m, BasicBlock):
                    nn.init.zeros_(m.bn2.weight)

    def _make_layer(self, block, planes, blocks, stride=1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torcia.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet18(*, weights=None, progress: bool = True, pretrained=None, **kwargs) -> ResNet:
    """ResNet-18: 11,689,512 parameters with 1000 classes; ``weights="DEFAULT"`` loads
    torchvision's ImageNet weights (see :mod:`torcia.vision.models`).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import models
    >>> model = models.resnet18(num_classes=10).eval()
    >>> with torcia.no_grad():
    ...     model(torcia.zeros(1, 3, 32, 32)).shape
    torcia.Size([1, 10])
    """
    return _weights.build("resnet18", partial(ResNet, BasicBlock, [2, 2, 2, 2]), weights,
                          pretrained, progress, kwargs)


def resnet34(*, weights=None, progress: bool = True, pretrained=None, **kwargs) -> ResNet:
    """ResNet-34: 21,797,672 parameters with 1000 classes; ``weights="DEFAULT"`` loads
    torchvision's ImageNet weights.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import models
    >>> model = models.resnet34(num_classes=10).eval()
    >>> with torcia.no_grad():
    ...     model(torcia.zeros(1, 3, 32, 32)).shape
    torcia.Size([1, 10])
    """
    return _weights.build("resnet34", partial(ResNet, BasicBlock, [3, 4, 6, 3]), weights,
                          pretrained, progress, kwargs)


def resnet50(*, weights=None, progress: bool = True, pretrained=None, **kwargs) -> ResNet:
    """ResNet-50: 25,557,032 parameters with 1000 classes; ``weights="DEFAULT"`` loads
    torchvision's ImageNet weights (IMAGENET1K_V2).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import models
    >>> model = models.resnet50(num_classes=10).eval()
    >>> with torcia.no_grad():
    ...     model(torcia.zeros(1, 3, 32, 32)).shape
    torcia.Size([1, 10])
    """
    return _weights.build("resnet50", partial(ResNet, Bottleneck, [3, 4, 6, 3]), weights,
                          pretrained, progress, kwargs)
