"""A leaf's first gradient takes over the buffer of a temporary nobody else holds (as
PyTorch's AccumulateGrad does), and never aliases a tensor anyone can still see."""

from __future__ import annotations

import tracemalloc

import numpy as np

import torcia
from torcia import library

N = 1_000_000  # 4 MB of float32: far above what the graph itself allocates


def _shares(a, b):
    return np.shares_memory(library.array(a), library.array(b))


def _backward_peak_bytes(x, forward):
    """Peak bytes allocated by ``forward(x).backward()``'s backward alone."""
    forward(x).backward()  # warm caches (kernels, dtype tables) outside the measurement
    x.grad = None
    loss = forward(x)
    tracemalloc.start()
    try:
        loss.backward()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_fresh_gradient_becomes_grad_without_a_copy():
    x = torcia.ones(N, requires_grad=True)
    peak = _backward_peak_bytes(x, lambda x: (x * 2).sum())
    # the formula's g * 2 (4 MB) is the only gradient buffer; a copy would make it 8 MB
    assert peak < 6 * N
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 2.0, np.float32))


def test_gradient_summed_from_two_edges_becomes_grad_without_a_copy():
    x = torcia.ones(N, requires_grad=True)
    peak = _backward_peak_bytes(x, lambda x: (x * 2 + x * 3).sum())
    # g * 2, g * 3 and their sum (12 MB); a copy of the sum would make it 16 MB
    assert peak < 14 * N
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 5.0, np.float32))


def test_user_gradient_through_identity_is_copied():
    x = torcia.ones(3, requires_grad=True)
    g = torcia.tensor([1.0, 2.0, 3.0])
    (x + 0).backward(g)
    assert x.grad is not g and not _shares(x.grad, g)
    g.mul_(10)
    assert x.grad.tolist() == [1.0, 2.0, 3.0]


def test_user_gradient_of_times_one_and_of_a_leaf_root():
    x = torcia.ones(3, requires_grad=True)
    g = torcia.tensor([1.0, 2.0, 3.0])
    (x * 1).backward(g)
    assert not _shares(x.grad, g)
    x.grad = None
    x.backward(g)
    assert not _shares(x.grad, g)
    g.zero_()
    assert x.grad.tolist() == [1.0, 2.0, 3.0]


def test_expand_and_view_gradients_do_not_alias_the_user_gradient():
    x = torcia.ones(2, 2, requires_grad=True)
    big = torcia.arange(8.0).reshape(2, 2, 2)
    x.expand(2, 2, 2).backward(big)
    assert x.grad.tolist() == [[4.0, 6.0], [8.0, 10.0]]
    assert not _shares(x.grad, big)
    x.grad = None
    flat = torcia.arange(4.0)
    x.view(4).backward(flat)
    assert not _shares(x.grad, flat)
    flat.add_(1)
    assert x.grad.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_tensor_hook_that_keeps_the_gradient():
    x = torcia.ones(3, requires_grad=True)
    kept = []
    x.register_hook(kept.append)
    (x * 2).sum().backward()
    assert not _shares(x.grad, kept[0])
    x.grad.add_(1)
    assert kept[0].tolist() == [2.0, 2.0, 2.0]


def test_hook_on_an_intermediate_that_keeps_the_gradient_passed_through():
    x = torcia.ones(3, requires_grad=True)
    w = torcia.full((3,), 3.0, requires_grad=True)
    y = x + 0  # add's backward hands its incoming gradient to x unchanged
    kept = []
    y.register_hook(kept.append)
    (y * w).sum().backward()
    assert not _shares(x.grad, kept[0])
    x.grad.zero_()
    assert kept[0].tolist() == [3.0, 3.0, 3.0]


def test_node_post_hook_that_keeps_grad_inputs():
    x = torcia.ones(3, requires_grad=True)
    w = torcia.full((3,), 3.0, requires_grad=True)
    y = x + 0
    kept = []
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: kept.append(grad_inputs))
    (y * w).sum().backward()
    assert not _shares(x.grad, kept[0][0])
    x.grad.zero_()
    assert kept[0][0].tolist() == [3.0, 3.0, 3.0]


def test_node_post_hook_that_keeps_a_fresh_grad_input():
    x = torcia.ones(3, requires_grad=True)
    y = x * 3  # mul's formula makes a fresh g * 3, which the hook sees
    kept = []
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: kept.append(grad_inputs))
    y.sum().backward()
    assert not _shares(x.grad, kept[0][0])
    x.grad.zero_()
    assert kept[0][0].tolist() == [3.0, 3.0, 3.0]


def test_retained_gradient_of_an_intermediate_passed_through():
    x = torcia.ones(3, requires_grad=True)
    w = torcia.full((3,), 3.0, requires_grad=True)
    y = x + 0
    y.retain_grad()
    (y * w).sum().backward()
    assert not _shares(x.grad, y.grad)
    x.grad.zero_()
    assert y.grad.tolist() == [3.0, 3.0, 3.0]


def test_leaf_used_twice_in_one_op():
    x = torcia.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_one_gradient_to_two_leaves_gives_two_buffers():
    x = torcia.ones(3, requires_grad=True)
    w = torcia.ones(3, requires_grad=True)
    ((x + w) * 2).sum().backward()  # add sends one tensor, g * 2, to both leaves
    assert not _shares(x.grad, w.grad)
    x.grad.add_(1)
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


def test_gradient_is_not_a_saved_tensor_of_a_retained_graph():
    x = torcia.ones(3, requires_grad=True)
    w = torcia.full((3,), 2.0, requires_grad=True)
    y = x * w
    y.sum().backward(retain_graph=True)
    x.grad.mul_(100)  # the graph's saved w and x stay intact
    x.grad = None
    w.grad = None
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert w.grad.tolist() == [1.0, 1.0, 1.0]


def test_create_graph_keeps_a_differentiable_gradient():
    x = torcia.tensor([1.0, 2.0], requires_grad=True)
    (x * x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.tolist() == [3.0, 12.0]
    g = x.grad
    x.grad = None
    g.sum().backward()
    assert x.grad.tolist() == [6.0, 12.0]


def test_second_backward_accumulates_into_the_taken_buffer():
    x = torcia.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0, 5.0]


def test_autograd_grad_leaves_grad_unset():
    x = torcia.ones(3, requires_grad=True)
    (gx,) = torcia.autograd.grad((x * 2).sum(), x)
    assert x.grad is None and gx.tolist() == [2.0, 2.0, 2.0]


def test_dtype_of_the_leaf_is_kept():
    x = torcia.ones(3, dtype=torcia.float64, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.dtype == torcia.float64 and x.grad.tolist() == [2.0, 2.0, 2.0]
