import collections

import numpy as np
import pytest

import torcia
from torcia.data import default_collate, default_convert

Point = collections.namedtuple("Point", "x y")


def test_tensors_are_stacked():
    out = default_collate([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    assert out.tolist() == [[1, 2], [3, 4]] and out.dtype is torcia.int64


def test_tensors_of_different_shapes():
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        default_collate([torcia.zeros(2), torcia.zeros(3)])


def test_numpy_arrays_become_a_tensor_of_their_dtype():
    out = default_collate([np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32)])
    assert isinstance(out, torcia.Tensor)
    assert out.shape == (2, 2, 2) and out.dtype is torcia.float32
    assert out.tolist()[0] == [[1.0, 1.0], [1.0, 1.0]]


def test_numpy_scalars():
    out = default_collate([np.int32(1), np.int32(2)])
    assert out.tolist() == [1, 2] and out.dtype is torcia.int32


def test_python_numbers():
    f = default_collate([1.5, 2.5])
    assert f.dtype is torcia.float64 and f.tolist() == [1.5, 2.5]
    i = default_collate([1, 2])
    assert i.dtype is torcia.int64 and i.tolist() == [1, 2]
    b = default_collate([True, False])
    assert b.dtype is torcia.bool and b.tolist() == [True, False]


def test_strings_stay_a_list():
    assert default_collate(["a", "b"]) == ["a", "b"]
    assert default_collate([b"a", b"b"]) == [b"a", b"b"]


def test_nested_structure():
    batch = [
        {"image": np.full((2,), i, np.float32), "meta": {"id": i, "name": f"s{i}"},
         "pair": (i, float(i)), "pt": Point(i, [i, -i])}
        for i in range(3)
    ]
    out = default_collate(batch)
    assert set(out) == {"image", "meta", "pair", "pt"}
    assert out["image"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert out["meta"]["id"].tolist() == [0, 1, 2]
    assert out["meta"]["name"] == ["s0", "s1", "s2"]
    # a tuple comes back as a list of its collated fields
    assert isinstance(out["pair"], list)
    assert out["pair"][0].tolist() == [0, 1, 2]
    assert out["pair"][1].dtype is torcia.float64
    # a namedtuple keeps its type; its list field is collated position by position
    assert isinstance(out["pt"], Point)
    assert out["pt"].x.tolist() == [0, 1, 2]
    assert [t.tolist() for t in out["pt"].y] == [[0, 1, 2], [0, -1, -2]]


def test_dict_subclass_keeps_its_type():
    out = default_collate([collections.OrderedDict(a=1), collections.OrderedDict(a=2)])
    assert type(out) is collections.OrderedDict and out["a"].tolist() == [1, 2]


def test_lists_of_unequal_length():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        default_collate([[1, 2], [3]])


@pytest.mark.parametrize("bad", [None, object(), np.array(["a", "b"])])
def test_unsupported_elements(bad):
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
        default_collate([bad, bad])


def test_default_convert():
    sample = {"x": np.arange(3), "t": (np.float32(1.0), "s"), "p": Point(np.ones(1), 2)}
    out = default_convert(sample)
    assert out["x"].tolist() == [0, 1, 2] and isinstance(out["x"], torcia.Tensor)
    assert isinstance(out["t"], list) and out["t"][0].dtype is torcia.float32
    assert out["t"][1] == "s"
    assert isinstance(out["p"], Point) and isinstance(out["p"].x, torcia.Tensor)
    assert out["p"].y == 2
    assert default_convert(np.array(["a"]))[0] == "a"  # strings stay numpy


@pytest.mark.torch
def test_matches_pytorch_default_collate():
    pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate

    batch = [{"a": np.full((2, 3), i, np.float32), "b": (i, 0.5 * i), "c": "x"} for i in range(4)]
    ours, theirs = default_collate(batch), torch_collate(batch)
    assert np.array_equal(ours["a"].numpy(), theirs["a"].numpy())
    assert [t.tolist() for t in ours["b"]] == [t.tolist() for t in theirs["b"]]
    assert [str(t.dtype).split(".")[1] for t in ours["b"]] == \
        [str(t.dtype).split(".")[1] for t in theirs["b"]]
    assert ours["c"] == theirs["c"]
