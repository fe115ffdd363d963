"""The fused quantized modules only PyTorch's oneDNN engine runs (LinearLeakyReLU,
LinearTanh, ConvAdd2d, ConvAddReLU2d): exact integers against torch's, the engine switch
and its errors, conversion from the fused float modules."""

from __future__ import annotations

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.ao import quantization as tq
from torcia.ao.nn import intrinsic as nni
from torcia.ao.nn.intrinsic import quantized as nniq


@pytest.fixture
def onednn():
    saved = torcia.backends.quantized.engine
    torcia.backends.quantized.engine = "onednn"
    yield
    torcia.backends.quantized.engine = saved


def _q(a, scale, zero_point):
    return torcia.quantize_per_tensor(torcia.from_numpy(a), scale, zero_point, torcia.quint8)


def _set(m, w, b, scale, zero_point):
    n = w.shape[0]
    m.weight_int8 = torcia.from_numpy(w)
    m.weight_scales = torcia.full((n,), 0.02)
    m.bias_ = torcia.from_numpy(b)
    m.scale, m.zero_point = scale, zero_point


@pytest.fixture
def torch_onednn():
    torch = pytest.importorskip("torch")
    saved = torch.backends.quantized.engine
    torch.backends.quantized.engine = "onednn"
    yield torch
    torch.backends.quantized.engine = saved


def _same_as_torch(torch, ours, theirs, w, b, out, inputs):
    """Give both modules int8 weights ``w`` (scale 0.02 per channel), bias ``b`` and output
    parameters ``out``; assert their integers agree on ``inputs`` ((array, scale, zp)...)."""
    n = w.shape[0]
    theirs.set_weight_bias(torch._make_per_channel_quantized_tensor(
        torch.from_numpy(w), torch.full((n,), 0.02, dtype=torch.float64),
        torch.zeros(n, dtype=torch.int64), 0), torch.from_numpy(b))
    theirs.scale, theirs.zero_point = out
    _set(ours, w, b, *out)
    want = theirs(*(torch.quantize_per_tensor(torch.from_numpy(a), s, z, torch.quint8)
                    for a, s, z in inputs))
    got = ours(*(_q(a, s, z) for a, s, z in inputs))
    np.testing.assert_array_equal(got.int_repr().numpy(), want.int_repr().numpy())


def test_engine_setting_checks_like_torchs():
    q = torcia.backends.quantized
    assert q.engine == "x86" and q.supported_engines == ["qnnpack", "onednn", "x86", "fbgemm"]
    with pytest.raises(RuntimeError, match="foo is not a valid value for quantized engine"):
        q.engine = "foo"
    with pytest.raises(RuntimeError, match="quantized engine NoQEngine is not supported"):
        q.engine = "none"
    assert q.engine == "x86"


@pytest.mark.parametrize("engine", ["x86", "fbgemm", "qnnpack"])
def test_other_engines_refuse_with_torchs_message(engine):
    saved = torcia.backends.quantized.engine
    torcia.backends.quantized.engine = engine
    try:
        x2 = _q(np.ones((2, 3), np.float32), 0.05, 64)
        x4 = _q(np.ones((1, 2, 5, 5), np.float32), 0.05, 64)
        e = _q(np.ones((1, 2, 3, 3), np.float32), 0.05, 64)
        tag = engine.upper()
        for m, args, op in [(nniq.LinearTanh(3, 4), (x2,), f"linear_tanh {tag}"),
                            (nniq.LinearLeakyReLU(3, 4, 0.1), (x2,),
                             f"linear_leaky_relu {tag}"),
                            (nniq.ConvAdd2d(2, 2, 3), (x4, e), f"conv2d_add.{tag}"),
                            (nniq.ConvAddReLU2d(2, 2, 3), (x4, e), f"conv2d_add.{tag}")]:
            with pytest.raises(RuntimeError, match=f"Didn't find engine for operation "
                                                   f"quantized::{op}"):
                m(*args)
    finally:
        torcia.backends.quantized.engine = saved


def test_linear_fusions_give_torchs_integers(onednn, torch_onednn):
    import torch.ao.nn.intrinsic.quantized as tnniq

    rng = np.random.default_rng(0)
    for k, n in [(1, 1), (7, 3), (33, 17)]:
        w = rng.integers(-128, 128, (n, k)).astype(np.int8)
        b = rng.standard_normal(n).astype(np.float32)
        x = (rng.standard_normal((5, k)) * 2).astype(np.float32)
        for ours, theirs in [(nniq.LinearLeakyReLU(k, n, 0.1), tnniq.LinearLeakyReLU(k, n, 0.1)),
                             (nniq.LinearTanh(k, n), tnniq.LinearTanh(k, n))]:
            _same_as_torch(torch_onednn, ours, theirs, w, b, (0.03, 100), [(x, 0.05, 120)])


def test_conv_add_fusions_give_torchs_integers(onednn, torch_onednn):
    import torch.ao.nn.intrinsic.quantized as tnniq

    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    b = rng.standard_normal(4).astype(np.float32)
    x = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    e = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    for ours, theirs in [(nniq.ConvAdd2d(3, 4, 3), tnniq.ConvAdd2d(3, 4, 3)),
                         (nniq.ConvAddReLU2d(3, 4, 3), tnniq.ConvAddReLU2d(3, 4, 3))]:
        _same_as_torch(torch_onednn, ours, theirs, w, b, (0.04, 90),
                       [(x, 0.05, 120), (e, 0.06, 110)])


def test_conv_add_refuses_a_float_extra_input(onednn):
    m = nniq.ConvAdd2d(1, 1, 1)
    x = _q(np.ones((1, 1, 2, 2), np.float32), 0.1, 0)
    with pytest.raises(RuntimeError, match="per-tensor quint8 quantized tensor"):
        m(x, torcia.ones(1, 1, 2, 2))


def test_convert_maps_the_fused_float_modules(onednn):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.fc = nni.LinearLeakyReLU(nn.Linear(4, 3), nn.LeakyReLU(0.2))
            self.fc2 = nni.LinearTanh(nn.Linear(3, 2), nn.Tanh())

        def forward(self, x):
            return self.dequant(self.fc2(self.fc(self.quant(x))))

    torcia.manual_seed(0)
    model = Net().eval()
    model.qconfig = tq.get_default_qconfig("onednn")
    prepared = tq.prepare(model)
    calib = torcia.randn(64, 4)
    prepared(calib)
    converted = tq.convert(prepared)
    assert type(converted.fc) is nniq.LinearLeakyReLU and converted.fc.negative_slope == 0.2
    assert type(converted.fc2) is nniq.LinearTanh
    ref = model.fc2[1](model.fc2[0](model.fc[1](model.fc[0](calib))))
    assert (converted(calib) - ref).abs().max().item() < 0.05
