"""ASGD, Rprop and Adafactor against PyTorch on the shared problem: the same parameters
after N steps and the same state-dict layout. (They have no multi-tensor kernel yet, so
``foreach=True`` raises as for any optimizer without one.)"""

import numpy as np
import pytest
from optim_problem import case_id, run_torcia

import torcia

CASES = [
    ("ASGD", {"lr": 0.05}),
    ("ASGD", {"lr": 0.05, "lambd": 0.1, "alpha": 0.5, "t0": 3, "weight_decay": 0.1}),
    ("ASGD", {"lr": 0.05, "maximize": True}),
    ("Rprop", {"lr": 0.05}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2)}),
    ("Rprop", {"lr": 0.05, "maximize": True}),
    ("Adafactor", {}),
    ("Adafactor", {"lr": 0.05, "beta2_decay": -0.5, "d": 2.0, "weight_decay": 0.1}),
    ("Adafactor", {"eps": (1e-6, 1e-2), "maximize": True}),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_parameters_match_pytorch(case):
    torch = pytest.importorskip("torch")
    from test_torch_parity import run_torch

    name, options = case
    ours, _ = run_torcia(name, {**options, "foreach": False}, dtype=torcia.float32)
    theirs, _ = run_torch(name, {**options, "foreach": False})
    assert torch is not None
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_state_dict_layout_matches_pytorch(case):
    pytest.importorskip("torch")
    from test_torch_parity import run_torch

    name, options = case
    _, ours = run_torcia(name, options, dtype=torcia.float32, steps=2)
    _, theirs = run_torch(name, options, steps=2)
    ours, theirs = ours.state_dict(), theirs.state_dict()
    for i, state in theirs["state"].items():
        assert ours["state"][i].keys() == state.keys()
        for key, value in state.items():
            np.testing.assert_allclose(ours["state"][i][key].numpy(), value.numpy(),
                                       rtol=2e-6, atol=2e-6)
    for group, their_group in zip(ours["param_groups"], theirs["param_groups"]):
        assert group.keys() == their_group.keys()


@pytest.mark.parametrize("name", ["ASGD", "Rprop", "Adafactor"])
def test_decreases_a_quadratic_and_checks_arguments(name):
    w = torcia.tensor([3.0, -2.0], requires_grad=True)
    opt = getattr(torcia.optim, name)([w], lr=0.1)
    for _ in range(20):
        opt.zero_grad()
        (w ** 2).sum().backward()
        opt.step()
    assert (w ** 2).sum().item() < 13.0
    assert torcia.optim.create(name.lower(), [w]).__class__.__name__ == name
    with pytest.raises(ValueError, match="Invalid learning rate"):
        getattr(torcia.optim, name)([w], lr=-1.0)
