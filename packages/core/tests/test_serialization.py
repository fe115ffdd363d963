"""torcia.save / torcia.load: round trips of tensors and nested containers, the archive's
documented layout, map_location, and clear errors for truncated or tampered files."""

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


def test_the_archive_is_the_documented_layout():
    buf = io.BytesIO()
    torcia.save({"w": torcia.tensor([1.0, 2.0], dtype=torcia.bfloat16)}, buf)
    archive = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    assert sorted(archive.namelist()) == ["structure.json", "tensors/0.npy"]
    structure = json.loads(archive.read("structure.json"))
    assert structure["format"] == "torcia-archive" and structure["version"] == 1
    assert structure["root"] == {"t": "dict", "items": [[{"t": "str", "v": "w"},
                                                         {"t": "tensor", "id": "0"}]]}
    spec = structure["tensors"]["0"]
    data = archive.read("tensors/0.npy")
    assert spec == {"file": "tensors/0.npy", "dtype": "bfloat16", "shape": [2],
                    "device": "cpu", "requires_grad": False,
                    "sha256": hashlib.sha256(data).hexdigest()}
    arr = np.load(io.BytesIO(data), allow_pickle=False)
    # bfloat16 as its raw bits: 1.0 is 0x3F80, 2.0 is 0x4000
    assert arr.dtype == np.uint16 and arr.tolist() == [0x3F80, 0x4000]


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


def _archive_with(change):
    """A saved archive rewritten with ``change(members)`` applied to its name -> bytes."""
    buf = io.BytesIO()
    torcia.save({"w": torcia.arange(4.0)}, buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    members = {n: src.read(n) for n in src.namelist()}
    change(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    return out.getvalue()


def _structure(members):
    return json.loads(members["structure.json"])


def _set_structure(members, structure):
    members["structure.json"] = json.dumps(structure).encode()


def _replace_array(members, arr):
    """Put ``arr`` in place of tensor 0 with a matching sha256, as a deliberate forger
    would."""
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=arr.dtype == object)
    members["tensors/0.npy"] = buf.getvalue()
    structure = _structure(members)
    structure["tensors"]["0"]["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    _set_structure(members, structure)


def test_a_truncated_file_is_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.tca"
    torcia.save({"w": torcia.arange(100.0)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match=r"ckpt.tca.*not a torcia archive, or a truncated"):
        torcia.load(path)


def test_a_modified_array_fails_its_checksum():
    def tamper(members):
        arr = np.arange(4.0, dtype=np.float32)
        arr[2] = 99.0
        buf = io.BytesIO()
        np.save(buf, arr)
        members["tensors/0.npy"] = buf.getvalue()

    with pytest.raises(RuntimeError, match=r"tensors/0.npy does not match its sha256"):
        torcia.load(io.BytesIO(_archive_with(tamper)))


def test_a_consistently_rewritten_array_is_still_checked_against_its_description():
    def tamper(members):
        _replace_array(members, np.arange(5.0, dtype=np.float32))

    with pytest.raises(RuntimeError, match=r"has shape \[5\], but structure.json says \[4\]"):
        torcia.load(io.BytesIO(_archive_with(tamper)))


def test_pickled_arrays_are_refused():
    def tamper(members):
        _replace_array(members, np.array([{"x": 1}], dtype=object))

    with pytest.raises(RuntimeError, match=r"tensors/0.npy is not a plain .npy array"):
        torcia.load(io.BytesIO(_archive_with(tamper)))


@pytest.mark.parametrize("change,message", [
    (lambda m: m.pop("structure.json"), "no structure.json"),
    (lambda m: m.update({"structure.json": b"{not json"}), "structure.json cannot be read"),
    (lambda m: m.pop("tensors/0.npy"), "the archive lacks tensors/0.npy"),
    (lambda m: _set_structure(m, {**_structure(m), "version": 99}), "version 99"),
    (lambda m: _set_structure(m, {**_structure(m), "root": {"t": "pickle"}}),
     "unknown type 'pickle'"),
])
def test_damaged_structure_is_named(change, message):
    with pytest.raises(RuntimeError, match=message):
        torcia.load(io.BytesIO(_archive_with(change)))


def test_a_pytorch_pickle_checkpoint_is_refused_with_the_reason():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    with pytest.raises(RuntimeError, match="does not unpickle files"):
        torcia.load(io.BytesIO(buf.getvalue()))


def test_objects_that_are_not_data_cannot_be_saved():
    with pytest.raises(TypeError, match=r"object of type object at the top level\['opt'\]"):
        torcia.save({"opt": object()}, io.BytesIO())
    with pytest.raises(TypeError, match="cannot store an object of type function"):
        torcia.save([lambda: 0], io.BytesIO())


def test_pickle_options_are_refused_by_name():
    buf = io.BytesIO()
    torcia.save([1], buf)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['encoding'\]"):
        torcia.load(io.BytesIO(buf.getvalue()), encoding="latin1")
    with pytest.raises(ValueError, match="mmap=True is not supported"):
        torcia.load(io.BytesIO(buf.getvalue()), mmap=True)
    with pytest.raises(ValueError, match="does not unpickle"):
        torcia.load(io.BytesIO(buf.getvalue()), pickle_module=object())
