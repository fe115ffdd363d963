"""Checkpoints both ways with real PyTorch: torch.save -> torcia.load and torcia.save ->
torch.load(weights_only=True), every dtype, views, nested containers, a module's state
dict, and PyTorch refusing nothing that torcia writes for state dicts."""

import io
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import torcia

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool"]


def _values(name):
    base = np.array([[0.5, -1.25, 3.0, 0.0], [1.0, 2.0, -7.0, 100.0]], np.float32)
    return base if name in ("float32", "float64", "float16", "bfloat16") else \
        (base != 0) if name == "bool" else np.abs(base).astype(np.int64)


def _torch(name):
    return torch.from_numpy(_values(name)).to(getattr(torch, name))


def _torcia(name):
    return torcia.from_numpy(_values(name)).to(getattr(torcia, name))


def _same(ours, theirs):
    assert ours.dtype.name == str(theirs.dtype).split(".")[1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.stride() == theirs.stride()
    assert ours.tolist() == theirs.tolist()


def _torch_to_torcia(obj, legacy=False, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    return torcia.load(buf, **kw)


def _torcia_to_torch(obj):
    buf = io.BytesIO()
    torcia.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("name", DTYPES)
def test_every_dtype_from_torch(name, legacy):
    t = _torch(name)
    out = _torch_to_torcia({"t": t, "view": t.T, "row": t[1, 1:]}, legacy=legacy)
    for key, theirs in [("t", t), ("view", t.T), ("row", t[1, 1:])]:
        _same(out[key], theirs)


@pytest.mark.parametrize("name", DTYPES)
def test_every_dtype_to_torch(name):
    t = _torcia(name)
    out = _torcia_to_torch({"t": t, "view": t.T, "row": t[1, 1:]})
    for key, ours in [("t", t), ("view", t.T), ("row", t[1, 1:])]:
        _same(ours, out[key])
    assert out["t"].untyped_storage().data_ptr() == out["view"].untyped_storage().data_ptr()


def test_legacy_files_with_map_location_and_damage():
    state = {"w": torch.arange(6.0).reshape(2, 3), "n": 3}
    out = _torch_to_torcia(state, legacy=True, map_location=lambda t, loc: t + 1)
    assert out["w"].tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]] and out["n"] == 3
    buf = io.BytesIO()
    torch.save(state, buf, _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match=r"storage \d+ is truncated"):
        torcia.load(io.BytesIO(buf.getvalue()[:-4]))


def test_nested_containers_both_ways():
    theirs = {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(2)}},
              "groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1], "name": None}],
              "od": OrderedDict(a=torch.zeros(1, 2)), "shape": torch.Size([2, 3]),
              "dtype": torch.float16, "device": torch.device("cpu"), "set": {1, 2},
              "bytes": b"\x00\xff", "complex": 1 + 2j, "empty": torch.zeros(0, 3),
              "scalar": torch.tensor(7, dtype=torch.int64)}
    ours = _torch_to_torcia(theirs)
    assert ours["groups"] == theirs["groups"] and isinstance(ours["od"], OrderedDict)
    assert ours["shape"] == torcia.Size([2, 3]) and type(ours["shape"]) is torcia.Size
    assert ours["dtype"] is torcia.float16 and ours["device"] == torcia.device("cpu")
    assert ours["set"] == {1, 2} and ours["bytes"] == b"\x00\xff" and ours["complex"] == 1 + 2j
    assert ours["state"][0]["step"].item() == 3.0 and ours["empty"].shape == (0, 3)
    assert ours["scalar"].shape == () and ours["scalar"].item() == 7
    back = _torcia_to_torch(ours)
    assert back["groups"] == theirs["groups"] and isinstance(back["od"], OrderedDict)
    assert back["shape"] == torch.Size([2, 3]) and back["dtype"] is torch.float16
    assert back["device"] == torch.device("cpu") and back["set"] == {1, 2}
    assert torch.equal(back["state"][0]["exp_avg"], torch.ones(2))
    assert back["empty"].shape == (0, 3) and back["scalar"].item() == 7


def test_a_modules_state_dict_both_ways_gives_equal_outputs():
    nn = pytest.importorskip("torcia.nn")
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(),
                                 torch.nn.Linear(4, 3))
    ours = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)

    ours.load_state_dict(_torch_to_torcia(theirs.state_dict()))
    expected = theirs(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours(torcia.from_numpy(x)).detach().numpy(), expected,
                               rtol=1e-6, atol=1e-6)

    fresh = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    theirs.load_state_dict(_torcia_to_torch(fresh.state_dict()))
    np.testing.assert_allclose(theirs(torch.from_numpy(x)).detach().numpy(),
                               fresh(torcia.from_numpy(x)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    params = _torcia_to_torch(dict(fresh.named_parameters()))
    assert isinstance(params["0.weight"], torch.nn.Parameter)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_a_code_running_torch_pickle_is_refused_without_running(tmp_path, legacy):
    target = tmp_path / "made-by-the-pickle"

    class RunsCode:
        def __reduce__(self):
            import os
            return (os.mkdir, (str(target),))

    buf = io.BytesIO()
    torch.save({"w": torch.ones(1), "x": RunsCode()}, buf,
               _use_new_zipfile_serialization=not legacy)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL posix.mkdir was not an allowed"):
        torcia.load(io.BytesIO(buf.getvalue()))
    assert not target.exists()


def test_torch_files_are_crc_checked():
    buf = io.BytesIO()
    torch.save({"w": torch.arange(16.0)}, buf)
    data = bytearray(buf.getvalue())
    data[bytes(data).index(np.arange(16.0, dtype=np.float32).tobytes()) + 5] ^= 4
    with pytest.raises(RuntimeError, match="fails its CRC-32 check"):
        torcia.load(io.BytesIO(bytes(data)))


def test_torch_mmap_and_map_location(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"w": torch.arange(4.0)}, path)
    assert torcia.load(path, mmap=True)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    moved = torcia.load(path, map_location=lambda t, loc: t * 2)
    assert moved["w"].tolist() == [0.0, 2.0, 4.0, 6.0]
    torcia.save({"w": torcia.arange(4.0)}, path)
    assert torch.load(path, mmap=True, weights_only=True)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
