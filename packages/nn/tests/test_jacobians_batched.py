"""jacfwd, jacrev and hessian as one batched pass (issue #44): the function runs once for
every direction together (counted), no op falls back to vmap's per-sample loop (its
warning is an error here), and forward and reverse mode agree with each other and with
torch.func where installed, over the common ops of networks."""

import warnings

import numpy as np
import pytest

import torcia
from torcia.func import hessian, jacfwd, jacrev

F64 = torcia.float64
RNG = np.random.default_rng(0)
W = RNG.standard_normal((5, 6))
IMG = RNG.standard_normal((1, 2, 5, 5))
KER = RNG.standard_normal((3, 2, 3, 3))


def _fns(lib):
    """name -> function of a 6-vector, written for ``lib`` (torcia or torch)."""
    Fn = lib.nn.functional
    w, img, ker = (lib.tensor(a) for a in (W, IMG, KER))
    return {
        "tanh linear": lambda z: lib.tanh(Fn.linear(z, w)),
        "relu": lambda z: Fn.relu(Fn.linear(z, w)),
        "gelu": lambda z: Fn.gelu(Fn.linear(z, w)),
        "silu": lambda z: Fn.silu(w @ z),
        "sigmoid": lambda z: lib.sigmoid(w @ z),
        "softmax": lambda z: Fn.softmax(w @ z, -1),
        "log_softmax": lambda z: Fn.log_softmax(w @ z, -1),
        "layer_norm": lambda z: Fn.layer_norm(w @ z, (5,)),
        "exp log": lambda z: (z.exp() + 1).log(),
        "pow div": lambda z: z ** 3 / (1 + z * z),
        "reductions": lambda z: lib.stack([z.sum(), z.mean(), (z * z).sum(), z.max()]),
        "norm": lambda z: z / z.norm(),
        "cross_entropy": lambda z: Fn.cross_entropy((w @ z).unsqueeze(0), lib.tensor([1])),
        "mse": lambda z: Fn.mse_loss(w @ z, lib.ones(5, dtype=lib.float64)),
        "logsumexp": lambda z: lib.logsumexp(w @ z, 0),
        "where clamp": lambda z: lib.where(z > 0, z, 0.1 * z).clamp(-1, 1),
        "indexing": lambda z: z[1:4] * z[lib.tensor([0, 2, 4])],
        "cat reshape": lambda z: lib.cat([z, z * 2]).reshape(3, 4).sum(0),
        "conv2d": lambda z: Fn.conv2d(img * z.sum(), ker).flatten(),
        "max_pool2d": lambda z: Fn.max_pool2d(img * z[0], 2).flatten(),
        "matmul": lambda z: (z.reshape(2, 3) @ z.reshape(3, 2)).flatten(),
        "cumsum": lambda z: z.cumsum(0),
        "embedding": lambda z: Fn.embedding(lib.tensor([0, 2]), z.reshape(3, 2)).flatten(),
        "batch_norm": lambda z: Fn.batch_norm(z.reshape(3, 2), None, None,
                                              training=True).flatten(),
    }


NAMES = list(_fns(torcia))


class Counted:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, z):
        self.calls += 1
        return self.fn(z)


@pytest.mark.parametrize("name", NAMES)
def test_batched_jacobians_agree(name):
    x = torcia.tensor(RNG.standard_normal(6), dtype=F64)
    f = _fns(torcia)[name]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="There is a performance drop")
        fwd_f, rev_f = Counted(f), Counted(f)
        fwd, rev = jacfwd(fwd_f)(x), jacrev(rev_f)(x)
        assert fwd_f.calls == 1 and rev_f.calls == 1
        h = hessian(lambda z: f(z).sum())(x)
        hh = jacrev(jacrev(lambda z: f(z).sum()))(x)
    np.testing.assert_allclose(fwd.numpy(), rev.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), hh.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", NAMES)
def test_batched_jacobians_match_torch_func(name):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(6)
    ours, theirs = _fns(torcia)[name], _fns(torch)[name]
    for mine, other in ((jacfwd(ours), torch.func.jacfwd(theirs)),
                        (hessian(lambda z: ours(z).sum()),
                         torch.func.hessian(lambda z: theirs(z).sum()))):
        np.testing.assert_allclose(mine(torcia.tensor(x)).numpy(),
                                   other(torch.tensor(x)).numpy(), rtol=1e-9, atol=1e-11)
