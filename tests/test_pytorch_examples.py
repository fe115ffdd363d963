"""The PyTorch programs in examples/pytorch run unmodified on torcia through
``python -m torcia.compat`` and their loss falls; where PyTorch is installed, the same
program under PyTorch ends at a comparable loss.

Each program prints ``loss <number>`` lines (the quantity that should fall); other numbers
it prints use other words.
"""

import importlib.util
import math
import pathlib
import re
import subprocess
import sys

import pytest

import torcia

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples" / "pytorch"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))
LOSS = re.compile(r"\bloss (\S+)")

#: torcia APIs a program needs that come from parts or work not on every install.
NEEDS = {
    "policy_gradient.py": ["distributions"],
    "metric_learning.py": ["cdist"],
    # torch.utils.tensorboard writes through the tensorboard package (core's extra)
    "sequence_swa.py": ["package tensorboard"],
}


def _missing(script):
    missing = []
    for name in NEEDS.get(script, []):
        if name.startswith("package "):
            found = importlib.util.find_spec(name.split()[1]) is not None
        elif name == "distributions":
            found = importlib.util.find_spec(f"torcia.{name}") is not None
        else:
            found = hasattr(torcia, name)
        if not found:
            missing.append(name if name.startswith("package ") else f"torch.{name}")
    return missing


def _run(argv, timeout=240):
    result = subprocess.run([sys.executable, *argv, "--epochs", "1"], capture_output=True,
                            text=True, timeout=timeout, cwd=EXAMPLES)
    assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stderr[-3000:]}"
    losses = [float(v) for v in LOSS.findall(result.stdout)]
    assert len(losses) >= 2, f"fewer than two losses printed:\n{result.stdout}"
    assert all(math.isfinite(v) for v in losses), losses
    return losses


def test_corpus_is_complete():
    assert len(SCRIPTS) >= 15
    for name in SCRIPTS:
        source = (EXAMPLES / name).read_text()
        assert "import torch" in source and "torcia" not in source, name
        assert '"--epochs"' in source, name


@pytest.mark.parametrize("script", SCRIPTS)
def test_runs_on_torcia_and_loss_falls(script):
    missing = _missing(script)
    if missing:
        pytest.skip(f"needs {', '.join(missing)}, not in this install")
    losses = _run(["-m", "torcia.compat", script])
    assert losses[-1] < losses[0], f"loss did not fall: {losses}"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_comparable_to_pytorch(script):
    pytest.importorskip("torch")
    source = (EXAMPLES / script).read_text()
    if "torchvision" in source:
        pytest.importorskip("torchvision")
    missing = _missing(script)
    if missing:
        pytest.skip(f"needs {', '.join(missing)}, not in this install")
    ours = _run(["-m", "torcia.compat", script])
    theirs = _run([script])
    assert theirs[-1] < theirs[0]
    # different random streams: the same progress, not the same numbers
    start = max(abs(ours[0]), abs(theirs[0]))
    assert abs(ours[-1] - theirs[-1]) <= 0.25 * start + 0.05, (ours, theirs)
