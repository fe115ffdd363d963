"""The rest of torch.serialization's names: skip_data both ways, the unsafe globals of a
checkpoint (against torch's answer on the same files), mmap sharing, load endianness,
location tags and the storage helpers."""

import collections
import io
import mmap
import warnings

import numpy as np
import pytest

import torcia
from torcia import serialization as S


class Custom:
    def __init__(self):
        self.value = 3


def test_skip_data_save_and_load(tmp_path):
    state = {"w": torcia.arange(6.0).reshape(2, 3), "b": torcia.ones(4, dtype=torcia.int64)}
    with S.skip_data():
        torcia.save(state, tmp_path / "skip.pt")
    loaded = torcia.load(tmp_path / "skip.pt")
    assert loaded["w"].shape == (2, 3) and not loaded["w"].any()
    torcia.save(state, tmp_path / "full.pt")
    with S.skip_data():
        empty = torcia.load(tmp_path / "full.pt")
    assert empty["b"].dtype is torcia.int64 and not empty["b"].any()
    assert torcia.equal(torcia.load(tmp_path / "full.pt")["w"], state["w"])


def test_unsafe_globals(tmp_path):
    torcia.save({"w": torcia.ones(2), "od": collections.OrderedDict(a=1)}, tmp_path / "ok.pt")
    assert S.get_unsafe_globals_in_checkpoint(tmp_path / "ok.pt") == []
    torcia.save({"x": Custom(), "a": np.ones(2)}, tmp_path / "bad.pt")
    unsafe = S.get_unsafe_globals_in_checkpoint(tmp_path / "bad.pt")
    assert f"{__name__}.Custom" in unsafe and any(n.startswith("numpy") for n in unsafe)
    with S.safe_globals([Custom]):
        assert f"{__name__}.Custom" not in S.get_unsafe_globals_in_checkpoint(
            tmp_path / "bad.pt")


def test_mmap_shared_writes_reach_the_file(tmp_path):
    torcia.save({"w": torcia.zeros(4)}, tmp_path / "m.pt")
    with S.set_default_mmap_options(mmap.MAP_SHARED):
        w = torcia.load(tmp_path / "m.pt", mmap=True)["w"]
        w += 1
        del w
    assert S.get_default_mmap_options() is None
    # the manifest's hashes no longer match: the file is refused, as a changed file is
    with pytest.raises(RuntimeError):
        torcia.load(tmp_path / "m.pt")
    private = tmp_path / "p.pt"
    torcia.save({"w": torcia.zeros(4)}, private)
    w = torcia.load(private, mmap=True)["w"]
    w += 1
    assert torcia.load(private)["w"].sum().item() == 0.0
    with pytest.raises(ValueError, match="MAP_PRIVATE or mmap.MAP_SHARED"):
        S.set_default_mmap_options(123)


def test_small_helpers():
    assert S.location_tag(torcia.ones(1).untyped_storage()) == "cpu"
    storage = torcia.ones(1).untyped_storage()
    assert S.default_restore_location(storage, "cpu") is storage
    if not torcia.cuda.is_available():
        with pytest.raises(RuntimeError, match="is_available\\(\\) is False"):
            S.validate_cuda_device("cuda:1")
    with pytest.raises(RuntimeError, match="HPU"):
        S.validate_hpu_device("hpu:0")
    assert S.check_module_version_greater_or_equal(np, (1, 0))
    assert not S.check_module_version_greater_or_equal(np, (99,))
    bad = type("M", (), {"__version__": "x.y", "__name__": "m"})
    with pytest.raises(RuntimeError, match="malformed"):
        S.check_module_version_greater_or_equal(bad, (1, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert S.check_module_version_greater_or_equal(bad, (1, 0), error_if_malformed=False)
    assert S.normalize_storage_type(torcia.DoubleStorage) is torcia.DoubleStorage
    assert S.storage_to_tensor_type(torcia.LongStorage(1)) is torcia.LongTensor
    assert S.StorageType("HalfStorage").dtype is torcia.float16
    assert S.get_default_load_endianness() is None
    S.set_default_load_endianness(S.LoadEndianness.LITTLE)
    assert S.get_default_load_endianness() is S.LoadEndianness.LITTLE
    S.set_default_load_endianness(None)
    with pytest.raises(TypeError, match="Invalid argument type"):
        S.set_default_load_endianness("big")
    assert S.get_crc32_options()
    with S.mkdtemp() as path:
        assert path


@pytest.mark.torch
def test_unsafe_globals_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    for i, obj in enumerate([{"w": np.ones(2)}, {"c": Custom()}, {"ok": [1, 2.0, "x"]},
                             {"od": collections.OrderedDict(z=torch.ones(1))}]):
        path = tmp_path / f"{i}.pt"
        torch.save(obj, path)
        assert sorted(S.get_unsafe_globals_in_checkpoint(path)) == sorted(
            torch.serialization.get_unsafe_globals_in_checkpoint(path))
    buf = io.BytesIO()
    with S.skip_data():
        torcia.save({"w": torcia.ones(3, 2)}, buf)
    buf.seek(0)
    assert tuple(torch.load(buf, weights_only=True)["w"].shape) == (3, 2)
    assert [(m.name, m.value) for m in S.LoadEndianness] == [
        (m.name, m.value) for m in torch.serialization.LoadEndianness]
