"""Parity with PyTorch: same start, same problem, same options, same parameters after N
steps, for every optimizer and option combination; the same state-dict layout; and LBFGS
on Rosenbrock."""

import numpy as np
import pytest
from optim_problem import CASES, CURVATURE, INIT, SHIFT, STEPS, case_id, run_torcia

import torcia

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def run_torch(name, options, steps=STEPS):
    params = [torch.tensor(p, dtype=torch.float32, requires_grad=True) for p in INIT]
    c = [torch.tensor(x, dtype=torch.float32) for x in CURVATURE]
    d = [torch.tensor(x, dtype=torch.float32) for x in SHIFT]
    opt = getattr(torch.optim, name)(params, **options)
    for _ in range(steps):
        opt.zero_grad()
        loss = sum((0.5 * ci * p * p + di * p).sum() for p, ci, di in zip(params, c, d))
        loss.backward()
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


@pytest.mark.parametrize("foreach", [True, False], ids=["kernel", "per-parameter"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_parameters_match_pytorch(case, foreach):
    name, options = case
    ours, _ = run_torcia(name, {**options, "foreach": foreach}, dtype=torcia.float32)
    theirs, _ = run_torch(name, {**options, "foreach": foreach})
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_state_dict_layout_matches_pytorch(case):
    name, options = case
    _, ours = run_torcia(name, options, dtype=torcia.float32, steps=2)
    _, theirs = run_torch(name, options, steps=2)
    ours, theirs = ours.state_dict(), theirs.state_dict()
    assert ours["state"].keys() == theirs["state"].keys()
    for i, state in theirs["state"].items():
        assert ours["state"][i].keys() == state.keys()
        for key, value in state.items():
            np.testing.assert_allclose(ours["state"][i][key].numpy(), value.numpy(),
                                       rtol=2e-6, atol=2e-6)
    for group, their_group in zip(ours["param_groups"], theirs["param_groups"]):
        assert group["params"] == their_group["params"]
        for key, value in group.items():
            assert their_group[key] == value, key


def rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


@pytest.mark.parametrize("options", [
    {"line_search_fn": "strong_wolfe"},
    {"line_search_fn": "strong_wolfe", "history_size": 3, "max_iter": 7},
    {"lr": 0.01, "max_iter": 10},
])
def test_lbfgs_matches_pytorch_on_rosenbrock(options):
    def run(lib, dtype):
        x = lib.tensor([-1.5, 2.0], dtype=dtype, requires_grad=True)
        opt = lib.optim.LBFGS([x], **options)
        losses = []

        def closure():
            opt.zero_grad()
            loss = rosenbrock(x)
            loss.backward()
            return loss

        for _ in range(6):
            losses.append(float(opt.step(closure).detach()))
        return x.detach().numpy().copy(), losses, opt.state[x]["func_evals"]

    ours = run(torcia, torcia.float64)
    theirs = run(torch, torch.float64)
    # the same evaluations in the same order; last-bit differences of the two libraries'
    # arithmetic grow along Rosenbrock's valley, hence not 1e-12
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6, atol=1e-9)
    assert ours[2] == theirs[2]
    if "line_search_fn" in options and options.get("max_iter", 20) == 20:
        np.testing.assert_allclose(ours[0], [1.0, 1.0], atol=1e-5)


def to_torcia(value):
    """A PyTorch state dict's values as torcia's (tensors through NumPy)."""
    if isinstance(value, torch.Tensor):
        return torcia.tensor(value.detach().numpy())
    if isinstance(value, dict):
        return {k: to_torcia(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_torcia(v) for v in value)
    return value


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("SGD", "Adam", "RMSprop",
                                                                  "NAdam", "Adagrad")],
                         ids=case_id)
def test_a_pytorch_state_dict_loads_and_training_continues_alike(case):
    name, options = case
    theirs_params, theirs = run_torch(name, options, steps=5)
    params = [torcia.tensor(p, requires_grad=True) for p in theirs_params]
    ours = getattr(torcia.optim, name)(params, **options)
    ours.load_state_dict(to_torcia(theirs.state_dict()))
    c = [torcia.tensor(x, dtype=torcia.float32) for x in CURVATURE]
    d = [torcia.tensor(x, dtype=torcia.float32) for x in SHIFT]
    for _ in range(4):
        ours.zero_grad()
        sum((0.5 * ci * p * p + di * p).sum() for p, ci, di in zip(params, c, d)).backward()
        ours.step()
    expected, _ = run_torch(name, options, steps=9)
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p.detach().numpy(), e, rtol=2e-6, atol=2e-6)
