"""Distributions and KL pairs by name through the ``torcia_register_distributions`` hook:
the built-in plugin, a plugin registered in process, and ``python -m torcia plugins``.
(An installed plugin distribution: plugins/example-distribution/tests.)"""

import json
import os
import subprocess
import sys
import types

import pytest

import torcia
import torcia.distributions as D
from torcia import plugins
from torcia.distributions import distributions, hookspecs


def test_hookspec_is_added_and_every_hookimpl_matches_one():
    pm = plugins.manager()
    assert pm.hook.torcia_register_distributions.spec is not None
    assert pm.hook.torcia_register_distributions.spec.namespace is hookspecs
    pm.check_pending()


def test_builtin_distributions_by_lowercase_or_class_name():
    assert set(distributions.names()) >= {"normal", "categorical", "gamma", "dirichlet"}
    assert distributions.provider("normal") == "distributions"
    for name in ("normal", "Normal"):
        assert type(D.create(name, 0.0, 1.0)) is D.Normal
    with pytest.raises(KeyError, match="no distribution named 'gaussian'; known: "):
        D.create("gaussian", 0.0, 1.0)
    with pytest.raises(AttributeError, match="has no attribute 'Gaussian'"):
        D.Gaussian  # noqa: B018


def test_builtin_kl_pairs_come_through_the_hook():
    pairs = distributions.kl_pairs()
    assert (D.Normal, D.Normal) in pairs and (D.Beta, D.Uniform) in pairs


class Shifted(D.Normal):
    """A test distribution: a Normal under another name."""


def _kl_shifted(p, q):
    return torcia.zeros(p.batch_shape) + 42.0


@pytest.fixture
def in_process_plugin():
    plugin = types.ModuleType("shifted_plugin")

    @plugins.hookimpl
    def torcia_register_distributions(registry):
        registry.add("shifted", Shifted)
        registry.add_kl(Shifted, Shifted, _kl_shifted)

    plugin.torcia_register_distributions = torcia_register_distributions
    pm = plugins.manager()
    pm.register(plugin, name="shifted-test")
    distributions.reset()
    yield
    pm.unregister(plugin)
    distributions.reset()


def test_a_plugin_adds_a_distribution_and_a_kl_pair(in_process_plugin):
    assert D.Shifted is Shifted
    assert type(D.create("shifted", 0.0, 1.0)) is Shifted
    assert D.kl_divergence(Shifted(0.0, 1.0), Shifted(1.0, 1.0)).item() == 42.0
    # the more specific pair wins over Normal's; Normal's still serves mixed pairs
    assert D.kl_divergence(Shifted(0.0, 1.0), D.Normal(1.0, 1.0)).item() == 0.5


def test_the_plugin_pair_leaves_with_the_plugin():
    plugin = types.ModuleType("shifted_plugin")
    plugin.torcia_register_distributions = plugins.hookimpl(
        lambda registry: registry.add_kl(Shifted, Shifted, _kl_shifted))
    plugin.torcia_register_distributions.__name__ = "torcia_register_distributions"
    pm = plugins.manager()
    pm.register(plugin, name="shifted-test")
    distributions.reset()
    try:
        assert D.kl_divergence(Shifted(0.0, 1.0), Shifted(1.0, 1.0)).item() == 42.0
    finally:
        pm.unregister(plugin)
        distributions.reset()
    assert D.kl_divergence(Shifted(0.0, 1.0), Shifted(1.0, 1.0)).item() == 0.5


def test_add_kl_checks_its_arguments():
    registry = D.DistributionRegistry.__new__(D.DistributionRegistry)
    with pytest.raises(TypeError, match="two Distribution subclasses"):
        registry.add_kl(int, D.Normal, _kl_shifted)
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(D.Normal, float)


def test_python_m_torcia_plugins_lists_them():
    out = subprocess.run([sys.executable, "-m", "torcia", "plugins", "--json"],
                         capture_output=True, text=True, check=True).stdout
    info = {p["name"]: p for p in json.loads(out)["plugins"]}["distributions"]
    assert info["distribution"] == "torcia-distributions"
    assert info["hooks"] == ["torcia_register_distributions"]
    kinds = info["provides_by_kind"]
    assert "normal" in kinds["distribution"]
    assert "Normal||Normal" in kinds["kl divergence"]


def test_missing_install_names_the_distribution():
    # the part's folder taken off torcia's path: as if torcia-distributions were not installed
    code = ("import torcia\n"
            "torcia.__path__[:] = [p for p in torcia.__path__ if 'distributions' not in p]\n"
            "import torcia.distributions")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    assert "it is part of the torcia-distributions distribution, which is not installed" in err
    # core's message: parts come from a wheelhouse or a checkout, never from PyPI by name
    assert "python tools/install_parts.py distributions" in err
    assert "not published on PyPI" in err


def test_blocking_the_builtin_plugin_is_named_in_the_kl_error():
    code = ("import torcia.distributions as D\n"
            "try:\n    D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(1.0, 1.0))\n"
            "except NotImplementedError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TORCIA_DISABLE_PLUGINS": "distributions"}).stdout
    assert "No KL(p || q) is implemented for p type Normal and q type Normal" in out
    assert ("Blocked plugins that may provide it: distributions (torcia-distributions, "
            "blocked by TORCIA_DISABLE_PLUGINS)") in out
