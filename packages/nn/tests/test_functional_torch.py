"""Parity with PyTorch for every ``torcia.nn.functional`` op: forward values and the
gradients of every input, on the same random data (float64, and float32 for the layers).

A case is ``fn(lib, F, *tensors)`` run once with ``(torch, torch.nn.functional)`` and
once with ``(torcia, torcia.nn.functional)``, so both see the same call.
"""

import numpy as np
import pytest

import torcia
import torcia.nn.functional as TF

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
TorchF = torch.nn.functional


def t(lib, values, dtype=None):
    return lib.tensor(values) if dtype is None else lib.tensor(values, dtype=dtype)


# (name, fn, input shapes); a shape given as ("pos", shape) draws positive values
CASES = [
    # activations
    ("relu", lambda lib, F, x: F.relu(x), [(3, 5)]),
    ("leaky_relu", lambda lib, F, x: F.leaky_relu(x, 0.1), [(3, 5)]),
    ("elu", lambda lib, F, x: F.elu(x, 0.7), [(3, 5)]),
    ("selu", lambda lib, F, x: F.selu(x), [(3, 5)]),
    ("celu", lambda lib, F, x: F.celu(x, 1.3), [(3, 5)]),
    ("gelu", lambda lib, F, x: F.gelu(x), [(3, 5)]),
    ("gelu-tanh", lambda lib, F, x: F.gelu(x, approximate="tanh"), [(3, 5)]),
    ("silu", lambda lib, F, x: F.silu(x), [(3, 5)]),
    ("mish", lambda lib, F, x: F.mish(x), [(3, 5)]),
    ("softplus", lambda lib, F, x: F.softplus(x * 8, beta=2, threshold=5), [(3, 5)]),
    ("hardtanh", lambda lib, F, x: F.hardtanh(x, -0.3, 0.6), [(3, 5)]),
    ("relu6", lambda lib, F, x: F.relu6(x * 5), [(3, 5)]),
    ("hardswish", lambda lib, F, x: F.hardswish(x * 4), [(3, 5)]),
    ("hardsigmoid", lambda lib, F, x: F.hardsigmoid(x * 4), [(3, 5)]),
    ("logsigmoid", lambda lib, F, x: F.logsigmoid(x * 30), [(3, 5)]),
    ("softsign", lambda lib, F, x: F.softsign(x), [(3, 5)]),
    ("tanhshrink", lambda lib, F, x: F.tanhshrink(x), [(3, 5)]),
    ("sigmoid", lambda lib, F, x: F.sigmoid(x), [(3, 5)]),
    ("tanh", lambda lib, F, x: F.tanh(x), [(3, 5)]),
    ("prelu", lambda lib, F, x, w: F.prelu(x, w), [(2, 3, 4), (3,)]),
    ("threshold", lambda lib, F, x: F.threshold(x, 0.2, -1.0), [(3, 5)]),
    ("hardshrink", lambda lib, F, x: F.hardshrink(x, 0.3), [(3, 5)]),
    ("softshrink", lambda lib, F, x: F.softshrink(x, 0.3), [(3, 5)]),
    ("glu", lambda lib, F, x: F.glu(x, 1), [(3, 4)]),
    ("softmax", lambda lib, F, x: F.softmax(x * 10, dim=1), [(3, 5, 2)]),
    ("softmin", lambda lib, F, x: F.softmin(x, dim=0), [(3, 5)]),
    ("log_softmax", lambda lib, F, x: F.log_softmax(x * 10, dim=-1), [(3, 5)]),
    # linear maps
    ("linear", lambda lib, F, x, w, b: F.linear(x, w, b), [(4, 3), (5, 3), (5,)]),
    ("linear-3d", lambda lib, F, x, w: F.linear(x, w), [(2, 4, 3), (5, 3)]),
    ("linear-1d", lambda lib, F, x, w, b: F.linear(x, w, b), [(3,), (5, 3), (5,)]),
    ("bilinear", lambda lib, F, a, b, w, c: F.bilinear(a, b, w, c),
     [(4, 3), (4, 2), (5, 3, 2), (5,)]),
    # convolution
    ("conv2d", lambda lib, F, x, w, b: F.conv2d(x, w, b), [(2, 3, 6, 5), (4, 3, 3, 2), (4,)]),
    ("conv2d-stride-pad", lambda lib, F, x, w: F.conv2d(x, w, stride=(2, 1), padding=(1, 2)),
     [(2, 3, 7, 6), (4, 3, 3, 3)]),
    ("conv2d-dilation", lambda lib, F, x, w: F.conv2d(x, w, dilation=2, stride=2, padding=1),
     [(1, 2, 9, 8), (3, 2, 3, 3)]),
    ("conv2d-groups", lambda lib, F, x, w, b: F.conv2d(x, w, b, groups=3, padding=1),
     [(2, 6, 5, 5), (9, 2, 3, 3), (9,)]),
    ("conv2d-depthwise", lambda lib, F, x, w: F.conv2d(x, w, groups=4, stride=2),
     [(2, 4, 6, 6), (4, 1, 3, 3)]),
    ("conv2d-same", lambda lib, F, x, w: F.conv2d(x, w, padding="same", dilation=(1, 2)),
     [(1, 2, 5, 6), (3, 2, 4, 3)]),
    ("conv2d-valid", lambda lib, F, x, w: F.conv2d(x, w, padding="valid"),
     [(1, 2, 5, 6), (3, 2, 2, 3)]),
    ("conv2d-unbatched", lambda lib, F, x, w: F.conv2d(x, w, padding=1),
     [(2, 4, 4), (3, 2, 3, 3)]),
    ("conv3d", lambda lib, F, x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1,
                                                groups=2),
     [(1, 4, 4, 5, 3), (2, 2, 2, 3, 2), (2,)]),
    ("conv_transpose3d", lambda lib, F, x, w: F.conv_transpose3d(x, w, stride=2, padding=1,
                                                                 output_padding=1),
     [(1, 2, 2, 3, 2), (2, 3, 2, 2, 3)]),
    ("conv1d", lambda lib, F, x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2),
     [(2, 3, 11), (4, 3, 3), (4,)]),
    ("conv1d-groups-same", lambda lib, F, x, w: F.conv1d(x, w, groups=2, padding="same"),
     [(2, 4, 7), (6, 2, 4)]),
    ("conv_transpose2d", lambda lib, F, x, w, b: F.conv_transpose2d(x, w, b),
     [(2, 3, 4, 5), (3, 2, 3, 2), (2,)]),
    ("conv_transpose2d-stride", lambda lib, F, x, w: F.conv_transpose2d(
        x, w, stride=2, padding=1, output_padding=1), [(2, 3, 4, 3), (3, 4, 3, 3)]),
    ("conv_transpose2d-groups-dil", lambda lib, F, x, w, b: F.conv_transpose2d(
        x, w, b, stride=(2, 3), padding=(0, 1), groups=2, dilation=2, output_padding=(1, 0)),
     [(1, 4, 3, 4), (4, 3, 2, 3), (6,)]),
    ("conv_transpose1d", lambda lib, F, x, w: F.conv_transpose1d(x, w, stride=3, padding=2),
     [(2, 3, 5), (3, 2, 4)]),
    # pooling
    ("max_pool2d", lambda lib, F, x: F.max_pool2d(x, 2), [(2, 3, 6, 6)]),
    ("max_pool2d-stride-pad", lambda lib, F, x: F.max_pool2d(x, 3, 2, padding=1),
     [(2, 2, 7, 6)]),
    ("max_pool2d-ceil", lambda lib, F, x: F.max_pool2d(x, (3, 2), (2, 2), ceil_mode=True),
     [(1, 2, 8, 7)]),
    ("max_pool2d-ceil-pad-dil", lambda lib, F, x: F.max_pool2d(
        x, 3, 2, padding=1, dilation=2, ceil_mode=True), [(1, 2, 9, 10)]),
    ("max_pool2d-indices", lambda lib, F, x: F.max_pool2d(x, 2, 1, padding=1,
                                                          return_indices=True)[1],
     [(1, 2, 4, 5)]),
    ("max_pool1d", lambda lib, F, x: F.max_pool1d(x, 3, 2, padding=1, ceil_mode=True),
     [(2, 3, 10)]),
    ("max_pool1d-indices", lambda lib, F, x: F.max_pool1d(x, 2, dilation=2,
                                                          return_indices=True)[1],
     [(2, 3, 9)]),
    ("avg_pool2d", lambda lib, F, x: F.avg_pool2d(x, 2), [(2, 3, 6, 6)]),
    ("avg_pool2d-pad", lambda lib, F, x: F.avg_pool2d(x, 3, 2, padding=1), [(2, 2, 7, 6)]),
    ("avg_pool2d-ceil-nopad", lambda lib, F, x: F.avg_pool2d(
        x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False), [(1, 2, 8, 7)]),
    ("avg_pool2d-ceil-pad", lambda lib, F, x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True),
     [(1, 2, 8, 7)]),
    ("avg_pool2d-divisor", lambda lib, F, x: F.avg_pool2d(x, 2, 1, divisor_override=3),
     [(1, 2, 4, 5)]),
    ("avg_pool3d", lambda lib, F, x: F.avg_pool3d(x, 2, padding=1, count_include_pad=False,
                                                  ceil_mode=True), [(1, 2, 3, 5, 4)]),
    ("avg_pool1d", lambda lib, F, x: F.avg_pool1d(x, 3, 2, padding=1, ceil_mode=True,
                                                  count_include_pad=False), [(2, 3, 10)]),
    ("adaptive_avg_pool2d", lambda lib, F, x: F.adaptive_avg_pool2d(x, (3, 4)),
     [(2, 2, 7, 9)]),
    ("adaptive_avg_pool2d-none", lambda lib, F, x: F.adaptive_avg_pool2d(x, (None, 2)),
     [(2, 2, 5, 5)]),
    ("adaptive_avg_pool1d", lambda lib, F, x: F.adaptive_avg_pool1d(x, 4), [(2, 3, 10)]),
    ("adaptive_max_pool2d", lambda lib, F, x: F.adaptive_max_pool2d(x, (3, 4)),
     [(2, 2, 7, 9)]),
    ("adaptive_max_pool2d-indices", lambda lib, F, x: F.adaptive_max_pool2d(
        x, 3, return_indices=True)[1], [(2, 2, 7, 5)]),
    ("adaptive_max_pool1d", lambda lib, F, x: F.adaptive_max_pool1d(x, 4), [(2, 3, 10)]),
    # normalisation
    ("batch_norm-train", lambda lib, F, x, w, b: F.batch_norm(
        x, None, None, w, b, training=True, eps=1e-3), [(4, 3, 2, 2), (3,), (3,)]),
    ("batch_norm-eval", lambda lib, F, x, w, b: F.batch_norm(
        x, t(lib, [0.1, 0.2, -0.3], dtype=x.dtype), t(lib, [1.0, 2.0, 0.5], dtype=x.dtype),
        w, b), [(4, 3, 5), (3,), (3,)]),
    ("layer_norm", lambda lib, F, x, w, b: F.layer_norm(x, (3, 4), w, b),
     [(2, 5, 3, 4), (3, 4), (3, 4)]),
    ("layer_norm-noaffine", lambda lib, F, x: F.layer_norm(x, (4,)), [(3, 4)]),
    ("group_norm", lambda lib, F, x, w, b: F.group_norm(x, 3, w, b), [(2, 6, 2, 3), (6,), (6,)]),
    ("instance_norm", lambda lib, F, x, w, b: F.instance_norm(x, weight=w, bias=b),
     [(2, 3, 5), (3,), (3,)]),
    ("normalize", lambda lib, F, x: F.normalize(x, p=3, dim=0), [(3, 5)]),
    # embedding
    ("embedding", lambda lib, F, w: F.embedding(t(lib, [[1, 4], [4, 0]]), w, padding_idx=4),
     [(5, 3)]),
    ("embedding_bag-2d-mean", lambda lib, F, w: F.embedding_bag(
        t(lib, [[1, 4, 2], [4, 4, 0]]), w, padding_idx=4), [(5, 3)]),
    ("embedding_bag-offsets-sum", lambda lib, F, w, psw: F.embedding_bag(
        t(lib, [1, 3, 2, 0, 3]), w, t(lib, [0, 2, 2, 5]), mode="sum",
        per_sample_weights=psw, include_last_offset=True), [(5, 3), (5,)]),
    ("embedding_bag-offsets-max", lambda lib, F, w: F.embedding_bag(
        t(lib, [1, 3, 2, 0, 3]), w, t(lib, [0, 2, 2]), mode="max"), [(5, 3)]),
    # patches, resizing, shuffles
    ("unfold", lambda lib, F, x: F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=2),
     [(2, 3, 5, 6)]),
    ("fold", lambda lib, F, c: F.fold(c, (4, 5), (2, 3), padding=1, stride=(2, 1)),
     [(2, 12, 15)]),
    ("pad-constant", lambda lib, F, x: F.pad(x, (1, 2, 2, 0), value=0.5), [(2, 3, 4)]),
    ("pad-reflect", lambda lib, F, x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [(1, 2, 4, 5)]),
    ("pad-replicate", lambda lib, F, x: F.pad(x, (2, 1), mode="replicate"), [(1, 2, 4)]),
    ("pad-circular", lambda lib, F, x: F.pad(x, (1, 2, 2, 1), mode="circular"), [(1, 2, 4, 5)]),
    ("interpolate-nearest", lambda lib, F, x: F.interpolate(x, size=(5, 7)), [(1, 2, 3, 4)]),
    ("interpolate-nearest-scale", lambda lib, F, x: F.interpolate(x, scale_factor=2.5),
     [(1, 2, 3, 4)]),
    ("interpolate-bilinear", lambda lib, F, x: F.interpolate(
        x, size=(5, 7), mode="bilinear", align_corners=False), [(1, 2, 3, 4)]),
    ("interpolate-bilinear-down", lambda lib, F, x: F.interpolate(
        x, size=(2, 3), mode="bilinear", align_corners=False), [(1, 2, 5, 7)]),
    ("interpolate-bilinear-corners", lambda lib, F, x: F.interpolate(
        x, scale_factor=(2, 1.5), mode="bilinear", align_corners=True), [(1, 2, 3, 4)]),
    ("interpolate-trilinear", lambda lib, F, x: F.interpolate(
        x, size=(3, 4, 2), mode="trilinear", align_corners=False), [(1, 2, 2, 3, 4)]),
    ("interpolate-nearest-exact", lambda lib, F, x: F.interpolate(x, size=(5, 3),
                                                                  mode="nearest-exact"),
     [(1, 2, 3, 4)]),
    ("interpolate-bilinear-fractional-scales", lambda lib, F, x: F.interpolate(
        x, scale_factor=(2.3, 0.6), mode="bilinear"), [(1, 2, 3, 5)]),
    ("interpolate-bilinear-recompute", lambda lib, F, x: F.interpolate(
        x, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), [(1, 2, 3, 5)]),
    ("interpolate-linear", lambda lib, F, x: F.interpolate(x, size=9, mode="linear"),
     [(2, 2, 4)]),
    ("interpolate-area", lambda lib, F, x: F.interpolate(x, size=(2, 3), mode="area"),
     [(1, 2, 5, 7)]),
    ("local_response_norm", lambda lib, F, x: F.local_response_norm(x, 3, alpha=0.1),
     [(2, 6, 3, 2)]),
    ("channel_shuffle", lambda lib, F, x: F.channel_shuffle(x, 3), [(2, 6, 2, 2)]),
    ("lp_pool2d", lambda lib, F, x: F.lp_pool2d(x.abs() + 0.1, 2, 2), [(1, 2, 4, 5)]),
    ("lp_pool1d", lambda lib, F, x: F.lp_pool1d(x.abs() + 0.1, 3, 3, 2), [(2, 2, 7)]),
    ("adaptive_avg_pool3d", lambda lib, F, x: F.adaptive_avg_pool3d(x, (2, 3, 2)),
     [(1, 2, 3, 5, 4)]),
    ("adaptive_max_pool3d", lambda lib, F, x: F.adaptive_max_pool3d(x, (2, 3, 2)),
     [(1, 2, 3, 5, 4)]),
    ("max_pool3d", lambda lib, F, x: F.max_pool3d(x, 2, padding=1, ceil_mode=True),
     [(1, 2, 3, 5, 4)]),
    ("max_unpool2d", lambda lib, F, x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True),
                                                      2, output_size=(5, 5)), [(1, 2, 5, 5)]),
    ("max_unpool1d", lambda lib, F, x: F.max_unpool1d(*F.max_pool1d_with_indices(x, 2, 2), 2),
     [(2, 3, 6)]),
    ("rms_norm", lambda lib, F, x, w: F.rms_norm(x, (3, 4), w), [(2, 3, 4), (3, 4)]),
    ("rms_norm-default-eps", lambda lib, F, x: F.rms_norm(x * 1e-5, (4,)), [(2, 4)]),
    ("pdist", lambda lib, F, x: F.pdist(x, p=3), [(4, 3)]),
    ("affine_grid", lambda lib, F, th: F.affine_grid(th, (2, 1, 3, 4), align_corners=False),
     [(2, 2, 3)]),
    ("grid_sample", lambda lib, F, x, g: F.grid_sample(x, g * 0.9, align_corners=False),
     [(2, 3, 4, 5), (2, 3, 2, 2)]),
    ("grid_sample-corners-outside", lambda lib, F, x, g: F.grid_sample(
        x, g * 1.5, align_corners=True), [(1, 2, 4, 5), (1, 3, 3, 2)]),
    ("grid_sample-border", lambda lib, F, x, g: F.grid_sample(
        x, g * 1.5, padding_mode="border", align_corners=False), [(1, 2, 4, 5), (1, 3, 3, 2)]),
    ("grid_sample-nearest", lambda lib, F, x, g: F.grid_sample(
        x, g * 0.9, mode="nearest", align_corners=True), [(1, 2, 4, 5), (1, 3, 3, 2)]),
    ("spatial-transformer", lambda lib, F, x, th: F.grid_sample(
        x, F.affine_grid(th * 0.5, (2, 3, 3, 4), align_corners=False), align_corners=False),
     [(2, 3, 5, 6), (2, 2, 3)]),
    ("pixel_shuffle", lambda lib, F, x: F.pixel_shuffle(x, 2), [(2, 8, 3, 2)]),
    ("pixel_unshuffle", lambda lib, F, x: F.pixel_unshuffle(x, 2), [(2, 2, 4, 6)]),
    ("one_hot", lambda lib, F, x: F.one_hot(t(lib, [[0, 3], [2, 2]]), 5) * x.sum(), [(1,)]),
    # distances and attention
    ("cosine_similarity", lambda lib, F, a, b: F.cosine_similarity(a, b, dim=-1),
     [(3, 4), (1, 4)]),
    ("pairwise_distance", lambda lib, F, a, b: F.pairwise_distance(a, b, p=1.5), [(3, 4), (3, 4)]),
    ("sdpa", lambda lib, F, q, k, v: F.scaled_dot_product_attention(q, k, v),
     [(2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)]),
    ("sdpa-causal-scale", lambda lib, F, q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=0.3), [(2, 4, 3), (2, 4, 3), (2, 4, 3)]),
    ("sdpa-bool-mask", lambda lib, F, q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=t(lib, [[True, False, True], [True, True, False]])),
     [(2, 2, 4), (2, 3, 4), (2, 3, 4)]),
    ("sdpa-float-mask", lambda lib, F, q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m), [(2, 2, 4), (2, 3, 4), (2, 3, 4), (2, 3)]),
    # losses
    ("mse_loss", lambda lib, F, a, b: F.mse_loss(a, b), [(3, 4), (3, 4)]),
    ("mse_loss-sum", lambda lib, F, a, b: F.mse_loss(a, b, reduction="sum"), [(3, 4), (3, 4)]),
    ("l1_loss", lambda lib, F, a, b: F.l1_loss(a, b, reduction="none"), [(3, 4), (3, 4)]),
    ("smooth_l1_loss", lambda lib, F, a, b: F.smooth_l1_loss(a, b, beta=0.7), [(3, 4), (3, 4)]),
    ("smooth_l1_loss-beta0", lambda lib, F, a, b: F.smooth_l1_loss(a, b, beta=0.0),
     [(3, 4), (3, 4)]),
    ("huber_loss", lambda lib, F, a, b: F.huber_loss(a, b, delta=0.6), [(3, 4), (3, 4)]),
    ("cross_entropy", lambda lib, F, x: F.cross_entropy(x, t(lib, [1, 0, 4])), [(3, 5)]),
    ("cross_entropy-weight-ignore", lambda lib, F, x: F.cross_entropy(
        x, t(lib, [1, -100, 4, 2]), weight=t(lib, [1.0, 2.0, 0.5, 1.0, 3.0], dtype=x.dtype)),
     [(4, 5)]),
    ("cross_entropy-smoothing", lambda lib, F, x: F.cross_entropy(
        x, t(lib, [1, 3, 4, 2]), weight=t(lib, [1.0, 2.0, 0.5, 1.0, 3.0], dtype=x.dtype),
        ignore_index=3, label_smoothing=0.3), [(4, 5)]),
    ("cross_entropy-smoothing-sum", lambda lib, F, x: F.cross_entropy(
        x, t(lib, [1, 3, 4, 2]), reduction="sum", label_smoothing=0.1), [(4, 5)]),
    ("cross_entropy-kdim", lambda lib, F, x: F.cross_entropy(
        x, t(lib, [[[0, 2], [1, 1]], [[2, 0], [0, 1]]]), reduction="none"), [(2, 3, 2, 2)]),
    ("cross_entropy-kdim-mean", lambda lib, F, x: F.cross_entropy(
        x, t(lib, [[0, 2, 1], [2, 2, 0]]), label_smoothing=0.2), [(2, 3, 3)]),
    ("cross_entropy-unbatched", lambda lib, F, x: F.cross_entropy(x, t(lib, 2)), [(4,)]),
    ("cross_entropy-probs", lambda lib, F, x, p: F.cross_entropy(
        x, p.softmax(1), weight=t(lib, [1.0, 2.0, 0.5], dtype=x.dtype), label_smoothing=0.2),
     [(4, 3), (4, 3)]),
    ("cross_entropy-probs-kdim", lambda lib, F, x, p: F.cross_entropy(x, p.softmax(1)),
     [(2, 3, 4), (2, 3, 4)]),
    ("nll_loss", lambda lib, F, x: F.nll_loss(x, t(lib, [1, 0, 4])), [(3, 5)]),
    ("nll_loss-weight", lambda lib, F, x: F.nll_loss(
        x, t(lib, [1, 0, 4, 0]), weight=t(lib, [1.0, 2.0, 0.5, 1.0, 3.0], dtype=x.dtype),
        ignore_index=0), [(4, 5)]),
    ("nll_loss-none-kdim", lambda lib, F, x: F.nll_loss(
        x, t(lib, [[0, 2], [1, 1]]), reduction="none"), [(2, 3, 2)]),
    ("binary_cross_entropy", lambda lib, F, x, y, w: F.binary_cross_entropy(
        x.sigmoid(), y.sigmoid(), weight=w.detach()), [(3, 4), (3, 4), (3, 4)]),
    ("bce_with_logits", lambda lib, F, x, y: F.binary_cross_entropy_with_logits(
        x * 50, y.sigmoid()), [(3, 4), (3, 4)]),
    ("bce_with_logits-pos_weight", lambda lib, F, x, y, w, pw: F.binary_cross_entropy_with_logits(
        x, y.sigmoid(), weight=w.detach(), pos_weight=pw.detach(), reduction="sum"),
     [(3, 4), (3, 4), (3, 4), (4,)]),
    ("kl_div", lambda lib, F, x, y: F.kl_div(x.log_softmax(1), y.softmax(1),
                                             reduction="batchmean"), [(3, 4), (3, 4)]),
    ("kl_div-log_target", lambda lib, F, x, y: F.kl_div(
        x.log_softmax(1), y.log_softmax(1), reduction="sum", log_target=True), [(3, 4), (3, 4)]),
    ("kl_div-mean", lambda lib, F, x, y: F.kl_div(x, y.softmax(1)), [(3, 4), (3, 4)]),
    ("cosine_embedding_loss", lambda lib, F, a, b: F.cosine_embedding_loss(
        a, b, t(lib, [1.0, -1.0, -1.0]), margin=-0.5), [(3, 4), (3, 4)]),
    ("margin_ranking_loss", lambda lib, F, a, b: F.margin_ranking_loss(
        a, b, t(lib, [1.0, -1.0, -1.0]), margin=0.2), [(3,), (3,)]),
    ("triplet_margin_loss", lambda lib, F, a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0),
     [(3, 4), (3, 4), (3, 4)]),
    ("triplet_margin_loss-swap", lambda lib, F, a, p, n: F.triplet_margin_loss(
        a, p, n, margin=3.0, p=1, swap=True, reduction="none"), [(3, 4), (3, 4), (3, 4)]),
    ("poisson_nll_loss", lambda lib, F, x, y: F.poisson_nll_loss(x, y.abs() * 3, full=True),
     [(3, 4), (3, 4)]),
    ("gaussian_nll_loss", lambda lib, F, x, y, v: F.gaussian_nll_loss(x, y, v.abs() + 0.1,
                                                                       full=True),
     [(3, 4), (3, 4), (3, 4)]),
    ("gaussian_nll_loss-per-sample-var", lambda lib, F, x, y, v: F.gaussian_nll_loss(
        x, y, v.abs(), reduction="none"), [(3, 4), (3, 4), (3,)]),
    ("multilabel_soft_margin_loss", lambda lib, F, x, y: F.multilabel_soft_margin_loss(
        x, (y > 0).to(x.dtype)), [(3, 4), (3, 4)]),
    ("triplet_margin_with_distance_loss", lambda lib, F, a, p, n:
     F.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda u, v: (u - v).abs()
                                         .sum(-1), margin=2.0, swap=True), [(3, 4)] * 3),
    ("multilabel_margin_loss", lambda lib, F, x: F.multilabel_margin_loss(
        x, t(lib, [[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 0, 0]])), [(3, 4)]),
    ("ctc_loss", lambda lib, F, x: F.ctc_loss(
        x.log_softmax(2), t(lib, [[1, 2, 2], [3, 1, 0], [4, 4, 4]]), t(lib, [7, 5, 6]),
        t(lib, [3, 2, 1])), [(7, 3, 5)]),
    ("ctc_loss-concatenated-none", lambda lib, F, x: F.ctc_loss(
        x.log_softmax(2), t(lib, [1, 2, 2, 3, 1]), [6, 4], [3, 2], blank=4, reduction="none"),
     [(6, 2, 5)]),
    ("ctc_loss-unbatched-sum", lambda lib, F, x: F.ctc_loss(
        x.log_softmax(1), t(lib, [2, 1]), [5], [2], reduction="sum"), [(5, 3)]),
    ("ctc_loss-zero-infinity", lambda lib, F, x: F.ctc_loss(
        x.log_softmax(2), t(lib, [[1, 1, 1], [2, 3, 0]]), [3, 4], [3, 2], zero_infinity=True),
     [(4, 2, 4)]),
    ("hinge_embedding_loss", lambda lib, F, x: F.hinge_embedding_loss(
        x, t(lib, [[1.0, -1.0], [-1.0, -1.0]])), [(2, 2)]),
    ("soft_margin_loss", lambda lib, F, x: F.soft_margin_loss(x, t(lib, [1.0, -1.0, 1.0])),
     [(3,)]),
    ("multi_margin_loss", lambda lib, F, x: F.multi_margin_loss(
        x, t(lib, [1, 0, 3]), margin=0.7, weight=t(lib, [1.0, 2.0, 0.5, 1.5], dtype=x.dtype)),
     [(3, 4)]),
]


# PyTorch's float64 backward of these uses float32 constants (1/6, 1/alpha): ~3e-8 off
TORCH_F32_CONSTANTS = {"celu", "hardsigmoid"}


def _run(lib, F, fn, arrays, dtype):
    xs = [lib.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    out = fn(lib, F, *xs)
    return xs, out


def _numpy(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fn, shapes, dtype):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    arrays = [rng.standard_normal(s) for s in shapes]
    tol = {"float64": dict(rtol=1e-9, atol=1e-10), "float32": dict(rtol=2e-5, atol=2e-5)}[dtype]
    if name in TORCH_F32_CONSTANTS and dtype == "float64":
        tol = dict(rtol=1e-7, atol=1e-8)
    ours, out = _run(torcia, TF, fn, arrays, getattr(torcia, dtype))
    theirs, ref = _run(torch, TorchF, fn, arrays, getattr(torch, dtype))
    assert tuple(out.shape) == tuple(ref.shape)
    assert out.dtype.name == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(_numpy(out), _numpy(ref), **tol)
    if not ref.dtype.is_floating_point:
        return
    seed = rng.standard_normal(tuple(ref.shape))
    out.backward(torcia.tensor(seed, dtype=out.dtype))
    ref.backward(torch.tensor(seed, dtype=ref.dtype))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if b.grad is None or a.grad is None:
            # no gradient on one side: the other's must be absent or zero
            other = a.grad if b.grad is None else b.grad
            assert other is None or not other.abs().sum().item(), f"input {i}"
            continue
        np.testing.assert_allclose(_numpy(a.grad), _numpy(b.grad), err_msg=f"input {i}",
                                   **tol)


def test_batch_norm_running_stats_match_torch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3, 4))
    ours = [torcia.zeros(3, dtype=torcia.float64), torcia.ones(3, dtype=torcia.float64)]
    theirs = [torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)]
    for step in range(3):
        xs = x * (step + 1)
        TF.batch_norm(torcia.tensor(xs), *ours, training=True, momentum=0.3)
        TorchF.batch_norm(torch.tensor(xs), *theirs, training=True, momentum=0.3)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_instance_norm_running_stats_match_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5))
    ours = [torcia.zeros(3, dtype=torcia.float64), torcia.ones(3, dtype=torcia.float64)]
    theirs = [torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)]
    TF.instance_norm(torcia.tensor(x), *ours, momentum=0.4)
    TorchF.instance_norm(torch.tensor(x), *theirs, momentum=0.4)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_max_norm_renormalises_rows_like_torch():
    w = np.arange(12.0).reshape(4, 3)
    ours, theirs = torcia.tensor(w), torch.tensor(w)
    idx = [[0, 2], [2, 3]]
    a = TF.embedding(torcia.tensor(idx), ours, max_norm=5.0)
    b = TorchF.embedding(torch.tensor(idx), theirs, max_norm=5.0)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_statistics(p):
    torcia.manual_seed(0)
    x = torcia.ones(20000)
    y = TF.dropout(x, p)
    kept = (y != 0).to(torcia.float64).mean().item()
    assert abs(kept - (1 - p)) < 0.015
    if p < 1:
        assert set(np.unique(y.numpy()).tolist()) <= {0.0, float(np.float32(1 / (1 - p)))}


def test_dropout_seeds_reproduce():
    torcia.manual_seed(7)
    a = TF.dropout(torcia.ones(100), 0.5)
    torcia.manual_seed(7)
    b = TF.dropout(torcia.ones(100), 0.5)
    assert (a == b).all()


def test_dropout2d_zeroes_whole_channels():
    torcia.manual_seed(1)
    y = TF.dropout2d(torcia.ones(4, 8, 3, 3), 0.5)
    per_channel = y.reshape(4, 8, 9)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()


@pytest.mark.parametrize("name", sorted(n for n in dir(TorchF) if not n.startswith("_")
                                         and hasattr(TF, n) and callable(getattr(TF, n))))
def test_signature_matches_torch(name):
    import inspect

    try:
        theirs = inspect.signature(getattr(TorchF, name))
    except (TypeError, ValueError):
        pytest.skip("no Python signature on PyTorch's side")
    params = list(theirs.parameters.values())
    if params and params[0].kind is params[0].VAR_POSITIONAL:
        pytest.skip("PyTorch dispatches through *args")
    ours = inspect.signature(getattr(TF, name))
    assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == [
        (p.name, p.default, p.kind) for p in params]


def test_gumbel_softmax_hard_is_one_hot_with_soft_gradient():
    torcia.manual_seed(0)
    logits = torcia.randn(4, 5, requires_grad=True)
    y = TF.gumbel_softmax(logits, tau=0.5, hard=True)
    assert (y.sum(-1) == 1).all() and ((y == 0) | (y == 1)).all()
    (y * torcia.arange(5.0)).sum().backward()
    assert logits.grad.abs().sum().item() > 0


def test_gumbel_softmax_samples_follow_the_softmax():
    torcia.manual_seed(0)
    logits = torcia.tensor([[0.0, 1.0, 2.0]]).expand(20000, 3)
    counts = TF.gumbel_softmax(logits, hard=True).sum(0).numpy() / 20000
    np.testing.assert_allclose(counts, np.exp([0, 1, 2]) / np.exp([0, 1, 2]).sum(), atol=0.015)


def test_feature_alpha_dropout_drops_whole_channels():
    torcia.manual_seed(0)
    y = TF.feature_alpha_dropout(torcia.ones(8, 16, 3), 0.5, training=True).numpy()
    assert (np.ptp(y, axis=-1) == 0).all()
    assert len(np.unique(y)) == 2


def test_alpha_dropout_keeps_mean_and_variance():
    torcia.manual_seed(2)
    x = torcia.randn(200000, dtype=torcia.float64)
    y = TF.alpha_dropout(x, 0.2, training=True)
    assert abs(y.mean().item()) < 0.02
    assert abs(y.std().item() - 1) < 0.02
