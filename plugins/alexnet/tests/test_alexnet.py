"""torcia-alexnet: listed by torcia-vision when registered, and torchvision's AlexNet."""

import importlib.metadata

import pytest
import torcia_alexnet

import torcia
from torcia import plugins
from torcia.vision import _registry, models


@pytest.fixture
def by_hand():
    """The plugin module registered under another name with ``manager().register``, the
    installed plugin (if any) set aside; the model registry is rebuilt before and after."""
    pm = plugins.manager()
    installed = pm.get_plugin("alexnet")
    if installed is not None:
        pm.unregister(installed)
    _registry.models.reset()
    assert "alexnet" not in models.list_models()
    pm.register(torcia_alexnet, name="alexnet-by-hand")
    _registry.models.reset()
    yield
    pm.unregister(torcia_alexnet)
    if installed is not None:
        pm.register(installed, name="alexnet")
    _registry.models.reset()


def test_registered_module_is_listed_beside_the_built_in_models(by_hand):
    names = models.list_models()
    assert "alexnet" in names and "resnet18" in names
    assert _registry.models.provider("alexnet") == "alexnet-by-hand"
    assert _registry.models.get("alexnet") is torcia_alexnet.alexnet


def test_installed_entry_point():
    if not importlib.metadata.entry_points(group="torcia", name="alexnet"):
        pytest.skip("torcia-alexnet is not installed (pip install plugins/alexnet)")
    assert _registry.models.provider("alexnet") == "alexnet"


def test_weights_are_refused():
    with pytest.raises(ValueError, match="no pretrained weights"):
        torcia_alexnet.alexnet(weights="IMAGENET1K_V1")


@pytest.mark.slow
def test_parameter_count_keys_and_forward():
    model = models.get_model("alexnet") if "alexnet" in models.list_models() \
        else torcia_alexnet.alexnet()
    # torchvision's published count
    assert sum(p.numel() for p in model.parameters()) == 61_100_840
    keys = list(model.state_dict())
    assert keys[:2] == ["features.0.weight", "features.0.bias"]
    assert "features.10.weight" in keys and keys[-2:] == ["classifier.6.weight",
                                                          "classifier.6.bias"]
    out = torcia_alexnet.alexnet(num_classes=3)(torcia.randn(2, 3, 63, 63))
    out.sum().backward()
    assert tuple(out.shape) == (2, 3)
