import math

import pytest

import torcia


def test_equal_needs_the_same_shape_and_values():
    a = torcia.tensor([[1, 2], [3, 4]])
    assert torcia.equal(a, a.clone()) and a.equal(a.clone())
    assert not torcia.equal(a, a.T) and not torcia.equal(a, a[0])
    assert not torcia.equal(torcia.tensor([math.nan]), torcia.tensor([math.nan]))


def test_isclose_and_allclose_follow_the_tolerance_formula():
    x = torcia.tensor([1.0, 100.0, math.inf, math.nan])
    y = torcia.tensor([1.0 + 2e-8, 100.0 + 1e-3, math.inf, math.nan])
    assert torcia.isclose(x, y).tolist() == [True, True, True, False]
    assert torcia.isclose(x, y, equal_nan=True).tolist() == [True, True, True, True]
    assert not torcia.allclose(x, y) and torcia.allclose(x, y, equal_nan=True)
    assert not torcia.allclose(torcia.tensor([1.0]), torcia.tensor([1.001]))


def test_parity_with_pytorch():
    torch = pytest.importorskip("torch")
    vals = [0.0, 1e-9, 1.0, 1.0001, -3.0, math.inf, -math.inf, math.nan]
    a = torcia.tensor(vals)
    b = torcia.tensor(list(reversed(vals)))
    for rtol, atol, nan in ((1e-5, 1e-8, False), (1e-3, 1e-3, True)):
        ours = torcia.isclose(a, b, rtol=rtol, atol=atol, equal_nan=nan).tolist()
        theirs = torch.isclose(torch.tensor(vals), torch.tensor(list(reversed(vals))),
                               rtol=rtol, atol=atol, equal_nan=nan).tolist()
        assert ours == theirs


@pytest.mark.parametrize("pair", [("int32", "float64"), ("uint8", "bool"), ("float32", "float64"),
                                  ("complex64", "int64"), ("float16", "float32")])
def test_isclose_refuses_tensors_of_two_dtypes(pair):
    # PyTorch compares only one dtype (no promotion), a 0-dim other included
    a, b = (getattr(torcia, d) for d in pair)
    names = {"int32": "Int", "float64": "Double", "uint8": "Byte", "bool": "Bool",
             "float32": "Float", "complex64": "ComplexFloat", "int64": "Long",
             "float16": "Half"}
    for other in (torcia.ones(3, dtype=b), torcia.ones((), dtype=b)):
        for fn in (torcia.isclose, torcia.allclose):
            with pytest.raises(RuntimeError, match=f"{names[pair[0]]} did not match "
                                                   f"{names[pair[1]]}"):
                fn(torcia.ones(3, dtype=a), other)
    assert torcia.isclose(torcia.ones(3, dtype=a), torcia.ones(3, dtype=a)).all()
