"""``grad(vmap(f))``: vmap of inputs autograd tracks runs batched (issue #44).

The function runs once on the whole batch (counted: the per-sample loop would call it
once per sample), and the gradients equal the loop's, written out by hand, and
torch.func's where installed. Backward passes that build a graph (second derivatives)
or run inside another vmap recompute the samples one by one, with the same values.
"""

import copy
import warnings

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.func import functional_call, grad, hessian, jacrev, stack_module_state, vmap

F64 = torcia.float64


def _rand(*shape, seed=0):
    return torcia.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=F64)


class Counted:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def test_grad_of_vmap_runs_once_and_matches_the_formula():
    x, w = _rand(5, 3), _rand(3, seed=1)
    f = Counted(lambda a, b: (a.sin() * b).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no per-sample fallback
        gx, gw = grad(lambda xs, ws: vmap(f, in_dims=(0, None))(xs, ws).pow(2).sum(),
                      argnums=(0, 1))(x, w)
    assert f.calls == 1
    # L = sum_i v_i^2, v_i = sum_j sin(x_ij) w_j
    v = (x.sin() * w).sum(1, keepdim=True)
    np.testing.assert_allclose(gx.numpy(), (2 * v * x.cos() * w).numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), (2 * v * x.sin()).sum(0).numpy(), rtol=1e-12)


def test_backward_through_vmap_reaches_leaves_and_out_dims():
    x = _rand(4, 3).requires_grad_()
    f = Counted(lambda a: (a * a, a.sum()))
    sq, total = vmap(f, out_dims=(1, 0))(x)
    assert f.calls == 1 and sq.shape == (3, 4) and total.shape == (4,)
    (sq.sum() + (total * torcia.arange(4.0, dtype=F64)).sum()).backward()
    want = 2 * x.detach() + torcia.arange(4.0, dtype=F64).unsqueeze(1)
    np.testing.assert_allclose(x.grad.numpy(), want.numpy(), rtol=1e-12)


def test_an_ensemble_trained_through_vmap_matches_separate_models():
    torcia.manual_seed(0)
    models = [nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).double()
              for _ in range(3)]
    separate = [copy.deepcopy(m) for m in models]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0])
    x, y = _rand(5, 4, seed=7), _rand(5, 2, seed=8)
    run = Counted(lambda p, b: functional_call(base, (p, b), (x,)))
    out = vmap(run, in_dims=(0, 0))(params, buffers)
    (out - y).pow(2).mean(dim=(1, 2)).sum().backward()
    assert run.calls == 1
    for i, m in enumerate(separate):
        (m(x) - y).pow(2).mean().backward()
        for name, p in m.named_parameters():
            np.testing.assert_allclose(params[name].grad[i].numpy(), p.grad.numpy(),
                                       rtol=1e-12, atol=1e-12)


def test_a_tensor_the_function_closes_over_still_gets_its_gradient():
    x, w = _rand(3, 4).requires_grad_(), _rand(4, seed=1).requires_grad_()
    vmap(lambda a: (a * w).sum())(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(w.detach().numpy(), (3, 4)))
    np.testing.assert_allclose(w.grad.numpy(), x.detach().numpy().sum(0))


def test_second_derivatives_through_vmap():
    x, w = _rand(4, 3), _rand(3, seed=1)

    def loss(xs):
        return vmap(lambda a: (a.sin() * w).sum() ** 2)(xs).sum()

    # L = sum_i v_i^2, v_i = sum_j sin(x_ij) w_j: d2L/dx_ij dx_kl is zero across samples;
    # within sample i: 2 w_j cos x_ij w_l cos x_il - [j == l] 2 v_i w_j sin x_ij
    v = (x.sin() * w).sum(1).numpy()
    c, s = (x.cos() * w).numpy(), (x.sin() * w).numpy()
    want = np.zeros((4, 3, 4, 3))
    for i in range(4):
        want[i, :, i, :] = 2 * np.outer(c[i], c[i]) - np.diag(2 * v[i] * s[i])
    # forward over reverse, and reverse over reverse (a graph of the first backward)
    for h in (hessian(loss)(x), jacrev(grad(loss))(x)):
        np.testing.assert_allclose(h.numpy(), want, rtol=1e-10, atol=1e-12)


def test_matches_torch_func():
    torch = pytest.importorskip("torch")
    xs, w1, w2 = (np.random.default_rng(k).standard_normal(s)
                  for k, s in enumerate([(6, 4), (5, 4), (5,)]))

    def body(lib):
        def per_sample(x, a, b):
            return (lib.tanh(a @ x) * b).sum()
        return lambda x, a, b: lib.func.vmap(per_sample, in_dims=(0, None, None))(
            x, a, b).pow(2).mean()

    ours = grad(body(torcia), argnums=(0, 1, 2))(*(torcia.tensor(v) for v in (xs, w1, w2)))
    theirs = torch.func.grad(body(torch), argnums=(0, 1, 2))(
        *(torch.tensor(v) for v in (xs, w1, w2)))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
