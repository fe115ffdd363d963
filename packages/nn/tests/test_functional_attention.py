"""scaled_dot_product_attention through the fused ``flash_attention`` op: its values and
gradients against PyTorch 2.13's, finite differences in float64 (first and second
order), the meta device, vmap, torcia.compile, and the cases that stay composite."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import library
from torcia.autograd import gradcheck, gradgradcheck
from torcia.func import vmap

RNG = np.random.default_rng(0)


def _t(*shape, dtype=torcia.float64, requires_grad=False):
    x = torcia.tensor(RNG.standard_normal(shape), dtype=dtype)
    return x.requires_grad_(requires_grad)


def _mask(kind, shape, hole=True):
    """A bool mask (True: may attend) with, where ``hole``, one query that may attend to
    nothing; or a float one with -inf there."""
    allowed = RNG.random(shape) > 0.4
    if hole:
        allowed[..., 1, :] = False
    if kind == "bool":
        return torcia.tensor(allowed)
    return torcia.tensor(np.where(allowed, RNG.standard_normal(shape), -np.inf))


# (q shape, k shape, v's last dim, mask: None, "bool" or "float" with its shape, causal,
# enable_gqa): 4-D and 3-D, queries longer and shorter than keys, grouped queries, masks
# broadcast from (Lq, Lk) or with every dim, a decoding step (one query)
CASES = [
    ((2, 3, 5, 4), (2, 3, 5, 4), 4, None, False, False),
    ((2, 3, 5, 4), (2, 3, 7, 4), 6, None, True, False),
    ((2, 3, 9, 4), (2, 3, 6, 4), 3, None, True, False),
    ((3, 6, 4), (3, 8, 4), 5, None, False, False),
    ((2, 4, 5, 4), (2, 2, 5, 4), 4, None, True, True),
    ((2, 6, 1, 8), (2, 2, 9, 8), 8, None, False, True),
    ((2, 3, 5, 4), (2, 3, 7, 4), 4, ("bool", (5, 7)), False, False),
    ((2, 3, 5, 4), (2, 3, 7, 4), 4, ("bool", (2, 3, 5, 7)), False, False),
    ((2, 3, 5, 4), (2, 3, 7, 4), 4, ("float", (1, 3, 5, 7)), False, False),
    ((2, 4, 5, 4), (2, 2, 7, 4), 4, ("float", (5, 7)), False, True),
]


def _inputs(case, dtype=torcia.float64, requires_grad=False):
    qs, ks, ev, mask, causal, gqa = case
    q = _t(*qs, dtype=dtype, requires_grad=requires_grad)
    k = _t(*ks, dtype=dtype, requires_grad=requires_grad)
    v = _t(*ks[:-1], ev, dtype=dtype, requires_grad=requires_grad)
    m = None
    if mask is not None:
        m = _mask(*mask)
        if m.dtype is not torcia.bool:
            m = m.to(dtype)
    return q, k, v, m, causal, gqa


def _sdpa(q, k, v, m, causal, gqa):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal,
                                          enable_gqa=gqa)


def test_the_fused_op_runs_where_it_applies(monkeypatch):
    calls = []
    real = library.call

    def spy(op, *args, **kw):
        calls.append(op)
        return real(op, *args, **kw)

    monkeypatch.setattr(F._attention, "call", spy)
    for case in CASES:
        _sdpa(*_inputs(case))
    assert calls.count("flash_attention") == len(CASES)
    calls.clear()
    q, k, v, _, _, _ = _inputs(CASES[0])
    F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)  # dropout: the composite
    with pytest.raises(RuntimeError, match="same dtype"):  # mixed dtypes: its error
        F.scaled_dot_product_attention(q.float(), k.float(), v)
    F.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0])  # 2-D
    from torcia.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):  # the math path asked for: the composite
        F.scaled_dot_product_attention(q, k, v)
    assert "flash_attention" not in calls
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, k, v)
    assert calls.count("flash_attention") == 1


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradcheck_first_and_second_order(case):
    q, k, v, m, causal, gqa = _inputs(case, requires_grad=True)
    if m is not None and m.dtype is not torcia.bool:
        m.requires_grad_()

    def f(q, k, v, m):
        return _sdpa(q, k, v, m, causal, gqa)

    assert gradcheck(f, (q, k, v, m))
    assert gradgradcheck(f, (q, k, v, m))


@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_against_pytorch(case, dtype):
    torch = pytest.importorskip("torch")
    q, k, v, m, causal, gqa = _inputs(case, dtype=dtype, requires_grad=True)
    out = _sdpa(q, k, v, m, causal, gqa)
    g = _t(*out.shape, dtype=dtype)
    out.backward(g)

    def th(t, grad=True):
        return None if t is None else torch.tensor(t.detach().numpy()).requires_grad_(
            grad and t.dtype is not torcia.bool)

    tq, tk, tv, tm = th(q), th(k), th(v), th(m, grad=False)
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm,
                                                            is_causal=causal, enable_gqa=gqa)
    want.backward(torch.tensor(g.numpy()))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype is torcia.float32 else dict(rtol=1e-10,
                                                                            atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), **tol)
    assert out.dtype is dtype and out.shape == tuple(want.shape)
    for ours, theirs in ((q, tq), (k, tk), (v, tv)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), **tol)


def test_a_query_that_may_attend_to_nothing_gets_zeros():
    # PyTorch 2.13's safe softmax: zero output and zero gradients for that query
    q, k, v = (_t(1, 2, 3, 4, requires_grad=True) for _ in range(3))
    m = torcia.ones(3, 3, dtype=torcia.bool)
    m[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert out[:, :, 1].abs().max().item() == 0.0
    out.sum().backward()
    assert q.grad[:, :, 1].abs().max().item() == 0.0
    assert np.isfinite(k.grad.numpy()).all() and np.isfinite(v.grad.numpy()).all()


def test_lse_is_the_log_of_each_softmax_denominator():
    q, k, v = _t(2, 3, 4), _t(2, 5, 4), _t(2, 5, 2)
    m = torcia.ones(3, 5, dtype=torcia.bool)
    m[2] = False
    _, lse = library.call("flash_attention", (q, k, v, m), {"is_causal": False,
                                                             "scale": 0.5})
    s = (q.numpy() @ k.numpy().swapaxes(-1, -2)) * 0.5
    want = np.log(np.exp(s).sum(-1))
    np.testing.assert_allclose(lse.numpy()[:, :2], want[:, :2], rtol=1e-12)
    assert np.isneginf(lse.numpy()[:, 2]).all()


def test_meta_shapes():
    q = torcia.empty(2, 8, 5, 16, device="meta")
    k = torcia.empty(2, 2, 7, 16, device="meta")
    v = torcia.empty(2, 2, 7, 3, device="meta")
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert out.device.type == "meta" and out.shape == (2, 8, 5, 3)
    o, lse = library.call("flash_attention", (q, k, v, None), {"is_causal": True,
                                                                "scale": 1.0})
    assert lse.shape == (2, 8, 5) and o.dtype is torcia.float32


@pytest.mark.parametrize("in_dims, masked", [((0, 0, 0, None), False),
                                             ((0, None, 0, 0), True),
                                             ((None, 0, None, 0), True)])
def test_vmap_runs_the_rule(in_dims, masked):
    q, k, v = _t(3, 2, 5, 4), _t(3, 2, 6, 4), _t(3, 2, 6, 3)
    m = torcia.tensor(RNG.random((3, 5, 6)) > 0.3) if masked else None
    args = [q, k, v, m]
    args = [a if d is not None or a is None else a[0] for a, d in zip(args, in_dims)]

    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the per-sample fallback warns
        got = vmap(f, in_dims=in_dims)(*args)
    want = torcia.stack([f(*[a if d is None else a[i] for a, d in zip(args, in_dims)])
                         for i in range(3)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def test_vmap_of_the_gradient():
    q, k, v = _t(3, 2, 5, 4), _t(2, 6, 4), _t(2, 6, 3)

    def g(q):
        return torcia.func.grad(
            lambda q: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum())(q)

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = vmap(g)(q)
    want = torcia.stack([g(q[i]) for i in range(3)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def test_compiled_training_step_matches_eager():
    pytest.importorskip("torcia.compiler")
    q, k, v = (_t(2, 2, 8, 4, requires_grad=True) for _ in range(3))

    def step(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return (out * out).sum()

    graphs = []

    def keep(graph, example_inputs):
        graphs.append(graph)
        return graph

    torcia.compile(step, backend=keep)(q, k, v)
    # the attention is one node of the captured program, forward and backward
    assert "flash_attention" in [n.op for g in graphs for n in g.nodes]
    loss = torcia.compile(step)(q, k, v)
    loss.backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    step(q, k, v).backward()
    np.testing.assert_allclose(loss.item(), step(q, k, v).item(), rtol=1e-12)
    for t, got in zip((q, k, v), grads):
        np.testing.assert_allclose(got.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)
