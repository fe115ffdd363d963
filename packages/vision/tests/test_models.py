"""Models: they build, run forward and backward, and have torchvision's parameter counts
and state-dict keys; plugins add models through the registry hook."""

import types

import numpy as np
import pytest

import torcia
from torcia import plugins
from torcia.vision import _registry, models

# torchvision's published parameter counts (1000 classes)
COUNTS = {
    "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872,
}
VGG_COUNTS = {
    "vgg11": 132_863_336, "vgg16": 138_357_544, "vgg11_bn": 132_868_840,
    "vgg16_bn": 138_365_992,
}


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_parameter_counts(name):
    assert n_params(models.get_model(name)) == COUNTS[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VGG_COUNTS))
def test_vgg_parameter_counts_forward_backward(name):
    # one build serves both checks: a VGG takes seconds to initialise on NumPy
    model = models.get_model(name)
    assert n_params(model) == VGG_COUNTS[name]
    assert tuple(forward_backward(model, (2, 3, 32, 32)).shape) == (2, 1000)


def test_lenet_counts_by_hand():
    # (1*25+1)*6 + (6*25+1)*16 + (400+1)*120 + (120+1)*84 + (84+1)*10
    assert n_params(models.lenet()) == 156 + 2416 + 48120 + 10164 + 850
    assert n_params(models.lenet(input_size=32)) == 61706
    with pytest.raises(ValueError, match="28x28 or 32x32"):
        models.lenet(input_size=64)


def forward_backward(model, shape):
    torcia.manual_seed(0)
    model.train()
    out = model(torcia.randn(*shape))
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    return out


@pytest.mark.parametrize("name, shape", [
    ("lenet", (2, 1, 28, 28)), ("small_cnn", (3, 1, 8, 8)), ("resnet18", (2, 3, 32, 32)),
    ("mobilenet_v2", (2, 3, 32, 32)),
])
def test_forward_backward(name, shape):
    out = forward_backward(models.get_model(name, num_classes=7), shape)
    assert tuple(out.shape) == (shape[0], 7)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet34", "resnet50"])
def test_forward_backward_large(name):
    out = forward_backward(models.get_model(name, num_classes=5), (2, 3, 32, 32))
    assert tuple(out.shape) == (2, 5)


def test_eval_mode_is_deterministic():
    model = models.small_cnn().eval()
    x = torcia.randn(2, 1, 8, 8)
    assert bool((model(x) == model(x)).all())


def test_state_dict_keys_follow_torchvision():
    keys = set(models.resnet18().state_dict())
    assert {"conv1.weight", "bn1.running_mean", "bn1.num_batches_tracked",
            "layer1.0.conv1.weight", "layer2.0.downsample.0.weight",
            "layer2.0.downsample.1.running_var", "layer4.1.bn2.bias", "fc.weight",
            "fc.bias"} <= keys
    assert "layer1.0.downsample.0.weight" not in keys
    keys = set(models.resnet50().state_dict())
    assert {"layer1.0.conv3.weight", "layer1.0.downsample.0.weight",
            "layer4.2.bn3.weight"} <= keys
    keys = set(models.mobilenet_v2().state_dict())
    assert {"features.0.0.weight", "features.0.1.running_mean", "features.1.conv.0.0.weight",
            "features.1.conv.1.weight", "features.1.conv.2.weight",
            "features.2.conv.0.0.weight", "features.2.conv.1.0.weight",
            "features.2.conv.2.weight", "features.2.conv.3.weight", "features.18.0.weight",
            "classifier.1.weight"} <= keys
    assert len(models.mobilenet_v2().state_dict()) == 314
    keys = list(models.vgg.make_layers(models.vgg.CONFIGS["A"], batch_norm=True).state_dict())
    assert keys[:3] == ["0.weight", "0.bias", "1.weight"] and "5.running_mean" in keys


def test_resnet_zero_init_residual():
    model = models.resnet18(zero_init_residual=True)
    assert float(model.layer1[0].bn2.weight.abs().sum()) == 0.0
    assert float(model.layer1[0].bn1.weight.sum()) == 64.0


def test_unknown_weights_are_named():
    with pytest.raises(ValueError, match="no weights 'IMAGENET9K' for resnet18; known: "
                                         "DEFAULT, IMAGENET1K_V1"):
        models.resnet18(weights="IMAGENET9K")
    with pytest.raises(ValueError, match="have 1000 classes, not num_classes=10"):
        models.resnet18(weights="DEFAULT", num_classes=10)


@pytest.fixture
def weights_server(tmp_path, monkeypatch):
    """A folder served on 127.0.0.1, with the hub cache under tmp_path."""
    import functools
    import http.server
    import threading

    monkeypatch.setenv("TORCIA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TORCIA_HUB_OFFLINE", raising=False)
    root = tmp_path / "served"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_weights_load_from_the_url_table(weights_server, monkeypatch):
    import hashlib
    import io

    from torcia.vision.models import _weights

    root, base = weights_server
    source = models.mobilenet_v2(num_classes=10).eval()
    buf = io.BytesIO()
    torcia.save(source.state_dict(), buf)
    name = f"mobilenet_v2-{hashlib.sha256(buf.getvalue()).hexdigest()[:8]}.pth"
    (root / name).write_bytes(buf.getvalue())
    monkeypatch.setitem(_weights.URLS, "mobilenet_v2", {"TEST_V1": f"{base}/{name}"})
    monkeypatch.setitem(_weights.NUM_CLASSES, "TEST_V1", 10)

    x = torcia.randn(2, 3, 32, 32)
    expected = source(x).detach().numpy()
    loaded = models.mobilenet_v2(weights="TEST_V1", progress=False).eval()
    np.testing.assert_array_equal(loaded(x).detach().numpy(), expected)
    with pytest.warns(UserWarning, match="'pretrained' is deprecated"):
        legacy = models.mobilenet_v2(pretrained=True, progress=False).eval()
    np.testing.assert_array_equal(legacy(x).detach().numpy(), expected)
    with pytest.warns(UserWarning, match="'pretrained' is deprecated"):
        models.mobilenet_v2(pretrained=False, num_classes=10)

    (root / name).write_bytes(buf.getvalue()[:-1] + b"!")  # a corrupted copy
    for cached in (root.parent / "home" / "hub" / "checkpoints").iterdir():
        cached.unlink()
    with pytest.raises(RuntimeError, match="invalid hash value"):
        models.mobilenet_v2(weights="DEFAULT", progress=False)


def test_unknown_model():
    with pytest.raises(KeyError, match="no model named 'resnet1000'.*resnet18"):
        models.get_model("resnet1000")


@pytest.fixture
def extra_plugin():
    """A plugin module, as another installed distribution would provide, registered in
    process; the registry is rebuilt before and after."""

    @plugins.hookimpl
    def torcia_register_models(registry):
        registry.add("tinynet", lambda num_classes=10: torcia.nn.Linear(4, num_classes))

    module = types.ModuleType("tinynets")
    module.torcia_register_models = torcia_register_models
    pm = plugins.manager()
    pm.register(module, name="tinynets")
    _registry.models.reset()
    yield
    pm.unregister(module)
    _registry.models.reset()


def test_a_plugin_model_is_listed_and_built(extra_plugin):
    names = models.list_models()
    assert "tinynet" in names and "resnet18" in names
    assert _registry.models.provider("tinynet") == "tinynets"
    assert _registry.models.provider("resnet18") == "vision"
    assert models.get_model("tinynet", num_classes=3).out_features == 3


def test_the_hook_is_specified():
    pm = plugins.manager()
    assert pm.hook.torcia_register_models.spec is not None
    assert pm.hook.torcia_register_datasets.spec is not None
