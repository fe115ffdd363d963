"""torcia.signal.windows: every window against SciPy's definitions (independent truth,
where SciPy is installed) and against torch.signal.windows (where torch is), over lengths
0..9, both symmetries, both float dtypes and the windows' parameters; hand-derived values;
PyTorch's refusals."""

import math

import numpy as np
import pytest

import torcia
from torcia.signal import windows as W

NAMES = W.__all__
#: per window, the parameter sets tried (keyword arguments)
PARAMS = {
    "general_cosine": [{"a": [0.5, 0.5]}, {"a": [0.46, 0.23, 0.31]}],
    "general_hamming": [{}, {"alpha": 0.6}],
    "kaiser": [{}, {"beta": 0.0}, {"beta": 3.5}],
    "gaussian": [{}, {"std": 2.5}],
    "exponential": [{}, {"tau": 3.0}],
}
CASES = [(name, M, sym, kw) for name in NAMES for M in range(7) for sym in (True, False)
         for kw in PARAMS.get(name, [{}])]


def _id(case):
    name, M, sym, kw = case
    return f"{name}-{M}-{'sym' if sym else 'periodic'}-{kw}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_matches_scipy(case):
    signal = pytest.importorskip("scipy.signal")
    name, M, sym, kw = case
    args = dict(kw)
    if name == "general_cosine":
        args = {"a": kw["a"]}
    ref = getattr(signal.windows, name)
    if name in ("general_cosine", "general_hamming", "kaiser", "gaussian"):
        positional = {"general_cosine": "a", "general_hamming": "alpha", "kaiser": "beta",
                      "gaussian": "std"}[name]
        default = {"alpha": 0.54, "beta": 12.0, "std": 1.0}.get(positional)
        expected = ref(M, args.get(positional, default), sym=sym)
    elif name == "exponential":
        expected = ref(M, tau=args.get("tau", 1.0), sym=sym)
    else:
        expected = ref(M, sym=sym)
    got = getattr(W, name)(M, sym=sym, dtype=torcia.float64, **kw)
    assert got.dtype is torcia.float64 and tuple(got.shape) == (M,)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_matches_torch(case, dtype):
    torch = pytest.importorskip("torch")
    name, M, sym, kw = case
    theirs = getattr(torch.signal.windows, name)(M, sym=sym, dtype=getattr(torch, dtype), **kw)
    ours = getattr(W, name)(M, sym=sym, dtype=getattr(torcia, dtype), **kw)
    assert ours.dtype.name == dtype and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("M", [1, 2, 6])
@pytest.mark.parametrize("center", [0.0, 1.5, 7.0])
def test_exponential_center_matches_torch(M, center):
    torch = pytest.importorskip("torch")
    theirs = torch.signal.windows.exponential(M, center=center, sym=False, dtype=torch.float64)
    ours = W.exponential(M, center=center, sym=False, dtype=torcia.float64)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_hand_derived_values():
    # hann(5): 0.5 - 0.5 cos(2 pi k / 4) = 0, 0.5, 1, 0.5, 0
    assert W.hann(5).tolist() == [0.0, 0.5, 1.0, 0.5, 0.0]
    # the periodic window is the symmetric one of M + 1 points without its last
    assert W.hann(4, sym=False).tolist() == W.hann(5).tolist()[:4]
    # bartlett(3): 1 - |k - 1| = 0, 1, 0
    assert W.bartlett(3).tolist() == [0.0, 1.0, 0.0]
    # cosine(2): sin(pi / 4), sin(3 pi / 4)
    np.testing.assert_allclose(W.cosine(2, dtype=torcia.float64).numpy(),
                               [math.sin(math.pi / 4)] * 2)
    # gaussian(3, std=2): exp(-(1/2)^2 / 2) at the ends
    np.testing.assert_allclose(W.gaussian(3, std=2.0, dtype=torcia.float64).numpy(),
                               [math.exp(-0.125), 1.0, math.exp(-0.125)])
    # exponential(1, center=2, sym=False): the one point is 2 away from the peak
    np.testing.assert_allclose(W.exponential(1, center=2.0, sym=False).numpy(), [math.exp(-2)],
                               rtol=1e-6)
    assert W.kaiser(1).tolist() == [1.0] and W.hann(0).shape == (0,)


def test_options():
    pytest.importorskip("torcia.autograd")
    w = W.hamming(4, dtype=torcia.float64, requires_grad=True, layout=torcia.strided)
    assert w.dtype is torcia.float64 and w.requires_grad and w.is_leaf
    assert W.hann(3).dtype is torcia.get_default_dtype()


@pytest.mark.parametrize("call,error,match", [
    (lambda: W.hann(-1), ValueError, "non-negative window length"),
    (lambda: W.hann(3, dtype=torcia.int64), ValueError, "float32 or float64"),
    (lambda: W.hann(3, dtype=torcia.float16), ValueError, "float32 or float64"),
    (lambda: W.kaiser(3, beta=-1.0), ValueError, "beta must be non-negative"),
    (lambda: W.gaussian(3, std=0.0), ValueError, "Standard deviation must be positive"),
    (lambda: W.exponential(3, tau=0.0), ValueError, "Tau must be positive"),
    (lambda: W.exponential(3, center=1.0), ValueError, "Center must be None"),
    (lambda: W.general_cosine(3, a=[]), ValueError, "Coefficients cannot be empty"),
    (lambda: W.hann(3, layout=torcia.sparse_coo), ValueError, "strided tensors only"),
    (lambda: W.hann(2.0), TypeError, "M must be an int"),
])
def test_refusals(call, error, match):
    with pytest.raises(error, match=match):
        call()
