"""torcia.utils.tensorboard: every kind of summary written by SummaryWriter and read back
with TensorBoard's own reader (EventAccumulator), the images decoded back to their pixels,
histograms checked by hand and, where torch is installed, every summary proto compared
with the one torch.utils.tensorboard builds from the same data."""

import importlib.util
import io
import os

import numpy as np
import pytest

import torcia

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)

from torcia.utils.tensorboard import SummaryWriter  # noqa: E402
from torcia.utils.tensorboard import summary as S  # noqa: E402

RNG = np.random.default_rng(31)


def _read(logdir):
    return EventAccumulator(str(logdir), size_guidance={"tensors": 0, "images": 0,
                                                        "histograms": 0}).Reload()


def test_scalars_histograms_text_read_back(tmp_path):
    values = RNG.standard_normal(500)
    with SummaryWriter(tmp_path) as w:
        for step in range(5):
            w.add_scalar("loss", torcia.tensor(1.0 / (step + 1)), step)
        w.add_scalar("acc", 0.25, 7, new_style=True)
        w.add_histogram("w", torcia.from_numpy(values), 3)
        w.add_histogram("w_np", values, 4, bins="auto")
        w.add_histogram_raw("raw", 0.0, 2.0, 3, 3.0, 5.0, [1.0, 2.0], [1, 2], 0)
        w.add_text("note", "hello *markdown*", 2)
        w.add_tensor("t", torcia.arange(6).reshape(2, 3), 1)
    acc = _read(tmp_path)
    assert [(e.step, round(e.value, 6)) for e in acc.Scalars("loss")] == [
        (0, 1.0), (1, 0.5), (2, 0.333333), (3, 0.25), (4, 0.2)]
    hist = acc.Histograms("w")[0].histogram_value
    assert hist.num == 500 and hist.min == values.min() and hist.max == values.max()
    assert hist.sum == pytest.approx(values.sum()) and sum(hist.bucket) == 500
    assert acc.Histograms("raw")[0].histogram_value.bucket == [1.0, 2.0]
    text = acc.Tensors("note/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text == "hello *markdown*"
    new_style = acc.Tensors("acc")[0]
    assert new_style.step == 7 and new_style.tensor_proto.float_val[0] == 0.25
    assert list(acc.Tensors("t")[0].tensor_proto.int64_val) == [0, 1, 2, 3, 4, 5]


def test_histogram_buckets_by_hand():
    # values 0.5, 1.5, 1.5 in bins [0, 1, 2, 3]: counts 1, 2, 0 -> trimmed to the
    # nonempty range with one leading empty bucket
    proto = S.make_histogram(np.array([0.5, 1.5, 1.5]), [0.0, 1.0, 2.0, 3.0])
    assert list(proto.bucket) == [0.0, 1.0, 2.0] and list(proto.bucket_limit) == [0.0, 1.0, 2.0]
    assert proto.sum_squares == pytest.approx(0.25 + 2.25 * 2)
    with pytest.raises(ValueError, match="no element"):
        S.make_histogram(np.array([]), 3)


def test_images_decode_to_their_pixels(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    chw = RNG.random((3, 5, 7)).astype(np.float32)
    batch = RNG.integers(0, 256, (4, 1, 3, 2), dtype=np.uint8)
    with SummaryWriter(tmp_path) as w:
        w.add_image("one", torcia.from_numpy(chw), 0)
        w.add_image("hw", chw[0], 0, dataformats="HW")
        w.add_images("batch", batch, 1)
        w.add_image_with_boxes("boxes", np.zeros((3, 10, 10), np.float32),
                               torcia.tensor([[1.0, 1.0, 6.0, 8.0]]), 0)
    acc = _read(tmp_path)

    def pixels(tag):
        event = acc.Images(tag)[0]
        return np.asarray(PIL.open(io.BytesIO(event.encoded_image_string))), event

    one, event = pixels("one")
    assert (event.width, event.height) == (7, 5)
    np.testing.assert_array_equal(one, (chw.transpose(1, 2, 0) * 255).astype(np.uint8))
    hw, _ = pixels("hw")
    np.testing.assert_array_equal(hw[..., 0], (chw[0] * 255).astype(np.uint8))
    tiled, _ = pixels("batch")
    # four 3x2 gray images side by side, as RGB
    assert tiled.shape == (3, 8, 3)
    np.testing.assert_array_equal(tiled[:, 2:4, 1], batch[1, 0])
    boxed, _ = pixels("boxes")
    assert tuple(boxed[1, 3]) == (255, 0, 0) and tuple(boxed[4, 4]) == (0, 0, 0)


def test_audio_hparams_pr_curve_embedding_layout(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_audio("sound", torcia.sin(torcia.linspace(0, 100, 800)), 0, sample_rate=8000)
        w.add_hparams({"lr": 0.1, "opt": "sgd", "bn": True, "skip": None}, {"hp/acc": 0.9},
                      run_name="trial")
        w.add_pr_curve("pr", np.array([1, 0, 1, 1]), np.array([0.9, 0.2, 0.6, 0.3]), 0)
        w.add_custom_scalars_multilinechart(["loss", "acc"], title="both")
        mat = RNG.standard_normal((6, 3))
        w.add_embedding(mat, metadata=list("abcdef"), label_img=torcia.rand(6, 3, 4, 4),
                        tag="points")
        w.add_mesh("mesh", torcia.rand(1, 4, 3), faces=torcia.tensor([[[0, 1, 2]]]))
    acc = _read(tmp_path)
    sound = acc.Audio("sound")[0]
    assert sound.sample_rate == 8000 and sound.length_frames == 800
    assert sound.content_type == "audio/wav"
    trial = _read(tmp_path / "trial")
    assert trial.Scalars("hp/acc")[0].value == pytest.approx(0.9)
    plugins = trial.PluginTagToContent("hparams")
    assert set(plugins) == {"_hparams_/experiment", "_hparams_/session_start_info",
                            "_hparams_/session_end_info"}
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    start = HParamsPluginData.FromString(plugins["_hparams_/session_start_info"])
    hp = start.session_start_info.hparams
    assert hp["lr"].number_value == 0.1 and hp["opt"].string_value == "sgd"
    # a bool is logged as a number, as PyTorch logs it
    assert hp["bn"].number_value == 1.0 and "skip" not in hp
    assert acc.Tensors("pr")[0].tensor_proto.tensor_shape.dim[0].size == 6
    assert "custom_scalars__config__" in acc.Tags()["tensors"]
    folder = tmp_path / "00000" / "points"
    assert (folder / "metadata.tsv").read_text().split() == list("abcdef")
    assert np.loadtxt(folder / "tensors.tsv").shape == (6, 3)
    assert (folder / "sprite.png").read_bytes()[:4] == b"\x89PNG"
    assert 'tensor_path: "00000/points/tensors.tsv"' in (
        tmp_path / "projector_config.pbtxt").read_text()


@pytest.mark.skipif(importlib.util.find_spec("torcia.nn") is None, reason="needs torcia-nn")
def test_graph_of_a_model(tmp_path):
    model = torcia.nn.Sequential(torcia.nn.Linear(4, 3), torcia.nn.ReLU(),
                                 torcia.nn.Linear(3, 2))
    with SummaryWriter(tmp_path) as w:
        w.add_graph(model, torcia.randn(5, 4))
    graph = _read(tmp_path).Graph()
    names = {n.name: n for n in graph.node}
    assert {"0.weight", "0.bias", "2.weight", "2.bias", "input/0", "output/0"} <= set(names)
    ops = {n.op for n in graph.node}
    assert any("Relu" in op for op in ops) and any("Addmm" in op or "Linear" in op or
                                                   "Mm" in op for op in ops)
    out = names["output/0"]
    assert out.attr["_output_shapes"].list.shape[0].dim[1].size == 2


def test_purge_step_and_default_logdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_x", purge_step=3)
    assert w.get_logdir().startswith("runs") and w.get_logdir().endswith("_x")
    w.close()
    assert os.listdir(w.get_logdir())


@pytest.mark.torch
def test_summaries_equal_torchs(tmp_path):
    pytest.importorskip("torch")
    import torch.utils.tensorboard.summary as TS

    values = RNG.standard_normal(300)
    w = SummaryWriter(tmp_path)
    bins = w.default_bins
    w.close()
    pairs = [
        (S.scalar("s", 2.5), TS.scalar("s", 2.5)),
        (S.scalar("s", 2.5, new_style=True, double_precision=True),
         TS.scalar("s", 2.5, new_style=True, double_precision=True)),
        (S.histogram("h", values, bins), TS.histogram("h", values, bins)),
        (S.histogram("h", values, 50, max_bins=7), TS.histogram("h", values, 50, max_bins=7)),
        (S.text("t", "abc"), TS.text("t", "abc")),
        (S.tensor_proto("x", np.arange(6.0, dtype=np.float32).reshape(2, 3)),
         TS.tensor_proto("x", __import__("torch").arange(6.0).reshape(2, 3))),
        (S.pr_curve("p", np.array([1, 0, 1]), np.array([0.8, 0.4, 0.1])),
         TS.pr_curve("p", np.array([1, 0, 1]), np.array([0.8, 0.4, 0.1]))),
        (S.custom_scalars({"c": {"m": ["Margin", ["a", "b", "c"]], "l": ["Multiline", ["x"]]}}),
         TS.custom_scalars({"c": {"m": ["Margin", ["a", "b", "c"]],
                                  "l": ["Multiline", ["x"]]}})),
    ]
    for ours, theirs in pairs:
        assert ours == theirs
    hp = {"lr": 0.1, "name": "x", "flag": False, "layers": 3}
    domains = {"layers": [1, 3, 5]}
    for ours, theirs in zip(S.hparams(hp, {"m": 1.0}, domains),
                            TS.hparams(hp, {"m": 1.0}, domains)):
        assert ours == theirs
