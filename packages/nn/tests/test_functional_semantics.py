"""torcia.nn.functional in PyTorch's long tail (issue #36): values derived by hand, and the
inputs PyTorch refuses or accepts. tests/opinfo checks the same ops against torch."""

import itertools
import math

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F

# ----- attention and resampling ----------------------------------------------------------


def test_fully_masked_query_attends_to_nothing():
    q = k = v = torcia.ones(1, 2, 2)
    mask = torcia.tensor([[False, False], [True, True]])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    # query 0 may attend to no key: zero weights, zero output; query 1 averages v's ones
    assert out[0, 0].tolist() == [0.0, 0.0] and out[0, 1].tolist() == [1.0, 1.0]
    q.requires_grad_()
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
    assert not torcia.isnan(q.grad).any()


def test_linear_interpolation_copies_a_dim_whose_size_does_not_change():
    # 4 * 1.2 = 4.8 floors to 4: the dim keeps its size and PyTorch copies it, rather than
    # sampling at (i + 0.5) / 1.2 - 0.5
    x = torcia.arange(4.0).reshape(1, 1, 4)
    out = F.interpolate(x, scale_factor=1.2, mode="linear", align_corners=False)
    assert out.tolist() == x.tolist()
    assert out is not x
    # while nearest resamples it: source index floor(i / 1.2) = 0, 0, 1, 2
    out = F.interpolate(x, scale_factor=1.2, mode="nearest")
    assert out.tolist() == [[[0.0, 0.0, 1.0, 2.0]]]


# ----- grid_sample ------------------------------------------------------------------------


def test_grid_sample_reflection_and_bicubic_by_hand():
    x = torcia.arange(16.0).reshape(1, 1, 4, 4)
    # x = 1.3 with align_corners=False is pixel ((1.3 + 1) * 4 - 1) / 2 = 4.1, reflected
    # at the edge 3.5: 2.9; both coordinates alike: value 4 * 2.9 + 2.9 = 14.5
    out = F.grid_sample(x, torcia.full((1, 1, 1, 2), 1.3), padding_mode="reflection",
                        align_corners=False)
    assert out.item() == pytest.approx(14.5)
    # bicubic at pixel (1.7, 1.7): taps 0..3 in each dim with Keys' cubic weights (a =
    # -0.75) at distances 1.7, 0.7, 0.3, 1.3 from the point
    a = -0.75

    def keys(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1 if d <= 1 else \
            ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    w = [keys(d) for d in (1.7, 0.7, 0.3, 1.3)]
    want = sum(w[i] * w[j] * (4 * i + j) for i in range(4) for j in range(4))
    ramp = F.grid_sample(x, torcia.full((1, 1, 1, 2), 0.1), mode="bicubic",
                         align_corners=False)
    assert ramp.item() == pytest.approx(want)


def test_grid_sample_on_volumes():
    x = torcia.arange(8.0).reshape(1, 1, 2, 2, 2)
    # the centre of the cube with align_corners=True: the mean of all eight values
    out = F.grid_sample(x, torcia.zeros(1, 1, 1, 1, 3), align_corners=True)
    assert out.shape == (1, 1, 1, 1, 1) and out.item() == pytest.approx(3.5)
    # a corner (x, y, z) = (1, -1, -1): the last dim at its end, the others at their start
    out = F.grid_sample(x, torcia.tensor([[[[[1.0, -1.0, -1.0]]]]]), align_corners=True)
    assert out.item() == 1.0


@pytest.mark.parametrize("mode, padding_mode, align_corners",
                         list(itertools.product(("bilinear", "bicubic"),
                                                ("zeros", "border", "reflection"),
                                                (False, True))))
def test_grid_sample_passes_gradcheck(mode, padding_mode, align_corners):
    rng = np.random.default_rng(0)
    x = torcia.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    # points away from pixel centres and edges, where the sampler is smooth
    g = torcia.tensor(rng.uniform(-1.4, 1.4, (1, 2, 3, 2)), requires_grad=True)
    assert torcia.autograd.gradcheck(
        lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding_mode,
                                   align_corners=align_corners), (x, g))


def test_grid_sample_refuses_bicubic_volumes_and_unknown_modes():
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        F.grid_sample(torcia.ones(1, 1, 2, 2, 2), torcia.zeros(1, 1, 1, 1, 3), mode="bicubic")
    with pytest.raises(ValueError, match="expected padding_mode"):
        F.grid_sample(torcia.ones(1, 1, 2, 2), torcia.zeros(1, 1, 1, 2), padding_mode="wrap")


# ----- dtypes, NaN ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [F.hardtanh, F.relu6, F.hardswish, F.hardsigmoid])
def test_bfloat16_activations_stay_bfloat16(fn):
    x = torcia.tensor([-4.0, 0.5, 7.0], dtype=torcia.bfloat16)
    out = fn(x)
    assert out.dtype is torcia.bfloat16
    np.testing.assert_allclose(out.float().numpy(), fn(x.float()).numpy(), rtol=1e-2)


def test_shrink_and_threshold_pass_nan_through():
    nan = torcia.tensor([float("nan"), 0.2, -1.0])
    out = F.softshrink(nan)
    assert math.isnan(out[0]) and out[1:].tolist() == [0.0, -0.5]
    assert math.isnan(F.threshold(nan, 0.5, 2.0)[0])
    with pytest.raises(RuntimeError, match="lambda must be in range"):
        F.softshrink(nan, -1.0)


# ----- input PyTorch refuses ---------------------------------------------------------------


def test_pad_cannot_crop_past_the_size():
    assert F.pad(torcia.ones(2, 3), (-2, -1)).shape == (2, 0)
    for pad in ((-2, -2), (-4, 1), (0, 0, -3, 1)):
        with pytest.raises(RuntimeError, match="narrow\\(\\): length must be non-negative"):
            F.pad(torcia.ones(2, 3), pad)


def test_avg_pool3d_wants_the_window_inside_the_input():
    with pytest.raises(RuntimeError, match=r"input image \(T: 2 H: 2 W: 2\) smaller than "
                                           r"kernel size \(kT: 3 kH: 3 kW: 3\)"):
        F.avg_pool3d(torcia.ones(1, 1, 2, 2, 2), 3, padding=1)


def test_conv_refuses_a_weight_without_output_channels():
    with pytest.raises(RuntimeError, match="expected weight to be at least 1 at dimension 0"):
        F.conv2d(torcia.ones(1, 1, 3, 3), torcia.ones(0, 1, 2, 2))


def test_conv_of_an_empty_batch_and_a_large_stride():
    assert F.conv2d(torcia.zeros(0, 1, 3, 3), torcia.ones(2, 1, 2, 2)).shape == (0, 2, 2, 2)
    # one window fits in a 3x3 input: (3 - 2) // 5 + 1 = 1 position per dim
    out = F.conv2d(torcia.ones(1, 1, 3, 3), torcia.ones(1, 1, 2, 2), stride=5)
    assert out.tolist() == [[[[4.0]]]]


def test_batch_norm_refuses_a_negative_eps():
    with pytest.raises(ValueError, match="batch_norm eps must be non-negative, but got -1.0"):
        F.batch_norm(torcia.ones(2, 3), torcia.zeros(3), torcia.ones(3), eps=-1.0)


# ----- found by the op database --------------------------------------------------------------


def test_activations_take_the_dtypes_pytorch_takes():
    # softsign of integers in the default float dtype: x / (1 + |x|)
    assert F.softsign(torcia.tensor([1, -3])).tolist() == [0.5, -0.75]
    # hardtanh clamps integers in their dtype
    out = F.hardtanh(torcia.tensor([-3, 0, 4]))
    assert out.tolist() == [-1, 0, 1] and out.dtype is torcia.int64
    assert F.silu(torcia.tensor([0j])).dtype is torcia.complex64
    with pytest.raises(RuntimeError, match="'Long'"):
        F.silu(torcia.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh(torcia.tensor([True]))


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: F.batch_norm(torcia.ones(2, 3, dtype=torcia.int64), None, None, training=True),
     NotImplementedError, "\"batch_norm\" not implemented for 'Long'"),
    (lambda: F.softshrink(torcia.tensor([1])), NotImplementedError, "for 'Long'"),
    (lambda: F.affine_grid(torcia.ones(1, 2, 3, dtype=torcia.int64), (1, 1, 2, 2),
                           align_corners=False), ValueError, "floating point type"),
])
def test_non_float_inputs_refused_as_pytorch(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss", "smooth_l1_loss", "soft_margin_loss",
                                  "margin_ranking_loss", "hinge_embedding_loss",
                                  "binary_cross_entropy"])
def test_losses_check_the_reduction_before_the_inputs(loss):
    # bool inputs no loss computes: the reduction's name is still the error PyTorch gives
    args = [torcia.tensor([[True]])] * (3 if loss == "margin_ranking_loss" else 2)
    with pytest.raises(ValueError, match="average is not a valid value for reduction"):
        getattr(F, loss)(*args, reduction="average")


@pytest.mark.parametrize("loss", ["huber_loss", "triplet_margin_with_distance_loss",
                                  "gaussian_nll_loss"])
def test_more_losses_check_the_reduction_first(loss):
    args = [torcia.tensor([[True]])] * 3
    with pytest.raises(ValueError, match="average is not"):
        getattr(F, loss)(*args[:2 if loss == "huber_loss" else 3], reduction="average")


_DTYPES = ("uint8", "int16", "int64", "float16", "float32", "float64", "complex128")


def _pair(dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, (3, 4)) if dtype[0] in "ui" else rng.standard_normal((3, 4)) * 3
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal((3, 4))
    return x.astype(dtype), rng.choice([-1, 1, 0], (3, 4))


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as exc:  # noqa: BLE001 - a refusal is an outcome to compare
        return "error", type(exc)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("loss", ["hinge_embedding_loss", "kl_div", "soft_margin_loss",
                                  "binary_cross_entropy_with_logits"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_losses_dtypes_and_refusals_as_torch(loss, dtype, reduction):
    torch = pytest.importorskip("torch")
    x, t = _pair(dtype, 7)
    if loss == "hinge_embedding_loss":
        t = t.astype(np.int64)  # 0 as well: PyTorch adds both terms there
    elif loss == "soft_margin_loss":
        t = np.where(t == 0, 1, t).astype(np.float32)
    else:  # probabilities in another float dtype: the result takes the target's
        t = np.abs(t / 2).astype(np.float32)
    if loss == "soft_margin_loss" and dtype == "float64":
        x[0, 0] = -1000.0  # PyTorch's exp overflows: inf, not softplus's 1000
    ours = _outcome(lambda: getattr(F, loss)(torcia.tensor(x), torcia.tensor(t),
                                             reduction=reduction))
    theirs = _outcome(lambda: getattr(torch.nn.functional, loss)(
        torch.tensor(x), torch.tensor(t), reduction=reduction))
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "error":
        # NotImplementedError (a dtype without a kernel) is a RuntimeError in both
        base = {NotImplementedError: RuntimeError}
        assert issubclass(base.get(ours[1], ours[1]), base.get(theirs[1], theirs[1]))
        return
    assert str(ours[1].dtype).split(".")[1] == str(theirs[1].dtype).split(".")[1]
    want = theirs[1].numpy()
    tol = 1e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(ours[1].numpy(), want, rtol=tol, atol=tol)


def test_one_hot_on_the_meta_device_wants_num_classes():
    # the class count comes from the values, which a meta tensor does not hold
    x = torcia.tensor([0, 2, 1], device="meta")
    with pytest.raises(RuntimeError, match="meta"):
        F.one_hot(x)
    out = F.one_hot(x, 5)
    assert out.shape == (3, 5) and out.dtype is torcia.int64 and out.device.type == "meta"


def test_binary_cross_entropy_in_forward_mode():
    # jvp = t_x * (x - y) / (x (1 - x)) + t_y * (log(1 - x) - log(x)), as reverse mode
    import torcia.autograd.forward_ad as fwAD

    rng = np.random.default_rng(4)
    x = torcia.tensor(rng.uniform(0.05, 0.95, (3, 4)))
    y = torcia.tensor(rng.uniform(0, 1, (3, 4)))
    tx, ty = torcia.tensor(rng.standard_normal((3, 4))), torcia.tensor(rng.standard_normal((3, 4)))
    with fwAD.dual_level():
        out = F.binary_cross_entropy(fwAD.make_dual(x, tx), fwAD.make_dual(y, ty),
                                     reduction="sum")
        tangent = fwAD.unpack_dual(out).tangent
    want = (tx * (x - y) / (x * (1 - x)) + ty * ((1 - x).log() - x.log())).sum()
    assert torcia.allclose(tangent, want)


@pytest.mark.torch
@pytest.mark.parametrize("size", [(7, 9), (3, 4), (10, 12), (7, 3)])
@pytest.mark.parametrize(("mode", "align_corners"), [
    ("bilinear", True), ("bilinear", False), ("bicubic", True), ("bicubic", False)])
def test_uint8_images_interpolate_as_torch(size, mode, align_corners):
    # in float, the last dim first, each pass rounded half up (the integer weights gave 0s);
    # PyTorch's fixed-point weights may round a value on the other side of .5 off the
    # aligned corners
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(sum(size)).integers(0, 256, (2, 3, 5, 6)).astype(np.uint8)
    ours = F.interpolate(torcia.tensor(x), size=size, mode=mode, align_corners=align_corners)
    theirs = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode,
                                             align_corners=align_corners)
    assert ours.dtype is torcia.uint8
    diff = np.abs(ours.numpy().astype(int) - theirs.numpy().astype(int))
    assert diff.max() <= (0 if (mode, align_corners) == ("bilinear", True) else 2)
    assert (diff != 0).mean() < 0.05


def test_ctc_loss_with_tensor_lengths_on_the_meta_device_is_refused_by_name():
    # the stand-ins' zero lengths used to fail a length check, naming a value never given
    lp = torcia.empty(6, 2, 5, device="meta")
    targets = torcia.ones(2, 3, dtype=torcia.int64, device="meta")
    lengths = (torcia.full((2,), 6, device="meta"), torcia.full((2,), 3, device="meta"))
    with pytest.raises(RuntimeError, match="cannot run on the meta device"):
        F.ctc_loss(lp, targets, *lengths)


def test_ctc_loss_concatenated_targets_must_sum_to_the_lengths():
    # as torch: a 1-D targets tensor holds exactly sum(target_lengths) labels (extra ones
    # were read past, too few failed in NumPy's words)
    lp = torcia.randn(6, 2, 4).log_softmax(-1)
    ok = F.ctc_loss(lp, torcia.tensor([1, 2, 3, 1]), [6, 6], [2, 2], reduction="none")
    assert torcia.allclose(ok, F.ctc_loss(lp, torcia.tensor([[1, 2], [3, 1]]), [6, 6], [2, 2],
                                          reduction="none"))
    for targets in ([1, 2, 3], [1, 2, 3, 1, 2]):
        with pytest.raises(RuntimeError, match="Expected tensor to have size 4 at dimension 0"):
            F.ctc_loss(lp, torcia.tensor(targets), [6, 6], [2, 2])


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(4))
def test_multilabel_margin_loss_as_torch(seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 5))
    t = np.where(rng.random((3, 5)) < 0.3, -1, rng.integers(0, 5, (3, 5)))
    for reduction in ("none", "sum", "mean"):
        ours = F.multilabel_margin_loss(torcia.tensor(x), torcia.tensor(t), reduction=reduction)
        theirs = torch.nn.functional.multilabel_margin_loss(torch.tensor(x), torch.tensor(t),
                                                            reduction=reduction)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("x", "g"), [(torcia.float64, torcia.float32),
                                      (torcia.float32, torcia.float64),
                                      (torcia.float16, torcia.float32)])
def test_grid_sample_refuses_a_grid_of_another_dtype(x, g):
    # PyTorch: "expected scalar type Double but found Float"; promoting would hide it
    inp, grid = torcia.ones(1, 1, 3, 3, dtype=x), torcia.zeros(1, 2, 2, 2, dtype=g)
    with pytest.raises(RuntimeError, match="dtype"):
        F.grid_sample(inp, grid, align_corners=False)
    assert F.grid_sample(inp, grid.to(x), align_corners=False).dtype is x
    with torcia.autocast("cpu", dtype=torcia.bfloat16):  # autocast makes them agree
        F.grid_sample(inp, grid, align_corners=False)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag_as_torch(mode, padding_idx, last):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    w = rng.standard_normal((6, 3))
    idx = rng.integers(0, 6, 9)
    offsets = np.array([0, 2, 2, 7] + ([9] if last else []))  # an empty bag among them
    ours = F.embedding_bag(torcia.tensor(idx), torcia.tensor(w), torcia.tensor(offsets),
                           mode=mode, padding_idx=padding_idx, include_last_offset=last)
    theirs = torch.nn.functional.embedding_bag(
        torch.tensor(idx), torch.tensor(w), torch.tensor(offsets), mode=mode,
        padding_idx=padding_idx, include_last_offset=last)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)
    ours2 = F.embedding_bag(torcia.tensor(idx[:8].reshape(2, 4)), torcia.tensor(w), mode=mode,
                            padding_idx=padding_idx)
    theirs2 = torch.nn.functional.embedding_bag(torch.tensor(idx[:8].reshape(2, 4)),
                                                torch.tensor(w), mode=mode,
                                                padding_idx=padding_idx)
    np.testing.assert_allclose(ours2.numpy(), theirs2.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_half_precision_attention_in_float32_as_torch(dtype, mask):
    # the half-precision scores, exp and sums were each rounded (2x torch's error)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((2, 3, 4, 8)) * 2 for _ in range(3))
    m = {None: None, "bool": rng.random((4, 4)) < 0.7,
         "float": rng.standard_normal((4, 4))}[mask]

    def run(lib):
        t = [lib.tensor(a, dtype=lib.float32).to(getattr(lib, dtype)) for a in (q, k, v)]
        mm = None if m is None else lib.tensor(m) if mask == "bool" else \
            lib.tensor(m, dtype=lib.float32).to(getattr(lib, dtype))
        return lib.nn.functional.scaled_dot_product_attention(*t, attn_mask=mm)

    ours, theirs = run(torcia), run(torch)
    assert ours.dtype is getattr(torcia, dtype)
    tol = 1e-3 if dtype == "float16" else 1.6e-2
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=tol,
                               atol=tol)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("norm", ["layer_norm", "group_norm", "rms_norm"])
def test_half_precision_norms_in_float32_as_torch(dtype, norm):
    # statistics and the normalised values in float32, rounded once (each step rounded in
    # half precision drifted past torch's result)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    x, w, b = rng.standard_normal((4, 6, 5)) * 3 + 1, rng.standard_normal(5), \
        rng.standard_normal(5)

    def run(lib):
        t = [lib.tensor(a, dtype=lib.float32).to(getattr(lib, dtype)) for a in (x, w, b)]
        F_ = lib.nn.functional
        if norm == "layer_norm":
            return F_.layer_norm(t[0], (5,), t[1], t[2])
        if norm == "rms_norm":
            return F_.rms_norm(t[0], (5,), t[1])
        return F_.group_norm(t[0].transpose(1, 2), 5, t[1], t[2])

    ours, theirs = run(torcia), run(torch)
    assert ours.dtype is getattr(torcia, dtype)
    tol = 1e-3 if dtype == "float16" else 1.6e-2
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=tol,
                               atol=tol)


_INDEXING = {  # op(x, index) of torcia or torch (the module given), an index into x's dim 0
    "take": lambda m, x, i: m.take(x, i),
    "put": lambda m, x, i: m.put(x, i, m.ones(i.shape, dtype=x.dtype)),
    "index_copy": lambda m, x, i: m.index_copy(x, 0, i, m.ones((i.shape[0],) + x.shape[1:],
                                                               dtype=x.dtype)),
    "index_fill": lambda m, x, i: m.index_fill(x, 0, i, -2.5),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(_INDEXING))
@pytest.mark.parametrize("batched", ["index", "input", "both"])
def test_index_ops_check_batched_indices_under_vmap_as_torch(name, batched):
    # their bounds checks used to read the index as one plain array, which vmap refuses
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    x = rng.standard_normal((3, 4, 2))
    index = rng.permutation(4)[:2][None].repeat(3, 0) if name != "take" else \
        rng.integers(-8, 8, (3, 2))
    in_dims = {"index": (None, 0), "input": (0, None), "both": (0, 0)}[batched]
    x_of = {None: x[0], 0: x}
    i_of = {None: index[0], 0: index}
    args = (x_of[in_dims[0]], i_of[in_dims[1]])
    fn = _INDEXING[name]
    ours = torcia.func.vmap(lambda a, i: fn(torcia, a, i), in_dims=in_dims)(
        *(torcia.tensor(a) for a in args))
    theirs = torch.func.vmap(lambda a, i: fn(torch, a, i), in_dims=in_dims)(
        *(torch.tensor(a) for a in args))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy())
    # an index out of range is still refused, batched or not
    with pytest.raises((IndexError, RuntimeError)):
        torcia.func.vmap(lambda a, i: fn(torcia, a, i), in_dims=in_dims)(
            *(torcia.tensor(a) for a in (args[0], args[1] + 100)))


@pytest.mark.torch
@pytest.mark.parametrize("in_dims", [(0, None), (None, 0), (0, 0)])
def test_isin_under_vmap_as_torch(in_dims):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    a, b = rng.integers(0, 6, (3, 5)), rng.integers(0, 6, (3, 4))
    args = (a if in_dims[0] == 0 else a[0], b if in_dims[1] == 0 else b[0])
    ours = torcia.func.vmap(torcia.isin, in_dims=in_dims)(*map(torcia.tensor, args))
    theirs = torch.func.vmap(torch.isin, in_dims=in_dims)(*map(torch.tensor, args))
    assert ours.tolist() == theirs.tolist()


def test_frexp_under_vmap():
    x = torcia.tensor([[3.0, 0.1], [-0.0, 1e-30]])
    m, e = torcia.func.vmap(torcia.frexp)(x)
    want_m, want_e = torcia.frexp(x.reshape(-1))
    assert m.reshape(-1).tolist() == want_m.tolist() and e.reshape(-1).tolist() == \
        want_e.tolist() and e.dtype is torcia.int32


@pytest.mark.torch
@pytest.mark.parametrize("in_dims", [(0, 0, 0), (None, 0, None), (0, None, 0)])
def test_masked_scatter_under_vmap_as_torch(in_dims):
    # its count of masked positions was read with int(), which vmap refuses
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    x, mask, src = rng.standard_normal((3, 5)), rng.random((3, 5)) < 0.5, \
        rng.standard_normal((3, 6))
    args = [a if d == 0 else a[0] for a, d in zip((x, mask, src), in_dims)]
    ours = torcia.func.vmap(torcia.masked_scatter, in_dims=in_dims)(*map(torcia.tensor, args))
    theirs = torch.func.vmap(torch.masked_scatter, in_dims=in_dims)(*map(torch.tensor, args))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_unravel_index_under_vmap():
    idx = torcia.tensor([[5, 1], [3, -1]])
    rows, cols = torcia.func.vmap(lambda i: torcia.unravel_index(i, (2, 3)))(idx)
    assert rows.tolist() == [[1, 0], [1, 1]] and cols.tolist() == [[2, 1], [0, 2]]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool"])
def test_softsign_and_hardtanh_of_integers_as_torch(dtype):
    # softsign: x / (1 + |x|) with 1 + |x| in the integer dtype (wrapping); hardtanh on an
    # unsigned type refuses limits below zero after truncation to integers
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    if dtype == "bool":
        values = rng.random(8) < 0.5
    else:
        info = np.iinfo(dtype)
        values = np.concatenate([[info.min, info.max, 0, 1],
                                 rng.integers(info.min, info.max, 12, endpoint=True)])
    values = values.astype(dtype)
    ours, theirs = torcia.tensor(values), torch.tensor(values)
    for fn in (lambda m, x: m.nn.functional.softsign(x),
               lambda m, x: m.nn.functional.hardtanh(x, -1.0, 1.0),
               lambda m, x: m.nn.functional.hardtanh(x, -0.5, 3.0),
               lambda m, x: m.nn.functional.hardtanh(x, 0.0, 2.0)):
        try:
            want = fn(torch, theirs)
        except (RuntimeError, NotImplementedError) as exc:
            with pytest.raises(type(exc)):
                fn(torcia, ours)
            continue
        got = fn(torcia, ours)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("shape, normalized", [((3, 4), (4,)), ((2, 3, 2), (3, 2)), ((5,), (5,))])
def test_complex_rms_norm_as_torch(dtype, shape, normalized):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    w = (rng.standard_normal(normalized) + 1j * rng.standard_normal(normalized)).astype(dtype)
    for weight, eps in ((None, None), (w, None), (w, 0.25)):
        ours = F.rms_norm(torcia.tensor(x), normalized,
                          None if weight is None else torcia.tensor(weight), eps=eps)
        theirs = torch.nn.functional.rms_norm(torch.tensor(x), normalized,
                                              None if weight is None else torch.tensor(weight),
                                              eps=eps)
        assert ours.dtype is getattr(torcia, dtype)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
