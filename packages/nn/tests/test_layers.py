"""Layers against hand-derived values and NumPy formulas, PyTorch parity given the same
weights, default initialisation statistics, and the errors for bad input shapes."""

import math

import numpy as np
import pytest

import torcia
from torcia import nn

RNG = np.random.default_rng(0)


def t(a, **kw):
    return torcia.tensor(np.asarray(a, dtype=np.float32), **kw)


def value(x):
    return x.detach().numpy()


# ----- hand-derived values and NumPy formulas --------------------------------------------


def test_linear_is_x_at_w_transposed_plus_b():
    lin = nn.Linear(2, 3)
    lin.load_state_dict({"weight": t([[1, 0], [0, 1], [1, 1]]), "bias": t([0.5, -1, 0])})
    np.testing.assert_array_equal(value(lin(t([[2, 3]]))), [[2.5, 2, 5]])
    x = RNG.normal(size=(4, 5, 2)).astype(np.float32)
    expected = x @ value(lin.weight).T + value(lin.bias)
    np.testing.assert_allclose(value(lin(t(x))), expected, rtol=1e-6)


def test_bilinear_formula():
    m = nn.Bilinear(2, 3, 4)
    x1, x2 = RNG.normal(size=(5, 2)), RNG.normal(size=(5, 3))
    w, b = value(m.weight).astype(np.float64), value(m.bias)
    expected = np.einsum("ni,oij,nj->no", x1, w, x2) + b
    np.testing.assert_allclose(value(m(t(x1), t(x2))), expected, rtol=1e-5, atol=1e-6)


def _conv2d_reference(x, w, b, stride, padding, dilation, groups):
    """Direct loops over the definition of a grouped, strided, dilated cross-correlation."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg,
                          i * stride:i * stride + dilation * (kh - 1) + 1:dilation,
                          j * stride:j * stride + dilation * (kw - 1) + 1:dilation]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3)) + b[oc]
    return out


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (1, 1, 1, 2)])
def test_conv2d_matches_the_definition(stride, padding, dilation, groups):
    conv = nn.Conv2d(4, 6, 3, stride=stride, padding=padding, dilation=dilation, groups=groups)
    x = RNG.normal(size=(2, 4, 7, 6)).astype(np.float32)
    expected = _conv2d_reference(x, value(conv.weight), value(conv.bias), stride, padding,
                                 dilation, groups)
    np.testing.assert_allclose(value(conv(t(x))), expected, rtol=1e-4, atol=1e-5)


def test_conv2d_same_padding_keeps_the_size_and_reflect_pads_by_mirroring():
    conv = nn.Conv2d(1, 1, 3, padding="same", padding_mode="reflect", bias=False)
    conv.load_state_dict({"weight": torcia.ones(1, 1, 3, 3)})
    x = t([[[[1, 2], [3, 4]]]])
    # reflect-padded: [[4,3,4,3],[2,1,2,1],[4,3,4,3],[2,1,2,1]]; the four 3x3 window sums
    # are 11+5+11, 10+4+10, 5+11+5 and 4+10+4
    np.testing.assert_array_equal(value(conv(x)), [[[[27, 24], [21, 18]]]])
    even = nn.Conv2d(1, 1, 4, padding="same")
    assert even(torcia.ones(1, 1, 5, 5)).shape == torcia.Size([1, 1, 5, 5])


def test_conv_transpose2d_scatters_each_input_pixel():
    up = nn.ConvTranspose2d(1, 1, 2, stride=2, bias=False)
    up.load_state_dict({"weight": t([[[[1, 2], [3, 4]]]])})
    np.testing.assert_array_equal(value(up(t([[[[1, 10]]]]))),
                                  [[[[1, 2, 10, 20], [3, 4, 30, 40]]]])
    assert up(torcia.ones(1, 1, 3, 3), output_size=[7, 7]).shape == torcia.Size([1, 1, 7, 7])
    with pytest.raises(ValueError, match="valid sizes range from"):
        up(torcia.ones(1, 1, 3, 3), output_size=[9, 9])


def test_pooling_hand_values():
    x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(value(nn.MaxPool2d(2)(x)), [[[[5, 7], [13, 15]]]])
    np.testing.assert_array_equal(value(nn.AvgPool2d(2)(x)), [[[[2.5, 4.5], [10.5, 12.5]]]])
    np.testing.assert_array_equal(value(nn.MaxPool2d(3, stride=1)(x)), [[[[10, 11], [14, 15]]]])
    np.testing.assert_array_equal(value(nn.AdaptiveAvgPool2d(1)(x)), [[[[7.5]]]])
    np.testing.assert_array_equal(value(nn.AdaptiveMaxPool2d((1, 2))(x)), [[[[13, 15]]]])
    line = t([[[1, 5, 2, 0, 3, 3]]])
    np.testing.assert_array_equal(value(nn.MaxPool1d(2)(line)), [[[5, 2, 3]]])
    np.testing.assert_allclose(value(nn.AvgPool1d(3)(line)), [[[8 / 3, 2]]], rtol=1e-7)
    out, idx = nn.MaxPool2d(2, return_indices=True)(x)
    np.testing.assert_array_equal(idx.numpy(), [[[[5, 7], [13, 15]]]])


def test_batchnorm_training_statistics_and_running_update():
    bn = nn.BatchNorm1d(3)
    x = RNG.normal(2.0, 3.0, size=(8, 3)).astype(np.float32)
    y = value(bn(t(x)))
    mean, var = x.mean(0), x.var(0)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value(bn.running_mean), 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(value(bn.running_var), 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    z = RNG.normal(size=(4, 3)).astype(np.float32)
    expected = (z - value(bn.running_mean)) / np.sqrt(value(bn.running_var) + 1e-5)
    np.testing.assert_allclose(value(bn(t(z))), expected, rtol=1e-5, atol=1e-6)
    assert bn.num_batches_tracked.item() == 1


def test_batchnorm_momentum_none_is_a_cumulative_average():
    bn = nn.BatchNorm2d(2, momentum=None)
    batches = [RNG.normal(k, 1.0, size=(4, 2, 3, 3)).astype(np.float32) for k in range(3)]
    for b in batches:
        bn(t(b))
    means = [b.mean(axis=(0, 2, 3)) for b in batches]
    np.testing.assert_allclose(value(bn.running_mean), np.mean(means, axis=0), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 3


def test_batchnorm_without_running_stats_uses_batch_statistics_in_eval():
    bn = nn.BatchNorm1d(2, affine=False, track_running_stats=False).eval()
    assert bn.running_mean is None and list(bn.state_dict()) == []
    x = RNG.normal(5.0, 2.0, size=(6, 2)).astype(np.float32)
    np.testing.assert_allclose(value(bn(t(x))), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5),
                               rtol=1e-4, atol=1e-5)


def test_layer_norm_and_group_norm_formulas():
    x = RNG.normal(size=(2, 4, 3)).astype(np.float32)
    ln = nn.LayerNorm([4, 3])
    mu, var = x.mean(axis=(1, 2), keepdims=True), x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(value(ln(t(x))), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4,
                               atol=1e-5)
    gn = nn.GroupNorm(2, 4)
    g = x.reshape(2, 2, 6)
    expected = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(value(gn(t(x))), expected.reshape(x.shape), rtol=1e-4, atol=1e-5)


def test_dropout_scales_survivors_and_is_identity_in_eval():
    torcia.manual_seed(0)
    drop = nn.Dropout(0.25)
    y = value(drop(torcia.ones(20000)))
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    drop.eval()
    np.testing.assert_array_equal(value(drop(torcia.ones(5))), np.ones(5))
    channels = value(nn.Dropout2d(0.5)(torcia.ones(2, 50, 3, 3)))
    per_channel = channels.reshape(2, 50, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)
    rows = value(nn.Dropout1d(0.5)(torcia.ones(4, 50, 3)))
    assert np.all((rows == 0).all(-1) | (rows == 2).all(-1))


def test_alpha_dropout_keeps_zero_mean_and_unit_variance():
    torcia.manual_seed(0)
    x = torcia.randn(200000)
    y = value(nn.AlphaDropout(0.3)(x))
    assert abs(y.mean()) < 0.01 and abs(y.std() - 1) < 0.01
    assert (y != value(x)).mean() > 0.25
    np.testing.assert_array_equal(value(nn.AlphaDropout(0.3).eval()(x)), value(x))


def test_embedding_lookup_and_padding_gradient():
    emb = nn.Embedding(5, 2, padding_idx=1)
    np.testing.assert_array_equal(value(emb.weight[1]), [0, 0])
    idx = torcia.tensor([[1, 3], [3, 0]])
    np.testing.assert_array_equal(value(emb(idx)), value(emb.weight)[idx.numpy()])
    emb(idx).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy(),
                                  [[1, 1], [0, 0], [0, 0], [2, 2], [0, 0]])
    pre = nn.Embedding.from_pretrained(t([[1, 2], [3, 4]]))
    assert not pre.weight.requires_grad
    assert nn.Embedding(4, 2, padding_idx=-1).padding_idx == 3
    with pytest.raises(ValueError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(4, 2, padding_idx=4)


def test_upsample_pixel_shuffle_flatten():
    x = t([[[[1, 2], [3, 4]]]])
    np.testing.assert_array_equal(value(nn.Upsample(scale_factor=2)(x))[0, 0],
                                  [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]])
    # align_corners=True on 2 -> 3 samples the midpoint
    np.testing.assert_allclose(
        value(nn.Upsample(size=(3, 3), mode="bilinear", align_corners=True)(x))[0, 0],
        [[1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]])
    y = RNG.normal(size=(2, 8, 3, 3)).astype(np.float32)
    expected = y.reshape(2, 2, 2, 2, 3, 3).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 6)
    np.testing.assert_array_equal(value(nn.PixelShuffle(2)(t(y))), expected)
    np.testing.assert_array_equal(value(nn.PixelUnshuffle(2)(t(expected))), y)
    assert nn.Flatten(0, 1)(torcia.ones(2, 3, 4)).shape == torcia.Size([6, 4])
    assert nn.Unflatten(-1, (2, 2))(torcia.ones(3, 4)).shape == torcia.Size([3, 2, 2])


ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.ReLU6(), lambda x: np.clip(x, 0, 6)),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.PReLU(), lambda x: np.where(x > 0, x, 0.25 * x)),
    (nn.ELU(0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    (nn.SELU(), lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * np.expm1(x))),
    (nn.GELU(), lambda x: x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    (nn.GELU("tanh"), lambda x: 0.5 * x * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Mish(), lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Softplus(beta=2.0), lambda x: np.log1p(np.exp(2 * x)) / 2),
    (nn.Hardtanh(-0.5, 2.0), lambda x: np.clip(x, -0.5, 2.0)),
    (nn.Hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (nn.LogSoftmax(dim=1), lambda x: x - np.log(np.exp(x).sum(1, keepdims=True))),
]


@pytest.mark.parametrize("module,formula", ACTIVATIONS, ids=lambda a: repr(a)[:24])
def test_activation_formulas(module, formula):
    x = np.linspace(-4, 4, 24).reshape(4, 6).astype(np.float64)
    np.testing.assert_allclose(value(module(torcia.tensor(x))), formula(x), rtol=1e-6,
                               atol=1e-7)


def test_inplace_activation_writes_into_its_input():
    x = t([-1.0, 2.0])
    y = nn.ReLU(inplace=True)(x)
    assert y.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(x.numpy(), [0, 2])


# ----- PyTorch parity given the same weights -------------------------------------------

# (constructor name, args, kwargs, input shape or "index" for integer input)
LAYERS = [
    ("Linear", (5, 3), {}, (4, 5)),
    ("Linear", (5, 3), {"bias": False}, (2, 4, 5)),
    ("Bilinear", (3, 4, 2), {}, None),
    ("CosineSimilarity", (), {"dim": 1}, "pair"),
    ("PairwiseDistance", (), {"p": 1.5, "keepdim": True}, "pair"),
    ("Conv1d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 9)),
    ("Conv1d", (4, 4, 3), {"padding": "same", "dilation": 2, "groups": 2}, (2, 4, 9)),
    ("Conv2d", (3, 4, 3), {}, (2, 3, 7, 7)),
    ("Conv2d", (4, 6, (3, 2)), {"stride": (2, 1), "padding": (1, 0), "groups": 2},
     (2, 4, 7, 6)),
    ("Conv2d", (2, 3, 4), {"padding": "same", "padding_mode": "reflect"}, (1, 2, 6, 6)),
    ("Conv2d", (2, 3, 3), {"padding": 1, "padding_mode": "circular", "bias": False},
     (1, 2, 5, 5)),
    ("Conv2d", (2, 3, 3), {"padding": 2, "padding_mode": "replicate", "dilation": 2},
     (1, 2, 5, 5)),
    ("ConvTranspose2d", (3, 2, 3), {"stride": 2, "padding": 1, "output_padding": 1},
     (2, 3, 4, 4)),
    ("ConvTranspose2d", (4, 2, 2), {"groups": 2, "dilation": 2}, (1, 4, 3, 3)),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, (2, 3, 10)),
    ("MaxPool2d", (3,), {"stride": 2, "ceil_mode": True}, (2, 3, 8, 8)),
    ("MaxPool2d", (2,), {"dilation": 2}, (1, 2, 7, 7)),
    ("AvgPool1d", (3,), {"padding": 1, "count_include_pad": False}, (2, 3, 10)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1}, (2, 3, 8, 8)),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveMaxPool2d", (3,), {}, (2, 3, 7, 8)),
    ("BatchNorm1d", (3,), {}, (6, 3)),
    ("BatchNorm1d", (3,), {"momentum": None}, (4, 3, 5)),
    ("BatchNorm2d", (3,), {"affine": False}, (4, 3, 5, 5)),
    ("LayerNorm", ((4, 5),), {}, (3, 4, 5)),
    ("LayerNorm", (5,), {"bias": False, "eps": 1e-3}, (3, 5)),
    ("GroupNorm", (2, 4), {}, (3, 4, 5, 2)),
    ("Embedding", (10, 4), {"padding_idx": 2}, "index"),
    ("Upsample", (), {"scale_factor": 2, "mode": "nearest"}, (1, 2, 3, 4)),
    ("Upsample", (), {"size": (5, 7), "mode": "bilinear"}, (1, 2, 3, 4)),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True},
     (1, 2, 4, 4)),
    ("PixelShuffle", (2,), {}, (2, 8, 3, 3)),
    ("PReLU", (3,), {"init": 0.1}, (2, 3, 4)),
    ("ELU", (), {"alpha": 0.7}, (3, 4)),
    ("GELU", (), {"approximate": "tanh"}, (3, 4)),
    ("Softplus", (), {"beta": 3.0, "threshold": 1.0}, (3, 4)),
    ("Hardswish", (), {}, (3, 4)),
    ("Mish", (), {}, (3, 4)),
    ("LogSoftmax", (), {"dim": 0}, (3, 4)),
    ("Conv3d", (2, 4, (3, 2, 2)), {"stride": (1, 2, 1), "padding": 1}, (1, 2, 5, 6, 4)),
    ("ConvTranspose1d", (3, 4, 3), {"stride": 3, "padding": 1, "output_padding": 2},
     (2, 3, 5)),
    ("MaxPool3d", (2,), {"stride": 1}, (1, 2, 4, 4, 3)),
    ("AvgPool3d", ((2, 2, 1),), {}, (1, 2, 4, 4, 3)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveMaxPool1d", (3,), {}, (2, 3, 10)),
    ("BatchNorm3d", (2,), {}, (3, 2, 2, 3, 2)),
    ("InstanceNorm1d", (3,), {}, (2, 3, 6)),
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 4, 4)),
    ("ZeroPad2d", ((1, 2, 0, 3),), {}, (1, 2, 3, 3)),
    ("ConstantPad1d", ((2, 1), 3.5), {}, (2, 3, 4)),
    ("ReflectionPad1d", (2,), {}, (2, 3, 4)),
    ("ReflectionPad2d", ((1, 1, 2, 0),), {}, (1, 2, 4, 4)),
    ("ReplicationPad2d", (2,), {}, (1, 2, 3, 3)),
    ("CircularPad1d", ((1, 2),), {}, (2, 3, 4)),
    ("Unfold", (2,), {"stride": 2, "padding": 1}, (2, 3, 5, 5)),
    ("Fold", ((4, 5), 2), {}, (2, 8, 12)),
    ("Threshold", (0.1, -2.0), {}, (3, 4)),
    ("Hardsigmoid", (), {}, (3, 4)),
    ("CELU", (0.5,), {}, (3, 4)),
    ("LogSigmoid", (), {}, (3, 4)),
    ("Softsign", (), {}, (3, 4)),
    ("Tanhshrink", (), {}, (3, 4)),
    ("GLU", (0,), {}, (4, 3)),
    ("Softmin", (1,), {}, (3, 4)),
    ("Hardshrink", (0.3,), {}, (3, 4)),
    ("Softshrink", (), {}, (3, 4)),
]


def _pair_of(name, args, kwargs):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    ours = getattr(nn, name)(*args, **kwargs)
    state = {k: torcia.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    return torch, ours, theirs


@pytest.mark.torch
@pytest.mark.parametrize("name,args,kwargs,shape", LAYERS,
                         ids=[f"{n}-{i}" for i, (n, *_) in enumerate(LAYERS)])
def test_layer_matches_torch(name, args, kwargs, shape):
    torch, ours, theirs = _pair_of(name, args, kwargs)
    if name == "Bilinear":
        xs = [RNG.normal(size=(5, n)).astype(np.float32) for n in args[:2]]
    elif shape == "pair":
        xs = [RNG.normal(size=(5, 3)).astype(np.float32) for _ in range(2)]
    elif shape == "index":
        xs = [RNG.integers(0, args[0], size=(3, 4))]
    else:
        xs = [RNG.normal(size=shape).astype(np.float32)]
    float_input = shape != "index"
    ours_in = [torcia.tensor(x, requires_grad=float_input) for x in xs]
    theirs_in = [torch.tensor(x, requires_grad=float_input) for x in xs]
    mine, ref = ours(*ours_in), theirs(*theirs_in)
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(value(mine), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    weights = RNG.normal(size=tuple(ref.shape)).astype(np.float32)
    (mine * torcia.tensor(weights)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    for a, b in zip(ours_in, theirs_in):
        if float_input:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)
    grads = {k: p.grad for k, p in theirs.named_parameters()}
    for key, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[key].numpy(), rtol=1e-4, atol=1e-4,
                                   err_msg=key)
    for key, buf in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), buf.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=key)


@pytest.mark.torch
def test_batchnorm_eval_matches_torch_after_training_steps():
    torch, ours, theirs = _pair_of("BatchNorm2d", (3,), {"momentum": 0.3})
    for _ in range(3):
        x = RNG.normal(1.0, 2.0, size=(4, 3, 2, 2)).astype(np.float32)
        ours(torcia.tensor(x))
        theirs(torch.tensor(x))
    ours.eval()
    theirs.eval()
    x = RNG.normal(size=(2, 3, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(value(ours(torcia.tensor(x))),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["ReLU", "ReLU6", "LeakyReLU", "SELU", "SiLU", "Sigmoid",
                                  "Tanh", "Hardtanh"])
def test_activation_matches_torch(name):
    torch = pytest.importorskip("torch")
    x = RNG.normal(0, 3, size=(5, 7)).astype(np.float32)
    ours, theirs = getattr(nn, name)(), getattr(torch.nn, name)()
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(value(ours(torcia.tensor(x))),
                               theirs(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-7)


# ----- default initialisation ----------------------------------------------------------


def _uniform_bound_ok(values, bound):
    """Within ±bound, reaching near it, with the std of U(-bound, bound)."""
    assert np.abs(values).max() <= bound + 1e-7
    assert np.abs(values).max() > 0.95 * bound
    assert abs(values.std() - bound / math.sqrt(3)) < 0.05 * bound


def test_linear_and_conv_default_init_follow_pytorchs_formulas():
    torcia.manual_seed(0)
    lin = nn.Linear(100, 300)
    _uniform_bound_ok(value(lin.weight).ravel(), 1 / math.sqrt(100))
    _uniform_bound_ok(value(lin.bias), 1 / math.sqrt(100))
    conv = nn.Conv2d(8, 64, 3, groups=2)
    fan_in = 4 * 9
    _uniform_bound_ok(value(conv.weight).ravel(), 1 / math.sqrt(fan_in))
    _uniform_bound_ok(value(conv.bias), 1 / math.sqrt(fan_in))
    up = nn.ConvTranspose2d(16, 32, 3)
    _uniform_bound_ok(value(up.weight).ravel(), 1 / math.sqrt(32 * 9))
    bil = nn.Bilinear(25, 10, 40)
    _uniform_bound_ok(value(bil.weight).ravel(), 1 / math.sqrt(25))


def test_embedding_norm_and_prelu_defaults():
    torcia.manual_seed(0)
    w = value(nn.Embedding(1000, 50).weight)
    assert abs(w.mean()) < 0.01 and abs(w.std() - 1) < 0.01
    for layer in (nn.BatchNorm2d(4), nn.LayerNorm(4), nn.GroupNorm(2, 4)):
        np.testing.assert_array_equal(value(layer.weight), np.ones(4))
        np.testing.assert_array_equal(value(layer.bias), np.zeros(4))
    bn = nn.BatchNorm1d(4)
    np.testing.assert_array_equal(value(bn.running_var), np.ones(4))
    assert bn.num_batches_tracked.dtype == torcia.int64
    np.testing.assert_array_equal(value(nn.PReLU(3).weight), [0.25] * 3)


@pytest.mark.torch
def test_parameters_have_pytorchs_state_dict_keys():
    torch = pytest.importorskip("torch")
    for name, args, kwargs, _ in LAYERS:
        ours = getattr(nn, name)(*args, **kwargs)
        theirs = getattr(torch.nn, name)(*args, **kwargs)
        assert list(ours.state_dict()) == list(theirs.state_dict()), name
        assert [tuple(v.shape) for v in ours.state_dict().values()] == [
            tuple(v.shape) for v in theirs.state_dict().values()], name


# ----- bad input --------------------------------------------------------------------------


def test_bad_input_shapes_name_the_layer_expected_and_given():
    with pytest.raises(RuntimeError) as info:
        nn.Linear(3, 5)(torcia.ones(4, 7))
    assert str(info.value) == ("Linear(in_features=3, out_features=5): expected input with "
                               "last dimension 3, got shape [4, 7]")
    with pytest.raises(RuntimeError, match=r"Conv2d\(3, 8, kernel_size=\(3, 3\), stride=\(1, "
                                           r"1\)\): expected input of shape \[N, 3, H, W\] or "
                                           r"\[3, H, W\], got shape \[2, 1, 8, 8\]"):
        nn.Conv2d(3, 8, 3)(torcia.ones(2, 1, 8, 8))
    with pytest.raises(RuntimeError, match=r"expected input of shape \[N, 2, L\]"):
        nn.Conv1d(2, 4, 3)(torcia.ones(3, 8))
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(torcia.ones(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"BatchNorm1d\(3, .*expected input with 3 channels"):
        nn.BatchNorm1d(3)(torcia.ones(2, 4))
    with pytest.raises(RuntimeError, match=r"LayerNorm\(\(4,\), .*got shape \[2, 3\]"):
        nn.LayerNorm(4)(torcia.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"GroupNorm\(2, 4, .*\[N, 4, \*\], got shape"):
        nn.GroupNorm(2, 4)(torcia.ones(2, 6))
    with pytest.raises(RuntimeError, match=r"MaxPool2d\(.*a 3-D or 4-D input"):
        nn.MaxPool2d(2)(torcia.ones(4, 4))
    with pytest.raises(RuntimeError, match="expected input2 with last dimension 4"):
        nn.Bilinear(3, 4, 2)(torcia.ones(1, 3), torcia.ones(1, 5))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv2d(3, 6, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(3, 6, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 6, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(3, 6, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="approximate argument"):
        nn.GELU("fast")


@pytest.mark.parametrize("layer,function", [
    (nn.Linear(2, 2), "linear"), (nn.Conv2d(1, 1, 1), "conv2d"), (nn.MaxPool1d(2), "max_pool1d"),
    (nn.BatchNorm1d(2), "batch_norm"), (nn.LayerNorm(2), "layer_norm"),
    (nn.GroupNorm(1, 2), "group_norm"), (nn.InstanceNorm1d(2), "instance_norm")])
def test_a_non_tensor_input_is_a_type_error_in_pytorchs_words(layer, function):
    with pytest.raises(TypeError, match=rf"^{function}\(\): argument 'input' \(position 1\) "
                                        r"must be Tensor, not list$"):
        layer([[1.0, 2.0]])
