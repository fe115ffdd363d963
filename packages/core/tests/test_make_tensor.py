"""torcia.testing.make_tensor over every dtype, shape and option: values inside
[low, high) (integer bounds rounded up, out-of-range bounds clamped), no zeros with
exclude_zero, the strides of noncontiguous results, and the same results' dtypes, shapes,
contiguity and refusals as torch.testing.make_tensor."""

import importlib.util
import warnings

import pytest

import torcia
from torcia.testing import assert_allclose, make_tensor

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
          "float64", "complex64", "complex128"]
SHAPES = [(), (0,), (1,), (5,), (3, 4), (2, 1, 3)]
BOUNDS = [(None, None), (-2, 3), (0.5, 2.5), (-1e30, 1e30)]


def _parts(t):
    if t.dtype.is_complex:
        return [t.real, t.imag]
    return [t]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_values_in_bounds(dtype, shape):
    dt = getattr(torcia, dtype)
    for low, high in BOUNDS:
        if dtype == "bool" and low is not None:
            continue
        if dtype == "uint8" and low is not None and low < 0:
            low = 0
        t = make_tensor(*shape, dtype=dt, device="cpu", low=low, high=high)
        assert t.dtype is dt and tuple(t.shape) == shape
        if dtype == "bool" or not t.numel():
            continue
        lo = -9 if low is None else low
        hi = (10 if dtype in ("uint8", "int8", "int16", "int32", "int64") else 9) \
            if high is None else high
        if dtype in ("uint8", "int8", "int16", "int32", "int64"):
            info = torcia.iinfo(dt)
            lo, hi = max(-(-lo // 1), info.min), min(hi, info.max + 1)
        for part in _parts(t):
            values = part.double()
            assert bool((values >= max(lo, -3.5e38)).all()) and bool((values < hi).all() or
                                                                      hi >= 1e30)


@pytest.mark.parametrize("dtype", DTYPES)
def test_options(dtype):
    dt = getattr(torcia, dtype)
    t = make_tensor(4, 6, dtype=dt, device="cpu", noncontiguous=True, exclude_zero=True)
    assert not t.is_contiguous() and t.stride() == (12, 2)
    assert bool((t != 0).all())
    assert make_tensor(1, dtype=dt, device="cpu", noncontiguous=True).is_contiguous()
    if importlib.util.find_spec("torcia.autograd") is not None and dtype not in (
            "bool", "uint8", "int8", "int16", "int32", "int64"):
        g = make_tensor(2, dtype=dt, device="cpu", requires_grad=True)
        assert g.requires_grad and g.is_leaf


@pytest.mark.parametrize("kwargs,error,match", [
    ({"low": 3, "high": 1}, ValueError, "`low` must be less than `high`"),
    ({"low": float("nan")}, ValueError, "cannot be NaN"),
    ({"low": 300, "high": 400, "dtype": "uint8"}, ValueError, "only supports"),
    ({"requires_grad": True, "dtype": "int64"}, ValueError, "not supported for boolean"),
    ({"noncontiguous": True, "memory_format": "torcia.contiguous_format"}, ValueError,
     "mutually exclusive"),
])
def test_refusals(kwargs, error, match):
    kwargs = dict(kwargs)
    kwargs["dtype"] = getattr(torcia, kwargs.get("dtype", "float32"))
    if "memory_format" in kwargs:
        kwargs["memory_format"] = torcia.contiguous_format
    with pytest.raises(error, match=match):
        make_tensor(3, device="cpu", **kwargs)


def test_assert_allclose_warns_and_compares():
    with pytest.warns(FutureWarning, match="assert_close"):
        assert_allclose(torcia.tensor([1.0, float("nan")]), [1.0, float("nan")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(AssertionError):
            assert_allclose(torcia.tensor([1.0]), [1.5])


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    for shape, options in [((3, 4), {}), ((2, 5), {"noncontiguous": True}),
                           ((6,), {"low": -1, "high": 1, "exclude_zero": True})]:
        ours = make_tensor(*shape, dtype=getattr(torcia, dtype), device="cpu", **options)
        theirs = torch.testing.make_tensor(*shape, dtype=getattr(torch, dtype), device="cpu",
                                           **options)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.stride() == theirs.stride()
        assert ours.is_contiguous() == theirs.is_contiguous()
    for kwargs in ({"low": 3, "high": 1}, {"low": float("nan")}):
        messages = []
        for lib in (torcia, torch):
            with pytest.raises(ValueError) as info:
                make_tensor(3, dtype=torcia.float32, device="cpu", **kwargs) if lib is torcia \
                    else torch.testing.make_tensor(3, dtype=torch.float32, device="cpu",
                                                   **kwargs)
            messages.append(str(info.value))
        assert messages[0] == messages[1]
