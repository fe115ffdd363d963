"""Quantized models exported as QDQ graphs (QuantizeLinear / DequantizeLinear around the
float ops, int8 weights and int32 biases stored as such), run by onnxruntime and compared
with torcia's own int8 output: ResNet-18 after static post-training quantization, a
quantized MLP, and a dynamically quantized one."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import torcia
from torcia import nn

ort = pytest.importorskip("onnxruntime")
tq = pytest.importorskip("torcia.ao.quantization")
onnx = pytest.importorskip("onnx")

RNG = np.random.default_rng(0)


class _Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1, self.relu1 = nn.BatchNorm2d(cout), nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.add = torcia.ao.nn.quantized.FloatFunctional()

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        return self.add.add_relu(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))),
                                 identity)


class _ResNet18(nn.Module):
    """ResNet-18 as eager quantization needs it: stubs and FloatFunctional additions."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1, self.relu = nn.BatchNorm2d(64), nn.ReLU()
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.layers = nn.Sequential(*[nn.Sequential(_Block(a, b, s), _Block(b, b, 1))
                                      for a, b, s in [(64, 64, 1), (64, 128, 2),
                                                      (128, 256, 2), (256, 512, 2)]])
        self.avg, self.flat, self.fc = nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(self.quant(x)))))
        return self.dequant(self.fc(self.flat(self.avg(self.layers(x)))))

    def fuse_groups(self):
        groups = [["conv1", "bn1", "relu"]]
        for i, stage in enumerate(self.layers):
            for j, block in enumerate(stage):
                p = f"layers.{i}.{j}"
                groups += [[f"{p}.conv1", f"{p}.bn1", f"{p}.relu1"], [f"{p}.conv2", f"{p}.bn2"]]
                if block.down is not None:
                    groups.append([f"{p}.down.0", f"{p}.down.1"])
        return groups


def _run_onnx(model, x, path):
    torcia.onnx.export(model, (x,), str(path), input_names=["x"])
    session = ort.InferenceSession(str(path))
    return session.run(None, {"x": x.numpy()})[0], onnx.load(str(path))


def test_ptq_resnet18_runs_in_onnxruntime_as_qdq(tmp_path):
    torcia.manual_seed(0)
    model = _ResNet18()
    model.train()
    with torcia.no_grad():  # BatchNorm statistics away from 0/1, as after training
        for _ in range(2):
            model(torcia.randn(8, 3, 32, 32))
    model.eval()
    q = tq.fuse_modules(copy.deepcopy(model), model.fuse_groups())
    q.qconfig = tq.get_default_qconfig("x86")
    q = tq.prepare(q)
    with torcia.no_grad():
        for _ in range(4):
            q(torcia.from_numpy(RNG.standard_normal((8, 3, 32, 32)).astype(np.float32)))
    q = tq.convert(q)
    x = torcia.from_numpy(RNG.standard_normal((2, 3, 32, 32)).astype(np.float32))
    with torcia.no_grad():
        want = q(x).numpy()
    got, graph = _run_onnx(q, x, tmp_path / "resnet18_int8.onnx")
    kinds = {n.op_type for n in graph.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv", "Gemm"} <= kinds
    weights = [i for i in graph.graph.initializer if i.name.startswith("weight_int8")]
    assert len(weights) == 21 and all(w.data_type == onnx.TensorProto.INT8 for w in weights)
    # the same integers but where onnxruntime rounds a tie the other way, which may carry
    # through a few layers: within a few steps of the output's quantization
    assert np.abs(got - want).max() <= 3 * q.fc.scale + 1e-6


def test_quantized_mlp_and_dynamic_linear(tmp_path):
    torcia.manual_seed(0)
    float_model = nn.Sequential(tq.QuantStub(), nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4),
                                tq.DeQuantStub()).eval()
    fused = tq.fuse_modules(float_model, [["1", "2"]])
    fused.qconfig = tq.default_qconfig
    prepared = tq.prepare(fused)
    with torcia.no_grad():
        for _ in range(4):
            prepared(torcia.randn(32, 16))
    q = tq.convert(prepared)
    x = torcia.randn(5, 16).clamp(-2, 2)
    with torcia.no_grad():
        want = q(x).numpy()
    got, _ = _run_onnx(q, x, tmp_path / "mlp.onnx")
    assert np.abs(got - want).max() <= 2 * q[3].scale + 1e-6
    dynamic = tq.quantize_dynamic(nn.Sequential(nn.Linear(16, 8)).eval(), {nn.Linear})
    with torcia.no_grad():
        float_out = nn.functional.linear(x, dynamic[0].weight().dequantize(), dynamic[0].bias())
    got, graph = _run_onnx(dynamic, x, tmp_path / "dynamic.onnx")
    # int8 weights in the file, dequantized before a float MatMul; onnxruntime fuses the
    # two into its own dynamic quantization (activations on the full 8 bits, torcia's on
    # 7): each within quantization's error of the int8 weights' float product
    mine = dynamic(x).numpy()
    bound = np.abs(mine - float_out.numpy()).max()
    assert np.abs(got - float_out.numpy()).max() <= 2 * bound + 1e-5
    assert any(i.data_type == onnx.TensorProto.INT8 for i in graph.graph.initializer)
