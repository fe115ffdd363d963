"""Distributed checkpoints in one process: what is saved, atomicity, and the errors that
name what is wrong (the multi-process resharding runs in test_parallel.py)."""

import os

import numpy as np
import pytest

import torcia
import torcia.distributed.checkpoint as dcp
from torcia.distributed.checkpoint.filesystem import FileSystemWriter


def _state():
    return {"model": {"fc.weight": torcia.arange(12.0).reshape(3, 4),
                      "fc.bias": torcia.tensor([1.0, -1.0, 0.5], dtype=torcia.float64)},
            "optim": {"state": {"fc.weight": {"step": torcia.tensor(3.0),
                                              "exp_avg": torcia.ones(3, 4)}},
                      "param_groups": [{"lr": 0.01, "params": ["fc.weight"]}]},
            "epoch": 4, "note": "run-1"}


def _zeros_like(state):
    if isinstance(state, dict):
        return {k: _zeros_like(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_zeros_like(v) for v in state]
    return torcia.zeros_like(state) if isinstance(state, torcia.Tensor) else None


def test_a_state_dict_round_trips_with_nested_values_and_dtypes(tmp_path):
    saved = _state()
    meta = dcp.save(saved, checkpoint_id=tmp_path)
    assert meta.state_dict_metadata["model.fc.weight"].size == (3, 4)
    target = _zeros_like(saved)
    dcp.load(target, checkpoint_id=tmp_path)
    for key in ("fc.weight", "fc.bias"):
        np.testing.assert_array_equal(target["model"][key].numpy(),
                                      saved["model"][key].numpy())
    assert target["model"]["fc.bias"].dtype == torcia.float64
    assert target["optim"]["state"]["fc.weight"]["step"].item() == 3.0
    assert target["optim"]["param_groups"] == [{"lr": 0.01, "params": ["fc.weight"]}]
    assert (target["epoch"], target["note"]) == (4, "run-1")


def test_nothing_is_pickled(tmp_path):
    dcp.save(_state(), checkpoint_id=tmp_path)
    for name in os.listdir(tmp_path):
        assert not (tmp_path / name).read_bytes().startswith(b"\x80"), name


def test_a_folder_without_metadata_is_not_a_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"\.metadata is missing"):
        dcp.load({"w": torcia.zeros(1)}, checkpoint_id=tmp_path)


def test_overwriting_removes_the_old_metadata_before_any_data_changes(tmp_path):
    dcp.save({"w": torcia.ones(2)}, checkpoint_id=tmp_path)
    FileSystemWriter(tmp_path).prepare()   # what a new save does first, on rank 0
    assert not (tmp_path / ".metadata").exists()
    dcp.save({"w": torcia.full((2,), 5.0)}, checkpoint_id=tmp_path)
    target = {"w": torcia.zeros(2)}
    dcp.load(target, checkpoint_id=tmp_path)
    assert target["w"].tolist() == [5.0, 5.0]
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


def test_errors_name_the_key(tmp_path):
    dcp.save({"w": torcia.ones(2, 3)}, checkpoint_id=tmp_path)
    with pytest.raises(RuntimeError, match=r"Size mismatch .*\(2, 3\).*\(3, 2\) for w"):
        dcp.load({"w": torcia.zeros(3, 2)}, checkpoint_id=tmp_path)
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: v"):
        dcp.load({"v": torcia.zeros(1)}, checkpoint_id=tmp_path)
    partial = {"w": torcia.zeros(2, 3), "v": torcia.zeros(1)}
    dcp.load(partial, checkpoint_id=tmp_path,
             planner=dcp.DefaultLoadPlanner(allow_partial_load=True))
    assert partial["w"].sum().item() == 6.0 and partial["v"].item() == 0.0


def test_a_truncated_data_file_is_reported(tmp_path):
    dcp.save({"w": torcia.ones(100)}, checkpoint_id=tmp_path)
    data = tmp_path / "__0_0.distcp"
    data.write_bytes(data.read_bytes()[:10])
    with pytest.raises(RuntimeError, match="truncated"):
        dcp.load({"w": torcia.zeros(100)}, checkpoint_id=tmp_path)


def test_stateful_objects_save_and_load_through_their_state_dicts(tmp_path):
    model = torcia.nn.Linear(3, 2)
    opt = torcia.optim.SGD(model.parameters(), lr=0.3)
    dcp.save({"model": model, "opt": opt}, checkpoint_id=tmp_path)
    fresh = torcia.nn.Linear(3, 2)
    fresh_opt = torcia.optim.SGD(fresh.parameters(), lr=0.9)
    dcp.load({"model": fresh, "opt": fresh_opt}, checkpoint_id=tmp_path)
    assert torcia.equal(fresh.weight, model.weight)
    assert fresh_opt.param_groups[0]["lr"] == 0.3


def test_async_save_completes_a_checkpoint(tmp_path):
    w = torcia.arange(4.0)
    future = dcp.async_save({"w": w}, checkpoint_id=tmp_path)
    w.mul_(0)
    future.result(timeout=60)
    target = {"w": torcia.zeros(4)}
    dcp.load(target, checkpoint_id=tmp_path)
    assert target["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
