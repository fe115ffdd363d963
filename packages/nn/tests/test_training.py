"""An MLP and a small CNN learn the 8x8 handwritten digits (scikit-learn's copy of the UCI
set) with a hand-written SGD step, to a stated accuracy on a held-out split."""

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import nn


@pytest.fixture(scope="module")
def digits():
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    # 1500 to learn from, 297 held out
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def sgd_train(model, x, y, shape, epochs, lr, momentum=0.9, batch=32, seed=0):
    """Minibatch SGD with momentum, written out (torcia.optim is a separate part)."""
    rng = np.random.default_rng(seed)
    velocity = {p: torcia.zeros_like(p) for p in model.parameters()}
    model.train()
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            logits = model(torcia.tensor(x[idx].reshape(-1, *shape)))
            loss = F.cross_entropy(logits, torcia.tensor(y[idx]))
            model.zero_grad()
            loss.backward()
            with torcia.no_grad():
                for p in model.parameters():
                    v = velocity[p]
                    v.mul_(momentum).add_(p.grad)
                    p.sub_(lr * v)
    return loss.item()


def accuracy(model, x, y, shape):
    model.eval()
    with torcia.no_grad():
        predicted = model(torcia.tensor(x.reshape(-1, *shape))).argmax(1).numpy()
    return float((predicted == y).mean())


def test_mlp_learns_digits_to_95_percent(digits):
    (x, y), (x_test, y_test) = digits
    torcia.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10))
    sgd_train(model, x, y, (64,), epochs=8, lr=0.02)
    assert accuracy(model, x_test, y_test, (64,)) >= 0.95


def test_cnn_learns_digits_to_95_percent(digits):
    (x, y), (x_test, y_test) = digits
    torcia.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Linear(64, 10),
    )
    sgd_train(model, x, y, (1, 8, 8), epochs=8, lr=0.05, batch=50)
    assert accuracy(model, x_test, y_test, (1, 8, 8)) >= 0.95
