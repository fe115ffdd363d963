"""DLPack both ways: torcia.from_dlpack / torcia.utils.dlpack.from_dlpack of NumPy arrays,
PyTorch tensors and raw capsules, and Tensor.__dlpack__ / to_dlpack into NumPy and
PyTorch; memory is shared (writes show through), over dtypes, 0-d, empty and strided
views; the refusals PyTorch makes."""

import importlib.util

import numpy as np
import pytest

import torcia
from torcia.utils import dlpack

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
          "complex64", "complex128"]
RNG = np.random.default_rng(0)


def _arrays(dtype):
    """0-d, empty, contiguous, transposed and step-sliced arrays of ``dtype``."""
    base = (RNG.standard_normal((4, 6)) * 10).astype(dtype)
    return {"0d": np.array(base[0, 0]), "empty": base[:0], "contiguous": base,
            "transposed": base.T, "sliced": base[::2, 1::3]}


CASES = [(dtype, kind) for dtype in DTYPES for kind in _arrays("float32")]


@pytest.mark.parametrize("dtype,kind", CASES)
def test_numpy_to_torcia_shares_memory(dtype, kind):
    a = _arrays(dtype)[kind]
    t = dlpack.from_dlpack(a)
    assert t.dtype.name == np.dtype(dtype).name.replace("bool", "bool")
    assert tuple(t.shape) == a.shape
    np.testing.assert_array_equal(t.numpy(), a)
    if a.size:
        # writes through the tensor reach the array: no copy was made
        t[(0,) * a.ndim] = t[(0,) * a.ndim].logical_not() if dtype == "bool" else 0
        assert a[(0,) * a.ndim] == t[(0,) * a.ndim].item()


@pytest.mark.parametrize("dtype,kind", CASES)
def test_torcia_to_numpy_shares_memory(dtype, kind):
    t = torcia.from_numpy(_arrays(dtype)[kind])
    for a in (np.from_dlpack(t), np.from_dlpack(dlpack.from_dlpack(dlpack.to_dlpack(t)))):
        assert a.dtype == np.dtype(dtype) and a.shape == tuple(t.shape)
        np.testing.assert_array_equal(a, t.numpy())
        if a.size:
            assert np.shares_memory(a, t.numpy())


@pytest.mark.parametrize("dtype,kind", CASES)
def test_capsule_round_trip(dtype, kind):
    t = torcia.from_numpy(_arrays(dtype)[kind])
    back = dlpack.from_dlpack(dlpack.to_dlpack(t))
    assert back.dtype is t.dtype and back.shape == t.shape
    assert back.stride() == t.stride() or t.numel() <= 1
    np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_capsule_is_consumed_once():
    capsule = dlpack.to_dlpack(torcia.ones(2))
    dlpack.from_dlpack(capsule)
    with pytest.raises(RuntimeError, match="consumed only once"):
        dlpack.from_dlpack(capsule)


def test_refusals():
    if importlib.util.find_spec("torcia.autograd") is not None:
        with pytest.raises(BufferError, match="require gradient"):
            torcia.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(TypeError, match="__dlpack__"):
        torcia.from_dlpack([1.0, 2.0])
    t = torcia.ones(2)
    assert torcia.from_dlpack(t) is t
    c = torcia.from_dlpack(np.ones(2), copy=True)
    c[0] = 5.0
    assert torcia.from_dlpack(np.ones(2), device="cpu").tolist() == [1.0, 1.0]


def test_device_codes():
    assert torcia.ones(1).__dlpack_device__() == (1, 0)
    assert dlpack.DLDeviceType(1) is dlpack.DLDeviceType.kDLCPU
    assert dlpack.DLDeviceType.kDLCUDA == 2


@pytest.mark.torch
@pytest.mark.parametrize("dtype,kind", CASES)
def test_both_ways_with_torch(dtype, kind):
    torch = pytest.importorskip("torch")
    a = _arrays(dtype)[kind]
    # torch -> torcia, through the protocol and through a capsule
    theirs = torch.from_numpy(a.copy()) if kind in ("0d", "empty", "contiguous") else \
        torch.from_numpy(np.ascontiguousarray(a))
    for ours in (torcia.from_dlpack(theirs),
                 dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(theirs))):
        assert ours.dtype.name == str(theirs.dtype).split(".")[1]
        assert ours.stride() == theirs.stride() or theirs.numel() <= 1
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        if a.size and dtype != "bool":
            ours.view(-1)[0] = 3
            assert theirs.reshape(-1)[0].item() == 3
    # torcia -> torch, strided views included
    mine = torcia.from_numpy(a)
    for got in (torch.from_dlpack(mine), torch.utils.dlpack.from_dlpack(dlpack.to_dlpack(mine))):
        assert got.stride() == mine.stride() or mine.numel() <= 1
        np.testing.assert_array_equal(got.numpy(), a)
        if a.size and dtype != "bool":
            got[(0,) * a.ndim] = 4
            assert a[(0,) * a.ndim] == 4


@pytest.mark.torch
def test_torch_names():
    torch = pytest.importorskip("torch")
    assert {m.name: m.value for m in dlpack.DLDeviceType} == {
        m.name: m.value for m in torch.utils.dlpack.DLDeviceType}
    with pytest.raises(BufferError, match="require gradient"):
        torch.ones(2, requires_grad=True).__dlpack__()


def test_capsule_memory_outlives_its_producer():
    import gc

    t = dlpack.from_dlpack(dlpack.to_dlpack(torcia.arange(5.0)))
    gc.collect()
    t += 1
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
