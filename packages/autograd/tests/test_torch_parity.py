"""Gradients at the points where derivatives are a choice (ties, zeros, kinks, bounds):
torcia must make PyTorch's choice. Smooth points are covered by the table's gradchecks."""

from __future__ import annotations

import numpy as np
import pytest

import torcia

torch = pytest.importorskip("torch")

TIE = [1.0, 3.0, 3.0, -2.0]
WITH_ZEROS = [0.0, 2.0, 0.0, -1.5]

# name -> (function of the library and its inputs, input values)
CASES = {
    "abs at 0": (lambda L, x: x.abs(), [[0.0, -1.0, 2.0]]),
    "relu at 0": (lambda L, x: L.relu(x), [[0.0, -1.0, 2.0]]),
    "sqrt at 1": (lambda L, x: x.sqrt(), [[1.0, 4.0]]),
    "maximum tie": (lambda L, a, b: L.maximum(a, b), [[1.0, 2.0], [1.0, 3.0]]),
    "minimum tie": (lambda L, a, b: L.minimum(a, b), [[1.0, 2.0], [1.0, 3.0]]),
    "amax ties": (lambda L, x: x.amax(), [TIE]),
    "amin ties dim": (lambda L, x: x.reshape(2, 2).amin(1), [[1.0, 1.0, 0.0, 2.0]]),
    "max dim ties": (lambda L, x: L.max(x.reshape(2, 2), 1).values, [[3.0, 3.0, 0.0, 2.0]]),
    "max all ties": (lambda L, x: x.max(), [TIE]),
    "clamp at bounds": (lambda L, x: x.clamp(-1.0, 1.0), [[-1.0, 1.0, 0.5, 2.0]]),
    "clamp tensor bounds": (lambda L, x, lo, hi: L.clamp(x, lo, hi),
                            [[0.0, 1.0, 2.0], [0.0, 2.0, 1.0], [1.0, 1.0, 0.5]]),
    "norm at 0": (lambda L, x: x.norm(), [[0.0, 0.0]]),
    "norm inf ties": (lambda L, x: x.norm(float("inf")), [[2.0, -2.0, 1.0]]),
    "vector_norm 1 at 0": (lambda L, x: L.linalg.vector_norm(x, 1), [[0.0, 1.0]]),
    "prod with zeros": (lambda L, x: x.prod(), [WITH_ZEROS]),
    "prod one zero": (lambda L, x: x.prod(), [[0.0, 2.0, 3.0]]),
    "prod dim zeros": (lambda L, x: x.reshape(2, 2).prod(0), [WITH_ZEROS]),
    "cumprod zeros": (lambda L, x: x.cumprod(0), [WITH_ZEROS]),
    "sort ties": (lambda L, x: L.sort(x, stable=True).values * L.arange(4.0), [TIE]),
    "topk ties": (lambda L, x: L.topk(x, 2).values * L.tensor([1.0, 2.0]), [TIE]),
    "median even": (lambda L, x: L.median(x), [[4.0, 1.0, 3.0, 2.0]]),
    "pow base 0": (lambda L, a, b: a ** b, [[0.0, 0.0, 2.0], [2.0, 0.0, 0.0]]),
    "pow scalar at 0": (lambda L, a: a ** 2.0, [[0.0, 1.0]]),
    "pow exponent 0": (lambda L, a: a ** 0.0, [[0.0, 1.0]]),
    "xlogy x=0": (lambda L, a, b: L.xlogy(a, b), [[0.0, 1.0], [0.0, 2.0]]),
    "std": (lambda L, x: x.std(), [[1.0, 2.0, 4.0]]),
    "var correction 0": (lambda L, x: x.var(correction=0), [[1.0, 2.0, 4.0]]),
    "logsumexp -inf": (lambda L, x: x.logsumexp(0), [[0.0, -1e300]]),
    "where": (lambda L, a, b: L.where(a > 0, a, b), [[1.0, -1.0], [2.0, 3.0]]),
    "fmax nan": (lambda L, a, b: L.fmax(a, b), [[float("nan"), 1.0], [2.0, 0.0]]),
    "remainder": (lambda L, a, b: L.remainder(a, b), [[5.5, -3.5], [2.0, 1.5]]),
    "masked_fill": (lambda L, x: x.masked_fill(x > 1, 0.0), [[0.5, 2.0]]),
    "masked_fill tensor value": (lambda L, x, v: x.masked_fill(x > 1, v[0] * 2),
                                 [[0.5, 2.0, 3.0], [1.5]]),
    "fill_ tensor value": (lambda L, x, v: (x * 1)[1:].fill_(v[0] * 2) * x[1:],
                           [[0.5, 2.0, 3.0], [1.5]]),
    "scatter_reduce amax ties": (
        lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0, 1]), s, "amax"),
        [[2.0, 0.0], [2.0, 1.0, 5.0]]),
    "scatter_reduce mean": (
        lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0, 1]), s, "mean", include_self=False),
        [[2.0, 0.0], [2.0, 1.0, 5.0]]),
    "cummax ties": (lambda L, x: L.cummax(x, 0).values, [[1.0, 1.0, 3.0, 2.0]]),
    "kthvalue ties": (lambda L, x: L.kthvalue(x, 2).values, [[2.0, 1.0, 1.0]]),
    "hypot at 0": (lambda L, a, b: L.hypot(a, b), [[0.0, 3.0], [0.0, 4.0]]),
    "atan2 at 0": (lambda L, a, b: L.atan2(a, b), [[0.0, 1.0], [0.0, 1.0]]),
    "nan_to_num": (lambda L, x: L.nan_to_num(x), [[float("nan"), float("inf"), 1.0]]),
    "nansum": (lambda L, x: x.nansum(), [[float("nan"), 2.0]]),
    "sign": (lambda L, x: x.sign() * x, [[0.0, -2.0, 3.0]]),
    "gather repeats": (lambda L, x: x.gather(0, L.tensor([1, 1, 0])), [[1.0, 2.0]]),
    "index_put accumulate": (
        lambda L, x, v: L.index_put(x, (L.tensor([0, 0]),), v, accumulate=True),
        [[1.0, 2.0], [3.0, 4.0]]),
    "unfold overlap": (lambda L, x: x.unfold(0, 2, 1), [[1.0, 2.0, 3.0]]),
}


def _grads(lib, build, values):
    xs = [lib.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in values]
    out = build(lib, *xs)
    out.backward(lib.ones_like(out))
    return [x.grad.numpy() for x in xs]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on nan and zero divisions
@pytest.mark.parametrize("name", CASES)
def test_gradient_choice_matches_torch(name):
    build, values = CASES[name]
    theirs = _grads(torch, build, values)
    ours = _grads(torcia, build, values)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0, equal_nan=True)
