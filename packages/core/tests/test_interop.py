"""Conversions out of and into tensors: item/tolist/numpy/__array__, DLPack both ways,
pickling and copying, and Python's number protocols."""

import copy
import math
import pickle

import numpy as np
import pytest

import torcia


def test_item_and_tolist():
    assert torcia.tensor(2.5).item() == 2.5 and isinstance(torcia.tensor(2).item(), int)
    assert torcia.tensor([[7]]).item() == 7
    assert isinstance(torcia.tensor(True).item(), bool)
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to "
                                           "Scalar"):
        torcia.ones(2).item()
    assert torcia.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert torcia.tensor(1.5).tolist() == 1.5


def test_numpy_shares_memory_and_array_protocol():
    x = torcia.zeros(3)
    a = x.numpy()
    a[0] = 4
    assert x[0].item() == 4
    assert np.asarray(x) is a or np.shares_memory(np.asarray(x), a)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.add(x, 1).tolist() == [5, 1, 1]


def test_dlpack_with_numpy():
    x = torcia.arange(6.0).reshape(2, 3)
    a = np.from_dlpack(x)
    assert np.shares_memory(a, x.numpy()) and a.tolist() == x.tolist()
    b = np.arange(4, dtype=np.int32)
    t = torcia.from_dlpack(b)
    b[0] = 9
    assert t.dtype is torcia.int32 and t.tolist() == [9, 1, 2, 3]
    assert x.__dlpack_device__()[0] == 1  # kDLCPU


@pytest.mark.torch
def test_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    x = torcia.arange(4.0)
    tt = torch.from_dlpack(x)
    tt[0] = 10
    assert x[0].item() == 10
    src = torch.arange(3, dtype=torch.float64)
    t = torcia.from_dlpack(src)
    src[1] = -1
    assert t.tolist() == [0.0, -1.0, 2.0] and t.dtype is torcia.float64


def test_pickle_and_deepcopy():
    x = torcia.tensor([[1.0, 2.0]], dtype=torcia.float64)
    y = pickle.loads(pickle.dumps(x))
    assert y.tolist() == x.tolist() and y.dtype is torcia.float64
    z = copy.deepcopy(x)
    z[0, 0] = 5
    assert x[0, 0].item() == 1.0
    assert pickle.loads(pickle.dumps(torcia.float16)) is torcia.float16
    assert pickle.loads(pickle.dumps(torcia.device("cpu"))) == torcia.device("cpu")


def test_python_protocols():
    x = torcia.tensor([1.5, 2.5])
    assert len(x) == 2 and [t.item() for t in x] == [1.5, 2.5]
    assert float(torcia.tensor([2.0])) == 2.0 and int(torcia.tensor(3.9)) == 3
    assert [10, 20, 30][torcia.tensor(1)] == 20
    assert bool(torcia.tensor([1])) and not bool(torcia.tensor(0.0))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with 2 elements is "
                                           "ambiguous"):
        bool(x)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(torcia.tensor(1.0))
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [1][torcia.tensor(0.0)]
    assert f"{torcia.tensor(math.pi):.2f}" == "3.14"
    assert torcia.is_tensor(x) and not torcia.is_tensor(1.0)
    assert x.numel() == 2 and x.dim() == 1 and x.element_size() == 4 and x.nbytes == 8
    assert x.size() == (2,) and x.size(-1) == 2 and repr(x.size()) == "torcia.Size([2])"
    assert x.shape.numel() == 2


def test_version_counter_is_per_storage():
    x = torcia.zeros(4)
    y = x.view(2, 2)
    z = torcia.zeros(4)
    x.add_(1)
    y.mul_(2)
    assert x._version == y._version == 2 and z._version == 0
    c = x.clone()
    assert c._version == 0 and not np.shares_memory(c.numpy(), x.numpy())
    x.zero_()
    assert (y == 0).all() and y._version == 3


def test_type_conversions():
    x = torcia.tensor([1.7, -2.2])
    assert x.long().tolist() == [1, -2] and x.long().dtype is torcia.int64
    assert x.int().dtype is torcia.int32 and x.double().dtype is torcia.float64
    assert x.half().dtype is torcia.float16 and x.bool().tolist() == [True, True]
    assert x.to(torcia.uint8).dtype is torcia.uint8
    assert x.type() == "torcia.FloatTensor" and x.type(torcia.float64).dtype is torcia.float64
    assert x.to(torcia.float32) is x
    assert x.to(torcia.float32, copy=True) is not x
    assert x.type_as(torcia.tensor([1])).dtype is torcia.int64
    assert x.new_zeros(2, 2).dtype is torcia.float32 and x.new_tensor([1]).dtype is \
        torcia.float32
