"""Each scheduler's learning-rate sequence against its closed form, written here from the
schedule's definition, and against PyTorch."""

import math
import warnings

import numpy as np
import pytest

import torcia
from torcia.optim import lr_scheduler as S

# the schedules here are stepped without optimizer steps
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step")

BASE = [0.1, 0.05]  # two parameter groups with different rates
EPOCHS = 25


def optimizer(lib=torcia, **options):
    groups = [{"params": [lib.zeros(2, requires_grad=True)], "lr": lr} for lr in BASE]
    return lib.optim.SGD(groups, lr=BASE[0], momentum=0.9, **options)


def lrs_of(sched, epochs=EPOCHS, metrics=None):
    """The rates in force at epochs 0..epochs-1, stepping after each."""
    out = []
    for e in range(epochs):
        out.append(list(sched.get_last_lr()))
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[e])
    return np.array(out)


def closed(fn):
    """The expected table: fn(base_lr, epoch) for every epoch and group."""
    return np.array([[fn(base, e) for base in BASE] for e in range(EPOCHS)])


def cos_anneal(start, end, pct):
    return end + (start - end) * (1 + math.cos(math.pi * pct)) / 2


CLOSED_FORMS = {
    "step": (lambda o: S.StepLR(o, step_size=3, gamma=0.5),
             lambda b, e: b * 0.5 ** (e // 3)),
    "multi_step": (lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.1),
                   lambda b, e: b * 0.1 ** sum(m <= e for m in [2, 5, 5, 9])),
    "constant": (lambda o: S.ConstantLR(o, factor=0.25, total_iters=4),
                 lambda b, e: b * (0.25 if e < 4 else 1.0)),
    "linear": (lambda o: S.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=6),
               lambda b, e: b * (0.2 + 0.7 * min(e, 6) / 6)),
    "exponential": (lambda o: S.ExponentialLR(o, gamma=0.9), lambda b, e: b * 0.9**e),
    "polynomial": (lambda o: S.PolynomialLR(o, total_iters=8, power=2.0),
                   lambda b, e: b * (1 - min(e, 8) / 8) ** 2),
    "cosine": (lambda o: S.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
               lambda b, e: 0.001 + (b - 0.001) * (1 + math.cos(math.pi * e / 7)) / 2),
    "lambda": (lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e)), lambda b, e: b / (1 + e)),
    "multiplicative": (lambda o: S.MultiplicativeLR(o, lambda e: 0.95),
                       lambda b, e: b * 0.95**e),
}


@pytest.mark.parametrize("name", CLOSED_FORMS)
def test_rates_follow_the_closed_form(name):
    make, formula = CLOSED_FORMS[name]
    np.testing.assert_allclose(lrs_of(make(optimizer())), closed(formula), rtol=1e-12)


@pytest.mark.parametrize("name", ["step", "multi_step", "constant", "linear", "exponential",
                                  "polynomial", "cosine"])
def test_stepping_to_an_epoch_uses_the_closed_form(name):
    make, formula = CLOSED_FORMS[name]
    sched = make(optimizer())
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(11)
    assert sched.get_last_lr() == pytest.approx([formula(b, 11) for b in BASE], rel=1e-12)


def test_warm_restarts_follow_sgdr():
    sched = S.CosineAnnealingWarmRestarts(optimizer(), T_0=3, T_mult=2, eta_min=0.01)

    def expected(b, e):
        period, start = 3, 0
        while e >= start + period:  # restarts at 3, 3 + 6, 9 + 12, ...
            start, period = start + period, period * 2
        return 0.01 + (b - 0.01) * (1 + math.cos(math.pi * (e - start) / period)) / 2

    np.testing.assert_allclose(lrs_of(sched), closed(expected), rtol=1e-12)
    sched.step(10.5)  # a fractional epoch lands inside the third period
    assert sched.get_last_lr() == pytest.approx([expected(b, 10.5) for b in BASE])


def triangle(e, half):
    """Distance to the top of the triangle wave of period 2 * half, as a fraction: 1 at the
    peak, 0 at the troughs."""
    cycle = math.floor(1 + e / (2 * half))
    return max(0.0, 1 - abs(e / half - 2 * cycle + 1)), cycle


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_cyclic_rates_and_momentum_follow_the_triangle(mode):
    opt = optimizer()
    sched = S.CyclicLR(opt, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=4, mode=mode,
                       gamma=0.9)
    momenta = []
    got = []
    for _ in range(EPOCHS):
        got.append(sched.get_last_lr())
        momenta.append(opt.param_groups[0]["momentum"])
        sched.step()
    for e in range(EPOCHS):
        height, cycle = triangle(e, 4)
        scale = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1), "exp_range": 0.9**e}[mode]
        assert got[e] == pytest.approx([b + (0.1 - b) * height * scale for b in (0.01, 0.02)])
        assert momenta[e] == pytest.approx(0.9 - 0.1 * height * scale)


@pytest.mark.parametrize("three_phase", [False, True])
@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_one_cycle_follows_its_phases(strategy, three_phase):
    total, top = 20, 1.0
    opt = optimizer()
    sched = S.OneCycleLR(opt, max_lr=top, total_steps=total, anneal_strategy=strategy,
                         three_phase=three_phase)
    low, floor = top / 25, top / 25 / 1e4
    anneal = cos_anneal if strategy == "cos" else (lambda a, b, p: a + (b - a) * p)
    rise = 0.3 * total - 1
    if three_phase:
        phases = [(rise, low, top, 0.95, 0.85), (2 * 0.3 * total - 2, top, low, 0.85, 0.95),
                  (total - 1, low, floor, 0.95, 0.95)]
    else:
        phases = [(rise, low, top, 0.95, 0.85), (total - 1, top, floor, 0.85, 0.95)]
    for e in range(total):
        i = next(i for i, phase in enumerate(phases) if e <= phase[0] or i == len(phases) - 1)
        start = phases[i - 1][0] if i else 0.0
        end, lr0, lr1, m0, m1 = phases[i]
        pct = (e - start) / (end - start)
        assert sched.get_last_lr()[0] == pytest.approx(anneal(lr0, lr1, pct))
        assert opt.param_groups[0]["momentum"] == pytest.approx(anneal(m0, m1, pct))
        if e < total - 1:
            sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 21 times"):
        sched.step()


def test_sequential_switches_at_the_milestones():
    opt = optimizer()
    warmup = S.LinearLR(opt, start_factor=0.5, total_iters=3)
    decay = S.StepLR(opt, step_size=2, gamma=0.5)
    sched = S.SequentialLR(opt, [warmup, decay], milestones=[3])
    expected = closed(lambda b, e: b * (0.5 + 0.5 * e / 3) if e < 3 else b * 0.5 ** ((e - 3) // 2))
    np.testing.assert_allclose(lrs_of(sched), expected, rtol=1e-12)


def test_chained_schedulers_multiply():
    opt = optimizer()
    sched = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=3),
                                S.ExponentialLR(opt, gamma=0.9)])
    expected = closed(lambda b, e: b * (0.5 if e < 3 else 1.0) * 0.9**e)
    np.testing.assert_allclose(lrs_of(sched), expected, rtol=1e-12)


def test_reduce_on_plateau_waits_patience_then_cools_down():
    opt = optimizer()
    sched = S.ReduceLROnPlateau(opt, factor=0.5, patience=2, cooldown=1, min_lr=[0.02, 0.0])
    metrics = [5, 4, 4, 4, 4, 4, 4, 4, 3, 3.9999, 3]
    got = lrs_of(sched, len(metrics), metrics)[:, 0].tolist() + [sched.get_last_lr()[0]]
    # epochs 2-4 are bad: reduced after the third; epoch 5 is cooldown; 8 improves, so
    # 9 and 10 are only two bad ones
    assert got == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05,
                                 0.05, 0.05])
    sched.step(3)
    sched.step(3)
    sched.step(3)
    assert sched.get_last_lr() == pytest.approx([0.025, 0.0125])
    for _ in range(9):  # the first group stops at its floor
        sched.step(3)
    assert sched.get_last_lr()[0] == 0.02


def test_reduce_on_plateau_in_max_mode_with_absolute_threshold():
    opt = optimizer()
    sched = S.ReduceLROnPlateau(opt, mode="max", threshold=0.5, threshold_mode="abs",
                                patience=0)
    sched.step(1.0)
    sched.step(1.4)  # not 0.5 better: bad epoch, patience 0 reduces at once
    assert sched.get_last_lr() == pytest.approx([0.01, 0.005])


def test_bad_arguments_are_named():
    opt = optimizer()
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        S.StepLR([], step_size=1)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        S.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(ValueError, match="Constant multiplicative factor"):
        S.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        S.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="total_steps OR"):
        S.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        S.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(ValueError, match="max_lr must have the same length"):
        S.CyclicLR(opt, base_lr=0.01, max_lr=[0.1, 0.2, 0.3])
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified"):
        S.StepLR(optimizer(), step_size=1, last_epoch=3)
    adagrad = torcia.optim.Adagrad([torcia.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        S.CyclicLR(adagrad, base_lr=0.01, max_lr=0.1)


def test_resuming_with_last_epoch_continues_the_schedule():
    opt = optimizer()
    sched = S.ExponentialLR(opt, gamma=0.5)
    for _ in range(3):
        sched.step()
    resumed = S.ExponentialLR(opt, gamma=0.5, last_epoch=sched.last_epoch)
    assert resumed.last_epoch == 4
    assert resumed.get_last_lr() == sched.get_last_lr()  # the initial step keeps the rates
    resumed.step()
    assert resumed.get_last_lr() == pytest.approx([b * 0.5**4 for b in BASE])


# ---------------------------------------------------------------------------------------
# PyTorch parity
# ---------------------------------------------------------------------------------------

PARITY = {
    "lambda": lambda M, o: M.LambdaLR(o, [lambda e: 0.9**e, lambda e: 1 / (e + 1)]),
    "multiplicative": lambda M, o: M.MultiplicativeLR(o, lambda e: 0.9),
    "step": lambda M, o: M.StepLR(o, step_size=4, gamma=0.3),
    "multi_step": lambda M, o: M.MultiStepLR(o, milestones=[3, 3, 7], gamma=0.5),
    "constant": lambda M, o: M.ConstantLR(o),
    "linear": lambda M, o: M.LinearLR(o, start_factor=0.1, end_factor=0.8, total_iters=9),
    "exponential": lambda M, o: M.ExponentialLR(o, gamma=0.8),
    "polynomial": lambda M, o: M.PolynomialLR(o, total_iters=10, power=0.5),
    "cosine": lambda M, o: M.CosineAnnealingLR(o, T_max=6, eta_min=0.01),
    "warm_restarts": lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=3),
    "cyclic": lambda M, o: M.CyclicLR(o, 0.01, [0.1, 0.2], step_size_up=3, step_size_down=5,
                                      mode="triangular2"),
    "cyclic_exp": lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="exp_range",
                                          gamma=0.95),
    "cyclic_custom": lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                             scale_fn=lambda x: 1 / (1 + x),
                                             scale_mode="iterations"),
    "one_cycle": lambda M, o: M.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=30),
    "one_cycle_3": lambda M, o: M.OneCycleLR(o, max_lr=1.0, epochs=5, steps_per_epoch=6,
                                             three_phase=True, anneal_strategy="linear",
                                             pct_start=0.4),
    "sequential": lambda M, o: M.SequentialLR(
        o, [M.LinearLR(o, start_factor=0.1, total_iters=3), M.CosineAnnealingLR(o, T_max=5),
            M.ExponentialLR(o, gamma=0.9)], milestones=[3, 10]),
    "chained": lambda M, o: M.ChainedScheduler(
        [M.ConstantLR(o, factor=0.5, total_iters=5), M.ExponentialLR(o, gamma=0.95)]),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", PARITY)
def test_rates_and_momenta_match_pytorch(name):
    torch = pytest.importorskip("torch")

    def run(lib, module):
        opt = optimizer(lib)
        sched = PARITY[name](module, opt)
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's "lr_scheduler.step() before optimizer"
            for _ in range(30):
                out.append(list(sched.get_last_lr())
                           + [g["momentum"] for g in opt.param_groups])
                sched.step()
        return np.array(out, dtype=float)

    np.testing.assert_allclose(run(torcia, S), run(torch, torch.optim.lr_scheduler),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.torch
def test_reduce_on_plateau_matches_pytorch():
    torch = pytest.importorskip("torch")
    metrics = [1.0, 0.9, 0.9, 0.95, 0.9, 0.8, 0.8, 0.8, 0.8, 0.81, 0.7] * 3

    def run(lib, module):
        opt = optimizer(lib)
        sched = module.ReduceLROnPlateau(opt, patience=1, cooldown=2, factor=0.3,
                                         threshold=0.05, min_lr=0.001)
        return [list(sched.get_last_lr()) for m in metrics if sched.step(m) is None]

    assert run(torcia, S) == run(torch, torch.optim.lr_scheduler)


@pytest.mark.torch
@pytest.mark.parametrize("make", [
    lambda M, o: M.OneCycleLR(o, max_lr=0.01, total_steps=30, base_momentum=0.8),
    lambda M, o: M.CyclicLR(o, 0.001, 0.01, step_size_up=4, base_momentum=0.7,
                            max_momentum=0.95),
], ids=["one_cycle", "cyclic"])
def test_adams_beta1_cycles_like_pytorch(make):
    torch = pytest.importorskip("torch")

    def run(lib, module):
        opt = lib.optim.Adam([lib.zeros(2, requires_grad=True)], lr=0.01, betas=(0.9, 0.99))
        sched = make(module, opt)
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(30):
                betas = opt.param_groups[0]["betas"]
                out.append([sched.get_last_lr()[0], betas[0], betas[1]])
                sched.step()
        return np.array(out, dtype=float)

    np.testing.assert_allclose(run(torcia, S), run(torch, torch.optim.lr_scheduler),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.filterwarnings("error")
def test_stepping_the_scheduler_before_the_optimizer_warns():
    opt = optimizer()
    sched = S.StepLR(opt, step_size=1)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt = optimizer()
    sched = S.StepLR(opt, step_size=1)
    opt.step()
    sched.step()  # the right order: no warning
