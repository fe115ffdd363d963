"""Sorting, selection, counting: sort/argsort/topk/kthvalue/median/mode/unique/nonzero/
searchsorted/bucketize/bincount/histc/histogram, against hand values and torch."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import torcia


def test_sort_and_argsort():
    x = torcia.tensor([[3, 1, 2], [1, 3, 3]])
    r = torcia.sort(x)
    assert r.values.tolist() == [[1, 2, 3], [1, 3, 3]]
    assert r.indices.tolist() == [[1, 2, 0], [0, 1, 2]]
    r = x.sort(dim=0, descending=True)
    assert r.values.tolist() == [[3, 3, 3], [1, 1, 2]]
    # stable: equal elements keep their order, descending too
    r = torcia.sort(torcia.tensor([1.0, 3.0, 3.0, 2.0]), descending=True, stable=True)
    assert r.indices.tolist() == [1, 2, 3, 0]
    assert torcia.argsort(x, dim=1, descending=True).tolist() == [[0, 2, 1], [1, 2, 0]]
    nan = torcia.tensor([2.0, math.nan, 1.0])
    assert nan.sort().indices.tolist() == [2, 0, 1]  # NaN sorts last
    assert torcia.msort(torcia.tensor([[2, 0], [1, 3]])).tolist() == [[1, 0], [2, 3]]
    assert "torcia.return_types.sort(" in repr(r)


def test_topk_kthvalue():
    x = torcia.tensor([1.0, 5.0, 3.0, 4.0])
    r = torcia.topk(x, 2)
    assert r.values.tolist() == [5.0, 4.0] and r.indices.tolist() == [1, 3]
    assert torcia.topk(x, 2, largest=False).values.tolist() == [1.0, 3.0]
    m = torcia.tensor([[1, 9, 3], [8, 2, 7]])
    assert m.topk(1, dim=0).indices.tolist() == [[1, 0, 1]]
    r = torcia.kthvalue(x, 2)
    assert (r.values.item(), r.indices.item()) == (3.0, 2)
    assert torcia.kthvalue(m, 1, dim=1, keepdim=True).values.tolist() == [[1], [2]]
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torcia.topk(x, 5)
    with pytest.raises(RuntimeError, match="kthvalue\\(\\): selected number k out of range for "
                                           "dimension 0"):
        torcia.kthvalue(x, 5)


def test_median_and_mode():
    assert torcia.median(torcia.tensor([4.0, 1.0, 3.0, 2.0])).item() == 2.0  # lower median
    r = torcia.median(torcia.tensor([[1.0, 5.0, 3.0], [9.0, 8.0, 7.0]]), 1)
    assert r.values.tolist() == [3.0, 8.0] and r.indices.tolist() == [2, 1]
    r = torcia.median(torcia.tensor([[1.0, math.nan, 3.0, 2.0]]), 1)
    assert math.isnan(r.values.item()) and r.indices.item() == 1
    assert math.isnan(torcia.median(torcia.zeros(0)).item())
    r = torcia.mode(torcia.tensor([[1, 3, 3, 1, 2, 2]]), 1)
    assert r.values.tolist() == [1] and r.indices.tolist() == [3]  # smallest of ties, last index
    r = torcia.mode(torcia.tensor([[2, 2], [5, 1]]), 0, keepdim=True)
    assert r.values.tolist() == [[2, 1]]
    with pytest.raises(IndexError, match="mode\\(\\): Expected reduction dim 0 to have "
                                         "non-zero size"):
        torcia.mode(torcia.zeros(0), 0)


def test_mode_of_complex_numbers_with_an_empty_result_answers_as_torch():
    # torch gives the empty result before it looks for a complex kernel (it has none)
    r = torcia.mode(torcia.zeros(0, 3, dtype=torcia.complex64), 1)
    assert r.values.shape == r.indices.shape == (0,)
    assert r.values.dtype == torcia.complex64 and r.indices.dtype == torcia.int64
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        torcia.mode(torcia.zeros(2, 3, dtype=torcia.complex64), 1)


def test_quantile_refuses_q_as_torch():
    x = torcia.tensor([[0.0, 1.0, 2.0, 3.0]])
    with pytest.raises(RuntimeError, match="q tensor must be same dtype as the input"):
        torcia.quantile(x, torcia.tensor([0.5], dtype=torcia.float64))
    with pytest.raises(RuntimeError, match="q must be a scalar or 1D tensor"):
        torcia.quantile(x, torcia.tensor([[0.5]]))
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        torcia.quantile(x, torcia.tensor([0.5, math.nan]))
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        torcia.quantile(x, 1.5)
    assert torcia.quantile(x, torcia.tensor([0.5, 1.0]), 1).tolist() == [[1.5], [3.0]]


def test_unique():
    x = torcia.tensor([3, 1, 2, 3, 1])
    assert torcia.unique(x).tolist() == [1, 2, 3]
    values, inverse, counts = torcia.unique(x, return_inverse=True, return_counts=True)
    assert inverse.tolist() == [2, 0, 1, 2, 0] and counts.tolist() == [2, 1, 2]
    rows = torcia.tensor([[1, 2], [0, 5], [1, 2]])
    values, inverse = torcia.unique(rows, dim=0, return_inverse=True)
    assert values.tolist() == [[0, 5], [1, 2]] and inverse.tolist() == [1, 0, 1]
    m, inv = torcia.unique(torcia.tensor([[2, 1], [1, 2]]), return_inverse=True)
    assert inv.tolist() == [[1, 0], [0, 1]]  # the input's shape


def test_nonzero_argwhere():
    x = torcia.tensor([[0, 1], [2, 0]])
    assert torcia.nonzero(x).tolist() == [[0, 1], [1, 0]]
    rows, cols = torcia.nonzero(x, as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [1, 0]
    assert torcia.argwhere(x).tolist() == [[0, 1], [1, 0]]
    assert torcia.nonzero(torcia.zeros(3)).shape == (0, 1)


def test_searchsorted_bucketize():
    seq = torcia.tensor([1, 3, 5, 7])
    v = torcia.tensor([3, 6, 9, 0])
    assert torcia.searchsorted(seq, v).tolist() == [1, 3, 4, 0]
    assert torcia.searchsorted(seq, v, right=True).tolist() == [2, 3, 4, 0]
    assert torcia.searchsorted(seq, v, side="right").tolist() == [2, 3, 4, 0]
    assert torcia.searchsorted(seq, 5).item() == 2
    assert torcia.searchsorted(seq, v, out_int32=True).dtype is torcia.int32
    batch = torcia.tensor([[1, 3], [2, 4]])
    assert torcia.searchsorted(batch, torcia.tensor([[2], [5]])).tolist() == [[1], [2]]
    unsorted = torcia.tensor([5, 1, 3])
    assert torcia.searchsorted(unsorted, torcia.tensor([2]),
                               sorter=torcia.tensor([1, 2, 0])).tolist() == [1]
    assert torcia.bucketize(torcia.tensor([1, 4]), torcia.tensor([1, 3, 5])).tolist() == [0, 2]
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        torcia.searchsorted(seq, v, right=True, side="left")
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension or the "
                                           "first N-1 dimensions"):
        torcia.searchsorted(batch, torcia.tensor([1, 2, 3]))



def test_searchsorted_promotes_a_python_number_as_a_weak_scalar():
    # not cast to the sequence's dtype first: 2.5 among integers sits after 2
    seq = torcia.tensor([1, 2, 3])
    assert torcia.searchsorted(seq, 2.5).item() == 2
    assert torcia.searchsorted(seq, 2.5, right=True).item() == 2
    assert torcia.searchsorted(torcia.tensor([1.0, 2.0], dtype=torcia.float64), 1 + 1e-12) \
        .item() == 1  # held in double precision
    # a bool sequence and an int: both int64 (PyTorch has no bool kernel otherwise)
    assert torcia.searchsorted(torcia.tensor([False, True]), 4).item() == 2
    # a weak scalar takes a float16 sequence's dtype: 2.0001 rounds to 2
    assert torcia.searchsorted(torcia.tensor([1.0, 2.0, 3.0], dtype=torcia.float16),
                               2.0001).item() == 1

def test_bincount_histc():
    x = torcia.tensor([0, 1, 1, 4])
    assert torcia.bincount(x).tolist() == [1, 2, 0, 0, 1]
    assert torcia.bincount(x, minlength=7).shape == (7,)
    w = torcia.bincount(x, torcia.tensor([0.5, 1.0, 2.0, 1.0]))
    assert w.tolist() == [0.5, 3.0, 0.0, 0.0, 1.0] and w.dtype is torcia.float32
    assert torcia.bincount(x, torcia.tensor([1, 1, 1, 1])).dtype is torcia.float64
    for bad in (torcia.tensor([-1, 2]), torcia.tensor([[1, 2]]), torcia.tensor([1.0])):
        with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative "
                                               "integral inputs"):
            torcia.bincount(bad)
    assert torcia.histc(torcia.tensor([1.0, 2.0, 1.0]), bins=4).tolist() == [2, 0, 0, 1]
    assert torcia.histc(torcia.tensor([1.0, 2.0, 1.0, 9.0]), bins=4, min=0, max=3).tolist() == \
        [0, 2, 1, 0]
    with pytest.raises(RuntimeError, match="torch.histc: max must be larger than min"):
        torcia.histc(torcia.ones(2), min=2, max=1)


@pytest.mark.torch
def test_histogram_values_on_edges_match_torch(torch_parity):
    # the edges are PyTorch's linspace (from both ends towards the middle): 6/9 from
    # linspace(0, 1, 10) lies below the edge 2/3 torch computes, in the middle bin (NumPy's
    # edges put it in the last)
    data = np.linspace(0, 1, 10)
    weights = np.linspace(1, 2, 10)
    edges = np.array([0.0, 0.25, 0.5, 1.0])
    cases = [
        lambda m, x, w, e: m.histogram(x, 3),
        lambda m, x, w, e: m.histogram(x, 4, range=(0.25, 0.75), weight=w),
        lambda m, x, w, e: m.histogram(x.float(), 3, density=True),
        lambda m, x, w, e: m.histogram(x, e, weight=w, density=True),
        lambda m, x, w, e: m.histogram(x.float()[:0], 2),
    ]
    torch_parity(cases, data, weights, edges, rtol=1e-6)
    assert torcia.histogram(torcia.tensor(data), 3).hist.tolist() == [3, 4, 3]


def test_histogram_errors_are_torchs():
    x = torcia.tensor([1.0, 2.0, float("nan")])
    for kw, words in (({"bins": 0}, "bins must be > 0"),
                      ({"bins": 3, "range": (1.0, 0.0)}, "min should not exceed max"),
                      ({"bins": 3}, r"range \[nan, nan\] is not finite"),
                      ({"bins": torcia.tensor([0.0, 1.0], dtype=torcia.float64)},
                       "should have the same dtype"),
                      ({"bins": 3, "weight": torcia.ones(3, dtype=torcia.int64)},
                       "weight tensor should have the same dtype")):
        with pytest.raises(RuntimeError, match=words):
            torcia.histogram(x, **kw)
    with pytest.raises(TypeError, match="range="):
        torcia.histogram(x, torcia.tensor([0.0, 1.0]), range=(0.0, 1.0))


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
                  elements=st.integers(-5, 5)), st.booleans())
def test_sort_properties(arr, descending):
    x = torcia.from_numpy(arr)
    values, indices = x.sort(-1, descending=descending, stable=True)
    np.testing.assert_array_equal(np.take_along_axis(arr, indices.numpy(), -1), values.numpy())
    diffs = np.diff(values.numpy(), axis=-1)
    assert (diffs <= 0).all() if descending else (diffs >= 0).all()
    expected = np.argsort(-arr if descending else arr, axis=-1, kind="stable")
    np.testing.assert_array_equal(indices.numpy(), expected)


@pytest.mark.torch
def test_sorting_matches_torch(torch_parity):
    rng = np.random.default_rng(3)
    data = rng.normal(size=(4, 6)).astype(np.float32)
    ints = rng.integers(0, 4, size=(4, 6))
    cases = [
        lambda m, x, i: m.sort(x, 1, descending=True),
        lambda m, x, i: m.topk(x, 3, dim=0),
        lambda m, x, i: m.topk(x, 2, largest=False),
        lambda m, x, i: m.kthvalue(x, 3, 1),
        lambda m, x, i: m.median(x, 0),
        lambda m, x, i: m.mode(i, 1),
        lambda m, x, i: m.unique(i, return_inverse=True, return_counts=True),
        lambda m, x, i: m.nonzero(i),
        lambda m, x, i: m.searchsorted(m.sort(x, 1).values, x[:, :2].contiguous()),
        lambda m, x, i: m.bincount(i.flatten(), minlength=6),
        lambda m, x, i: m.histc(x, bins=5, min=-1, max=1),
        lambda m, x, i: m.cummax(i, 1),
        lambda m, x, i: m.logcumsumexp(x, 0),
        lambda m, x, i: m.masked_select(x, x > 0),
    ]
    torch_parity(cases, data, ints, rtol=1e-5)


@pytest.mark.parametrize("seq, values", [((2, 0), (2, 2)), ((0,), (2, 2)), ((0, 3), (0, 2)),
                                         ((2, 3), (2, 0))])
def test_searchsorted_of_empty_sequences_and_values(seq, values):
    # an empty sequence puts every value at 0; no rows, or no values, give an empty answer
    out = torcia.searchsorted(torcia.zeros(*seq), torcia.ones(*values))
    assert out.dtype == torcia.int64 and tuple(out.shape) == values
    assert not out.any()
