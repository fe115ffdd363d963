"""NestedIOFunction, the thread-local engine switches and the removed ``variable``."""

import threading

import numpy as np
import pytest

import torcia
from torcia.autograd import (
    NestedIOFunction,
    enforce_grad_layout_policy,
    gradcheck,
    is_grad_layout_enforcement_enabled,
    is_multithreading_enabled,
    set_multithreading_enabled,
)


class _MulAdd(NestedIOFunction):
    def forward_extended(self, pair, scale):
        a, b = pair
        self.save_for_backward(pair, scale)
        return [a * b * scale, (a + b,)]

    def backward_extended(self, g_mul, g_add):
        ((a, b), scale) = self.saved_tensors
        (g_add,) = g_add
        return (g_mul * b * scale + g_add, g_mul * a * scale + g_add), g_mul * a * b


def test_nested_io_function_keeps_the_nesting_and_its_gradients_are_right():
    a, b, s = (torcia.tensor(np.random.default_rng(i).standard_normal(3), dtype=torcia.float64,
                             requires_grad=True) for i in range(3))
    prod, (total,) = _MulAdd()((a, b), s)
    np.testing.assert_allclose(prod.detach().numpy(), (a * b * s).detach().numpy())
    assert total.grad_fn.name() == "_MulAddBackward"
    assert gradcheck(lambda a, b, s: tuple(torcia.cat([_MulAdd()((a, b), s)[0],
                                                      _MulAdd()((a, b), s)[1][0]])),
                     (a, b, s))


def test_nested_io_function_mark_non_differentiable():
    class Argmax(NestedIOFunction):
        def forward_extended(self, x):
            idx = x.argmax()
            self.mark_non_differentiable(idx)
            return x.max(), idx

        def backward_extended(self, g, _):
            return g * 0 + 1

    x = torcia.tensor([1.0, 3.0], requires_grad=True)
    value, idx = Argmax()(x)
    assert value.requires_grad and not idx.requires_grad
    with pytest.raises(NotImplementedError, match="forward_extended"):
        NestedIOFunction()(x)


@pytest.mark.parametrize("switch, read", [
    (set_multithreading_enabled, is_multithreading_enabled),
    (enforce_grad_layout_policy, is_grad_layout_enforcement_enabled),
])
def test_switches_are_thread_local_calls_context_managers_and_decorators(switch, read):
    assert read()
    with switch(False):
        assert not read()
        seen = []
        t = threading.Thread(target=lambda: seen.append(read()))
        t.start()
        t.join()
        assert seen == [True]
    assert read()

    @switch(False)
    def inside():
        return read()

    assert read() and inside() is False and read()
    switch(False)
    assert not read()
    switch(True)
    assert read() and switch(False).clone().mode is False
    switch(True)


def test_backward_works_under_both_switches():
    p = torcia.ones(2, 3, requires_grad=True)
    with set_multithreading_enabled(False), enforce_grad_layout_policy(False):
        (p * 2).sum().backward()
    assert p.grad.tolist() == [[2.0] * 3] * 2


def test_variable_is_removed_as_in_pytorch():
    with pytest.raises(RuntimeError, match=r"use torch.tensor\(\.\.\.\) instead"):
        torcia.autograd.variable(torcia.ones(1))
