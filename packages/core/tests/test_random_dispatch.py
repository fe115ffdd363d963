"""Random ops go through dispatch (modes see them) and keep their streams."""

import numpy as np
import pytest

import torcia
from torcia import library
from torcia.library import functional as F  # the dropouts, as torcia.nn.functional's


def _numpy_stream(seed):
    return np.random.Generator(np.random.PCG64(seed))


def test_streams_are_numpys_pcg64_draws():
    """A seed gives the draws of NumPy's PCG64 in order, as before dispatch saw them."""
    torcia.manual_seed(3)
    rng = _numpy_stream(3)
    np.testing.assert_array_equal(torcia.rand(3, 4).numpy(),
                                  rng.random((3, 4)).astype(np.float32))
    np.testing.assert_array_equal(torcia.randn(5, dtype=torcia.float64).numpy(),
                                  rng.standard_normal(5))
    np.testing.assert_array_equal(torcia.normal(1.0, 2.0, (3,)).numpy(),
                                  rng.normal(1.0, 2.0, (3,)).astype(np.float32))
    p = np.full(6, 0.4, dtype=np.float32)
    np.testing.assert_array_equal(torcia.bernoulli(torcia.from_numpy(p)).numpy(),
                                  (rng.random(6) < p).astype(np.float32))
    keep = rng.random(10) >= 0.3
    np.testing.assert_array_equal(F.dropout(torcia.ones(10), 0.3).numpy(),
                                  (keep / 0.7).astype(np.float32))
    keep = rng.random((2, 3, 1, 1)) >= 0.5
    want = np.broadcast_to((keep / 0.5).astype(np.float32), (2, 3, 2, 2))
    np.testing.assert_array_equal(F.dropout2d(torcia.ones(2, 3, 2, 2), 0.5).numpy(), want)


def test_large_float32_draws_are_the_stream_of_one_call():
    """Tensors past one drawing block (2**20 samples) are drawn in blocks, so no float64
    copy of their size exists; the values are those of one float64 call."""
    n = (1 << 21) + 3
    torcia.manual_seed(5)
    rng = _numpy_stream(5)
    np.testing.assert_array_equal(torcia.randn(n).numpy(),
                                  rng.standard_normal(n).astype(np.float32))
    np.testing.assert_array_equal(torcia.rand(n, dtype=torcia.float16).numpy(),
                                  rng.random(n).astype(np.float16))
    np.testing.assert_array_equal(torcia.empty(n).uniform_(-2.0, 3.0).numpy(),
                                  rng.uniform(-2.0, 3.0, n).astype(np.float32))
    np.testing.assert_array_equal(torcia.empty(2, n // 2).normal_(1.0, 0.5).numpy(),
                                  rng.normal(1.0, 0.5, (2, n // 2)).astype(np.float32))


def test_manual_seed_restarts_the_stream_of_the_same_numpy_generator():
    g = torcia.Generator()
    rng = g.rng
    g.manual_seed(5)
    a = torcia.rand(4, generator=g)
    g.manual_seed(5)
    assert g.rng is rng  # reseeded in place
    assert torcia.equal(a, torcia.rand(4, generator=g))


class _Recorder(library.DispatchMode):
    order = library.TRACE_ORDER

    def __init__(self):
        self.ops = []

    def around_kernel(self, op, kernel, device):
        self.ops.append(op)
        return kernel


@pytest.mark.parametrize("fn, op", [
    (lambda: torcia.rand(2), "rand"), (lambda: torcia.randn(2), "randn"),
    (lambda: torcia.rand_like(torcia.ones(2)), "rand"),
    (lambda: torcia.randn_like(torcia.ones(2)), "randn"),
    (lambda: torcia.normal(0.0, 1.0, (2,)), "normal"),
    (lambda: torcia.bernoulli(torcia.full((2,), 0.5)), "bernoulli"),
    (lambda: F.dropout(torcia.ones(2), 0.5), "dropout_mask"),
    (lambda: F.dropout1d(torcia.ones(1, 2, 3), 0.5), "dropout_mask"),
    (lambda: F.alpha_dropout(torcia.ones(4), 0.5, True), "dropout_mask"),
])
def test_random_ops_are_seen_by_modes(fn, op):
    with _Recorder() as mode:
        out = fn()
    assert op in mode.ops
    assert not out.requires_grad


@pytest.mark.parametrize("op", ["rand", "randn", "normal", "bernoulli", "dropout_mask"])
def test_random_op_records_are_not_differentiable_and_have_shapes(op):
    rec = library.get_op(op)
    assert not rec.differentiable and rec.shape is not None


def test_shape_functions_of_the_masks():
    shape, dtype = library.get_op("dropout_mask").shape(shape=(2, 3), p=0.5,
                                                        dtype=np.dtype(np.float32), rng=None)
    assert tuple(shape) == (2, 3) and dtype == np.float32
    meta = np.zeros((4, 1), dtype=np.float64)
    shape, dtype = library.get_op("bernoulli").shape(meta, rng=None)
    assert tuple(shape) == (4, 1) and dtype == np.float64


def test_dropout_gradient_goes_through_the_mask():
    pytest.importorskip("torcia.autograd")
    torcia.manual_seed(0)
    x = torcia.ones(50, requires_grad=True)
    out = F.dropout(x, 0.4)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), out.detach().numpy())
