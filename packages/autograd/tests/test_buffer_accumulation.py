"""Gradients meeting at a node are summed into the first one in place where nobody else
sees it (torcia.autograd.engine._add_in_place); everything that can see a gradient must
still see the value it had."""

import numpy as np

import torcia
from torcia.autograd import engine


def _in_buffer(old, grad):
    """Call _add_in_place as the backward loop does: ``old`` held by a buffer's slot and
    the caller's local only."""
    buf = [old]
    del old

    def caller():
        held = buf[0]
        return engine._add_in_place(held, grad)

    return caller(), buf[0]


def test_a_gradient_only_the_buffer_holds_is_summed_into():
    done, old = _in_buffer(torcia.ones(2, 3), torcia.full((2, 3), 2.0))
    assert done
    np.testing.assert_array_equal(old.numpy(), np.full((2, 3), 3.0))


def test_a_gradient_someone_else_sees_is_left_alone():
    kept = torcia.ones(2, 3)
    done, _ = _in_buffer(kept, torcia.ones(2, 3))
    assert not done
    np.testing.assert_array_equal(kept.numpy(), np.ones((2, 3)))
    holder = [torcia.ones(2, 3)]
    array = holder[0].numpy()  # its memory seen through NumPy
    done, _ = _in_buffer(holder.pop(), torcia.ones(2, 3))
    assert not done and (array == 1.0).all()
    for grad in (torcia.ones(3), torcia.ones(2, 3, dtype=torcia.float64)):
        done, old = _in_buffer(torcia.ones(2, 3), grad)  # broadcast, promoted: new array
        assert not done
        np.testing.assert_array_equal(old.numpy(), np.ones((2, 3)))


def test_a_residual_sum_has_the_right_value():
    x = torcia.randn(4, 5, dtype=torcia.float64, requires_grad=True)
    a = x * 2.0
    out = (a.exp() + a.sin()).sum()
    out.backward()
    want = 2.0 * (np.exp(2 * x.detach().numpy()) + np.cos(2 * x.detach().numpy()))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_one_gradient_on_two_edges_is_not_added_into_itself():
    x = torcia.randn(3, requires_grad=True)
    a = x * 3.0
    (a + a).sum().backward()  # AddBackward hands the same tensor to both edges
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 6.0))


def test_gradients_seen_by_hooks_and_retain_grad_keep_their_values():
    x = torcia.randn(2, 3, dtype=torcia.float64, requires_grad=True)
    a = x * 2.0
    b = a * 1.0
    b.retain_grad()
    seen = []
    b.register_hook(lambda g: seen.append(g) or None)
    c = b * 1.0
    # b's gradient arrives from two uses; c's from two as well
    out = (c * 3.0 + c.exp() + b * 5.0 + b.cos()).sum()
    out.backward()
    bn = b.detach().numpy()
    want_b = 3.0 + np.exp(bn) + 5.0 - np.sin(bn)
    np.testing.assert_allclose(b.grad.numpy(), want_b, rtol=1e-12)
    np.testing.assert_allclose(seen[0].numpy(), want_b, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * want_b, rtol=1e-12)


def test_autograd_grad_results_and_user_gradients_are_not_written():
    x = torcia.randn(3, dtype=torcia.float64, requires_grad=True)
    a = x * 1.0
    y = a * 2.0
    z = a * 3.0
    gy = torcia.ones(3, dtype=torcia.float64)
    gz = torcia.full((3,), 2.0, dtype=torcia.float64)
    ga, = torcia.autograd.grad([y, z], [a], [gy, gz])
    np.testing.assert_allclose(ga.numpy(), np.full(3, 8.0))
    np.testing.assert_allclose(gy.numpy(), np.ones(3))
    np.testing.assert_allclose(gz.numpy(), np.full(3, 2.0))
    # the same root gradient for two outputs that meet at b
    b = x * 1.0
    g = torcia.ones(3, dtype=torcia.float64)
    torcia.autograd.backward([b * 1.0, b * 1.0], [g, g])
    np.testing.assert_allclose(g.numpy(), np.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


def test_views_of_a_gradient_are_not_summed_into():
    x = torcia.randn(4, 3, dtype=torcia.float64, requires_grad=True)
    a = x * 1.0
    # the transpose's gradient is a view of the incoming one: not its own memory
    out = (a.t() * 2.0).sum() + (a * 3.0).sum()
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((4, 3), 5.0))


def test_double_backward_builds_the_sum_as_a_graph():
    x = torcia.tensor([0.5, -1.0], dtype=torcia.float64, requires_grad=True)
    a = x * 2.0
    out = (a.exp() + a * a).sum()
    gx, = torcia.autograd.grad(out, x, create_graph=True)
    gx.sum().backward()
    xn = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 4.0 * np.exp(2 * xn) + 8.0, rtol=1e-12)
