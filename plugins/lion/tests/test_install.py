"""torcia-lion installed for real: a fresh virtual environment with torcia's parts and the
plugin built from this checkout (numpy and pluggy from the index or pip's cache), where
Lion must appear by name and as ``torcia.optim.Lion``, and be refused by name when
blocked."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PARTS = ["packages/core", "packages/autograd", "packages/nn", "packages/optim", "plugins/lion"]

SCRIPT = textwrap.dedent("""
    import json
    import torcia, torcia.optim
    out = {"names": torcia.optim.optimizers.names(), "file": torcia.optim.__file__}
    try:
        w = torcia.tensor([1.0, -1.0], requires_grad=True)
        opt = torcia.optim.create("lion", [w], lr=0.1)
        (w * w).sum().backward()
        opt.step()
        out["attribute"] = torcia.optim.Lion is type(opt)
        out["after_step"] = w.tolist()
    except (KeyError, AttributeError) as exc:
        out["error"] = str(exc)
        try:
            torcia.optim.Lion
        except AttributeError as attr_exc:
            out["attribute_error"] = str(attr_exc)
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    home = tmp_path_factory.mktemp("lion-venv")
    subprocess.run([sys.executable, "-m", "venv", str(home / "env")], check=True)
    python = str(home / "env" / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["setuptools>=77", "numpy", "pluggy"], check=True)
    # built from copies: a build in the checkout would leave build/ and *.egg-info there
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    copies = [shutil.copytree(ROOT / p, home / "src" / p, ignore=ignore) for p in PARTS]
    subprocess.run(pip + ["--no-deps", "--no-build-isolation"] + [str(c) for c in copies],
                   check=True, cwd=home)
    return python, home


def run_in(venv, **env):
    python, home = venv
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCIA_", "PYTHON", "VIRTUAL_ENV"))}
    environ["XDG_CONFIG_HOME"] = str(home)  # no config file there
    environ.update(env)
    done = subprocess.run([python, "-c", SCRIPT], cwd=home, env=environ, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_installed_plugin_provides_lion(venv):
    out = run_in(venv)
    assert "site-packages" in out["file"]  # not this checkout
    assert "lion" in out["names"] and "adamw" in out["names"]
    assert out["attribute"] is True
    assert out["after_step"] == pytest.approx([0.9, -0.9])


@pytest.mark.slow
def test_blocking_the_plugin_names_it_and_the_blocker(venv):
    out = run_in(venv, TORCIA_DISABLE_PLUGINS="lion")
    assert "lion" not in out["names"]
    blocked = ("optimizer 'lion' is provided by plugin 'lion' (torcia-lion), which is "
               "blocked by TORCIA_DISABLE_PLUGINS")
    assert blocked in out["error"]
    assert "plugin 'lion' (torcia-lion), which is blocked by TORCIA_DISABLE_PLUGINS" in (
        out["attribute_error"])
