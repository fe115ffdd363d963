"""Optimizers and schedulers by name through optim's hooks: the built-in plugin, a plugin
module registered in process (torcia-lion's), and a blocked plugin."""

import importlib.metadata
import re
from pathlib import Path

import pytest

import torcia
from torcia import plugins
from torcia.optim import hookspecs, lr_scheduler, optimizers

LION_SRC = Path(__file__).resolve().parents[3] / "plugins" / "lion" / "src"


def params():
    return [torcia.zeros(2, requires_grad=True)]


def test_hookspecs_are_added_and_every_hookimpl_matches_one():
    pm = plugins.manager()
    assert hookspecs in plugins._state.spec_modules
    for name in ("torcia_register_optimizers", "torcia_register_lr_schedulers"):
        assert getattr(pm.hook, name).spec is not None
    pm.check_pending()


def test_builtin_optimizers_by_lowercase_or_class_name():
    assert set(optimizers.names()) >= {"sgd", "adam", "adamw", "adamax", "nadam", "radam",
                                       "rmsprop", "adagrad", "adadelta", "lbfgs"}
    assert optimizers.provider("adamw") == "optim"
    for name in ("adamw", "AdamW", "ADAMW"):
        opt = torcia.optim.create(name, params(), lr=0.5)
        assert type(opt) is torcia.optim.AdamW and opt.defaults["lr"] == 0.5


def test_builtin_schedulers_by_name():
    opt = torcia.optim.SGD(params(), lr=1.0)
    for name in ("cosine_annealing", "CosineAnnealingLR"):
        sched = lr_scheduler.create(name, opt, T_max=4)
        assert type(sched) is lr_scheduler.CosineAnnealingLR
    assert len(lr_scheduler.schedulers.names()) == 15


def test_unknown_names_list_the_known_ones():
    with pytest.raises(KeyError, match="no optimizer named 'adamz'; known: adadelta, "):
        torcia.optim.create("adamz", params())
    with pytest.raises(KeyError, match="no lr scheduler named 'warmup'"):
        lr_scheduler.create("warmup", torcia.optim.SGD(params(), lr=1.0))
    with pytest.raises(AttributeError, match="module 'torcia.optim' has no attribute 'Adamz'"):
        torcia.optim.Adamz  # noqa: B018


@pytest.fixture
def lion_module(monkeypatch):
    """torcia-lion's plugin module registered by hand, as if its distribution were
    installed; the optimizer registry is rebuilt before and after."""
    monkeypatch.syspath_prepend(str(LION_SRC))
    import torcia_lion

    pm = plugins.manager()
    already = pm.is_registered(torcia_lion)  # the distribution may be installed too
    if not already:
        pm.register(torcia_lion, name="lion-in-process")
    optimizers.reset()
    yield torcia_lion
    if not already:
        pm.unregister(torcia_lion)
    optimizers.reset()


def test_a_plugin_optimizer_appears_by_name_and_as_an_attribute(lion_module):
    assert "lion" in optimizers.names()
    assert torcia.optim.Lion is lion_module.Lion
    w = torcia.tensor([1.0, -1.0], requires_grad=True)
    opt = torcia.optim.create("lion", [w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    assert w.tolist() == pytest.approx([0.9, -0.9])


@pytest.fixture
def lion_blocked(monkeypatch, tmp_path):
    """Plugins re-discovered with torcia-lion's plugin on the blocklist."""
    if not importlib.metadata.entry_points(group="torcia", name="lion"):
        pytest.skip("torcia-lion is not installed (pip install plugins/lion)")
    monkeypatch.delenv("TORCIA_PLUGINS", raising=False)
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "lion")
    monkeypatch.setenv("TORCIA_CONFIG", str(tmp_path / "absent.toml"))
    plugins._reset()
    yield
    monkeypatch.undo()
    plugins._reset()


def test_a_blocked_plugin_is_named_with_what_blocked_it(lion_blocked):
    expected = ("optimizer 'lion' is provided by plugin 'lion' (torcia-lion), which is "
                "blocked by TORCIA_DISABLE_PLUGINS")
    with pytest.raises(KeyError, match=re.escape(expected)):
        torcia.optim.create("lion", params())
    with pytest.raises(AttributeError, match="plugin 'lion' \\(torcia-lion\\), which is "
                                             "blocked by TORCIA_DISABLE_PLUGINS"):
        torcia.optim.Lion  # noqa: B018
    assert "adam" in optimizers.names()  # the rest keeps working
