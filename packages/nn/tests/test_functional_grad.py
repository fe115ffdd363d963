"""Finite-difference checks (float64) of every ``torcia.nn.functional`` op, first and,
where supported, second order.

Each case names the core op it exercises (the derivative-table test looks for those
names), a function of the tensors that require grad, and those tensors.
"""

import pytest

import torcia
import torcia.nn.functional as F
from torcia.autograd import gradcheck, gradgradcheck
from torcia.library import call

torcia.manual_seed(0)


def r(*shape, lo=None):
    """A small float64 leaf; ``lo`` shifts it away from kinks (e.g. positive values)."""
    t = torcia.randn(*shape, dtype=torcia.float64)
    if lo is not None:
        t = t.abs() + lo
    return t.requires_grad_()


def away_from(x, points, gap=0.05):
    """``x`` moved so no element is within ``gap`` of a kink (finite differences)."""
    with torcia.no_grad():
        for p in points:
            x.masked_fill_((x - p).abs() < gap, p + 2 * gap)
    return x


def first_grad(fn, x, g):
    """d fn(x) / dx contracted with ``g``, kept differentiable (double backward); grad
    mode is forced on because finite differences evaluate this under no_grad."""
    with torcia.enable_grad():
        return torcia.autograd.grad(fn(x), x, g, create_graph=True)[0]


def seeded(fn):
    def run(*xs):
        torcia.manual_seed(1234)
        return fn(*xs)

    return run


IDX = torcia.tensor([2, 0, 1])
IDX4 = torcia.tensor([[0, 3], [3, 1]])
CLASS_W = torcia.tensor([0.5, 2.0, 1.0, 1.5], dtype=torcia.float64)

# (op name, fn, inputs, second order?)
POS_WEIGHT = r(2, lo=0.5).detach()

CASES = [
    # activations
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), [away_from(r(3, 4), [0])], True),
    ("elu", lambda x: F.elu(x, 1.5), [away_from(r(3, 4), [0])], True),
    ("selu", F.selu, [away_from(r(3, 4), [0])], True),
    ("celu", lambda x: F.celu(x, 0.7), [away_from(r(3, 4), [0])], True),
    ("gelu", F.gelu, [r(3, 4)], True),
    ("gelu", lambda x: F.gelu(x, approximate="tanh"), [r(3, 4)], True),
    ("silu", F.silu, [r(3, 4)], True),
    ("mish", F.mish, [r(3, 4)], True),
    ("softplus", lambda x: F.softplus(x, beta=2.0, threshold=1.0),
     [away_from(r(3, 4), [0.5])], True),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.5), [away_from(r(3, 4), [-0.5, 0.5])], True),
    ("hardtanh", F.relu6, [away_from(r(3, 4) * 4, [0, 6])], True),
    ("hardswish", F.hardswish, [away_from(r(3, 4) * 3, [-3, 3])], True),
    ("hardsigmoid", F.hardsigmoid, [away_from(r(3, 4) * 3, [-3, 3])], True),
    ("logsigmoid", F.logsigmoid, [r(3, 4)], True),
    ("softsign", F.softsign, [away_from(r(3, 4), [0])], True),
    ("tanhshrink", F.tanhshrink, [r(3, 4)], True),
    ("relu", F.relu, [away_from(r(3, 4), [0])], True),
    ("sigmoid", F.sigmoid, [r(3, 4)], True),
    ("tanh", F.tanh, [r(3, 4)], True),
    ("prelu", F.prelu, [away_from(r(2, 3, 2), [0]), r(3)], True),
    ("threshold", lambda x: F.threshold(x, 0.1, 2.0), [away_from(r(3, 4), [0.1])], True),
    ("hardshrink", F.hardshrink, [away_from(r(3, 4), [-0.5, 0.5])], True),
    ("softshrink", F.softshrink, [away_from(r(3, 4), [-0.5, 0.5])], True),
    ("glu", F.glu, [r(3, 4)], True),
    ("softmax", lambda x: F.softmax(x, dim=1), [r(3, 4)], True),
    ("softmax", lambda x: F.softmin(x, dim=0), [r(3, 4)], True),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-1), [r(2, 3, 4)], True),
    # linear maps
    ("linear", F.linear, [r(2, 3), r(4, 3), r(4)], True),
    ("linear", F.linear, [r(2, 2, 3), r(4, 3), r(4)], True),
    ("linear", F.linear, [r(3), r(4, 3)], True),
    ("bilinear", F.bilinear, [r(2, 3), r(2, 2), r(4, 3, 2), r(4)], True),
    # convolution
    ("conv", lambda x, w, b: F.conv2d(x, w, b), [r(1, 2, 4, 4), r(3, 2, 2, 2), r(3)], True),
    ("conv", lambda x, w: F.conv2d(x, w, stride=2, padding=1, dilation=2),
     [r(2, 2, 5, 5), r(2, 2, 2, 2)], True),
    ("conv", lambda x, w: F.conv2d(x, w, groups=2, padding="same"),
     [r(1, 4, 4, 3), r(2, 2, 2, 3)], True),
    ("conv", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
     [r(2, 2, 7), r(3, 2, 3), r(3)], True),
    ("conv_transpose", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                          output_padding=1),
     [r(1, 2, 3, 3), r(2, 3, 3, 3), r(3)], True),
    ("conv_transpose", lambda x, w: F.conv_transpose2d(x, w, groups=2, dilation=2),
     [r(1, 4, 2, 3), r(4, 1, 2, 2)], True),
    ("conv_transpose", lambda x, w: F.conv_transpose1d(x, w, stride=3),
     [r(2, 2, 3), r(2, 2, 2)], True),
    ("conv_weight", lambda x, w: F.conv2d(x, w, stride=2), [r(1, 2, 5, 5), r(2, 2, 3, 3)],
     True),
    # patches and resizing
    ("im2col", lambda x: F.unfold(x, 2, padding=1, stride=2), [r(1, 2, 3, 4)], True),
    ("col2im", lambda c: F.fold(c, (3, 3), 2), [r(1, 8, 4)], True),
    ("interpolate", lambda x: F.interpolate(x, scale_factor=2), [r(1, 2, 2, 3)], True),
    ("interpolate", lambda x: F.interpolate(x, size=(3, 5), mode="bilinear",
                                            align_corners=False), [r(1, 1, 2, 3)], True),
    ("interpolate", lambda x: F.interpolate(x, size=4, mode="linear", align_corners=True),
     [r(1, 2, 3)], True),
    ("pad", lambda x: F.pad(x, (1, 2, 0, 1), mode="reflect"), [r(1, 1, 3, 4)], True),
    ("pad", lambda x: F.pad(x, (1, 1), mode="circular"), [r(1, 2, 3)], True),
    ("interpolate", lambda x: F.interpolate(x, size=(2, 3), mode="area"), [r(1, 1, 3, 5)],
     True),
    ("local_response_norm", lambda x: F.local_response_norm(x, 3, alpha=0.5), [r(1, 4, 3)],
     True),
    ("channel_shuffle", lambda x: F.channel_shuffle(x, 2), [r(1, 4, 2)], True),
    ("lp_pool2d", lambda x: F.lp_pool2d(x, 2, 2), [r(1, 1, 4, 4, lo=0.2)], True),
    ("lp_pool1d", lambda x: F.lp_pool1d(x, 3, 2), [r(1, 2, 4, lo=0.2)], True),
    ("max_unpool2d", lambda x: F.max_unpool2d(x, torcia.tensor([[[[0, 3], [10, 15]]]]), 2),
     [r(1, 1, 2, 2)], True),
    ("rms_norm", lambda x, w: F.rms_norm(x, (3,), w), [r(2, 3), r(3)], True),
    ("pdist", F.pdist, [r(4, 3)], True),
    ("adaptive_max_pool", lambda x: F.adaptive_max_pool3d(x, 2), [r(1, 1, 3, 3, 3)], True),
    ("affine_grid", lambda th: F.affine_grid(th, (1, 1, 2, 3), align_corners=False),
     [r(1, 2, 3)], True),
    ("grid_sample", lambda x, g: F.grid_sample(x, g, align_corners=False),
     [r(1, 2, 3, 3), torcia.tensor([[[[0.31, -0.52], [0.77, 0.13]]]], dtype=torcia.float64)
      .requires_grad_()], True),
    ("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), [r(1, 4, 2, 2)], True),
    ("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), [r(1, 1, 4, 2)], True),
    # pooling
    ("max_pool", lambda x: F.max_pool2d(x, 2), [r(1, 2, 4, 4)], True),
    ("max_pool", lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True),
     [r(1, 1, 5, 6)], True),
    ("max_pool", lambda x: F.max_pool1d(x, 2, dilation=2), [r(2, 2, 7)], True),
    ("max_pool_backward", lambda x: F.max_pool2d(x, 2, 1), [r(1, 1, 3, 3)], True),
    ("adaptive_max_pool", lambda x: F.adaptive_max_pool2d(x, (2, 3)), [r(1, 2, 5, 4)], True),
    ("avg_pool", lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True,
                                        count_include_pad=False), [r(1, 2, 6, 5)], True),
    ("avg_pool", lambda x: F.avg_pool1d(x, 2), [r(2, 1, 5)], True),
    ("avg_pool_backward", lambda x: F.avg_pool2d(x, 2, 1, divisor_override=3),
     [r(1, 1, 3, 4)], True),
    ("adaptive_avg_pool", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [r(1, 2, 5, 4)], True),
    # normalisation
    ("batch_norm", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     [r(3, 2, 2), r(2), r(2)], True),
    ("batch_norm", lambda x, w, b: F.batch_norm(
        x, torcia.tensor([0.1, -0.2], dtype=torcia.float64),
        torcia.tensor([1.5, 0.5], dtype=torcia.float64), w, b, training=False),
     [r(3, 2), r(2), r(2)], True),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (2, 3), w, b), [r(2, 2, 3), r(2, 3), r(2, 3)],
     True),
    ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), [r(2, 4, 3), r(4), r(4)], True),
    ("instance_norm", lambda x: F.instance_norm(x), [r(2, 2, 4)], True),
    ("normalize", lambda x: F.normalize(x, dim=1), [r(3, 4)], True),
    # embedding
    ("embedding", lambda w: F.embedding(IDX4, w), [r(4, 3)], True),
    # (padding_idx is left out: its row is read but, by design, gets no gradient)
    ("embedding_backward", lambda w: F.embedding(torcia.tensor([1, 1, 0]), w), [r(2, 3)],
     True),
    ("embedding_bag", lambda w, psw: F.embedding_bag(
        torcia.tensor([1, 3, 2, 0, 3]), w, torcia.tensor([0, 2, 2]), mode="sum",
        per_sample_weights=psw), [r(4, 2), r(5)], True),
    ("embedding_bag", lambda w: F.embedding_bag(torcia.tensor([[1, 3], [2, 2]]), w),
     [r(4, 2)], True),
    ("embedding_bag", lambda w: F.embedding_bag(torcia.tensor([1, 3, 2, 0]), w,
                                                torcia.tensor([0, 3]), mode="max"),
     [r(4, 2)], True),
    # the fused LSTM step of torcia.nn.LSTM; with one output alone, the other's gradient
    # is None
    ("lstm_cell", lambda g, c: call("lstm_cell", (g, c), {})[:2], [r(3, 8), r(3, 2)], True),
    ("lstm_cell", lambda g, c: call("lstm_cell", (g, c), {})[0], [r(3, 8), r(3, 2)], True),
    ("lstm_cell", lambda g, c: call("lstm_cell", (g, c), {})[1], [r(3, 8), r(1, 2)], True),
    # a whole LSTM layer (time, batch, 4 * hidden), as torcia.nn.LSTM runs it
    ("lstm_layer", lambda x, h, c, w: call("lstm_layer", (x, h, c, w), {})[:2],
     [r(3, 2, 8), r(2, 2), r(2, 2), r(2, 8)], True),
    ("lstm_layer", lambda x, h, c, w: call("lstm_layer", (x, h, c, w), {})[0][-1],
     [r(2, 1, 4), r(1, 1), r(1, 1), r(1, 4)], True),
    ("lstm_layer", lambda x, h, c, w: call("lstm_layer", (x.mT, h, c, w), {})[1][-1],
     [r(2, 12, 3), r(3, 3), r(3, 3), r(3, 12)], True),
    # distances and attention
    ("cosine_similarity", F.cosine_similarity, [r(3, 4), r(3, 4)], True),
    ("pairwise_distance", F.pairwise_distance, [r(3, 4), r(3, 4)], True),
    ("scaled_dot_product_attention", lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True), [r(1, 3, 2), r(1, 3, 2), r(1, 3, 2)], True),
    ("scaled_dot_product_attention", lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torcia.tensor([[True, False], [True, True], [False, True]])),
     [r(3, 2), r(2, 2), r(2, 3)], True),
    # losses
    ("mse_loss", F.mse_loss, [r(3, 2), r(3, 2)], True),
    ("l1_loss", F.l1_loss, [r(3, 2), r(3, 2)], True),
    ("smooth_l1_loss", lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), [r(3, 2), r(3, 2)], True),
    ("huber_loss", lambda a, b: F.huber_loss(a, b, delta=0.5, reduction="sum"),
     [r(3, 2), r(3, 2)], True),
    ("cross_entropy", lambda x: F.cross_entropy(x, IDX), [r(3, 4)], True),
    ("cross_entropy", lambda x: F.cross_entropy(x, torcia.tensor([2, -100, 1]), CLASS_W,
                                                label_smoothing=0.2), [r(3, 4)], True),
    ("cross_entropy", lambda x: F.cross_entropy(x, torcia.tensor([[0, 1], [2, 2]]),
                                                reduction="none"), [r(2, 3, 2)], True),
    ("cross_entropy", lambda x, t: F.cross_entropy(x, t.softmax(1), label_smoothing=0.1),
     [r(3, 4), r(3, 4)], True),
    ("nll_loss", lambda x: F.nll_loss(x, IDX, CLASS_W), [r(3, 4)], True),
    ("nll_loss", lambda x: F.nll_loss(x, torcia.tensor([0, 1]), reduction="sum"), [r(2, 3)],
     True),
    ("binary_cross_entropy", lambda p, t, w: F.binary_cross_entropy(p.sigmoid(), t, w),
     [r(3, 2), r(3, 2), r(3, 2)], True),
    # pos_weight a constant: PyTorch refuses one that requires grad
    ("binary_cross_entropy_with_logits", lambda x, t: F.binary_cross_entropy_with_logits(
        x, t, pos_weight=POS_WEIGHT), [r(3, 2), r(3, 2)], True),
    ("kl_div", lambda x, t: F.kl_div(x, t, reduction="batchmean"), [r(3, 2), r(3, 2, lo=0.1)],
     True),
    ("kl_div", lambda x, t: F.kl_div(x, t, log_target=True), [r(3, 2), r(3, 2)], True),
    ("cosine_embedding_loss", lambda a, b: F.cosine_embedding_loss(
        a, b, torcia.tensor([1.0, -1.0, 1.0]), margin=-0.9), [r(3, 4), r(3, 4)], True),
    ("margin_ranking_loss", lambda a, b: F.margin_ranking_loss(
        a, b, torcia.tensor([1.0, -1.0, 1.0]), margin=0.1), [r(3), r(3)], True),
    ("triplet_margin_loss", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=3.0,
                                                                   swap=True),
     [r(3, 4), r(3, 4), r(3, 4)], True),
    # the true derivative in log_probs (PyTorch's differs by exp(log_probs), see ctc_loss)
    ("ctc_loss", lambda lp: F.ctc_loss(lp, torcia.tensor([[1, 2], [2, 2]]), [4, 5], [2, 2],
                                       reduction="sum"), [r(5, 2, 3)], False),
    ("ctc_loss", lambda x: F.ctc_loss(x.log_softmax(2), torcia.tensor([[1], [2]]), [3, 2],
                                      [1, 1]), [r(3, 2, 3)], False),
    ("poisson_nll_loss", F.poisson_nll_loss, [r(3, 2), r(3, 2, lo=0.0)], True),
    ("gaussian_nll_loss", lambda x, y, v: F.gaussian_nll_loss(x, y, v), [r(3, 2), r(3, 2),
                                                                        r(3, 2, lo=0.2)], True),
    ("multilabel_soft_margin_loss", lambda x: F.multilabel_soft_margin_loss(
        x, torcia.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])), [r(3, 2)], True),
    ("triplet_margin_with_distance_loss", lambda a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, margin=3.0), [r(3, 4), r(3, 4), r(3, 4)], True),
    ("multilabel_margin_loss", lambda x: F.multilabel_margin_loss(
        x, torcia.tensor([[3, 0, -1, 1], [1, -1, 3, 0]])), [r(2, 4)], True),
    ("soft_margin_loss", lambda x: F.soft_margin_loss(x, torcia.tensor([1.0, -1.0])), [r(2)],
     True),
    ("hinge_embedding_loss", lambda x: F.hinge_embedding_loss(
        x, torcia.tensor([1.0, -1.0, -1.0])), [away_from(r(3), [1.0])], True),
    ("multi_margin_loss", lambda x: F.multi_margin_loss(x, IDX, p=2), [r(3, 4)], True),
    # first derivatives that are ops of their own, checked as functions (x, output grad)
    ("gelu_backward", lambda x, g: first_grad(F.gelu, x, g), [r(3, 4), r(3, 4)], True),
    ("gelu_backward", lambda x, g: first_grad(lambda t: F.gelu(t, approximate="tanh"), x, g),
     [r(3, 4), r(3, 4)], True),
    ("silu_backward", lambda x, g: first_grad(F.silu, x, g), [r(3, 4), r(3, 4)], True),
    ("cross_entropy_backward", lambda x, g: first_grad(
        lambda t: F.cross_entropy(t, torcia.tensor([2, -100, 1]), CLASS_W, label_smoothing=0.3,
                                  reduction="none"), x, g), [r(3, 4), r(3)], True),
    ("cross_entropy_backward", lambda x, g: first_grad(
        lambda t: F.cross_entropy(t, IDX, reduction="sum"), x, g), [r(3, 4), r()], True),
    ("cross_entropy_backward", lambda x, g: first_grad(
        lambda t: F.cross_entropy(t, IDX, CLASS_W), x, g), [r(3, 4), r()], True),
    # random ops reseed on every call, so finite differences see one fixed mask
    ("dropout", seeded(lambda x: F.dropout(x, 0.3)), [r(3, 4)], True),
    ("dropout", seeded(lambda x: F.dropout2d(x, 0.5)), [r(2, 3, 2, 2)], True),
    ("dropout", seeded(lambda x: F.dropout1d(x, 0.5)), [r(2, 3, 2)], True),
    ("alpha_dropout", seeded(lambda x: F.alpha_dropout(x, 0.3, training=True)), [r(3, 4)],
     True),
    ("feature_alpha_dropout", seeded(lambda x: F.feature_alpha_dropout(x, 0.5, training=True)),
     [r(2, 3, 2)], True),
    ("rrelu", seeded(lambda x: F.rrelu(x, training=True)), [away_from(r(3, 4), [0])], True),
    ("gumbel_softmax", seeded(lambda x: F.gumbel_softmax(x, tau=0.7)), [r(2, 3)], True),
    ("embedding", lambda w: F.embedding(IDX4, w, max_norm=10.0), [r(4, 3)], True),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_gradcheck(case):
    _, fn, inputs, _ = case
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("case", [c for c in CASES if c[3]],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES) if c[3]])
def test_gradgradcheck(case):
    _, fn, inputs, _ = case
    assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)


def test_dropout_gradient_is_the_mask():
    torcia.manual_seed(3)
    x = r(50)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    kept = y.detach() != 0
    assert (x.grad == kept.to(torcia.float64) / 0.6).all()


def test_embedding_padding_row_gets_no_gradient():
    w = r(4, 3)
    F.embedding(torcia.tensor([[3, 3], [0, 3]]), w, padding_idx=3).sum().backward()
    assert w.grad[3].abs().sum().item() == 0
    assert w.grad[0].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("loss", [F.cross_entropy, F.nll_loss])
def test_class_weight_is_not_differentiable(loss):
    # as PyTorch: a class weight that requires grad is an error, not a silent zero
    w = r(4, lo=0.5)
    with pytest.raises(RuntimeError, match="derivative for 'weight' is not implemented"):
        loss(r(3, 4), IDX, w).backward()
