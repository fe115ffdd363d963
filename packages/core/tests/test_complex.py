"""Complex dtypes: creation, PyTorch's promotion rules, arithmetic, reductions, indexing,
printing, the real/imag views, conj (a copy), abs/angle/polar/complex, view_as_real and
view_as_complex, and save/load; against torch where it is installed."""

import numpy as np
import pytest

import torcia

RNG = np.random.default_rng(5)
Z = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64)
W = (RNG.standard_normal(4) + 1j * RNG.standard_normal(4)).astype(np.complex64)


def test_dtypes_and_creation():
    assert torcia.cfloat is torcia.complex64 and torcia.cdouble is torcia.complex128
    assert torcia.complex64.is_complex and not torcia.complex64.is_floating_point
    assert torcia.complex128.itemsize == 16
    x = torcia.tensor([1 + 2j])
    assert x.dtype is torcia.complex64 and x.is_complex() and not x.is_floating_point()
    assert torcia.tensor([1 + 2j], dtype=torcia.complex128).dtype is torcia.complex128
    assert torcia.zeros(2, dtype=torcia.cfloat).tolist() == [0j, 0j]
    assert torcia.full((2,), 1 + 1j).dtype is torcia.complex64
    torcia.set_default_dtype(torcia.float64)
    try:
        assert torcia.tensor([1j]).dtype is torcia.complex128
    finally:
        torcia.set_default_dtype(torcia.float32)
    z = torcia.randn(2000, dtype=torcia.complex128)
    assert z.dtype is torcia.complex128
    assert abs((z.abs() ** 2).mean().item() - 1) < 0.1
    u = torcia.rand(100, dtype=torcia.cfloat)
    assert u.dtype is torcia.complex64
    assert bool(((u.real >= 0) & (u.real < 1) & (u.imag >= 0) & (u.imag < 1)).all())


def test_real_imag_are_views_and_conj_is_a_copy():
    x = torcia.tensor([[1 + 2j, 3 - 1j]])
    assert x.real.tolist() == [[1.0, 3.0]] and x.imag.tolist() == [[2.0, -1.0]]
    assert x.real.dtype is torcia.float32
    x.imag = torcia.tensor([[5.0, 6.0]])
    x.real[0, 0] = 9
    assert x.tolist() == [[9 + 5j, 3 + 6j]]
    c = x.conj()
    assert c.tolist() == [[9 - 5j, 3 - 6j]] and not c.is_conj()
    c[0, 0] = 0  # a copy: x is unchanged (PyTorch's lazy conjugate view would write through)
    assert x[0, 0].item() == 9 + 5j
    real = torcia.tensor([1.0])
    assert real.real is real and real.conj() is real
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with "
                                           "non-complex dtypes"):
        torcia.imag(real)


def test_view_as_real_and_complex():
    x = torcia.tensor(Z)
    v = torcia.view_as_real(x)
    assert v.shape == (3, 4, 2) and v.dtype is torcia.float32
    v[0, 0, 1] = 42.0
    assert x[0, 0].item().imag == 42.0
    back = torcia.view_as_complex(v)
    assert torcia.equal(back, x)
    assert torcia.view_as_real(x[:, ::2]).shape == (3, 2, 2)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        torcia.view_as_complex(torcia.ones(3, 3))
    with pytest.raises(RuntimeError, match="last dimension with stride 1"):
        torcia.view_as_complex(torcia.ones(2, 4)[:, ::2])
    with pytest.raises(RuntimeError, match="only supported for complex tensors"):
        torcia.view_as_real(torcia.ones(2))


def test_save_load_roundtrip(tmp_path):
    x = torcia.tensor(Z)
    y = x.to(torcia.complex128)
    torcia.save({"x": x, "y": y}, tmp_path / "c.tca")
    out = torcia.load(tmp_path / "c.tca")
    assert out["x"].dtype is torcia.complex64 and torcia.equal(out["x"], x)
    assert out["y"].dtype is torcia.complex128 and torcia.equal(out["y"], y)


def _same(ours, theirs, rtol=1e-5):
    import torch

    if isinstance(theirs, torch.Tensor):
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], (
            ours.dtype, theirs.dtype)
        np.testing.assert_allclose(ours.numpy(), theirs.resolve_conj().numpy(), rtol=rtol,
                                   atol=1e-6)
    else:
        assert ours == theirs


CASES = {
    "add": lambda m, z, w: z + w, "mul_float": lambda m, z, w: z * 1.5,
    "mul_complex_scalar": lambda m, z, w: z.real * (2 - 1j),
    "int_times_complex": lambda m, z, w: m.tensor([1, 2]) * 1j,
    "float64_times_complex": lambda m, z, w: z.real.double() * 1j,
    "promote_with_float64": lambda m, z, w: z + m.ones(4, dtype=m.float64),
    "zero_dim_complex128": lambda m, z, w: z + m.tensor(1j, dtype=m.complex128),
    "zero_dim_float64": lambda m, z, w: z * m.tensor(2.0, dtype=m.float64),
    "div": lambda m, z, w: z / w, "rdiv": lambda m, z, w: 1 / z, "pow": lambda m, z, w: z ** 2,
    "exp": lambda m, z, w: z.exp(), "log": lambda m, z, w: z.log(),
    "sqrt": lambda m, z, w: z.sqrt(), "sin": lambda m, z, w: z.sin(),
    "tanh": lambda m, z, w: z.tanh(), "abs": lambda m, z, w: z.abs(),
    "angle": lambda m, z, w: z.angle(), "angle_real": lambda m, z, w: m.angle(z.real),
    "sgn": lambda m, z, w: z.sgn(), "conj": lambda m, z, w: z.conj(),
    "sum": lambda m, z, w: z.sum(0), "mean": lambda m, z, w: z.mean(),
    "prod": lambda m, z, w: z.prod(1), "cumsum": lambda m, z, w: z.cumsum(1),
    "var": lambda m, z, w: z.var(1), "matmul": lambda m, z, w: z @ w,
    "mH": lambda m, z, w: z.mH, "polar": lambda m, z, w: m.polar(z.abs(), z.angle()),
    "complex": lambda m, z, w: m.complex(z.real, z.imag * 2),
    "view_as_real": lambda m, z, w: m.view_as_real(z),
    "getitem": lambda m, z, w: z[1:, ::2], "mask": lambda m, z, w: z[z.real > 0],
    "eq": lambda m, z, w: z == z.conj(), "cat": lambda m, z, w: m.cat([z, z.real]),
    "where": lambda m, z, w: m.where(z.real > 0, z, w),
    "linalg_vector_norm": lambda m, z, w: m.linalg.vector_norm(z),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    ours = CASES[name](torcia, torcia.tensor(Z), torcia.tensor(W))
    theirs = CASES[name](torch, torch.tensor(Z), torch.tensor(W))
    _same(ours, theirs)


@pytest.mark.torch
def test_promote_types_match_torch():
    torch = pytest.importorskip("torch")
    names = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64",
             "complex64", "complex128"]
    for a in names:
        for b in names:
            ours = torcia.promote_types(getattr(torcia, a), getattr(torcia, b)).name
            theirs = str(torch.promote_types(getattr(torch, a), getattr(torch, b)))
            if theirs == "torch.complex32":  # ComplexHalf: not a torcia dtype
                assert ours == "complex64"
            else:
                assert "torch." + ours == theirs, (a, b)


@pytest.mark.torch
def test_printing_matches_torch():
    torch = pytest.importorskip("torch")
    for values in ([1 + 2j, 3 - 1j], [[1.5 + 2j, -3 - 1.25j], [0j, 1e-5j]], 4 + 1j,
                   [1.5 - 2.25j, float("nan") + 1j, 0.1j], [1e10 + 1j, 2j]):
        ours = repr(torcia.tensor(values))
        theirs = repr(torch.tensor(values)).replace("torch.", "torcia.")
        assert ours == theirs
    assert repr(torcia.tensor([1j], dtype=torcia.complex128)) == \
        "tensor([0.+1.j], dtype=torcia.complex128)"


def test_equality_with_a_python_complex_compares_elementwise():
    # == and != with a complex number gave Python's identity answer (False / True)
    z = torcia.tensor([1 + 2j, 3j])
    assert (z == 3j).tolist() == [False, True]
    assert (z != 3j).tolist() == [True, False]
    assert (torcia.tensor([1.0, 2.0]) == 2 + 0j).tolist() == [False, True]


def test_assert_close_compares_both_parts():
    from torcia.testing import assert_close

    z = torcia.tensor([1 + 1j, 2 - 3j])
    assert_close(z, z + 1e-7)
    assert_close(torcia.tensor(1 + 2j), torcia.tensor(1 + 2j))
    with pytest.raises(AssertionError, match="not close"):
        assert_close(z, z + 1e-3j)


@pytest.mark.torch
def test_vdot_sgn_and_methods_match_torch():
    torch = pytest.importorskip("torch")
    ours = torcia.vdot(torcia.tensor(W), torcia.tensor(W[::-1].copy()))
    theirs = torch.vdot(torch.tensor(W), torch.tensor(W[::-1].copy()))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    z = torcia.tensor(W)
    z.sgn_()
    np.testing.assert_allclose(z.numpy(), torch.tensor(W).sgn().numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        torcia.vdot(torcia.ones(2, 2), torcia.ones(2))


@pytest.mark.torch
@pytest.mark.parametrize("name", ["lt", "sign", "amax", "argmax", "sort", "clamp", "maximum",
                                  "floor", "relu", "max_dim", "topk", "cummax"])
def test_ordering_ops_refuse_complex_as_torch(name):
    torch = pytest.importorskip("torch")
    calls = {"lt": lambda z: z < 1, "sign": lambda z: z.sign(), "amax": lambda z: z.amax(),
             "argmax": lambda z: z.argmax(), "sort": lambda z: z.sort(),
             "clamp": lambda z: z.clamp(0, 1), "maximum": lambda z: z.maximum(z),
             "floor": lambda z: z.floor(), "relu": lambda z: z.relu(),
             "max_dim": lambda z: z.max(0), "topk": lambda z: z.topk(1),
             "cummax": lambda z: z.cummax(0)}
    with pytest.raises(Exception) as ours:
        calls[name](torcia.tensor([1j, 2]))
    with pytest.raises(Exception) as theirs:
        calls[name](torch.tensor([1j, 2]))
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value).strip()


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_log1p_keeps_the_digits_of_small_arguments(dtype):
    # log(1 + z) = z - z^2/2 + z^3/3 - ...: four terms are exact to rounding for |z| < 1e-4
    rng = np.random.default_rng(36)
    z = np.concatenate([(rng.uniform(-1, 1, 20) + 1j * rng.uniform(-1, 1, 20))
                        * 10.0 ** rng.integers(-30, -4, 20), [1e-7 + 0j, -1e-7 + 0j, 1e-7j]])
    want = z - z ** 2 / 2 + z ** 3 / 3 - z ** 4 / 4
    got = torcia.log1p(torcia.tensor(z, dtype=getattr(torcia, dtype))).numpy()
    np.testing.assert_allclose(got.real, want.real, rtol=2e-6 if dtype == "complex64" else 1e-13,
                               atol=0)
    np.testing.assert_allclose(got.imag, want.imag, rtol=2e-6 if dtype == "complex64" else 1e-13,
                               atol=0)


def test_log1p_of_a_nan_part_is_nan_in_both_parts():
    nan, inf = float("nan"), float("inf")
    got = torcia.log1p(torcia.tensor([complex(nan, inf), complex(inf, nan), complex(nan, 0)]))
    assert np.isnan(got.real.numpy()).all() and np.isnan(got.imag.numpy()).all()
    z = torcia.log1p(torcia.tensor([complex(-inf, 1)], dtype=torcia.complex128))
    assert z.tolist() == [complex(inf, np.pi)]
