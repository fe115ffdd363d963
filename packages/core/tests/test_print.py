"""``repr`` of tensors and ``set_printoptions``, checked against hand-written strings and,
where torch is installed, against torch's own output (with ``torch.`` read as ``torcia.``)."""

import math

import numpy as np
import pytest

import torcia

nan, inf = math.nan, math.inf


@pytest.fixture(autouse=True)
def _default_printoptions():
    yield
    torcia.set_printoptions(profile="default")


@pytest.mark.parametrize("value, dtype, expected", [
    ([1.0, 2.0], None, "tensor([1., 2.])"),
    ([[1.0, 2.0]], torcia.float64, "tensor([[1., 2.]], dtype=torcia.float64)"),
    ([1.5, -2.25], None, "tensor([ 1.5000, -2.2500])"),
    ([1, 2, 3], None, "tensor([1, 2, 3])"),
    ([1, 2], torcia.int32, "tensor([1, 2], dtype=torcia.int32)"),
    ([True, False], None, "tensor([ True, False])"),
    (3.5, None, "tensor(3.5000)"),
    (7, None, "tensor(7)"),
    ([1e-5, 1.0], None, "tensor([1.0000e-05, 1.0000e+00])"),
    ([nan, 1.0], None, "tensor([nan, 1.])"),
    ([-inf, inf], None, "tensor([-inf, inf])"),
    ([], None, "tensor([])"),
    ([[1, 2], [3, 4]], None, "tensor([[1, 2],\n        [3, 4]])"),
])
def test_repr_by_hand(value, dtype, expected):
    assert repr(torcia.tensor(value, dtype=dtype)) == expected


def test_repr_of_empty_and_3d():
    assert repr(torcia.zeros(0, 3)) == "tensor([], size=(0, 3))"
    x = torcia.arange(8.0).reshape(2, 2, 2)
    assert repr(x) == ("tensor([[[0., 1.],\n         [2., 3.]],\n\n"
                       "        [[4., 5.],\n         [6., 7.]]])")


def test_summarised_over_threshold():
    text = repr(torcia.arange(2000))
    assert text == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"


def test_set_printoptions():
    torcia.set_printoptions(precision=2)
    assert repr(torcia.tensor([1.2345])) == "tensor([1.23])"
    torcia.set_printoptions(threshold=5, edgeitems=1)
    assert repr(torcia.arange(10)) == "tensor([0,  ..., 9])"
    torcia.set_printoptions(profile="default")
    torcia.set_printoptions(sci_mode=True)
    assert repr(torcia.tensor([1.5])) == "tensor([1.5000e+00])"


def test_default_dtype_is_not_printed():
    torcia.set_default_dtype(torcia.float64)
    try:
        assert repr(torcia.tensor([1.5])) == "tensor([1.5000])"
        assert repr(torcia.tensor([1.5], dtype=torcia.float32)) == \
            "tensor([1.5000], dtype=torcia.float32)"
    finally:
        torcia.set_default_dtype(torcia.float32)


# ----- parity with torch ---------------------------------------------------------------

VALUES = [
    [1.0, 2.0], [[1.0, 2.0]], [1.5, 2.25], [1e-5, 1.0], [1e10, 1.0], [123456789.0, 1.0],
    [0.1, 0.2, 0.3], [[1, 2], [3, 4]], [True, False], 3.5, 7, True, [], [nan, 1.0],
    [inf, -1.5], [-1.0, 2.0], [1e-10], [0.0], [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]],
    [100.0, 0.001], [1.23456789], [-0.5, 1e3], [1e8, 1.0], [1e9], [0.0001], [0.00001, 2.0],
    [12345.678], [nan], [-inf, inf], [-0.0, 0.0], [[-1e-3, 5.0], [2.0, 3.0]],
]
DTYPES = [None, "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"]


def _both(torch, value, dtype):
    tt = torch.tensor(value, dtype=getattr(torch, dtype) if dtype else None)
    ct = torcia.tensor(value, dtype=getattr(torcia, dtype if dtype != "bool" else "bool")
                       if dtype else None)
    return repr(ct), repr(tt).replace("torch.", "torcia.")


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_repr_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    for value in VALUES:
        arr = np.asarray(value, dtype=np.float64)
        if dtype in ("int32", "int64", "uint8", "bool") and not np.all(np.isfinite(arr)):
            continue
        if dtype == "uint8" and ((arr < 0).any() or (arr > 255).any()):
            continue
        if dtype == "int32" and (np.abs(arr) > 2 ** 31).any():
            continue
        ours, theirs = _both(torch, value, dtype)
        assert ours == theirs, (value, dtype)


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(2000,), (40, 40), (3, 400), (1001,), (5, 5, 50), (7, 30)])
def test_summarised_repr_matches_torch(shape):
    torch = pytest.importorskip("torch")
    n = math.prod(shape)
    for div in (7, 1):
        ours = repr(torcia.arange(n, dtype=torcia.float32).reshape(shape) / div)
        theirs = repr(torch.arange(n, dtype=torch.float32).reshape(shape) / div)
        assert ours == theirs.replace("torch.", "torcia.")
    ours = repr(torcia.arange(n).reshape(shape))
    assert ours == repr(torch.arange(n).reshape(shape)).replace("torch.", "torcia.")


@pytest.mark.torch
@pytest.mark.parametrize("options", [
    {"precision": 2}, {"precision": 6}, {"threshold": 10}, {"edgeitems": 1, "threshold": 5},
    {"linewidth": 40}, {"sci_mode": True}, {"sci_mode": False}, {"profile": "short"},
])
def test_printoptions_match_torch(options):
    torch = pytest.importorskip("torch")
    values = [[0.001234, 1.5, -2.0, 1234.5678, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]
    torcia.set_printoptions(**options)
    torch.set_printoptions(**options)
    try:
        for v in (values, [[1.5, 2.5]], list(range(30))):
            ours = repr(torcia.tensor(v))
            theirs = repr(torch.tensor(v)).replace("torch.", "torcia.")
            assert ours == theirs, (options, v)
    finally:
        torch.set_printoptions(profile="default")
