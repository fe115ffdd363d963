"""Across packages: training under autocast, and profiling a training step."""

import json

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.profiler import profile

optim = pytest.importorskip("torcia.optim")
pytest.importorskip("ml_dtypes")


CENTRES = np.random.default_rng(0).standard_normal((4, 8)) * 3


def _blobs(n, seed):
    rng = np.random.default_rng(seed)
    centres = CENTRES
    y = rng.integers(0, 4, n)
    x = centres[y] + rng.standard_normal((n, 8))
    return torcia.tensor(x, dtype=torcia.float32), torcia.tensor(y)


def _train(mixed):
    torcia.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = optim.SGD(model.parameters(), lr=0.05)
    scaler = torcia.amp.GradScaler(init_scale=2.0 ** 10)
    x, y = _blobs(512, 1)
    for _ in range(60):
        with torcia.autocast("cpu", enabled=mixed):
            logits = model(x)
            assert logits.dtype is (torcia.bfloat16 if mixed else torcia.float32)
            loss = nn.functional.cross_entropy(logits, y)
            assert loss.dtype is torcia.float32
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    xt, yt = _blobs(512, 2)
    with torcia.no_grad():
        return (model(xt).argmax(1) == yt).float().mean().item()


def test_autocast_training_matches_float32_accuracy():
    full, mixed = _train(False), _train(True)
    assert full > 0.9 and abs(full - mixed) < 0.03, (full, mixed)


def test_profile_of_a_training_step(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    opt = optim.Adam(model.parameters())
    x, y = torcia.randn(8, 1, 8, 8), torcia.randint(0, 10, (8,))
    with profile() as prof:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    # which ops rank first depends on the kernels' speed: look for them in the whole table
    every = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1)
    for name in ("conv", "ConvBackward0", "max_pool"):
        assert name in every, every
    top = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=3)
    assert len(top.splitlines()) == len(every.splitlines()) - (
        len(prof.key_averages()) - 3)
    prof.export_chrome_trace(tmp_path / "step.json")
    assert json.loads((tmp_path / "step.json").read_text())["traceEvents"]
