"""Activation checkpointing over real layers: a transformer stack with dropout gets the same
gradients checkpointed or not (the random state is replayed)."""

from __future__ import annotations

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.utils.checkpoint import checkpoint, checkpoint_sequential


@pytest.mark.parametrize("reentrant", [False, True])
def test_transformer_stack_gradients_equal_with_dropout(reentrant):
    torcia.manual_seed(0)
    model = nn.Sequential(*[nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True)
                            for _ in range(4)]).double()
    x = torcia.randn(3, 5, 16, dtype=torcia.float64, requires_grad=True)

    def grads(run):
        model.zero_grad()
        x.grad = None
        torcia.manual_seed(1)
        run().pow(2).sum().backward()
        return [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]

    plain = grads(lambda: model(x))
    for got in (grads(lambda: checkpoint_sequential(model, 2, x, use_reentrant=reentrant)),
                grads(lambda: checkpoint(model, x, use_reentrant=reentrant))):
        for a, b in zip(plain, got):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
