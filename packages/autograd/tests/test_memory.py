"""The graph lets go: saved tensors are freed by backward, no reference cycles are made,
and memory stays flat over many training steps."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np

import torcia


def _mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(8, 16), (16,), (16, 4), (4,)]
    return [torcia.tensor(rng.standard_normal(s) * 0.3, dtype=torcia.float32, requires_grad=True)
            for s in shapes]


def _step(params, x, target):
    w1, b1, w2, b2 = params
    h = (x @ w1 + b1).tanh()
    out = h @ w2 + b2
    loss = ((out - target) ** 2).sum()
    loss.backward()
    with torcia.no_grad():
        for p in params:
            p.sub_(p.grad * 0.01)
            p.grad = None
    return loss


def test_saved_tensors_freed_after_backward():
    x = torcia.randn(4, requires_grad=True)
    a = x * 2
    y = a.sin()
    node = y.grad_fn
    ref = weakref.ref(a)
    del a
    assert ref() is not None  # the sin node keeps its input alive for backward
    y.sum().backward()
    assert node.released and ref() is None


def test_node_dies_right_after_backward_without_gc():
    gc.disable()
    try:
        params = _mlp_params()
        x, target = torcia.randn(5, 8), torcia.randn(5, 4)
        w1, b1, w2, b2 = params
        out = (x @ w1 + b1).tanh() @ w2 + b2
        loss = ((out - target) ** 2).sum()
        refs = [weakref.ref(loss.grad_fn), weakref.ref(out.grad_fn)]
        loss.backward()
        del loss, out
        assert all(r() is None for r in refs), "the graph is kept alive by a reference cycle"
    finally:
        gc.enable()


def test_no_reference_cycles_per_step():
    params = _mlp_params()
    x, target = torcia.randn(5, 8), torcia.randn(5, 4)
    _step(params, x, target)
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            _step(params, x, target)
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f"{found} objects were only reclaimable by the cycle collector"


def test_memory_flat_over_1000_steps():
    params = _mlp_params()
    x, target = torcia.randn(5, 8), torcia.randn(5, 4)
    for _ in range(20):  # warm caches first
        _step(params, x, target)
    gc.collect()
    tracemalloc.start()
    try:
        _step(params, x, target)
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(1000):
            _step(params, x, target)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64 * 1024, f"memory grew by {end - start} bytes over 1000 steps"


def test_retained_graph_frees_when_dropped():
    x = torcia.randn(3, requires_grad=True)
    y = (x.exp() * x).sum()
    node = weakref.ref(y.grad_fn)
    y.backward(retain_graph=True)
    y.backward()
    del y
    assert node() is None


def test_retain_grad_and_hooks_make_no_cycles():
    gc.disable()
    try:
        x = torcia.randn(3, requires_grad=True)
        h = x * 2
        h.retain_grad()
        h.register_hook(lambda g: g * 1)
        ref = weakref.ref(h)
        (h * h).sum().backward()
        assert h.grad is not None
        del h
        assert ref() is None
    finally:
        gc.enable()


class _ExpSavingOutput(torcia.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


def test_custom_function_nodes_make_no_cycles():
    gc.disable()
    try:
        x = torcia.randn(3, requires_grad=True)
        y = _ExpSavingOutput.apply(x)
        node = weakref.ref(y.grad_fn)
        del y
        assert node() is None  # without backward
        y = _ExpSavingOutput.apply(x)
        node = weakref.ref(y.grad_fn)
        y.sum().backward()
        del y
        assert node() is None  # after backward
    finally:
        gc.enable()


def test_saved_output_of_a_custom_function_is_differentiable_again():
    x = torcia.randn(3, dtype=torcia.float64, requires_grad=True)
    assert torcia.autograd.gradgradcheck(_ExpSavingOutput.apply, (x,))
