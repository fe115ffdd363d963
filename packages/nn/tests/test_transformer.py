"""Attention and Transformer layers: masks, gradcheck, PyTorch parity, a task learned."""

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.autograd import gradcheck


def _np(t):
    return t.detach().numpy().astype(np.float64)


def test_attention_matches_the_formula():
    torcia.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    x = torcia.randn(1, 3, 4)
    out, weights = mha(x, x, x, average_attn_weights=False)
    w, b = _np(mha.in_proj_weight), _np(mha.in_proj_bias)
    q, k, v = np.split(_np(x)[0] @ w.T + b, 3, axis=1)
    heads = []
    for h in range(2):
        s = q[:, 2 * h:2 * h + 2] @ k[:, 2 * h:2 * h + 2].T / np.sqrt(2)
        p = np.exp(s - s.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        np.testing.assert_allclose(_np(weights)[0, h], p, rtol=1e-5, atol=1e-6)
        heads.append(p @ v[:, 2 * h:2 * h + 2])
    ref = np.concatenate(heads, 1) @ _np(mha.out_proj.weight).T + _np(mha.out_proj.bias)
    np.testing.assert_allclose(_np(out)[0], ref, rtol=1e-5, atol=1e-6)


def test_masked_positions_change_nothing():
    torcia.manual_seed(1)
    mha = nn.MultiheadAttention(6, 3, kdim=5, vdim=4)
    q = torcia.randn(2, 3, 6)
    k, v = torcia.randn(4, 3, 5), torcia.randn(4, 3, 4)
    padding = torcia.tensor([[False, False, True, True]] * 3)
    causal = torcia.ones(2, 4, dtype=torcia.bool).triu(1)
    out, w = mha(q, k, v, key_padding_mask=padding, attn_mask=causal)
    k2, v2 = k.clone(), v.clone()
    k2[2:] = 100.0
    v2[2:] = -100.0
    out2, _ = mha(q, k2, v2, key_padding_mask=padding, attn_mask=causal)
    torcia.testing.assert_close(out, out2)
    assert w[:, 0, 1:].abs().sum().item() == 0  # query 0 sees key 0 only
    float_mask = torcia.zeros(2, 4).masked_fill(causal, float("-inf"))
    torcia.testing.assert_close(mha(q, k, v, key_padding_mask=padding, attn_mask=float_mask)[0],
                                out)


def test_encoder_causal_mask_keeps_the_past_from_the_future():
    torcia.manual_seed(2)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    x = torcia.randn(1, 5, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    y = layer(x, src_mask=mask)
    x2 = x.clone()
    x2[0, 3:] += 5.0
    torcia.testing.assert_close(layer(x2, src_mask=mask)[0, :3], y[0, :3])
    assert mask[0, 1].item() == float("-inf") and mask[1, 0].item() == 0.0


def test_attention_passes_gradcheck():
    torcia.manual_seed(3)
    mha = nn.MultiheadAttention(4, 2).double()
    q = torcia.randn(3, 2, 4, dtype=torcia.float64, requires_grad=True)
    assert gradcheck(lambda q, w: mha(q, q, q)[0], (q, mha.in_proj_weight))


def _twin(torch, ours, theirs):
    theirs.load_state_dict({k: torch.tensor(v.detach().numpy())
                            for k, v in ours.state_dict().items()})


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_parity_with_pytorch(norm_first):
    torch = pytest.importorskip("torch")
    torcia.manual_seed(4)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours, theirs = nn.Transformer(**kw), torch.nn.Transformer(**kw)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _twin(torch, ours, theirs)
    rng = np.random.default_rng(0)
    src = rng.standard_normal((2, 5, 8)).astype(np.float32)
    tgt = rng.standard_normal((2, 3, 8)).astype(np.float32)
    pad = np.array([[False] * 5, [False] * 3 + [True] * 2])
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    out = ours(torcia.tensor(src), torcia.tensor(tgt), tgt_mask=mask,
               src_key_padding_mask=torcia.tensor(pad),
               memory_key_padding_mask=torcia.tensor(pad))
    ref = theirs(torch.tensor(src), torch.tensor(tgt), tgt_mask=torch.tensor(mask.numpy()),
                 src_key_padding_mask=torch.tensor(pad),
                 memory_key_padding_mask=torch.tensor(pad))
    np.testing.assert_allclose(_np(out), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    out.pow(2).sum().backward()
    ref.pow(2).sum().backward()
    for (k, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(_np(p.grad), q.grad.numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=k)


def test_multihead_attention_parity_with_pytorch():
    torch = pytest.importorskip("torch")
    torcia.manual_seed(5)
    ours = nn.MultiheadAttention(6, 3, kdim=4, vdim=5, add_bias_kv=True)
    theirs = torch.nn.MultiheadAttention(6, 3, kdim=4, vdim=5, add_bias_kv=True)
    _twin(torch, ours, theirs)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 6), (4, 3, 4),
                                                                  (4, 3, 5)))
    out, w = ours(torcia.tensor(q), torcia.tensor(k), torcia.tensor(v))
    t_out, t_w = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    np.testing.assert_allclose(_np(out), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(w), t_w.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_transformer_learns_to_copy():
    optim = pytest.importorskip("torcia.optim")
    torcia.manual_seed(0)
    vocab, length = 6, 5

    class Copier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, 32)
            self.pos = nn.Parameter(torcia.randn(length, 32) * 0.1)
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            self.body = nn.TransformerEncoder(layer, 1)
            self.head = nn.Linear(32, vocab)

        def forward(self, x):
            return self.head(self.body(self.embed(x) + self.pos))

    model = Copier()
    opt = optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(120):
        x = torcia.randint(0, vocab, (32, length))
        loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), x.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = torcia.randint(0, vocab, (100, length))
    assert (model(x).argmax(-1) == x).float().mean().item() > 0.95


@pytest.mark.parametrize("case", ["self", "self-unbatched", "cross-bias_kv-zero_attn-masks",
                                  "separate-weights"])
def test_batch_first_attention_parity_with_pytorch(case):
    """The module's batch-first path (no transposes, one projection product for
    self-attention) against PyTorch's, values and gradients."""
    torch = pytest.importorskip("torch")
    torcia.manual_seed(7)
    kw = {"batch_first": True}
    if "bias_kv" in case:
        kw.update(add_bias_kv=True, add_zero_attn=True)
    if "separate" in case:
        kw.update(kdim=4, vdim=5)
    ours, theirs = nn.MultiheadAttention(6, 3, **kw), torch.nn.MultiheadAttention(6, 3, **kw)
    _twin(torch, ours, theirs)
    rng = np.random.default_rng(2)
    shape = (5, 6) if "unbatched" in case else (2, 5, 6)
    x = rng.standard_normal(shape).astype(np.float32)
    if "cross" in case or "separate" in case:
        k = rng.standard_normal((2, 4, kw.get("kdim", 6))).astype(np.float32)
        v = rng.standard_normal((2, 4, kw.get("vdim", 6))).astype(np.float32)
    mask_kw = {}
    if "masks" in case:
        mask = np.triu(np.ones((5, 4), bool), 1)
        padding = np.array([[False] * 3 + [True], [False] * 4])
        mask_kw = {"attn_mask": mask, "key_padding_mask": padding}
    results = []
    for lib, module in ((torcia, ours), (torch, theirs)):
        q = lib.tensor(x, requires_grad=True)
        kv = (q, q) if "self" in case else (lib.tensor(k), lib.tensor(v))
        out, w = module(q, *kv, **{n: lib.tensor(m) for n, m in mask_kw.items()})
        (out * out).sum().backward()
        results.append((out, w, q.grad))
    for ours_t, theirs_t in zip(results[0], results[1]):
        np.testing.assert_allclose(_np(ours_t), theirs_t.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    for name, p in ours.named_parameters():
        q = dict(theirs.named_parameters())[name]
        np.testing.assert_allclose(_np(p.grad), q.grad.numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=name)


_CAUSAL = np.triu(np.ones((5, 5), bool), 1)
_PADDED = np.array([[False] * 5, [False] * 3 + [True] * 2, [True] * 5])  # a row all padding


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("masks", [
    {}, {"attn_mask": _CAUSAL, "is_causal": True},
    {"attn_mask": _CAUSAL, "is_causal": True, "key_padding_mask": _PADDED},
    {"key_padding_mask": _PADDED}, {"attn_mask": _CAUSAL},
    {"attn_mask": np.random.default_rng(3).standard_normal((6, 5, 5)).astype(np.float32)},
], ids=["none", "causal", "causal-padding", "padding", "bool-mask", "float-3d-mask"])
def test_attention_without_weights_runs_pytorch_s_fused_path(masks, need_weights):
    """need_weights=False is one scaled_dot_product_attention, as in PyTorch (the causal
    hint replaces the mask unless a padding mask joins it): the same values, gradients and
    the zero output of a query that may attend to nothing."""
    torch = pytest.importorskip("torch")
    ours, theirs = (lib.nn.MultiheadAttention(8, 2, batch_first=True) for lib in (torcia, torch))
    _twin(torch, ours, theirs)
    x = np.random.default_rng(4).standard_normal((3, 5, 8)).astype(np.float32)
    results = []
    for lib, module in ((torcia, ours), (torch, theirs)):
        q = lib.tensor(x, requires_grad=True)
        kw = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in masks.items()}
        out, w = module(q, q, q, need_weights=need_weights, **kw)
        assert (w is None) == (not need_weights)
        out.sum().backward()
        results.append((out, q.grad))
    for ours_t, theirs_t in zip(*results):
        np.testing.assert_allclose(_np(ours_t), theirs_t.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("mask_shape, message", [
    ((1, 5, 5), r"The shape of the 3D attn_mask is .*Size\(\[1, 5, 5\]\), but should be "
                r"\(6, 5, 5\)\."),
    ((5, 4), r"The shape of the 2D attn_mask is .*Size\(\[5, 4\]\), but should be \(5, 5\)\."),
    ((1, 1, 5, 5), "For batched \\(3-D\\) `query`, expected `attn_mask` to be `None`, 2-D or "
                   "3-D but found 4-D tensor instead"),
])
def test_attention_refuses_a_mask_of_the_wrong_shape_as_pytorch(mask_shape, message):
    torch = pytest.importorskip("torch")
    error = AssertionError if len(mask_shape) == 4 else RuntimeError
    for lib in (torcia, torch):
        module = lib.nn.MultiheadAttention(8, 2, batch_first=True)
        x = lib.zeros(3, 5, 8)
        with pytest.raises(error, match=message):
            module(x, x, x, attn_mask=lib.zeros(mask_shape))


def test_the_causal_hint_without_weights_stands_for_the_mask_as_pytorch():
    # PyTorch neither builds nor checks attn_mask there: a mask of another shape passes
    torch = pytest.importorskip("torch")
    for lib in (torcia, torch):
        module = lib.nn.MultiheadAttention(8, 2, batch_first=True)
        x = lib.zeros(3, 5, 8)
        out, w = module(x, x, x, attn_mask=lib.zeros(4, 4, dtype=lib.bool), is_causal=True,
                        need_weights=False)
        assert tuple(out.shape) == (3, 5, 8) and w is None
