"""The plugin as installed: found through its entry point, by name, as an attribute of
torcia.distributions, in ``python -m torcia plugins``, and refused by name when blocked."""

import json
import os
import subprocess
import sys

import torcia
import torcia.distributions as D
from torcia_example_distribution import Rayleigh


def test_found_by_name_and_as_attribute():
    assert D.distributions.provider("rayleigh") == "rayleigh"
    assert D.Rayleigh is Rayleigh
    assert type(D.create("rayleigh", torcia.tensor(1.0))) is Rayleigh
    assert (Rayleigh, Rayleigh) in D.distributions.kl_pairs()


def run(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env})


def test_listed_by_python_m_torcia_plugins():
    out = subprocess.run([sys.executable, "-m", "torcia", "plugins", "--json"],
                         capture_output=True, text=True, check=True).stdout
    info = {p["name"]: p for p in json.loads(out)["plugins"]}["rayleigh"]
    assert info["distribution"] == "torcia-example-distribution"
    assert info["status"] == "loaded"
    assert info["provides_by_kind"] == {"distribution": ["rayleigh"],
                                        "kl divergence": ["Rayleigh||Rayleigh"]}


def test_blocked_plugin_is_named():
    code = ("import torcia.distributions as D\n"
            "try:\n    D.Rayleigh\nexcept AttributeError as e:\n    print(e)")
    out = run(code, TORCIA_DISABLE_PLUGINS="rayleigh").stdout
    assert "provided by plugin 'rayleigh' (torcia-example-distribution)" in out
    assert "blocked by TORCIA_DISABLE_PLUGINS" in out
