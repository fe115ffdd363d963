"""A device backend that implements only the primitive ops runs whole training steps:
the composite ops (linear, cross_entropy, conv, max_pool and their fused backward ops)
run through their default decompositions; autograd records such an op once where it has a
backward formula, else the ops it decomposes into. The results match the "cpu" device's.

The device "prims" is a test plugin holding NumPy arrays in memory of its own (transfers
copy), with the reference kernels of the primitives only.
"""

import contextlib
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import library, nn
from torcia.testing.conformance import primitives_only


@pytest.fixture
def prims():
    with primitives_only("prims") as device:
        yield device


def _train_step(model, x, y, device):
    model = model.to(device)
    opt = torcia.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss = F.cross_entropy(model(x.to(device)), y.to(device), label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item(), [p.detach().to("cpu").numpy().copy() for p in model.parameters()]


def _compare(make, x, y, device):
    torcia.manual_seed(0)
    ref_model = make()
    torcia.manual_seed(0)
    model = make()
    ref_loss, ref_params = _train_step(ref_model, x, y, "cpu")
    loss, params = _train_step(model, x, y, device)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for got, want in zip(params, ref_params):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_the_device_lacks_every_composite(prims):
    kernels = library.get_backend(prims).kernels
    composites = [n for n, r in library.op_records().items() if not r.primitive]
    assert composites and not [n for n in composites if n in kernels]
    assert len(library.primitives()) == len(torcia.ops.ALL) - len(composites)


def test_mlp_training_step_through_decompositions(prims):
    torcia.manual_seed(1)
    x, y = torcia.randn(6, 8), torcia.tensor([0, 1, 2, 0, 1, 2])
    _compare(lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)), x, y,
             prims)


def test_cnn_training_step_through_decompositions(prims):
    torcia.manual_seed(2)
    x, y = torcia.randn(2, 2, 9, 9), torcia.tensor([1, 3])

    def make():
        return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=2),
                             nn.MaxPool2d(2, ceil_mode=True), nn.Flatten(),
                             nn.Linear(4 * 3 * 3, 5))

    _compare(make, x, y, prims)


def test_decomposed_forward_matches_the_reference_kernels(prims):
    torcia.manual_seed(3)
    x = torcia.randn(2, 3, 7, 6)
    w = torcia.randn(4, 3, 3, 2)
    params = {"stride": (2, 1), "padding": ((1, 0), (0, 1)), "dilation": (1, 2), "groups": 1}
    want = library.call("conv", (x, w, None), params)
    got = library.call("conv", (x.to(prims), w.to(prims), None), params)
    np.testing.assert_allclose(got.to("cpu").numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    pool = {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1), "dilation": (1, 1),
            "ceil_mode": True}
    values, index = library.call("max_pool", (x,), pool)
    got_values, got_index = library.call("max_pool", (x.to(prims),), pool)
    np.testing.assert_array_equal(got_values.to("cpu").numpy(), values.numpy())
    np.testing.assert_array_equal(got_index.to("cpu").numpy(), index.numpy())


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_3d_windows_decompose_like_the_reference_kernels(prims, ceil_mode):
    """conv, its weight gradient and max_pool over 3-D windows (strided, padded, dilated,
    grouped) through the N-D decomposition equal the reference kernels, indices too."""
    torcia.manual_seed(4)
    x = torcia.randn(2, 4, 7, 6, 5)
    w = torcia.randn(6, 2, 3, 2, 2)
    b = torcia.randn(6)
    params = {"stride": (2, 1, 2), "padding": ((1, 0), (0, 1), (1, 1)), "dilation": (1, 2, 1),
              "groups": 2}
    on = [t.to(prims) for t in (x, w, b)]
    want = library.call("conv", (x, w, b), params)
    got = library.call("conv", tuple(on), params)
    assert got.shape == want.shape == (2, 6, 3, 5, 3)
    np.testing.assert_allclose(got.to("cpu").numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    g = torcia.randn(*want.shape)
    weight = {"weight_shape": tuple(w.shape), **params}
    want_w = library.call("conv_weight", (x, g), weight)
    got_w = library.call("conv_weight", (on[0], g.to(prims)), weight)
    np.testing.assert_allclose(got_w.to("cpu").numpy(), want_w.numpy(), rtol=1e-4, atol=1e-4)
    pool = {"kernel_size": (3, 2, 2), "stride": (2, 2, 1), "padding": (1, 1, 0),
            "dilation": (1, 1, 2), "ceil_mode": ceil_mode}
    values, index = library.call("max_pool", (x,), pool)
    got_values, got_index = library.call("max_pool", (on[0],), pool)
    np.testing.assert_array_equal(got_values.to("cpu").numpy(), values.numpy())
    np.testing.assert_array_equal(got_index.to("cpu").numpy(), index.numpy())


def test_3d_cnn_training_step_through_decompositions(prims):
    torcia.manual_seed(5)
    x, y = torcia.randn(2, 2, 5, 6, 5), torcia.tensor([1, 3])

    def make():
        return nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(),
                             nn.Conv3d(4, 4, (3, 2, 3), stride=(1, 2, 2), groups=2),
                             nn.MaxPool3d(2, ceil_mode=True), nn.Flatten(),
                             nn.Linear(4 * 2 * 2 * 1, 5))

    _compare(make, x, y, prims)


def test_normalised_pooled_upsampling_cnn_training_step_through_decompositions(prims):
    torcia.manual_seed(6)
    x, y = torcia.randn(3, 2, 8, 8), torcia.tensor([1, 3, 0])

    def make():
        return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
                             nn.ConvTranspose2d(4, 3, 2, stride=2),
                             nn.AdaptiveMaxPool2d((3, 2)), nn.Flatten(), nn.Linear(18, 5))

    _compare(make, x, y, prims)


def test_transformer_training_step_through_decompositions(prims):
    torcia.manual_seed(7)
    tokens, y = torcia.tensor([[1, 4, 2, 0], [3, 3, 5, 1]]), torcia.tensor([2, 0])

    class Text(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(6, 8, padding_idx=0)
            self.qkv = nn.Linear(8, 24)
            self.norm = nn.LayerNorm(8)
            self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
            self.head = nn.Linear(8, 3)

        def forward(self, t):
            x = self.embed(t)
            q, k, v = (part.reshape(2, 4, 2, 4).transpose(1, 2)
                       for part in self.qkv(x).chunk(3, -1))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = self.norm(x + a.transpose(1, 2).reshape(2, 4, 8))
            mask = nn.Transformer.generate_square_subsequent_mask(4, device=t.device)
            return self.head(self.layer(x, src_mask=mask, is_causal=True).mean(1))

    _compare(Text, tokens, y, prims)


def test_lstm_training_step_through_decompositions(prims):
    torcia.manual_seed(8)
    x, y = torcia.randn(2, 5, 3), torcia.tensor([1, 0])

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True)
            self.head = nn.Linear(4, 2)

        def forward(self, t):
            return self.head(self.lstm(t)[0][:, -1])

    _compare(Recurrent, x, y, prims)


def test_vision_resnet18_training_step_through_decompositions(prims):
    # torcia-vision's model as users build it: batch norm in training mode, residual adds,
    # strided convolutions, max and adaptive average pooling
    models = pytest.importorskip("torcia.vision.models")
    torcia.manual_seed(9)
    # in float64: 20 layers of float32 sums in another order, each renormalised by batch
    # norm, end 1e-4 apart
    x, y = torcia.randn(2, 3, 32, 32, dtype=torcia.float64), torcia.tensor([1, 3])
    _compare(lambda: models.resnet18(num_classes=4).double(), x, y, prims)


@pytest.mark.parametrize("model", ["gpt2", "lstm_classifier"])
def test_text_models_training_step_through_decompositions(prims, model):
    text = pytest.importorskip("torcia.text.models")
    torcia.manual_seed(10)
    tokens, y = torcia.tensor([[1, 4, 2, 7, 3], [3, 3, 5, 1, 6]]), torcia.tensor([2, 0])

    class Last(nn.Module):  # the language model's logits at the last position: a class
        def __init__(self):
            super().__init__()
            self.lm = text.GPT2LMHeadModel(vocab_size=8, n_positions=8, n_embd=8, n_layer=2,
                                           n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                                           attn_pdrop=0.0)

        def forward(self, t):
            return self.lm(t)[:, -1]

    def make():
        if model == "gpt2":
            return Last()
        return text.LSTMClassifier(vocab_size=8, num_classes=3, embed_dim=6, hidden_size=5)

    _compare(make, tokens, y, prims)


def test_listing_names_native_and_decomposed_ops():
    code = (
        "from torcia import __main__ as cli\n"
        "from torcia.testing.conformance import primitives_only\n"
        "with primitives_only('prims'):\n"
        "    cli.main(['plugins', '--json'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    device = json.loads(out)["devices"]["prims"]
    assert {"linear", "conv", "cross_entropy", "max_pool"} <= set(device["decomposed"])
    assert "matmul" in device["native"] and "conv" not in device["native"]
    # only the ops plugins define (the example's logcosh) run on the host
    assert device["missing"] == [] and not set(device["fallback"]) & set(torcia.ops.ALL)


def _values(dtype, shape=(4, 6), seed=0):
    """Random values with the edges an elementwise op must get right: signed zeros, the
    activations' kinks, NaN and both infinities, and large magnitudes."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 4
    flat = x.reshape(-1)
    edges = [0.0, -0.0, np.nan, np.inf, -np.inf, -3.0, 3.0, 30.0, -30.0, 1e4]
    flat[:len(edges)] = edges[:flat.size]
    return torcia.tensor(x, dtype=dtype)


_F = {"dtype": None}  # a float operand of the case's dtype
# (op, inputs, params): each input is "x" (values as above), "y" (other values), "p"
# (positive values), "r" (values mostly within [-1, 1]), "m" (a bool mask), "n" and "u"
# (int64 and uint8 values), "s" (values with dims of size 1), "k" and "K" (indices into the
# last dim), "t" and "T" (class targets, one -100 in t), or a Python number
ELEMENTWISE_CASES = [
    ("relu", "x", {}), ("leaky_relu", "x", {"negative_slope": 0.2}),
    ("hardtanh", "x", {"min_val": -2.0, "max_val": 0.5}), ("hardsigmoid", "x", {}),
    ("hardswish", "x", {}), ("softsign", "x", {}), ("tanhshrink", "x", {}), ("silu", "x", {}),
    ("silu_backward", "yx", {}), ("softplus", "x", {"beta": 2.0, "threshold": 10.0}),
    ("mish", "x", {}), ("logsigmoid", "x", {}), ("elu", "x", {"alpha": 0.7}),
    ("celu", "x", {"alpha": 1.5}), ("selu", "x", {}), ("gelu", "x", {}),
    ("gelu", "x", {"approximate": "tanh"}), ("gelu_backward", "yx", {}),
    ("gelu_backward", "yx", {"approximate": "tanh"}), ("sinc", "x", {}), ("frac", "x", {}),
    ("rsqrt", "p", {}), ("addcmul", "xyp", {"value": 0.5}), ("addcdiv", "xyp", {"value": -2}),
    ("lerp", "xy", {"weight": 0.3}), ("lerp", "xy", {"weight": 0.8}), ("lerp", "xyp", {}),
    ("xlogy", "xp", {}), ("xlogy", "px", {}), ("xlog1py", "xp", {}), ("fmax", "xy", {}),
    ("fmin", "xy", {}), ("logical_not", "x", {}), ("logical_and", "xy", {}),
    ("logical_or", "xy", {}), ("logical_xor", "xy", {}), ("masked_fill", "xm", {"value": 2.5}),
    ("tril", "x", {"diagonal": -1}), ("triu", "x", {"diagonal": 2}),
    ("count_nonzero", "x", {"dim": (1,)}), ("nansum", "x", {"dim": (0,), "keepdim": True}),
    ("nansum", "x", {}), ("std", "y", {"dim": (1,), "correction": 0}),
    ("tile", "x", {"dims": (2, 1, 3)}), ("stack", "xy", {"dim": -1}), ("square", "x", {}),
    ("isfinite", "x", {}), ("nan_to_num", "x", {}),
    ("nan_to_num", "x", {"nan": 1.5, "posinf": 7.0, "neginf": -2.0}), ("mean", "y", {}),
    ("mean", "y", {"dim": (1,), "keepdim": True}), ("logsumexp", "x", {"dim": (1,)}),
    ("logsumexp", "y", {"dim": (0, 1), "keepdim": True}),
    ("roll", "x", {"shifts": (2, -1), "dims": (0, 1)}), ("roll", "x", {"shifts": 5, "dims": None}),
    ("index_select", "xi", {"dim": 1}), ("embedding", "xi", {}),
    ("rms_norm", "yw", {"normalized_ndim": 1, "eps": 1e-5}),
    ("layer_norm", "ywb", {"normalized_ndim": 1, "eps": 1e-5}),
    ("layer_norm", "y", {"weight": None, "bias": None, "normalized_ndim": 2, "eps": 1e-5}),
    ("lstm_cell", "GC", {}), ("sub", "xy", {}), ("reciprocal", "x", {}), ("gt", "xy", {}),
    ("ge", "xx", {}), ("ne", "xy", {}), ("all", "x", {}), ("all", "m", {"dim": (1,)}),
    ("any", "m", {"dim": (0,), "keepdim": True}), ("var", "y", {}),
    ("var", "y", {"dim": (1,), "correction": 0, "keepdim": True}),
    ("var", "y", {"dim": (0, 1), "correction": 30}),
    ("isnan", "x", {}), ("isnan", "n", {}), ("isinf", "x", {}), ("isinf", "u", {}),
    ("sign", "x", {}), ("sign", "n", {}), ("sign", "u", {}), ("sign", "m", {}),
    ("bitwise_not", "n", {}), ("bitwise_not", "u", {}), ("bitwise_not", "m", {}),
    ("squeeze", "s", {"dim": None}), ("squeeze", "s", {"dim": (1, 2)}),
    ("unsqueeze", "x", {"dim": -1}), ("transpose", "x", {"dim0": 1, "dim1": 0}),
    ("narrow", "x", {"dim": 1, "start": 2, "length": 3}),
    ("split", "x", {"sections": (2, 1, 3), "dim": -1}), ("flip", "x", {"dims": (0, -1)}),
    ("repeat", "x", {"sizes": (2, 1, 3)}), ("repeat", "x", {"sizes": (1, 1)}),
    ("neg", "x", {}), ("neg", "n", {}), ("neg", "u", {}), ("le", "xy", {}), ("le", "xx", {}),
    ("le", "nu", {}), ("take_along_dim", "xk", {"dim": -1}), ("take_along_dim", "xK", {"dim": 1}),
    ("take_along_dim", "xk", {}), ("gather", "xk", {"dim": 1}),
    ("gather", "Gk", {"dim": 1}), ("argmin", "x", {}), ("argmin", "x", {"dim": 1}),
    ("argmin", "n", {"dim": 0, "keepdim": True}), ("argmin", "u", {"dim": 1}),
    ("argmin", "m", {}), ("argmax", "x", {}), ("argmax", "x", {"dim": 1}),
    ("argmax", "y", {"dim": 0, "keepdim": True}), ("argmax", "n", {"dim": 1}),
    ("argmax", "u", {"dim": 0}), ("argmax", "m", {"dim": 1}), ("argmax", "x", {"keepdim": True}),
    ("abs", "x", {}), ("abs", "n", {}), ("abs", "u", {}), ("min_dim", "x", {"dim": 1}),
    ("min_dim", "y", {"dim": 0}),
    ("min_dim", "u", {"dim": 0, "keepdim": True}), ("diag", "x", {"diagonal": 1}),
    ("diag", "w", {}), ("diag", "w", {"diagonal": 2}), ("diag", "w", {"diagonal": -3}),
    ("trunc", "x", {}), ("trunc", "n", {}),
    ("nll_loss", "yt", {"weight": None, "reduction": "mean", "ignore_index": -100}),
    ("nll_loss", "yTw", {"reduction": "mean", "ignore_index": 5}),
    ("nll_loss", "ytw", {"reduction": "sum", "ignore_index": -100}),
    ("nll_loss", "yTw", {"reduction": "none", "ignore_index": 3}),
    ("ndtr", "x", {}), ("log_ndtr", "x", {}), ("log_ndtr", "y", {}), ("entr", "x", {}),
    ("entr", "p", {}), ("i0", "x", {}), ("i1", "x", {}), ("modified_bessel_i0", "y", {}),
    ("modified_bessel_i1", "x", {}), ("modified_bessel_k0", "x", {}),
    ("modified_bessel_k1", "p", {}),
    ("floor", "x", {}), ("floor", "n", {}), ("floor", "u", {}), ("minimum", "xy", {}),
    ("minimum", "xx", {}), ("minimum", "nu", {}), ("minimum", "un", {}), ("amin", "x", {}),
    ("amin", "y", {"dim": (1,)}), ("amin", "n", {"dim": (0,), "keepdim": True}),
    ("amin", "u", {}), ("amin", "m", {"dim": (1,)}), ("clamp", "xyp", {}),
    ("clamp", "x", {"lo": -1.5, "hi": None}), ("clamp", "n", {"lo": None, "hi": 7}),
    ("clamp", "x", {"lo": 2.0, "hi": -1.0}), ("remainder", "xy", {}), ("remainder", "yp", {}),
    ("clone", "x", {}), ("clone", "u", {}), ("contiguous", "x", {}),
    ("scatter_add", "xky", {"dim": 1}), ("scatter", "xky", {"dim": 1}),
    ("scatter", "xkx", {"dim": 1}), ("sigmoid", "x", {}), ("hypot", "xy", {}),
    ("bitwise_or", "nn", {}), ("bitwise_or", "nu", {}), ("bitwise_or", "um", {}),
    ("bitwise_or", "mm", {}), ("floor_divide", "xp", {}), ("floor_divide", "yx", {}),
    ("hypot", "xx", {}), ("hypot", "px", {}),
    ("tan", "x", {}), ("sinh", "x", {}), ("cosh", "x", {}), ("tanh", "x", {}),
    ("asinh", "x", {}), ("acosh", "x", {}), ("acosh", "p", {}), ("atanh", "x", {}),
    ("atanh", "r", {}), ("asin", "r", {}), ("acos", "r", {}), ("atan", "x", {}),
    ("exp2", "x", {}), ("log2", "x", {}), ("log2", "p", {}), ("log10", "p", {}),
    ("log10", "x", {}), ("polygamma", "p", {"n": 1}), ("polygamma", "x", {"n": 3}),
    ("polygamma", "x", {"n": 0}),
] + [("activation_backward", "yx", {"activation": name, **params}) for name, params in (
    ("relu", {}), ("leaky_relu", {"negative_slope": 0.1}), ("elu", {"alpha": 0.7}),
    ("selu", {}), ("celu", {"alpha": 1.5}), ("softplus", {"beta": 2.0, "threshold": 10.0}),
    ("mish", {}), ("hardtanh", {"min_val": -2.0, "max_val": 0.5}), ("hardswish", {}),
    ("hardsigmoid", {}), ("logsigmoid", {}), ("softsign", {}), ("tanhshrink", {}))]


REFERENCE = library.ReferenceKernels().table()


def _inputs(spec, dtype):
    made = {"x": _values(dtype), "y": _values(dtype, seed=1),
            "p": _values(dtype, seed=2).abs() + 0.25,
            "m": _values(torcia.float64, seed=3) > 0,
            "w": _values(dtype, (6,), seed=4), "b": _values(dtype, (6,), seed=5),
            "i": torcia.tensor([3, 0, 3, 1]),
            "G": _values(dtype, (4, 8), seed=6), "C": _values(dtype, (4, 2), seed=7),
            "n": torcia.tensor(np.random.default_rng(8).integers(-50, 50, (4, 6))),
            "u": torcia.tensor(np.random.default_rng(9).integers(0, 256, (4, 6)),
                               dtype=torcia.uint8),
            "s": _values(dtype, (4, 1, 6), seed=10),
            "k": torcia.tensor(np.random.default_rng(11).integers(0, 6, (4, 3))),
            "r": _values(dtype, seed=12) / 8,
            "K": torcia.tensor([[5, 0, 2]]), "t": torcia.tensor([5, 3, -100, 0]),
            "T": torcia.tensor([5, 3, 1, 0])}
    # lerp's tensor weight: in [0, 1], around the 0.5 where its formula switches
    if spec == "xyp":
        made["p"] = torcia.tensor(np.linspace(0, 1, 24).reshape(4, 6), dtype=dtype)
    return tuple(made[k] for k in spec)


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32, torcia.float16])
@pytest.mark.parametrize("op, spec, params", ELEMENTWISE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ELEMENTWISE_CASES)])
def test_elementwise_decompositions_match_the_reference_kernels(prims, op, spec, params,
                                                                dtype):
    """Each composite's decomposition on a primitives-only device gives the reference
    kernel's values (NaN, infinities and signed zeros included), dtype and shape."""
    assert not library.get_op(op).primitive
    inputs = _inputs(spec, dtype)
    if op == "lerp" and spec == "xyp":
        params = {}
    with np.errstate(all="ignore"):
        want = REFERENCE[op](*(t.numpy() for t in inputs), **params)
        got = library.call(op, tuple(t.to(prims) for t in inputs), params)
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for got_part, want_part in zip(got, want):
            _same(op, got_part.to("cpu").numpy(), want_part)
        return
    _same(op, got.to("cpu").numpy(), want)


def _same(op, got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want)
        return
    tol = {np.float64: 1e-12, np.float32: 2e-6, np.float16: 2e-3}[want.dtype.type]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    if op.endswith("_backward"):
        return  # a gradient's zero is an underflow, its sign noise
    # signed zeros where the reference gives a zero
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("op", ["tan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                                "asin", "acos", "atan", "exp2", "log2", "log10", "abs"])
def test_complex_trigonometry_decomposes_like_the_reference_kernels(prims, op):
    rng = np.random.default_rng(13)
    z = torcia.tensor((rng.standard_normal(40) + 1j * rng.standard_normal(40)) * 2)
    want = REFERENCE[op](z.numpy())
    got = library.call(op, (z.to(prims),), {}).to("cpu").numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def _same_parts(got, want):
    """Equal complex numbers, part by part, with the signs of their zeros (a NaN's sign is
    not a value: negation by a product may keep it)."""
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        np.testing.assert_array_equal(g, w)
        assert (np.signbit(g) == np.signbit(w))[~np.isnan(w)].all()


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32])
def test_complex_numbers_are_made_and_conjugated_like_the_kernels(prims, dtype):
    """complex stacks the parts (an infinite part stays what it was, as the kernel's, where
    re + 1j * im would give NaN) and conj negates the imaginary part (-0.0 from 0.0)."""
    re, im = _values(dtype), _values(dtype, seed=1)
    want = REFERENCE["complex"](re.numpy(), im.numpy())
    got = library.call("complex", (re.to(prims), im.to(prims)), {}).to("cpu").numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    _same_parts(got, want)
    z = torcia.tensor(want)
    got = library.call("conj", (z.to(prims),), {}).to("cpu").numpy()
    want = REFERENCE["conj"](want)
    _same_parts(got, want)
    # broadcast parts
    got = library.call("complex", (re[:1].to(prims), im[:, :1].to(prims)), {})
    assert got.shape == (4, 6)


POLYNOMIALS = [*(f"chebyshev_polynomial_{k}" for k in "tuvw"), "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32, torcia.float16])
@pytest.mark.parametrize("op", POLYNOMIALS)
def test_orthogonal_polynomials_decompose_like_their_kernels(prims, op, dtype):
    """The recurrences on a primitives-only device: the reference kernel's values for
    degrees 0 to 12, negative and fractional ones, x at the edges (NaN, infinities, +-1,
    large), a degree given as a number, empty and 0-dim inputs."""
    x = torcia.tensor([-1.0, 1.0, 0.5, -0.3, 2.5, -7.0, np.nan, np.inf, -np.inf, 0.0, -0.0],
                      dtype=dtype).reshape(-1, 1)
    n = torcia.tensor([0, 1, 2, 3, 5, 8, 12, -1, -0.5, 2.7], dtype=dtype)
    for inputs in ((x, n), (x[:0, 0], n[:0]), (x[2, 0], n[3])):
        with np.errstate(all="ignore"):
            want = REFERENCE[op](*(t.numpy() for t in inputs))
        got = library.call(op, tuple(t.to(prims) for t in inputs), {})
        _same(op, got.to("cpu").numpy(), want)
    fn = getattr(torcia.special, op)
    with np.errstate(all="ignore"):
        want = fn(x, 4).numpy()
    np.testing.assert_array_equal(fn(x.to(prims), 4).to("cpu").numpy(), want)
    assert not fn(x.to(prims).requires_grad_(), n.to(prims)).requires_grad


@pytest.mark.parametrize("dtype", [torcia.int8, torcia.int64, torcia.uint8])
def test_integer_remainder_and_floor_division_decompose_like_their_kernels(prims, dtype):
    """The floor modulus (through fmod) and floor division (through div) of integers: both
    signs, exact multiples, the smallest value by -1, and the kernel's error for a zero
    divisor."""
    signed = dtype != torcia.uint8
    a = torcia.tensor([7, -7, 7, -7, 6, 0, -128, 5] if signed else [7, 200, 6, 0, 255],
                      dtype=dtype)
    b = torcia.tensor([3, 3, -3, -3, -3, 4, -1, 7] if signed else [3, 7, 3, 4, 2],
                      dtype=dtype)
    zero = torcia.zeros(1, dtype=dtype)
    for fn in (torcia.remainder, torcia.floor_divide):
        want = fn(a, b)
        got = fn(a.to(prims), b.to(prims))
        np.testing.assert_array_equal(got.to("cpu").numpy(), want.numpy())
        assert got.dtype == want.dtype
        with pytest.raises(ZeroDivisionError) as kernel:
            fn(a[:1], zero)
        with pytest.raises(ZeroDivisionError) as decomposition:
            fn(a[:1].to(prims), zero.to(prims))
        assert str(decomposition.value) == str(kernel.value)


# creation ops through their public functions (made in the test, as PROMOTING's)
CREATION = [
    lambda d: torcia.zeros(2, 3, device=d), lambda d: torcia.zeros((), dtype=torcia.bool, device=d),
    lambda d: torcia.zeros(2, requires_grad=True, device=d),
    lambda d: torcia.ones(4, dtype=torcia.int64, device=d),
    lambda d: torcia.ones(0, 2, dtype=torcia.complex64, device=d),
    lambda d: torcia.ones(3, dtype=torcia.bfloat16, device=d),
    lambda d: torcia.eye(3, 4, device=d), lambda d: torcia.eye(2, 0, dtype=torcia.int64, device=d),
    lambda d: torcia.eye(3, dtype=torcia.bool, device=d),
    lambda d: torcia.linspace(0, 1, 7, device=d), lambda d: torcia.linspace(-3, 10, 1, device=d),
    lambda d: torcia.linspace(2, 3, 0, device=d),
    lambda d: torcia.linspace(5.0, -2.5, 11, dtype=torcia.int64, device=d),
    lambda d: torcia.linspace(0.1, 0.7, 13, dtype=torcia.float64, device=d),
    # a step that underflows to 0, and an infinite end
    lambda d: torcia.linspace(0.0, 1e-320, 5, dtype=torcia.float64, device=d),
    lambda d: torcia.linspace(-1.0, math.inf, 3, dtype=torcia.float64, device=d),
    lambda d: torcia.logspace(0, 3, 4, device=d),
    lambda d: torcia.logspace(-2.5, 4, 9, base=2.0, dtype=torcia.float64, device=d),
]


def test_empty_decomposes_into_a_tensor_of_its_shape_and_dtype(prims):
    out = torcia.empty(2, 3, dtype=torcia.int16, device=prims)
    assert out.device.type == prims and out.shape == (2, 3) and out.dtype == torcia.int16


@pytest.mark.parametrize("case", range(len(CREATION)))
def test_creation_ops_decompose_like_their_kernels(prims, case):
    """zeros, ones, eye, linspace and logspace on a device without their kernels (through
    full and arange): the reference kernels' values and dtypes, bit for bit."""
    fn = CREATION[case]
    with np.errstate(all="ignore"):
        want, got = fn("cpu"), fn(prims)
    assert got.device.type == prims and got.dtype == want.dtype
    assert got.requires_grad == want.requires_grad and got.shape == want.shape

    def host(t):  # NumPy compares no bfloat16: its values are float32's
        t = t.detach().to("cpu")
        return (t.float() if t.dtype == torcia.bfloat16 else t).numpy()

    np.testing.assert_array_equal(host(got), host(want))


def _int(d):
    return torcia.tensor([[3, -2], [0, 7]], device=d)


def _float(d, dtype=torcia.float32):
    return torcia.tensor([[0.5, -1.5], [2.0, 0.25]], dtype=dtype, device=d)


# elementwise composites of mixed dtypes or with a Python number (tensors made in the test:
# none at collection, which would build the device tables before the plugin registers)
PROMOTING = [
    lambda d: _int(d) - _float(d), lambda d: _float(d) - _int(d),
    lambda d: _float(d, torcia.float16) - _float(d), lambda d: _int(d) - 0.5,
    lambda d: 1.5 - _int(d), lambda d: _int(d) - _int(d), lambda d: _int(d) > _float(d),
    lambda d: torcia.ne(_float(d, torcia.float16), 2.0), lambda d: torcia.reciprocal(_int(d)),
    lambda d: torcia.rsqrt(_float(d, torcia.float16).abs()),
]


@pytest.mark.parametrize("mode", [False, True])
@pytest.mark.parametrize("case", range(len(PROMOTING)))
def test_elementwise_composites_promote_their_operands_first(prims, case, mode):
    """An elementwise composite of mixed dtypes or with a Python number decomposes on its
    promoted operands (the dtypes its kernel would be given), with and without a dispatch
    mode entered: the "cpu" device's result."""
    fn = PROMOTING[case]
    want = fn("cpu")
    with library.DispatchMode() if mode else contextlib.nullcontext():
        got = fn(prims)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.to("cpu").numpy(), want.numpy())


def _clean(dtype, shape, seed):
    """Random values without edges (for the ops whose work mixes elements)."""
    return torcia.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=dtype)


def _made(spec, dtype):
    """The inputs of a case: the letters of ``_inputs``, and "q" (a well-conditioned
    square matrix), "h" (a symmetric one), "z" (4, 4 values), "c" and "d" (clean (4, 6)
    values), "v" (positive (6,) variances), "a" (LSTM activations in (0, 1)), "_" (None)."""
    made = {"q": _clean(dtype, (4, 4), 20) + 4 * torcia.eye(4, dtype=dtype),
            "z": _values(dtype, (4, 4), seed=21), "c": _clean(dtype, (4, 6), 22),
            "d": _clean(dtype, (4, 6), 23), "v": _clean(dtype, (6,), 24).abs() + 0.5,
            "a": torcia.tensor(np.random.default_rng(25).uniform(0, 1, (4, 8)), dtype=dtype),
            "_": None, "I": _clean(dtype, (2, 3, 5, 6), 26), "E": _values(dtype, (2, 3, 5, 6)),
            "J": _clean(dtype, (2, 8, 9), 27), "P": _clean(dtype, (2, 3, 3, 4), 28),
            "V": _clean(dtype, (1, 2, 4, 5, 3), 29), "X": _clean(dtype, (2, 4, 3, 3), 30),
            "W": _clean(dtype, (4, 3, 2, 2), 31), "B": _clean(dtype, (3,), 32),
            "Q": _clean(dtype, (2, 4, 3, 5), 33), "R": _clean(dtype, (2, 2, 6, 5), 34),
            "S": _clean(dtype, (2, 2, 6, 7), 35), "F": _clean(dtype, (3, 6), 36),
            "M": torcia.tensor(np.arange(18).reshape(3, 6) % 4 == 1) & torcia.tensor(
                [[True], [False], [True]]),
            "e": _clean(dtype, (4,), 37),
            "N": torcia.tensor(np.random.default_rng(38).integers(0, 6, (4, 6)), dtype=dtype),
            "Z": torcia.complex(_clean(dtype, (4, 6), 39), _clean(dtype, (4, 6), 40)),
            "L": _clean(dtype, (3, 2, 8), 41), "H": _clean(dtype, (2, 2), 42),
            "D": _clean(dtype, (2, 8), 43), "Y": 3 * _clean(dtype, (2, 3, 3), 44),
            "A": torcia.tensor(np.random.default_rng(45).choice([0.0, 1.0, 2.0, np.nan],
                                                                (4, 6)), dtype=dtype),
            "r": torcia.tensor(np.random.default_rng(46).integers(0, 3, (4, 6))),
            "g": torcia.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]], dtype=dtype),
            "k": torcia.complex(_clean(dtype, (3, 3), 49), _clean(dtype, (3, 3), 50))}
    made["h"] = made["q"] + made["q"].t()
    plain = [k for k in spec if k not in made]
    given = iter(_inputs("".join(plain), dtype))
    return tuple(made[k] if k in made else next(given) for k in spec)


class Named(str):
    """A tensor parameter of a case: the letter of its input as in ``_made``."""


AVG = {"kernel_size": (2, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}
# (op, inputs as in _made, further positional inputs, params)
COMPOSITE_CASES = [
    ("tensordot", "xy", (), {"dims": ([0], [0])}), ("tensordot", "qz", (), {"dims": 1}),
    ("tensordot", "xy", (), {"dims": 2}),
    *[("norm", "x", (), {"p": p, "dim": (1,)}) for p in (2.0, 1.0, 0.0, math.inf, -math.inf)],
    ("norm", "c", (), {"p": 3.0}), ("norm", "y", (), {"p": 2.0, "dim": (0,), "keepdim": True}),
    ("linalg_vector_norm", "y", (), {"ord": 2.0, "dim": (0, 1), "keepdim": True}),
    *[("linalg_matrix_norm", "q", (), {"ord": o})
      for o in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)],
    ("linalg_matrix_norm", "c", (), {"ord": 1, "dim": (1, 0), "keepdim": True}),
    ("linalg_matrix_norm", "c", (), {"ord": "nuc", "keepdim": True}),
    ("linalg_norm", "q", (), {}), ("linalg_norm", "q", (), {"ord": "nuc", "dim": (0, 1)}),
    ("linalg_norm", "y", (), {"ord": 1, "dim": (1,)}),
    ("linalg_eigvalsh", "h", (), {}), ("linalg_eigvalsh", "h", (), {"UPLO": "U"}),
    ("linalg_eigvals", "q", (), {}),
    ("max_dim", "x", (), {"dim": 1}), ("max_dim", "n", (), {"dim": 0, "keepdim": True}),
    ("max_dim", "m", (), {"dim": 1}), ("kthvalue", "x", (), {"k": 2, "dim": 1}),
    ("kthvalue", "n", (), {"k": 3, "dim": 0, "keepdim": True}),
    ("topk", "x", (), {"k": 3, "dim": 1}), ("topk", "n", (), {"k": 2, "dim": 0, "largest": False}),
    ("median_dim", "x", (), {"dim": 1}), ("median_dim", "y", (), {"dim": 0, "keepdim": True}),
    ("median_dim", "n", (), {"dim": 1}),
    ("index_add", "xiz", (), {"dim": 1, "alpha": 2}), ("index_add", "xiy", (), {"dim": 0}),
    ("index_copy", "xiy", (), {"dim": 0}), ("index_copy", "xiz", (), {"dim": 1}),
    ("masked_select", "xm", (), {}), ("masked_select", "nm", (), {}),
    ("diag_embed", "x", (), {}), ("diag_embed", "x", (), {"offset": 2}),
    ("diag_embed", "x", (), {"offset": -1, "dim1": 0, "dim2": 2}),
    ("embedding_backward", "yi", (), {"num_weights": 5, "padding_idx": None}),
    ("embedding_backward", "yi", (), {"num_weights": 4, "padding_idx": 3}),
    ("batch_norm_backward", "dcwbv", (True, 1e-5), {}),
    ("batch_norm_backward", "dcwbv", (False, 1e-3), {}),
    ("batch_norm_backward", "dc_bv", (True, 1e-5), {}),
    ("layer_norm_backward", "dcw", (1, 1e-5), {}), ("layer_norm_backward", "dc_", (2, 1e-5), {}),
    ("rms_norm_backward", "dcw", (1, 1e-5), {}), ("rms_norm_backward", "dc_", (2, 1e-5), {}),
    ("lstm_cell_backward", "CCaCC", (), {}), ("lstm_cell_backward", "_CaCC", (), {}),
    ("lstm_cell_backward", "C_aCC", (), {}),
    ("im2col", "I", (), {"kernel_size": (2, 3), "dilation": (1, 2), "padding": (1, 0),
                         "stride": (2, 1)}),
    ("col2im", "J", (), {"output_size": (4, 4), "kernel_size": (2, 2), "dilation": (1, 1),
                         "padding": (0, 0), "stride": (1, 1)}),
    ("col2im", "J", (), {"output_size": (4, 4), "kernel_size": (2, 2), "dilation": (1, 1),
                         "padding": (1, 1), "stride": (2, 2)}),
    *[("avg_pool", "I", (), {**AVG, "count_include_pad": include, "divisor_override": d})
      for include, d in ((True, None), (False, None), (False, 5))],
    ("avg_pool", "V", (), {"kernel_size": (2, 2, 2), "stride": (1, 2, 2), "padding": (1, 0, 1),
                           "ceil_mode": False, "count_include_pad": False,
                           "divisor_override": None}),
    *[("avg_pool_backward", "P", (), {"input_shape": (5, 6), "kernel_size": (2, 2),
                                      "stride": (2, 2), "padding": (1, 1), "ceil_mode": False,
                                      "count_include_pad": include, "divisor_override": None})
      for include in (True, False)],
    ("adaptive_max_pool", "E", (), {"output_size": (2, 3)}),
    ("adaptive_max_pool", "I", (), {"output_size": (3, 4)}),
    ("conv_transpose", "XWB", (), {"stride": (2, 2), "padding": ((0, 1), (1, 0)),
                                   "output_padding": (1, 0), "dilation": (1, 1), "groups": 1}),
    ("conv_transpose", "XW_", (), {"stride": (1, 2), "padding": ((1, 1), (0, 0)),
                                   "output_padding": (0, 1), "dilation": (2, 1), "groups": 2}),
    ("flash_attention", "QRS_", (), {"scale": 0.4}),
    ("flash_attention", "QRS_", (), {"is_causal": True}),
    ("flash_attention", "QRSM", (), {}), ("flash_attention", "QRSF", (), {"scale": 0.7}),
    ("batch_norm", "cwb__", (True, 1e-5), {}), ("batch_norm", "cwbbv", (False, 1e-5), {}),
    ("batch_norm", "s__bv", (False, 1e-3), {}),
    ("repeat_interleave", "x", (), {"repeats": 2, "dim": 1}),
    ("repeat_interleave", "n", (), {"repeats": 3, "dim": None}),
    ("repeat_interleave", "x", (), {"repeats": np.array([1, 0, 2, 1]), "dim": 0}),
    ("bincount", "i", (), {}), ("bincount", "i", (), {"minlength": 7}),
    ("bincount", "i", (), {"weights": Named("e")}),
    *[(f"shifted_chebyshev_polynomial_{k}", "cN", (), {}) for k in "tuvw"],
    ("spherical_bessel_j0", "x", (), {}), ("angle", "x", (), {}), ("angle", "Z", (), {}),
    ("logcumsumexp", "x", (), {"dim": 1}), ("logcumsumexp", "c", (), {"dim": 0}),
    ("logcumsumexp", "Z", (), {"dim": 1}), ("cumprod", "c", (), {"dim": 1}),
    ("cumprod", "n", (), {"dim": 0}), ("cumprod", "c", (), {"dim": 0, "dtype": np.float64}),
    *[(op, spec, (), {"dim": dim}) for op in ("cummax", "cummin")
      for spec, dim in (("x", 1), ("n", 0), ("m", 1))],
    ("fft_r2c", "c", (), {}), ("fft_r2c", "c", (), {"dims": (0, 1), "norm": "ortho"}),
    ("fft_r2c", "c", (), {"onesided": False}), ("fft_c2r", "Z", (), {"last_dim_size": 10}),
    ("fft_c2r", "Z", (), {"dims": (0, 1), "norm": "forward", "last_dim_size": 7}),
    ("fft_c2r", "Z", (), {"last_dim_size": 4}),
    ("pad", "x", (), {"pad": (1, 2), "mode": "constant", "value": 0.5}),
    ("pad", "x", (), {"pad": (-1, 2, 1, -2), "mode": "constant", "value": 0.0}),
    ("pad", "x", (), {"pad": (0, 0), "mode": "constant", "value": 0.0}),
    ("pad", "n", (), {"pad": (1, 1), "mode": "constant", "value": 3}),
    *[("pad", "s", (), {"pad": (2, 1, 0, 0), "mode": m})
      for m in ("reflect", "replicate", "circular")],
    ("lstm_layer", "LHHD", (), {}), ("linalg_matrix_exp", "q", (), {}),
    ("linalg_matrix_exp", "Y", (), {}), ("linalg_pinv", "c", (), {}),
    ("linalg_pinv", "c", (), {"rtol": 0.5}), ("linalg_pinv", "h", (), {"hermitian": True}),
    ("linalg_pinv", "Z", (), {}), ("mode_dim", "A", (), {"dim": 1}),
    ("mode_dim", "r", (), {"dim": 0, "keepdim": True}), ("mode_dim", "n", (), {"dim": 1}),
    ("histc", "c", (), {"bins": 5, "min": -1.0, "max": 1.0}), ("histc", "c", (), {"bins": 7}),
    ("histc", "N", (), {"bins": 6, "min": 0, "max": 5}),
    ("histc", "x", (), {"bins": 4, "min": -3.0, "max": 3.0}),
    *[("einsum", spec, (), {"equation": eq}) for spec, eq in (
        ("qz", "ij,jk->ik"), ("q", "ii->i"), ("q", "ii"), ("x", "ij->ji"), ("x", "ij"),
        ("cd", "ij,ij->i"), ("nn", "ij,kj"), ("QQ", "bhqd,bhkd->bhqk"),
        ("YY", "...ij,...kj->...ik"), ("cdq", "ij,kj,il->kl"), ("e", "i->"))],
    *[(op, spec, (), {}) for op in ("linalg_det", "linalg_slogdet")
      for spec in ("q", "Y", "g", "k")],
    ("linalg_inv", "q", (), {}), ("linalg_inv", "Y", (), {}), ("linalg_inv", "k", (), {}),
    *[("linalg_solve_triangular", spec, (), {"upper": upper, "left": left,
                                              "unitriangular": unit})
      for spec, left in (("qc", True), ("qz", False), ("YY", True), ("YY", False))
      for upper in (False, True) for unit in (False, True)],
    ("linalg_solve_triangular", "kk", (), {"upper": True}),
]


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32])
@pytest.mark.parametrize("op, spec, extra, params", COMPOSITE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(COMPOSITE_CASES)])
def test_decompositions_match_the_reference_kernels(prims, op, spec, extra, params, dtype):
    """The other composites' decompositions on a primitives-only device: the reference
    kernel's values, dtypes and shapes, every output of them."""
    assert not library.get_op(op).primitive
    inputs = _made(spec, dtype)
    named = {k: _made(v, dtype)[0] for k, v in params.items() if isinstance(v, Named)}
    params = {**params, **named}
    with np.errstate(all="ignore"):
        want = REFERENCE[op](*(None if t is None else t.numpy() for t in inputs), *extra,
                             **{k: v.numpy() if k in named else v for k, v in params.items()})
        got = library.call(op, tuple(None if t is None else t.to(prims) for t in inputs)
                           + extra, {k: v.to(prims) if k in named else v
                                     for k, v in params.items()})
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    assert len(got) == len(want)
    for got_part, want_part in zip(got, want):
        got_part = got_part.to("cpu").numpy()
        assert got_part.dtype == want_part.dtype and got_part.shape == want_part.shape
        if want_part.dtype.kind in "fc":
            tol = 1e-10 if want_part.dtype.itemsize * (2 if want_part.dtype.kind == "f" else 1) \
                >= 16 else 1e-5
            np.testing.assert_allclose(got_part, want_part, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(got_part, want_part)


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32])
@pytest.mark.parametrize("mask, params", [("_", {"scale": 0.4}), ("_", {"is_causal": True}),
                                          ("M", {}), ("F", {"scale": 0.7})])
def test_attention_backward_decomposes_like_its_kernel(prims, mask, params, dtype):
    """flash_attention_backward on the forward's own output and lse (grouped heads, masked
    rows that attend to nothing included): the reference kernel's three gradients."""
    q, k, v, m = _made("QRS" + mask, dtype)
    g = _clean(dtype, (2, 4, 3, 7), 38)
    host = [None if t is None else t.numpy() for t in (q, k, v, m)]
    out, lse = REFERENCE["flash_attention"](*host, **params)
    want = REFERENCE["flash_attention_backward"](g.numpy(), *host[:3], out, lse, host[3],
                                                 **params)
    inputs = (g, q, k, v, torcia.tensor(out), torcia.tensor(lse), m)
    got = library.call("flash_attention_backward",
                       tuple(None if t is None else t.to(prims) for t in inputs), params)
    tol = 1e-10 if dtype == torcia.float64 else 1e-5
    for got_part, want_part in zip(got, want):
        np.testing.assert_allclose(got_part.to("cpu").numpy(), want_part, rtol=tol, atol=tol)


GRADIENT_CASES = [
    ("angle", lambda t: t.angle(), "Z"), ("logcumsumexp", lambda t: t.logcumsumexp(1), "c"),
    ("cumprod", lambda t: t.cumprod(0), "c"), ("cummax", lambda t: t.cummax(1)[0], "c"),
    ("fft_r2c", lambda t: torcia.fft.rfft2(t, norm="ortho"), "c"),
    ("fft_c2r", lambda t: torcia.fft.irfft(t, n=9), "Z"),
    ("pad", lambda t: F.pad(t.unsqueeze(0), (2, 3), mode="reflect"), "c"),
    ("avg_pool", lambda t: F.avg_pool2d(t.reshape(1, 1, 4, 6), 2, padding=1), "c"),
    ("linalg_matrix_exp", lambda t: torcia.linalg.matrix_exp(t), "Y"),
    ("linalg_pinv", lambda t: torcia.linalg.pinv(t), "c"),
    ("linalg_det", lambda t: torcia.linalg.det(t), "Y"),
    ("linalg_slogdet", lambda t: torcia.linalg.slogdet(t)[1], "Y"),
    ("linalg_slogdet", lambda t: torcia.linalg.slogdet(torcia.complex(t, t.t()))[0], "q"),
    ("linalg_inv", lambda t: torcia.linalg.inv(t), "Y"),
    ("einsum", lambda t: torcia.einsum("ij,kj,ii->ik", t, t * 2, t[:, :4]), "c"),
    ("ndtr", lambda t: torcia.special.ndtr(3 * t), "c"),
    ("log_ndtr", lambda t: torcia.special.log_ndtr(3 * t), "c"),
    ("i0", lambda t: torcia.special.i0(t), "c"), ("i1", lambda t: torcia.special.i1(t), "c"),
    ("entr", lambda t: torcia.special.entr(t), "v"),
    ("clamp", lambda t: torcia.clamp(t, min=-0.5, max=0.7), "c"),
    ("clamp", lambda t: torcia.clamp(t, min=t.flip(0) / 2, max=t.abs() + 0.1), "c"),
    ("minimum", lambda t: torcia.minimum(t, t.flip(1)), "c"),
    ("amin", lambda t: t.amin(1), "c"), ("scatter_add", lambda t: t.scatter_add(
        1, torcia.tensor([[0, 0, 5], [1, 2, 1]], device=t.device), 2 * t[:2]), "c"),
    ("remainder", lambda t: torcia.remainder(3 * t, t.flip(0)), "c"),
    ("clone", lambda t: t.clone() * t, "c"), ("sigmoid", lambda t: (3 * t).sigmoid(), "c"),
    # at 0 exactly (3t - 3t, whose gradient is 3t's): where the kernel's -|a| is not smooth
    ("sigmoid", lambda t: (3 * t - (3 * t).detach()).sigmoid(), "c"),
    ("hypot", lambda t: torcia.hypot(t, 2 * t.flip(1)), "c"),
    ("floor", lambda t: (3 * t).floor() * t, "c"),
]


@pytest.mark.parametrize("op, fn, spec", GRADIENT_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GRADIENT_CASES)])
def test_gradients_through_decompositions(prims, op, fn, spec):
    """Gradients through a decomposition (complex inputs and outputs included) equal the
    ones the op's own derivative gives on "cpu"."""
    assert not library.get_op(op).primitive
    grads = []
    for device in ("cpu", prims):
        x = _made(spec, torcia.float64)[0].to(device).requires_grad_()
        out = fn(x)
        parts = (out.real, out.imag) if out.is_complex() else (out,)
        weight = torcia.tensor(np.linspace(-1, 2, out.numel()).reshape(tuple(out.shape)),
                               device=device)
        sum(((p * weight).sum() for p in parts), torcia.zeros((), dtype=torcia.float64,
                                                             device=device)).backward()
        grads.append(x.grad.to("cpu").numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32])
@pytest.mark.parametrize("given", ["both", "out", "cs"])
def test_lstm_layer_backward_decomposes_like_its_kernel(prims, given, dtype):
    """lstm_layer_backward on the forward's own results, with either gradient absent: the
    reference kernel's four gradients."""
    x_gates, h0, c0, w = _made("LHHD", dtype)
    host = [t.numpy() for t in (x_gates, h0, c0, w)]
    out, cs, acts = REFERENCE["lstm_layer"](*host)
    g_out = None if given == "cs" else _clean(dtype, out.shape, 47)
    g_cs = None if given == "out" else _clean(dtype, cs.shape, 48)
    grads = (g_out, g_cs)
    want = REFERENCE["lstm_layer_backward"](
        *(None if g is None else g.numpy() for g in grads), acts, cs, out, *host[1:])
    inputs = (*grads, *(torcia.tensor(t) for t in (acts, cs, out)), h0, c0, w)
    got = library.call("lstm_layer_backward",
                       tuple(None if t is None else t.to(prims) for t in inputs), {})
    tol = 1e-10 if dtype == torcia.float64 else 1e-5
    for got_part, want_part in zip(got, want):
        np.testing.assert_allclose(got_part.to("cpu").numpy(), want_part, rtol=tol, atol=tol)


def test_a_singular_matrix_has_no_inverse_in_the_kernels_words(prims):
    singular = torcia.tensor([[[1.0, 0.0], [0.0, 2.0]], [[1.0, 2.0], [2.0, 4.0]]])
    with pytest.raises(torcia.linalg.LinAlgError) as want:
        torcia.linalg.inv(singular)
    with pytest.raises(torcia.linalg.LinAlgError) as got:
        torcia.linalg.inv(singular.to(prims))
    assert str(got.value) == str(want.value)
    assert "(Batch element 1): The diagonal element 2 is zero" in str(got.value)


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32])
def test_ctc_loss_decomposes_like_its_kernel(prims, dtype):
    """CTC's negative log likelihoods (repeated labels, an empty target, sequences shorter
    than the batch's) and their gradients through the decomposition: the kernel's."""
    rng = np.random.default_rng(51)
    logits = rng.standard_normal((7, 4, 5))
    targets = torcia.tensor([[1, 1, 2], [3, 4, 0], [2, 0, 0], [0, 0, 0]])
    inputs, lengths = torcia.tensor([7, 6, 3, 5]), torcia.tensor([3, 2, 1, 0])
    tol = 1e-10 if dtype == torcia.float64 else 1e-5
    results = []
    for device in ("cpu", prims):
        x = torcia.tensor(logits, dtype=dtype, device=device, requires_grad=True)
        log_probs = F.log_softmax(x, dim=2)
        nll = library.call("ctc_loss", (log_probs, *(t.to(device) for t in (
            targets, inputs, lengths))), {"blank": 0})
        (nll * torcia.tensor([1.0, -0.5, 2.0, 0.25], dtype=dtype, device=device)).sum().backward()
        results.append((nll.detach().to("cpu").numpy(), x.grad.to("cpu").numpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 3), (3, 2)])
def test_lu_permutation_decomposes_like_its_kernel(prims, shape):
    """The permutation matrices of LU's row swaps (batched, tall and wide matrices)."""
    a = _clean(torcia.float64, shape, 52)
    pivots = library.call("linalg_lu_factor", (a,), {})[1]
    params = {"m": shape[-2], "dtype": np.dtype(np.float32)}
    want = REFERENCE["linalg_lu_permutation"](pivots.numpy(), **params)
    got = library.call("linalg_lu_permutation", (pivots.to(prims),), params)
    assert got.dtype == torcia.float32
    np.testing.assert_array_equal(got.to("cpu").numpy(), want)


@pytest.mark.parametrize("dtype", [torcia.float64, torcia.float32])
def test_ctc_loss_backward_decomposes_like_its_kernel(prims, dtype):
    """CTC's fused backward (alpha and beta) on the forward's own losses, an impossible
    alignment (a target longer than its input: an infinite loss, no gradient) included."""
    rng = np.random.default_rng(53)
    logits = rng.standard_normal((6, 4, 5))
    log_probs = (logits - np.log(np.exp(logits).sum(2, keepdims=True))).astype(
        str(dtype).removeprefix("torcia."))
    host = (log_probs, np.array([[1, 1, 2], [3, 4, 0], [2, 0, 0], [4, 4, 4]]),
            np.array([6, 5, 3, 4]), np.array([3, 2, 1, 3]))
    nll = REFERENCE["ctc_loss"](*host, blank=0)
    g = np.array([1.0, -0.5, 2.0, 0.25]).astype(log_probs.dtype)
    want = REFERENCE["ctc_loss_backward"](g, *host, nll, 0)
    inputs = tuple(torcia.tensor(x).to(prims) for x in (g, *host, nll))
    got = library.call("ctc_loss_backward", inputs + (0,), {})
    assert np.isinf(nll[3]) and got.dtype == dtype
    tol = 1e-10 if dtype == torcia.float64 else 1e-5
    np.testing.assert_allclose(got.to("cpu").numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("fn, values", [
    (torcia.special.entr, [0.0, math.inf, 0.5]),  # -(log x + 1): +inf at 0, -inf at inf
    (lambda t: torcia.hypot(t, t.flip(0)), [0.0, 0.0, 3.0]),  # NaN at the origin
], ids=["entr", "hypot"])
def test_a_decomposed_op_with_a_formula_takes_its_gradient_from_the_formula(prims, fn, values):
    # where a composition's chain rule differs from the op's formula (an infinite slope,
    # a point where the formula is NaN), the device without the kernel gives the formula's
    # gradient, as the device with it does; the op is one node of the graph
    grads = []
    for device in ("cpu", prims):
        x = torcia.tensor(values, dtype=torcia.float64, device=device, requires_grad=True)
        out = fn(x)
        assert out.grad_fn.name() == fn(x.detach().to("cpu").requires_grad_()).grad_fn.name()
        out.sum().backward()
        grads.append(x.grad.to("cpu").numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
