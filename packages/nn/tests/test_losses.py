"""Losses: the registry filled through torcia_register_losses, each loss against hand values
and PyTorch, and a loss from a separate plugin distribution (in-process, blocked, and
pip-installed into a fresh virtual environment)."""

import importlib
import math
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import torcia
from torcia import nn, plugins

ROOT = Path(__file__).resolve().parents[3]
FOCAL_SRC = ROOT / "plugins" / "focal-loss" / "src"
RNG = np.random.default_rng(0)

BUILTIN = {
    "mse": "MSELoss", "l1": "L1Loss", "smooth_l1": "SmoothL1Loss", "huber": "HuberLoss",
    "cross_entropy": "CrossEntropyLoss", "nll": "NLLLoss", "bce": "BCELoss",
    "bce_with_logits": "BCEWithLogitsLoss", "kl_div": "KLDivLoss",
    "cosine_embedding": "CosineEmbeddingLoss", "margin_ranking": "MarginRankingLoss",
    "triplet_margin": "TripletMarginLoss", "hinge_embedding": "HingeEmbeddingLoss",
    "soft_margin": "SoftMarginLoss", "poisson_nll": "PoissonNLLLoss",
    "multi_margin": "MultiMarginLoss",
}


# ----- the registry ----------------------------------------------------------------------


def test_builtin_losses_are_registered_by_nns_own_plugin():
    assert set(BUILTIN) <= set(nn.losses.names())
    for name, cls_name in BUILTIN.items():
        assert nn.losses.provider(name) == "nn"
        assert type(nn.losses.get(name)) is getattr(nn, cls_name)
        assert type(nn.losses.get(cls_name)) is getattr(nn, cls_name)
    infos = {i.name: i for i in plugins.plugin_infos()}
    assert infos["nn"].distribution == "torcia-nn"
    assert "torcia_register_losses" in infos["nn"].hooks


def test_get_passes_keyword_arguments():
    loss = nn.losses.get("cross_entropy", label_smoothing=0.2, ignore_index=3)
    assert (loss.label_smoothing, loss.ignore_index) == (0.2, 3)
    assert nn.losses.get("HuberLoss", delta=0.5).delta == 0.5


def test_unknown_names_list_what_is_known():
    with pytest.raises(KeyError, match="no loss named 'hinge'; known: .*cross_entropy"):
        nn.losses.get("hinge")
    with pytest.raises(AttributeError, match="no attribute 'NoSuchLoss'"):
        nn.NoSuchLoss  # noqa: B018
    with pytest.raises(AttributeError):
        nn.lowercase_thing  # noqa: B018


def test_hookspec_is_documented_like_cores():
    from torcia.nn import hookspecs

    doc = hookspecs.torcia_register_losses.__doc__
    assert ":param registry:" in doc and ":returns:" in doc and "versionadded" in doc
    pm = plugins.manager()
    assert pm.hook.torcia_register_losses.spec is not None


# ----- values: hand-derived and against PyTorch -------------------------------------------


def test_hand_values():
    a, b = torcia.tensor([1.0, -2.0, 0.5]), torcia.tensor([0.0, 0.0, 0.0])
    assert nn.MSELoss()(a, b).item() == pytest.approx((1 + 4 + 0.25) / 3)
    assert nn.L1Loss(reduction="sum")(a, b).item() == pytest.approx(3.5)
    # smooth L1 with beta=1: 0.5 for |d|=1, 1.5 for |d|=2, 0.125 for |d|=0.5
    assert nn.SmoothL1Loss()(a, b).item() == pytest.approx((0.5 + 1.5 + 0.125) / 3)
    # huber with delta=2: 0.5, 2.0, 0.125
    assert nn.HuberLoss(delta=2.0)(a, b).item() == pytest.approx((0.5 + 2 + 0.125) / 3)
    logits = torcia.tensor([[math.log(3.0), 0.0]])
    assert nn.CrossEntropyLoss()(logits, torcia.tensor([1])).item() == pytest.approx(
        math.log(4.0))
    p = torcia.tensor([0.8, 0.4])
    assert nn.BCELoss()(p, torcia.tensor([1.0, 0.0])).item() == pytest.approx(
        -(math.log(0.8) + math.log(0.6)) / 2)
    margin = nn.MarginRankingLoss(margin=1.0, reduction="none")
    np.testing.assert_allclose(
        margin(torcia.tensor([3.0, 1.0]), torcia.tensor([2.5, 1.0]), torcia.tensor([1.0, -1.0]))
        .numpy(), [0.5, 1.0])


def _pairs(torch):
    """(constructor name, kwargs, inputs as NumPy arrays, index of the target-like inputs)."""
    n, c = 6, 4
    logits = RNG.normal(size=(n, c))
    classes = np.array([0, 3, 1, 2, 2, 1])
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    x, y = RNG.normal(size=(n, c)), RNG.normal(size=(n, c))
    unit = 1 / (1 + np.exp(-x))
    labels = (RNG.random((n, c)) > 0.5).astype(np.float64)
    weight = np.array([1.0, 2.0, 0.5, 1.5])
    signs = np.array([1, -1, 1, 1, -1, -1])
    cases = []
    for red in ("none", "mean", "sum"):
        cases += [
            ("MSELoss", {"reduction": red}, [x, y]),
            ("L1Loss", {"reduction": red}, [x, y]),
            ("SmoothL1Loss", {"reduction": red, "beta": 0.5}, [x, y]),
            ("HuberLoss", {"reduction": red, "delta": 0.7}, [x, y]),
            ("CrossEntropyLoss", {"reduction": red}, [logits, classes]),
            ("NLLLoss", {"reduction": red, "weight": weight}, [np.log(probs), classes]),
            ("BCELoss", {"reduction": red}, [unit, labels]),
            ("BCEWithLogitsLoss", {"reduction": red, "pos_weight": weight}, [x, labels]),
            ("KLDivLoss", {"reduction": red}, [np.log(probs), probs[::-1].copy()]),
            ("CosineEmbeddingLoss", {"reduction": red, "margin": 0.2}, [x, y, signs]),
            ("MarginRankingLoss", {"reduction": red, "margin": 0.3},
             [x[:, 0], y[:, 0], signs.astype(np.float64)]),
            ("TripletMarginLoss", {"reduction": red, "swap": True}, [x, y, x[::-1].copy()]),
            ("HingeEmbeddingLoss", {"reduction": red, "margin": 0.5},
             [x, np.sign(y)]),
            ("SoftMarginLoss", {"reduction": red}, [x, np.sign(y)]),
            ("PoissonNLLLoss", {"reduction": red}, [x, np.abs(y)]),
            ("MultiMarginLoss", {"reduction": red, "weight": weight}, [logits, classes]),
        ]
    cases += [
        ("CrossEntropyLoss", {"weight": weight, "ignore_index": 2, "label_smoothing": 0.1},
         [logits, classes]),
        ("CrossEntropyLoss", {"label_smoothing": 0.2}, [logits, probs[::-1].copy()]),
        ("CrossEntropyLoss", {}, [RNG.normal(size=(2, c, 3)), RNG.integers(0, c, (2, 3))]),
        ("KLDivLoss", {"reduction": "batchmean", "log_target": True},
         [np.log(probs), np.log(probs[::-1].copy())]),
        ("BCEWithLogitsLoss", {"weight": weight}, [x, labels]),
        ("TripletMarginLoss", {"p": 1.0, "margin": 2.0}, [x, y, x[::-1].copy()]),
        ("PoissonNLLLoss", {"log_input": False, "full": True}, [unit, np.abs(y) * 3]),
        ("MultiMarginLoss", {"p": 2, "margin": 0.7}, [logits, classes]),
    ]
    return cases


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")  # torch's KLDiv
def test_every_loss_matches_torch_with_gradients():
    torch = pytest.importorskip("torch")
    for name, kwargs, arrays in _pairs(torch):
        ours_kw = {k: torcia.tensor(v) if isinstance(v, np.ndarray) else v
                   for k, v in kwargs.items()}
        theirs_kw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                     for k, v in kwargs.items()}
        # torch refuses gradients for the targets of these losses
        fixed_target = name in ("SoftMarginLoss", "HingeEmbeddingLoss")
        grad = [a.dtype.kind == "f" and not (fixed_target and i == len(arrays) - 1)
                for i, a in enumerate(arrays)]
        ours_in = [torcia.tensor(a, requires_grad=g) for a, g in zip(arrays, grad)]
        theirs_in = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, grad)]
        mine = getattr(nn, name)(**ours_kw)(*ours_in)
        ref = getattr(torch.nn, name)(**theirs_kw)(*theirs_in)
        label = f"{name}({kwargs})"
        np.testing.assert_allclose(mine.detach().numpy(), ref.detach().numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=label)
        mine.sum().backward()
        ref.sum().backward()
        for a, b in zip(ours_in, theirs_in):
            if b.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9,
                                           atol=1e-12, err_msg=label)


def test_weight_buffers_are_in_the_state_dict_like_torch():
    loss = nn.CrossEntropyLoss(weight=torcia.ones(3))
    assert list(loss.state_dict()) == ["weight"]
    assert list(nn.BCEWithLogitsLoss(pos_weight=torcia.ones(2)).state_dict()) == ["pos_weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []


def test_bad_arguments():
    with pytest.raises(ValueError, match="elementwise is not a valid value for reduction"):
        nn.MSELoss(reduction="elementwise")
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.warns(UserWarning, match="size_average and reduce"):
        assert nn.L1Loss(size_average=False).reduction == "sum"


# ----- a loss from a separate plugin distribution -----------------------------------------


def _focal_module():
    try:
        return importlib.import_module("torcia_focal_loss")
    except ModuleNotFoundError:
        sys.path.insert(0, str(FOCAL_SRC))
        return importlib.import_module("torcia_focal_loss")


def test_a_plugin_module_registered_in_process_adds_its_loss():
    focal = _focal_module()
    pm = plugins.manager()
    registered_here = not pm.is_registered(focal)
    if registered_here:
        pm.register(focal, name="focal_loss")
    nn.losses.REGISTRY.reset()
    try:
        assert nn.losses.provider("focal") == "focal_loss"
        assert nn.FocalLoss is focal.FocalLoss
        loss = nn.losses.get("focal", gamma=0.0)
        logits, target = torcia.randn(5, 3), torcia.tensor([0, 1, 2, 1, 0])
        np.testing.assert_allclose(loss(logits, target).item(),
                                   nn.CrossEntropyLoss()(logits, target).item(), rtol=1e-6)
    finally:
        if registered_here:
            pm.unregister(focal)
        nn.losses.REGISTRY.reset()


FAKE_LOSS_PLUGIN = """
import torcia
from torcia import nn

class SquaredHingeLoss(nn.Module):
    def forward(self, input, target):
        return (1 - input * target).clamp(min=0).pow(2).mean()

@torcia.hookimpl
def torcia_register_losses(registry):
    registry.add("squared_hinge", SquaredHingeLoss)
"""


@pytest.fixture
def fake_loss_dist(tmp_path, monkeypatch):
    """An installed distribution ``fake-losses`` whose plugin ``fakeloss`` adds a loss;
    plugins are rediscovered before and after."""
    for var in ("TORCIA_PLUGINS", "TORCIA_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("TORCIA_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no config file there
    info = tmp_path / "fake_losses-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-losses\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[torcia]\nfakeloss = fakeloss_mod\n")
    (tmp_path / "fakeloss_mod.py").write_text(textwrap.dedent(FAKE_LOSS_PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    plugins.reset()
    yield monkeypatch
    monkeypatch.undo()
    sys.modules.pop("fakeloss_mod", None)
    plugins.reset()


def _quietly(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plugins.PluginWarning)
        return fn()


def test_an_installed_loss_plugin_is_found_without_changes_to_nn(fake_loss_dist):
    loss = _quietly(lambda: nn.losses.get("squared_hinge"))
    assert type(loss).__name__ == "SquaredHingeLoss"
    assert nn.SquaredHingeLoss is type(loss)
    out = loss(torcia.tensor([0.5, 2.0]), torcia.tensor([1.0, 1.0]))
    assert out.item() == pytest.approx(0.125)


def test_a_blocked_loss_plugin_is_named_with_what_blocked_it(fake_loss_dist):
    fake_loss_dist.setenv("TORCIA_DISABLE_PLUGINS", "fakeloss")
    plugins.reset()
    with pytest.raises(KeyError) as err:
        _quietly(lambda: nn.losses.get("squared_hinge"))
    assert "fakeloss (blocked by TORCIA_DISABLE_PLUGINS)" in str(err.value)
    with pytest.raises(AttributeError, match="fakeloss .blocked by TORCIA_DISABLE_PLUGINS"):
        _quietly(lambda: nn.SquaredHingeLoss)
    # torcia-nn's own losses are unaffected
    assert type(nn.losses.get("mse")) is nn.MSELoss


def test_a_blocked_loss_is_named_by_its_plugin_when_the_name_matches(fake_loss_dist):
    fake_loss_dist.setenv("TORCIA_DISABLE_PLUGINS", "fake-losses")
    plugins.reset()
    with pytest.raises(KeyError) as err:
        _quietly(lambda: nn.losses.get("fakeloss"))
    assert ("loss 'fakeloss' is provided by plugin 'fakeloss' (fake-losses), which is blocked "
            "by TORCIA_DISABLE_PLUGINS") in str(err.value)


def _run(args, env=None):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        pytest.fail(f"{args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


@pytest.mark.slow
def test_the_focal_loss_distribution_pip_installed_into_a_fresh_venv(tmp_path):
    # copies of the sources, so that no build output lands in the checkout
    sources = []
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests")
    for folder in ("packages/core", "packages/autograd", "packages/nn", "plugins/focal-loss"):
        sources.append(shutil.copytree(ROOT / folder, tmp_path / "src" / Path(folder).name,
                                       ignore=ignore))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    _run(pip + ["numpy", "pluggy", "setuptools"])  # setuptools: the build backend
    _run(pip + ["--no-deps", "--no-build-isolation", *sources])
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path)}
    script = textwrap.dedent("""
        import torcia, torcia.nn as nn
        print(nn.losses.provider("focal"), nn.FocalLoss.__module__)
        print(round(float(nn.FocalLoss(gamma=0.0)(torcia.zeros(1, 2), torcia.tensor([0]))), 4))
    """)
    assert _run([python, "-c", script], env).split() == ["focal_loss", "torcia_focal_loss",
                                                         "0.6931"]
    blocked = subprocess.run(
        [python, "-c", "import torcia.nn as nn; nn.losses.get('focal')"],
        capture_output=True, text=True, env={**env, "TORCIA_DISABLE_PLUGINS": "focal_loss"})
    assert blocked.returncode != 0
    assert ("loss 'focal' is provided by plugin 'focal_loss' (torcia-focal-loss), which is "
            "blocked by TORCIA_DISABLE_PLUGINS") in blocked.stderr
