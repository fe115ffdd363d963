"""F.multi_head_attention_forward against PyTorch's with the same weights: packed and
separate projections, bias_k/bias_v, add_zero_attn, masks, unbatched inputs, static keys,
per-head weights; and its gradients."""

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F

RNG = np.random.default_rng(0)
E, H, L, S, N = 8, 2, 3, 4, 2


def _arr(*shape):
    return RNG.standard_normal(shape)


def _weights(separate):
    w = {"in_proj_weight": None if separate else _arr(3 * E, E),
         "in_proj_bias": _arr(3 * E), "out_proj_weight": _arr(E, E),
         "out_proj_bias": _arr(E)}
    if separate:
        w.update(q_proj_weight=_arr(E, E), k_proj_weight=_arr(E, 5), v_proj_weight=_arr(E, 6))
    return w


CASES = {
    "packed-self": dict(self_attn=True),
    "separate-kdim": dict(separate=True, kdim=5, vdim=6),
    "bias_kv-zero_attn-masks": dict(bias_kv=True, zero_attn=True, attn_mask="bool",
                                    key_padding_mask=True),
    "float-mask-per-head": dict(attn_mask="float3", average=False),
    "unbatched": dict(unbatched=True, attn_mask="bool"),
    "static_kv": dict(static=True),
    "causal-no-weights": dict(causal=True, attn_mask="bool", need_weights=False),
}


def _call(lib, case, arrays):
    t = lambda a: None if a is None else lib.tensor(a)  # noqa: E731 - a local shorthand
    kw = {k: t(v) for k, v in arrays["weights"].items()}
    q = t(arrays["q"])
    k = q if case.get("self_attn") else t(arrays["k"])
    v = q if case.get("self_attn") else t(arrays["v"])
    mask = arrays.get("attn_mask")
    if mask is not None:
        mask = lib.tensor(mask)
    kpm = arrays.get("kpm")
    return lib.nn.functional.multi_head_attention_forward(
        q, k, v, E, H, kw.pop("in_proj_weight"), kw.pop("in_proj_bias"),
        t(arrays.get("bias_k")), t(arrays.get("bias_v")), bool(case.get("zero_attn")), 0.0,
        kw.pop("out_proj_weight"), kw.pop("out_proj_bias"), training=False,
        key_padding_mask=None if kpm is None else lib.tensor(kpm),
        need_weights=case.get("need_weights", True), attn_mask=mask,
        use_separate_proj_weight=bool(case.get("separate")),
        static_k=t(arrays.get("static_k")), static_v=t(arrays.get("static_v")),
        average_attn_weights=case.get("average", True), is_causal=bool(case.get("causal")),
        **kw)


def _arrays(case):
    batch = () if case.get("unbatched") else (N,)
    a = {"weights": _weights(case.get("separate", False)),
         "q": _arr(L, *batch, E), "k": _arr(S, *batch, case.get("kdim", E)),
         "v": _arr(S, *batch, case.get("vdim", E))}
    if case.get("self_attn"):
        a["q"] = _arr(L, N, E)
    s = (L if case.get("self_attn") else S)
    if case.get("bias_kv"):
        a["bias_k"], a["bias_v"] = _arr(1, 1, E), _arr(1, 1, E)
    if case.get("attn_mask") == "bool":
        a["attn_mask"] = np.triu(np.ones((L, s), dtype=bool), 1)
    elif case.get("attn_mask") == "float3":
        a["attn_mask"] = _arr(N * H, L, s)
    if case.get("key_padding_mask"):
        a["kpm"] = np.zeros((N, s), dtype=bool)
        a["kpm"][0, -1] = True
    if case.get("static"):
        a["static_k"], a["static_v"] = _arr(N * H, S + 1, E // H), _arr(N * H, S + 1, E // H)
    return a


@pytest.mark.parametrize("name", list(CASES))
def test_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    case = CASES[name]
    arrays = _arrays(case)
    theirs = _call(torch, case, arrays)
    ours = _call(torcia, case, arrays)
    np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    if theirs[1] is None:
        assert ours[1] is None
    else:
        np.testing.assert_allclose(ours[1].detach().numpy(), theirs[1].detach().numpy(),
                                   rtol=1e-10, atol=1e-12)


def test_gradients():
    w = {k: torcia.tensor(v, requires_grad=True) for k, v in _weights(False).items()}
    x = torcia.tensor(_arr(L, N, E), requires_grad=True)

    def f(x, wi, bi, wo, bo):
        return F.multi_head_attention_forward(x, x, x, E, H, wi, bi, None, None, False, 0.0,
                                              wo, bo)[0]

    assert torcia.autograd.gradcheck(f, (x, w["in_proj_weight"], w["in_proj_bias"],
                                         w["out_proj_weight"], w["out_proj_bias"]))


def test_argument_checks():
    w = _weights(False)
    x = torcia.tensor(_arr(L, N, E))
    args = (torcia.tensor(w["in_proj_weight"]), None, None, None, False, 0.0,
            torcia.tensor(w["out_proj_weight"]), None)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 6"):
        F.multi_head_attention_forward(x, x, x, 6, H, *args)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal"):
        F.multi_head_attention_forward(x, x, x, E, H, *args, is_causal=True)
    with pytest.raises(AssertionError, match="use_separate_proj_weight is True"):
        F.multi_head_attention_forward(x, x, x, E, H, *args, use_separate_proj_weight=True)
    with pytest.raises(AssertionError, match="expecting key_padding_mask shape"):
        F.multi_head_attention_forward(x, x, x, E, H, *args,
                                       key_padding_mask=torcia.zeros(N, 7, dtype=torcia.bool))
