"""torcia.save / torcia.load: round trips of tensors and nested containers, the archive's
documented layout, map_location, weights_only and the safe-globals allowlist, and clear
errors for truncated, tampered or crafted files (also in torcia's earlier archive format)."""

import hashlib
import io
import json
import math
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import torcia


def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    torcia.save(obj, buf)
    buf.seek(0)
    return torcia.load(buf, **load_kw)


def test_nested_containers_scalars_and_tensors_come_back_as_they_were():
    t = torcia.arange(6.0).reshape(2, 3)
    obj = {
        "state": {0: {"step": torcia.tensor(3.0), "exp_avg": torcia.ones(2)}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1],
                          "nesterov": False, "name": None}],
        "model": OrderedDict(weight=t),
        "inf": math.inf, "nan": math.nan, "dtype": torcia.int16, "device": torcia.device("cpu"),
        "shape": torcia.Size([2, 3]), 7: "seven",
    }
    out = roundtrip(obj)
    assert out["param_groups"] == obj["param_groups"]
    assert isinstance(out["param_groups"][0]["betas"], tuple)
    assert list(out["state"]) == [0] and isinstance(out["model"], OrderedDict)
    np.testing.assert_array_equal(out["model"]["weight"].numpy(), t.numpy())
    assert out["state"][0]["step"].item() == 3.0
    assert out["inf"] == math.inf and math.isnan(out["nan"])
    assert out["dtype"] is torcia.int16 and out["device"] == torcia.device("cpu")
    assert out["shape"] == torcia.Size([2, 3]) and type(out["shape"]) is torcia.Size
    assert out[7] == "seven"


@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64, torcia.float16,
                                   torcia.bfloat16, torcia.int64, torcia.int8, torcia.uint8,
                                   torcia.bool])
def test_every_dtype_keeps_its_bits(dtype):
    x = torcia.tensor([[0.5, -1.25, 3.0], [0.0, 1.0, 2.0]]).to(dtype)
    y = roundtrip(x)
    assert y.dtype is dtype and y.shape == x.shape
    assert y.tolist() == x.tolist()


def test_views_and_zero_dim_tensors():
    base = torcia.arange(12.0).reshape(3, 4)
    view = base.T[1:]
    assert roundtrip(view).tolist() == view.tolist()
    assert roundtrip(torcia.tensor(2.5)).shape == torcia.Size([])


def test_a_tensor_referenced_twice_loads_as_one_tensor():
    t = torcia.ones(3)
    out = roundtrip([t, t, torcia.ones(3)])
    assert out[0] is out[1] and out[2] is not out[0]


def test_requires_grad_is_restored():
    pytest.importorskip("torcia.autograd")  # requires_grad=True needs the engine
    p = torcia.ones(2, requires_grad=True)
    assert roundtrip(p).requires_grad
    assert not roundtrip(p.detach()).requires_grad


def test_paths_and_file_objects(tmp_path):
    path = tmp_path / "ckpt.tca"
    torcia.save({"a": torcia.ones(1)}, path)
    assert torcia.load(path)["a"].tolist() == [1.0]
    assert torcia.load(str(path))["a"].tolist() == [1.0]
    with open(path, "rb") as f:
        assert torcia.load(f)["a"].tolist() == [1.0]
    with open(tmp_path / "other.tca", "wb") as f:
        torcia.save([1, 2], f)
    assert torcia.load(tmp_path / "other.tca") == [1, 2]


def test_map_location_forms():
    saved = {"a": torcia.ones(2)}
    assert roundtrip(saved, map_location="cpu")["a"].device == torcia.device("cpu")
    assert roundtrip(saved, map_location=torcia.device("cpu"))["a"].tolist() == [1.0, 1.0]
    assert roundtrip(saved, map_location={"cuda:0": "cpu"})["a"].tolist() == [1.0, 1.0]
    seen = []

    def relocate(tensor, location):
        seen.append(location)
        return tensor * 2

    assert roundtrip(saved, map_location=relocate)["a"].tolist() == [2.0, 2.0]
    assert seen == ["cpu"]




def test_views_share_one_storage_and_keep_their_strides():
    base = torcia.arange(12.0).reshape(3, 4)
    out = roundtrip({"base": base, "t": base.T, "row": base[1]})
    assert out["t"].stride() == (1, 4) and out["row"].tolist() == [4.0, 5.0, 6.0, 7.0]
    out["base"][1, 0] = 100.0  # one storage: the views see the write, as in PyTorch
    assert out["t"][0, 1].item() == 100.0 and out["row"][0].item() == 100.0


def _members(data: bytes) -> dict:
    archive = zipfile.ZipFile(io.BytesIO(data))
    return {i.filename: archive.read(i) for i in archive.infolist()}


def test_the_archive_is_pytorchs_layout_with_a_manifest_and_a_digest():
    buf = io.BytesIO()
    torcia.save({"w": torcia.tensor([1.0, 2.0], dtype=torcia.bfloat16)}, buf)
    data = buf.getvalue()
    archive = zipfile.ZipFile(io.BytesIO(data))
    members = _members(data)
    assert sorted(members) == sorted([
        "archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
        "archive/byteorder", "archive/data/0", "archive/version",
        "archive/.data/torcia_manifest.json"])
    # bfloat16 storage as its raw bits: 1.0 is 0x3F80, 2.0 is 0x4000
    assert np.frombuffer(members["archive/data/0"], np.uint16).tolist() == [0x3F80, 0x4000]
    assert members["archive/version"] == b"3\n" and members["archive/byteorder"] == b"little"
    assert b"torch._utils\n_rebuild_tensor_v2" in members["archive/data.pkl"]
    assert b"torch\nBFloat16Storage" in members["archive/data.pkl"]
    manifest = json.loads(members["archive/.data/torcia_manifest.json"])
    assert manifest["sha256"]["data/0"] == hashlib.sha256(members["archive/data/0"]).hexdigest()
    assert len(manifest["sha256"]) == len(members) - 1
    # the zip comment is the sha256 of every byte before its 2-byte length field, but the
    # data of the records the manifest covers
    frame, position = hashlib.sha256(), 0
    for info in archive.infolist():
        header = data[info.header_offset:info.header_offset + 30]
        start = info.header_offset + 30 + int.from_bytes(header[26:28], "little") \
            + int.from_bytes(header[28:30], "little")
        if info.filename.startswith("archive/data/"):
            assert start % 64 == 0  # storages are aligned as PyTorch aligns them
        if not info.filename.endswith("torcia_manifest.json"):
            frame.update(data[position:start])
            position = start + info.file_size
    comment = archive.comment
    frame.update(data[position:len(data) - len(comment) - 2])
    assert comment == b"torcia-sha256:" + frame.hexdigest().encode()


def test_a_truncated_file_is_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.pt"
    torcia.save({"w": torcia.arange(100.0)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match=r"ckpt.pt.*not a checkpoint, or a truncated"):
        torcia.load(path)
    path.write_bytes(b"")
    with pytest.raises(RuntimeError, match=r"ckpt.pt.*not a checkpoint"):
        torcia.load(path)


def test_a_modified_storage_fails_its_crc():
    buf = io.BytesIO()
    torcia.save({"w": torcia.arange(4.0)}, buf)
    data = bytearray(buf.getvalue())
    start = bytes(data).index(np.arange(4.0, dtype=np.float32).tobytes())
    data[start + 9] ^= 0x10
    with pytest.raises(RuntimeError, match=r"archive/data/0 fails its CRC-32 check"):
        torcia.load(io.BytesIO(bytes(data)))


def _rezip(members: dict, comment: bytes = b"") -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name, data in members.items():
            dst.writestr(name, data)
        dst.comment = comment
    return out.getvalue()


def test_a_consistently_rezipped_change_fails_the_manifest_and_digest():
    buf = io.BytesIO()
    torcia.save({"w": torcia.arange(4.0)}, buf)
    members = _members(buf.getvalue())
    members["archive/data/0"] = np.arange(4.0, dtype=np.float32)[::-1].tobytes()
    with pytest.raises(RuntimeError, match="does not match its sha256"):
        torcia.load(io.BytesIO(_rezip(members, zipfile.ZipFile(buf).comment)))
    # without the digest, the manifest still names the changed record
    with pytest.raises(RuntimeError, match="zip comment does not hold"):
        torcia.load(io.BytesIO(_rezip(members)))


def test_200_random_bit_flips_are_caught():
    """Each of 200 copies of a checkpoint with one random bit flipped must fail to load
    with RuntimeError; PyTorch's own format catches about 37 of 200 such files."""
    buf = io.BytesIO()
    torcia.save({"w": torcia.arange(64.0).reshape(8, 8), "b": torcia.ones(8),
                 "step": 7}, buf)
    good = buf.getvalue()
    rng = np.random.default_rng(0)
    caught = 0
    for _ in range(200):
        data = bytearray(good)
        pos = int(rng.integers(len(data)))
        data[pos] ^= 1 << int(rng.integers(8))
        try:
            torcia.load(io.BytesIO(bytes(data)))
        except RuntimeError:
            caught += 1
    assert caught >= 195, caught


# --------------------------------------------------------------------------------------
# weights_only and the allowlist
# --------------------------------------------------------------------------------------


class _Marker:
    def __init__(self, value=None):
        self.value = value

    def __eq__(self, other):
        return type(other) is _Marker and other.value == self.value


class _RunsCode:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        import os
        return (os.mkdir, (self.path,))


def test_a_code_running_pickle_is_refused_without_running(tmp_path):
    target = tmp_path / "made-by-the-pickle"
    buf = io.BytesIO()
    torcia.save({"w": torcia.ones(1), "x": _RunsCode(target)}, buf)
    with pytest.raises(__import__("pickle").UnpicklingError) as info:
        torcia.load(io.BytesIO(buf.getvalue()))
    message = str(info.value)
    assert "Weights only load failed" in message
    assert "GLOBAL posix.mkdir was not an allowed global by default" in message
    assert "torcia.serialization.add_safe_globals([mkdir])" in message
    assert not target.exists()
    torcia.load(io.BytesIO(buf.getvalue()), weights_only=False)  # documented as unsafe
    assert target.is_dir()


def test_opcodes_outside_the_weights_only_set_are_refused_before_unpickling():
    buf = io.BytesIO()
    torcia.save({"b": bytearray(b"xy"), "w": torcia.ones(1)}, buf, pickle_protocol=5)
    with pytest.raises(__import__("pickle").UnpicklingError,
                       match=r"Unsupported operand 150 \(BYTEARRAY8\)"):
        torcia.load(io.BytesIO(buf.getvalue()))
    out = torcia.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert out["b"] == bytearray(b"xy") and out["w"].tolist() == [1.0]
    buf = io.BytesIO()
    torcia.save({"b": b"xy", "s": frozenset({1})}, buf, pickle_protocol=4)
    assert torcia.load(io.BytesIO(buf.getvalue())) == {"b": b"xy", "s": frozenset({1})}


def test_safe_globals_allow_exactly_what_they_name():
    buf = io.BytesIO()
    torcia.save([_Marker(3)], buf)
    data = buf.getvalue()
    pickle_error = __import__("pickle").UnpicklingError
    with pytest.raises(pickle_error, match="_Marker was not an allowed global"):
        torcia.load(io.BytesIO(data))
    with torcia.serialization.safe_globals([_Marker]):
        assert torcia.load(io.BytesIO(data)) == [_Marker(3)]
    with pytest.raises(pickle_error):
        torcia.load(io.BytesIO(data))
    try:
        torcia.serialization.add_safe_globals([(_Marker, f"{__name__}._Marker")])
        assert torcia.serialization.get_safe_globals() == [_Marker]
        assert torcia.load(io.BytesIO(data)) == [_Marker(3)]
    finally:
        torcia.serialization.clear_safe_globals()
    assert torcia.serialization.get_safe_globals() == []
    with pytest.raises(pickle_error):
        torcia.load(io.BytesIO(data))


def test_numpy_arrays_save_and_load_only_when_allowed():
    arr = np.arange(5, dtype=np.int16)
    buf = io.BytesIO()
    torcia.save({"a": arr}, buf)
    with pytest.raises(__import__("pickle").UnpicklingError, match="not an allowed global"):
        torcia.load(io.BytesIO(buf.getvalue()))
    np.testing.assert_array_equal(torcia.load(io.BytesIO(buf.getvalue()),
                                              weights_only=False)["a"], arr)


def test_a_whole_module_round_trips_with_weights_only_false():
    nn = pytest.importorskip("torcia.nn")
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    buf = io.BytesIO()
    torcia.save(model, buf)
    with pytest.raises(__import__("pickle").UnpicklingError, match="Sequential"):
        torcia.load(io.BytesIO(buf.getvalue()))
    again = torcia.load(io.BytesIO(buf.getvalue()), weights_only=False)
    x = torcia.randn(4, 3)
    assert isinstance(again[0].weight, nn.Parameter)
    np.testing.assert_array_equal(again(x).detach().numpy(), model(x).detach().numpy())


def test_mmap_maps_the_file_copy_on_write(tmp_path):
    path = tmp_path / "ckpt.pt"
    torcia.save({"w": torcia.arange(6.0)}, path)
    before = path.read_bytes()
    out = torcia.load(path, mmap=True)
    assert out["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    out["w"][0] = 9.0  # private pages: the file is not written
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="must be a file path in order to use the mmap"):
        torcia.load(io.BytesIO(before), mmap=True)


def test_pickle_options():
    buf = io.BytesIO()
    torcia.save([1], buf)
    data = buf.getvalue()
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['fix_imports'\]"):
        torcia.load(io.BytesIO(data), fix_imports=True)
    assert torcia.load(io.BytesIO(data), encoding="latin1") == [1]
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit"):
        torcia.load(io.BytesIO(data), pickle_module=__import__("pickle"))
    assert torcia.load(io.BytesIO(data), pickle_module=__import__("pickle"),
                       weights_only=False) == [1]
    with pytest.raises(ValueError, match="legacy format"):
        torcia.save([1], io.BytesIO(), _use_new_zipfile_serialization=False)


def test_crafted_archives_are_runtime_errors_naming_the_problem():
    buf = io.BytesIO()
    torcia.save({"w": torcia.arange(4.0)}, buf)
    members = _members(buf.getvalue())
    members.pop("archive/.data/torcia_manifest.json")  # a foreign file: CRCs only

    def load_with(**changes):
        return torcia.load(io.BytesIO(_rezip({**members, **changes})))

    pickle = __import__("pickle")
    bad_layout = pickle.dumps(1, protocol=2).replace(b"K\x01", b"")  # pops an empty stack
    with pytest.raises(RuntimeError, match="data.pkl cannot be unpickled"):
        load_with(**{"archive/data.pkl": bad_layout})
    big = members["archive/data.pkl"].replace(b"K\x04\x85", b"K\x09\x85")  # size (9,)
    with pytest.raises(RuntimeError, match=r"runs past its storage of 4 elements"):
        load_with(**{"archive/data.pkl": big})
    with pytest.raises(RuntimeError, match="the archive lacks archive/data/0"):
        torcia.load(io.BytesIO(_rezip({k: v for k, v in members.items()
                                       if k != "archive/data/0"})))
    gigabyte = b"\x80\x02c__builtin__\nbytearray\nJ\x00\xca\x9a;\x85R."  # bytearray(10**9)
    with pytest.raises(RuntimeError, match="a bytearray by size"):
        load_with(**{"archive/data.pkl": gigabyte})
    with pytest.raises(RuntimeError, match="no single <archive>/data.pkl"):
        torcia.load(io.BytesIO(_rezip({"x/y": b""})))


def test_a_decompression_bomb_is_refused_before_it_expands():
    buf = io.BytesIO()
    torcia.save([torcia.zeros(4)], buf)
    members = _members(buf.getvalue())
    members.pop("archive/.data/torcia_manifest.json")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name, data in members.items():
            if name == "archive/data/0":
                data = bytes(50_000_000)  # 50 MB of zeros deflate to ~50 KB
            dst.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(RuntimeError, match=r"more than 100 times: refused as a decompression"):
        torcia.load(io.BytesIO(out.getvalue()))


def test_a_truncated_or_foreign_legacy_pickle_is_named():
    magic_and_protocol = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."
    with pytest.raises(RuntimeError, match="the header is not a valid pickle"):
        torcia.load(io.BytesIO(magic_and_protocol))
    with pytest.raises(RuntimeError, match="magic number or protocol version is wrong"):
        torcia.load(io.BytesIO(__import__("pickle").dumps([1, 2, 3])))
    with pytest.raises(RuntimeError, match="neither a zip archive nor PyTorch's legacy"):
        torcia.load(io.BytesIO(b"GIF89a"))


# --------------------------------------------------------------------------------------
# torcia's earlier archive format (structure.json + .npy) still loads, safely
# --------------------------------------------------------------------------------------


def _legacy(arr=None, structure=None, extra=None, npz=False) -> bytes:
    """An archive as torcia 0.1 wrote it, holding {"w": arr} (or, crafted, an .npz
    archive of it in place of the .npy file)."""
    arr = np.arange(4.0, dtype=np.float32) if arr is None else arr
    npy = io.BytesIO()
    if npz:
        np.savez(npy, w=arr)
    else:
        np.save(npy, arr, allow_pickle=arr.dtype == object)
    base = {"format": "torcia-archive", "version": 1,
            "root": {"t": "dict", "items": [[{"t": "str", "v": "w"},
                                             {"t": "tensor", "id": "0"}]]},
            "tensors": {"0": {"file": "tensors/0.npy", "dtype": "float32", "shape": [4],
                              "device": "cpu", "requires_grad": False,
                              "sha256": hashlib.sha256(npy.getvalue()).hexdigest()}}}
    members = {"structure.json": json.dumps(structure(base) if structure else base).encode(),
               "tensors/0.npy": npy.getvalue(), **(extra or {})}
    return _rezip(members)


def test_a_legacy_archive_loads():
    assert torcia.load(io.BytesIO(_legacy()))["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def _nested(depth):
    node = {"t": "none"}
    for _ in range(depth):
        node = {"t": "list", "items": [node]}
    return node


@pytest.mark.parametrize("kwargs,message", [
    (dict(arr=np.arange(5.0, dtype=np.float32)), r"has shape \[5\], but structure.json says"),
    (dict(arr=np.array([{"x": 1}], dtype=object)), "is not a plain .npy array"),
    (dict(extra={"tensors/0.npy": b"\x93NUMPY"}), "does not match its sha256"),
    (dict(npz=True), r"tensors/0.npy is not a plain .npy array \(a NpzFile\)"),
    (dict(structure=lambda s: {**s, "version": 99}), "version 99"),
    (dict(structure=lambda s: {**s, "root": {"t": "pickle"}}), "unknown type 'pickle'"),
    (dict(structure=lambda s: {**s, "root": {"t": "float", "v": [1]}}), "malformed float"),
    (dict(structure=lambda s: {**s, "root": {"t": "dict", "items": [[
        {"t": "list", "items": []}, {"t": "none"}]]}}), "unhashable dict key"),
    (dict(structure=lambda s: {**s, "root": {"t": "tensor", "id": 5}}), "refers to a tensor"),
    (dict(structure=lambda s: {**s, "root": _nested(300)}), "nested deeper than 200"),
])
def test_damaged_legacy_archives_are_named(kwargs, message):
    with pytest.raises(RuntimeError, match=message):
        torcia.load(io.BytesIO(_legacy(**kwargs)))


def test_legacy_json_nested_past_the_recursion_limit_is_a_runtime_error():
    deep = ('{"format": "torcia-archive", "version": 1, "root": ' + "[" * 100_000
            + "]" * 100_000 + "}")
    data = _rezip({"structure.json": deep.encode()})
    with pytest.raises(RuntimeError, match="structure.json cannot be read"):
        torcia.load(io.BytesIO(data))
