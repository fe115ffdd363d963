"""torcia-vision's built-in plugin: it registers vision's own models and datasets through
the same hooks a third-party distribution implements (see :mod:`torcia.vision.hookspecs`).

The modules are imported inside the hooks, so loading this entry point costs nothing until
a model or dataset table is first needed.
"""

from torcia.plugins import hookimpl


@hookimpl
def torcia_register_models(registry):
    from torcia.vision import models as m

    builders = {
        "lenet": m.lenet, "small_cnn": m.small_cnn,
        "vgg11": m.vgg11, "vgg11_bn": m.vgg11_bn, "vgg16": m.vgg16, "vgg16_bn": m.vgg16_bn,
        "resnet18": m.resnet18, "resnet34": m.resnet34, "resnet50": m.resnet50,
        "mobilenet_v2": m.mobilenet_v2,
    }
    for name, builder in builders.items():
        registry.add(name, builder)


@hookimpl
def torcia_register_datasets(registry):
    from torcia.vision import datasets as d

    for name, cls in {
        "digits": d.Digits, "mnist": d.MNIST, "fashion_mnist": d.FashionMNIST,
        "kmnist": d.KMNIST, "cifar10": d.CIFAR10, "cifar100": d.CIFAR100,
    }.items():
        registry.add(name, cls)
