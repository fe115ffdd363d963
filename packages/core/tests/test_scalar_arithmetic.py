"""A Python number beside a tensor, as PyTorch computes it.

- float16 and bfloat16 tensors multiplied or divided by a number compute in float32 with
  the number taken as a float32 (PyTorch's "opmath"), rounded once; NumPy would round the
  number to the tensor's dtype first (``x * 0.1`` in float16: a third of the elements a
  unit in the last place apart);
- a number over a tensor is the tensor's reciprocal times the number (PyTorch's
  ``__rtruediv__``), rounded twice, in every dtype;
- ``lerp``'s number weight meets float16 and bfloat16 at float32 (each side one fused
  multiply-add there: test_fused_multiply_add.py);
- ``add``'s and ``sub``'s ``alpha`` is checked against the result's dtype, and bools add
  as "or".

The expected values are NumPy models of those rules, and PyTorch's own answers where it is
installed."""

import numpy as np
import pytest

import torcia


def _torch():
    try:
        import torch as real
    except ImportError:
        return None
    return real if getattr(real, "Tensor", None) is not torcia.Tensor else None


def _dtypes():
    names = ["float16"]
    try:
        import ml_dtypes  # noqa: F401  (torcia's bfloat16)
        names.append("bfloat16")
    except ImportError:
        pass
    return names


def _np_dtype(name):
    return getattr(torcia, name).to_numpy()


def _values(name):
    """Normal values and the edges: signed zeros, infinities, NaN, the smallest and
    largest finite values of the dtype, subnormals."""
    rng = np.random.default_rng(7)
    dt = _np_dtype(name)
    info = np.finfo(dt) if name == "float16" else None
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, 1e-3, 250.0]
    if info is not None:
        edges += [float(info.max), -float(info.max), float(info.tiny), float(info.tiny) / 4]
    else:
        edges += [3.3e38, -3.3e38, 1.2e-38, 3e-40]
    return np.concatenate([rng.standard_normal(2000) * 3, edges]).astype(dt)


SCALARS = (0.1, 0.37, -2.5, 3, 70000, 1e-8, True, 1e30)


def _wide(op, x, s, dt):
    with np.errstate(all="ignore"):
        return op(x.astype(np.float32), np.float32(s)).astype(dt)


def _same(got, want):
    got = np.asarray(got.double().tolist(), dtype=np.float64)
    want = want.astype(np.float64)
    np.testing.assert_array_equal(got, want)


def _all_ways(op_name):
    """``x op s`` through every public spelling: operator, function, method, in place."""
    if op_name == "mul":
        return {"x * s": lambda x, s: x * s, "s * x": lambda x, s: s * x,
                "torcia.mul": lambda x, s: torcia.mul(x, s), "x.mul": lambda x, s: x.mul(s),
                "x.mul_": lambda x, s: x.clone().mul_(s),
                "x *= s": lambda x, s: _iop(x.clone(), "__imul__", s)}
    return {"x / s": lambda x, s: x / s, "torcia.div": lambda x, s: torcia.div(x, s),
            "torcia.true_divide": lambda x, s: torcia.true_divide(x, s),
            "x.div": lambda x, s: x.div(s), "x.div_": lambda x, s: x.clone().div_(s),
            "x /= s": lambda x, s: _iop(x.clone(), "__itruediv__", s)}


def _iop(x, name, s):
    return getattr(x, name)(s)


def _check_every_way(name, ways, scalars, model):
    """Each of ``ways`` (x, s) -> tensor on the dtype's values against ``model(v, s)``."""
    v = _values(name)
    for s in scalars:
        want = model(v, s)
        for way, fn in ways.items():
            got = fn(torcia.tensor(v), s)
            assert got.dtype is getattr(torcia, name), way
            _same(got, want)


@pytest.mark.parametrize("name", _dtypes())
@pytest.mark.parametrize("op_name", ["mul", "div"])
def test_half_precision_times_a_number_computes_in_float32(name, op_name):
    dt = _np_dtype(name)
    op = np.multiply if op_name == "mul" else np.divide
    _check_every_way(name, _all_ways(op_name), SCALARS, lambda v, s: _wide(op, v, s, dt))


@pytest.mark.parametrize("name", _dtypes())
@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_half_precision_rounded_division_by_a_number_computes_in_float32(name, mode):
    dt = _np_dtype(name)
    ways = {"div": lambda x, s: torcia.div(x, s, rounding_mode=mode),
            "x.div_": lambda x, s: x.clone().div_(s, rounding_mode=mode)}
    if mode == "floor":
        ways.update({"x // s": lambda x, s: x // s,
                     "floor_divide": lambda x, s: torcia.floor_divide(x, s)})

    def model(v, s):
        with np.errstate(all="ignore"):
            if mode == "floor":
                return np.floor_divide(v.astype(np.float32), np.float32(s)).astype(dt)
            return np.trunc(v.astype(np.float32) / np.float32(s)).astype(dt)

    _check_every_way(name, ways, (0.37, -2.5, 3, 1e-8), model)


def _finite(name):
    v = _values(name)[:500]
    return v[np.isfinite(v.astype(np.float32))]


@pytest.mark.parametrize("name", _dtypes())
def test_half_precision_scalar_rule_holds_under_a_mode(name):
    v = _finite(name)
    with torcia.profiler.profile():
        _same(torcia.tensor(v) * 0.1, _wide(np.multiply, v, 0.1, _np_dtype(name)))


@pytest.mark.parametrize("name", _dtypes())
def test_half_precision_scalar_rule_holds_in_autograd(name):
    pytest.importorskip("torcia.autograd")
    dt = _np_dtype(name)
    v = _finite(name)
    x = torcia.tensor(v, requires_grad=True)
    y = x / 0.37
    _same(y.detach(), _wide(np.divide, v, 0.37, dt))
    g = np.linspace(-2, 2, v.size).astype(dt)
    y.backward(torcia.tensor(g))
    # the gradient is PyTorch's: g / 0.37 by the same rule
    _same(x.grad, _wide(np.divide, g, 0.37, dt))
    # one node, as PyTorch's, not a float32 op between two casts
    assert y.grad_fn.name() == "DivBackward0"
    assert [f and f.name() for f, _ in y.grad_fn.next_functions] == \
        ["torch::autograd::AccumulateGrad", None]
    assert (x * 0.1).grad_fn.name() == (0.1 * x).grad_fn.name() == "MulBackward0"
    z = x * 1.0
    z.mul_(2.5)
    assert z.grad_fn.name() == "MulBackward0"
    with torcia.no_grad():
        assert not (x * 0.1).requires_grad
    assert torcia.is_grad_enabled()


@pytest.mark.parametrize("name", _dtypes())
def test_half_precision_scalar_rule_holds_in_forward_mode(name):
    fwd = pytest.importorskip("torcia.autograd.forward_ad")
    dt = _np_dtype(name)
    v, t = _finite(name), np.linspace(-2, 2, _finite(name).size).astype(dt)
    with fwd.dual_level():
        y = fwd.make_dual(torcia.tensor(v), torcia.tensor(t)) * 0.1
        primal, tangent = fwd.unpack_dual(y)
    _same(primal, _wide(np.multiply, v, 0.1, dt))
    _same(tangent, _wide(np.multiply, t, 0.1, dt))


@pytest.mark.parametrize("name", _dtypes())
def test_other_ops_keep_the_number_in_the_tensors_dtype(name):
    # add, sub and the comparisons round the number to the tensor's dtype, as PyTorch
    dt = _np_dtype(name)
    v = _values(name)
    with np.errstate(all="ignore"):
        _same(torcia.tensor(v) + 0.1, (v.astype(np.float32) + np.float32(dt.type(0.1)))
              .astype(dt))
        _same(torcia.tensor(v) - 0.37, (v.astype(np.float32) - np.float32(dt.type(0.37)))
              .astype(dt))


@pytest.mark.parametrize("name", ["float32", "float64", "int64", "bool"] + _dtypes())
def test_a_number_over_a_tensor_is_its_reciprocal_times_the_number(name):
    dt = _np_dtype(name)
    half = name in ("float16", "bfloat16")
    if name == "bool":
        v = np.array([True, False, True])
    elif name == "int64":
        v = np.array([1, -3, 7, 0, 12345])
    else:
        v = _values(name) if half else np.random.default_rng(3).standard_normal(3000).astype(dt)
    work = dt if name in ("float32", "float64") else np.dtype(np.float32)
    for s in (0.37, 2, -1.5, True):
        got = s / torcia.tensor(v)
        with np.errstate(all="ignore"):
            if half:
                want = ((1 / v.astype(np.float32)).astype(dt).astype(np.float32)
                        * np.float32(s)).astype(dt)
            else:
                want = (1 / v.astype(work)).astype(work) * work.type(s)
        assert got.dtype is (torcia.float32 if name in ("int64", "bool") else getattr(torcia, name))
        _same(got, want)


def test_a_number_over_a_tensor_has_the_reciprocals_gradient():
    pytest.importorskip("torcia.autograd")
    x = torcia.tensor([0.5, -2.0, 4.0], dtype=torcia.float64, requires_grad=True)
    (3 / x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -3 / np.array([0.5, -2.0, 4.0]) ** 2)
    assert torcia.autograd.gradcheck(lambda t: 0.7 / t, (x,))


@pytest.mark.parametrize("name", _dtypes())
def test_lerp_takes_a_number_weight_at_float32(name):
    dt = _np_dtype(name)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(3000) * 3).astype(dt)
    b = rng.standard_normal(3000).astype(dt)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    for w in (0.3, 0.7, -0.2, 1.5):
        wf, d = np.float64(np.float32(w)), (bf - af).astype(np.float64)
        # PyTorch's two-sided form in float32, each side a fused multiply-add (the float32
        # product exact in float64), rounded to the dtype at the end
        near = (af + wf * d).astype(np.float32)
        far = (bf - d * np.float64(np.float32(1) - np.float32(w))).astype(np.float32)
        want = np.where(abs(w) < 0.5, near, far).astype(dt)
        _same(torcia.lerp(torcia.tensor(a), torcia.tensor(b), w), want)


@pytest.mark.parametrize("name", _dtypes())
def test_matches_pytorch(name):
    real = _torch()
    if real is None:
        pytest.skip("PyTorch is not installed")
    v = _values(name)
    rv = real.tensor(v.astype(np.float32)).to(getattr(real, name))
    cases = {
        "mul": (lambda L, x: x * 0.1), "rmul": (lambda L, x: 0.3 * x),
        "div": (lambda L, x: x / 0.37), "rdiv": (lambda L, x: 0.37 / x),
        "div_int": (lambda L, x: x / 70000), "mul_": (lambda L, x: x.clone().mul_(1e-8)),
        "floor": (lambda L, x: x // 0.37),
        "trunc": (lambda L, x: L.div(x, -0.37, rounding_mode="trunc")),
        "add": (lambda L, x: x + 0.1), "sub": (lambda L, x: x - 0.37),
    }
    for case, fn in cases.items():
        want = fn(real, rv).float().numpy().astype(np.float64)
        got = np.asarray(fn(torcia, torcia.tensor(v)).float().tolist(), dtype=np.float64)
        np.testing.assert_array_equal(got, want, err_msg=case)
    for dtype in ("float32", "float64"):
        w = np.random.default_rng(1).standard_normal(5000).astype(dtype)
        want = (0.37 / real.tensor(w)).numpy()
        np.testing.assert_array_equal((0.37 / torcia.tensor(w)).numpy(), want)


_BOOL_ALPHA = "Boolean alpha only supported for Boolean results."
_FLOAT_ALPHA = "For integral input tensors, argument alpha must not be a floating point number."
_COMPLEX_ALPHA = "For non-complex input tensors, argument alpha must not be a complex number."


@pytest.mark.parametrize("a, b, alpha, message", [
    ([1, 2], [1, 1], 2.5, _FLOAT_ALPHA),
    ([1, 2], [1, 1], True, _BOOL_ALPHA),
    ([1.0], [2.0], True, _BOOL_ALPHA),
    ([True], [True], 0.5, _FLOAT_ALPHA),
    ([1.0], [2.0], 1j, _COMPLEX_ALPHA),
    ([1, 2], 3, 0.5, _FLOAT_ALPHA),
])
@pytest.mark.parametrize("way", ["add", "sub", "add_"])
def test_alpha_is_checked_against_the_result_dtype(a, b, alpha, message, way):
    x = torcia.tensor(a)
    y = torcia.tensor(b) if isinstance(b, list) else b
    if way == "sub" and x.dtype is torcia.bool:
        pytest.skip("sub refuses bools first")
    fn = {"add": lambda: torcia.add(x, y, alpha=alpha),
          "sub": lambda: torcia.sub(x, y, alpha=alpha),
          "add_": lambda: x.clone().add_(y, alpha=alpha)}[way]
    with pytest.raises(RuntimeError, match=message):
        fn()


def test_bools_add_as_or_under_any_integer_alpha():
    a, b = torcia.tensor([True, False, False]), torcia.tensor([True, True, False])
    for alpha, want in ((2, [True, True, False]), (0, [True, False, False]),
                        (True, [True, True, False]), (-1, [True, True, False])):
        got = torcia.add(a, b, alpha=alpha)
        assert got.dtype is torcia.bool and got.tolist() == want
    # an integer or a complex result keeps its alpha
    assert torcia.add(torcia.tensor([1, 2]), 3, alpha=2).tolist() == [7, 8]
    assert torcia.add(torcia.tensor([1 + 1j]), torcia.tensor([1.0]), alpha=1j).tolist() == \
        [1 + 2j]
    real = _torch()
    if real is not None:
        for alpha in (2, 0, -1):
            want = real.add(real.tensor([True, False, False]), real.tensor([True, True, False]),
                            alpha=alpha)
            assert torcia.add(a, b, alpha=alpha).tolist() == want.tolist()
