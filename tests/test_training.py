"""Integration: torcia's parts working together, as a PyTorch user would use them."""

import json

import pytest

import torcia as torch
from torcia import __main__ as cli
from torcia import nn, optim
from torcia.data import DataLoader, TensorDataset


def make_problem(n=256):
    """A separable two-class problem and a small classifier for it."""
    torch.manual_seed(0)
    x = torch.randn(n, 4)
    y = (x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) > 0).long()
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    return x, y, model


def train(model, opt, loader, epochs):
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(epochs):
        total = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total / len(loader))
    return losses


def test_a_pytorch_style_training_script_learns():
    x, y, model = make_problem()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    losses = train(model, opt, loader, epochs=5)
    assert losses[-1] < losses[0] / 2
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.9


def test_a_checkpoint_resumes_training_exactly(tmp_path):
    x, y, model = make_problem(64)
    opt = optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    train(model, opt, loader, epochs=1)
    torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, tmp_path / "ckpt.pt")

    _, _, resumed = make_problem(64)
    resumed_opt = optim.Adam(resumed.parameters(), lr=0.01)
    state = torch.load(tmp_path / "ckpt.pt")
    resumed.load_state_dict(state["model"])
    resumed_opt.load_state_dict(state["optim"])

    train(model, opt, loader, epochs=1)
    train(resumed, resumed_opt, loader, epochs=1)
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("plugin, entry", [
    ("core", "device backend:cpu"),
    ("nn", "loss:cross_entropy"),
    ("optim", "optimizer:adam"),
])
def test_the_listing_says_what_each_part_registers(capsys, plugin, entry):
    cli.main(["plugins", "--json"])
    plugins = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert plugins[plugin]["status"] == "loaded"
    assert entry in plugins[plugin]["provides"]
