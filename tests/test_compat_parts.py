"""torcia.compat across parts: ``torch.nn``, ``torch.utils.data``, ``torchvision`` and the
PyTorch module paths user code imports from."""

import subprocess
import sys
import textwrap

import pytest

import torcia
from torcia import compat


@pytest.fixture
def hook():
    compat.install()
    yield
    compat.uninstall()


def test_submodules_map_onto_parts(hook):
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import transforms

    import torcia.data
    import torcia.vision

    assert nn.Linear is torcia.nn.Linear
    assert F.relu is torcia.nn.functional.relu
    assert DataLoader is torcia.data.DataLoader
    assert transforms.ToTensor is torcia.vision.transforms.ToTensor
    assert torchvision.datasets.MNIST is torcia.vision.datasets.MNIST


def test_pytorch_module_paths(hook):
    from torch.nn.modules.activation import MultiheadAttention
    from torch.nn.modules.linear import NonDynamicallyQuantizableLinear
    from torch.optim.optimizer import Optimizer
    from torch.serialization import load, save
    from torch.utils.data.dataloader import DataLoader
    from torch.utils.data.dataset import Dataset
    from torch.utils.data.sampler import RandomSampler

    assert MultiheadAttention is torcia.nn.MultiheadAttention
    assert issubclass(NonDynamicallyQuantizableLinear, torcia.nn.Linear)
    assert Optimizer is torcia.optim.Optimizer
    assert (save, load) == (torcia.save, torcia.load)
    assert DataLoader is torcia.data.DataLoader
    assert Dataset is torcia.data.Dataset
    assert RandomSampler is torcia.data.RandomSampler


def test_a_training_script_runs_unmodified(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import argparse
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.utils.data import DataLoader, TensorDataset

        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=3)
        args = parser.parse_args()
        torch.manual_seed(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        x = torch.randn(128, 4)
        y = (x.sum(1) > 0).long()
        loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for epoch in range(args.epochs):
            total = 0.0
            for xb, yb in loader:
                xb, yb = xb.to(device), yb.to(device)
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                total += loss.item()
            print(f"epoch {epoch} loss {total / len(loader):.4f}")
        torch.save(model.state_dict(), "model.pt")
    """))
    result = subprocess.run([sys.executable, "-m", "torcia.compat", str(script), "--epochs", "3"],
                            capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines()]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert (tmp_path / "model.pt").exists()


def test_torchvision_version_and_io(hook):
    import torch
    import torchvision
    from torchvision import io
    from torchvision.io import ImageReadMode, decode_image

    import torcia.vision.io

    # the torchvision release made with the PyTorch release torcia follows
    assert (torch.__version__, torchvision.__version__) == ("2.13.0", "0.28.0")
    assert torchvision.__version__ >= "0.20" and torcia.vision.__version__ == "0.1.0"
    assert decode_image is torcia.vision.io.decode_image
    assert ImageReadMode.RGB is io.ImageReadMode.RGB
