"""Reductions and scans over dims (int, tuple, all) with keepdim, against NumPy, SciPy
and hand values, with torch parity where installed."""

import math

import numpy as np
import pytest
from scipy.special import logsumexp as sp_logsumexp

import torcia

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 4, 5))

REDUCTIONS = {
    "sum": lambda a, d, k: a.sum(axis=d, keepdims=k),
    "mean": lambda a, d, k: a.mean(axis=d, keepdims=k),
    "prod": lambda a, d, k: a.prod(axis=d, keepdims=k),
    "amax": lambda a, d, k: a.max(axis=d, keepdims=k),
    "amin": lambda a, d, k: a.min(axis=d, keepdims=k),
    "var": lambda a, d, k: a.var(axis=d, keepdims=k, ddof=1),
    "std": lambda a, d, k: a.std(axis=d, keepdims=k, ddof=1),
    "logsumexp": lambda a, d, k: sp_logsumexp(a, axis=d, keepdims=k),
    "norm": lambda a, d, k: np.sqrt((a * a).sum(axis=d, keepdims=k)),
    "nansum": lambda a, d, k: np.nansum(a, axis=d, keepdims=k),
}
DIMS = [None, 0, -1, (0, 2), (1,), (-1, 0)]


def _np_dim(d):
    return tuple(x % 3 for x in d) if isinstance(d, tuple) else d


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("dim, keepdim", [(d, k) for d in DIMS for k in (False, True)
                                           if d is not None or not k])
def test_reductions_against_numpy(name, dim, keepdim):
    x = torcia.from_numpy(A)
    fn = getattr(torcia, name)
    if dim is None and name == "logsumexp":
        dim = (0, 1, 2)
    out = fn(x, dim=dim, keepdim=keepdim) if dim is not None else fn(x)
    expected = REDUCTIONS[name](A, _np_dim(dim), keepdim)
    assert tuple(out.shape) == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-10)


def test_reduction_dtypes():
    i = torcia.tensor([[1, 2], [3, 4]], dtype=torcia.int32)
    assert torcia.sum(i).dtype is torcia.int64 and torcia.sum(i).item() == 10
    assert torcia.prod(i, 1).tolist() == [2, 12]
    assert torcia.sum(torcia.tensor([True, True, False])).item() == 2
    assert torcia.sum(i, dtype=torcia.float64).dtype is torcia.float64
    assert torcia.amax(i).dtype is torcia.int32
    assert torcia.mean(i, dtype=torcia.float64).item() == 2.5
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype. Input "
                                           "dtype must be either a floating point or complex "
                                           "dtype. Got: Int"):
        torcia.mean(i)
    with pytest.raises(RuntimeError, match="std\\(\\): input dtype should be floating point"):
        torcia.std(i)


def test_correction_and_unbiased():
    x = torcia.tensor([1.0, 2.0, 3.0, 4.0])
    assert x.var().item() == pytest.approx(5 / 3)
    assert x.var(correction=0).item() == pytest.approx(1.25)
    assert x.var(unbiased=False).item() == pytest.approx(1.25)
    assert x.std(correction=2).item() == pytest.approx(math.sqrt(5 / 2))
    v, m = torcia.var_mean(x)
    assert (v.item(), m.item()) == (pytest.approx(5 / 3), 2.5)
    s, m = torcia.std_mean(x, 0)
    assert s.item() == pytest.approx(math.sqrt(5 / 3))


def test_max_min_with_dim_and_argmax():
    x = torcia.tensor([[1, 5, 5], [7, 2, 7]])
    r = torcia.max(x, dim=1)
    assert r.values.tolist() == [5, 7] and r.indices.tolist() == [1, 0]  # first of ties
    values, indices = torcia.min(x, 0, keepdim=True)
    assert values.tolist() == [[1, 2, 5]] and indices.tolist() == [[0, 1, 0]]
    assert torcia.max(x).item() == 7 and torcia.min(x).item() == 1
    assert x.argmax().item() == 3 and x.argmin(dim=1).tolist() == [0, 1]
    assert x.argmax(dim=0, keepdim=True).shape == (1, 3)
    assert torcia.max(x, torcia.full((2, 3), 6)).tolist() == [[6, 6, 6], [7, 6, 7]]
    assert "torcia.return_types.max(\nvalues=" in repr(r)
    with pytest.raises(IndexError, match="Expected reduction dim to be specified for "
                                         "input.numel\\(\\) == 0"):
        torcia.max(torcia.zeros(0))


def test_norm_variants():
    x = torcia.tensor([[3.0, -4.0], [0.0, 0.0]])
    assert x.norm().item() == 5.0
    assert x.norm(p=1).item() == 7.0
    assert x.norm(p=float("inf")).item() == 4.0
    assert x.norm(p=0).item() == 2.0
    assert x.norm(dim=1).tolist() == [5.0, 0.0]
    assert torcia.norm(x, p=3).item() == pytest.approx((27 + 64) ** (1 / 3))


def test_all_any_count_nonzero():
    x = torcia.tensor([[1, 0], [2, 3]])
    assert torcia.all(x).item() is False and torcia.any(x).item() is True
    assert x.all(dim=1).tolist() == [False, True]
    assert x.any(dim=0, keepdim=True).tolist() == [[True, True]]
    assert torcia.count_nonzero(x).item() == 3
    assert torcia.count_nonzero(x, dim=0).tolist() == [2, 1]


def test_logsumexp_is_stable():
    x = torcia.tensor([1000.0, 1000.0])
    assert x.logsumexp(0).item() == pytest.approx(1000 + math.log(2))
    x = torcia.tensor([-math.inf, -math.inf])
    assert x.logsumexp(0).item() == -math.inf


def test_scans():
    x = torcia.tensor([[1, 2, 3], [4, 5, 6]])
    assert torcia.cumsum(x, 1).tolist() == [[1, 3, 6], [4, 9, 15]]
    assert x.cumsum(0).tolist() == [[1, 2, 3], [5, 7, 9]]
    assert torcia.cumprod(x, -1).tolist() == [[1, 2, 6], [4, 20, 120]]
    assert torcia.cumsum(x.to(torcia.int8), 1).dtype is torcia.int64
    y = torcia.tensor([1.0, 3.0, 2.0, 5.0])
    r = torcia.cummax(y, 0)
    assert r.values.tolist() == [1, 3, 3, 5] and r.indices.tolist() == [0, 1, 1, 3]
    r = torcia.cummin(y, 0)
    assert r.values.tolist() == [1, 1, 1, 1] and r.indices.tolist() == [0, 0, 0, 0]
    np.testing.assert_allclose(torcia.logcumsumexp(y, 0).numpy(),
                               np.log(np.cumsum(np.exp([1.0, 3.0, 2.0, 5.0]))), rtol=1e-6)
    big = torcia.tensor([1000.0, 1000.0])
    assert torcia.logcumsumexp(big, 0)[1].item() == pytest.approx(1000 + math.log(2))
    with pytest.raises(IndexError, match="Dimension out of range"):
        torcia.cumsum(x, 2)


def test_dim_errors():
    x = torcia.zeros(2, 3)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 4\)"):
        x.sum(4)
    with pytest.raises(RuntimeError, match=r"dim \[0, 0\] appears multiple times"):
        x.sum((0, 0))


@pytest.mark.torch
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "amax", "amin", "var", "std",
                                  "logsumexp", "norm", "cumsum", "cumprod", "cummax", "cummin",
                                  "logcumsumexp", "argmax", "argmin", "max", "min"])
def test_reductions_match_torch(name):
    torch = pytest.importorskip("torch")
    data = RNG.normal(size=(3, 4)).astype(np.float32)
    data[1, 2] = data[1, 0]  # a tie
    for dim in (0, 1, -1):
        ours = getattr(torcia, name)(torcia.from_numpy(data.copy()), dim)
        theirs = getattr(torch, name)(torch.from_numpy(data.copy()), dim)
        if isinstance(theirs, tuple):
            np.testing.assert_allclose(ours[0].numpy(), theirs[0].numpy(), rtol=1e-5)
            np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
        else:
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
