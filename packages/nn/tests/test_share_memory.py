"""Module.share_memory: parameters, buffers and gradients in shared memory, trained by
several processes of torcia.multiprocessing at once (Hogwild)."""

import os
import sys

import numpy as np
import pytest

import torcia
import torcia.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))  # children import mp_nn_helpers by name
import mp_nn_helpers  # noqa: E402


def test_module_share_memory_moves_parameters_buffers_and_grads():
    layer = torcia.nn.BatchNorm1d(3)
    layer(torcia.randn(4, 3)).sum().backward()
    before = layer.weight.detach().clone()
    assert layer.share_memory() is layer
    for t in (layer.weight, layer.bias, layer.running_mean, layer.weight.grad):
        assert t.is_shared()
    assert torcia.equal(layer.weight.detach(), before)
    assert isinstance(layer.weight, torcia.nn.Parameter) and layer.weight.requires_grad


def test_a_parameter_pickled_for_another_process_travels_as_shared_memory():
    import pickle
    from multiprocessing.reduction import ForkingPickler

    w = torcia.nn.Parameter(torcia.ones(3))
    data = ForkingPickler.dumps(w)
    assert w.is_shared()
    # plain pickle still copies
    copy = pickle.loads(pickle.dumps(w))
    assert not copy.is_shared() and torcia.equal(copy, w)
    assert len(data) < 1000  # a descriptor and the layout, not the elements


@pytest.mark.slow
@pytest.mark.multiprocess
def test_hogwild_processes_update_one_model():
    model = torcia.nn.Linear(2, 1)
    before = model.weight.detach().clone()
    model.share_memory()
    mp.spawn(mp_nn_helpers.hogwild, args=(model, 3), nprocs=2)
    np.testing.assert_allclose(model.weight.detach().numpy(), before.numpy() + 3.0)
