"""Tensor and node hooks, grad modes (context managers, decorators, threads), anomaly
detection."""

from __future__ import annotations

import threading

import pytest

import torcia

F64 = torcia.float64


def leaf(values):
    return torcia.tensor(values, dtype=F64, requires_grad=True)


# ----- tensor hooks -----------------------------------------------------------------------


def test_leaf_hook_sees_and_replaces_the_gradient():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    handle = x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]] and x.grad.tolist() == [30.0, 30.0]
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_non_leaf_hook_changes_what_flows_on():
    x = leaf([1.0, 2.0])
    h = x * 2
    h.register_hook(lambda g: g * 0.5)
    (h * h).sum().backward()
    assert x.grad.tolist() == [4.0, 8.0]  # 2 * (2 * 2x) * 0.5


def test_handle_as_context_manager_and_double_remove():
    x = leaf([1.0])
    calls = []
    with x.register_hook(lambda g: calls.append(1)) as handle:
        (x * 2).sum().backward()
    (x * 2).sum().backward()
    handle.remove()
    assert calls == [1]


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        torcia.tensor([1.0]).register_hook(lambda g: g)


def test_hooks_run_once_per_backward_with_the_summed_gradient():
    x = leaf([1.0])
    calls = []
    x.register_hook(lambda g: calls.append(g.item()))
    (x * 2 + x * 3).sum().backward()
    assert calls == [5.0]


def test_node_hook_and_prehook():
    x = leaf([1.0, 2.0])
    y = x.exp()
    z = (y * 2).sum()
    seen = {}

    def post(grad_inputs, grad_outputs):
        seen["post"] = (grad_inputs[0].tolist(), grad_outputs[0].tolist())

    def pre(grad_outputs):
        seen["pre"] = grad_outputs[0].tolist()
        return (grad_outputs[0] * 0,)

    y.grad_fn.register_hook(post)
    h = y.grad_fn.register_prehook(pre)
    z.backward(retain_graph=True)
    assert seen["pre"] == [2.0, 2.0] and x.grad.tolist() == [0.0, 0.0]
    assert seen["post"][1] == [0.0, 0.0]
    h.remove()
    x.grad = None
    z.backward()
    assert x.grad.tolist() == pytest.approx([2 * 2.718281828459045, 2 * 7.38905609893065])


def test_post_accumulate_grad_hook():
    x = leaf([1.0, 2.0])
    seen = []
    handle = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert seen == [[2.0, 2.0], [5.0, 5.0]]
    handle.remove()
    (x * 3).sum().backward()
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_accumulate_grad_prehook_replaces_the_gradient():
    x = leaf([1.0, 2.0])
    y = x * 3
    acc = y.grad_fn.next_functions[0][0]
    acc.register_prehook(lambda grads: (grads[0] * 2,))
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_accumulate_grad_post_hook():
    x = leaf([1.0])
    y = x * 2
    acc = y.grad_fn.next_functions[0][0]
    seen = []
    acc.register_hook(lambda *args: seen.append(x.grad.item()))
    y.sum().backward()
    assert seen == [2.0]


# ----- grad modes ---------------------------------------------------------------------------


def test_no_grad_and_enable_grad_nest():
    x = leaf([1.0])
    with torcia.no_grad():
        assert not (x * 2).requires_grad
        with torcia.enable_grad():
            assert (x * 2).requires_grad
        assert not torcia.is_grad_enabled()
    assert torcia.is_grad_enabled()


def test_modes_as_decorators():
    x = leaf([1.0])

    @torcia.no_grad()
    def off():
        return x * 2

    @torcia.enable_grad()
    def on():
        return x * 2

    @torcia.inference_mode()
    def infer():
        return x * 2

    assert not off().requires_grad and not infer().requires_grad
    with torcia.no_grad():
        assert on().requires_grad
    assert torcia.is_grad_enabled()


def test_modes_as_bare_decorators():
    x = leaf([1.0])

    @torcia.no_grad
    def off():
        return x * 2

    @torcia.inference_mode
    def infer():
        return x * 2

    @torcia.enable_grad
    def on():
        return x * 2

    assert not off().requires_grad and not infer().requires_grad
    with torcia.no_grad():
        assert on().requires_grad
    assert off.__name__ == "off" and torcia.is_grad_enabled()


def test_set_grad_enabled_as_call_and_context():
    x = leaf([1.0])
    with torcia.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert torcia.is_grad_enabled()
    torcia.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        torcia.set_grad_enabled(True)
    assert (x * 2).requires_grad


def test_inference_mode_false_records():
    x = leaf([1.0])
    with torcia.inference_mode(False):
        assert (x * 2).requires_grad
    with torcia.inference_mode():
        assert not (x * 2).requires_grad


def test_grad_mode_is_thread_local():
    x = leaf([1.0])
    seen = {}

    def worker():
        seen["enabled"] = torcia.is_grad_enabled()
        seen["records"] = (x * 2).requires_grad

    with torcia.no_grad():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert seen == {"enabled": True, "records": True}


def test_backward_inside_no_grad_still_works():
    x = leaf([2.0])
    y = (x * x).sum()
    with torcia.no_grad():
        y.backward()
    assert x.grad.item() == 4.0


# ----- anomaly detection -----------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on nan/inf
def test_anomaly_names_the_forward_op_of_a_nan_gradient():
    x = leaf([0.0, 1.0])
    with torcia.autograd.detect_anomaly():
        y = (x.sqrt() * 0).sum()  # d sqrt at 0 is inf, times 0 is nan
        with pytest.raises(RuntimeError, match="SqrtBackward0.*nan") as info:
            y.backward()
    assert "x.sqrt()" in str(info.value)  # the stack of the forward call
    assert not torcia.autograd.is_anomaly_enabled()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on nan/inf
def test_anomaly_off_lets_nan_through():
    x = leaf([-1.0])
    x.log().sum().backward()  # the gradient is finite: -1; the forward is nan
    assert x.grad.item() == -1.0
    y = leaf([0.0])
    (y.sqrt() * 0).sum().backward()
    assert y.grad.isnan().all()


def test_anomaly_adds_the_forward_call_to_backward_errors():
    x = leaf([1.0, 2.0])
    with torcia.autograd.set_detect_anomaly(True):
        a = x * 1
        y = a.sin()
        a.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            y.sum().backward()
    assert any("y = a.sin()" in note for note in info.value.__notes__)


def test_set_detect_anomaly_as_call():
    torcia.autograd.set_detect_anomaly(True)
    try:
        assert torcia.autograd.is_anomaly_enabled()
    finally:
        torcia.autograd.set_detect_anomaly(False)
    assert not torcia.autograd.is_anomaly_enabled()
