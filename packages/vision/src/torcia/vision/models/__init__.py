"""Image models with torchvision's architectures and state-dict keys, found by name.

Models come from a registry that plugins fill through the ``torcia_register_models`` hook
(:mod:`torcia.vision.hookspecs`); torcia-vision's own are registered the same way, so a
model from another installed distribution is listed and built like the built-in ones.

Examples
--------
>>> from torcia.vision import models
>>> model = models.get_model("lenet", num_classes=10)
>>> "mobilenet_v2" in models.list_models()
True
"""

from torcia.vision import _registry
from torcia.vision.models._weights import ENUMS as _ENUMS
from torcia.vision.models._weights import Weights, WeightsEnum
from torcia.vision.models.lenet import LeNet, lenet
from torcia.vision.models.mobilenetv2 import MobileNetV2, mobilenet_v2
from torcia.vision.models.resnet import ResNet, resnet18, resnet34, resnet50
from torcia.vision.models.small import SmallCNN, small_cnn
from torcia.vision.models.vgg import VGG, vgg11, vgg11_bn, vgg16, vgg16_bn

# ResNet18_Weights, VGG16_Weights, ...: torchvision's weights enums
globals().update({e.__name__: e for e in _ENUMS.values()})


def list_models() -> list[str]:
    """The names of every registered model, sorted.

    Examples
    --------
    >>> import torcia
    >>> "resnet18" in torcia.vision.models.list_models()
    True
    """
    return _registry.models.names()


def get_model(name: str, **kwargs):
    """Build the model registered as ``name`` with the given keyword arguments.

    Raises ``KeyError`` listing the known names (and any blocked plugin that may provide
    it) when there is no such model.

    Examples
    --------
    >>> import torcia
    >>> model = torcia.vision.models.get_model("lenet", num_classes=10)
    >>> model(torcia.zeros(1, 1, 28, 28)).shape
    torcia.Size([1, 10])
    """
    return _registry.models.get(name)(**kwargs)


__all__ = [
    *(e.__name__ for e in _ENUMS.values()), "Weights", "WeightsEnum",
    "LeNet", "MobileNetV2", "ResNet", "SmallCNN", "VGG", "get_model", "lenet",
    "list_models", "mobilenet_v2", "resnet18", "resnet34", "resnet50", "small_cnn", "vgg11",
    "vgg11_bn", "vgg16", "vgg16_bn",
]
