"""torcia.ao.quantization: quantized tensors, observers, fake quantization, the eager
flows (dynamic, static, QAT) and torchao's quantize_.

Truth: hand-derived values for the affine maps; integer products recomputed exactly in
int64 NumPy; PyTorch 2.13's own quantized tensors, observers and modules where torch is
installed (same inputs, same weights: integers equal or one step apart, where the two
round in a different order).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

import torcia
from torcia import library, nn
from torcia.ao import quantization as tq
from torcia.ao._ops import (
    linear_dynamic,
    linear_weight_int4,
    pack_int4,
    quantized_conv2d,
    quantized_linear,
    unpack_int4,
)

try:
    import torch
except ImportError:
    torch = None


def needs_torch(test):
    return pytest.mark.torch(
        pytest.mark.skipif(torch is None, reason="torch 2.13 is not installed")(
            pytest.mark.filterwarnings("ignore::UserWarning")(
                pytest.mark.filterwarnings("ignore::DeprecationWarning")(test))))


RNG = np.random.default_rng(0)


def _inputs():
    """Float inputs of several shapes and ranges, with the boundary cases in them."""
    yield np.array([0.0, 0.25, 0.75, -0.25, 1e6, -1e6], np.float32)  # ties, clamping
    yield RNG.standard_normal((3, 5)).astype(np.float32)
    yield (RNG.standard_normal((2, 3, 4)) * 10).astype(np.float32)
    yield np.zeros((0, 4), np.float32)
    yield np.float32(RNG.standard_normal((4, 6))).T  # non-contiguous
    yield np.array(1.5, np.float32)  # 0-d


# ---------------------------------------------------------------------------------------
# quantized tensors
# ---------------------------------------------------------------------------------------


def test_quantize_per_tensor_by_hand():
    q = torcia.quantize_per_tensor(torcia.tensor([0.0, 0.25, 0.75, 2.0, -9.0]), 0.5, 1,
                                   torcia.quint8)
    # x / 0.5 + 1 = 1, 1.5, 2.5, 5, -17: ties to even (2, 2), clamped at 0
    assert q.int_repr().tolist() == [1, 2, 2, 5, 0]
    assert q.dequantize().tolist() == [0.0, 0.5, 0.5, 2.0, -0.5]
    assert (q.q_scale(), q.q_zero_point(), q.dtype) == (0.5, 1, torcia.quint8)
    assert q.qscheme() is torcia.per_tensor_affine
    with pytest.raises(RuntimeError, match="kPerChannelAffine"):
        q.q_per_channel_scales()
    with pytest.raises(NotImplementedError, match="FloatFunctional"):
        q + q  # noqa: B018
    with pytest.raises(RuntimeError, match="Float Tensor"):
        torcia.quantize_per_tensor(torcia.tensor([1, 2]), 0.5, 0, torcia.quint8)


def test_quantize_per_channel_by_hand():
    w = torcia.tensor([[1.0, -1.0, 0.3], [0.2, 0.4, -0.6]])
    q = torcia.quantize_per_channel(w, torcia.tensor([0.5, 0.1]), torcia.tensor([0, 1]), 0,
                                    torcia.qint8)
    assert q.int_repr().tolist() == [[2, -2, 1], [3, 5, -5]]  # 0.6 -> 1 (round 0.6), +zp
    assert q.q_per_channel_axis() == 0
    np.testing.assert_allclose(q.dequantize().numpy(), [[1.0, -1.0, 0.5], [0.2, 0.4, -0.6]],
                               atol=1e-7)
    with pytest.raises(RuntimeError, match="kPerTensorAffine"):
        q.q_scale()


@needs_torch
@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_quantize_per_tensor_matches_torch(dtype):
    for x in _inputs():
        for scale, zero in ((0.1, 3), (0.037, 0), (2.5, 10)):
            mine = torcia.quantize_per_tensor(torcia.from_numpy(np.array(x)), scale, zero,
                                              getattr(torcia, dtype))
            theirs = torch.quantize_per_tensor(torch.from_numpy(np.array(x)), scale, zero,
                                               getattr(torch, dtype))
            np.testing.assert_array_equal(mine.int_repr().numpy(), theirs.int_repr().numpy())
            np.testing.assert_allclose(mine.dequantize().numpy(), theirs.dequantize().numpy())


@needs_torch
def test_quantize_per_channel_matches_torch():
    x = RNG.standard_normal((4, 3, 2)).astype(np.float32)
    scales = np.array([0.01, 0.05, 0.2], np.float64)
    zeros = np.array([0, 2, -3])
    mine = torcia.quantize_per_channel(torcia.from_numpy(x), torcia.from_numpy(scales),
                                       torcia.from_numpy(zeros), 1, torcia.qint8)
    theirs = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(scales),
                                        torch.from_numpy(zeros), 1, torch.qint8)
    np.testing.assert_array_equal(mine.int_repr().numpy(), theirs.int_repr().numpy())


def test_quantized_views_keep_parameters():
    q = torcia.quantize_per_tensor(torcia.arange(12.0).reshape(3, 4), 0.5, 2, torcia.quint8)
    for view in (q.reshape(4, 3), q.flatten(), q.transpose(0, 1), q[1:], q.unsqueeze(0)):
        assert view.q_scale() == 0.5 and view.q_zero_point() == 2
    np.testing.assert_array_equal(q.flatten().dequantize().numpy(), np.arange(12.0))
    assert q.relu().int_repr().min().item() >= 2


# ---------------------------------------------------------------------------------------
# observers and fake quantization
# ---------------------------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("name, kwargs", [
    ("MinMaxObserver", {}),
    ("MinMaxObserver", {"reduce_range": True}),
    ("MinMaxObserver", {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}),
    ("MovingAverageMinMaxObserver", {"averaging_constant": 0.3}),
    ("PerChannelMinMaxObserver", {"dtype": "qint8", "qscheme": "per_channel_symmetric"}),
    ("PerChannelMinMaxObserver", {"ch_axis": 1}),
    ("MovingAveragePerChannelMinMaxObserver", {"averaging_constant": 0.5}),
])
def test_observers_match_torch(name, kwargs):
    def args(lib):
        out = dict(kwargs)
        for key in ("dtype", "qscheme"):
            if key in out:
                out[key] = getattr(lib, out[key])
        return out

    mine = getattr(tq, name)(**args(torcia))
    theirs = getattr(torch.ao.quantization, name)(**args(torch))
    for _ in range(3):
        x = (RNG.standard_normal((4, 6)) * RNG.uniform(0.1, 5) + RNG.uniform(-1, 1))
        x = x.astype(np.float32)
        mine(torcia.from_numpy(x))
        theirs(torch.from_numpy(x))
    (ms, mz), (ts, tz) = mine.calculate_qparams(), theirs.calculate_qparams()
    np.testing.assert_allclose(ms.numpy(), ts.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(mz.numpy(), tz.numpy())


def test_histogram_observer_covers_and_clips():
    obs = tq.HistogramObserver()
    data = np.concatenate([RNG.standard_normal(20000), [60.0]]).astype(np.float32)
    obs(torcia.from_numpy(data[:10000]))
    obs(torcia.from_numpy(data[10000:]))  # a wider range: the histogram is rebinned
    scale, zero = obs.calculate_qparams()
    lo = (obs.quant_min - zero.item()) * scale.item()
    hi = (obs.quant_max - zero.item()) * scale.item()
    # the bulk of the values inside the chosen range, 0 exactly representable
    assert lo <= np.quantile(data, 0.001) and hi >= np.quantile(data, 0.999)
    assert obs.quant_min <= zero.item() <= obs.quant_max


@needs_torch
def test_fake_quantize_matches_torch_forward_and_gradient():
    x = (RNG.standard_normal((5, 4)) * 3).astype(np.float32)
    for per_channel in (False, True):
        if per_channel:
            mine = tq.default_per_channel_weight_fake_quant()
            theirs = torch.ao.quantization.default_per_channel_weight_fake_quant()
        else:
            mine, theirs = tq.default_fake_quant(), torch.ao.quantization.default_fake_quant()
        xm = torcia.from_numpy(x.copy()).requires_grad_()
        xt = torch.from_numpy(x.copy()).requires_grad_()
        ym, yt = mine(xm), theirs(xt)
        np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), atol=1e-6)
        g = RNG.standard_normal(x.shape).astype(np.float32)
        ym.backward(torcia.from_numpy(g))
        yt.backward(torch.from_numpy(g))
        np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy())


# ---------------------------------------------------------------------------------------
# the reference kernels against exact integer arithmetic
# ---------------------------------------------------------------------------------------


def test_quantized_linear_reference_is_exact_integer_arithmetic():
    xq = RNG.integers(0, 256, (5, 7)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (3, 7)).astype(np.int8)
    scales = RNG.uniform(0.001, 0.01, 3).astype(np.float32)
    bias = RNG.standard_normal(3).astype(np.float32)
    acc = (xq.astype(np.int64) - 130) @ wq.astype(np.int64).T  # exact
    want = acc * (0.02 * scales.astype(np.float64)) + bias
    got = quantized_linear(xq, wq, scales, bias, x_scale=0.02, x_zero_point=130)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)
    q = quantized_linear(xq, wq, scales, bias, x_scale=0.02, x_zero_point=130,
                         out_scale=0.05, out_zero_point=100, relu=True)
    np.testing.assert_array_equal(
        q, np.clip(np.rint(want.astype(np.float32) / np.float32(0.05)) + 100, 100, 255))


def test_quantized_conv2d_reference_matches_float_convolution_of_integers():
    xq = RNG.integers(0, 256, (2, 3, 6, 5)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    scales = np.full(4, 0.01, np.float32)
    got = quantized_conv2d(xq, wq, scales, None, x_scale=0.5, x_zero_point=7,
                           stride=(2, 1), padding=((1, 1), (0, 2)))
    # the same convolution in float64 on the centred integers, zero padding of (x - zp)
    centred = torcia.from_numpy(xq.astype(np.float64) - 7)
    want = torcia.nn.functional.conv2d(
        torcia.nn.functional.pad(centred, (0, 2, 1, 1)), torcia.from_numpy(
            wq.astype(np.float64)), stride=(2, 1)).numpy() * 0.5 * 0.01
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _op_samples():
    """(op, array inputs, params) covering each quantized op, its output dtypes and shapes."""
    x = RNG.standard_normal((2, 3, 7)).astype(np.float32)
    xq = RNG.integers(0, 256, (2, 3, 7)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (4, 7)).astype(np.int8)
    s4, b4 = np.full(4, 0.01, np.float32), RNG.standard_normal(4)
    img = RNG.integers(0, 256, (2, 4, 7, 6)).astype(np.uint8)
    conv_w = RNG.integers(-128, 128, (6, 2, 3, 2)).astype(np.int8)
    qp = {"qmin": 0, "qmax": 255}
    yield "quantize_per_tensor", (x,), {"scale": 0.1, "zero_point": 3, **qp,
                                        "dtype": "quint8"}
    yield "quantize_per_channel", (x, np.full(3, 0.1), np.zeros(3, np.int64)), {
        "axis": 1, "qmin": -128, "qmax": 127, "dtype": "qint8"}
    yield "dequantize_per_tensor", (xq,), {"scale": 0.1, "zero_point": 3}
    yield "dequantize_per_channel", (xq, np.full(7, 0.1), np.zeros(7, np.int64)), {"axis": 2}
    for out_scale in (None, 0.05):
        yield "quantized_linear", (xq, wq, s4, b4), {"x_scale": 0.02, "x_zero_point": 9,
                                                     "out_scale": out_scale}
        yield "quantized_conv2d", (img, conv_w, np.full(6, 0.01, np.float32), None), {
            "x_scale": 0.5, "x_zero_point": 7, "stride": (2, 1), "padding": ((1, 0), (0, 2)),
            "dilation": (1, 2), "groups": 2, "out_scale": out_scale}
        yield "quantized_conv", (img[..., None], conv_w[..., None], np.full(6, 0.01,
                                                                           np.float32), b4[:1]), {
            "x_scale": 0.5, "x_zero_point": 7, "stride": (2, 1, 1), "padding": 1,
            "dilation": (1, 2, 1), "groups": 2, "out_scale": out_scale}
        yield "quantized_conv_transpose", (img, conv_w[:4], s4, None), {
            "x_scale": 0.5, "x_zero_point": 7, "stride": (2, 3), "padding": (1, 0),
            "output_padding": (1, 2), "dilation": (1, 2), "groups": 2, "out_scale": out_scale}
    yield "quantized_add", (xq, xq[:, :1]), {"a_scale": 0.1, "a_zero_point": 1,
                                             "b_scale": 0.2, "b_zero_point": 2,
                                             "out_scale": 0.3, "out_zero_point": 4}
    for ceil_mode in (False, True):
        yield "quantized_max_pool2d", (img,), {"kernel_size": (3, 2), "stride": (2, 2),
                                              "padding": (1, 0), "dilation": (1, 2),
                                              "ceil_mode": ceil_mode}
    yield "linear_dynamic", (x, wq, s4, None), {}
    yield "linear_weight_int8", (x, wq, s4, None), {}
    yield "linear_weight_int8", (x, wq, s4, b4), {}
    packed = pack_int4(RNG.integers(0, 16, (4, 7)).astype(np.uint8))
    yield "linear_weight_int4", (x, packed, np.ones((4, 4), np.float32),
                                 np.zeros((4, 4), np.float32), None), {"group_size": 2}
    emb_scales, emb_zeros = np.full(7, 0.1, np.float32), np.full(7, 3.5, np.float32)
    yield "embedding_byte", (xq[0].T, emb_scales, emb_zeros, np.array([[0, 6], [2, 2]])), {}
    for offsets, last in ((np.array([0, 2, 2]), False), (np.array([0, 3, 5]), True)):
        yield "embedding_bag_byte", (xq[0].T, emb_scales, emb_zeros, np.array([1, 4, 0, 6, 5]),
                                     offsets, None), {"include_last_offset": last}
    yield "embedding_bag_byte", (xq[0].T, emb_scales, emb_zeros, np.array([[1, 4], [0, 6]]),
                                 None, np.arange(4, dtype=np.float32)), {}
    yield "fake_quantize", (x.astype(np.float64), np.array([0.1]), np.array([2])), qp


@pytest.mark.parametrize("op, inputs, params", list(_op_samples()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_shape_functions_agree_with_the_reference_kernels(op, inputs, params):
    record = library.get_op(op)
    want = record.kernel(*inputs, **params)
    metas = [None if a is None else SimpleNamespace(shape=a.shape, dtype=a.dtype)
             for a in inputs]
    shape, dtype = record.shape(*metas, **params)
    assert (tuple(shape), np.dtype(dtype)) == (want.shape, want.dtype)


def test_int4_packing_round_trips_and_dequantizes_by_hand():
    q = RNG.integers(0, 16, (3, 9)).astype(np.uint8)
    np.testing.assert_array_equal(unpack_int4(pack_int4(q), 9), q)
    x = np.ones((1, 4), np.float32)
    packed = pack_int4(np.array([[1, 2, 3, 4]], np.uint8))
    # two groups of 2: w = (q - zero) * scale = [(1-1)*1, (2-1)*1, (3-0)*2, (4-0)*2]
    out = linear_weight_int4(x, packed, np.array([[1.0, 2.0]], np.float32),
                             np.array([[1.0, 0.0]], np.float32), None, group_size=2)
    assert out.tolist() == [[0 + 1 + 6 + 8]]


def test_dynamic_linear_reference_quantizes_activations_per_call():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    w = RNG.integers(-127, 128, (3, 8)).astype(np.int8)
    s = np.full(3, 0.01, np.float32)
    per_row = linear_dynamic(x, w, s, None, per_row=True)
    scale = np.abs(x).max(axis=1) / 127
    xq = np.clip(np.rint(x / scale[:, None]), -127, 127)
    np.testing.assert_allclose(per_row, (xq @ w.T.astype(np.float64)) * scale[:, None] * 0.01,
                               rtol=1e-5)


# ---------------------------------------------------------------------------------------
# the flows
# ---------------------------------------------------------------------------------------


def _mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(32, 64), lib.nn.ReLU(), lib.nn.Linear(64, 10))


def _same_weights(mine, theirs):
    theirs.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                            for k, v in mine.state_dict().items()})


@needs_torch
def test_quantize_dynamic_linear_matches_torch():
    torcia.manual_seed(0)
    model = nn.Sequential(_mlp(torcia)).eval()
    theirs = torch.nn.Sequential(_mlp(torch)).eval()
    _same_weights(model, theirs)
    mine_q = tq.quantize_dynamic(model, {nn.Linear}, dtype=torcia.qint8)
    theirs_q = torch.ao.quantization.quantize_dynamic(theirs, {torch.nn.Linear},
                                                      dtype=torch.qint8)
    x = RNG.standard_normal((16, 32)).astype(np.float32)
    got = mine_q(torcia.from_numpy(x)).numpy()
    want = theirs_q(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_quantize_dynamic_recurrent_within_torchs_error(kind):
    torcia.manual_seed(0)
    mine = nn.Sequential(getattr(nn, kind)(16, 32, num_layers=2, batch_first=True)).eval()
    theirs = torch.nn.Sequential(getattr(torch.nn, kind)(16, 32, num_layers=2,
                                                         batch_first=True)).eval()
    _same_weights(mine, theirs)
    x = RNG.standard_normal((4, 12, 16)).astype(np.float32)
    with torcia.no_grad():
        ref = mine(torcia.from_numpy(x))[0].numpy()
    mine_q = tq.quantize_dynamic(mine, {getattr(nn, kind)})
    theirs_q = torch.ao.quantization.quantize_dynamic(theirs, {getattr(torch.nn, kind)})
    err_mine = np.abs(mine_q(torcia.from_numpy(x))[0].numpy() - ref).max()
    err_theirs = np.abs(theirs_q(torch.from_numpy(x))[0].detach().numpy() - ref).max()
    assert err_mine <= 1.25 * err_theirs + 1e-4, (err_mine, err_theirs)


@needs_torch
@pytest.mark.parametrize("kind, kwargs", [("LSTMCell", {}), ("GRUCell", {}),
                                          ("RNNCell", {"nonlinearity": "tanh"}),
                                          ("RNNCell", {"nonlinearity": "relu"})])
def test_quantize_dynamic_cells_by_default_within_torchs_error(kind, kwargs):
    # quantize_dynamic's default set holds the cells too, as torch's does
    torcia.manual_seed(0)
    mine = nn.Sequential(getattr(nn, kind)(16, 32, **kwargs)).eval()
    theirs = torch.nn.Sequential(getattr(torch.nn, kind)(16, 32, **kwargs)).eval()
    _same_weights(mine, theirs)
    mine_q, theirs_q = tq.quantize_dynamic(mine), torch.ao.quantization.quantize_dynamic(theirs)
    assert type(mine_q[0]).__name__ == type(theirs_q[0]).__name__.replace("DynamicQuantized", "")
    assert type(mine_q[0]).__module__ == "torcia.ao.nn.quantized.dynamic"
    lstm = kind == "LSTMCell"
    x = RNG.standard_normal((5, 16)).astype(np.float32)
    h = [RNG.standard_normal((5, 32)).astype(np.float32) for _ in range(2 if lstm else 1)]

    def state(lib):
        made = [lib.from_numpy(a) for a in h]
        return tuple(made) if lstm else made[0]

    for given in (False, True):
        mine_args = (torcia.from_numpy(x),) + ((state(torcia),) if given else ())
        their_args = (torch.from_numpy(x),) + ((state(torch),) if given else ())
        with torcia.no_grad():
            ref = mine[0](*mine_args)
        got, want = mine_q[0](*mine_args), theirs_q[0](*their_args)
        for r, g, w in zip(*(o if lstm else (o,) for o in (ref, got, want))):
            assert g.shape == r.shape == tuple(w.shape)
            err_mine = np.abs(g.numpy() - r.numpy()).max()
            err_theirs = np.abs(w.detach().numpy() - r.numpy()).max()
            assert err_mine <= 1.25 * err_theirs + 1e-4, (err_mine, err_theirs)
    # the inputs torch's cells refuse, with their messages where they have one
    bad_h = RNG.standard_normal((4, 32)).astype(np.float32)
    bad = [(torcia.from_numpy(x[:, :8]), torch.from_numpy(x[:, :8]), None),
           (torcia.from_numpy(x), torch.from_numpy(x),
            (torcia.from_numpy(bad_h), torch.from_numpy(bad_h)))]
    for mine_x, their_x, hx in bad:
        if hx is not None and lstm:
            hx = tuple((a, a) for a in hx)
        with pytest.raises(RuntimeError) as want:
            theirs_q[0](their_x, *(() if hx is None else (hx[1],)))
        with pytest.raises(RuntimeError) as got:
            mine_q[0](mine_x, *(() if hx is None else (hx[0],)))
        assert str(got.value) == str(want.value)
    with pytest.raises(RuntimeError, match="expected a 2-D input"):
        mine_q[0](torcia.from_numpy(x[0]))


def test_quantize_dynamic_float16_and_refusals():
    model = nn.Sequential(_mlp(torcia)).eval()
    q16 = tq.quantize_dynamic(model, {nn.Linear}, dtype=torcia.float16)
    x = torcia.randn(3, 32)
    with torcia.no_grad():
        assert (q16(x) - model(x)).abs().max().item() < 1e-2
    with pytest.raises(ValueError, match="Don't know how to quantize"):
        tq.quantize_dynamic(model, dtype=torcia.quint8)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(8 * 4 * 4, 10)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.pool(self.relu(self.bn(self.conv(self.quant(x)))))
        return self.dequant(self.fc(self.flat(x)))


def test_static_post_training_quantization():
    torcia.manual_seed(0)
    model = _Net().eval()
    fused = tq.fuse_modules(model, [["conv", "bn", "relu"]])
    fused.qconfig = tq.get_default_qconfig("x86")
    prepared = tq.prepare(fused)
    data = [torcia.randn(16, 1, 8, 8) for _ in range(8)]
    with torcia.no_grad():
        for x in data:
            prepared(x)
    q = tq.convert(prepared)
    assert type(q.conv).__name__ == "ConvReLU2d" and type(q.fc).__module__ == \
        "torcia.ao.nn.quantized._modules"
    x = data[0]
    with torcia.no_grad():
        want = model(x)
        got = q(x)
    # within a few output quantization steps of the float model
    assert (got - want).abs().max().item() < 8 * q.fc.scale


@needs_torch
def test_static_quantization_matches_torch_on_the_same_weights():
    torcia.manual_seed(0)
    model = _Net().eval()

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = torch.ao.quantization.QuantStub()
            self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.relu = torch.nn.ReLU()
            self.pool = torch.nn.MaxPool2d(2)
            self.flat = torch.nn.Flatten()
            self.fc = torch.nn.Linear(8 * 4 * 4, 10)
            self.dequant = torch.ao.quantization.DeQuantStub()

        def forward(self, x):
            x = self.pool(self.relu(self.bn(self.conv(self.quant(x)))))
            return self.dequant(self.fc(self.flat(x)))

    theirs = TorchNet().eval()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in model.state_dict().items()})
    data = [RNG.standard_normal((16, 1, 8, 8)).astype(np.float32) for _ in range(4)]
    outs = []
    for lib, net, ns in ((tq, model, torcia), (torch.ao.quantization, theirs, torch)):
        net = lib.fuse_modules(net, [["conv", "bn", "relu"]])
        net.qconfig = lib.default_qconfig  # min/max: the same observer on both sides
        prepared = lib.prepare(net)
        for x in data:
            prepared(ns.from_numpy(x))
        outs.append(lib.convert(prepared))
    mine, theirs_q = outs
    assert mine.fc.scale == pytest.approx(theirs_q.fc.scale, rel=1e-5)
    x = data[1]
    got = mine(torcia.from_numpy(x)).numpy()
    want = theirs_q(torch.from_numpy(x)).numpy()
    # the same integers but where the two round a product in another order: one step
    assert np.abs(got - want).max() <= 1.01 * mine.fc.scale


# an activation whose output range is known: its quantized output's (scale, zero point)
FIXED_RANGE_ACTIVATIONS = [("Sigmoid", (1 / 256, 0)), ("Tanh", (2 / 256, 128)),
                           ("Hardsigmoid", (1 / 256, 0))]


@pytest.mark.parametrize("name,params", FIXED_RANGE_ACTIVATIONS)
def test_fixed_range_activation_is_not_observed_and_keeps_its_range(name, params):
    """Bug: eval-mode prepare observed nn.Sigmoid and convert requantized it at the
    observed range, and a converted Tanh or Hardsigmoid refused the quantized tensor;
    torch observes none of them and runs them at the fixed parameters of their range."""
    torcia.manual_seed(0)
    model = nn.Sequential(tq.QuantStub(), nn.Linear(4, 3), getattr(nn, name)(),
                          tq.DeQuantStub()).eval()
    model.qconfig = tq.default_qconfig
    prepared = tq.prepare(model)
    assert not hasattr(prepared[2], "activation_post_process")
    assert str(prepared[2]) == f"{name}()"
    prepared(torcia.randn(16, 4) * 3)
    q = tq.convert(prepared)
    assert str(q[2]) == f"{name}()" and isinstance(q[2], getattr(nn, name))
    hidden = q[1](q[0](torcia.randn(8, 4) * 3))
    out = q[2](hidden)
    assert (out.q_scale(), out.q_zero_point()) == params
    want = torcia.quantize_per_tensor(getattr(nn, name)()(hidden.dequantize()), *params,
                                      torcia.quint8)
    assert out.int_repr().tolist() == want.int_repr().tolist()
    float_out = q[2](hidden.dequantize())  # float inputs stay float
    assert torcia.equal(float_out, getattr(nn, name)()(hidden.dequantize()))


@needs_torch
@pytest.mark.parametrize("name,params", FIXED_RANGE_ACTIVATIONS)
def test_fixed_range_activation_matches_torch(name, params):
    torcia.manual_seed(1)
    model = nn.Sequential(tq.QuantStub(), nn.Linear(4, 3), getattr(nn, name)(),
                          tq.DeQuantStub()).eval()
    theirs = torch.nn.Sequential(torch.ao.quantization.QuantStub(), torch.nn.Linear(4, 3),
                                 getattr(torch.nn, name)(),
                                 torch.ao.quantization.DeQuantStub()).eval()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in model.state_dict().items()})
    data = [RNG.standard_normal((16, 4)).astype(np.float32) * 3 for _ in range(3)]
    outs = []
    for lib, net, ns in ((tq, model, torcia), (torch.ao.quantization, theirs, torch)):
        net.qconfig = lib.default_qconfig
        prepared = lib.prepare(net)
        assert not hasattr(prepared[2], "activation_post_process")
        for x in data:
            prepared(ns.from_numpy(x))
        outs.append(lib.convert(prepared))
    mine, theirs_q = outs
    assert str(mine[2]) == str(theirs_q[2]) == f"{name}()"
    x = data[0]
    got = mine[2](mine[1](mine[0](torcia.from_numpy(x))))
    want = theirs_q[2](theirs_q[1](theirs_q[0](torch.from_numpy(x))))
    assert (got.q_scale(), got.q_zero_point()) == (want.q_scale(), want.q_zero_point())
    # the Linear's integers may differ by a step where the two round a product in another
    # order; the activation, flatter than 1, adds none
    assert np.abs(got.int_repr().numpy().astype(int) - want.int_repr().numpy()).max() <= 1
    np.testing.assert_allclose(mine(torcia.from_numpy(x)).numpy(),
                               theirs_q(torch.from_numpy(x)).numpy(), atol=1.01 * params[0])


def test_quantization_aware_training_trains_and_converts():
    torcia.manual_seed(0)
    model = _Net().train()
    model = tq.fuse_modules_qat(model, [["conv", "bn", "relu"]])
    model.qconfig = tq.get_default_qat_qconfig("x86")
    qat = tq.prepare_qat(model)
    assert type(qat.conv).__name__ == "ConvBnReLU2d" and hasattr(qat.fc, "weight_fake_quant")
    opt = torcia.optim.SGD(qat.parameters(), lr=0.05)
    x, y = torcia.randn(32, 1, 8, 8), torcia.randint(0, 10, (32,))
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(qat(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert qat.conv.weight.grad is not None
    q = tq.convert(qat.eval())
    with torcia.no_grad():
        assert (q(x) - qat(x)).abs().max().item() < 0.5


@pytest.mark.parametrize("config, tolerance", [
    (tq.Int8DynamicActivationInt8WeightConfig(), 0.03),
    (tq.Int8WeightOnlyConfig(), 0.01),
    (tq.Int4WeightOnlyConfig(group_size=32), 0.15),
])
def test_quantize_api_configs(config, tolerance):
    torcia.manual_seed(0)
    model = _mlp(torcia).eval()
    q = copy.deepcopy(model)
    tq.quantize_(q, config)
    assert all(type(m).__name__ == "QuantizedLinear" for m in (q[0], q[2]))
    x = torcia.randn(8, 32)
    with torcia.no_grad():
        assert (q(x) - model(x)).abs().max().item() < tolerance
    with pytest.raises(TypeError, match="config must be one of"):
        tq.quantize_(model, tq.default_qconfig)


def test_fuse_modules_refusals_and_eval_folding():
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU())
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        tq.fuse_modules(m.train(), ["0", "1", "2"])
    with pytest.raises(AssertionError, match="did not find fuser method for"):
        tq.fuse_modules(m.eval(), ["2", "0"])
    m.eval()
    m[1].running_mean.copy_(torcia.tensor([0.5, -0.2]))
    m[1].running_var.copy_(torcia.tensor([2.0, 0.3]))
    fused = tq.fuse_modules(m, [["0", "1"]])
    x = torcia.randn(2, 1, 5, 5)
    with torcia.no_grad():
        assert torcia.allclose(fused(x), m(x), atol=1e-5)


@needs_torch
def test_fuser_methods_and_module_class_lookups_match_torch():
    tfm = torch.ao.quantization
    torcia.manual_seed(0)
    mine = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                 torch.nn.ReLU())
    with torcia.no_grad():  # statistics away from the initial ones, so the fold shows
        mine[1].running_mean.copy_(torcia.randn(4))
        mine[1].running_var.copy_(torcia.rand(4) + 0.5)
    _same_weights(mine, theirs)
    mine.eval(), theirs.eval()
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    for fn, n in [("fuse_conv_bn", 2), ("fuse_conv_bn_relu", 3)]:
        got = getattr(tq, fn)(False, *mine[:n])(torcia.from_numpy(x)).detach().numpy()
        want = getattr(tfm, fn)(False, *theirs[:n])(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    linear, bn = nn.Linear(4, 3), nn.BatchNorm1d(3)
    t_linear, t_bn = torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)
    for a, b, fn in [(mine[0], mine[1], "fuse_conv_bn"), (linear, bn, "fuse_linear_bn")]:
        ta, tb = (theirs[0], theirs[1]) if a is mine[0] else (t_linear, t_bn)
        a.train(), b.eval(), ta.train(), tb.eval()
        with pytest.raises(AssertionError) as want:
            getattr(tfm, fn)(False, ta, tb)
        with pytest.raises(AssertionError) as got:
            getattr(tq, fn)(False, a, b)
        assert str(got.value) == str(want.value)
    qat = tq.get_fuser_method((nn.Conv2d, nn.BatchNorm2d, nn.ReLU))(
        True, nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    assert type(qat).__name__ == type(tfm.get_fuser_method(
        (torch.nn.Conv2d, torch.nn.BatchNorm2d, torch.nn.ReLU))(
        True, torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())).__name__
    with pytest.raises(AssertionError, match="did not find fuser method for"):
        tq.get_fuser_method((nn.ReLU, nn.Linear))
    own = {nn.ReLU: nn.ReLU6}
    assert tq.get_fuser_method((nn.ReLU,), {(nn.ReLU,): len}) is len
    for name in ("Linear", "Conv2d", "ReLU6", "Hardswish"):
        want = tfm.get_static_quant_module_class(getattr(torch.nn, name)).__name__
        assert tq.get_static_quant_module_class(getattr(nn, name)).__name__ == want
    for name in ("Linear", "LSTM", "GRU", "LSTMCell", "GRUCell", "RNNCell"):
        want = tfm.get_dynamic_quant_module_class(getattr(torch.nn, name)).__name__
        got = tq.get_dynamic_quant_module_class(getattr(nn, name)).__name__
        assert got == want.replace("DynamicQuantized", "")
    assert tq.get_static_quant_module_class(nn.ReLU, own) is nn.ReLU6
    with pytest.raises(AssertionError, match="does not have a corresponding quantized"):
        tq.get_static_quant_module_class(nn.Softmax2d)
    with pytest.raises(AssertionError, match="does not have a corresponding quantized"):
        tq.get_dynamic_quant_module_class(nn.Conv2d)
    for name in ("weight_observer_range_neg_127_to_127",
                 "per_channel_weight_observer_range_neg_127_to_127"):
        o, t = getattr(tq, name)(), getattr(tfm, name)()
        assert (o.quant_min, o.quant_max, str(o.qscheme).split(".")[-1]) == (
            t.quant_min, t.quant_max, str(t.qscheme).split(".")[-1])


def test_convert_without_calibration_names_the_step():
    model = nn.Sequential(tq.QuantStub(), nn.Linear(2, 2), tq.DeQuantStub()).eval()
    model.qconfig = tq.default_qconfig
    q = tq.convert(tq.prepare(model))
    with pytest.raises(RuntimeError, match="quantized tensor"):
        q[1](torcia.ones(1, 2))


@pytest.mark.slow
def test_digits_classifier_keeps_its_accuracy_after_ptq_and_qat():
    """The demo's model and data: static PTQ and QAT each lose at most half a point."""
    from torcia.data import DataLoader
    from torcia.vision import datasets, models
    from torcia.vision import transforms as T

    torcia.manual_seed(0)
    tf = T.Compose([T.ToTensor(), T.Normalize((0.3,), (0.4,))])
    train = DataLoader(datasets.Digits(train=True, transform=tf), batch_size=64, shuffle=True)
    x_test, y_test = next(iter(DataLoader(datasets.Digits(train=False, transform=tf),
                                          batch_size=360)))
    model = models.small_cnn()

    def fit(m, lr, epochs):
        opt = torcia.optim.Adam(m.parameters(), lr=lr)
        m.train()
        for _ in range(epochs):
            for x, y in train:
                opt.zero_grad()
                nn.functional.cross_entropy(m(x), y).backward()
                opt.step()

    def accuracy(m):
        m.eval()
        with torcia.no_grad():
            return (m(x_test).argmax(1) == y_test).float().mean().item() * 100

    fit(model, 2e-3, 12)
    base = accuracy(model)

    def quantizable(m):
        return nn.Sequential(tq.QuantStub(), m.features, m.avgpool, nn.Flatten(1),
                             m.classifier, tq.DeQuantStub())

    groups = [["1.0", "1.1", "1.2"], ["1.3", "1.4", "1.5"], ["1.7", "1.8", "1.9"]]
    ptq = tq.fuse_modules(quantizable(copy.deepcopy(model)).eval(), groups)
    ptq.qconfig = tq.get_default_qconfig("x86")
    prepared = tq.prepare(ptq)
    with torcia.no_grad():
        for x, _ in train:
            prepared(x)
    ptq_acc = accuracy(tq.convert(prepared))
    qat = tq.fuse_modules_qat(quantizable(copy.deepcopy(model)).train(), groups)
    qat.qconfig = tq.get_default_qat_qconfig("x86")
    qat = tq.prepare_qat(qat)
    fit(qat, 2e-4, 2)
    qat_acc = accuracy(tq.convert(qat.eval()))
    assert base >= 97.0
    assert ptq_acc >= base - 0.5 and qat_acc >= base - 0.5, (base, ptq_acc, qat_acc)


def test_pt2e_flow_on_an_exported_resnet(tmp_path):
    from torcia.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torcia.ao.quantization.quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )
    from torcia.export import Dim
    from torcia.vision import models

    torcia.manual_seed(0)
    model = models.resnet18(num_classes=10)
    with torcia.no_grad():  # BatchNorm statistics away from 0/1
        for _ in range(2):
            model(torcia.randn(8, 3, 32, 32))
    model.eval()
    exported = torcia.export.export(model, (torcia.randn(2, 3, 32, 32),),
                                    dynamic_shapes=({0: Dim("batch", max=64)},)).module()
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(exported, quantizer)
    calibration = [torcia.randn(8, 3, 32, 32) for _ in range(4)]
    for x in calibration:
        prepared(x)
    with pytest.raises(ValueError, match="Python steps"):
        torcia.export.save(prepared.program_module.exported_program, tmp_path / "no.pt2")
    q = convert_pt2e(prepared)
    ops = [n.op for n in q.exported_program.graph.nodes]
    assert ops.count("quantized_conv2d") == 20 and ops.count("quantized_linear") == 1
    assert "conv" not in ops and ops.count("quantize_per_tensor") == 21
    x = calibration[0][:3]
    with torcia.no_grad():
        want, got = model(x), q(x)
    assert ((got - want).abs().max() / want.abs().max()).item() < 0.1
    torcia.export.save(q.exported_program, tmp_path / "resnet_int8.pt2")
    loaded = torcia.export.load(tmp_path / "resnet_int8.pt2").module()
    with torcia.no_grad():
        assert torcia.equal(loaded(x), got)


# ---------------------------------------------------------------------------------------
# more quantized modules: 1-d/3-d and transposed convolutions, embeddings, LayerNorm
# ---------------------------------------------------------------------------------------


def _static_pair(make, shape, qconfig_name):
    """The same float layer in torcia and torch, statically quantized by each (same
    weights, same calibration batch); returns both models and a test input."""
    torcia.manual_seed(1)
    mine = nn.Sequential(tq.QuantStub(), make(torcia), tq.DeQuantStub()).eval()
    theirs = torch.nn.Sequential(torch.ao.quantization.QuantStub(), make(torch),
                                 torch.ao.quantization.DeQuantStub()).eval()
    _same_weights(mine, theirs)
    mine.qconfig = getattr(tq, qconfig_name)
    theirs.qconfig = getattr(torch.ao.quantization, qconfig_name)
    mine, theirs = tq.prepare(mine), torch.ao.quantization.prepare(theirs)
    calib = RNG.standard_normal(shape).astype(np.float32)
    mine(torcia.from_numpy(calib))
    theirs(torch.from_numpy(calib))
    return tq.convert(mine), torch.ao.quantization.convert(theirs), \
        RNG.standard_normal(shape).astype(np.float32)


_CONVS = [
    ("Conv1d", lambda lib: lib.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2),
     (2, 4, 11), "default_qconfig"),
    ("Conv1d", lambda lib: lib.nn.Conv1d(3, 5, 2, dilation=3, bias=False), (1, 3, 12),
     "default_per_channel_qconfig"),
    ("Conv3d", lambda lib: lib.nn.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 1), padding=1),
     (2, 2, 4, 6, 5), "default_per_channel_qconfig"),
    ("ConvTranspose1d", lambda lib: lib.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                                            output_padding=1, groups=2),
     (2, 4, 7), "default_qconfig"),
    ("ConvTranspose2d", lambda lib: lib.nn.ConvTranspose2d(3, 4, (3, 2), stride=(2, 3),
                                                            padding=(1, 0), dilation=(1, 2)),
     (2, 3, 5, 4), "default_qconfig"),
    ("ConvTranspose3d", lambda lib: lib.nn.ConvTranspose3d(2, 4, (2, 3, 2), stride=(1, 2, 2),
                                                            padding=(0, 1, 0)),
     (1, 2, 3, 4, 3), "default_qconfig"),
    ("LayerNorm", lambda lib: lib.nn.LayerNorm(8), (3, 5, 8), "default_qconfig"),
    ("GroupNorm", lambda lib: lib.nn.GroupNorm(2, 4), (3, 4, 5), "default_qconfig"),
    ("InstanceNorm1d", lambda lib: lib.nn.InstanceNorm1d(3, affine=True), (2, 3, 6),
     "default_qconfig"),
    ("InstanceNorm2d", lambda lib: lib.nn.InstanceNorm2d(3), (2, 3, 4, 5), "default_qconfig"),
    ("InstanceNorm3d", lambda lib: lib.nn.InstanceNorm3d(2), (1, 2, 3, 4, 4),
     "default_qconfig"),
    ("BatchNorm3d", lambda lib: lib.nn.BatchNorm3d(2), (1, 2, 3, 4, 4), "default_qconfig"),
]


@needs_torch
@pytest.mark.parametrize("name, make, shape, qconfig", _CONVS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(_CONVS)])
def test_quantized_conv_and_layernorm_modules_match_torch(name, make, shape, qconfig,
                                                          monkeypatch):
    # torch 2.13's default x86 engine sends transposed 2-d convolutions to oneDNN, whose
    # result is tens of steps off torch's own float convolution of the same integers on
    # this machine; FBGEMM's (PyTorch's reference x86 kernels) is within half a step
    monkeypatch.setattr(torch.backends.quantized, "engine", "fbgemm")
    mine, theirs, x = _static_pair(make, shape, qconfig)
    assert type(mine[1]).__name__ == name
    q_mine = mine[1](mine[0](torcia.from_numpy(x)))
    q_theirs = theirs[1](theirs[0](torch.from_numpy(x)))
    assert q_mine.shape == tuple(q_theirs.shape)
    assert (q_mine.q_scale(), q_mine.q_zero_point()) == pytest.approx(
        (q_theirs.q_scale(), q_theirs.q_zero_point()))
    steps = np.abs(q_mine.int_repr().numpy().astype(int) -
                   q_theirs.int_repr().numpy().astype(int))
    assert steps.max() <= 1 and steps.mean() < 0.05


def test_quantized_conv_reference_is_the_float_convolution_of_the_integers():
    """The N-d reference against torcia's float convolutions run on the centred
    integers (exact in float64), for 1-d, 3-d and transposed kernels."""
    f = nn.functional
    cases = [((2, 4, 9), (6, 2, 3), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2},
              f.conv1d),
             ((1, 2, 3, 5, 4), (3, 2, 2, 3, 1), {"stride": (1, 2, 1), "padding": (1, 0, 2),
                                                 "dilation": 1, "groups": 1}, f.conv3d)]
    for xs, ws, params, conv in cases:
        xq = RNG.integers(0, 256, xs).astype(np.uint8)
        wq = RNG.integers(-128, 128, ws).astype(np.int8)
        got = library.get_op("quantized_conv").kernel(
            xq, wq, np.ones(ws[0], np.float32), None, x_scale=1.0, x_zero_point=9, **params)
        want = conv(torcia.from_numpy(xq.astype(np.float64) - 9),
                    torcia.from_numpy(wq.astype(np.float64)), **params)
        np.testing.assert_array_equal(got, want.numpy())
    xq = RNG.integers(0, 256, (2, 4, 3, 5)).astype(np.uint8)
    wq = RNG.integers(-128, 128, (4, 3, 2, 3)).astype(np.int8)
    params = {"stride": (2, 1), "padding": (1, 1), "output_padding": (1, 0),
              "dilation": (1, 2), "groups": 2}
    got = library.get_op("quantized_conv_transpose").kernel(
        xq, wq, np.ones(6, np.float32), None, x_scale=1.0, x_zero_point=3, **params)
    want = f.conv_transpose2d(torcia.from_numpy(xq.astype(np.float64) - 3),
                              torcia.from_numpy(wq.astype(np.float64)), **params)
    np.testing.assert_array_equal(got, want.numpy())


def test_quantized_conv_transpose_refuses_per_channel_weights():
    model = nn.Sequential(tq.QuantStub(), nn.ConvTranspose2d(2, 2, 2), tq.DeQuantStub()).eval()
    model.qconfig = tq.default_per_channel_qconfig
    model = tq.prepare(model)
    model(torcia.randn(1, 2, 3, 3))
    with pytest.raises(AssertionError, match="Per channel weight observer"):
        tq.convert(model)


@needs_torch
@pytest.mark.parametrize("bag", [False, True])
def test_quantized_embeddings_match_torch(bag):
    torcia.manual_seed(2)
    if bag:
        mine = nn.EmbeddingBag(12, 5, mode="mean", include_last_offset=True)
        theirs = torch.nn.EmbeddingBag(12, 5, mode="mean", include_last_offset=True)
    else:
        mine, theirs = nn.Embedding(12, 5), torch.nn.Embedding(12, 5)
    _same_weights(mine, theirs)
    mine.qconfig = tq.float_qparams_weight_only_qconfig
    theirs.qconfig = torch.ao.quantization.float_qparams_weight_only_qconfig
    q_mine = getattr(torcia.ao.nn.quantized, type(mine).__name__).from_float(mine)
    q_theirs = getattr(torch.ao.nn.quantized, type(theirs).__name__).from_float(theirs)
    if bag:
        idx, offsets = np.array([3, 1, 11, 0, 0, 7]), np.array([0, 2, 2, 5, 6])
        weights = RNG.standard_normal(6).astype(np.float32)
        for w in (None, weights):
            got = q_mine(torcia.from_numpy(idx), torcia.from_numpy(offsets),
                         None if w is None else torcia.from_numpy(w))
            want = q_theirs(torch.from_numpy(idx), torch.from_numpy(offsets),
                            None if w is None else torch.from_numpy(w))
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        two_d = np.array([[1, 2], [3, 4]])
        np.testing.assert_allclose(q_mine(torcia.from_numpy(two_d)).numpy(),
                                   q_theirs(torch.from_numpy(two_d)).numpy(), rtol=1e-5,
                                   atol=1e-6)
    else:
        idx = RNG.integers(0, 12, (3, 4))
        np.testing.assert_allclose(q_mine(torcia.from_numpy(idx)).numpy(),
                                   q_theirs(torch.from_numpy(idx)).numpy(), rtol=1e-5,
                                   atol=1e-6)
    with pytest.raises(RuntimeError, match="out of bounds"):
        q_mine(torcia.tensor([[12]]))


def test_quantized_embedding_needs_the_float_qparams_qconfig():
    emb = nn.Embedding(4, 3)
    emb.qconfig = tq.default_qconfig
    with pytest.raises(AssertionError, match="float_qparams_weight_only_qconfig"):
        torcia.ao.nn.quantized.Embedding.from_float(emb)


def test_quantized_embedding_rows_dequantize_to_their_float_range():
    """Hand-derived: a row quantized over its own [min, max] (0.0 need not be in it)
    gives back its min and max exactly."""
    emb = nn.Embedding(2, 3)
    with torcia.no_grad():
        emb.weight.copy_(torcia.tensor([[1.0, 2.0, 3.55], [-5.1, -3.0, -2.0]]))
    emb.qconfig = tq.float_qparams_weight_only_qconfig
    q = torcia.ao.nn.quantized.Embedding.from_float(emb)
    rows = q(torcia.tensor([0, 1])).numpy()
    np.testing.assert_allclose(rows[:, [0, 2]], [[1.0, 3.55], [-5.1, -2.0]], rtol=1e-6)
    np.testing.assert_allclose(rows, emb.weight.detach().numpy(),
                               atol=np.float32(2.55 / 255) / 2 + 1e-6)


# ---------------------------------------------------------------------------------------
# torch.ao.nn.quantized.functional
# ---------------------------------------------------------------------------------------


def _functional_cases(lib):
    """(name, args after the input, kwargs, input shape) of each functional form."""
    q = lib.ao.nn.quantized.functional
    yield q.max_pool1d, (3,), {"stride": 2, "padding": 1}, (2, 3, 9)
    yield q.max_pool2d, (3,), {"stride": 2, "ceil_mode": True}, (2, 3, 7, 6)
    yield q.avg_pool2d, (2,), {"padding": 1}, (2, 3, 7, 6)
    yield q.avg_pool3d, ((1, 2, 2),), {}, (1, 2, 2, 4, 4)
    yield q.adaptive_avg_pool2d, ((3, 2),), {}, (2, 3, 7, 6)
    yield q.adaptive_avg_pool3d, (1,), {}, (1, 2, 2, 4, 4)
    yield q.interpolate, (), {"scale_factor": 2, "mode": "nearest"}, (1, 2, 3, 4)
    yield q.interpolate, (), {"size": (5, 7), "mode": "bilinear", "align_corners": False}, \
        (1, 2, 3, 4)
    yield q.upsample_bilinear, (), {"size": (5, 7)}, (1, 2, 3, 4)
    yield q.upsample_nearest, (), {"scale_factor": 3}, (1, 2, 3, 4)
    yield q.leaky_relu, (0.2,), {}, (4, 5)
    yield q.leaky_relu, (0.2,), {"scale": 0.02, "zero_point": 30}, (4, 5)
    yield q.hardswish, (0.03, 40), {}, (4, 5)
    yield q.elu, (0.03, 40), {"alpha": 0.5}, (4, 5)
    yield q.celu, (0.03, 40), {"alpha": 1.5}, (4, 5)
    yield q.hardsigmoid, (), {}, (4, 5)
    yield q.hardtanh, (-0.5, 1.0), {}, (4, 5)
    yield q.clamp, (-0.3, 0.7), {}, (4, 5)
    yield q.threshold, (0.1, -0.4), {}, (4, 5)


@needs_torch
@pytest.mark.parametrize("i", range(len(list(_functional_cases(torcia)))))
def test_quantized_functional_forms_match_torch(i):
    mine_fn, args, kwargs, shape = list(_functional_cases(torcia))[i]
    theirs_fn = list(_functional_cases(torch))[i][0]
    # an input of its own, whatever ran before: the bound on the mean step is loose for
    # a handful of outputs
    x = np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    mine = mine_fn(torcia.quantize_per_tensor(torcia.from_numpy(x), 0.02, 110, torcia.quint8),
                   *args, **kwargs)
    theirs = theirs_fn(torch.quantize_per_tensor(torch.from_numpy(x), 0.02, 110, torch.quint8),
                       *args, **kwargs)
    assert mine.shape == tuple(theirs.shape)
    assert (mine.q_scale(), mine.q_zero_point()) == pytest.approx(
        (theirs.q_scale(), theirs.q_zero_point()))
    steps = np.abs(mine.int_repr().numpy().astype(int) - theirs.int_repr().numpy().astype(int))
    assert steps.max() <= 1 and steps.mean() < 0.05


MAX_POOLS = [((2, 3, 7, 6), (3,), {"stride": 2, "padding": 1}),
             ((2, 3, 7, 6), (3,), {"stride": 2, "ceil_mode": True}),
             ((2, 3, 8, 9), ((2, 3),), {"stride": (1, 2), "padding": (1, 1), "dilation": 2}),
             ((2, 3, 5, 5), (2,), {"stride": 2, "padding": 1, "ceil_mode": True}),
             ((3, 9, 8), (3,), {"stride": 1, "padding": 1, "dilation": (2, 1)})]


@needs_torch
@pytest.mark.parametrize("dtype, zero_point", [("quint8", 110), ("qint8", -3)])
@pytest.mark.parametrize("shape, args, kwargs", MAX_POOLS)
def test_quantized_max_pool2d_gives_torchs_integers(shape, args, kwargs, dtype, zero_point):
    x = RNG.standard_normal(shape).astype(np.float32)
    mine = torcia.ao.nn.quantized.functional.max_pool2d(torcia.quantize_per_tensor(
        torcia.from_numpy(x), 0.02, zero_point, getattr(torcia, dtype)), *args, **kwargs)
    theirs = torch.ao.nn.quantized.functional.max_pool2d(torch.quantize_per_tensor(
        torch.from_numpy(x), 0.02, zero_point, getattr(torch, dtype)), *args, **kwargs)
    assert (mine.q_scale(), mine.q_zero_point(), mine.dtype.name) == (
        theirs.q_scale(), theirs.q_zero_point(), dtype)
    np.testing.assert_array_equal(mine.int_repr().numpy(), theirs.int_repr().numpy())


def test_quantized_max_pool2d_refuses_padding_past_half_the_window():
    x = torcia.quantize_per_tensor(torcia.rand(1, 1, 6, 6), 0.1, 0, torcia.quint8)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        torcia.ao.nn.quantized.functional.max_pool2d(x, 2, padding=2)


def test_convolution_follows_its_weight_written_in_place():
    """The convolutions hand the kernels a frozen copy of their weight (which a native
    kernel packs once): a write through torcia or a new buffer makes a new copy."""
    model = nn.Sequential(tq.QuantStub(), nn.Conv2d(3, 4, 3, padding=1),
                          tq.DeQuantStub()).eval()
    model.qconfig = tq.get_default_qconfig("x86")
    prepared = tq.prepare(model)
    prepared(torcia.randn(2, 3, 6, 6))
    qmodel = tq.convert(prepared)
    conv = qmodel[1]
    x = qmodel[0](torcia.randn(2, 3, 6, 6))

    def reference():
        return quantized_conv2d(
            x.int_repr().numpy(), conv.weight_int8.numpy(), conv.weight_scales.numpy(),
            conv.bias_.numpy(), x_scale=x.q_scale(), x_zero_point=x.q_zero_point(),
            padding=((1, 1), (1, 1)), out_scale=conv.scale, out_zero_point=conv.zero_point)

    np.testing.assert_array_equal(conv(x).int_repr().numpy(), reference())
    with torcia.no_grad():
        conv.weight_int8.copy_(-conv.weight_int8.clamp(min=-127))
    np.testing.assert_array_equal(conv(x).int_repr().numpy(), reference())
    conv.weight_int8 = torcia.from_numpy(RNG.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8))
    np.testing.assert_array_equal(conv(x).int_repr().numpy(), reference())


AVERAGES = [("avg_pool2d", (2, 3, 7, 6), (2,), {"padding": 1}),
            ("avg_pool2d", (2, 3, 7, 6), (3,), {"stride": 2, "ceil_mode": True}),
            ("avg_pool2d", (2, 3, 7, 6), (3,), {"stride": 2, "padding": 1,
                                                "count_include_pad": False}),
            ("avg_pool2d", (2, 3, 7, 6), (2,), {"divisor_override": 3}),
            ("avg_pool3d", (1, 2, 2, 4, 4), ((1, 2, 2),), {}),
            ("avg_pool3d", (1, 2, 3, 5, 4), (3,), {"padding": 1, "stride": 2}),
            ("adaptive_avg_pool2d", (2, 3, 7, 6), ((3, 2),), {}),
            ("adaptive_avg_pool3d", (1, 2, 5, 4, 7), ((2, 3, 3),), {})]


@needs_torch
@pytest.mark.parametrize("dtype, zero_point", [("quint8", 110), ("qint8", -3)])
@pytest.mark.parametrize("name, shape, args, kwargs", AVERAGES)
def test_quantized_averages_give_torchs_integers(name, shape, args, kwargs, dtype,
                                                 zero_point):
    """Bug: averaging the dequantized floats put sums on a half step a rounding error off
    it, to the other side of torch's round-half-to-even of the integers' mean."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        mine = getattr(tq_functional(torcia), name)(
            torcia.quantize_per_tensor(torcia.from_numpy(x), 0.02, zero_point,
                                       getattr(torcia, dtype)), *args, **kwargs)
        theirs = getattr(tq_functional(torch), name)(
            torch.quantize_per_tensor(torch.from_numpy(x), 0.02, zero_point,
                                      getattr(torch, dtype)), *args, **kwargs)
        assert (mine.q_scale(), mine.q_zero_point()) == (theirs.q_scale(),
                                                         theirs.q_zero_point())
        assert mine.int_repr().tolist() == theirs.int_repr().tolist()


@needs_torch
@pytest.mark.parametrize("module", ["AvgPool2d", "AdaptiveAvgPool2d"])
def test_converted_average_pool_gives_torchs_integers(module):
    args = (2,) if module == "AvgPool2d" else ((3, 2),)
    x = (np.random.default_rng(3).standard_normal((2, 3, 7, 6)) * 3).astype(np.float32)
    outs = []
    for ns in (torcia, torch):
        lib = ns.ao.quantization
        model = ns.nn.Sequential(lib.QuantStub(), getattr(ns.nn, module)(*args),
                                 lib.DeQuantStub()).eval()
        model.qconfig = lib.default_qconfig
        prepared = lib.prepare(model)
        prepared(ns.from_numpy(x))
        q = lib.convert(prepared)
        outs.append(q[1](q[0](ns.from_numpy(x))).int_repr().numpy())
    assert outs[0].tolist() == outs[1].tolist()


def tq_functional(ns):
    return ns.ao.nn.quantized.functional


@needs_torch
@pytest.mark.parametrize("nd, per_channel", [(1, False), (2, True), (3, True)])
def test_quantized_functional_products_match_torch(nd, per_channel):
    x = RNG.standard_normal((2, 4) + (6,) * nd).astype(np.float32)
    w = RNG.standard_normal((6, 2) + (3,) * nd).astype(np.float32) * 0.3
    b = RNG.standard_normal(6).astype(np.float32)
    scales = (np.abs(w).reshape(6, -1).max(1) / 127).astype(np.float64)

    def weight(lib, arr):
        if per_channel:
            return lib.quantize_per_channel(lib.from_numpy(arr), lib.from_numpy(scales),
                                            lib.from_numpy(np.zeros(6, np.int64)), 0,
                                            lib.qint8)
        return lib.quantize_per_tensor(lib.from_numpy(arr), float(scales.max()), 0, lib.qint8)

    kw = {"stride": 2, "padding": 1, "groups": 2, "scale": 0.05, "zero_point": 64}
    got, want = (getattr(lib.ao.nn.quantized.functional, f"conv{nd}d")(
        lib.quantize_per_tensor(lib.from_numpy(x), 0.03, 128, lib.quint8), weight(lib, w),
        lib.from_numpy(b), **kw) for lib in (torcia, torch))
    steps = np.abs(got.int_repr().numpy().astype(int) - want.int_repr().numpy().astype(int))
    assert got.shape == tuple(want.shape) and steps.max() <= 1
    xl = np.ascontiguousarray(x.reshape(-1, x.shape[-1])[:, :5])
    wl = np.ascontiguousarray(w.reshape(6, -1)[:, :5])
    got, want = (lib.ao.nn.quantized.functional.linear(
        lib.quantize_per_tensor(lib.from_numpy(xl), 0.03, 128, lib.quint8),
        lib.quantize_per_tensor(lib.from_numpy(wl), 0.01, 0, lib.qint8), lib.from_numpy(b),
        0.04, 70) for lib in (torcia, torch))
    steps = np.abs(got.int_repr().numpy().astype(int) - want.int_repr().numpy().astype(int))
    assert got.shape == tuple(want.shape) and steps.max() <= 1


def test_quantized_functional_refuses_float_weights_and_other_modes():
    import torcia.ao.nn.quantized.functional as qF

    x = torcia.quantize_per_tensor(torcia.rand(1, 2, 4, 4), 0.01, 0, torcia.quint8)
    with pytest.raises(ValueError, match="must be a qint8 quantized tensor"):
        qF.conv2d(x, torcia.ones(2, 2, 3, 3), None)
    with pytest.raises(ValueError, match="Only 'nearest' and 'bilinear'"):
        qF.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(RuntimeError, match="expects a quantized tensor"):
        qF.hardtanh(torcia.ones(2))


_DYNAMIC_CONVS = [
    ("Conv1d", lambda lib: lib.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 11)),
    ("Conv2d", lambda lib: lib.nn.Conv2d(3, 4, 3, padding=1, dilation=2), (2, 3, 8, 7)),
    ("Conv3d", lambda lib: lib.nn.Conv3d(2, 3, (1, 3, 3), padding=(0, 1, 1)), (1, 2, 3, 5, 5)),
    ("ConvTranspose1d", lambda lib: lib.nn.ConvTranspose1d(4, 6, 3, stride=2), (2, 4, 7)),
    ("ConvTranspose2d", lambda lib: lib.nn.ConvTranspose2d(3, 4, 2, stride=2), (2, 3, 4, 5)),
    ("ConvTranspose3d", lambda lib: lib.nn.ConvTranspose3d(2, 3, (1, 2, 2), stride=(1, 2, 2)),
     (1, 2, 2, 3, 3)),
]


def test_dynamic_linear_and_lstm_follow_their_weights_written_in_place():
    """Dynamic layers hand the kernels frozen copies of their int8 weights (packed once by a
    native kernel): a write through torcia or a new buffer makes new copies."""
    torcia.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5))
    lstm = nn.LSTM(5, 4, num_layers=2)
    q = tq.quantize_dynamic(model, {nn.Linear}, dtype=torcia.qint8)[0]
    ql = tq.quantize_dynamic(nn.Sequential(lstm), {nn.LSTM}, dtype=torcia.qint8)[0]
    x = torcia.randn(3, 6)
    seq = torcia.randn(7, 2, 5)

    def fresh(module):  # the same weights in a module whose kernels saw none of them
        return copy.deepcopy(module)

    for _ in range(2):
        assert torcia.equal(q(x), fresh(q)(x))
        assert torcia.equal(ql(seq)[0], fresh(ql)(seq)[0])
        with torcia.no_grad():
            q.weight_int8.copy_(-q.weight_int8.clamp(min=-127))
            for name, buf in ql.named_buffers():
                if name.startswith("weight_"):
                    buf.copy_(-buf.clamp(min=-127))
    q.weight_int8 = torcia.from_numpy(RNG.integers(-128, 128, (5, 6)).astype(np.int8))
    assert torcia.equal(q(x), fresh(q)(x))


@needs_torch
@pytest.mark.parametrize("name, make, shape", _DYNAMIC_CONVS, ids=[c[0] for c in _DYNAMIC_CONVS])
@pytest.mark.parametrize("reduce_range", [True, False])
def test_dynamic_convolutions_match_torch(name, make, shape, reduce_range, monkeypatch):
    monkeypatch.setattr(torch.backends.quantized, "engine", "fbgemm")  # see the static test
    torcia.manual_seed(3)
    mine, theirs = make(torcia), make(torch)
    _same_weights(mine, theirs)
    mine.qconfig = tq.default_dynamic_qconfig
    theirs.qconfig = torch.ao.quantization.default_dynamic_qconfig
    q_mine = getattr(torcia.ao.nn.quantized.dynamic, name).from_float(mine)
    q_theirs = getattr(torch.ao.nn.quantized.dynamic, name).from_float(theirs)
    x = RNG.standard_normal(shape).astype(np.float32)
    got = q_mine(torcia.from_numpy(x), reduce_range).numpy()
    want = q_theirs(torch.from_numpy(x), reduce_range).numpy()
    # the same integers requantized at the same step: equal but for float rounding
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    with pytest.raises(ValueError, match="Input shape must be"):
        q_mine(torcia.from_numpy(x[0]))


@needs_torch
@pytest.mark.parametrize("dim, shape", [(1, (3, 5)), (-1, (2, 3, 4)), (None, (2, 6)),
                                        (None, (2, 3, 4))])
def test_quantized_softmax_matches_torch(dim, shape):
    x = RNG.standard_normal(shape).astype(np.float32) * 3
    got, want = (lib.ao.nn.quantized.Softmax(dim, 1 / 256, 0)(
        lib.quantize_per_tensor(lib.from_numpy(x), 0.05, 128, lib.quint8))
        for lib in (torcia, torch))
    steps = np.abs(got.int_repr().numpy().astype(int) - want.int_repr().numpy().astype(int))
    assert steps.max() <= 1


@needs_torch
def test_quantized_prelu_is_the_float_prelu_of_its_quantized_slope():
    """Against torch's float PReLU of the dequantized input and slope (torch 2.13's own
    quantized PReLU halves positive inputs, on every engine: 0.6 -> 0.3 at equal input
    and output scales, which its float PReLU does not)."""
    model = nn.Sequential(tq.QuantStub(), nn.PReLU(3), tq.DeQuantStub()).eval()
    with torcia.no_grad():
        model[1].weight.copy_(torcia.tensor([0.25, -0.1, 0.6]))
    model.qconfig = tq.QConfig(activation=tq.MinMaxObserver,
                               weight=tq.MinMaxObserver.with_args(dtype=torcia.quint8))
    model = tq.prepare(model)
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    model(torcia.from_numpy(x))
    model = tq.convert(model)
    assert type(model[1]).__name__ == "PReLU"
    q_in = model[0](torcia.from_numpy(x))
    got = model[1](q_in)
    slope = model[1].weight.dequantize().numpy()
    want = torch.nn.functional.prelu(torch.from_numpy(q_in.dequantize().numpy()),
                                     torch.from_numpy(slope))
    want_q = torch.quantize_per_tensor(want, model[1].scale, model[1].zero_point, torch.quint8)
    steps = np.abs(got.int_repr().numpy().astype(int) - want_q.int_repr().numpy().astype(int))
    assert steps.max() <= 1
    np.testing.assert_allclose(slope, [0.25, -0.1, 0.6], atol=model[1].weight.q_scale())
