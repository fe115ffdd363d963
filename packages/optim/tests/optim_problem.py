"""The fixed problem the optimizer tests share, and the option combinations they cover.

The loss is a separable quadratic ``sum(0.5 * c * p**2 + d * p)`` over two parameters of
different shapes, so the gradient ``c * p + d`` is known in closed form and an update rule
can be replayed in plain NumPy.
"""

import numpy as np

import torcia

RNG = np.random.default_rng(1234)
INIT = [RNG.normal(size=3), RNG.normal(size=(2, 2))]
CURVATURE = [RNG.uniform(0.5, 3.0, size=3), RNG.uniform(0.5, 3.0, size=(2, 2))]
SHIFT = [RNG.normal(size=3), RNG.normal(size=(2, 2))]
STEPS = 12

# (optimizer class name, options): every option of every optimizer is covered at least once
CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.1}),
    ("Adam", {"lr": 0.1, "amsgrad": True}),
    ("Adam", {"lr": 0.1, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.1, "betas": (0.8, 0.9), "eps": 1e-3, "maximize": True}),
    ("Adam", {"lr": 0.1, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("AdamW", {"lr": 0.1}),
    ("AdamW", {"lr": 0.1, "weight_decay": 0.2, "amsgrad": True}),
    ("Adamax", {"lr": 0.1}),
    ("Adamax", {"lr": 0.1, "weight_decay": 0.1, "betas": (0.7, 0.9)}),
    ("Adamax", {"lr": 0.1, "maximize": True}),
    ("NAdam", {"lr": 0.1}),
    ("NAdam", {"lr": 0.1, "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.1, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"lr": 0.1, "maximize": True}),
    ("RAdam", {"lr": 0.1}),
    ("RAdam", {"lr": 0.1, "betas": (0.9, 0.9), "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.1, "betas": (0.9, 0.9), "weight_decay": 0.1,
               "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.1, "betas": (0.9, 0.9), "maximize": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "centered": True, "momentum": 0.5,
                 "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "maximize": True}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "maximize": True, "eps": 1e-3}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.5, "weight_decay": 0.1}),
    ("Adadelta", {"maximize": True, "eps": 1e-3}),
]


def case_id(case):
    name, options = case
    return name + "-" + ",".join(f"{k}={v}" for k, v in options.items())


def run_torcia(name, options, dtype=torcia.float64, steps=STEPS, module=torcia.optim):
    """Parameters after ``steps`` steps of ``module.<name>`` on the shared problem."""
    params = [torcia.tensor(p, dtype=dtype, requires_grad=True) for p in INIT]
    c = [torcia.tensor(x, dtype=dtype) for x in CURVATURE]
    d = [torcia.tensor(x, dtype=dtype) for x in SHIFT]
    opt = getattr(module, name)(params, **options)
    for _ in range(steps):
        opt.zero_grad()
        loss = sum(((0.5 * ci * p * p + di * p).sum() for p, ci, di in zip(params, c, d)))
        loss.backward()
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


def gradient(p, i):
    return CURVATURE[i] * p + SHIFT[i]
