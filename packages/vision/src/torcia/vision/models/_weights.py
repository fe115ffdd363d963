"""Published weights: torchvision's checkpoints, whose state-dict keys torcia's models share.

``URLS`` maps a model name and a weights name to the checkpoint's URL; the file name ends in
the first hex digits of its sha256 (torchvision's convention), which
:func:`torcia.hub.load_state_dict_from_url` checks. Files are downloaded once into
``$TORCIA_HOME/hub/checkpoints``.
"""

from __future__ import annotations

import dataclasses
import enum
import warnings

import torcia.hub

_TORCHVISION = "https://download.pytorch.org/models"

URLS: dict[str, dict[str, str]] = {
    "resnet18": {"IMAGENET1K_V1": f"{_TORCHVISION}/resnet18-f37072fd.pth"},
    "resnet34": {"IMAGENET1K_V1": f"{_TORCHVISION}/resnet34-b627a593.pth"},
    "resnet50": {"IMAGENET1K_V1": f"{_TORCHVISION}/resnet50-0676ba61.pth",
                 "IMAGENET1K_V2": f"{_TORCHVISION}/resnet50-11ad3fa6.pth"},
    "vgg11": {"IMAGENET1K_V1": f"{_TORCHVISION}/vgg11-8a719046.pth"},
    "vgg11_bn": {"IMAGENET1K_V1": f"{_TORCHVISION}/vgg11_bn-6002323d.pth"},
    "vgg16": {"IMAGENET1K_V1": f"{_TORCHVISION}/vgg16-397923af.pth"},
    "vgg16_bn": {"IMAGENET1K_V1": f"{_TORCHVISION}/vgg16_bn-6c64b313.pth"},
    "mobilenet_v2": {"IMAGENET1K_V1": f"{_TORCHVISION}/mobilenet_v2-b0353104.pth",
                     "IMAGENET1K_V2": f"{_TORCHVISION}/mobilenet_v2-7ebf99e0.pth"},
}
"""model name -> weights name -> URL; ``DEFAULT`` is the last (best) entry of each."""

NUM_CLASSES = {"IMAGENET1K_V1": 1000, "IMAGENET1K_V2": 1000}
"""How many classes each weights name was trained for."""


def resolve(arch: str, weights, pretrained) -> str | None:
    """The weights name that ``weights`` / ``pretrained`` ask ``arch`` for, or None."""
    if pretrained is not None:
        warnings.warn("The parameter 'pretrained' is deprecated, please use 'weights' "
                      "instead.", UserWarning, stacklevel=3)
        if weights is not None:
            raise ValueError("pass weights= or pretrained=, not both")
        weights = "DEFAULT" if pretrained else None
    if weights is None:
        return None
    table = URLS.get(arch, {})
    name = str(getattr(weights, "name", weights)).rpartition(".")[2]
    if name == "DEFAULT" and table:
        name = list(table)[-1]
    if name not in table:
        known = ", ".join(["DEFAULT", *table]) if table else "none are published"
        raise ValueError(f"no weights {weights!r} for {arch}; known: {known}")
    return name


def build(arch: str, builder, weights, pretrained, progress: bool, kwargs: dict):
    """``builder(**kwargs)``, with ``weights`` downloaded (once) and loaded into it."""
    name = resolve(arch, weights, pretrained)
    if name is None:
        return builder(**kwargs)
    classes = NUM_CLASSES.get(name, 1000)
    if kwargs.setdefault("num_classes", classes) != classes:
        raise ValueError(f"the {name} weights of {arch} have {classes} classes, not "
                         f"num_classes={kwargs['num_classes']}")
    model = builder(**kwargs)
    state = torcia.hub.load_state_dict_from_url(URLS[arch][name], progress=progress,
                                                check_hash=True)
    model.load_state_dict(state)
    return model


# ---------------------------------------------------------------------------------------
# torchvision's weights enums (``ResNet18_Weights.IMAGENET1K_V1``, ``.DEFAULT``)
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Weights:
    """One published checkpoint: where it is and what it was trained for."""

    url: str
    meta: dict = dataclasses.field(compare=False, hash=False)

    def get_state_dict(self, progress: bool = True, check_hash: bool = True, **kwargs):
        """Download the checkpoint once (into the hub cache) and load its state dict."""
        return torcia.hub.load_state_dict_from_url(self.url, progress=progress,
                                                   check_hash=check_hash, **kwargs)


class WeightsEnum(enum.Enum):
    """Base of the per-architecture weights enums; each member's value is a
    :class:`Weights`, and ``DEFAULT`` names the best one (torchvision's ``WeightsEnum``)."""

    @classmethod
    def verify(cls, obj):
        """``obj`` as a member: a member, its name (``"IMAGENET1K_V1"``,
        ``"ResNet18_Weights.DEFAULT"``) or None."""
        if obj is None or isinstance(obj, cls):
            return obj
        if isinstance(obj, str):
            return cls[obj.replace(cls.__name__ + ".", "")]
        raise TypeError(f"Invalid Weight class provided; expected {cls.__name__} but "
                        f"received {obj.__class__.__name__}.")

    @property
    def url(self) -> str:
        return self.value.url

    @property
    def meta(self) -> dict:
        return self.value.meta

    def get_state_dict(self, progress: bool = True, check_hash: bool = True, **kwargs):
        """The checkpoint's state dict (see :meth:`Weights.get_state_dict`)."""
        return self.value.get_state_dict(progress=progress, check_hash=check_hash, **kwargs)

    def __repr__(self):
        return f"{self.__class__.__name__}.{self.name}"


#: torchvision's class name for each architecture's weights
ENUM_NAMES = {"resnet18": "ResNet18_Weights", "resnet34": "ResNet34_Weights",
              "resnet50": "ResNet50_Weights", "vgg11": "VGG11_Weights",
              "vgg11_bn": "VGG11_BN_Weights", "vgg16": "VGG16_Weights",
              "vgg16_bn": "VGG16_BN_Weights", "mobilenet_v2": "MobileNet_V2_Weights"}


def _weights_enum(arch: str) -> type[WeightsEnum]:
    members = {name: Weights(url, {"num_classes": NUM_CLASSES[name]})
               for name, url in URLS[arch].items()}
    members["DEFAULT"] = members[list(URLS[arch])[-1]]  # an alias of the best member
    return WeightsEnum(ENUM_NAMES[arch], members, module="torcia.vision.models")


ENUMS = {arch: _weights_enum(arch) for arch in ENUM_NAMES}
"""model name -> its weights enum"""
