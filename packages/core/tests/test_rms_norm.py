"""rms_norm as a primitive op: values by hand, PyTorch's default eps and errors, its
first derivative in one kernel against the differentiable formula, and float64
gradient checks (with torcia-autograd)."""

import numpy as np
import pytest

import torcia


def test_values_by_hand_with_and_without_weight():
    x = torcia.tensor([[3.0, 4.0], [1.0, -1.0]])
    # rms of (3, 4) is sqrt(12.5); of (1, -1) is 1
    want = np.array([[3, 4], [1, -1]]) / np.array([[12.5 ** 0.5], [1.0]])
    np.testing.assert_allclose(torcia.rms_norm(x, (2,), eps=0.0).numpy(), want, rtol=1e-6)
    w = torcia.tensor([2.0, 0.5])
    np.testing.assert_allclose(torcia.rms_norm(x, [2], w, eps=0.0).numpy(), want * [2, 0.5],
                               rtol=1e-6)


@pytest.mark.parametrize("dtype, eps", [(torcia.float32, np.finfo(np.float32).eps),
                                        (torcia.float64, np.finfo(np.float64).eps)])
def test_eps_defaults_to_the_dtype_machine_epsilon(dtype, eps):
    x = torcia.full((1, 4), 1e-5, dtype=dtype)
    want = 1e-5 / np.sqrt(1e-10 + eps)
    np.testing.assert_allclose(torcia.rms_norm(x, (4,)).numpy(), want, rtol=1e-5)


def test_over_several_trailing_dims():
    x = torcia.randn(2, 3, 4, dtype=torcia.float64)
    a = x.numpy()
    want = a / np.sqrt((a * a).mean(axis=(1, 2), keepdims=True) + 1e-6)
    np.testing.assert_allclose(torcia.rms_norm(x, (3, 4), eps=1e-6).numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: torcia.rms_norm(torcia.ones(2, 3), (4,)),
     r"normalized_shape=\[4\], expected input with shape \[\*, 4\]"),
    (lambda: torcia.rms_norm(torcia.ones(2, 3), (3,), torcia.ones(2)),
     r"Expected weight to be of same shape as normalized_shape"),
    (lambda: torcia.rms_norm(torcia.ones(2, 3, dtype=torcia.int64), (3,)),
     "expected a floating-point input, got torcia.int64"),
    (lambda: torcia.rms_norm(torcia.ones(3), (2, 3)), r"expected input with shape \[\*, 2, 3\]"),
])
def test_bad_arguments_are_errors_naming_them(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_shape_on_meta():
    out = torcia.rms_norm(torcia.empty(5, 7, device="meta"), (7,), torcia.ones(7, device="meta"))
    assert out.shape == (5, 7) and out.device.type == "meta"


def test_fused_backward_equals_the_differentiable_formula():
    pytest.importorskip("torcia.autograd")
    x = torcia.randn(4, 6, dtype=torcia.float64, requires_grad=True)
    w = torcia.randn(6, dtype=torcia.float64, requires_grad=True)
    g = torcia.randn(4, 6, dtype=torcia.float64)
    out = torcia.rms_norm(x, (6,), w, eps=1e-3)
    fused = torcia.autograd.grad(out, (x, w), g, retain_graph=True)  # rms_norm_backward
    graph = torcia.autograd.grad(out, (x, w), g, create_graph=True)  # the formula's ops
    for a, b in zip(fused, graph):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, normalized", [((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((4,), (4,))])
def test_gradcheck_and_gradgradcheck_in_float64(shape, normalized):
    autograd = pytest.importorskip("torcia.autograd")
    x = torcia.randn(*shape, dtype=torcia.float64, requires_grad=True)
    w = torcia.randn(*normalized, dtype=torcia.float64, requires_grad=True)

    def f(a, b):
        return torcia.rms_norm(a, normalized, b, eps=1e-3)

    assert autograd.gradcheck(f, (x, w))
    assert autograd.gradgradcheck(f, (x, w))
    assert autograd.gradcheck(lambda a: torcia.rms_norm(a, normalized), (x,))
