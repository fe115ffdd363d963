"""The native Adam and SGD updates (kernels.cpp's adam_step, sgd_step) against
torcia-optim's NumPy kernels: every option, parameters of sizes around the span a task
updates, their bits on every thread count."""

import numpy as np
import pytest
from torcia_cpu import _native, kernels

from torcia.optim import kernels as reference

SPAN = 1 << 15
# empty, one element, around one span, several spans with a short last one
SIZES = [0, 1, 7, SPAN - 1, SPAN, SPAN + 1, 3 * SPAN + 7]
OPTIONS = [dict(), dict(amsgrad=True), dict(maximize=True), dict(weight_decay=0.1),
           dict(weight_decay=0.1, decoupled_weight_decay=True),
           dict(weight_decay=0.05, amsgrad=True, maximize=True,
                decoupled_weight_decay=True),
           dict(beta1=0.3)]  # lerp_ from the gradient's end: a weight 1 - beta1 >= 0.5


def _state(dtype, seed=0):
    rng = np.random.default_rng(seed)

    def arrays(scale=1.0):
        return [(rng.standard_normal(n) * scale).astype(dtype) for n in SIZES]

    return dict(params=arrays(), grads=arrays(), exp_avgs=arrays(0.1),
                exp_avg_sqs=[np.abs(v) for v in arrays(0.01)],
                max_exp_avg_sqs=[np.abs(v) for v in arrays(0.02)])


def _run(step, state, options, steps=3):
    """``steps`` updates by ``step`` on a copy of ``state``; the copy after them."""
    s = {k: [a.copy() for a in v] for k, v in state.items()}
    full = {**dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
                   amsgrad=False, maximize=False, decoupled_weight_decay=False), **options}
    if not full["amsgrad"]:
        s["max_exp_avg_sqs"] = [None] * len(SIZES)
    for t in range(1, steps + 1):
        step(s["params"], s["grads"], s["exp_avgs"], s["exp_avg_sqs"], s["max_exp_avg_sqs"],
             [float(t)] * len(SIZES), **full)
    return [a for arrays in s.values() for a in arrays if a is not None]


def _same_bits_on_threads(on_threads, run, want):
    """run() on 1, 2 and 3 threads gives the arrays ``want`` to the bit."""
    for got in on_threads(run, (1, 2, 3)):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_adam_matches_the_reference(options, dtype, on_threads):
    state = _state(dtype)
    _same_bits_on_threads(on_threads, lambda: _run(kernels.adam_step, state, options),
                          _run(reference.adam_step, state, options))


def test_adam_spans_reach_every_element():
    # a parameter of several spans next to small ones: each element moved once per step
    p = [np.zeros(n, np.float32) for n in (3, 2 * SPAN + 5, 1)]
    g = [np.ones_like(a) for a in p]
    before = _native.get_num_threads()
    try:
        _native.set_num_threads(2)
        kernels.adam_step(p, g, [np.zeros_like(a) for a in p], [np.zeros_like(a) for a in p],
                          [None] * 3, [1.0] * 3, lr=0.5, beta1=0.9, beta2=0.999, eps=0.0,
                          weight_decay=0.0, amsgrad=False, maximize=False,
                          decoupled_weight_decay=False)
    finally:
        _native.set_num_threads(before)
    # the first step of Adam moves each element by lr against its gradient's sign
    for a in p:
        np.testing.assert_allclose(a, -0.5, rtol=1e-6)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_with_the_parameter_as_its_own_gradient(amsgrad):
    # a gradient sharing the parameter's memory is copied first: the reference's result
    rng = np.random.default_rng(1)
    results = []
    for step in (kernels.adam_step, reference.adam_step):
        p = rng.standard_normal(SPAN + 3).astype(np.float32)
        p[:] = np.linspace(-2, 2, p.size, dtype=np.float32)
        m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.full_like(p, 0.5)
        step([p], [p], [m], [v], [vmax if amsgrad else None], [1.0], lr=0.1, beta1=0.9,
             beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=amsgrad, maximize=False,
             decoupled_weight_decay=False)
        results.append((p, m, v))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


SGD_OPTIONS = [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True),
               dict(momentum=0.9, dampening=0.3, weight_decay=0.01, maximize=True),
               dict(weight_decay=0.1)]


def _sgd(step, state, options, steps=3):
    params = [a.copy() for a in state["params"]]
    buffers = [None] * len(SIZES)
    full = {**dict(weight_decay=0.0, momentum=0.0, dampening=0.0, nesterov=False,
                   maximize=False), **options}
    for _ in range(steps):
        step(params, state["grads"], buffers, lr=0.1, **full)
    return params + [b for b in buffers if b is not None]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", SGD_OPTIONS, ids=str)
def test_sgd_matches_the_reference(options, dtype, on_threads):
    state = _state(dtype)
    _same_bits_on_threads(on_threads, lambda: _sgd(kernels.sgd_step, state, options),
                          _sgd(reference.sgd_step, state, options))


def test_sgd_with_the_parameter_as_its_own_gradient():
    results = []
    for step in (kernels.sgd_step, reference.sgd_step):
        p = np.linspace(-2, 2, SPAN + 3, dtype=np.float32)
        buffers = [None]
        for _ in range(2):
            step([p], [p], buffers, lr=0.1, weight_decay=0.01, momentum=0.9, dampening=0.0,
                 nesterov=True, maximize=False)
        results.append((p, buffers[0]))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)
