"""torcia.optim.swa_utils: the averages against NumPy replays in float64 of their
definitions (running mean, EMA recursion), SWALR's rates against its closed form and
against torch, update_bn's statistics against the plain mean and variance of the data,
and whole SWA/EMA runs against torch.optim.swa_utils."""

import math
import warnings

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.optim import swa_utils as S

RNG = np.random.default_rng(3)


def _snapshots(n, shape=(3, 2)):
    return [RNG.standard_normal(shape) for _ in range(n)]


def _linear_with(w):
    model = nn.Linear(w.shape[1], w.shape[0], bias=False).double()
    with torcia.no_grad():
        model.weight.copy_(torcia.from_numpy(w))
    return model


@pytest.mark.parametrize("n", [1, 2, 5])
def test_swa_is_the_mean_of_the_snapshots(n):
    snaps = _snapshots(n)
    model = _linear_with(snaps[0])
    swa = S.AveragedModel(model)
    for w in snaps:
        with torcia.no_grad():
            model.weight.copy_(torcia.from_numpy(w))
        swa.update_parameters(model)
    np.testing.assert_allclose(swa.module.weight.detach().numpy(), np.mean(snaps, axis=0),
                               rtol=1e-12)
    assert swa.n_averaged.dtype is torcia.int64 and int(swa.n_averaged) == n
    # the averaged copy is separate from the source model
    assert swa.module.weight is not model.weight


@pytest.mark.parametrize("decay", [0.0, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("multi", [True, False])
def test_ema_follows_its_recursion(decay, multi):
    snaps = _snapshots(4)
    model = _linear_with(snaps[0])
    fn = {"multi_avg_fn": S.get_ema_multi_avg_fn(decay)} if multi else {
        "avg_fn": S.get_ema_avg_fn(decay)}
    ema = S.AveragedModel(model, **fn)
    expected = None
    for w in snaps:
        with torcia.no_grad():
            model.weight.copy_(torcia.from_numpy(w))
        ema.update_parameters(model)
        expected = w if expected is None else decay * expected + (1 - decay) * w
    np.testing.assert_allclose(ema.module.weight.detach().numpy(), expected, rtol=1e-12)


def test_avg_functions_by_hand():
    a, c = torcia.tensor([2.0, 4.0]), torcia.tensor([6.0, 0.0])
    # (2 + (6 - 2) / 4, 4 + (0 - 4) / 4) after three models
    assert S.get_swa_avg_fn()(a, c, 3).tolist() == [3.0, 3.0]
    # 0.25 * (2, 4) + 0.75 * (6, 0)
    assert S.get_ema_avg_fn(0.25)(a, c, 3).tolist() == [5.0, 1.0]
    avg = [a.clone(), torcia.tensor([10, 20])]
    S.get_swa_multi_avg_fn()(avg, [c, torcia.tensor([30, 0])], 1)
    assert avg[0].tolist() == [4.0, 2.0] and avg[1].tolist() == [20, 10]
    with pytest.raises(ValueError, match=r"\[0,1\] range"):
        S.get_ema_multi_avg_fn(1.5)
    with pytest.raises(ValueError, match=r"\[0,1\] range"):
        S.get_ema_avg_fn(-0.1)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        S.AveragedModel(nn.Linear(1, 1), avg_fn=S.get_swa_avg_fn(),
                        multi_avg_fn=S.get_swa_multi_avg_fn())


@pytest.mark.parametrize("use_buffers", [False, True])
def test_buffers_follow_or_are_averaged(use_buffers):
    model = nn.BatchNorm1d(2)
    avg = S.AveragedModel(model, use_buffers=use_buffers)
    means = []
    for k in range(3):
        with torcia.no_grad():
            model.running_mean.fill_(float(k))
        means.append(float(k))
        avg.update_parameters(model)
    got = avg.module.running_mean.tolist()
    assert got == ([1.0, 1.0] if use_buffers else [2.0, 2.0])


def test_state_dict_round_trip():
    model = nn.Linear(2, 2)
    avg = S.AveragedModel(model)
    avg.update_parameters(model)
    state = avg.state_dict()
    assert set(state) == {"n_averaged", "module.weight", "module.bias"}
    other = S.AveragedModel(nn.Linear(2, 2))
    other.load_state_dict(state)
    assert int(other.n_averaged) == 1
    assert torcia.equal(other.module.weight, model.weight)
    x = torcia.randn(3, 2)
    assert torcia.equal(other(x), model(x))


def _rates(strategy, anneal_epochs, steps, lrs=(1.0, 0.2), swa_lr=(0.1, 0.4), lib=torcia):
    params = [lib.zeros(1, requires_grad=True), lib.zeros(1, requires_grad=True)]
    opt = lib.optim.SGD([{"params": [params[0]], "lr": lrs[0]},
                         {"params": [params[1]], "lr": lrs[1]}], lr=1.0)
    swa_utils = lib.optim.swa_utils
    sched = swa_utils.SWALR(opt, swa_lr=list(swa_lr), anneal_epochs=anneal_epochs,
                            anneal_strategy=strategy)
    out = [[g["lr"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
    return out


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 3, 5])
def test_swalr_closed_form(strategy, anneal_epochs):
    rates = _rates(strategy, anneal_epochs, 7)
    f = (lambda t: (1 - math.cos(math.pi * t)) / 2) if strategy == "cos" else (lambda t: t)
    for step, row in enumerate(rates):
        # the rate interpolates from the initial one: lr0 + (swa - lr0) * f(step / E)
        t = 1.0 if anneal_epochs == 0 else min(1.0, step / anneal_epochs)
        for lr0, swa, got in zip((1.0, 0.2), (0.1, 0.4), row):
            assert got == pytest.approx(lr0 * (1 - f(t)) + swa * f(t), abs=1e-12)


def test_swalr_refusals_and_state():
    opt = torcia.optim.SGD([torcia.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        S.SWALR(opt, 0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        S.SWALR(opt, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr must have the same length"):
        S.SWALR(opt, [0.1, 0.2])
    sched = S.SWALR(opt, 0.1, anneal_epochs=4, anneal_strategy="linear")
    state = sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    again = S.SWALR(torcia.optim.SGD([torcia.zeros(1, requires_grad=True)], lr=1.0), 0.5)
    again.load_state_dict(state)
    assert again.anneal_func is S.SWALR._linear_anneal and again.anneal_epochs == 4


def test_update_bn_gives_the_data_statistics():
    data = [torcia.from_numpy(RNG.standard_normal((8, 3)) * 2 + 1) for _ in range(4)]
    model = nn.Sequential(nn.Linear(3, 3).double(), nn.BatchNorm1d(3).double())
    model.eval()
    with torcia.no_grad():
        model[0].weight.copy_(torcia.eye(3, dtype=torcia.float64))
        model[0].bias.zero_()
    S.update_bn([(x, 0) for x in data], model)
    stacked = np.concatenate([x.numpy() for x in data])
    # momentum=None: the cumulative average of the batch means and unbiased variances
    np.testing.assert_allclose(model[1].running_mean.numpy(), stacked.mean(0), rtol=1e-12)
    np.testing.assert_allclose(model[1].running_var.numpy(),
                               np.mean([x.numpy().var(0, ddof=1) for x in data], 0),
                               rtol=1e-12)
    assert not model.training and model[1].momentum == 0.1
    plain = nn.Linear(2, 2)
    S.update_bn([torcia.ones(1, 2)], plain)  # no BatchNorm: nothing to do


@pytest.mark.torch
@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 4])
def test_swalr_matches_torch(strategy, anneal_epochs):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _rates(strategy, anneal_epochs, 8, lib=torch)
    ours = _rates(strategy, anneal_epochs, 8)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["swa", "ema", "ema_single", "custom", "buffers"])
def test_training_run_matches_torch(kind):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((16, 4))
    y = RNG.standard_normal((16, 1))
    init = {"0.weight": RNG.standard_normal((5, 4)), "0.bias": RNG.standard_normal(5),
            "3.weight": RNG.standard_normal((1, 5)), "3.bias": RNG.standard_normal(1)}

    def run(lib):
        model = lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.BatchNorm1d(5), lib.nn.Tanh(),
                                  lib.nn.Linear(5, 1)).double()
        with lib.no_grad():
            for name, p in model.named_parameters():
                if name in init:
                    p.copy_(lib.from_numpy(init[name]))
        su = lib.optim.swa_utils
        kwargs = {"swa": {}, "ema": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.8)},
                  "ema_single": {"avg_fn": su.get_ema_avg_fn(0.7)},
                  "custom": {"avg_fn": lambda a, c, n: 0.5 * a + 0.5 * c},
                  "buffers": {"use_buffers": True,
                              "multi_avg_fn": su.get_ema_multi_avg_fn(0.6)}}[kind]
        avg = su.AveragedModel(model, **kwargs)
        opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for _ in range(6):
            opt.zero_grad()
            loss = ((model(lib.from_numpy(x)) - lib.from_numpy(y)) ** 2).mean()
            loss.backward()
            opt.step()
            avg.update_parameters(model)
        su.update_bn([lib.from_numpy(x[:8]), lib.from_numpy(x[8:])], avg)
        avg.eval()
        return {k: v.detach().numpy() for k, v in avg.state_dict().items()}, \
            avg(lib.from_numpy(x)).detach().numpy()

    (ours, out_ours), (theirs, out_theirs) = run(torcia), run(torch)
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-9, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(out_ours, out_theirs, rtol=1e-9, atol=1e-12)
