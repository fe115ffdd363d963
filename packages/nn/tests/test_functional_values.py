"""``torcia.nn.functional`` against hand-derived values and closed forms, and its
argument errors (PyTorch's wording, naming what was expected and what was given)."""

import math

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F


def close(t, expected, tol=1e-6):
    np.testing.assert_allclose(t.detach().numpy(), np.asarray(expected, dtype=np.float64),
                               rtol=tol, atol=tol)


# ----- values by hand -----------------------------------------------------------------------


def test_conv2d_by_hand():
    x = torcia.arange(9.0).reshape(1, 1, 3, 3)
    w = torcia.tensor([[[[1.0, 0.0], [0.0, -1.0]]]])
    # out[i, j] = x[i, j] - x[i + 1, j + 1] = -4 everywhere
    close(F.conv2d(x, w), [[[[-4.0, -4.0], [-4.0, -4.0]]]])
    # stride 2, padding 1: windows start at -1 and 1; out[0, 0] = pad - x[0, 0] = 0,
    # out[1, 1] = x[1, 1] - x[2, 2]
    close(F.conv2d(x, w, stride=2, padding=1), [[[[0.0, -2.0], [-6.0, -4.0]]]])


def test_conv_transpose1d_by_hand():
    # each input element stamps the kernel at stride 2, overlaps add
    out = F.conv_transpose1d(torcia.tensor([[[1.0, 10.0]]]), torcia.tensor([[[1.0, 2.0, 3.0]]]),
                             stride=2)
    close(out, [[[1.0, 2.0, 13.0, 20.0, 30.0]]])


def test_pools_by_hand():
    x = torcia.tensor([[[1.0, 5.0, 2.0, 4.0, 3.0]]])
    close(F.max_pool1d(x, 2), [[[5.0, 4.0]]])
    close(F.max_pool1d(x, 2, ceil_mode=True), [[[5.0, 4.0, 3.0]]])
    values, idx = F.max_pool1d(x, 3, 1, return_indices=True)
    close(values, [[[5.0, 5.0, 4.0]]])
    assert idx.tolist() == [[[1, 1, 3]]]
    # padding=1 averages [0, 1] and [4, 3] with the pad counted, then not
    close(F.avg_pool1d(x, 2, 2, padding=1), [[[0.5, 3.5, 3.5]]])
    close(F.avg_pool1d(x, 2, 2, padding=1, count_include_pad=False), [[[1.0, 3.5, 3.5]]])
    # adaptive: windows [0, 3) and [2, 5)
    close(F.adaptive_avg_pool1d(x, 2), [[[8 / 3, 3.0]]])
    close(F.adaptive_max_pool1d(x, 2), [[[5.0, 4.0]]])


def test_max_pool_gradient_goes_to_the_maximum_once_per_window():
    x = torcia.tensor([[[1.0, 5.0, 2.0, 4.0]]], requires_grad=True)
    F.max_pool1d(x, 2, 1).sum().backward()
    # 5 is the maximum of two windows
    assert x.grad.tolist() == [[[0.0, 2.0, 0.0, 1.0]]]


def test_softmax_and_cross_entropy_closed_forms():
    x = torcia.tensor([[1.0, 2.0, 3.0]])
    e = np.exp([1.0, 2.0, 3.0])
    close(F.softmax(x, 1), [e / e.sum()])
    close(F.log_softmax(x, 1), [np.log(e / e.sum())])
    close(F.cross_entropy(x, torcia.tensor([2])), -np.log(e[2] / e.sum()))
    # label smoothing 0.3 over 3 classes: target (0.1, 0.1, 0.8)
    logp = np.log(e / e.sum())
    close(F.cross_entropy(x, torcia.tensor([2]), label_smoothing=0.3),
          -(0.1 * logp[0] + 0.1 * logp[1] + 0.8 * logp[2]))
    # all targets ignored: the mean is 0/0
    assert math.isnan(F.cross_entropy(x, torcia.tensor([-100])).item())


def test_softmax_without_dim_warns_and_picks_pytorchs_dim():
    x = torcia.tensor([[0.0, 1.0], [2.0, 3.0]])
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        out = F.softmin(x)
    close(out.sum(1), [1.0, 1.0])
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        out = F.log_softmax(torcia.zeros(3, 2, 2))
    close(out.exp().sum(0), np.ones((2, 2)))


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    x = torcia.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], requires_grad=True)
    F.cross_entropy(x, torcia.tensor([0, 1])).backward()
    p = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    close(x.grad, [(p - [1, 0, 0]) / 2, (np.full(3, 1 / 3) - [0, 1, 0]) / 2])


def test_norms_by_hand():
    x = torcia.tensor([[1.0, 3.0], [5.0, 7.0]])
    # columns have mean 3 and 5, biased variance 4: (x - mean) / 2
    close(F.batch_norm(x, None, None, training=True, eps=0.0), [[-1.0, -1.0], [1.0, 1.0]])
    close(F.layer_norm(x, (2,), eps=0.0), [[-1.0, 1.0], [-1.0, 1.0]])
    close(F.group_norm(x.reshape(1, 2, 2), 1, eps=0.0),
          ((np.array([1.0, 3.0, 5.0, 7.0]) - 4) / math.sqrt(5)).reshape(1, 2, 2))
    close(F.normalize(torcia.tensor([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]])


def test_batch_norm_running_update_by_hand():
    rm, rv = torcia.zeros(1), torcia.ones(1)
    F.batch_norm(torcia.tensor([[1.0], [3.0], [5.0]]), rm, rv, training=True, momentum=0.5)
    # batch mean 3, unbiased variance 4
    close(rm, [1.5])
    close(rv, [2.5])
    out = F.batch_norm(torcia.tensor([[1.5]]), rm, rv, training=False, eps=0.0)
    close(out, [[0.0]])


def test_losses_by_hand():
    a, b = torcia.tensor([1.0, 2.0, 4.0]), torcia.tensor([1.5, 2.0, 1.0])
    close(F.mse_loss(a, b), (0.25 + 0 + 9) / 3)
    close(F.l1_loss(a, b, reduction="sum"), 3.5)
    close(F.smooth_l1_loss(a, b), (0.5 * 0.25 + 0 + 2.5) / 3)
    close(F.huber_loss(a, b, delta=2.0, reduction="none"), [0.125, 0.0, 2.0 * (3 - 1)])
    p, t = torcia.tensor([0.25, 0.5]), torcia.tensor([1.0, 0.0])
    close(F.binary_cross_entropy(p, t), (-math.log(0.25) - math.log(0.5)) / 2)
    close(F.binary_cross_entropy(torcia.tensor([0.0]), torcia.tensor([1.0])), 100.0)
    close(F.binary_cross_entropy_with_logits(torcia.tensor([0.0, 1000.0]),
                                             torcia.tensor([1.0, 0.0]), reduction="none"),
          [math.log(2), 1000.0])
    close(F.binary_cross_entropy_with_logits(torcia.tensor([0.0]), torcia.tensor([1.0]),
                                             pos_weight=torcia.tensor([3.0])), 3 * math.log(2))
    close(F.margin_ranking_loss(torcia.tensor([1.0, 3.0]), torcia.tensor([2.0, 1.0]),
                                torcia.tensor([1.0, 1.0]), margin=0.5), (1.5 + 0) / 2)
    close(F.kl_div(torcia.tensor([[math.log(0.5), math.log(0.5)]]),
                   torcia.tensor([[0.25, 0.75]]), reduction="sum"),
          0.25 * math.log(0.5) + 0.75 * math.log(1.5))


def test_interpolate_by_hand():
    x = torcia.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    close(F.interpolate(x, scale_factor=2)[0, 0, 0], [1.0, 1.0, 2.0, 2.0])
    # align_corners: the corners stay, the centre is the mean
    close(F.interpolate(x, size=3, mode="bilinear", align_corners=True)[0, 0],
          [[1.0, 1.5, 2.0], [2.0, 2.5, 3.0], [3.0, 3.5, 4.0]])
    # half-pixel centres: output 0 of 4 maps to -0.25, clamped to 0
    close(F.interpolate(x, size=(2, 4), mode="bilinear")[0, 0, 0], [1.0, 1.25, 1.75, 2.0])


def test_shuffles_one_hot_attention_by_hand():
    x = torcia.arange(8.0).reshape(1, 8, 1, 1)
    y = F.pixel_shuffle(x, 2)
    assert y.shape == (1, 2, 2, 2)
    assert y[0, 1].tolist() == [[4.0, 5.0], [6.0, 7.0]]
    assert F.pixel_unshuffle(y, 2).tolist() == x.tolist()
    assert F.one_hot(torcia.tensor([1, 0])).tolist() == [[0, 1], [1, 0]]
    # one key: attention returns its value whatever the scores
    q, k, v = torcia.randn(2, 3, 4), torcia.randn(2, 1, 4), torcia.randn(2, 1, 5)
    close(F.scaled_dot_product_attention(q, k, v), v.expand(2, 3, 5).numpy(), tol=1e-5)


def test_unfold_fold_by_hand():
    x = torcia.arange(9.0).reshape(1, 1, 3, 3)
    cols = F.unfold(x, 2)
    assert cols.tolist() == [[[0.0, 1.0, 3.0, 4.0], [1.0, 2.0, 4.0, 5.0], [3.0, 4.0, 6.0, 7.0],
                              [4.0, 5.0, 7.0, 8.0]]]
    # fold adds back: the centre was in four blocks
    assert F.fold(cols, (3, 3), 2)[0, 0, 1, 1].item() == 16.0


def test_activations_at_special_points():
    close(F.gelu(torcia.tensor([0.0, 1.0])), [0.0, 0.5 * (1 + math.erf(1 / math.sqrt(2)))])
    close(F.hardswish(torcia.tensor([-3.0, 0.0, 3.0])), [0.0, 0.0, 3.0])
    close(F.relu6(torcia.tensor([-1.0, 7.0])), [0.0, 6.0])
    close(F.selu(torcia.tensor([1.0])), [1.0507009873554805])
    close(F.softplus(torcia.tensor([0.0, 100.0])), [math.log(2), 100.0])
    close(F.logsigmoid(torcia.tensor([-200.0])), [-200.0])


def test_inplace_activations_write_into_the_input():
    x = torcia.tensor([-1.0, 2.0])
    assert F.leaky_relu(x, 0.5, inplace=True) is x
    assert x.tolist() == [-0.5, 2.0]
    F.relu(x, inplace=True)
    assert x.tolist() == [0.0, 2.0]


def test_ctc_loss_by_hand():
    # two steps, classes (blank, a) with p = 1/2 each: target "a" has alignments "aa",
    # "_a", "a_" (probability 3/4); target "aa" needs "a_a": impossible in two steps
    lp = torcia.full((2, 2, 2), math.log(0.5))
    loss = F.ctc_loss(lp, torcia.tensor([[1, 1], [1, 0]]), [2, 2], [2, 1], reduction="none")
    assert math.isinf(loss[0].item())
    close(loss[1], -math.log(0.75))
    zeroed = F.ctc_loss(lp, torcia.tensor([[1, 1], [1, 0]]), [2, 2], [2, 1], reduction="none",
                        zero_infinity=True)
    close(zeroed, [0.0, -math.log(0.75)])


def test_ctc_loss_second_derivative_is_not_supported():
    lp = torcia.randn(3, 1, 3, dtype=torcia.float64, requires_grad=True)
    loss = F.ctc_loss(lp, torcia.tensor([[1]]), [3], [1])
    with pytest.raises(RuntimeError, match="derivative for 'ctc_loss_backward' is not "
                                           "implemented"):
        torcia.autograd.grad(loss, lp, create_graph=True)


def test_in_place_relu_after_batch_norm_and_max_pool_keeps_backward_valid():
    # a common pattern (ResNet): the outputs are not saved for backward, the inputs are
    x = torcia.randn(4, 3, 4, 4, requires_grad=True)
    y = F.batch_norm(x, None, None, torcia.ones(3), None, training=True)
    F.relu(y, inplace=True)
    z = F.max_pool2d(y, 2)
    F.relu(z, inplace=True)
    z.sum().backward()
    assert x.grad.shape == x.shape


# ----- errors -------------------------------------------------------------------------------


def test_cross_entropy_target_errors():
    x = torcia.zeros(2, 5)
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        F.cross_entropy(x, torcia.tensor([1, 7]))
    with pytest.raises(IndexError, match="Target -3 is out of bounds."):
        F.nll_loss(x, torcia.tensor([-3, 0]))
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Bool"):
        F.cross_entropy(x, torcia.tensor([True, False]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target "
                                         r"batch_size \(3\)"):
        F.cross_entropy(x, torcia.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match=r"Expected target size \[2, 5\], got \[2, 4\]"):
        F.cross_entropy(x, torcia.zeros(2, 4))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 5 "
                                           "classes"):
        F.cross_entropy(x, torcia.tensor([1, 2]), weight=torcia.ones(4))


def test_loss_shape_mismatch_is_an_error_not_a_broadcast():
    with pytest.raises(ValueError, match=r"target size \(\[3, 1\]\) must be the same as input "
                                         r"size \(\[3\]\)"):
        F.mse_loss(torcia.zeros(3), torcia.zeros(3, 1))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(torcia.tensor([1.5]), torcia.tensor([1.0]))
    with pytest.raises(ValueError, match="batchsum is not a valid value for reduction"):
        F.l1_loss(torcia.zeros(2), torcia.zeros(2), reduction="batchsum")


def test_layer_errors():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                           r"\(2x3 and 4x5\)"):
        F.linear(torcia.zeros(2, 3), torcia.zeros(5, 4))
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but got "
                                           "Float and Double"):
        F.linear(torcia.zeros(2, 3), torcia.zeros(4, 3, dtype=torcia.float64))
    with pytest.raises(RuntimeError, match=r"Given transposed=1, weight of size \[3, 2, 2, 2\], "
                                           r"expected input\[1, 4, 3, 3\] to have 3 channels"):
        F.conv_transpose2d(torcia.zeros(1, 4, 3, 3), torcia.zeros(3, 2, 2, 2))
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride "
                                           "or dilation"):
        F.conv_transpose2d(torcia.zeros(1, 3, 3, 3), torcia.zeros(3, 2, 2, 2), output_padding=1)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(torcia.zeros(1, 1, 2, 2))
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
        F.one_hot(torcia.tensor([3]), 3)
    with pytest.raises(RuntimeError, match="pixel_shuffle expects its input's 'channel' "
                                           "dimension to be divisible by the square"):
        F.pixel_shuffle(torcia.zeros(1, 3, 2, 2), 2)
    with pytest.raises(RuntimeError, match="calculated shape of the array of sliding blocks"):
        F.unfold(torcia.zeros(1, 1, 2, 2), 3)
