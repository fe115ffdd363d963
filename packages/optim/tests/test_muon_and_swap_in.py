"""Muon against a float64 NumPy rewrite of its published update and against PyTorch, and
swap_in_optimizer_params_and_state."""

import math

import numpy as np
import pytest

import torcia
from torcia.optim.muon import zeropower_via_newtonschulz

RNG = np.random.default_rng(0)
A, B, C = 3.4445, -4.7750, 2.0315


def _ns_numpy(g, steps=5, eps=1e-7):
    # the quintic iteration of Jordan's post, in float64: X <- aX + (bG + cG^2)X, G = XX^T
    x = g.T if g.shape[0] > g.shape[1] else g
    x = x / max(np.linalg.norm(x), eps)
    for _ in range(steps):
        gram = x @ x.T
        x = A * x + (B * gram + C * gram @ gram) @ x
    return x.T if g.shape[0] > g.shape[1] else x


@pytest.mark.parametrize("shape", [(3, 3), (6, 3), (2, 7)])
def test_newton_schulz_follows_the_quintic_within_bfloat16(shape):
    g = RNG.standard_normal(shape)
    ours = zeropower_via_newtonschulz(torcia.tensor(g, dtype=torcia.float32))
    assert ours.dtype is torcia.bfloat16 and tuple(ours.shape) == shape
    np.testing.assert_allclose(ours.float().numpy(), _ns_numpy(g), atol=0.06)
    # the singular values land near 1 (the iteration's point)
    s = np.linalg.svd(ours.float().numpy(), compute_uv=False)
    assert (s > 0.5).all() and (s < 1.5).all()


def test_newton_schulz_checks_its_arguments():
    with pytest.raises(ValueError, match="2D matrix"):
        zeropower_via_newtonschulz(torcia.ones(3))
    with pytest.raises(ValueError, match="less than 100"):
        zeropower_via_newtonschulz(torcia.ones(2, 2), ns_steps=100)
    with pytest.raises(ValueError, match="exactly 3"):
        zeropower_via_newtonschulz(torcia.ones(2, 2), ns_coefficients=(1.0, 2.0))


@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("adjust", [None, "match_rms_adamw"])
def test_muon_update_rule(nesterov, adjust):
    w0 = RNG.standard_normal((4, 3))
    grads = [RNG.standard_normal((4, 3)) for _ in range(3)]
    lr, wd, mu = 0.05, 0.1, 0.9
    w = torcia.nn.Parameter(torcia.tensor(w0, dtype=torcia.float32))
    opt = torcia.optim.Muon([w], lr=lr, weight_decay=wd, momentum=mu, nesterov=nesterov,
                            adjust_lr_fn=adjust)
    ref, buf = w0.copy(), np.zeros_like(w0)
    scale = math.sqrt(max(1, 4 / 3)) if adjust is None else 0.2 * math.sqrt(4)
    for g in grads:
        w.grad = torcia.tensor(g, dtype=torcia.float32)
        opt.step()
        buf = mu * buf + (1 - mu) * g
        update = g + mu * (buf - g) if nesterov else buf
        ref = ref * (1 - lr * wd) - lr * scale * _ns_numpy(update)
    np.testing.assert_allclose(w.detach().numpy(), ref, atol=0.01)
    np.testing.assert_allclose(opt.state[w]["momentum_buffer"].numpy(), buf, rtol=1e-5)


def test_muon_matches_pytorch():
    torch = pytest.importorskip("torch")
    w0 = RNG.standard_normal((5, 3)).astype(np.float32)
    x = RNG.standard_normal((8, 5)).astype(np.float32)
    ours = torcia.nn.Parameter(torcia.tensor(w0))
    theirs = torch.nn.Parameter(torch.tensor(w0))
    opt_o = torcia.optim.Muon([ours], lr=0.02)
    opt_t = torch.optim.Muon([theirs], lr=0.02)
    for _ in range(4):
        for p, opt, lib in ((ours, opt_o, torcia), (theirs, opt_t, torch)):
            opt.zero_grad()
            (lib.tensor(x) @ p).tanh().sum().backward()
            opt.step()
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=2e-3)
    assert opt_o.state_dict()["param_groups"][0].keys() == \
        opt_t.state_dict()["param_groups"][0].keys()


def test_muon_rejects_what_pytorch_rejects():
    with pytest.raises(ValueError, match="only supports 2D parameters"):
        torcia.optim.Muon([torcia.nn.Parameter(torcia.ones(3))])
    with pytest.raises(ValueError, match="Learning rate should be >= 0"):
        torcia.optim.Muon([torcia.nn.Parameter(torcia.ones(2, 2))], lr=-1)
    with pytest.raises(ValueError, match="not supported"):
        torcia.optim.Muon([torcia.nn.Parameter(torcia.ones(2, 2))], adjust_lr_fn="x")
    assert torcia.optim.create("muon", [torcia.nn.Parameter(torcia.ones(2, 2))]).defaults[
        "momentum"] == 0.95


def _adam_with_state():
    w = torcia.nn.Parameter(torcia.tensor([1.0, -1.0]))
    opt = torcia.optim.Adam([w], lr=0.1)
    w.grad = torcia.tensor([1.0, 1.0])
    opt.step()
    return w, opt


def test_swap_in_runs_the_step_on_the_given_parameters_and_state_then_restores():
    w, opt = _adam_with_state()
    before = w.detach().clone()
    live_state = opt.state
    other = torcia.nn.Parameter(torcia.zeros(2))
    other.grad = torcia.tensor([2.0, -2.0])
    sd = {"state": {0: {"step": torcia.tensor(0.0), "exp_avg": torcia.zeros(2),
                        "exp_avg_sq": torcia.zeros(2)}},
          "param_groups": [dict(opt.param_groups[0], params=[0], lr=0.5)]}
    with torcia.optim.swap_in_optimizer_params_and_state(opt, {"w": other}, sd):
        assert opt.param_groups[0]["params"] == [other] and opt.param_groups[0]["lr"] == 0.5
        opt.step()
    # Adam's first step moves each entry by lr against the gradient's sign
    np.testing.assert_allclose(other.detach().numpy(), [-0.5, 0.5], rtol=1e-5)
    # in-place buffer updates reach the given state; the live optimizer is untouched
    assert sd["state"][0]["step"].item() == 1.0
    np.testing.assert_allclose(sd["state"][0]["exp_avg"].numpy(), [0.2, -0.2], rtol=1e-6)
    assert opt.state is live_state and opt.param_groups[0]["params"] == [w]
    assert opt.param_groups[0]["lr"] == 0.1 and torcia.equal(w.detach(), before)


def test_swap_in_checks_its_input():
    w = torcia.nn.Parameter(torcia.ones(2))
    fresh = torcia.optim.SGD([w], lr=0.1)
    with pytest.raises(RuntimeError, match="initialized optimizer state"):
        with torcia.optim.swap_in_optimizer_params_and_state(fresh, {}, {}):
            pass
    w, opt = _adam_with_state()
    group = dict(opt.param_groups[0], params=[0])
    with pytest.raises(RuntimeError, match="extra keys"):
        with torcia.optim.swap_in_optimizer_params_and_state(
                opt, {"w": w}, {"state": {5: {}}, "param_groups": [group]}):
            pass
    with pytest.raises(RuntimeError, match="ordering"):
        with torcia.optim.swap_in_optimizer_params_and_state(
                opt, {}, {"state": {}, "param_groups": [group]}):
            pass
