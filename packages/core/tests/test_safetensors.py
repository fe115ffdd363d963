"""torcia.utils.safetensors: round trips of every dtype with metadata, files that
safetensors' own torch API reads and writes, state dicts for Module.load_state_dict, and a
clear error without the optional package."""

import sys

import numpy as np
import pytest

import torcia

pytest.importorskip("safetensors")
from torcia.utils import safetensors as st  # noqa: E402

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool"]


def _sample(name):
    values = torcia.tensor([[0.5, -1.25, 3.0], [0.0, 1.0, 2.0]])
    return values.to(getattr(torcia, name))


def test_every_dtype_and_metadata_round_trip(tmp_path):
    tensors = {name: _sample(name) for name in DTYPES}
    tensors["empty"] = torcia.zeros(0, 3)
    tensors["view"] = torcia.arange(12.0).reshape(3, 4).T  # stored as its values
    path = tmp_path / "all.safetensors"
    st.save_file(tensors, path, metadata={"format": "pt", "note": "ok"})
    out = st.load_file(path)
    assert sorted(out) == sorted(tensors)
    for name, t in tensors.items():
        assert out[name].dtype is t.dtype and out[name].shape == t.shape
        assert out[name].tolist() == t.tolist()
    assert st.load_metadata(path) == {"format": "pt", "note": "ok"}
    assert st.load(st.save(tensors))["bfloat16"].tolist() == tensors["bfloat16"].tolist()
    out["float32"][0, 0] = 7.0  # loaded tensors are writable


def test_safetensors_torch_api_both_ways(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file as torch_load_file
    from safetensors.torch import save_file as torch_save_file

    theirs = {name: torch.from_numpy(np.array([[0.5, -1.25, 3.0], [0.0, 1.0, 2.0]],
                                              np.float32)).to(getattr(torch, name))
              for name in DTYPES}
    torch_save_file(theirs, tmp_path / "from_torch.safetensors", metadata={"a": "b"})
    ours = st.load_file(tmp_path / "from_torch.safetensors")
    for name in DTYPES:
        assert ours[name].dtype.name == name and ours[name].tolist() == theirs[name].tolist()
    assert st.load_metadata(tmp_path / "from_torch.safetensors") == {"a": "b"}

    st.save_file(ours, tmp_path / "from_torcia.safetensors")
    back = torch_load_file(tmp_path / "from_torcia.safetensors")
    for name in DTYPES:
        assert back[name].dtype == theirs[name].dtype and torch.equal(back[name], theirs[name])


def test_load_state_dict_takes_the_result(tmp_path):
    nn = pytest.importorskip("torcia.nn")
    model = nn.Linear(3, 2)
    st.save_file(model.state_dict(), tmp_path / "m.safetensors")
    fresh = nn.Linear(3, 2)
    fresh.load_state_dict(st.load_file(tmp_path / "m.safetensors"))
    x = torcia.randn(4, 3)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())


def test_bad_input_is_named(tmp_path):
    with pytest.raises(TypeError, match="'w' is a list; safetensors stores tensors only"):
        st.save({"w": [1.0]})
    with pytest.raises(TypeError, match="metadata must be a dict of str -> str"):
        st.save({"w": torcia.ones(1)}, metadata={"n": 1})
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(RuntimeError, match="junk.safetensors' is not a valid safetensors"):
        st.load_file(path)


def test_without_the_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)
    with pytest.raises(ImportError, match=r"pip install 'torcia-core\[safetensors\]'"):
        st.save({"w": torcia.ones(1)})


def test_the_docstring_examples_run():
    import doctest

    result = doctest.testmod(st, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
