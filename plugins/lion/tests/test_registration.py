"""torcia-lion's plugin module registered by hand in this process, and the plugin blocked:
what a user of ``torcia.optim`` sees in each case."""

import importlib.metadata
import re

import pytest
import torcia_lion

import torcia
from torcia import plugins
from torcia.optim import optimizers


@pytest.fixture
def by_hand():
    """Lion registered under another plugin name with ``manager().register``, the installed
    plugin (if any) set aside; the optimizer registry is rebuilt before and after."""
    pm = plugins.manager()
    installed = pm.get_plugin("lion")
    if installed is not None:
        pm.unregister(installed)
    optimizers.reset()
    assert "lion" not in optimizers.names()
    pm.register(torcia_lion, name="lion-by-hand")
    optimizers.reset()
    yield
    pm.unregister(torcia_lion)
    if installed is not None:
        pm.register(installed, name="lion")
    optimizers.reset()


def test_a_registered_module_provides_lion_by_name_and_as_an_attribute(by_hand):
    assert optimizers.provider("lion") == "lion-by-hand"
    assert torcia.optim.Lion is torcia_lion.Lion
    w = torcia.tensor([1.0, -1.0], requires_grad=True)
    opt = torcia.optim.create("Lion", [w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    assert w.tolist() == pytest.approx([0.9, -0.9])


@pytest.fixture
def blocked(monkeypatch, tmp_path):
    """Plugins re-discovered with torcia-lion's plugin on the blocklist."""
    if not importlib.metadata.entry_points(group="torcia", name="lion"):
        pytest.skip("torcia-lion is not installed (pip install plugins/lion)")
    monkeypatch.delenv("TORCIA_PLUGINS", raising=False)
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "lion")
    monkeypatch.delenv("TORCIA_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no config file there
    plugins.reset()
    yield
    monkeypatch.undo()
    plugins.reset()


def test_a_blocked_plugin_is_named_with_what_blocked_it(blocked):
    expected = ("optimizer 'lion' is provided by plugin 'lion' (torcia-lion), which is "
                "blocked by TORCIA_DISABLE_PLUGINS")
    with pytest.raises(KeyError, match=re.escape(expected)):
        torcia.optim.create("lion", [torcia.zeros(1, requires_grad=True)])
    by_attribute = expected.replace("optimizer 'lion'", "optimizer 'Lion'")
    with pytest.raises(AttributeError, match=re.escape(by_attribute)):
        torcia.optim.Lion  # noqa: B018
    assert "adam" in optimizers.names()  # the rest keeps working
