"""Lion against its published update rule (NumPy replay), its kernel against its
per-parameter path, and its registration through the installed plugin."""

import numpy as np
import pytest
import torcia_lion

import torcia

RNG = np.random.default_rng(7)
INIT = [RNG.normal(size=4), RNG.normal(size=(3, 2))]
TARGET = [RNG.normal(size=4), RNG.normal(size=(3, 2))]


def replay(lr, betas, weight_decay, steps):
    """Algorithm 1 of Chen et al. (2023) on the loss sum((theta - target)**2)."""
    b1, b2 = betas
    out = []
    for theta, target in zip(INIT, TARGET):
        theta, m = theta.copy(), np.zeros_like(theta)
        for _ in range(steps):
            g = 2 * (theta - target)
            c = b1 * m + (1 - b1) * g
            theta = theta - lr * (np.sign(c) + weight_decay * theta)
            m = b2 * m + (1 - b2) * g
        out.append(theta)
    return out


def run(steps, dtype=torcia.float64, **options):
    params = [torcia.tensor(p, dtype=dtype, requires_grad=True) for p in INIT]
    targets = [torcia.tensor(t, dtype=dtype) for t in TARGET]
    opt = torcia_lion.Lion(params, **options)
    for _ in range(steps):
        opt.zero_grad()
        sum(((p - t) ** 2).sum() for p, t in zip(params, targets)).backward()
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


@pytest.mark.parametrize("options", [
    {"lr": 0.01},
    {"lr": 0.02, "betas": (0.8, 0.95), "weight_decay": 0.5},
])
def test_trajectory_follows_the_paper(options):
    full = {"betas": (0.9, 0.99), "weight_decay": 0.0, **options}
    got, _ = run(15, **options)
    for g, e in zip(got, replay(full["lr"], full["betas"], full["weight_decay"], 15)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_kernel_and_per_parameter_path_agree_exactly(monkeypatch):
    monkeypatch.setitem(torcia.device("cpu").backend.kernels, "lion_step", torcia_lion.lion_step)
    fused, _ = run(10, dtype=torcia.float32, lr=0.01, weight_decay=0.1, foreach=True)
    plain, _ = run(10, dtype=torcia.float32, lr=0.01, weight_decay=0.1, foreach=False)
    for a, b in zip(fused, plain):
        np.testing.assert_array_equal(a, b)


def test_the_installed_plugin_registers_lion_and_its_kernel():
    infos = {info.name: info for info in torcia.plugins.plugin_infos()}
    info = infos["lion"]
    assert (info.distribution, info.status) == ("torcia-lion", "loaded")
    assert {"optimizer:lion", "kernel:lion_step@cpu"} <= set(info.provides)
    assert torcia.optim.Lion is torcia_lion.Lion
    assert type(torcia.optim.create("lion", [torcia.zeros(1, requires_grad=True)])) is (
        torcia_lion.Lion)


def test_bad_arguments():
    w = torcia.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        torcia_lion.Lion([w], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        torcia_lion.Lion([w], betas=(0.9, 1.0))


def test_resume_from_a_checkpoint(tmp_path):
    _, opt = run(5, lr=0.01)
    params = opt.param_groups[0]["params"]
    torcia.save({"params": [p.detach() for p in params], "opt": opt.state_dict()},
                tmp_path / "ckpt")
    expected, _ = run(8, lr=0.01)
    saved = torcia.load(tmp_path / "ckpt")
    resumed = [p.clone().requires_grad_() for p in saved["params"]]
    targets = [torcia.tensor(t) for t in TARGET]
    opt = torcia_lion.Lion(resumed, lr=0.01)
    opt.load_state_dict(saved["opt"])
    for _ in range(3):
        opt.zero_grad()
        sum(((p - t) ** 2).sum() for p, t in zip(resumed, targets)).backward()
        opt.step()
    for p, e in zip(resumed, expected):
        np.testing.assert_array_equal(p.detach().numpy(), e)
