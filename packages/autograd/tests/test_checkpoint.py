"""Activation checkpointing and saved-tensor hooks: the gradients are those of the plain
graph (random ops included), and checkpointing keeps less memory alive."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import torcia
from torcia.autograd.graph import save_on_cpu, saved_tensors_hooks
from torcia.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential


def _block(x, w):
    # a dropout-like random mask, so only a replayed random state gives equal gradients
    h = (x @ w).tanh()
    mask = (torcia.rand(*h.shape) > 0.3).to(h.dtype)
    return h * mask / 0.7


def _grads(run, x, ws):
    for t in (x, *ws):
        t.grad = None
    torcia.manual_seed(7)
    run().pow(2).sum().backward()
    return [t.grad.clone() for t in (x, *ws)]


@pytest.fixture
def leaves():
    rng = np.random.default_rng(0)
    x = torcia.tensor(rng.standard_normal((5, 6)), requires_grad=True)
    ws = [torcia.tensor(rng.standard_normal((6, 6)) * 0.5, requires_grad=True)
          for _ in range(4)]
    return x, ws


def _plain(x, ws):
    for w in ws:
        x = _block(x, w)
    return x


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_gradients_equal_plain_with_random_ops(leaves, reentrant):
    x, ws = leaves
    ref = _grads(lambda: _plain(x, ws), x, ws)
    got = _grads(lambda: checkpoint(_plain, x, ws, use_reentrant=reentrant), x, ws)
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("reentrant", [False, True])
def test_without_preserved_rng_state_recomputation_draws_new_numbers(leaves, reentrant):
    x, ws = leaves
    ref = _grads(lambda: _plain(x, ws), x, ws)
    got = _grads(lambda: checkpoint(_plain, x, ws, use_reentrant=reentrant,
                                    preserve_rng_state=False), x, ws)
    assert not all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(ref, got))


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_sequential_matches_plain(leaves, reentrant):
    x, ws = leaves
    fns = [lambda t, w=w: _block(t, w) for w in ws]
    ref = _grads(lambda: _plain(x, ws), x, ws)
    for segments in (1, 2, 3, 4):
        got = _grads(lambda s=segments: checkpoint_sequential(fns, s, x,
                                                              use_reentrant=reentrant), x, ws)
        for a, b in zip(ref, got):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_non_reentrant_supports_grad_kwargs_and_double_backward():
    x = torcia.tensor([0.5, 1.5], dtype=torcia.float64, requires_grad=True)
    y = checkpoint(lambda t, *, scale: (t.sin() * t).sum() * scale, x, scale=2.0,
                   use_reentrant=False)
    (g,) = torcia.autograd.grad(y, x, create_graph=True)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), 2 * (np.sin(xv) + xv * np.cos(xv)))
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (2 * np.cos(xv) - xv * np.sin(xv)))


def test_reentrant_rejects_keyword_arguments_and_context_fn():
    x = torcia.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(lambda t, scale: t * scale, x, use_reentrant=True, scale=2.0)
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(lambda t: t, x, determinism_check="strict")


def test_recomputation_with_other_shapes_is_reported():
    calls = []

    def fn(t):
        calls.append(1)
        return (t[: len(calls) + 1] * t[: len(calls) + 1]).sum()

    x = torcia.ones(4, requires_grad=True)
    y = checkpoint(fn, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="different metadata"):
        y.backward()


def test_utils_checkpoint_is_the_autograd_module():
    import torcia.autograd.checkpoint as owner
    import torcia.utils.checkpoint as alias

    assert alias is owner
    assert torcia.utils.checkpoint is owner


def _peak(run):
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    run().sum().backward()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_checkpointing_lowers_peak_memory():
    rng = np.random.default_rng(1)
    x = torcia.tensor(rng.standard_normal((256, 64)), requires_grad=True)
    ws = [torcia.tensor(rng.standard_normal((64, 64)) * 0.1, requires_grad=True)
          for _ in range(16)]

    def chain(t, layers):
        for w in layers:
            t = (t @ w).tanh().exp()
        return t

    plain = _peak(lambda: chain(x, ws))
    fns = [lambda t, w=w: chain(t, [w]) for w in ws]
    kept = _peak(lambda: checkpoint_sequential(fns, 4, x))
    assert kept < 0.6 * plain


# ---------------------------------------------------------------------------------------
# saved-tensor hooks
# ---------------------------------------------------------------------------------------


def test_pack_runs_for_each_saved_tensor_and_unpack_feeds_backward():
    x = torcia.tensor([1.0, 2.0, 3.0], requires_grad=True)
    packed = []

    def pack(t):
        packed.append(t)
        return t * 1  # a copy the graph does not hold otherwise

    with saved_tensors_hooks(pack, lambda t: t * 10):
        y = (x * x).sum()
    assert len(packed) == 2
    y.backward()
    # d(a*b)/dx with both saved factors scaled by 10, as in PyTorch's own test
    np.testing.assert_allclose(x.grad.numpy(), 20 * np.array([1.0, 2.0, 3.0]))


def test_only_the_innermost_hooks_apply_and_they_leave_with_the_block():
    outer, inner = [], []
    x = torcia.ones(2, requires_grad=True)
    with saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with saved_tensors_hooks(lambda t: inner.append(1) or t, lambda t: t):
            (x.exp()).sum()
        (x.sin()).sum()
    (x.cos()).sum()
    assert (len(outer), len(inner)) == (1, 1)


def test_unpack_must_return_a_tensor_and_hooks_must_be_callable():
    x = torcia.ones(2, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: "oops"):
        y = x.exp().sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.backward()
    with pytest.raises(TypeError, match="two callables"):
        saved_tensors_hooks(None, lambda t: t)


def test_in_place_change_after_packing_is_still_caught():
    a = torcia.ones(3, requires_grad=True)
    b = a * 2
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        y = (b * b).sum()
    with torcia.no_grad():
        b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_custom_function_saves_through_the_hooks():
    class Cube(torcia.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    seen = []
    x = torcia.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: seen.append(1) or t.detach().clone(), lambda t: t):
        y = Cube.apply(x).sum()
    y.backward()
    assert seen
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])


def test_save_on_cpu_gives_the_same_gradients_and_double_backward():
    x = torcia.tensor([0.3, -1.2, 2.0], dtype=torcia.float64, requires_grad=True)
    with save_on_cpu(pin_memory=True, device_type="cpu"):
        y = (x.exp() * x.tanh()).sum()
    (g,) = torcia.autograd.grad(y, x, create_graph=True)
    xv = np.array([0.3, -1.2, 2.0])
    t = np.tanh(xv)
    np.testing.assert_allclose(g.detach().numpy(), np.exp(xv) * (t + 1 - t * t))
    g.sum().backward()
    expected = np.exp(xv) * (t + 1 - t * t) + np.exp(xv) * ((1 - t * t) - 2 * t * (1 - t * t))
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_saved_tensors_hooks_pack_counts_match_torch():
    torch = pytest.importorskip("torch")
    counts = []
    for lib in (torcia, torch):
        n = []

        def pack(t, n=n):
            n.append(1)
            return t

        x = lib.ones(3, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = (x * x).sum()
            z = x.exp().sum()
        (y + z).backward()
        counts.append((len(n), x.grad.tolist()))
    assert counts[0] == counts[1]


@pytest.mark.parametrize("reentrant", [False, True])
def test_in_place_ops_inside_the_checkpointed_function(reentrant):
    rng = np.random.default_rng(3)
    x = torcia.tensor(rng.standard_normal(4), requires_grad=True)
    w = torcia.tensor(rng.standard_normal(4), requires_grad=True)

    def f(a):
        h = a * 1
        h.mul_(w)
        h.sin_()
        return (h * h).sum()

    f(x).backward()
    ref = [x.grad.clone(), w.grad.clone()]
    x.grad = w.grad = None
    checkpoint(f, x, use_reentrant=reentrant).backward()
    np.testing.assert_array_equal(ref[0].numpy(), x.grad.numpy())
    np.testing.assert_array_equal(ref[1].numpy(), w.grad.numpy())
