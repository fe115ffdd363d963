"""torcia.masked: every masked reduction and normalization against a NumPy computation
over the kept elements (independent truth), their gradients by finite differences, and
both the functions and MaskedTensor against torch.masked where installed (values, dtypes,
the printed form, refusals)."""

import math
import warnings

import numpy as np
import pytest

import torcia
from torcia import masked as M

RNG = np.random.default_rng(12)


def _case(shape, dtype, seed, empty_row=True):
    gen = np.random.default_rng(seed)
    data = gen.standard_normal(shape) * 3
    data = data.astype(dtype) if dtype != "int64" else np.round(data).astype(np.int64)
    mask = gen.random(shape) < 0.6
    if empty_row and len(shape) > 1:
        mask[0] = False  # a slice with nothing kept
    return data, mask


SHAPES = [(5,), (3, 4), (2, 3, 4)]


def _np_reduce(name, data, mask, dims):
    """The reduction over the kept elements, slice by slice, in float64 NumPy."""
    out_shape = [s for i, s in enumerate(data.shape) if i not in dims]
    moved = np.moveaxis(data.astype(np.float64), dims, list(range(len(dims))))
    kept = np.moveaxis(mask, dims, list(range(len(dims))))
    n = math.prod(data.shape[d] for d in dims)
    flat, fmask = moved.reshape(n, -1), kept.reshape(n, -1)
    out = []
    for j in range(flat.shape[1]):
        v = flat[:, j][fmask[:, j]]
        out.append({
            "sum": v.sum(), "prod": v.prod(),
            "amax": v.max() if v.size else -np.inf, "amin": v.min() if v.size else np.inf,
            "mean": v.mean() if v.size else np.nan,
            "var": v.var(ddof=1) if v.size > 1 else np.nan,
            "logsumexp": np.log(np.exp(v).sum()) if v.size else -np.inf,
            "norm": np.sqrt((v ** 2).sum()),
        }[name])
    return np.array(out).reshape(out_shape)


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin", "mean", "var", "logsumexp",
                                  "norm"])
@pytest.mark.parametrize("shape", SHAPES)
def test_reductions_by_definition(name, shape):
    data, mask = _case(shape, "float64", seed=len(shape))
    x, m = torcia.from_numpy(data), torcia.from_numpy(mask)
    for dims in [tuple(range(len(shape)))] + [(d,) for d in range(len(shape))]:
        args = (2.0, dims) if name == "norm" else (dims,)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = getattr(M, name)(x, *args, mask=m)
            want = _np_reduce(name, data, mask, dims)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_normalizations_by_hand():
    x = torcia.tensor([[0.0, 5.0, 0.0], [1.0, 2.0, 3.0]])
    m = torcia.tensor([[True, False, True], [False, False, False]])
    sm = M.softmax(x, 1, mask=m)
    assert sm[0].tolist() == [0.5, 0.0, 0.5] and torcia.isnan(sm[1]).all()
    assert M.log_softmax(x, 1, mask=m)[0, 1].item() == -math.inf
    assert M.cumsum(x, 1, mask=m)[0].tolist() == [0.0, 0.0, 0.0]
    assert M.cumprod(x + 2, 1, mask=m)[0].tolist() == [2.0, 2.0, 4.0]
    # 3-4-5: the kept (3, 4) normalised, the masked-out element 0
    n = M.normalize(torcia.tensor([3.0, 7.0, 4.0]), 2.0, 0, mask=torcia.tensor([True, False, True]))
    np.testing.assert_allclose(n.numpy(), [0.6, 0.0, 0.8], rtol=1e-6)
    assert M.median(torcia.tensor([9.0, 1.0, 5.0, 2.0]), mask=torcia.tensor(
        [False, True, True, True])).item() == 2.0
    assert M.sum(torcia.tensor([1, 2], dtype=torcia.int8), mask=torcia.tensor([True, True])).dtype \
        is torcia.int64
    with pytest.raises(ValueError, match="Could not infer output dtype"):
        M.mean(torcia.tensor([1, 2]), mask=torcia.tensor([True, True]))
    with pytest.raises(IndexError, match="broadcastable mask"):
        M.sum(torcia.ones(2), mask=torcia.ones(2, 2, dtype=torcia.bool))


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "norm", "var", "logsumexp", "softmax",
                                  "log_softmax", "normalize", "cumsum", "prod"])
def test_gradients(name):
    autograd = pytest.importorskip("torcia.autograd")
    data, mask = _case((3, 4), "float64", seed=5, empty_row=False)
    mask[:, :2] = True  # two kept a row: the variance is defined
    m = torcia.from_numpy(mask)
    fn = {"norm": lambda x: M.norm(x, 2.0, 1, mask=m),
          "normalize": lambda x: M.normalize(x, 2.0, 1, mask=m),
          "softmax": lambda x: M.softmax(x, 1, mask=m).masked_fill(~m, 0.0),
          "log_softmax": lambda x: M.log_softmax(x, 1, mask=m).masked_fill(~m, 0.0),
          "cumsum": lambda x: M.cumsum(x, 1, mask=m)}.get(
        name, lambda x: getattr(M, name)(x, 1, mask=m))
    x = torcia.tensor(data, requires_grad=True)
    assert autograd.gradcheck(fn, (x,))


def test_masked_tensor_by_hand():
    mt = M.masked_tensor(torcia.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]),
                         torcia.tensor([[True, False, True], [False, False, False]]))
    assert isinstance(mt, torcia.Tensor) and M.is_masked_tensor(mt)
    assert repr(mt) == ("MaskedTensor(\n  [\n    [  1.0000,       --,   3.0000],\n"
                        "    [      --,       --,       --]\n  ]\n)")
    assert repr(mt.sum()) == "MaskedTensor(  4.0000, True)"
    s = mt.sum(1)
    assert s.get_data().tolist() == [4.0, 0.0] and s.get_mask().tolist() == [True, False]
    assert (mt * 2 + 1).get_data()[0].tolist() == [3.0, -3.0, 7.0]
    assert mt.t().shape == (3, 2) and mt[0].get_mask().tolist() == [True, False, True]
    with pytest.raises(ValueError, match="Input masks must match"):
        mt + M.masked_tensor(mt.get_data(), ~mt.get_mask())
    # the function forms run the methods (the __torch_function__ protocol), as in PyTorch
    assert repr(torcia.exp(mt)) == repr(mt.exp())
    assert repr(torcia.sum(mt, 1)) == repr(s)
    with pytest.raises(NotImplementedError, match="Could not run 'cumsum' with a MaskedTensor"):
        torcia.cumsum(mt, 0)
    with pytest.raises(TypeError, match="mask must have dtype bool"):
        M.masked_tensor(torcia.ones(2), torcia.ones(2))


# ----- against torch ------------------------------------------------------------------------

FUNCS = ["sum", "prod", "amax", "amin", "mean", "median", "logsumexp", "norm", "var", "std",
         "argmax", "argmin", "softmax", "log_softmax", "softmin", "cumsum", "cumprod",
         "normalize"]
CASES = [(name, shape, dtype) for name in FUNCS for shape in SHAPES
         for dtype in ("float32", "float64", "int64")]


def _call(lib, name, x, m, dim, keepdim):
    fn = getattr(lib.masked, name)
    if name in ("softmax", "log_softmax", "softmin", "cumsum", "cumprod"):
        return fn(x, dim, mask=m)
    if name == "normalize":
        return fn(x, 2.0, dim, mask=m)
    if name == "norm":
        return fn(x, 2.0, dim, keepdim=keepdim, mask=m)
    if name in ("median", "argmax", "argmin"):
        return fn(x, dim, keepdim=keepdim, mask=m)
    return fn(x, dim, keepdim=keepdim, mask=m)


@pytest.mark.torch
@pytest.mark.parametrize("name,shape,dtype", CASES)
def test_functions_match_torch(name, shape, dtype):
    torch = pytest.importorskip("torch")
    data, mask = _case(shape, dtype, seed=hash((name, shape)) % 1000)
    for dim in range(-1, len(shape)):
        for keepdim in (False, True):
            results = []
            for lib in (torcia, torch):
                x, m = lib.from_numpy(data.copy()), lib.from_numpy(mask.copy())
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out = _call(lib, name, x, m, dim, keepdim)
                    results.append(("ok", str(out.dtype).split(".")[-1], tuple(out.shape),
                                    out.numpy()))
                except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
                    results.append(("error", type(exc).__name__))
            ours, theirs = results
            assert ours[:3] == theirs[:3], (dim, keepdim, ours[:3], theirs[:3])
            if ours[0] == "ok":
                np.testing.assert_allclose(ours[3], theirs[3], rtol=2e-5, atol=1e-6,
                                           equal_nan=True)


@pytest.mark.torch
def test_masked_tensor_matches_torch():
    torch = pytest.importorskip("torch")
    data, mask = _case((3, 4), "float32", seed=3)
    ops = [lambda mt: mt, lambda mt: mt * 2, lambda mt: mt + mt, lambda mt: mt.exp(),
           lambda mt: mt.abs().sqrt(), lambda mt: mt.sum(), lambda mt: mt.sum(1),
           lambda mt: mt.amax(0), lambda mt: mt.mean(1), lambda mt: mt.softmax(1),
           lambda mt: mt > 0, lambda mt: mt.t(), lambda mt: mt[1], lambda mt: -mt,
           lambda mt: mt.reshape(2, 6), lambda mt: mt.prod(0), lambda mt: 3 * mt]
    for op in ops:
        texts = []
        for lib in (torcia, torch):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mt = lib.masked.masked_tensor(lib.from_numpy(data.copy()),
                                              lib.from_numpy(mask.copy()))
                texts.append(repr(op(mt)))
        assert texts[0] == texts[1]
