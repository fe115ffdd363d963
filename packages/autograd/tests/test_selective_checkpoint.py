"""Selective activation checkpointing and the helpers of torcia.utils.checkpoint: the ops a
policy saves do not run again in the recomputation (counted with the profiler), gradients
equal those without checkpointing, in-place changes of a saved result are caught, and the
helpers behave as torch's."""

import functools
import warnings

import numpy as np
import pytest

import torcia
from torcia.utils import checkpoint as C


def _model(x, w1, w2):
    h = (x @ w1).tanh()
    return ((h @ w2).relu() * h.sum()).sum()


def _inputs():
    gen = np.random.default_rng(0)
    return [torcia.tensor(gen.standard_normal(s), requires_grad=r)
            for s, r in (((3, 4), False), ((4, 5), True), ((5, 2), True))]


def _backward_counts(context_fn):
    x, w1, w2 = _inputs()
    out = C.checkpoint(_model, x, w1, w2, use_reentrant=False, context_fn=context_fn)
    with torcia.profiler.profile() as prof:
        out.backward()
    counts = {e.key: e.count for e in prof.key_averages()}
    return counts, (w1.grad.numpy(), w2.grad.numpy())


@pytest.mark.parametrize("policy", [
    ["matmul"], [torcia.matmul],
    lambda ctx, op, *a, **k: (C.CheckpointPolicy.MUST_SAVE if op == "matmul"
                              else C.CheckpointPolicy.PREFER_RECOMPUTE),
])
def test_saved_ops_are_not_recomputed(policy):
    plain_counts, plain_grads = _backward_counts(C.noop_context_fn)
    counts, grads = _backward_counts(
        functools.partial(C.create_selective_checkpoint_contexts, policy))
    # the plain checkpoint recomputes both products; with the policy, none
    assert plain_counts.get("matmul", 0) >= 2 and counts.get("matmul", 0) == \
        plain_counts["matmul"] - 2
    assert counts.get("tanh", 0) == plain_counts.get("tanh", 0)
    x, w1, w2 = _inputs()
    _model(x, w1, w2).backward()
    for got, want in zip(grads, (w1.grad.numpy(), w2.grad.numpy())):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for got, want in zip(grads, plain_grads):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_policy_sees_recompute_flag_and_bad_policies():
    seen = []

    def policy(ctx, op, *args, **kwargs):
        seen.append(ctx.is_recompute)
        return C.CheckpointPolicy.PREFER_RECOMPUTE

    x, w1, w2 = _inputs()
    C.checkpoint(_model, x, w1, w2, use_reentrant=False,
                 context_fn=functools.partial(C.create_selective_checkpoint_contexts,
                                              policy)).backward()
    assert False in seen and True in seen
    with pytest.raises(TypeError, match="function or a list of ops"):
        C.create_selective_checkpoint_contexts(3)
    bad = functools.partial(C.create_selective_checkpoint_contexts, lambda *a, **k: "save")
    with pytest.raises(TypeError, match="must return a CheckpointPolicy"):
        C.checkpoint(_model, x, w1, w2, use_reentrant=False, context_fn=bad)


def test_mutated_saved_result_is_an_error():
    w = torcia.randn(3, 3, requires_grad=True)
    holder = []

    def fn(x):
        y = x @ w
        holder.append(y)
        return (y.sin() * 2).sum()

    ctx = functools.partial(C.create_selective_checkpoint_contexts, ["matmul"])
    out = C.checkpoint(fn, torcia.randn(2, 3), use_reentrant=False, context_fn=ctx)
    with torcia.no_grad():
        holder[0].add_(1.0)
    with pytest.raises(C.CheckpointError, match="changed in place"):
        out.backward()


def test_helpers():
    x = torcia.ones(2, requires_grad=True) * 3
    (d,) = C.detach_variable((x,))
    assert d.requires_grad and d.is_leaf
    with pytest.raises(RuntimeError, match="Only tuple of tensors is supported"):
        C.detach_variable([x])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        C.check_backward_validity([torcia.ones(1), 2])
    assert "requires_grad=True" in str(caught[0].message)
    assert C.get_device_states(torcia.ones(1), 3) == ([], [])
    assert C.DefaultDeviceType.get_device_type() == "cuda"
    C.DefaultDeviceType.set_device_type("cpu")
    assert C.DefaultDeviceType.get_device_type() == "cpu"
    C.DefaultDeviceType.set_device_type()
    with C.set_checkpoint_early_stop(False), C.set_checkpoint_debug_enabled(True), \
            C.GraphExecGroup():
        y = C.checkpoint(torcia.sin, torcia.ones(2, requires_grad=True), use_reentrant=False)
        y.sum().backward()


@pytest.mark.torch
def test_names_match_torch():
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as TC

    assert [(m.name, m.value) for m in C.CheckpointPolicy] == [
        (m.name, m.value) for m in TC.CheckpointPolicy]
    assert set(TC.__all__) <= set(C.__all__)
    with pytest.raises(RuntimeError) as ours:
        C.detach_variable([1])
    with pytest.raises(RuntimeError) as theirs:
        TC.detach_variable([1])
    assert str(ours.value) == str(theirs.value)
    assert torch is not None
