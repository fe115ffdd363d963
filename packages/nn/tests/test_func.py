"""torcia.func: the transforms against finite differences and against each other, the
per-sample-gradient and ensemble recipes, and parity with torch.func."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import nn
from torcia.func import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    replace_all_batch_norm_modules_,
    stack_module_state,
    vjp,
    vmap,
)

F64 = torcia.float64


def _rand(*shape, seed=0, low=None):
    rng = np.random.default_rng(seed)
    values = rng.uniform(low, 2.0, shape) if low is not None else rng.standard_normal(shape)
    return torcia.tensor(values, dtype=F64)


def _fd_jacobian(f, x, eps=1e-6):
    base = f(x).detach().numpy()
    flat = x.detach().numpy().ravel()
    cols = []
    for j in range(flat.size):
        plus, minus = flat.copy(), flat.copy()
        plus[j] += eps
        minus[j] -= eps
        fp = f(torcia.tensor(plus.reshape(x.shape), dtype=F64)).detach().numpy()
        fm = f(torcia.tensor(minus.reshape(x.shape), dtype=F64)).detach().numpy()
        cols.append(((fp - fm) / (2 * eps)).ravel())
    return np.stack(cols, -1).reshape(*base.shape, *x.shape)


def test_aliases():
    import torcia.func as func_module

    assert torcia.vmap is vmap and torcia.func is func_module


def test_grad_argnums_has_aux_and_pytrees():
    x, y = _rand(3), _rand(3, seed=1)
    gx, gy = grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), y.numpy())
    np.testing.assert_allclose(gy.numpy(), x.numpy())
    g, aux = grad(lambda d: ((d["w"] ** 2).sum(), "aux"), has_aux=True)({"w": x})
    np.testing.assert_allclose(g["w"].numpy(), 2 * x.numpy())
    assert aux == "aux" and not g["w"].requires_grad
    g, value = grad_and_value(lambda a: a.exp().sum())(x)
    np.testing.assert_allclose(value.numpy(), np.exp(x.numpy()).sum())
    with pytest.raises(RuntimeError, match="scalar Tensor"):
        grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="only 1 positional inputs"):
        grad(lambda a: a.sum(), argnums=2)(x)


def test_grad_of_grad_and_vjp_and_jvp_and_linearize():
    x = _rand(4, seed=2)
    second = grad(lambda a: grad(lambda b: b.sin().sum())(a).sum())(x)
    np.testing.assert_allclose(second.numpy(), -np.sin(x.numpy()))
    out, pull = vjp(lambda a: a ** 3, x)
    (g,) = pull(torcia.ones(4, dtype=F64))
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy() ** 2)
    v = _rand(4, seed=3)
    out, tangent = jvp(lambda a: a.tanh() * a, (x,), (v,))
    t = np.tanh(x.numpy())
    np.testing.assert_allclose(tangent.numpy(), (t + x.numpy() * (1 - t * t)) * v.numpy())
    _, jvp_fn = linearize(lambda a: a.exp(), x)
    np.testing.assert_allclose(jvp_fn(v).numpy(), np.exp(x.numpy()) * v.numpy())


JAC_OPS = [
    ("sin", torcia.sin, None), ("exp", torcia.exp, None), ("log", torcia.log, 0.5),
    ("sqrt", torcia.sqrt, 0.5), ("tanh", torcia.tanh, None), ("sigmoid", torcia.sigmoid, None),
    ("relu", lambda x: torcia.relu(x) * x, None), ("pow", lambda x: x ** 3, None),
    ("mul", lambda x: x * x.flip(0), None), ("div", lambda x: x / (x * x + 1), None),
    ("sum", lambda x: x.sum(0), None), ("mean", lambda x: x.mean(-1, keepdim=True), None),
    ("prod", lambda x: x.prod(1), 0.5), ("cumsum", lambda x: x.cumsum(1), None),
    ("softmax", lambda x: x.softmax(-1), None),
    ("log_softmax", lambda x: F.log_softmax(x, 0), None),
    ("matmul", lambda x: x @ x.T, None), ("transpose", lambda x: x.T.exp(), None),
    ("getitem", lambda x: x[1:, ::2] ** 2, None),
    ("cat", lambda x: torcia.cat([x, x.sin()]), None),
    ("norm", lambda x: torcia.linalg.vector_norm(x, dim=1), None),
    ("max", lambda x: x.max(1).values, None),
    ("where", lambda x: torcia.where(x > 0, x, x * x), None),
    ("inv", lambda x: torcia.linalg.inv(x[:, :3] + 3 * torcia.eye(3, dtype=F64)), None),
]


@pytest.mark.parametrize("name,fn,low", JAC_OPS, ids=[c[0] for c in JAC_OPS])
def test_jacfwd_and_jacrev_agree_and_match_finite_differences(name, fn, low):
    x = _rand(3, 4, seed=5, low=low)
    rev = jacrev(fn)(x).numpy()
    fwd = jacfwd(fn)(x).numpy()
    np.testing.assert_allclose(fwd, rev, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rev, _fd_jacobian(fn, x), rtol=1e-5, atol=1e-7)


def test_hessian_of_a_small_network_matches_finite_differences():
    torcia.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)).double()
    params = dict(net.named_parameters())
    x = _rand(4, 3, seed=6)

    def loss_of_w(w):
        p = dict(params, **{"0.weight": w})
        return functional_call(net, p, (x,)).pow(2).sum()

    w = params["0.weight"].detach()
    h = hessian(loss_of_w)(w).numpy()
    fd = _fd_jacobian(lambda v: grad(loss_of_w)(v), w)
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(h.reshape(15, 15), h.reshape(15, 15).T, atol=1e-10)


def test_vmap_dims_nesting_and_errors():
    x, y = _rand(3, 4), _rand(4, 3, seed=1)
    np.testing.assert_allclose(vmap(torcia.dot, in_dims=(0, 1))(x, y).numpy(),
                               (x.numpy() * y.numpy().T).sum(1))
    out = vmap(lambda a: a.sum(0), out_dims=0)(x)
    np.testing.assert_allclose(out.numpy(), x.numpy().sum(1))
    outer = vmap(vmap(lambda a, b: a * b, in_dims=(0, None)), in_dims=(None, 0))(x[0], x)
    expected = x.numpy()[0][None, :, None] * x.numpy()[:, None, :]
    np.testing.assert_allclose(outer.numpy(), expected)
    tree = vmap(lambda d: {"s": d["a"] + d["b"]}, in_dims=({"a": 0, "b": None},))(
        {"a": x, "b": x[0]})
    np.testing.assert_allclose(tree["s"].numpy(), x.numpy() + x.numpy()[0])
    np.testing.assert_allclose(vmap(lambda a: a * 2, out_dims=1)(x).numpy(), 2 * x.numpy().T)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap(torcia.add)(x, y)
    with pytest.raises(ValueError, match="Tried to map over dim 2"):
        vmap(torcia.sin, in_dims=2)(x)
    with pytest.raises(ValueError, match="chunk_size"):
        vmap(torcia.sin, chunk_size=0)
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(torcia.sin, randomness="sometimes")


def test_vmap_randomness_modes():
    x = torcia.zeros(4, 3)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error"):
        vmap(lambda a: a + torcia.rand(3))(x)
    same = vmap(lambda a: a + torcia.rand(3), randomness="same")(x)
    assert torcia.equal(same[0], same[3])
    different = vmap(lambda a: a + torcia.rand(3), randomness="different")(x)
    assert not torcia.equal(different[0], different[3])


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(F.relu(self.conv(x)).flatten(1))


def test_per_sample_gradients_of_a_cnn_equal_the_loop():
    torcia.manual_seed(0)
    model = SmallCNN()
    params = {k: v.detach() for k, v in model.named_parameters()}
    data = torcia.randn(16, 1, 8, 8)
    targets = torcia.randint(0, 10, (16,))

    def loss(p, x, y):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    # the speed-up over the loop is measured in benchmarks/bench_func.py
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # every op on its batching rule
        batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, data, targets)
    for i in range(16):
        model.zero_grad()
        F.cross_entropy(model(data[i:i + 1]), targets[i:i + 1]).backward()
        for name, p in model.named_parameters():
            np.testing.assert_allclose(batched[name][i].numpy(), p.grad.numpy(),
                                       rtol=1e-5, atol=1e-6)


def test_ensemble_of_eight_mlps_matches_separate_training():
    torcia.manual_seed(0)
    models = [nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).double()
              for _ in range(8)]
    separate = [copy.deepcopy(m) for m in models]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0])
    x, y = _rand(5, 4, seed=7), _rand(5, 2, seed=8)

    def loss(p, b, xb, yb):
        return (functional_call(base, (p, b), (xb,)) - yb).pow(2).mean()

    for _ in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # every op on its batching rule
            grads = vmap(grad(loss), in_dims=(0, 0, None, None))(params, buffers, x, y)
        params = {k: (v - 0.1 * grads[k]).detach() for k, v in params.items()}
        for m in separate:
            m.zero_grad()
            (m(x) - y).pow(2).mean().backward()
            with torcia.no_grad():
                for p in m.parameters():
                    p.sub_(0.1 * p.grad)
    for i, m in enumerate(separate):
        for name, p in m.named_parameters():
            np.testing.assert_allclose(params[name][i].numpy(), p.detach().numpy(),
                                       rtol=1e-12, atol=1e-12)


def test_stack_module_state_and_batch_norm_replacement():
    params, buffers = stack_module_state([nn.BatchNorm1d(3) for _ in range(2)])
    assert params["weight"].shape == (2, 3) and buffers["running_mean"].shape == (2, 3)
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        stack_module_state([nn.Linear(1, 1), nn.Linear(1, 1).eval()])
    m = replace_all_batch_norm_modules_(nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)))
    assert m[1].running_mean is None and not m[1].track_running_stats


@pytest.mark.torch
def test_transforms_match_torch_func():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xv, vv = rng.uniform(0.5, 2.0, (3, 4)), rng.standard_normal((3, 4))

    def f(lib, x):
        return ((x @ x.T).tanh() * x[:, :3].log()).softmax(-1)

    def scalar(lib, x):
        return f(lib, x).pow(2).sum()

    tx, cx = torch.tensor(xv), torcia.tensor(xv)
    pairs = [
        (torch.func.jacrev(lambda x: f(torch, x))(tx), jacrev(lambda x: f(torcia, x))(cx)),
        (torch.func.jacfwd(lambda x: f(torch, x))(tx), jacfwd(lambda x: f(torcia, x))(cx)),
        (torch.func.hessian(lambda x: scalar(torch, x))(tx),
         hessian(lambda x: scalar(torcia, x))(cx)),
        (torch.func.grad(lambda x: scalar(torch, x))(tx), grad(lambda x: scalar(torcia, x))(cx)),
        (torch.func.jvp(lambda x: f(torch, x), (tx,), (torch.tensor(vv),))[1],
         jvp(lambda x: f(torcia, x), (cx,), (torcia.tensor(vv),))[1]),
        (torch.func.vjp(lambda x: f(torch, x), tx)[1](torch.ones(3, 3))[0],
         vjp(lambda x: f(torcia, x), cx)[1](torcia.ones(3, 3, dtype=F64))[0]),
        (torch.func.vmap(lambda r: f(torch, r.reshape(2, 2)))(tx),
         vmap(lambda r: f(torcia, r.reshape(2, 2)))(cx)),
    ]
    for expected, got in pairs:
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


NN_FORWARD_CASES = [
    ("conv2d", lambda x, w: F.conv2d(x, w, padding=1), [(1, 2, 4, 4), (3, 2, 3, 3)]),
    ("linear", lambda x, w: F.linear(x, w), [(2, 3), (4, 3)]),
    ("layer_norm", lambda x, w: F.layer_norm(x, (3,), w), [(2, 3), (3,)]),
    ("batch_norm", lambda x, w: F.batch_norm(x, None, None, w, training=True), [(4, 3), (3,)]),
    ("cross_entropy", lambda x, w: F.cross_entropy(x * w, torcia.tensor([0, 2])),
     [(2, 3), (3,)]),
    ("max_pool2d", lambda x, w: F.max_pool2d(x * w.sum(), 2), [(1, 1, 4, 4), (2,)]),
    ("gelu", lambda x, w: F.gelu(x) * w, [(2, 3), (3,)]),
    ("scaled_dot_product_attention",
     lambda x, w: F.scaled_dot_product_attention(x, x * w, x), [(1, 3, 2), (2,)]),
]


@pytest.mark.parametrize("name,fn,shapes", NN_FORWARD_CASES, ids=[c[0] for c in NN_FORWARD_CASES])
def test_forward_mode_of_nn_ops_agrees_with_backward(name, fn, shapes):
    inputs = [_rand(*s, seed=k + 10).requires_grad_(True) for k, s in enumerate(shapes)]
    assert torcia.autograd.gradcheck(fn, inputs, check_forward_ad=True)


FORWARD_OVER_REVERSE = [
    ("softmax-tanh", lambda x: (torcia.softmax(x, 0) * x.tanh()).sum()),
    ("log_softmax", lambda x: F.log_softmax(x.reshape(2, 3), 1)[:, 0].sum()),
    ("layer_norm", lambda x: F.layer_norm(x.reshape(2, 3), (3,)).pow(3).sum()),
    ("gelu-silu", lambda x: (F.gelu(x) * F.silu(x)).sum()),
    ("cross_entropy", lambda x: F.cross_entropy(x.reshape(2, 3), torcia.tensor([0, 2]))),
    ("conv1d", lambda x: F.conv1d(x.reshape(1, 1, 6), x[:3].reshape(1, 1, 3)).pow(2).sum()),
    ("matmul-exp", lambda x: (x.reshape(2, 3) @ x.reshape(3, 2).exp()).sum()),
]


@pytest.mark.parametrize("name,f", FORWARD_OVER_REVERSE, ids=[c[0] for c in FORWARD_OVER_REVERSE])
def test_forward_over_reverse_matches_finite_differences(name, f):
    x = _rand(6, seed=11) * 0.5
    h = jacfwd(jacrev(f))(x).numpy()
    fd = _fd_jacobian(lambda v: grad(f)(v), x)
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(hessian(f)(x).numpy(), h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jacrev(jacrev(f))(x).numpy(), h, rtol=1e-10, atol=1e-10)
    v = _rand(6, seed=12)
    _, hvp = jvp(grad(f), (x,), (v,))
    np.testing.assert_allclose(hvp.numpy(), h @ v.numpy(), rtol=1e-10, atol=1e-10)
