"""State dicts: PyTorch's layout, torcia.save round trips, and resuming mid-training giving
exactly the parameters of an unbroken run."""

import copy

import numpy as np
import pytest
from optim_problem import CASES, CURVATURE, INIT, SHIFT, case_id

import torcia
from torcia.optim import lr_scheduler as S


def loss_of(params):
    return sum((0.5 * torcia.tensor(c) * p * p + torcia.tensor(d) * p).sum()
               for p, c, d in zip(params, CURVATURE, SHIFT))


def train(opt, params, sched, steps):
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = loss_of(params)
            loss.backward()
            return loss

        opt.step(closure)
        if sched is not None:
            sched.step()


def fresh_params(values=INIT):
    return [torcia.tensor(np.asarray(v), dtype=torcia.float32, requires_grad=True)
            for v in values]


def build(name, options, params, with_scheduler):
    opt = getattr(torcia.optim, name)(params, **options)
    sched = S.MultiStepLR(opt, milestones=[2, 6], gamma=0.5) if with_scheduler else None
    return opt, sched


def save_load(obj, tmp_path):
    path = tmp_path / "checkpoint.pt"
    torcia.save(obj, path)
    return torcia.load(path)


RESUME_CASES = [c for c in CASES if c[0] != "SGD" or c[1].get("momentum")] + [
    ("LBFGS", {"lr": 0.5, "max_iter": 3, "history_size": 4}),
    ("LBFGS", {"max_iter": 4, "line_search_fn": "strong_wolfe"}),
]


@pytest.mark.parametrize("case", RESUME_CASES, ids=case_id)
def test_resuming_from_a_saved_checkpoint_continues_bit_for_bit(case, tmp_path):
    name, options = case
    with_scheduler = name != "LBFGS"
    params = fresh_params()
    opt, sched = build(name, options, params, with_scheduler)
    train(opt, params, sched, 8)
    unbroken = [p.detach().numpy().copy() for p in params]

    params = fresh_params()
    opt, sched = build(name, options, params, with_scheduler)
    train(opt, params, sched, 4)
    checkpoint = save_load({
        "params": [p.detach() for p in params],
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict() if sched else None,
    }, tmp_path)

    params = fresh_params(checkpoint["params"])
    opt, sched = build(name, options, params, with_scheduler)
    opt.load_state_dict(checkpoint["optimizer"])
    if sched is not None:
        sched.load_state_dict(checkpoint["scheduler"])
    train(opt, params, sched, 4)
    for p, expected in zip(params, unbroken):
        np.testing.assert_array_equal(p.detach().numpy(), expected)


def test_state_dict_layout():
    a, b, c = fresh_params([[1.0], [2.0], [3.0]])
    opt = torcia.optim.Adam([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1)
    (a * b * c).sum().backward()
    opt.step()
    state = opt.state_dict()
    assert list(state) == ["state", "param_groups"]
    assert [g["params"] for g in state["param_groups"]] == [[0, 1], [2]]
    assert [g["lr"] for g in state["param_groups"]] == [0.1, 0.5]
    assert state["param_groups"][0]["betas"] == (0.9, 0.999)
    assert sorted(state["state"]) == [0, 1, 2]
    assert sorted(state["state"][0]) == ["exp_avg", "exp_avg_sq", "step"]
    assert state["state"][2]["step"].dtype == torcia.float32
    assert state["state"][2]["step"].item() == 1.0


def test_loaded_state_is_a_copy_cast_to_the_parameters():
    params = fresh_params()
    opt = torcia.optim.SGD(params, lr=0.1, momentum=0.9)
    train(opt, params, None, 2)
    saved = copy.deepcopy(opt.state_dict())
    doubles = [torcia.tensor(p.detach().numpy(), dtype=torcia.float64, requires_grad=True)
               for p in params]
    other = torcia.optim.SGD(doubles, lr=0.3, momentum=0.9)
    other.load_state_dict(saved)
    assert other.param_groups[0]["lr"] == 0.1
    buf = other.state[doubles[0]]["momentum_buffer"]
    assert buf.dtype == torcia.float64
    train(other, doubles, None, 1)
    assert not np.array_equal(buf.numpy(), saved["state"][0]["momentum_buffer"].numpy())


def test_loading_a_mismatched_state_dict_is_refused():
    params = fresh_params()
    saved = torcia.optim.SGD(params, lr=0.1).state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        torcia.optim.SGD([{"params": params[:1]}, {"params": params[1:]}], lr=0.1
                         ).load_state_dict(saved)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        torcia.optim.SGD(params[:1], lr=0.1).load_state_dict(saved)


SCHEDULERS = {
    "lambda": lambda o: S.LambdaLR(o, lambda e: 0.9**e),
    "cosine": lambda o: S.CosineAnnealingLR(o, T_max=5),
    "warm_restarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2),
    "cyclic": lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3),
    "one_cycle": lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=20),
    "sequential": lambda o: S.SequentialLR(o, [S.ConstantLR(o, total_iters=2),
                                               S.ExponentialLR(o, gamma=0.9)], milestones=[3]),
    "chained": lambda o: S.ChainedScheduler([S.StepLR(o, step_size=2),
                                             S.ExponentialLR(o, gamma=0.9)]),
    "plateau": lambda o: S.ReduceLROnPlateau(o, patience=1),
}


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step")
@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_state_survives_torcia_save(name, tmp_path):
    def run(sched, steps):
        for _ in range(steps):
            sched.step(*([1.0] if name == "plateau" else []))
        return sched.get_last_lr()

    opt = torcia.optim.SGD(fresh_params(), lr=0.1, momentum=0.9)
    sched = SCHEDULERS[name](opt)
    run(sched, 4)
    opt_state, sched_state = save_load((opt.state_dict(), sched.state_dict()), tmp_path)
    expected = run(sched, 5)

    new_opt = torcia.optim.SGD(fresh_params(), lr=0.1, momentum=0.9)
    new_sched = SCHEDULERS[name](new_opt)
    new_opt.load_state_dict(opt_state)
    new_sched.load_state_dict(sched_state)
    assert run(new_sched, 5) == expected
