"""The torcia-distributions examples train: REINFORCE with a Categorical policy, and a VAE
with Normal.rsample and kl_divergence (examples/reinforce_corridor.py, examples/vae.py)."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torcia.distributions")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mean(xs):
    return sum(xs) / len(xs)


def test_reinforce_learns_to_walk_the_corridor():
    costs = load("reinforce_corridor").main(["--iterations", "30"])
    # from a random walk (rarely reaching the end) to walking straight right: -0.9 ** 5
    assert mean(costs[:3]) > -0.3
    assert mean(costs[-5:]) < -0.55
    assert mean(costs[-5:]) < mean(costs[:5])


def test_vae_negative_elbo_falls():
    losses = load("vae").main(["--steps", "150"])
    assert mean(losses[-10:]) < mean(losses[:10]) - 8.0
