"""Each optimizer's trajectory against its published update rule, replayed in NumPy
(float64) from the algorithm's pseudocode, and the multi-tensor kernels against the
per-parameter path, bit for bit."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optim_problem import CASES, INIT, STEPS, case_id, gradient, run_torcia

import torcia
from torcia.optim.kernels import KERNELS, _lerp_

# ---------------------------------------------------------------------------------------
# reference rules: step(theta, g, state, t, **options) -> new theta; state is a dict
# ---------------------------------------------------------------------------------------


def sgd(theta, g, s, t, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False,
        maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * theta
    if momentum:
        s["b"] = g if t == 1 else momentum * s["b"] + (1 - dampening) * g
        g = g + momentum * s["b"] if nesterov else s["b"]
    return theta - lr * g


def moments(theta, g, s, lr, betas, weight_decay, decoupled, maximize):
    """The Adam family's first lines: sign, weight decay (L2 or decoupled), and the two
    moment averages in ``s``; returns the decayed theta and the gradient used."""
    b1, b2 = betas
    g = -g if maximize else g
    if decoupled:
        theta = theta * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * theta
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    return theta, g


def adam(theta, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
         maximize=False, decoupled_weight_decay=False):
    b1, b2 = betas
    theta, g = moments(theta, g, s, lr, betas, weight_decay, decoupled_weight_decay, maximize)
    m_hat = s["m"] / (1 - b1**t)
    if amsgrad:
        s["vmax"] = np.maximum(s.get("vmax", 0), s["v"])
        v_hat = s["vmax"] / (1 - b2**t)
    else:
        v_hat = s["v"] / (1 - b2**t)
    return theta - lr * m_hat / (np.sqrt(v_hat) + eps)


def adamw(theta, g, s, t, lr, weight_decay=1e-2, **options):
    return adam(theta, g, s, t, lr, weight_decay=weight_decay, decoupled_weight_decay=True,
                **options)


def adamax(theta, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    b1, b2 = betas
    g = (-g if maximize else g) + weight_decay * theta
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g) + eps)
    return theta - lr * s["m"] / ((1 - b1**t) * s["u"])


def nadam(theta, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
          momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    theta, g = moments(theta, g, s, lr, betas, weight_decay, decoupled_weight_decay, maximize)

    def mu(i):
        return b1 * (1 - 0.5 * 0.96 ** (i * momentum_decay))

    prod_t = math.prod(mu(i) for i in range(1, t + 1))
    m_hat = mu(t + 1) * s["m"] / (1 - prod_t * mu(t + 1)) + (1 - mu(t)) * g / (1 - prod_t)
    v_hat = s["v"] / (1 - b2**t)
    return theta - lr * m_hat / (np.sqrt(v_hat) + eps)


def radam(theta, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
          decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    theta, g = moments(theta, g, s, lr, betas, weight_decay, decoupled_weight_decay, maximize)
    m_hat = s["m"] / (1 - b1**t)
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
    if rho_t <= 5:
        return theta - lr * m_hat
    l_t = math.sqrt(1 - b2**t) / (np.sqrt(s["v"]) + eps)
    r_t = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    return theta - lr * m_hat * r_t * l_t


def rmsprop(theta, g, s, t, lr, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
            centered=False, maximize=False):
    g = (-g if maximize else g) + weight_decay * theta
    s["v"] = alpha * s.get("v", 0) + (1 - alpha) * g * g
    v = s["v"]
    if centered:
        s["gbar"] = alpha * s.get("gbar", 0) + (1 - alpha) * g
        v = v - s["gbar"] ** 2
    if momentum > 0:
        s["b"] = momentum * s.get("b", 0) + g / (np.sqrt(v) + eps)
        return theta - lr * s["b"]
    return theta - lr * g / (np.sqrt(v) + eps)


def adagrad(theta, g, s, t, lr, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
            eps=1e-10, maximize=False):
    g = (-g if maximize else g) + weight_decay * theta
    s["sum"] = s.get("sum", initial_accumulator_value) + g * g
    return theta - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s["sum"]) + eps)


def adadelta(theta, g, s, t, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    g = (-g if maximize else g) + weight_decay * theta
    s["v"] = rho * s.get("v", 0) + (1 - rho) * g * g
    delta = np.sqrt(s.get("u", 0) + eps) / np.sqrt(s["v"] + eps) * g
    s["u"] = rho * s.get("u", 0) + (1 - rho) * delta * delta
    return theta - lr * delta


RULES = {
    "SGD": sgd, "Adam": adam, "AdamW": adamw, "Adamax": adamax, "NAdam": nadam,
    "RAdam": radam, "RMSprop": rmsprop, "Adagrad": adagrad, "Adadelta": adadelta,
}


def replay(rule, options, steps=STEPS):
    thetas = [p.copy() for p in INIT]
    states = [{} for _ in thetas]
    for t in range(1, steps + 1):
        thetas = [rule(th, gradient(th, i), s, t, **options)
                  for i, (th, s) in enumerate(zip(thetas, states))]
    return thetas


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_trajectory_follows_the_published_rule(case):
    name, options = case
    expected = replay(RULES[name], options)
    got, _ = run_torcia(name, options)
    for g, e in zip(got, expected):
        # NAdam's running momentum product is float32, as PyTorch keeps it
        np.testing.assert_allclose(g, e, rtol=1e-6 if name == "NAdam" else 1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_multi_tensor_kernel_matches_the_per_parameter_path_exactly(case, monkeypatch):
    name, options = case
    # torcia-optim's NumPy kernels, even where a native plugin overrides them
    kernels = torcia.device("cpu").backend.kernels
    for op, fn in KERNELS.items():
        monkeypatch.setitem(kernels, op, fn)
    fused, opt_fused = run_torcia(name, {**options, "foreach": True}, dtype=torcia.float32)
    plain, opt_plain = run_torcia(name, {**options, "foreach": False}, dtype=torcia.float32)
    for a, b in zip(fused, plain):
        np.testing.assert_array_equal(a, b)
    for p_fused, p_plain in zip(opt_fused.param_groups[0]["params"],
                                opt_plain.param_groups[0]["params"]):
        s_fused, s_plain = opt_fused.state[p_fused], opt_plain.state[p_plain]
        assert s_fused.keys() == s_plain.keys()
        for key in s_fused:
            np.testing.assert_array_equal(s_fused[key].numpy(), s_plain[key].numpy())


def test_the_kernel_path_bumps_parameter_versions():
    w = torcia.tensor([1.0, 2.0], requires_grad=True)
    opt = torcia.optim.Adam([w], foreach=True)
    (w * w).sum().backward()
    before = w._version
    opt.step()
    assert w._version == before + 1


def test_a_parameter_without_gradient_is_left_alone():
    w = torcia.tensor([1.0, 2.0], requires_grad=True)
    frozen = torcia.tensor([3.0], requires_grad=True)
    opt = torcia.optim.Adam([w, frozen], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    assert frozen.tolist() == [3.0]
    assert frozen not in opt.state
    assert w.tolist() != [1.0, 2.0]


def test_a_backend_kernel_of_higher_priority_replaces_the_numpy_one():
    calls = []

    class FusedAdam:
        @torcia.hookimpl
        def torcia_register_kernels(self, registry):
            from torcia.optim.kernels import adam_step

            def fused(*args, **kwargs):
                calls.append(len(args[0]))
                adam_step(*args, **kwargs)


            registry.add("adam_step", "cpu", fused, priority=1000)

    pm = torcia.plugins.manager()
    plugin = FusedAdam()
    pm.register(plugin, name="test-fused-adam")
    torcia.backend.reset_kernels()
    try:
        w = torcia.tensor([1.0, 2.0], requires_grad=True)
        b = torcia.tensor([0.5], requires_grad=True)
        opt = torcia.optim.Adam([w, b], lr=0.1)
        (w * w).sum().add(b.sum()).backward()
        opt.step()
        assert calls == [2]
        assert opt.state[w]["exp_avg"].tolist() == pytest.approx([0.2, 0.4])
    finally:
        pm.unregister(plugin)
        torcia.backend.reset_kernels()
    assert torcia.device("cpu").backend.kernel_providers["adam_step"] != "test-fused-adam"


OPTIONS = {
    "SGD": st.fixed_dictionaries({
        "lr": st.floats(1e-4, 1.0), "momentum": st.sampled_from([0.0, 0.5, 0.9]),
        "weight_decay": st.sampled_from([0.0, 0.1]), "maximize": st.booleans()}),
    "Adam": st.fixed_dictionaries({
        "lr": st.floats(1e-4, 1.0), "betas": st.tuples(st.floats(0.0, 0.99), st.floats(0.0, 0.999)),
        "eps": st.floats(1e-10, 1e-2), "weight_decay": st.sampled_from([0.0, 0.1]),
        "amsgrad": st.booleans(), "decoupled_weight_decay": st.booleans()}),
    "RMSprop": st.fixed_dictionaries({
        "lr": st.floats(1e-4, 0.1), "alpha": st.floats(0.5, 0.999),
        "momentum": st.sampled_from([0.0, 0.9]), "centered": st.booleans()}),
}


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(sorted(OPTIONS)), data=st.data(),
       shapes=st.lists(st.lists(st.integers(1, 4), min_size=0, max_size=3), min_size=1,
                       max_size=4),
       dtype=st.sampled_from([torcia.float32, torcia.float64]))
def test_kernel_and_per_parameter_path_agree_for_any_shapes_and_options(name, data, shapes,
                                                                         dtype):
    options = data.draw(OPTIONS[name])
    rng = np.random.default_rng(0)
    init = [rng.normal(size=shape) for shape in shapes]
    grads = [[rng.normal(size=shape) for shape in shapes] for _ in range(3)]
    kernels = torcia.device("cpu").backend.kernels
    saved = {op: kernels[op] for op in KERNELS}
    kernels.update(KERNELS)  # the NumPy kernels, even where a native plugin overrides them
    try:
        results = []
        for foreach in (True, False):
            params = [torcia.tensor(p, dtype=dtype, requires_grad=True) for p in init]
            opt = getattr(torcia.optim, name)(params, foreach=foreach, **options)
            for step_grads in grads:
                for p, g in zip(params, step_grads):
                    p.grad = torcia.tensor(g, dtype=dtype)
                opt.step()
            results.append([p.detach().numpy().copy() for p in params])
    finally:
        kernels.update(saved)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weight", [0.4999999999999999, 0.49999997, 0.5, 0.1, 0.9])
def test_the_kernels_lerp_picks_its_side_by_the_weight_in_the_tensors_dtype(weight, dtype):
    # RMSprop's and Adam's averages: a float32 tensor's 0.4999999999999999 is 0.5, taken
    # from the end as lerp_ does (the foreach path had differed from it in the last bit)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=64).astype(dtype), rng.normal(size=64).astype(dtype)
    out = a.copy()
    _lerp_(out, b, weight)
    expected = torcia.tensor(a)
    expected.lerp_(torcia.tensor(b), weight)
    np.testing.assert_array_equal(out, expected.numpy())
