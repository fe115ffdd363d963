"""The installed plugin: found by torcia-nn, and its loss checked against closed forms."""

import math

import numpy as np
import pytest
import torcia_focal_loss

import torcia
from torcia import nn


def test_the_installed_plugin_provides_the_loss():
    infos = {info.name: info for info in torcia.plugins.plugin_infos()}
    assert infos["focal_loss"].distribution == "torcia-focal-loss"
    assert "loss:focal" in infos["focal_loss"].provides
    assert nn.losses.provider("focal") == "focal_loss"
    assert nn.FocalLoss is torcia_focal_loss.FocalLoss
    assert isinstance(nn.losses.get("FocalLoss", gamma=1.0), torcia_focal_loss.FocalLoss)


def test_gamma_zero_is_the_cross_entropy():
    rng = np.random.default_rng(0)
    logits = torcia.tensor(rng.normal(size=(6, 4)))
    target = torcia.tensor([0, 3, 1, 1, 2, -100])
    weight = torcia.tensor([1.0, 2.0, 0.5, 1.5], dtype=torcia.float64)
    for reduction in ("none", "mean", "sum"):
        ours = nn.FocalLoss(gamma=0.0, weight=weight, reduction=reduction)(logits, target)
        ce = nn.CrossEntropyLoss(weight=weight, reduction=reduction)(logits, target)
        np.testing.assert_allclose(ours.numpy(), ce.numpy(), rtol=1e-12)


def test_hand_value_for_one_sample():
    # softmax([ln 3, 0]) = [3/4, 1/4]: target 0 gives -(1/4)^2 * ln(3/4)
    loss = nn.FocalLoss(gamma=2.0)(torcia.tensor([[math.log(3.0), 0.0]]), torcia.tensor([0]))
    assert loss.item() == pytest.approx(-(0.25 ** 2) * math.log(0.75), rel=1e-6)


def test_gradient_by_finite_differences():
    logits = torcia.tensor(np.random.default_rng(1).normal(size=(3, 4)), requires_grad=True)
    target = torcia.tensor([1, 0, 3])
    assert torcia.autograd.gradcheck(lambda x: nn.FocalLoss(gamma=1.5)(x, target), (logits,))
