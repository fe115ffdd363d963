"""``lerp``, ``addcmul`` and ``add``'s and ``sub``'s ``alpha`` round once, as PyTorch's CPU
kernels compute them: each side of lerp is one fused multiply-add (``weight * (end -
start) + start`` below a weight of 0.5, ``-(end - start) * (1 - weight) + end`` from
there), addcmul ``(value * t1) * t2 + input`` with one rounding after the first product,
``add(a, b, alpha=s)`` ``b * s + a`` (sub: ``b * -s + a``) with ``s`` in the result's dtype.
float16 and bfloat16 compute so in float32 (lerp's and addcmul's number taken as a float32,
add's alpha as a float16 or bfloat16) and round at the end. Optimizers built on them (SGD,
Adam's moments) step as PyTorch's. ``index_add`` with an ``alpha`` fuses each term, in
index order, as PyTorch's adds a slice at a time with ``add_``.

The expected values come from exact fractions (:mod:`fractions`), which round once by
construction, and from PyTorch where it is installed. The reference helper
``fused_multiply_add`` is checked on its own against the fractions over every exponent,
zeros, infinities, NaN, subnormals and the float32 midpoints that a float64 sum rounded
twice would miss."""

import math
from fractions import Fraction

import numpy as np
import pytest

import torcia
from torcia._ops._common import fused_multiply_add


def _torch():
    try:
        import torch as real
    except ImportError:
        return None
    return real if getattr(real, "Tensor", None) is not torcia.Tensor else None


def _round(exact: Fraction, dt) -> float:
    """``exact`` rounded once to the float dtype ``dt`` (to nearest, ties to even)."""
    dt = np.dtype(dt)
    if dt == np.float64:
        try:
            return float(exact)  # Python's int division rounds correctly
        except OverflowError:
            return math.inf if exact > 0 else -math.inf
    info = np.finfo(dt)
    limit = Fraction(float(info.max)) + Fraction(2) ** (info.maxexp - info.nmant - 2)
    if abs(exact) >= limit:
        return math.inf if exact > 0 else -math.inf
    with np.errstate(over="ignore"):
        near = dt.type(float(exact))  # maybe rounded twice: the nearest of it and neighbours
        candidates = [np.nextafter(near, dt.type(-np.inf)), near,
                      np.nextafter(near, dt.type(np.inf))]
    candidates = [c for c in candidates if np.isfinite(c)]
    bits = f"u{dt.itemsize}"

    def distance(c):
        return abs(Fraction(float(c)) - exact), int(np.array(c).view(bits)) & 1

    return float(min(candidates, key=distance))


def _exact_fma(x, y, z, dt) -> float:
    x, y, z = float(x), float(y), float(z)
    if not all(map(math.isfinite, (x, y, z))):
        if math.isfinite(x) and math.isfinite(y):
            return z  # a finite product beside an infinite or NaN z
        return x * y + z  # a non-finite product is exact
    if x == 0 or y == 0:
        return float(dt(dt(x * y) + dt(z)))  # an exact product: one rounding of the sum
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    return 0.0 if exact == 0 else _round(exact, dt)


def _same(got, want) -> np.ndarray:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return ((got == want) & (np.signbit(got) == np.signbit(want))) | (
        np.isnan(got) & np.isnan(want))


def _operands(dt, n=3000, seed=0):
    """Three arrays over the dtype's whole exponent range, with zeros of both signs,
    infinities, NaN, the extremes, subnormals, and sums that cancel exactly."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dt)
    exponents = rng.integers(info.minexp - info.nmant, info.maxexp, size=(3, n))
    exponents = np.where(rng.random((3, n)) < 0.7, rng.integers(-4, 4, size=(3, n)), exponents)
    with np.errstate(all="ignore"):
        v = np.ldexp(rng.standard_normal((3, n)), exponents).astype(dt)
        edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, info.max, -info.max,
                          info.tiny, info.smallest_subnormal], dt)
        for row in v:
            picked = rng.random(n) < 0.05
            row[picked] = rng.choice(edges, picked.sum())
        cancel = rng.random(n) < 0.1
        v[2][cancel] = -(v[0][cancel] * v[1][cancel])
    return v


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_helper_rounds_once_over_every_exponent_and_edge(dt):
    x, y, z = _operands(dt)
    got = fused_multiply_add(x, y, z)
    assert got.dtype == dt
    want = np.array([_exact_fma(a, b, c, dt) for a, b, c in zip(x, y, z)])
    assert _same(got, want).all(), np.flatnonzero(~_same(got, want))[:5]


def test_the_helper_finds_the_float32_result_past_a_midpoint():
    # exactly 1 + 2**-23 + 2**-24 - 2**-70: float64 rounds it to the float32 midpoint, whose
    # tie would go up to 1 + 2**-22; rounded once it is 1 + 2**-23
    x = np.float32(1 + 2**-23)
    y = np.float32(2**-24 - 2**-47)
    twice = (np.float64(x) * np.float64(y) + np.float64(x)).astype(np.float32)
    assert twice == np.float32(1 + 2**-22)
    assert fused_multiply_add(x, y, x) == np.float32(1 + 2**-23)


def test_the_helper_in_float16_rounds_the_float32_result():
    rng = np.random.default_rng(3)
    x, y, z = (rng.standard_normal(500).astype(np.float16) for _ in range(3))
    got = fused_multiply_add(x, y, z)
    assert got.dtype == np.float16
    in_float32 = np.array([_exact_fma(a, b, c, np.float32) for a, b, c in zip(x, y, z)])
    np.testing.assert_array_equal(got, in_float32.astype(np.float32).astype(np.float16))


def test_the_helper_leaves_integers_and_complex_numbers_unfused():
    a = np.array([3, -4])
    assert fused_multiply_add(a, a, a).tolist() == [12, 12]
    c = np.array([1 + 2j])
    assert fused_multiply_add(c, c, c).tolist() == [(1 + 2j) ** 2 + (1 + 2j)]


DTYPES = ["float32", "float64", "float16", "bfloat16"]


def _arrays(name, n=2000, seed=0):
    rng = np.random.default_rng(seed)
    work = np.float32 if name in ("float16", "bfloat16") else getattr(np, name)
    values = [rng.standard_normal(n) * 3 for _ in range(3)]
    dt = getattr(torcia, name)
    tensors = [torcia.tensor(v.astype(np.float64)).to(dt) for v in values]
    return tensors, [t.to(torcia.float64).numpy().astype(work) for t in tensors], work


def _expected(name, work, fn):
    """``fn`` elementwise on exact fractions, rounded once to ``work``, then to ``name``."""
    out = np.array(fn(), dtype=np.float64).astype(work)
    dt = getattr(torcia, name)
    return torcia.tensor(out.astype(np.float64)).to(dt).to(torcia.float64).numpy()


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("weight", [0.3, 0.7, -0.2, 1.4])
def test_lerp_with_a_number_weight_is_one_fused_multiply_add_a_side(name, weight):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    (start, end, _), (s, e, _), work = _arrays(name)
    w = work(weight)
    diff = (e - s).astype(work)
    one_minus = work(1) - w

    def exact():
        if abs(w) < 0.5:
            return [_exact_fma(w, d, a, work) for d, a in zip(diff, s)]
        return [_exact_fma(-d, one_minus, b, work) for d, b in zip(diff, e)]

    want = _expected(name, work, exact)
    for got in (torcia.lerp(start, end, weight), start.lerp(end, weight),
                start.clone().lerp_(end, weight)):
        assert _same(got.to(torcia.float64).numpy(), want).all()


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_lerp_with_a_tensor_weight_picks_each_elements_side(name):
    (start, end, weights), (s, e, w), work = _arrays(name)
    w = (np.abs(w) / 3).astype(work)  # both sides of 0.5
    diff = (e - s).astype(work)
    want = [_exact_fma(wi, d, a, work) if abs(wi) < 0.5 else
            _exact_fma(-d, work(1) - wi, b, work) for wi, d, a, b in zip(w, diff, s, e)]
    got = torcia.lerp(start, end, torcia.tensor(w))
    assert _same(got.numpy(), np.array(want)).all()


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("value", [1, 0.3, -0.7])
def test_addcmul_rounds_value_times_t1_then_once(name, value):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    (x, t1, t2), (a, b, c), work = _arrays(name)
    v = work(value)
    scaled = (v * b).astype(work)
    want = _expected(name, work, lambda: [_exact_fma(p, q, r, work)
                                          for p, q, r in zip(scaled, c, a)])
    for got in (torcia.addcmul(x, t1, t2, value=value), x.addcmul(t1, t2, value=value),
                x.clone().addcmul_(t1, t2, value=value)):
        assert _same(got.to(torcia.float64).numpy(), want).all()


def test_addcmul_gradients_are_unchanged():
    pytest.importorskip("torcia.autograd")
    x, a, b = (torcia.randn(5, dtype=torcia.float64, requires_grad=True) for _ in range(3))
    assert torcia.autograd.gradcheck(lambda x, a, b: torcia.addcmul(x, a, b, value=0.3),
                                     (x, a, b))
    w = torcia.rand(5, dtype=torcia.float64, requires_grad=True)
    assert torcia.autograd.gradcheck(torcia.lerp, (x, a, w))


def _pytorch_operands(name, n, count):
    """PyTorch, and ``count`` tensors of ``n`` normal values of dtype ``name`` in torcia
    and in PyTorch (the same values)."""
    torch = _torch()
    if torch is None:
        pytest.skip("PyTorch is not installed")
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(n)
    values = [rng.standard_normal(n).astype(np.float32) for _ in range(count)]
    return (torch, [torcia.tensor(v).to(getattr(torcia, name)) for v in values],
            [torch.tensor(v).to(getattr(torch, name)) for v in values])


@pytest.mark.parametrize("name", DTYPES)
def test_lerp_and_addcmul_match_pytorch(name):
    # 4003 elements: PyTorch's vector loop and its scalar tail
    torch, ours, theirs = _pytorch_operands(name, 4003, 3)

    def same(a, b):
        return np.array_equal(a.to(torcia.float64).numpy(), b.to(torch.float64).numpy())

    for w in (0.3, 0.7, -0.2):
        assert same(torcia.lerp(ours[0], ours[1], w), torch.lerp(theirs[0], theirs[1], w))
    for value in (1, 0.3):
        assert same(torcia.addcmul(*ours, value=value), torch.addcmul(*theirs, value=value))
        assert same(torcia.addcdiv(*ours, value=value), torch.addcdiv(*theirs, value=value))


def _stepped(lib, name, foreach, **options):
    """A (40, 33) float32 parameter after three steps of ``lib.optim.<name>``, and the
    optimizer."""
    rng = np.random.default_rng(17)
    p = lib.nn.Parameter(lib.tensor(rng.standard_normal((40, 33)).astype(np.float32)))
    opt = getattr(lib.optim, name)([p], foreach=foreach, **options)
    for _ in range(3):
        p.grad = lib.tensor(rng.standard_normal((40, 33)).astype(np.float32))
        opt.step()
    return p, opt


def _pytorch_and_optim():
    torch = _torch()
    if torch is None:
        pytest.skip("PyTorch is not installed")
    pytest.importorskip("torcia.optim")
    return torch


def test_adam_moments_match_pytorch():
    """Adam's averages (lerp_ and addcmul_; weight decay through add's alpha) equal
    PyTorch's to the bit, through the per-parameter path and the device's multi-tensor
    kernel."""
    torch = _pytorch_and_optim()
    options = dict(betas=(0.3, 0.9), weight_decay=0.01)
    p, opt = _stepped(torch, "Adam", False, **options)
    want = [opt.state[p][k].numpy() for k in ("exp_avg", "exp_avg_sq")]
    for foreach in (False, None):
        p, opt = _stepped(torcia, "Adam", foreach, **options)
        for k, theirs in zip(("exp_avg", "exp_avg_sq"), want):
            np.testing.assert_array_equal(opt.state[p][k].numpy(), theirs)

@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("alpha", [0.3, -0.01, 2, -1.7])
def test_add_and_sub_with_alpha_are_one_fused_multiply_add(name, alpha):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    (x, y, _), (a, b, _), work = _arrays(name)
    s = float(np.array(alpha).astype(x.dtype.to_numpy()))  # alpha in the tensors' dtype
    for op, sign in (("add", 1), ("sub", -1)):
        want = _expected(name, work, lambda sign=sign: [_exact_fma(q, work(sign * s), p, work)
                                                        for p, q in zip(a, b)])
        ways = (getattr(torcia, op)(x, y, alpha=alpha), getattr(x, op)(y, alpha=alpha),
                getattr(x.clone(), op + "_")(y, alpha=alpha))
        for got in ways:
            assert _same(got.to(torcia.float64).numpy(), want).all(), op


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_add_with_alpha_broadcasts_promotes_and_takes_numbers(name):
    rng = np.random.default_rng(2)
    dt = getattr(np, name)
    a, row = rng.standard_normal((30, 40)).astype(dt), rng.standard_normal(40).astype(dt)
    s = dt(0.3)
    want = np.array([[_exact_fma(q, s, p, dt) for p, q in zip(r, row)] for r in a])
    assert _same(torcia.add(torcia.tensor(a), torcia.tensor(row), alpha=0.3).numpy(), want).all()
    want_t = np.array([[_exact_fma(p, s, q, dt) for p, q in zip(r, row)] for r in a])
    assert _same(torcia.add(torcia.tensor(row), torcia.tensor(a), alpha=0.3).numpy(),
                 want_t).all()
    transposed = torcia.tensor(np.ascontiguousarray(a.T)).t()  # not contiguous
    assert _same(torcia.add(transposed, torcia.tensor(row), alpha=0.3).numpy(), want).all()
    # a Python number other, taken in the tensor's dtype
    want_n = np.array([_exact_fma(dt(2.7), s, p, dt) for p in a[0]])
    assert _same(torcia.add(torcia.tensor(a[0]), 2.7, alpha=0.3).numpy(), want_n).all()
    # an integer tensor beside a float one: promoted first
    ints = torcia.arange(40)
    got = torcia.add(ints, torcia.tensor(row), alpha=0.3)
    assert got.dtype == getattr(torcia, name)
    want_i = np.array([_exact_fma(q, s, dt(i), dt) for i, q in enumerate(row)])
    assert _same(got.numpy(), want_i).all()


def test_add_with_alpha_keeps_its_integer_bool_and_complex_rules():
    assert torcia.add(torcia.tensor([1, 2]), torcia.tensor([10, 20]), alpha=2).tolist() == [21, 42]
    bools = torcia.add(torcia.tensor([True, False]), torcia.tensor([False, True]), alpha=True)
    assert bools.dtype == torcia.bool and bools.tolist() == [True, True]
    c = torcia.add(torcia.tensor([1 + 1j]), torcia.tensor([2 - 1j]), alpha=0.5)
    assert c.tolist() == [(2 + 0.5j)]
    with pytest.raises(RuntimeError, match="alpha must not be a floating"):
        torcia.add(torcia.tensor([1]), torcia.tensor([2]), alpha=0.5)


def test_add_with_alpha_records_add_and_its_gradient():
    pytest.importorskip("torcia.autograd")
    x, y = (torcia.randn(4, 3, dtype=torcia.float64, requires_grad=True) for _ in range(2))
    row = torcia.randn(3, dtype=torcia.float64, requires_grad=True)
    out = torcia.add(x, y, alpha=0.5)
    assert out.grad_fn.name() == "AddBackward0"
    out.sum().backward()
    assert y.grad.tolist() == [[0.5] * 3] * 4 and x.grad.tolist() == [[1.0] * 3] * 4
    for op in (torcia.add, torcia.sub):
        assert torcia.autograd.gradcheck(lambda a, b, op=op: op(a, b, alpha=-1.7), (x, row))
        assert torcia.autograd.gradgradcheck(lambda a, b, op=op: op(a, b, alpha=0.3), (x, y))


def test_add_with_alpha_on_a_device_whose_kernel_takes_no_alpha():
    # the example plugin's "add" kernel is NumPy's own: core multiplies, then adds
    pytest.importorskip("torcia_example")
    x = torcia.tensor([1.0, 2.0], device="example")
    y = torcia.tensor([3.0, 4.0], device="example")
    assert torcia.add(x, y, alpha=0.5).cpu().tolist() == [2.5, 4.0]
    assert torcia.sub(x, y, alpha=2).cpu().tolist() == [-5.0, -6.0]


@pytest.mark.parametrize("name", DTYPES)
def test_add_and_sub_with_alpha_match_pytorch(name):
    # 4000 elements: float16's vector loop only (its scalar tail rounds the product to
    # float16 first, 4003 would differ there)
    torch, ours, theirs = _pytorch_operands(name, 4000, 2)
    for alpha in (0.3, -0.01, 2.5):
        for op in ("add", "sub"):
            got = getattr(torcia, op)(*ours, alpha=alpha).to(torcia.float64).numpy()
            want = getattr(torch, op)(*theirs, alpha=alpha).to(torch.float64).numpy()
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("options", [dict(momentum=0.9), dict(momentum=0.9, nesterov=True,
                                                              weight_decay=0.01),
                                     dict(momentum=0.5, dampening=0.1)], ids=str)
def test_sgd_steps_match_pytorch(options):
    torch = _pytorch_and_optim()
    want = _stepped(torch, "SGD", False, lr=0.1, **options)[0].detach().numpy()
    for foreach in (False, None):
        got = _stepped(torcia, "SGD", foreach, lr=0.1, **options)[0].detach().numpy()
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("weight", [0.3, 0.7, 0.5, float("nan"), float("inf")])
def test_lerp_matches_pytorch_on_zeros_infinities_and_nan(weight):
    torch = _torch()
    if torch is None:
        pytest.skip("PyTorch is not installed")
    edges = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan")]
    start = [x for x in edges for _ in edges] * 3  # past PyTorch's vector width
    end = edges * len(edges) * 3
    for name in ("float32", "float64"):
        got = torcia.lerp(torcia.tensor(start, dtype=getattr(torcia, name)),
                          torcia.tensor(end, dtype=getattr(torcia, name)), weight).numpy()
        want = torch.lerp(torch.tensor(start, dtype=getattr(torch, name)),
                          torch.tensor(end, dtype=getattr(torch, name)), weight).numpy()
        assert _same(got, want).all()


def _index_add_case(shape, dim, m, name, seed=0):
    """torcia's operands of index_add in dtype ``name`` (more indices than rows: each row
    takes several terms), and their values as float64 arrays."""
    rng = np.random.default_rng(seed)
    dt = getattr(torcia, name)
    source_shape = shape[:dim] + (m,) + shape[dim + 1:]
    a, source = (torcia.tensor(rng.standard_normal(s) * 3).to(dt) for s in (shape, source_shape))
    index = torcia.tensor(rng.integers(0, shape[dim], m))
    return (a, index, source), (a.to(torcia.float64).numpy(), index.numpy(),
                                source.to(torcia.float64).numpy())


def _in_index_order(a, dim, index, source, step):
    """``a[index[i]] = step(source[i], a[index[i]])`` along ``dim``, one term at a time."""
    out = a.copy()
    rows, terms = np.moveaxis(out, dim, 0), np.moveaxis(source, dim, 0)
    for i, k in enumerate(index):
        rows[k] = np.reshape([step(t, r) for t, r in zip(terms[i].ravel(), rows[k].ravel())],
                             rows[k].shape)
    return out


INDEX_ADD_SHAPES = [((12, 5), 0), ((5, 12), 1), ((3, 12, 4), 1)]


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("shape, dim", INDEX_ADD_SHAPES, ids=str)
@pytest.mark.parametrize("alpha", [0.3, -2.7])
def test_index_add_with_alpha_fuses_each_term_in_index_order(name, shape, dim, alpha):
    from torcia import library

    dt = getattr(np, name)
    (a, index, source), (va, vi, vs) = _index_add_case(shape, dim, 40, name)
    s = dt(alpha)
    want = _in_index_order(va, dim, vi, vs, lambda t, r: _exact_fma(t, s, r, dt))
    ways = (torcia.index_add(a, dim, index, source, alpha=alpha),
            a.index_add(dim, index, source, alpha=alpha),
            a.clone().index_add_(dim, index, source, alpha=alpha))
    for got in ways:
        assert _same(got.numpy(), want).all()
    reference = library.fallback("index_add", "cpu")
    assert _same(reference(va.astype(dt), vi, vs.astype(dt), dim, alpha), want).all()
    # a NumPy float64 alpha is taken in the tensor's dtype, as a Python float
    assert _same(reference(va.astype(dt), vi, vs.astype(dt), dim, np.float64(alpha)),
                 want).all()


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_index_add_of_a_vector_rounds_the_product_first(name):
    # PyTorch's kernel for one dim multiplies, rounds, then adds
    dt = getattr(np, name)
    (a, index, source), (va, vi, vs) = _index_add_case((12,), 0, 40, name)
    want = _in_index_order(va, 0, vi, vs, lambda t, r: dt(dt(t) * dt(0.3)) + dt(r))
    assert _same(torcia.index_add(a, 0, index, source, alpha=0.3).numpy(), want).all()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape, dim", INDEX_ADD_SHAPES + [((12,), 0)], ids=str)
def test_index_add_of_half_floats_sums_in_float32_along_the_first_and_last_dims(
        name, shape, dim):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    (a, index, source), (va, vi, vs) = _index_add_case(shape, dim, 40, name)
    half = getattr(torcia, name)

    def rounded(v):
        return torcia.tensor(np.asarray(v, np.float64)).to(half).to(torcia.float64).numpy()

    if len(shape) > 1 and dim in (0, len(shape) - 1):
        # PyTorch scatters these: a float32 sum, rounded once at the end
        want = rounded(_in_index_order(va.astype(np.float32), dim, vi, vs.astype(np.float32),
                                       lambda t, r: np.float32(t) + np.float32(r)))
    else:
        want = _in_index_order(va, dim, vi, vs, lambda t, r: rounded(np.float32(t) +
                                                                     np.float32(r)))
    got = torcia.index_add(a, dim, index, source).to(torcia.float64).numpy()
    assert _same(got, want).all()


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("shape, dim", [((50,), 0), ((50, 5), 0), ((5, 50), 1),
                                        ((3, 50, 4), 1), ((50, 40), 0), ((40, 50), 1)],
                         ids=str)
@pytest.mark.parametrize("alpha", [1, 0.3])
def test_index_add_matches_pytorch(name, shape, dim, alpha):
    torch = _torch()
    if torch is None:
        pytest.skip("PyTorch is not installed")
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    width = math.prod(shape) // shape[dim]
    if name in ("float16", "bfloat16") and alpha != 1 and width >= 16:
        # PyTorch's vector loop (16 or 32 lanes, by the CPU) fuses where its scalar loop
        # rounds the product first: which elements take which depends on the machine
        pytest.skip("half floats with alpha over a vector's width")
    (a, index, source), _ = _index_add_case(shape, dim, 300, name, seed=1)
    tdt = getattr(torch, name)
    theirs = [torch.tensor(t.to(torcia.float64).numpy()).to(tdt) for t in (a, source)]
    want = torch.index_add(theirs[0], dim, torch.tensor(index.numpy()), theirs[1],
                           alpha=alpha).to(torch.float64).numpy()
    got = torcia.index_add(a, dim, index, source, alpha=alpha).to(torcia.float64).numpy()
    assert _same(got, want).all()
