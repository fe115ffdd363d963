"""PyTorch's everyday names added for the compatibility sweep: values against PyTorch
(where installed), gradients by finite differences."""

import math

import numpy as np
import pytest

import torcia

RNG = np.random.default_rng(0)
A = RNG.uniform(0.1, 0.9, (3, 4))
B = RNG.uniform(-1, 1, (3, 4))
Q = (lambda q: q @ q.T + 4 * np.eye(4))(RNG.standard_normal((4, 4)))
V = RNG.uniform(-1, 1, 4)
I1 = np.array([12, 18, -7, 0], dtype=np.int64)
I2 = np.array([8, 27, 21, 5], dtype=np.int64)
NANS = np.array([[1.0, np.nan, 3.0, 0.5], [np.nan, np.nan, np.nan, np.nan],
                 [2.0, -1.0, 4.0, np.nan]])

# name -> (args as numpy arrays / plain values, kwargs); called as lib.name(*args, **kwargs)
CASES = {
    "absolute": ((B,), {}), "arccos": ((A,), {}), "arcsin": ((A,), {}),
    "arctan": ((B,), {}), "arctan2": ((A, B), {}), "arcsinh": ((B,), {}),
    "arccosh": ((A + 1,), {}), "arctanh": ((A * 0.9,), {}), "negative": ((B,), {}),
    "greater": ((A, B), {}), "greater_equal": ((A, B), {}), "less": ((A, B), {}),
    "less_equal": ((A, B), {}), "not_equal": ((A, A), {}), "fix": ((B * 3,), {}),
    "row_stack": (([A, B],), {}), "positive": ((B,), {}), "sgn": ((B,), {}),
    "deg2rad": ((B * 180,), {}), "rad2deg": ((B,), {}), "logaddexp": ((A * 50, B * 50), {}),
    "logaddexp2": ((A, B), {}), "heaviside": ((np.array([-1.0, 0.0, 2.0]),
                                               np.array([0.5, 0.5, 0.5])), {}),
    "copysign": ((A, B), {}), "ldexp": ((A, np.array([1, 2, 3, -1])), {}),
    "gcd": ((I1, I2), {}), "lcm": ((I1, I2), {}),
    "isneginf": ((np.array([-np.inf, 1, np.inf]),), {}),
    "isposinf": ((np.array([-np.inf, 1, np.inf]),), {}), "isreal": ((A,), {}),
    "nanmean": ((NANS,), {"dim": 1}), "quantile": ((A, 0.3), {"dim": 1, "keepdim": True}),
    "nanquantile": ((NANS, 0.7), {"dim": 1}), "nanmedian": ((NANS[[0, 2]],), {}),
    "dist": ((A, B), {"p": 3}), "renorm": ((B, 2, 0, 0.5), {}),
    "ravel": ((A,), {}), "rot90": ((A, 3, [0, 1]), {}), "take": ((A, np.array([[0, 5],
                                                                              [11, 2]])), {}),
    "diff": ((A,), {"n": 2, "dim": 1}), "kron": ((A[:2, :2], B[:2]), {}),
    "cross": ((A[:, :3], B[:, :3]), {"dim": 1}), "trace": ((Q,), {}), "diagflat": ((V, 1), {}),
    "vdot": ((V, V * 2), {}), "matrix_power": ((Q, -2), {}), "atleast_2d": ((V,), {}),
    "atleast_3d": ((A,), {}), "column_stack": (([V, V * 2],), {}), "dstack": (([A, B],), {}),
    "block_diag": ((A[:2, :3], V[:2]), {}), "cartesian_prod": ((V[:2], V[:3]), {}),
    "combinations": ((V,), {"r": 2}), "vander": ((V,), {"N": 3}),
    "chain_matmul": ((Q, Q, Q), {}), "adjoint": ((A,), {}),
    "hsplit": ((A, 2), {}), "vsplit": ((Q, [1, 3]), {}), "aminmax": ((A,), {"dim": 0}),
    "unique_consecutive": ((np.array([1, 1, 2, 2, 3, 1, 1]),),
                           {"return_inverse": True, "return_counts": True}),
    "index_fill": ((A, 1, np.array([0, 2]), -1.0), {}),
    "masked_scatter": ((A, A > 0.5, B), {}), "isin": ((I1, np.array([8, 27, 0])), {}),
    "meshgrid": ((V[:2], V[:3]), {"indexing": "xy"}),
    "inner": ((A, B), {}), "tile": ((A, (2,)), {}),
    "split_with_sizes": ((A, [1, 3], 1), {}), "nextafter": ((A, B), {}),
    "bitwise_left_shift": ((I1 % 7, np.array([1, 2, 0, 3])), {}),
    "bitwise_right_shift": ((I1, np.array([1, 2, 0, 3])), {}), "frexp": ((B * 9,), {}),
    "histogram": ((V,), {"bins": 3}), "trapezoid": ((A,), {"dx": 0.5}),
    "trapz": ((A, V), {}), "cumulative_trapezoid": ((A, V), {"dim": 1}),
    "pdist": ((A,), {"p": 3.0}), "norm_except_dim": ((A, 2, 1), {}),
    "frobenius_norm": ((A,), {"dim": (0, 1)}), "constant_pad_nd": ((A, [1, 2], 0.5), {}),
    "range": ((1, 3, 0.5), {}),
    "select_scatter": ((A, V, 0, 1), {}), "slice_scatter": ((A, B[:, :2], 1, 0, 4, 2), {}),
    "diagonal_scatter": ((Q, V, 0), {}), "tril_indices": ((3, 4, 1), {}),
    "triu_indices": ((4, 3, -1), {}), "unravel_index": ((np.array([4, 7, 11]), (3, 4)), {}),
}

DIFFERENTIABLE = {
    "arccos": (A,), "arcsin": (A,), "arctan2": (A, B), "logaddexp": (A, B),
    "logaddexp2": (A, B), "deg2rad": (B,), "quantile": (A, 0.3), "dist": (A, B),
    "renorm": (B, 2, 0, 0.5), "rot90": (A,), "diff": (A,), "kron": (A[:2, :2], B[:2]),
    "cross": (A[:, :3], B[:, :3]), "trace": (Q,), "diagflat": (V,), "vdot": (V, V),
    "matrix_power": (Q, -2), "block_diag": (A[:2], V[:2]), "vander": (V,), "inner": (A, B),
    "copysign": (A, B), "ldexp": (A, np.array([1, 2, 3, -1])),
    "masked_scatter": (A, A > 0.5, B), "take": (A, np.array([1, 4])),
    "trapezoid": (A, V), "cumulative_trapezoid": (A,), "pdist": (A,),
    "frobenius_norm": (A,), "norm_except_dim": (A,),
}


def _to(lib, x):
    if isinstance(x, np.ndarray):
        return lib.from_numpy(x.copy())
    if isinstance(x, list) and x and isinstance(x[0], np.ndarray):
        return [lib.from_numpy(v.copy()) for v in x]
    return x


def _np(x):
    if isinstance(x, (tuple, list)):
        return [_np(v) for v in x]
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    args, kwargs = CASES[name]
    ours = getattr(torcia, name)(*[_to(torcia, a) for a in args], **kwargs)
    theirs = getattr(torch, name)(*[_to(torch, a) for a in args], **kwargs)
    got, want = _np(ours), _np(theirs)
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        assert np.asarray(got).dtype == np.asarray(want).dtype


@pytest.mark.parametrize("name", sorted(CASES))
def test_method_form_matches_function(name):
    args, kwargs = CASES[name]
    first = args[0]
    if not isinstance(first, np.ndarray) or not hasattr(torcia.Tensor, name):
        pytest.skip("no method form")
    conv = [_to(torcia, a) for a in args]
    method = _np(getattr(conv[0], name)(*conv[1:], **kwargs))
    function = _np(getattr(torcia, name)(*conv, **kwargs))
    if isinstance(function, list):
        assert [np.shape(v) for v in method] == [np.shape(v) for v in function]
    else:
        np.testing.assert_array_equal(method, function)


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_gradcheck(name):
    gradcheck = pytest.importorskip("torcia.autograd").gradcheck
    args = DIFFERENTIABLE[name]
    tensors = [torcia.from_numpy(a.copy()).requires_grad_() if isinstance(a, np.ndarray)
               and a.dtype == np.float64 else _to(torcia, a) for a in args]
    positions = [k for k, t in enumerate(tensors) if isinstance(t, torcia.Tensor)
                 and t.requires_grad]

    def fn(*diff):
        call = list(tensors)
        for k, t in zip(positions, diff):
            call[k] = t
        return getattr(torcia, name)(*call)

    assert gradcheck(fn, tuple(tensors[k] for k in positions))


def test_inplace_forms():
    x = torcia.tensor([-1.5, 2.0])
    assert torcia.abs_(x) is x and x.tolist() == [1.5, 2.0]
    y = torcia.tensor([0.5])
    y.arccos_()
    assert y.item() == pytest.approx(math.acos(0.5))
    z = torcia.tensor([1.0, 2.0])
    z.copysign_(torcia.tensor([-1.0, 1.0]))
    assert z.tolist() == [-1.0, 2.0]
    w = torcia.zeros(2, 3)
    w.index_fill_(1, torcia.tensor([1]), 7.0)
    assert w[:, 1].tolist() == [7.0, 7.0]


def test_constants_and_dtype_limits():
    torch = pytest.importorskip("torch")
    assert (torcia.inf, torcia.pi, torcia.e) == (torch.inf, torch.pi, torch.e)
    assert math.isnan(torcia.nan) and torcia.newaxis is None
    for ours, theirs in [(torcia.float32, torch.float32), (torcia.float64, torch.float64),
                         (torcia.float16, torch.float16), (torcia.bfloat16, torch.bfloat16)]:
        a, b = torcia.finfo(ours), torch.finfo(theirs)
        assert (a.bits, a.eps, a.max, a.min, a.tiny, a.resolution) == (
            b.bits, b.eps, b.max, b.min, b.tiny, b.resolution)
    for ours, theirs in [(torcia.int8, torch.int8), (torcia.int64, torch.int64),
                         (torcia.uint8, torch.uint8)]:
        a, b = torcia.iinfo(ours), torch.iinfo(theirs)
        assert (a.bits, a.max, a.min) == (b.bits, b.max, b.min)
    with pytest.raises(TypeError, match="iinfo"):
        torcia.finfo(torcia.int32)
    assert torcia.typename(torcia.ones(1)) == "torcia.FloatTensor"


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="not implemented for 'Float'"):
        torcia.gcd(torcia.ones(2), torcia.ones(2))
    with pytest.raises(RuntimeError, match="must have length 3"):
        torcia.cross(torcia.ones(2, 4), torcia.ones(2, 4), dim=1)
    with pytest.raises(RuntimeError, match="square"):
        torcia.matrix_power(torcia.ones(2, 3), 2)
    with pytest.raises(RuntimeError, match="q must be in the range"):
        torcia.quantile(torcia.ones(3), 1.5)
    with pytest.raises(RuntimeError, match="more than one value"):
        torcia.is_nonzero(torcia.ones(2))


def test_quantile_of_a_tensor_q_is_differentiable_in_q():
    pytest.importorskip("torcia.autograd")
    # q went through tolist(), out of the graph; a 0-dim q kept a q dim of 1
    x = torcia.tensor([[1.0, 2.0, 4.0], [0.0, 3.0, 9.0]], dtype=torcia.float64)
    q = torcia.tensor([0.25, 0.75], dtype=torcia.float64, requires_grad=True)
    for f in (torcia.quantile, torcia.nanquantile):
        (g,) = torcia.autograd.grad(f(x, q, 1).sum(), [q])
        # d/dq of the linear interpolation: (n - 1) * (upper - lower) per row
        assert g.tolist() == [2 * (2 - 1) + 2 * (3 - 0), 2 * (4 - 2) + 2 * (9 - 3)]
    assert torcia.quantile(x, torcia.tensor(0.5, dtype=x.dtype)).shape == ()
    assert torcia.quantile(x, torcia.tensor(0.5, dtype=x.dtype), 1).shape == (2,)


def test_switches_random_fills_and_fill_diagonal():
    torch = pytest.importorskip("torch")
    x = torcia.zeros(4, 3)
    assert x.fill_diagonal_(5.0, wrap=True) is x
    want = torch.zeros(4, 3).fill_diagonal_(5.0, wrap=True)
    np.testing.assert_array_equal(x.numpy(), want.numpy())
    cond = torcia.tensor([True, False])
    assert torcia.ones(2).where(cond, torcia.zeros(2)).tolist() == [1.0, 0.0]
    torcia.manual_seed(0)
    assert (torcia.empty(1000).log_normal_(0.0, 0.5) > 0).all()
    g = torcia.empty(1000).geometric_(0.5)
    assert g.min().item() >= 1 and float(g.mean()) == pytest.approx(2.0, rel=0.2)
    assert torcia.empty(5).cauchy_(median=1.0).shape == (5,)
    w = torcia.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.cauchy_()
    assert torcia.poisson(torcia.full((1000,), 3.0)).mean().item() == pytest.approx(3.0,
                                                                                   rel=0.15)
    draws = torcia.binomial(torcia.full((500,), 10.0), torcia.full((500,), 0.5))
    assert draws.max().item() <= 10 and draws.mean().item() == pytest.approx(5.0, rel=0.15)
    torcia.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert torcia.are_deterministic_algorithms_enabled()
        assert torcia.get_deterministic_debug_mode() == 1
    finally:
        torcia.use_deterministic_algorithms(False)
    assert torcia.get_deterministic_debug_mode() == 0
    assert torcia.set_flush_denormal(True) is False
    with pytest.raises(RuntimeError, match="sum exactly"):
        torcia.split_with_sizes(torcia.ones(4), [1, 2])
