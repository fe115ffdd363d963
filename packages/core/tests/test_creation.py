"""Creation: from data, filled, ranges and random draws (shapes, dtypes, values, streams)."""

import math

import numpy as np
import pytest

import torcia


def test_tensor_infers_dtypes_and_copies():
    assert torcia.tensor([1, 2]).dtype is torcia.int64
    assert torcia.tensor([1.0, 2]).dtype is torcia.float32
    assert torcia.tensor([True]).dtype is torcia.bool
    assert torcia.tensor([[1, 2], [3, 4]]).shape == (2, 2)
    a = np.array([1.0, 2.0])
    t = torcia.tensor(a)
    a[0] = 9
    assert t.dtype is torcia.float64 and t.tolist() == [1.0, 2.0]
    assert torcia.tensor([1.1], dtype=torcia.float64).item() == 1.1  # no float32 detour
    assert torcia.tensor([torcia.tensor(1.0), torcia.tensor(2.0)]).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match=r"expected sequence of length 2 at dim 1 \(got 1\)"):
        torcia.tensor([[1, 2], [3]])


def test_as_tensor_and_from_numpy_share_memory():
    a = np.zeros(3, dtype=np.float32)
    t = torcia.from_numpy(a)
    a[1] = 5
    assert t.tolist() == [0.0, 5.0, 0.0]
    t[2] = 7
    assert a[2] == 7
    assert np.shares_memory(torcia.as_tensor(a).numpy(), a)
    assert not np.shares_memory(torcia.as_tensor(a, dtype=torcia.float64).numpy(), a)
    x = torcia.ones(2)
    assert torcia.as_tensor(x) is x
    with pytest.raises(TypeError, match="expected np.ndarray"):
        torcia.from_numpy([1, 2])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type"):
        torcia.from_numpy(np.zeros(2, dtype=np.longdouble))
    # PyTorch's wider unsigned dtypes are torcia's too
    assert torcia.from_numpy(np.zeros(2, dtype=np.uint16)).dtype is torcia.uint16
    assert torcia.from_numpy(np.zeros(2, dtype=complex)).dtype is torcia.complex128


@pytest.mark.parametrize("fn, value", [(torcia.zeros, 0.0), (torcia.ones, 1.0)])
def test_filled(fn, value):
    x = fn(2, 3)
    assert x.shape == (2, 3) and x.dtype is torcia.float32
    assert (x == value).all()
    assert fn((2, 3)).shape == (2, 3) and fn([4]).shape == (4,)
    assert fn(2, dtype=torcia.int32).dtype is torcia.int32
    assert fn(()).shape == ()


def test_full_and_likes():
    assert torcia.full((2,), 7).dtype is torcia.int64
    assert torcia.full((2,), 7.0).dtype is torcia.float32
    assert torcia.full((2,), True).dtype is torcia.bool
    assert torcia.full((2, 2), 1.5, dtype=torcia.float64).tolist() == [[1.5, 1.5], [1.5, 1.5]]
    base = torcia.ones(2, 3, dtype=torcia.int32)
    for like, value in ((torcia.zeros_like, 0), (torcia.ones_like, 1)):
        y = like(base)
        assert y.shape == (2, 3) and y.dtype is torcia.int32 and (y == value).all()
    assert torcia.full_like(base, 4).tolist() == [[4] * 3] * 2
    assert torcia.empty_like(base).shape == (2, 3)
    assert torcia.empty(3, 2).shape == (3, 2)
    assert torcia.rand_like(torcia.ones(5)).shape == (5,)
    assert torcia.randn_like(torcia.ones(5, dtype=torcia.float64)).dtype is torcia.float64
    assert torcia.randint_like(base, 10).dtype is torcia.int32
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        torcia.zeros(2, -1)
    with pytest.raises(TypeError, match="size must be a tuple of ints"):
        torcia.zeros(2.5)


@pytest.mark.parametrize("args, kwargs, expected", [
    ((5,), {}, [0, 1, 2, 3, 4]),
    ((2, 8, 3), {}, [2, 5]),
    ((5, 0, -2), {}, [5, 3, 1]),
    ((0, 1, 0.25), {}, [0.0, 0.25, 0.5, 0.75]),
    ((3,), {"dtype": torcia.float64}, [0.0, 1.0, 2.0]),
    ((0,), {}, []),
])
def test_arange(args, kwargs, expected):
    x = torcia.arange(*args, **kwargs)
    assert x.tolist() == expected
    float_args = any(isinstance(a, float) for a in args)
    if "dtype" not in kwargs:
        assert x.dtype is (torcia.float32 if float_args else torcia.int64)


def test_arange_errors_and_torch_parity():
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torcia.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        torcia.arange(0, 5, -1)
    # the length is ceil((end - start) / step), as PyTorch's
    assert len(torcia.arange(0, 1, 0.1)) == 10
    assert len(torcia.arange(1, 2.5, 0.5)) == 3


def test_linspace_logspace_eye():
    assert torcia.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert torcia.linspace(0, 1, 1).tolist() == [0.0]
    assert torcia.linspace(0, 1, 5).dtype is torcia.float32
    np.testing.assert_allclose(torcia.logspace(0, 3, 4).numpy(), [1, 10, 100, 1000])
    np.testing.assert_allclose(torcia.logspace(0, 2, 3, base=2).numpy(), [1, 2, 4])
    assert torcia.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert torcia.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert torcia.eye(2, dtype=torcia.int64).dtype is torcia.int64


# ----- random ------------------------------------------------------------------------------


def test_manual_seed_reproduces_streams():
    torcia.manual_seed(123)
    a = [torcia.rand(3), torcia.randn(2, 2), torcia.randint(0, 10, (4,)), torcia.randperm(5)]
    torcia.manual_seed(123)
    b = [torcia.rand(3), torcia.randn(2, 2), torcia.randint(0, 10, (4,)), torcia.randperm(5)]
    for x, y in zip(a, b):
        assert x.tolist() == y.tolist()
    assert torcia.initial_seed() == 123


def test_generators_are_independent():
    g1 = torcia.Generator().manual_seed(7)
    g2 = torcia.Generator().manual_seed(7)
    torcia.manual_seed(0)
    x = torcia.rand(5, generator=g1)
    torcia.rand(5)  # draws from the default generator leave g2 alone
    assert torcia.rand(5, generator=g2).tolist() == x.tolist()
    assert torcia.rand(5, generator=g1).tolist() != x.tolist()
    assert g1.initial_seed() == 7


def test_rng_state_round_trip():
    g = torcia.Generator().manual_seed(3)
    state = g.get_state()
    first = torcia.randn(4, generator=g)
    g.set_state(state)
    assert torcia.randn(4, generator=g).tolist() == first.tolist()
    torcia.manual_seed(5)
    s = torcia.get_rng_state()
    u = torcia.rand(2)
    torcia.set_rng_state(s)
    assert torcia.rand(2).tolist() == u.tolist()


def test_distributions_have_the_right_moments():
    g = torcia.Generator().manual_seed(0)
    n = 200_000
    u = torcia.rand(n, generator=g)
    assert 0 <= u.min().item() and u.max().item() < 1
    # standard errors: uniform mean 0.5 +- 0.0007, normal mean 0 +- 0.0023
    assert abs(u.mean().item() - 0.5) < 0.005
    z = torcia.randn(n, generator=g, dtype=torcia.float64)
    assert abs(z.mean().item()) < 0.012 and abs(z.std().item() - 1) < 0.01
    y = torcia.normal(3.0, 2.0, (n,), generator=g)
    assert abs(y.mean().item() - 3.0) < 0.03 and abs(y.std().item() - 2.0) < 0.03
    k = torcia.randint(2, 5, (n,), generator=g)
    assert k.dtype is torcia.int64 and set(torcia.unique(k).tolist()) == {2, 3, 4}
    p = torcia.randperm(10, generator=g)
    assert sorted(p.tolist()) == list(range(10))


def test_normal_with_tensor_parameters():
    torcia.manual_seed(0)
    mean = torcia.tensor([0.0, 100.0])
    y = torcia.normal(mean, 0.001)
    assert y.shape == (2,) and abs(y[1].item() - 100.0) < 0.1
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        torcia.normal(0.0, -1.0, (2,))


def test_bernoulli_and_multinomial():
    g = torcia.Generator().manual_seed(1)
    p = torcia.tensor([0.0, 1.0, 0.5]).expand(20000, 3)
    draws = torcia.bernoulli(p, generator=g)
    assert draws.dtype is torcia.float32
    means = draws.mean(0).tolist()
    assert means[0] == 0.0 and means[1] == 1.0 and abs(means[2] - 0.5) < 0.02
    with pytest.raises(RuntimeError, match="Expected p_in >= 0"):
        torcia.bernoulli(torcia.tensor([1.5]))
    w = torcia.tensor([0.0, 1.0, 3.0])
    s = torcia.multinomial(w, 4000, replacement=True, generator=g)
    assert s.shape == (4000,) and s.dtype is torcia.int64
    counts = torcia.bincount(s, minlength=3).tolist()
    assert counts[0] == 0 and abs(counts[2] / 4000 - 0.75) < 0.03
    no_rep = torcia.multinomial(torcia.ones(2, 5), 5, generator=g)
    assert sorted(no_rep[0].tolist()) == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        torcia.multinomial(w, 5)


def test_random_dtype_checks():
    with pytest.raises(RuntimeError, match="expected a floating point dtype"):
        torcia.rand(2, dtype=torcia.int64)
    with pytest.raises(RuntimeError, match="'from' to be less than 'to'"):
        torcia.randint(5, 5, (2,))
    assert torcia.rand(2, dtype=torcia.float64).dtype is torcia.float64
    assert math.isfinite(torcia.randn(()).item())


def test_in_place_random_fills():
    g = torcia.Generator().manual_seed(2)
    x = torcia.empty(1000)
    x.uniform_(-2, 2, generator=g)
    assert -2 <= x.min().item() and x.max().item() < 2
    x.normal_(5, 0.01, generator=g)
    assert abs(x.mean().item() - 5) < 0.01
    before = x._version
    x.fill_(3)
    assert x._version > before and (x == 3).all()
