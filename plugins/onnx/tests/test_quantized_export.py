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


def _ptq(layers, shape, qconfig):
    """``layers`` between stubs, calibrated on generated batches and converted."""
    model = nn.Sequential(tq.QuantStub(), *layers, tq.DeQuantStub()).eval()
    model.qconfig = qconfig
    prepared = tq.prepare(model)
    with torcia.no_grad():
        for _ in range(3):
            prepared(torcia.from_numpy(RNG.standard_normal(shape).astype(np.float32)))
    return tq.convert(prepared)


def _export_and_compare(q, shape, tmp_path, name):
    """torcia's and onnxruntime's outputs of ``q`` on a generated input, and the graph."""
    x = torcia.from_numpy(RNG.standard_normal(shape).astype(np.float32))
    with torcia.no_grad():
        want = q(x).numpy()
    got, graph = _run_onnx(q, x, tmp_path / f"{name}.onnx")
    assert got.shape == want.shape
    return got, want, graph


def _conv_cases():
    """N-d convolutions with generated strides, paddings, dilations, groups and biases;
    transposed ones with an output padding below the stride (one ConvTranspose node) and
    below the dilation only (which onnxruntime's ConvTranspose refuses)."""
    gen = np.random.default_rng(1)

    def drawn(**fixed):
        kwargs = {"stride": int(gen.integers(1, 3)), "padding": int(gen.integers(0, 2)),
                  "dilation": int(gen.integers(1, 3)), "groups": int(gen.choice([1, 2])),
                  "bias": bool(gen.integers(0, 2))}
        return {**kwargs, **fixed}

    cases = [(nd, False, drawn()) for nd in (1, 2, 3)]
    for nd in (1, 2, 3):
        for stride, dilation in ((2, 1), (1, 2)):
            paddings = (0, 1) if nd == 2 else (int(gen.integers(0, 2)),)
            cases += [(nd, True, drawn(stride=stride, dilation=dilation, padding=padding,
                                       output_padding=1)) for padding in paddings]
    return cases


@pytest.mark.parametrize("nd,transposed,kwargs", _conv_cases())
def test_quantized_conv_nd_and_transposed_run_in_onnxruntime(tmp_path, nd, transposed,
                                                              kwargs):
    torcia.manual_seed(nd)
    cls = getattr(nn, f"Conv{'Transpose' if transposed else ''}{nd}d")
    layer = cls(4, 6, 3, **kwargs)
    # PyTorch's per-channel observers refuse transposed convolutions: one scale there
    qconfig = tq.default_qconfig if transposed else tq.get_default_qconfig("x86")
    shape = (2, 4) + (5, 6, 4)[:nd]
    q = _ptq([layer], shape, qconfig)
    assert type(q[1]).__module__.startswith("torcia.ao.nn.quantized")
    got, want, graph = _export_and_compare(q, shape, tmp_path, f"conv{nd}{transposed}")
    kinds = [n.op_type for n in graph.graph.node]
    assert ("ConvTranspose" if transposed else "Conv") in kinds
    assert {"QuantizeLinear", "DequantizeLinear"} <= set(kinds)
    weights = [i for i in graph.graph.initializer if i.name.startswith("weight_int8")]
    assert [w.data_type for w in weights] == [onnx.TensorProto.INT8]
    # (a 1-d convolution runs as a 2-d one of height 1: its weight gains that axis)
    assert np.prod(weights[0].dims) == q[1].weight_int8.numel()
    biases = [i for i in graph.graph.initializer if i.name.startswith("bias_int32")]
    assert len(biases) == int(kwargs["bias"])
    # integer products summed in float by onnxruntime, exactly by torcia: a tie may round
    # the other way, one quantization step of the output
    assert np.abs(got - want).max() <= q[1].scale * 1.001


@pytest.mark.filterwarnings("ignore:PReLU's weight observer")  # PyTorch's warning too
@pytest.mark.parametrize("name,layers,shape", [
    ("layer_norm", lambda: [nn.LayerNorm(6)], (3, 5, 6)),
    ("group_norm", lambda: [nn.GroupNorm(2, 4)], (2, 4, 5)),
    ("instance_norm1d", lambda: [nn.InstanceNorm1d(4, affine=True)], (2, 4, 7)),
    ("instance_norm2d", lambda: [nn.InstanceNorm2d(4)], (2, 4, 3, 5)),
    ("instance_norm3d", lambda: [nn.InstanceNorm3d(3, affine=True)], (1, 3, 2, 3, 4)),
    ("batch_norm3d", lambda: [nn.BatchNorm3d(4)], (2, 4, 2, 3, 3)),
    ("prelu", lambda: [nn.PReLU(4)], (2, 4, 5)),
])
def test_quantized_norms_and_prelu_run_in_onnxruntime(tmp_path, name, layers, shape):
    torcia.manual_seed(0)
    layers = layers()
    for layer in layers:  # affine parameters away from 1 and 0
        for p in layer.parameters():
            p.data = torcia.from_numpy(RNG.uniform(0.5, 1.5, tuple(p.shape)).astype(np.float32))
    q = _ptq(layers, shape, tq.get_default_qconfig("x86"))
    assert type(q[1]).__module__.startswith("torcia.ao.nn.quantized")
    got, want, graph = _export_and_compare(q, shape, tmp_path, name)
    kinds = [n.op_type for n in graph.graph.node]
    assert kinds.count("QuantizeLinear") == 2 and "DequantizeLinear" in kinds
    # the float op between a DequantizeLinear and a QuantizeLinear: one step at most
    assert np.abs(got - want).max() <= float(q[1].scale) * 1.001


def test_quantized_softmax_runs_in_onnxruntime(tmp_path):
    qnn = torcia.ao.nn.quantized
    q = nn.Sequential(qnn.Quantize(0.05, 128, torcia.quint8),
                      qnn.Softmax(dim=1, scale=1 / 256, zero_point=0), qnn.DeQuantize())
    got, want, _ = _export_and_compare(q, (2, 4, 5), tmp_path, "softmax")
    assert np.abs(got - want).max() <= 1 / 256 * 1.001


def _quantized_table(cls, **kwargs):
    torcia.manual_seed(0)
    layer = cls(12, 5, **kwargs)
    layer.qconfig = tq.float_qparams_weight_only_qconfig
    return getattr(torcia.ao.nn.quantized, cls.__name__).from_float(layer)


def _run_named(model, inputs, path):
    names = list(inputs)
    torcia.onnx.export(model, tuple(inputs.values()), str(path), input_names=names)
    feeds = {n: t.numpy() for n, t in inputs.items()}
    return ort.InferenceSession(str(path)).run(None, feeds)[0], onnx.load(str(path))


def test_quantized_embedding_runs_in_onnxruntime(tmp_path):
    q = _quantized_table(nn.Embedding)
    indices = torcia.from_numpy(RNG.integers(0, 12, (3, 4)))
    got, graph = _run_named(q, {"indices": indices}, tmp_path / "embedding.onnx")
    # the same float32 arithmetic on the same uint8 rows
    np.testing.assert_array_equal(got, q(indices).numpy())
    tables = [i for i in graph.graph.initializer if i.data_type == onnx.TensorProto.UINT8]
    assert [list(t.dims) for t in tables] == [[12, 5]]


class _Bag2d(nn.Module):
    def __init__(self, bag):
        super().__init__()
        self.bag = bag

    def forward(self, indices):
        return self.bag(indices)


@pytest.mark.parametrize("include_last_offset", [False, True])
def test_quantized_embedding_bag_runs_in_onnxruntime(tmp_path, include_last_offset):
    q = _quantized_table(nn.EmbeddingBag, mode="sum", include_last_offset=include_last_offset)
    indices = torcia.from_numpy(RNG.integers(0, 12, 9))
    # generated bag boundaries, an empty bag among them
    starts = np.sort(RNG.integers(0, 10, 4))
    starts[0], starts[2] = 0, starts[1]
    offsets = torcia.from_numpy(starts.astype(np.int64))
    weights = torcia.from_numpy(RNG.uniform(0.5, 2, 9).astype(np.float32))
    cases = [({"indices": indices, "offsets": offsets}, q),
             ({"indices": indices, "offsets": offsets, "per_sample_weights": weights}, q),
             ({"indices": torcia.from_numpy(RNG.integers(0, 12, (3, 4)))}, _Bag2d(q))]
    for i, (inputs, model) in enumerate(cases):
        got, _ = _run_named(model, inputs, tmp_path / f"bag{i}.onnx")
        want = model(*inputs.values()).numpy()
        assert got.shape == want.shape
        # the bags' sums in another order: float32 rounding apart
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("in_features,group_size", [(64, 32), (40, 16)])
def test_int4_weight_only_linear_runs_in_onnxruntime(tmp_path, in_features, group_size):
    # K a multiple of the group size or not (the last group, and the last byte, partial)
    torcia.manual_seed(0)
    model = nn.Sequential(nn.Linear(in_features, 24), nn.ReLU(), nn.Linear(24, 5,
                                                                           bias=False))
    tq.quantize_(model, tq.Int4WeightOnlyConfig(group_size=group_size))
    x = torcia.from_numpy(RNG.standard_normal((3, 7, in_features)).astype(np.float32))
    with torcia.no_grad():
        want = model(x).numpy()
    got, graph = _run_onnx(model, x, tmp_path / "int4.onnx")
    # the same float32 weights, products summed in another order
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    packed = [i for i in graph.graph.initializer if i.name.endswith("weight_packed")]
    assert [list(i.dims) for i in packed] == [[24, (in_features + 1) // 2], [5, 12]]
    assert all(i.data_type == onnx.TensorProto.UINT8 for i in packed)


def test_qat_model_exports_its_fake_quantization_as_qdq_pairs(tmp_path):
    torcia.manual_seed(0)
    model = nn.Sequential(tq.QuantStub(), nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 6 * 6, 5), tq.DeQuantStub()).train()
    model = tq.fuse_modules_qat(model, [["1", "2", "3"]])
    model.qconfig = tq.get_default_qat_qconfig("x86")  # weights per channel, 7-bit input
    prepared = tq.prepare_qat(model)
    for _ in range(3):
        prepared(torcia.from_numpy(RNG.standard_normal((4, 3, 8, 8)).astype(np.float32)))
    prepared.eval()
    x = torcia.from_numpy(RNG.standard_normal((2, 3, 8, 8)).astype(np.float32))
    step = float(prepared[5].activation_post_process.scale.max())
    # observers still enabled: the graph holds the scales as the trace's forward left
    # them, after observing the example input, as torcia's next call (a copy's) uses them
    with torcia.no_grad():
        want = copy.deepcopy(prepared)(x).numpy()
    got, _ = _run_onnx(prepared, x, tmp_path / "qat_observing.onnx")
    assert np.abs(got - want).max() <= 2 * step
    prepared.apply(tq.disable_observer)
    with torcia.no_grad():
        want = prepared(x).numpy()
    got, graph = _run_onnx(prepared, x, tmp_path / "qat.onnx")
    kinds = [n.op_type for n in graph.graph.node]
    # input, conv weight, conv output, linear weight, linear output
    assert kinds.count("QuantizeLinear") == 5 == kinds.count("DequantizeLinear")
    per_channel = [n for n in graph.graph.node if n.op_type == "QuantizeLinear" and
                   any(a.name == "axis" for a in n.attribute)]
    assert len(per_channel) == 2
    # a tie rounded the other way carries through a layer: a step or two of the output's
    assert np.abs(got - want).max() <= 2 * step
