"""Batched products of small matrices (``bmm``, ``matmul`` of two batches) as PyTorch's CPU
loop computes them: under 400 multiply-adds a matrix, each element is summed from zero
over the inner dim in order, a product and a sum rounded at each step (no fused
multiply-add), in float32 for float16 and bfloat16, where BLAS's blocked sums differed in
40-60% of elements. The expected values come from that loop written element by element,
and from PyTorch where it is installed."""

import numpy as np
import pytest

import torcia


def _torch():
    try:
        import torch as real
    except ImportError:
        return None
    return real if getattr(real, "Tensor", None) is not torcia.Tensor else None


def _elementwise_loop(a, b, work):
    """The loop, one Python scalar step at a time: float32 or float64 ``work``."""
    out = np.zeros(a.shape[:-1] + b.shape[-1:], work)
    for idx in np.ndindex(out.shape):
        *lead, i, j = idx
        acc = work(0)
        for k in range(a.shape[-1]):
            acc = work(acc + work(work(a[(*lead, i, k)]) * work(b[(*lead, k, j)])))
        out[idx] = acc
    return out


def _operands(shape_a, shape_b, name, seed=0):
    rng = np.random.default_rng(seed)
    dt = getattr(torcia, name)
    return tuple(torcia.tensor(rng.standard_normal(s) * 3).to(dt) for s in (shape_a, shape_b))


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("mkn", [(4, 5, 3), (19, 21, 1), (1, 399, 1), (7, 7, 7), (2, 0, 3)],
                         ids=str)
def test_bmm_of_small_matrices_sums_in_order(name, mkn):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    m, k, n = mkn
    a, b = _operands((3, m, k), (3, k, n), name)
    work = np.float64 if name == "float64" else np.float32
    values = [t.to(torcia.float64).numpy() for t in (a, b)]
    want = torcia.tensor(_elementwise_loop(*values, work)).to(a.dtype)
    for got in (torcia.bmm(a, b), a @ b, torcia.matmul(a, b)):
        assert got.dtype is a.dtype
        np.testing.assert_array_equal(got.to(torcia.float64).numpy(),
                                      want.to(torcia.float64).numpy())


def test_broadcast_batches_and_more_dims_take_the_loop_too():
    a, b = _operands((2, 1, 4, 5), (1, 3, 5, 3), "float32")
    values = [np.broadcast_to(t.numpy(), (2, 3) + t.shape[2:]) for t in (a, b)]
    np.testing.assert_array_equal((a @ b).numpy(), _elementwise_loop(*values, np.float32))


def test_from_400_multiply_adds_a_matrix_blas_sums():
    # 10 x 4 x 10: BLAS, close to the loop but not held to its bits
    a, b = _operands((3, 10, 4), (3, 4, 10), "float32")
    want = _elementwise_loop(a.numpy(), b.numpy(), np.float32)
    np.testing.assert_allclose(torcia.bmm(a, b).numpy(), want, rtol=1e-5, atol=1e-5)


def test_gradients_take_the_same_products():
    pytest.importorskip("torcia.autograd")
    a, b = (t.requires_grad_() for t in _operands((3, 4, 5), (3, 5, 3), "float32"))
    g = torcia.ones(3, 4, 3)
    torcia.bmm(a, b).backward(g)
    bt, at = b.detach().transpose(1, 2), a.detach().transpose(1, 2)
    np.testing.assert_array_equal(a.grad.numpy(), torcia.bmm(g, bt).numpy())
    np.testing.assert_array_equal(b.grad.numpy(), torcia.bmm(at, g).numpy())


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_matches_pytorch(name):
    torch = _torch()
    if torch is None:
        pytest.skip("PyTorch is not installed")
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    tdt = getattr(torch, name)
    for shape_a, shape_b in (((3, 4, 5), (3, 5, 3)), ((3, 19, 21), (3, 21, 1)),
                             ((2, 3, 7, 7), (2, 3, 7, 7)), ((3, 5, 8), (1, 8, 9))):
        a, b = _operands(shape_a, shape_b, name, seed=2)
        ta, tb = (torch.tensor(t.to(torcia.float64).numpy()).to(tdt) for t in (a, b))
        np.testing.assert_array_equal(torcia.matmul(a, b).to(torcia.float64).numpy(),
                                      torch.matmul(ta, tb).to(torch.float64).numpy())
        if len(shape_a) == 3 and shape_a[0] == shape_b[0]:
            np.testing.assert_array_equal(torcia.bmm(a, b).to(torcia.float64).numpy(),
                                          torch.bmm(ta, tb).to(torch.float64).numpy())
