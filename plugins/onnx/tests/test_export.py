"""Exported models pass onnx.checker (export runs it) and agree with torcia in
onnxruntime, dynamic batch included."""

import numpy as np
import pytest

import torcia
from torcia import nn

ort = pytest.importorskip("onnxruntime")


def _run(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check(model, example, path, other=None, dynamic=True, atol=1e-5):
    names = [f"in{i}" for i in range(len(example))]
    axes = {n: {0: "batch"} for n in names} if dynamic else None
    if dynamic:
        axes["out0"] = {0: "batch"}
    torcia.onnx.export(model, example, path, input_names=names, output_names=["out0"],
                       dynamic_axes=axes)
    for inputs in [example] + ([other] if other is not None else []):
        expected = model.eval()(*inputs)
        expected = expected[0] if isinstance(expected, tuple) else expected
        got = _run(path, {n: t.numpy() for n, t in zip(names, inputs)})[0]
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-4, atol=atol)


def test_mlp_and_cnn_with_a_dynamic_batch(tmp_path):
    torcia.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 3),
                        nn.Softmax(dim=1))
    _check(mlp, (torcia.randn(2, 6),), tmp_path / "mlp.onnx", (torcia.randn(7, 6),))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                        nn.ReLU6(), nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.SiLU(),
                        nn.MaxPool2d(2), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.LayerNorm(8), nn.Linear(8, 4))
    cnn.eval()
    _check(cnn, (torcia.randn(2, 3, 16, 16),), tmp_path / "cnn.onnx",
           (torcia.randn(5, 3, 16, 16),))


def test_residual_in_place_add_is_traced(tmp_path):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1)

        def forward(self, x):
            out = self.conv(x)
            out += x
            return torcia.relu(out)

    _check(Block(), (torcia.randn(1, 2, 5, 5),), tmp_path / "res.onnx",
           (torcia.randn(3, 2, 5, 5),))


def test_add_and_sub_with_alpha_scale_the_other_operand(tmp_path):
    class Scaled(nn.Module):
        def forward(self, x, y):
            return torcia.sub(torcia.add(x, y, alpha=0.5), x, alpha=2) + y.add(x, alpha=3)

    _check(Scaled(), (torcia.randn(2, 3), torcia.randn(2, 3)), tmp_path / "alpha.onnx",
           (torcia.randn(4, 3), torcia.randn(4, 3)))


def test_addmm_and_baddbmm_with_alpha_and_beta(tmp_path):
    class Scaled(nn.Module):
        def forward(self, c, a, b):
            # baddbmm is addmm over batches, which ONNX's Gemm does not take
            return (torcia.baddbmm(c, a, b, beta=0.5, alpha=2.0) + torcia.baddbmm(c, a, b)
                    + torcia.baddbmm(c, a, b, beta=0) + torcia.addmm(c[0], a[0], b[0], beta=3))

    _check(Scaled(), (torcia.randn(2, 3, 4), torcia.randn(2, 3, 5), torcia.randn(2, 5, 4)),
           tmp_path / "baddbmm.onnx", dynamic=False)


def test_embedding_lstm_and_attention(tmp_path):
    torcia.manual_seed(1)

    class Text(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(20, 8)
            self.lstm = nn.LSTM(8, 8, batch_first=True, bidirectional=True)
            self.attn = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
            self.head = nn.Linear(16, 3)

        def forward(self, ids):
            x, _ = self.lstm(self.embed(ids))
            return self.head(self.attn(x)[:, -1])

    ids = torcia.randint(0, 20, (2, 6))
    _check(Text(), (ids,), tmp_path / "text.onnx", dynamic=False, atol=1e-4)


@pytest.mark.parametrize("masks", ["none", "causal", "padding", "bool", "float"])
def test_attention_without_weights_exports_its_fused_op(tmp_path, masks):
    """MultiheadAttention(need_weights=False) runs one flash_attention op: its ONNX graph is
    the attention's math, with each kind of mask, and zeros for a sample all padding."""
    torcia.manual_seed(2)
    causal = torcia.ones(5, 5, dtype=torcia.bool).triu(1)
    padding = torcia.tensor([[False] * 5, [False] * 3 + [True] * 2, [True] * 5])
    kw = {"none": {}, "causal": {"attn_mask": causal, "is_causal": True},
          "padding": {"key_padding_mask": padding}, "bool": {"attn_mask": causal},
          "float": {"attn_mask": torcia.randn(5, 5)}}[masks]

    class Attend(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False, **kw)[0]

    _check(Attend(), (torcia.randn(3, 5, 8),), tmp_path / "attend.onnx", dynamic=False,
           atol=1e-5)


def test_vision_models(tmp_path):
    models = pytest.importorskip("torcia.vision.models")
    for name in ("resnet18", "mobilenet_v2"):
        model = models.get_model(name, num_classes=5)
        _check(model, (torcia.randn(1, 3, 32, 32),), tmp_path / f"{name}.onnx",
               (torcia.randn(2, 3, 32, 32),), atol=1e-4)


def test_unsupported_op_names_the_op_and_the_module(tmp_path):
    class Odd(nn.Module):
        def forward(self, x):
            return x.sort(1).values

    model = nn.Sequential(nn.Linear(3, 3), Odd())
    with pytest.raises(torcia.onnx.UnsupportedOperatorError,
                       match=r"op 'sort' \(used in module '1'\)"):
        torcia.onnx.export(model, (torcia.randn(2, 3),), tmp_path / "odd.onnx")


def test_registered_as_the_onnx_exporter(tmp_path):
    assert "onnx" in torcia.nn.exporters.names()
    torcia.nn.export(nn.Linear(2, 2), (torcia.randn(1, 2),), tmp_path / "l.onnx",
                     format="onnx")
    assert (tmp_path / "l.onnx").stat().st_size > 0


def test_padding_cumulative_and_topk_ops(tmp_path):
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3)

        def forward(self, x):
            y = self.conv(nn.functional.pad(x, (1, 1, 2, 0), mode="reflect"))
            y = nn.functional.pad(y, (1, 0), value=0.5).flatten(1).cumsum(1)
            top = y.topk(3, dim=1).values
            return torcia.lerp(top.log1p().abs(), top.expm1().tanh(), 0.25).round()

    _check(Mixed(), (torcia.randn(2, 2, 5, 5),), tmp_path / "mixed.onnx",
           (torcia.randn(3, 2, 5, 5),), atol=1e-4)


def test_export_traces_only_its_own_thread(tmp_path):
    # the exporter is a dispatch mode of the exporting thread: a model running meanwhile in
    # another thread (ops the exporter does not support, modules of its own) is untouched
    import threading

    stop = threading.Event()
    errors = []

    def busy():
        other = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        try:
            while not stop.is_set():
                torcia.linalg.det(torcia.eye(3))  # not exportable: would fail a trace
                other(torcia.randn(2, 4)).sum()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        torcia.manual_seed(0)
        mlp = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
        for _ in range(3):
            _check(mlp, (torcia.randn(2, 6),), tmp_path / "mlp.onnx", (torcia.randn(5, 6),))
    finally:
        stop.set()
        thread.join()
    assert errors == []


def test_transposed_convolution_with_output_padding_below_the_dilation(tmp_path):
    # onnxruntime's ConvTranspose refuses an output padding not below the stride
    torcia.manual_seed(0)
    for kwargs in ({"stride": 1, "dilation": 2, "padding": 1, "output_padding": 1},
                   {"stride": 2, "dilation": 3, "padding": 2, "output_padding": 2},
                   {"stride": 2, "dilation": 1, "padding": 1, "output_padding": 1}):
        model = nn.ConvTranspose2d(4, 6, 3, groups=2, **kwargs)
        _check(model, (torcia.randn(2, 4, 5, 6),), tmp_path / "convt.onnx",
               (torcia.randn(3, 4, 5, 6),))


def test_batch_statistics_normalizations(tmp_path):
    # instance norm and BatchNorm without running statistics normalize by the input's
    # own statistics in eval mode too
    torcia.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True),
                          nn.BatchNorm2d(4, track_running_stats=False),
                          nn.InstanceNorm2d(4))
    for p in model.parameters():
        p.data = torcia.rand(*p.shape) + 0.5
    # fixed shapes: instance norm reshapes (N, C, ...) to (1, N * C, ...) as traced
    _check(model, (torcia.randn(2, 3, 6, 7),), tmp_path / "norms.onnx", dynamic=False)
    batch_norm = nn.BatchNorm1d(5, track_running_stats=False)
    _check(batch_norm, (torcia.randn(3, 5, 4),), tmp_path / "bn.onnx",
           (torcia.randn(6, 5, 4),))


def test_batch_norm_updating_running_statistics_is_refused(tmp_path):
    class Forced(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torcia.zeros(3))
            self.register_buffer("var", torcia.ones(3))

        def forward(self, x):
            return nn.functional.batch_norm(x, self.mean, self.var, training=True)

    with pytest.raises(torcia.onnx.UnsupportedOperatorError, match="running statistics"):
        torcia.onnx.export(Forced(), (torcia.randn(4, 3),), str(tmp_path / "bn.onnx"))
