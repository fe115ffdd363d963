"""Distributed checkpoints as Hugging Face safetensors files (checkpoint.hf_storage): in one
process, with the boxes of a tensor sharded over two ranks written as two ranks write them."""

import json
import os

import numpy as np
import pytest

import torcia
import torcia.distributed.checkpoint as dcp
from torcia.distributed.checkpoint.default_planner import WriteItem
from torcia.distributed.checkpoint.hf_storage import (
    HuggingFaceStorageReader,
    HuggingFaceStorageWriter,
)
from torcia.utils import safetensors

pytest.importorskip("safetensors")


def test_round_trip_in_the_hugging_face_layout(tmp_path):
    saved = {"model": {"w": torcia.arange(12.0).reshape(3, 4),
                       "b": torcia.tensor([1, -2], dtype=torcia.int64)}}
    dcp.save(saved, storage_writer=HuggingFaceStorageWriter(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["model-00001-of-00001.safetensors",
                                            "model.safetensors.index.json"]
    # a plain safetensors file, with the state dict's flat keys
    plain = safetensors.load_file(tmp_path / "model-00001-of-00001.safetensors")
    assert plain["model.w"].equal(saved["model"]["w"])
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == {"model.w": "model-00001-of-00001.safetensors",
                                   "model.b": "model-00001-of-00001.safetensors"}
    assert index["metadata"]["total_size"] == 12 * 4 + 2 * 8
    target = {"model": {"w": torcia.zeros(3, 4), "b": torcia.zeros(2, dtype=torcia.int64)}}
    dcp.load(target, storage_reader=HuggingFaceStorageReader(tmp_path))
    assert target["model"]["w"].equal(saved["model"]["w"])
    assert target["model"]["b"].tolist() == [1, -2]


def test_boxes_of_two_ranks_load_whole(tmp_path):
    whole = torcia.arange(20.0).reshape(5, 4)
    writer = HuggingFaceStorageWriter(tmp_path, save_distributed=True)
    writer.prepare()
    records = []
    for rank, rows in enumerate((slice(0, 3), slice(3, 5))):
        box = whole[rows]
        item = WriteItem("w", offsets=(rows.start, 0), sizes=tuple(box.shape),
                         global_size=(5, 4), tensor=box)
        records += writer.layout([item], rank)
        writer.write_data([box.numpy()], rank)
    writer.write_metadata(records, {})
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("shard-")) == [
        "shard-00000-model-00001-of-00001.safetensors",
        "shard-00001-model-00001-of-00001.safetensors"]
    target = {"w": torcia.zeros(5, 4)}
    dcp.load(target, storage_reader=HuggingFaceStorageReader(tmp_path))
    np.testing.assert_array_equal(target["w"].numpy(), whole.numpy())


def test_only_tensors_and_a_hugging_face_folder(tmp_path):
    with pytest.raises(ValueError, match="stores tensors only.*step"):
        dcp.save({"w": torcia.ones(1), "step": 3},
                 storage_writer=HuggingFaceStorageWriter(tmp_path / "a"))
    # a model folder written by anything else (two files, as a split model is)
    folder = tmp_path / "hf"
    folder.mkdir()
    safetensors.save_file({"a": torcia.ones(2)}, folder / "model-00001-of-00002.safetensors")
    safetensors.save_file({"b": torcia.full((3,), 2.0)},
                          folder / "model-00002-of-00002.safetensors")
    target = {"a": torcia.zeros(2), "b": torcia.zeros(3)}
    dcp.load(target, storage_reader=HuggingFaceStorageReader(folder))
    assert target["a"].tolist() == [1.0, 1.0] and target["b"].tolist() == [2.0] * 3
    with pytest.raises(FileNotFoundError, match="no safetensors file"):
        HuggingFaceStorageReader(tmp_path / "a").read_metadata()
