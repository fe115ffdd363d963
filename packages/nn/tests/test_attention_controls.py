"""torcia.nn.attention: the backend switches of sdpa_kernel (what scaled_dot_product_attention
accepts and refuses), the flash-attention registry, and flex_attention with score_mod,
mask_mod and BlockMask: against a NumPy softmax written from the definition, finite-
difference gradients in float64, and torch.nn.attention.flex_attention where installed
(outputs, log-sum-exp, gradients, and every field of create_block_mask's masks)."""

import math
import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia.autograd import gradcheck
from torcia.nn import attention as A
from torcia.nn.attention import flex_attention as FA

RNG = np.random.default_rng(5)


# ----- sdpa_kernel ------------------------------------------------------------------------


def test_sdpa_kernel_switches_and_restores():
    cuda = torcia.backends.cuda
    before = [cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(),
              cuda.math_sdp_enabled(), cuda.cudnn_sdp_enabled()]
    with A.sdpa_kernel([A.SDPBackend.MATH, A.SDPBackend.MATH]) as ctx:
        assert ctx == {}
        assert [cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(),
                cuda.math_sdp_enabled(), cuda.cudnn_sdp_enabled()] == [False, False, True, False]
        with A.sdpa_kernel(A.SDPBackend.FLASH_ATTENTION, set_priority=True):
            assert cuda.flash_sdp_enabled() and not cuda.math_sdp_enabled()
            assert A._priority[0] is A.SDPBackend.FLASH_ATTENTION
        assert cuda.math_sdp_enabled() and not cuda.flash_sdp_enabled()
    assert [cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(),
            cuda.math_sdp_enabled(), cuda.cudnn_sdp_enabled()] == before
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        with A.sdpa_kernel("math"):
            pass


@pytest.mark.parametrize("backends,accepted", [
    ([A.SDPBackend.MATH], True), ([A.SDPBackend.FLASH_ATTENTION], True),
    ([A.SDPBackend.EFFICIENT_ATTENTION], False), ([A.SDPBackend.CUDNN_ATTENTION], False),
    ([A.SDPBackend.EFFICIENT_ATTENTION, A.SDPBackend.MATH], True), ([], False),
])
def test_cpu_calls_accepted_as_pytorch_accepts_them(backends, accepted):
    q = torcia.randn(1, 2, 3, 4)
    with A.sdpa_kernel(backends):
        if accepted:
            assert F.scaled_dot_product_attention(q, q, q).shape == q.shape
        else:
            with pytest.raises(RuntimeError, match="No viable backend"):
                F.scaled_dot_product_attention(q, q, q)


@pytest.mark.torch
@pytest.mark.parametrize("names", [["MATH"], ["FLASH_ATTENTION"], ["EFFICIENT_ATTENTION"],
                                   ["CUDNN_ATTENTION"], ["OVERRIDEABLE"],
                                   ["EFFICIENT_ATTENTION", "FLASH_ATTENTION"]])
def test_cpu_acceptance_matches_torch(names):
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def runs(lib, sdpa_kernel, enum):
        q = lib.ones(1, 1, 2, 4)
        with sdpa_kernel([getattr(enum, n) for n in names]):
            try:
                lib.nn.functional.scaled_dot_product_attention(q, q, q)
                return True
            except RuntimeError:
                return False

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = runs(torch, sdpa_kernel, SDPBackend)
    assert runs(torcia, A.sdpa_kernel, A.SDPBackend) == theirs
    assert {m.name: int(m) for m in A.SDPBackend} == {
        n: int(getattr(SDPBackend, n)) for n in dir(SDPBackend) if n.isupper()}


def test_flash_attention_registry():
    events = []

    class Handle:
        def remove(self):
            events.append("removed")

    A.register_flash_attention_impl("test-impl", register_fn=lambda: events.append("on")
                                    or Handle())
    assert "test-impl" in A.list_flash_attention_impls()
    A.activate_flash_attention_impl("test-impl")
    assert A.current_flash_attention_impl() == "test-impl" and events == ["on"]
    A.activate_flash_attention_impl("test-impl")  # the previous one is removed first
    assert events == ["on", "removed", "on"]
    A.restore_flash_attention_impl()
    assert A.current_flash_attention_impl() is None and events[-1] == "removed"
    with pytest.raises(ValueError, match="Unknown flash attention impl 'nope'"):
        A.activate_flash_attention_impl("nope")


# ----- flex_attention against the definition -------------------------------------------


def _reference(q, k, v, score_fn=None, mask_fn=None, scale=None):
    """softmax over keys of the (modified, masked) scaled scores, in float64 NumPy; rows
    that allow nothing give zeros and a log-sum-exp of -inf."""
    B, H, L, E = q.shape
    S = k.shape[2]
    scale = 1 / math.sqrt(E) if scale is None else scale
    g = H // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("bhle,bhse->bhls", q, k) * scale
    b, h, m, n = np.ix_(range(B), range(H), range(L), range(S))
    if score_fn is not None:
        s = score_fn(s, b, h, m, n)
    if mask_fn is not None:
        s = np.where(np.broadcast_to(mask_fn(b, h, m, n), s.shape), s, -np.inf)
    empty = np.isneginf(s).all(-1, keepdims=True)
    safe = np.where(empty, 0.0, s)
    w = np.exp(safe - safe.max(-1, keepdims=True))
    w = np.where(empty, 0.0, w / w.sum(-1, keepdims=True))
    lse = np.where(empty[..., 0], -np.inf, np.log(np.exp(safe).sum(-1)))
    return np.einsum("bhls,bhsd->bhld", w, v), lse


SCORE_MODS = {
    "none": (None, None),
    "relative": (lambda s, b, h, q, kv: s + 0.25 * (q - kv),
                 lambda s, b, h, q, kv: s + 0.25 * (q - kv)),
    "per_head": (lambda s, b, h, q, kv: s * (h + 1), lambda s, b, h, q, kv: s * (h + 1)),
    "softcap": (lambda s, b, h, q, kv: 2.0 * torcia.tanh(s / 2.0),
                lambda s, b, h, q, kv: 2.0 * np.tanh(s / 2.0)),
}
MASK_MODS = {
    "none": (None, None),
    "causal": (lambda b, h, q, kv: q >= kv, lambda b, h, q, kv: q >= kv),
    "window": (lambda b, h, q, kv: (q - kv).abs() <= 1, lambda b, h, q, kv: abs(q - kv) <= 1),
    "batch_pad": (lambda b, h, q, kv: kv < 5 - b, lambda b, h, q, kv: kv < 5 - b),
    "nothing_for_q0": (lambda b, h, q, kv: q > 0, lambda b, h, q, kv: q > 0),
}
SHAPES = [(2, 2, 2, 5, 6, 4, 3), (1, 4, 2, 3, 5, 8, 8), (2, 1, 1, 6, 6, 2, 5)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("score", sorted(SCORE_MODS))
@pytest.mark.parametrize("mask", sorted(MASK_MODS))
def test_flex_attention_matches_definition(shape, score, mask):
    B, Hq, Hkv, L, S, E, Ev = shape
    q, k = RNG.standard_normal((B, Hq, L, E)), RNG.standard_normal((B, Hkv, S, E))
    v = RNG.standard_normal((B, Hkv, S, Ev))
    score_t, score_n = SCORE_MODS[score]
    mask_t, mask_n = MASK_MODS[mask]
    block_mask = None if mask_t is None else FA.create_block_mask(mask_t, B, None, L, S,
                                                                  device="cpu", BLOCK_SIZE=2)
    out, lse = FA.flex_attention(torcia.from_numpy(q), torcia.from_numpy(k), torcia.from_numpy(v),
                                 score_mod=score_t, block_mask=block_mask,
                                 enable_gqa=Hq != Hkv, return_lse=True)
    want, want_lse = _reference(q, k, v, score_n, mask_n)
    assert out.dtype is torcia.float64 and tuple(out.shape) == (B, Hq, L, Ev)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lse.numpy(), want_lse, rtol=1e-10)


def test_flex_attention_float32_and_aux():
    q = torcia.randn(1, 2, 3, 4)
    out, aux = FA.flex_attention(q, q, q, return_aux=FA.AuxRequest(lse=True, max_scores=True),
                                 scale=0.5)
    want, want_lse = _reference(*(q.double().numpy(),) * 3, scale=0.5)
    assert out.dtype is torcia.float32
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(aux.lse.numpy(), want_lse, rtol=1e-5)
    scores = (q @ q.transpose(-2, -1)) * 0.5
    np.testing.assert_allclose(aux.max_scores.numpy(), scores.amax(-1).numpy(), rtol=1e-6)
    assert FA.flex_attention(q, q, q, return_aux=FA.AuxRequest())[1] == FA.AuxOutput()


@pytest.mark.parametrize("with_mask", [False, True])
def test_flex_attention_gradcheck(with_mask):
    gen = np.random.default_rng(1)
    q, k, v = (torcia.tensor(gen.standard_normal(s), dtype=torcia.float64, requires_grad=True)
               for s in [(1, 2, 3, 2), (1, 1, 4, 2), (1, 1, 4, 3)])
    bias = torcia.tensor(gen.standard_normal((3, 4)), dtype=torcia.float64, requires_grad=True)
    block_mask = FA.create_block_mask(lambda b, h, qi, kv: kv <= qi + 1, None, None, 3, 4,
                                      device="cpu", BLOCK_SIZE=2) if with_mask else None

    def fn(q, k, v, bias):
        out, lse = FA.flex_attention(
            q, k, v, score_mod=lambda s, b, h, qi, kv: s + bias[qi, kv],
            block_mask=block_mask, enable_gqa=True, return_lse=True)
        return out, lse

    assert gradcheck(fn, (q, k, v, bias))


def test_fully_masked_rows_have_zero_gradient_not_nan():
    q = torcia.randn(1, 1, 3, 2, requires_grad=True)
    block_mask = FA.create_block_mask(lambda b, h, qi, kv: qi > 0, None, None, 3, 3,
                                      device="cpu", BLOCK_SIZE=1)
    out = FA.flex_attention(q, q, q, block_mask=block_mask)
    assert out[0, 0, 0].abs().sum().item() == 0.0
    out.sum().backward()
    assert torcia.isfinite(q.grad).all()


@pytest.mark.parametrize("call,error,match", [
    (lambda q: FA.flex_attention(q[0], q[0], q[0]), NotImplementedError, "must be 4D"),
    (lambda q: FA.flex_attention(q, q[:, :1], q[:, :1]), ValueError, "enable_gqa=True"),
    (lambda q: FA.flex_attention(torcia.randn(1, 3, 2, 2), q, q, enable_gqa=True), ValueError,
     "multiple of kv heads"),
    (lambda q: FA.flex_attention(q, q[..., :1], q), ValueError, "same embedding dimension"),
    (lambda q: FA.flex_attention(q, q, q, block_mask=FA.create_block_mask(
        lambda b, h, i, j: i >= j, None, None, 8, 8, device="cpu")), ValueError,
     "block_mask was created for"),
    (lambda q: FA.flex_attention(q, q, q, return_lse=True, return_aux=FA.AuxRequest()),
     ValueError, "Cannot specify both"),
    (lambda q: FA.create_block_mask(lambda s, b, h, i, j: s, None, None, 2, 2, device="cpu"),
     AssertionError, "requires a mask_mod"),
    (lambda q: FA.create_mask(lambda b, h: b, None, None, 2, 2, device="cpu"),
     AssertionError, "Expected 4 or 5 positional args"),
    (lambda q: FA.or_masks(1), RuntimeError, "callable mask_mods"),
])
def test_refusals(call, error, match):
    with pytest.raises(error, match=match):
        call(torcia.randn(1, 2, 4, 2))


def test_block_mask_by_hand():
    # causal 4x4 in 2x2 blocks: block (0,0) partial, (1,0) full, (1,1) partial
    bm = FA.create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 4, 4, device="cpu",
                              BLOCK_SIZE=2)
    assert bm.kv_num_blocks.tolist() == [[[1, 1]]] and bm.full_kv_num_blocks.tolist() == [[[0, 1]]]
    assert bm.kv_indices[0, 0, 1, 0].item() == 1 and bm.full_kv_indices[0, 0, 1, 0].item() == 0
    assert bm.to_dense().tolist() == [[[[1, 0], [1, 1]]]]
    assert bm.sparsity() == 25.0 and bm.numel() == 16 and bm.shape == (1, 1, 4, 4)
    assert bm.as_tuple()[:2] == (4, 4) and bm.as_tuple()[-1] is bm.mask_mod
    sliced = FA.create_block_mask(lambda b, h, q, kv: kv <= b, 3, 2, 4, 4, device="cpu",
                                  BLOCK_SIZE=2)[1]
    assert sliced.shape == (1, 2, 4, 4)
    with pytest.raises(RuntimeError, match="sliced BlockMask"):
        sliced.mask_mod(*[torcia.tensor(0)] * 4)
    cut = bm._adjust(2, 2)
    assert cut.shape == (1, 1, 2, 2) and cut.kv_num_blocks.tolist() == [[[1]]]
    assert "BlockMask(shape=(1, 1, 4, 4), sparsity=25.00%" in str(bm)
    assert "mask_mod=<lambda>" in repr(bm)


# ----- against torch ----------------------------------------------------------------------

MASK_CASES = {
    "causal": lambda b, h, q, kv: q >= kv,
    "window": lambda b, h, q, kv: (q - kv).abs() <= 3,
    "prefix": lambda b, h, q, kv: (kv < 4) | (q >= kv),
    "per_batch": lambda b, h, q, kv: kv < 9 - 2 * b,
    "per_head": lambda b, h, q, kv: (kv + h) % 3 != 0,
    "anded": None,
    "ored": None,
}


def _mask(name, lib_masks):
    if name == "anded":
        return lib_masks.and_masks(MASK_CASES["causal"], MASK_CASES["window"])
    if name == "ored":
        return lib_masks.or_masks(MASK_CASES["prefix"], MASK_CASES["per_head"])
    return MASK_CASES[name]


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(MASK_CASES))
@pytest.mark.parametrize("dims", [(None, None, 9, 11, 4), (2, 3, 9, 9, 2), (2, None, 16, 8, 8),
                                  (1, 2, 5, 7, (2, 3))])
def test_block_masks_match_torch(name, dims):
    pytest.importorskip("torch")
    import torch.nn.attention.flex_attention as TFA

    B, H, L, S, block = dims
    ours = FA.create_block_mask(_mask(name, FA), B, H, L, S, device="cpu", BLOCK_SIZE=block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = TFA.create_block_mask(_mask(name, TFA), B, H, L, S, device="cpu",
                                       BLOCK_SIZE=block)
    for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                  "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"):
        a, b = getattr(ours, field), getattr(theirs, field)
        assert a.dtype.name == str(b.dtype).split(".")[1], field
        if "indices" in field:
            # only the listed entries are meaningful; the rest is padding
            num = getattr(ours, field.replace("indices", "num_blocks")).numpy()
            used = np.arange(a.shape[-1]) < num[..., None]
            np.testing.assert_array_equal(np.where(used, a.numpy(), -1),
                                          np.where(used, b.numpy(), -1), err_msg=field)
        else:
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=field)
    assert ours.shape == theirs.shape and ours.BLOCK_SIZE == tuple(theirs.BLOCK_SIZE)
    assert ours.sparsity() == pytest.approx(theirs.sparsity())
    assert str(ours) == str(theirs)
    np.testing.assert_array_equal(
        FA.create_mask(_mask(name, FA), B, H, L, S, device="cpu").numpy(),
        TFA.create_mask(_mask(name, TFA), B, H, L, S, device="cpu").numpy())


@pytest.mark.torch
@pytest.mark.parametrize("score", ["none", "relative", "per_head", "softcap", "bias"])
@pytest.mark.parametrize("mask", ["none", "causal", "per_batch", "empty_rows"])
@pytest.mark.parametrize("gqa", [False, True])
def test_flex_attention_matches_torch(score, mask, gqa):
    torch = pytest.importorskip("torch")
    import torch.nn.attention.flex_attention as TFA

    B, Hq, Hkv, L, S, E = 2, 4, (2 if gqa else 4), 6, 9, 8
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in
              [(B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, 5), (Hq, L, S)]]

    # PyTorch refuses gradients of flex_attention on the CPU (its kernels have none there);
    # torcia's are checked by finite differences above
    def run(lib, fa):
        q, k, v, bias = (lib.tensor(a) for a in arrays)
        score_mod = {
            "none": None, "relative": lambda s, b, h, qi, kv: s + 0.1 * (qi - kv),
            "per_head": lambda s, b, h, qi, kv: s * (h + 1) / 2,
            "softcap": lambda s, b, h, qi, kv: 3.0 * lib.tanh(s / 3.0),
            "bias": lambda s, b, h, qi, kv: s + bias[h, qi, kv]}[score]
        mask_mod = {"none": None, "causal": lambda b, h, qi, kv: qi >= kv,
                    "per_batch": lambda b, h, qi, kv: kv < 9 - 3 * b,
                    "empty_rows": lambda b, h, qi, kv: (qi % 3 != 0) & (kv <= qi + 2)}[mask]
        block_mask = None if mask_mod is None else fa.create_block_mask(
            mask_mod, B, None, L, S, device="cpu", BLOCK_SIZE=(2, 4))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out, lse = fa.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                         enable_gqa=gqa, return_lse=True)
        return out.numpy(), lse.numpy()

    ours, theirs = run(torcia, FA), run(torch, TFA)
    for name, a, b in zip(["out", "lse"], ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=name)
