"""vmap's batching rules: each against the loop over the samples, with the fallback's
warning turned into an error, so that a case passing here ran on the native rule."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia.func import grad, vmap
from torcia.nn import _vmap

F64 = torcia.float64


def _rand(*shape, seed=0):
    return torcia.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=F64)


def _loop(f, args, in_dims):
    size = next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    outs = [f(*[a if d is None else a.select(d, i) for a, d in zip(args, in_dims)])
            for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(torcia.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    return torcia.stack(outs)


def check(f, *args, in_dims=0, native=True, rtol=1e-10, atol=1e-12):
    in_dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    with warnings.catch_warnings():
        if native:
            warnings.simplefilter("error", UserWarning)
        got = vmap(f, in_dims=in_dims)(*args)
    want = _loop(f, args, in_dims)
    pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
    for g, w in pairs:
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol)


ELEMENTWISE = [
    ("add broadcast", lambda a, b: a + b, (_rand(4, 3), _rand(2, 3)), (0, None)),
    ("mul both", lambda a, b: a * b, (_rand(4, 3), _rand(4, 2, 1, seed=1)), (0, 0)),
    ("mul lower rank batched", lambda a, b: a * b, (_rand(4, 3), _rand(5, 3)), (0, None)),
    ("where", lambda c, a: torcia.where(c > 0, a, 0.0), (_rand(4, 3), _rand(3)), (0, None)),
    ("exp", torcia.exp, (_rand(4, 2, 3),), (1,)),
    ("clamp", lambda a: a.clamp(-0.5, 0.5), (_rand(4, 3),), (0,)),
    ("gelu", F.gelu, (_rand(4, 3),), (0,)),
    ("pow scalar", lambda a: a ** 3, (_rand(4, 3),), (0,)),
    ("masked_fill", lambda a: a.masked_fill(a > 0, 1.0), (_rand(4, 3),), (0,)),
    # a batched 0-dim fill value has no number to read: a tensor operand
    ("masked_fill batched value", lambda a, v: a.masked_fill(a > 0, v), (_rand(4, 3), _rand(4)),
     (0, 0)),
    ("index_fill batched value", lambda a, v: a.index_fill(0, torcia.tensor([1]), v),
     (_rand(3, 4, 2), _rand(4)), (1, 0)),
    ("fill_ batched value", lambda a, v: a.clone().fill_(v), (_rand(4, 3), _rand(4)), (0, 0)),
    # a batched q: its range check cannot read it (torch's loop per sample can)
    ("quantile batched q", lambda a, q: torcia.quantile(a, q, 0),
     (_rand(2, 5, 3), torcia.tensor([[0.1, 0.9], [0.5, 0.0]], dtype=F64)), (0, 0)),
]


@pytest.mark.parametrize("name,f,args,dims", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_rules(name, f, args, dims):
    check(f, *args, in_dims=dims)


REDUCTIONS = [
    ("sum all", lambda a: a.sum()), ("sum dim", lambda a: a.sum(1)),
    ("mean keepdim", lambda a: a.mean(-1, keepdim=True)), ("var", lambda a: a.var(0)),
    ("amax", lambda a: a.amax((0, 1))), ("max dim", lambda a: a.max(1)),
    ("argmax", lambda a: a.argmax(-1)), ("argmax all", lambda a: a.argmax()),
    ("logsumexp", lambda a: a.logsumexp(1)), ("cumsum", lambda a: a.cumsum(0)),
    ("softmax", lambda a: a.softmax(-1)), ("log_softmax", lambda a: F.log_softmax(a, 0)),
    ("norm", lambda a: a.norm(dim=1)), ("sum all keepdim", lambda a: a.sum((0, 1), True)),
]


@pytest.mark.parametrize("name,f", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reductions_with_a_dim(name, f):
    check(f, _rand(4, 3, 5), in_dims=(1,))


VIEWS = [
    ("view", lambda a: a.contiguous().view(15)), ("reshape -1", lambda a: a.reshape(-1, 5)),
    ("view dtype", lambda a: a.view(torcia.int64)),
    ("view smaller dtype", lambda a: a.contiguous().view(torcia.int32)),
    ("flatten", lambda a: a.flatten()), ("permute", lambda a: a.permute(1, 0)),
    ("t", lambda a: a.t()), ("unsqueeze", lambda a: a.unsqueeze(-1)),
    ("squeeze", lambda a: a.unsqueeze(0).squeeze()), ("expand", lambda a: a.expand(2, 3, 5)),
    ("getitem", lambda a: a[1:, ::2]), ("getitem int", lambda a: a[0]),
    ("getitem index", lambda a: a[:, torcia.tensor([0, 4])]),
    ("narrow", lambda a: a.narrow(1, 1, 2)), ("flip", lambda a: a.flip(0)),
    ("repeat", lambda a: a.repeat(2, 1, 1)), ("split", lambda a: a.split(2, 1)),
    ("cat", lambda a: torcia.cat([a, a * 2], 1)), ("stack", lambda a: torcia.stack([a, a], -1)),
    ("tril", lambda a: a.tril()), ("diagonal", lambda a: a.diagonal()),
    ("gather", lambda a: a.gather(1, torcia.tensor([[0], [2], [1]]))),
    ("index_select", lambda a: a.index_select(1, torcia.tensor([3, 0]))),
]


@pytest.mark.parametrize("name,f", VIEWS, ids=[c[0] for c in VIEWS])
def test_views_reshapes_and_indexing(name, f):
    check(f, _rand(3, 4, 5), in_dims=(1,))


def test_repeat_interleave_with_batched_repeats():
    # the counts are a parameter of the op: each sample's go to its own call (they were
    # read as one plain array); the totals agree, as torch's vmap wants
    repeats = torcia.tensor([[1, 0, 2], [2, 1, 0]])
    check(lambda x, r: torcia.repeat_interleave(x, r, 0), _rand(2, 3, 4), repeats,
          native=False)
    check(lambda r: torcia.repeat_interleave(_rand(3, 4), r, 0), repeats, native=False)
    check(torcia.repeat_interleave, repeats, native=False)
    # totals that differ cannot make one batch: refused in the words of torch's stack
    with pytest.raises(
            RuntimeError, match=r"stack expects each tensor to be equal size, but got \[3\] "
                                r"at entry 0 and \[6\] at entry 1"):
        torcia.func.vmap(torcia.repeat_interleave)(torcia.ones(2, 3),
                                                   torcia.tensor([[1, 1, 1], [2, 2, 2]]))


def test_cat_of_batched_and_unbatched():
    check(lambda a, b: torcia.cat([a, b]), _rand(4, 3), _rand(2), in_dims=(0, None))


MATMUL = [
    ("matrix-matrix", (3, 4, 5), (5, 2), (0, None)), ("vector-matrix", (3, 5), (5, 2), (0, None)),
    ("both batched", (3, 4, 5), (3, 5, 2), (0, 0)), ("vector-vector", (3, 5), (3, 5), (0, 0)),
    ("matrix-vector", (4, 5), (3, 5), (None, 0)), ("batched b 1-d", (2, 4, 5), (3, 5), (None, 0)),
    ("rank mismatch", (3, 4, 5), (2, 5, 6), (0, None)), ("bdim last", (4, 5, 3), (5, 2), (2, None)),
]


@pytest.mark.parametrize("name,sa,sb,dims", MATMUL, ids=[c[0] for c in MATMUL])
def test_matmul(name, sa, sb, dims):
    check(torcia.matmul, _rand(*sa), _rand(*sb, seed=1), in_dims=dims)


def test_mm_bmm_dot_outer_addmm_einsum():
    check(torcia.mm, _rand(3, 4, 5), _rand(5, 2), in_dims=(0, None))
    check(torcia.bmm, _rand(3, 2, 4, 5), _rand(2, 5, 2), in_dims=(0, None))
    check(torcia.dot, _rand(3, 5), _rand(5), in_dims=(0, None))
    check(torcia.outer, _rand(3, 5), _rand(3, 4), in_dims=(0, 0))
    check(lambda c, a: torcia.addmm(c, a, a.t(), beta=0.5, alpha=2.0), _rand(3), _rand(3, 3, 4),
          in_dims=(None, 0))
    check(lambda a, b: torcia.einsum("ij,jk->ik", a, b), _rand(3, 4, 5), _rand(5, 2),
          in_dims=(0, None))


@pytest.mark.parametrize("dtype", [torcia.uint8, torcia.int8, torcia.int32])
def test_integer_dot_keeps_its_dtype(dtype):
    # the rule's sum widened it to int64 (uint64 for uint8)
    x = torcia.arange(15).reshape(3, 5).to(dtype)
    y = torcia.arange(5).to(dtype)
    for f in (torcia.dot, torcia.inner, torcia.vdot):
        got = vmap(f, in_dims=(0, None))(x, y)
        assert got.dtype is dtype and torcia.equal(got, _loop(f, (x, y), (0, None)))


@pytest.mark.parametrize("dtype", [torcia.float16, torcia.bfloat16])
def test_half_norms_with_per_sample_weights_round_once(dtype):
    # normalised, scaled and shifted in the dtype, they were rounded three times
    x, w, b = _rand(4, 3, 8, seed=11).to(dtype), _rand(4, 8, seed=12).to(dtype), \
        _rand(4, 8, seed=13).to(dtype)
    for f, args in ((lambda a, c, d: F.layer_norm(a, (8,), c, d), (x, w, b)),
                    (lambda a, c: F.rms_norm(a, (8,), c), (x, w))):
        got = vmap(f)(*args)
        assert got.dtype is dtype and torcia.equal(got, _loop(f, args, (0,) * len(args)))


def test_linear_with_batched_input_and_batched_weights():
    w, b = _rand(6, 5, seed=1), _rand(6, seed=2)
    check(F.linear, _rand(3, 4, 5), w, b, in_dims=(0, None, None))
    check(F.linear, _rand(3, 5), w, b, in_dims=(0, None, None))
    check(F.linear, _rand(4, 5), _rand(3, 6, 5), _rand(3, 6), in_dims=(None, 0, 0))
    check(F.linear, _rand(3, 2, 5), _rand(3, 6, 5), None, in_dims=(0, 0, None))


@pytest.mark.parametrize("dims", [(0, None, None), (None, 0, 0), (0, 0, 0), (0, 0, None)])
def test_conv2d_batched_input_weights_or_both(dims):
    x, w, b = _rand(3, 2, 2, 6, 6), _rand(3, 4, 1, 3, 3, seed=1), _rand(3, 4, seed=2)
    args = [x if dims[0] == 0 else x[0], w if dims[1] == 0 else w[0], b if dims[2] == 0 else b[0]]
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1, stride=2, groups=2), *args, in_dims=dims)


def test_conv1d_and_conv_transpose2d():
    check(lambda x, w: F.conv1d(x, w, dilation=2), _rand(3, 2, 2, 9), _rand(3, 4, 2, 3),
          in_dims=(0, 0))
    check(lambda x, w: F.conv_transpose2d(x, w, stride=2), _rand(3, 2, 2, 4, 4),
          _rand(3, 2, 3, 3, 3), in_dims=(0, 0))


def test_per_sample_weight_gradients_of_a_convolution():
    x, w = _rand(5, 1, 2, 6, 6), _rand(4, 2, 3, 3, seed=1)

    def loss(w, x):
        return F.conv2d(x, w).pow(2).sum()

    check(lambda x: grad(loss)(w, x), x)
    check(lambda x: grad(loss, argnums=1)(w, x), x)


@pytest.mark.parametrize("f", [
    lambda x: F.max_pool2d(x, 2), lambda x: F.max_pool2d(x, 3, 1, 1),
    lambda x: F.avg_pool2d(x, 2), lambda x: F.adaptive_max_pool2d(x, 2),
    lambda x: F.max_pool1d(x[..., 0], 2),
])
def test_pooling_and_its_gradient(f):
    x = _rand(3, 2, 2, 6, 6)
    check(f, x)
    check(grad(lambda x: f(x).pow(2).sum()), x)


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                {"ignore_index": 1}, {"label_smoothing": 0.1},
                                {"weight": torcia.tensor([1.0, 2.0, 0.5], dtype=F64)}])
@pytest.mark.parametrize("loss", [F.cross_entropy, lambda x, t, **kw: F.nll_loss(
    F.log_softmax(x, 1), t, **{k: v for k, v in kw.items() if k != "label_smoothing"})])
def test_class_losses_and_their_gradients(loss, kw):
    x, t = _rand(4, 5, 3), torcia.tensor([[0, 1, 2, 1, 1], [2, 2, 0, 1, 0], [1, 1, 1, 1, 0],
                                          [0, 2, 1, 0, 1]])
    check(lambda x, t: loss(x, t, **kw), x, t)
    if kw.get("reduction") != "none":
        check(lambda x, t: grad(lambda x: loss(x, t, **kw))(x), x, t)


def test_embedding_with_batched_indices_and_per_sample_weights():
    w, idx = _rand(6, 3), torcia.tensor([[0, 5, 2], [1, 1, 3], [4, 0, 0], [2, 2, 5]])
    check(F.embedding, idx, w, in_dims=(0, None))
    check(F.embedding, idx, _rand(4, 6, 3), in_dims=(0, 0))
    check(lambda i: grad(lambda w: F.embedding(i, w, padding_idx=0).pow(2).sum())(w), idx)


def test_layer_and_batch_norm_with_per_sample_statistics():
    x, w, b = _rand(3, 4, 5), _rand(5, seed=1), _rand(5, seed=2)
    check(lambda x: F.layer_norm(x, (5,), w, b), x)
    check(lambda x, w: F.layer_norm(x, (5,), w, b), x, _rand(3, 5), in_dims=(0, 0))
    check(lambda x: grad(lambda w, b: F.layer_norm(x, (5,), w, b).pow(3).sum(),
                         argnums=(0, 1))(w, b), x)
    xb = _rand(3, 4, 2, 5)
    bn_w, bn_b = _rand(2, seed=3), _rand(2, seed=4)
    check(lambda x: F.batch_norm(x, None, None, bn_w, bn_b, training=True), xb)
    check(lambda x: grad(lambda w: F.batch_norm(x, None, None, w, bn_b, training=True)
                         .pow(3).sum())(bn_w), xb)
    rm, rv = _rand(2, seed=5), _rand(2, seed=6).abs()
    check(lambda x: F.batch_norm(x, rm, rv, bn_w, bn_b, training=False), xb)


def test_nesting_and_dims():
    x, y = _rand(3, 4), _rand(5, 4, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = vmap(vmap(torcia.dot, in_dims=(None, 0)), in_dims=(0, None))(x, y)
        np.testing.assert_allclose(got.numpy(), x.numpy() @ y.numpy().T)
        got = vmap(vmap(lambda a: a.sum(0) @ torcia.ones(4, dtype=F64)), in_dims=1)(
            _rand(2, 3, 6, 4))
        np.testing.assert_allclose(got.numpy(), _rand(2, 3, 6, 4).numpy().sum((2, 3)).T)
        w = _rand(2, 4, 1, 3, 3)
        nested = vmap(vmap(lambda x, w: F.conv2d(x, w), in_dims=(0, None)), in_dims=(None, 0))
        xs = _rand(3, 1, 1, 5, 5)
        want = np.stack([np.stack([F.conv2d(xs[i], w[j]).numpy() for i in range(3)])
                         for j in range(2)])
        np.testing.assert_allclose(nested(xs, w).numpy(), want, rtol=1e-12)
    out = vmap(lambda a: (a.sum(), a * 2), out_dims=(0, 1))(x)
    np.testing.assert_allclose(out[1].numpy(), 2 * x.numpy().T)
    unbatched = vmap(lambda a: torcia.ones(2, dtype=F64))(x)
    assert unbatched.shape == (3, 2)


def test_chunk_size_gives_the_same_result():
    x, y = _rand(7, 3), _rand(7, 3, seed=1)
    full = vmap(torcia.dot)(x, y)
    for chunk in (1, 3, 7, 20):
        np.testing.assert_allclose(vmap(torcia.dot, chunk_size=chunk)(x, y).numpy(),
                                   full.numpy())


def test_an_op_without_a_rule_falls_back_to_the_loop_with_one_warning():
    _vmap._warned_ops.discard("linalg_det")
    assert "linalg_det" not in _vmap.RULES
    with pytest.warns(UserWarning, match="batching rule for linalg_det"):
        check(torcia.linalg.det, _rand(3, 2, 2), native=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # once per process, as PyTorch
        check(torcia.linalg.det, _rand(3, 2, 2), native=False)


def test_inputs_tracked_by_autograd_take_the_loop_and_keep_their_graph():
    x = _rand(3, 4).requires_grad_()
    w = _rand(4, seed=1).requires_grad_()
    vmap(lambda a: (a * w).sum())(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(w.detach().numpy(), (3, 4)))
    np.testing.assert_allclose(w.grad.numpy(), x.detach().numpy().sum(0))


def test_reading_batched_values_raises_a_clear_error():
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda a: a * 2 if a.sum() > 0 else a)(_rand(3, 2))


def test_coverage_list_groups_the_native_rules():
    kinds = _vmap.rule_kinds()
    assert "conv_weight" in kinds["nn"] and "matmul" in kinds["linear algebra"]
    assert "exp" in kinds["elementwise"] and "sum" in kinds["dim"]
    assert "view" in kinds["view"]


def test_the_docs_coverage_page_is_current():
    from pathlib import Path

    page = Path(__file__).resolve().parents[3] / "docs" / "vmap_coverage.rst"
    if not page.exists():
        pytest.skip("no docs/ beside this package (an installed copy)")
    assert page.read_text() == _vmap.coverage_rst(), \
        "docs/vmap_coverage.rst is stale: run python tools/gen_vmap_coverage.py"


def _generic_cases():
    from torcia import library

    groups = {"unary_float": 1, "unary_same": 1, "special_unary": 1, "binary": 2,
              "binary_float": 2, "compare": 2, "special_binary": 2}
    return [(name, groups[rec.group]) for name, rec in sorted(library.op_records().items())
            if rec.group in groups]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # acosh's NaNs, alike in both runs
@pytest.mark.parametrize("name,arity", _generic_cases(), ids=[c[0] for c in _generic_cases()])
def test_every_generic_elementwise_rule_against_the_loop(name, arity):
    from torcia import library

    x = torcia.tensor(np.random.default_rng(0).uniform(0.2, 0.9, (3, 2, 4)), dtype=F64)
    y = torcia.tensor(np.random.default_rng(1).uniform(0.2, 0.9, (4,)), dtype=F64)
    if name.startswith("bitwise"):
        x, y = (x * 10).long(), (y * 10).long()
    args = (x,) if arity == 1 else (x, y)

    def f(*a):
        return library.call(name, a, {})

    try:
        _loop(f, args, (1,) + (None,) * (arity - 1))
    except (TypeError, RuntimeError, NotImplementedError) as e:
        pytest.skip(f"{name} does not take these inputs: {e}")
    check(f, *args, in_dims=(1,) + (None,) * (arity - 1), rtol=1e-12)
    if arity == 2:
        check(lambda a, b: library.call(name, (b, a), {}), x, y, in_dims=(1, None), rtol=1e-12)


def _modules():
    from torcia import nn

    torcia.manual_seed(0)
    return [
        ("conv", nn.Conv2d(2, 3, 3, padding=1), (4, 1, 2, 5, 5)),
        ("batch norm eval", nn.BatchNorm2d(2).eval(), (4, 3, 2, 5, 5)),
        ("layer norm", nn.LayerNorm(5), (4, 3, 5)),
        ("gru", nn.GRU(5, 4, batch_first=True), (4, 2, 3, 5)),
        ("lstm", nn.LSTM(5, 4, batch_first=True), (4, 2, 3, 5)),
        ("lstm 2 layers", nn.LSTM(5, 4, num_layers=2), (4, 3, 2, 5)),
        ("transformer layer", nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                         batch_first=True), (4, 2, 3, 8)),
        ("adaptive avg pool", nn.Sequential(nn.Conv2d(2, 2, 1), nn.AdaptiveAvgPool2d(2)),
         (4, 1, 2, 6, 6)),
        ("upsample", nn.Sequential(nn.Conv2d(2, 2, 1), nn.Upsample(scale_factor=2)),
         (4, 1, 2, 3, 3)),
        ("group norm", nn.GroupNorm(2, 4), (4, 1, 4, 3, 3)),
        ("conv transpose", nn.ConvTranspose2d(2, 3, 3, stride=2), (4, 1, 2, 3, 3)),
        ("mlp", nn.Sequential(nn.Linear(5, 6), nn.GELU(), nn.Linear(6, 2), nn.Softmax(-1)),
         (4, 3, 5)),
        ("activations", nn.Sequential(nn.Linear(5, 6), nn.ELU(), nn.Linear(6, 6),
                                      nn.LeakyReLU(0.1), nn.Linear(6, 6), nn.Hardtanh(),
                                      nn.Linear(6, 6), nn.Softplus(), nn.Linear(6, 2)),
         (4, 3, 5)),
        ("pool and flatten", nn.Sequential(nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 2)),
         (4, 1, 2, 4, 4)),
    ]


@pytest.mark.parametrize("name,module,shape", _modules(), ids=[c[0] for c in _modules()])
def test_per_sample_gradients_of_modules_on_native_rules(name, module, shape):
    from torcia.func import functional_call

    module = module.double()
    x = _rand(*shape)
    params = {k: v.detach() for k, v in module.named_parameters()}

    def loss(p, xi):
        out = functional_call(module, p, (xi,))
        return (out[0] if isinstance(out, tuple) else out).pow(2).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = vmap(grad(loss), in_dims=(None, 0))(params, x)
    for i in range(shape[0]):
        want = grad(loss)(params, x[i])
        for k in params:
            np.testing.assert_allclose(got[k][i].numpy(), want[k].numpy(), rtol=1e-9,
                                       atol=1e-10)


def test_vmap_composes_with_forward_mode_and_jacobians():
    from torcia.func import hessian, jacrev, jvp

    x, v = _rand(5, 3), _rand(5, 3, seed=1)

    def f(a):
        return (a.sin() * a.softmax(-1)).sum()

    want = torcia.stack([jvp(f, (x[i],), (v[i],))[1] for i in range(5)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        np.testing.assert_allclose(vmap(lambda a, b: jvp(f, (a,), (b,))[1])(x, v).numpy(),
                                   want.numpy(), rtol=1e-12)
        np.testing.assert_allclose(jvp(vmap(f), (x,), (v,))[1].numpy(), want.numpy(),
                                   rtol=1e-12)
        check(hessian(f), x)
        check(jacrev(lambda a: a.sin() * a.sum()), x)


# ---------------------------------------------------------------------------------------
# random ops: randomness="different" and "same" run batched, not as the loop
# ---------------------------------------------------------------------------------------


def _no_fallback(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        return fn(*args)


@pytest.mark.parametrize("drop", [
    lambda t: F.dropout(t, 0.4), lambda t: F.dropout1d(t, 0.5),
    lambda t: F.alpha_dropout(t, 0.3, True), lambda t: t + torcia.randn(t.shape[-1]),
    lambda t: t * torcia.rand(t.shape), lambda t: t + torcia.normal(2.0, 3.0, (1, 6)),
])
def test_different_randomness_draws_each_samples_numbers_in_one_call(drop):
    """One call of shape batch + sample shape: row b holds the numbers the loop's sample b
    drew (the same stream, in order), and the fallback's warning never fires."""
    x = torcia.ones(5, 3, 6)
    torcia.manual_seed(1)
    got = _no_fallback(vmap(drop, randomness="different"), x)
    torcia.manual_seed(1)
    want = torcia.stack([drop(x[i]) for i in range(5)])
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert not all(torcia.equal(got[0], got[i]) for i in range(1, 5))
    torcia.manual_seed(1)  # chunks draw in turn: the same numbers
    chunked = _no_fallback(vmap(drop, randomness="different", chunk_size=2), x)
    np.testing.assert_array_equal(chunked.numpy(), want.numpy())


def test_same_randomness_draws_once_and_broadcasts():
    x = torcia.ones(4, 20)
    torcia.manual_seed(2)
    got = _no_fallback(vmap(lambda t: F.dropout(t, 0.5), randomness="same"), x)
    torcia.manual_seed(2)
    want = F.dropout(x[0], 0.5)
    for i in range(4):
        assert torcia.equal(got[i], want)
    torcia.manual_seed(2)
    chunked = _no_fallback(vmap(lambda t: F.dropout(t, 0.5), randomness="same", chunk_size=3),
                           x)
    assert torcia.equal(chunked, got)


def test_error_randomness_raises_pytorchs_error_at_the_op():
    with pytest.raises(RuntimeError, match="called random operation while in randomness "
                                           "error mode"):
        vmap(lambda t: F.dropout(t, 0.5))(torcia.ones(2, 3))
    with pytest.raises(RuntimeError, match="called random operation while in randomness "
                                           "error mode"):
        vmap(vmap(lambda t: t + torcia.rand(()), randomness="different"))(torcia.ones(2, 3))
    # not training: no draw, no error
    assert torcia.equal(vmap(lambda t: F.dropout(t, 0.5, training=False))(torcia.ones(2, 3)),
                        torcia.ones(2, 3))


def test_bernoulli_with_batched_probabilities():
    p = torcia.stack([torcia.zeros(7), torcia.ones(7), torcia.full((7,), 0.5)])
    got = _no_fallback(vmap(torcia.bernoulli, randomness="different"), p)
    assert torcia.equal(got[0], torcia.zeros(7)) and torcia.equal(got[1], torcia.ones(7))
    with pytest.raises(RuntimeError, match="same randomness with a batched tensor input"):
        vmap(torcia.bernoulli, randomness="same")(p)
    # unbatched probabilities, different per sample
    draws = _no_fallback(vmap(lambda t: t + torcia.bernoulli(torcia.full((400,), 0.5)),
                              randomness="different"), torcia.zeros(3, 400))
    assert draws.shape == (3, 400) and not torcia.equal(draws[0], draws[1])


def test_nested_levels_batch_the_draws_where_they_differ():
    x = torcia.zeros(2, 3)
    inner_same = _no_fallback(vmap(vmap(lambda t: t + torcia.rand(()), randomness="same"),
                                   randomness="different"), x)
    assert all(torcia.equal(inner_same[i], inner_same[i, :1].expand(3)) for i in range(2))
    assert inner_same[0, 0] != inner_same[1, 0]
    outer_same = _no_fallback(vmap(vmap(lambda t: t + torcia.rand(()),
                                        randomness="different"), randomness="same"), x)
    assert torcia.equal(outer_same[0], outer_same[1])
    assert len(set(outer_same[0].tolist())) == 3
    # float64 draws: 2,000 float32 ones (2^24 values) would collide about one run in eight
    both = _no_fallback(vmap(vmap(lambda t: t + torcia.rand((), dtype=torcia.float64),
                                  randomness="different"), randomness="different"),
                        torcia.zeros(40, 50, dtype=torcia.float64))
    assert len(set(both.flatten().tolist())) == 2000


def test_different_draws_are_independent_uniforms():
    u = _no_fallback(vmap(lambda t: t + torcia.rand(100), randomness="different"),
                     torcia.zeros(200, 100))
    assert abs(u.mean().item() - 0.5) < 0.01
    assert abs(u.var().item() - 1 / 12) < 0.005
    # samples uncorrelated
    corr = np.corrcoef(u.numpy())[np.triu_indices(200, 1)]
    assert abs(corr.mean()) < 0.01


def test_per_sample_dropout_gradients_without_the_loop():
    """vmap(grad(loss)) of a model with dropout: batched masks, one per sample, giving the
    loop's gradients under the same seed (each sample draws its mask in turn)."""
    from torcia import nn
    from torcia.func import functional_call

    torcia.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.5),
                          nn.Linear(16, 2)).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = _rand(6, 5), _rand(6, 2, seed=1)

    def loss(p, xi, yi):
        return (functional_call(model, p, (xi.unsqueeze(0),)) - yi).pow(2).sum()

    torcia.manual_seed(7)
    got = _no_fallback(vmap(grad(loss), in_dims=(None, 0, 0), randomness="different"),
                       params, x, y)
    torcia.manual_seed(7)
    want = [grad(loss)(params, x[i], y[i]) for i in range(6)]
    for k in params:
        np.testing.assert_allclose(got[k].numpy(), torcia.stack([w[k] for w in want]).numpy(),
                                   rtol=1e-12, atol=1e-14)
    # the dropped hidden units differ per sample: the last layer's weight gradients
    # are zero in other columns
    zero_cols = [tuple((got["3.weight"][i] == 0).all(0).tolist()) for i in range(6)]
    assert len(set(zero_cols)) > 1


def test_random_ops_outside_dispatch_fall_back_to_the_loop():
    """An in-place draw (uniform_) runs outside dispatch: the batched run would give every
    sample the same numbers, so vmap notices the generator moved and reruns the loop (with
    a warning)."""
    x = torcia.zeros(3, 50)
    with pytest.warns(UserWarning, match="outside dispatch"):
        got = vmap(lambda t: t.clone().uniform_(), randomness="different")(x)
    assert not torcia.equal(got[0], got[1])


@pytest.mark.parametrize("draw", [
    lambda t: t + torcia.randint(0, 1000, (50,)), lambda t: t + torcia.randperm(50),
    lambda t: torcia.multinomial(t + 1, 20), lambda t: t + torcia.rand_like(t),
])
def test_every_random_op_draws_per_sample_in_the_loops_order(draw):
    """The ops whose record says they draw (randint, randperm, multinomial...) are batched
    by the random rule: sample b gets the numbers the loop's b-th call drew."""
    x = torcia.zeros(4, 50)
    torcia.manual_seed(3)
    got = vmap(draw, randomness="different")(x)
    torcia.manual_seed(3)
    want = torcia.stack([draw(x[i]) for i in range(4)])
    assert torcia.equal(got, want)


def test_randperm_draws_a_permutation_per_sample_at_nested_levels():
    x = torcia.zeros(2, 3, 20)
    got = _no_fallback(vmap(vmap(lambda t: t + torcia.randperm(20), randomness="different"),
                            randomness="different"), x)
    rows = {tuple(r) for r in got.reshape(6, 20).long().tolist()}
    assert got.shape == (2, 3, 20) and len(rows) == 6
    assert all(sorted(r) == list(range(20)) for r in rows)


def test_multinomial_checks_each_samples_probabilities():
    p = torcia.tensor([[0.2, 0.8], [-1.0, 2.0]])
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        vmap(lambda w: torcia.multinomial(w, 1), randomness="different")(p)
    with pytest.raises(RuntimeError, match="same randomness with a batched tensor input"):
        vmap(lambda w: torcia.multinomial(w, 1), randomness="same")(p.abs())


def test_random_ops_are_in_the_coverage_list():
    """Every op whose record draws (``OpDef.random``) has the random rule."""
    from torcia import library

    records = library.op_records()
    drawing = {name for name, record in records.items() if record.random}
    assert drawing >= {"bernoulli", "dropout_mask", "normal", "rand", "randn", "randint",
                       "randperm", "multinomial"}
    assert set(_vmap.rule_kinds()["random"]) == drawing


@pytest.mark.parametrize("name", ["inv_ex", "solve_ex", "lu_factor", "lu_factor_ex"])
def test_linalg_ex_variants_map_without_reading_values(name):
    # their info checks and branches read the values through the batched array (every
    # sample at once), not as one plain array
    a = _rand(3, 4, 4, seed=1) + 4 * torcia.eye(4, dtype=F64)
    b = _rand(3, 4, 2, seed=2)
    fn = getattr(torcia.linalg, name)
    f = (lambda x, y: tuple(fn(x, y))) if name == "solve_ex" else (lambda x, y: tuple(fn(x)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = vmap(f)(a, b)
    want = _loop(f, (a, b), (0, 0))
    for g, w in zip(got, want):
        assert g.dtype is w.dtype and torcia.allclose(g, w)


def test_lu_factor_under_vmap_still_refuses_a_singular_sample():
    a = torcia.eye(3, dtype=F64).repeat(2, 1, 1)
    a[1] = 0
    with pytest.raises(RuntimeError):
        vmap(torcia.linalg.lu_factor)(a)


@pytest.mark.parametrize("name", ["diagonal_scatter", "select_scatter", "slice_scatter"])
def test_scatters_into_a_copy_map(name):
    # their write into a fresh copy checks the copy's layout: one sample's strides
    x, src = _rand(3, 4, 4, seed=3), _rand(3, 4, seed=4)
    extra = {"select_scatter": (0, 1), "slice_scatter": (0, 1, 2)}.get(name, ())
    if name == "slice_scatter":
        src = _rand(3, 1, 4, seed=4)
    f = lambda a, b: getattr(torcia, name)(a, b, *extra)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = vmap(f)(x, src)
    assert torcia.equal(got, _loop(f, (x, src), (0, 0)))


def test_as_strided_addresses_each_samples_storage():
    # each sample is a storage of its own, as a tensor passed to torch's vmap: its offset
    # counts from the sample's first element (a view's too), as the calls one by one
    x = _rand(3, 4, 4, seed=5)
    for f in (lambda a: torcia.as_strided(a, (2, 2), (1, 2), 3),
              lambda a: a[1:].as_strided((2, 3), (2, 1)),
              lambda a: a[1:].as_strided((2,), (1,), 0)):
        got = vmap(f)(x)
        assert torcia.equal(got, torcia.stack([f(x[i].clone()) for i in range(3)]))
    # a view: writes through it reach the samples
    y = x.clone()
    vmap(lambda a: a.as_strided((4,), (5,)).zero_())(y)
    want = x.clone()
    for i in range(3):
        want[i].fill_diagonal_(0)
    assert torcia.equal(y, want)
    got = vmap(vmap(lambda a: a.as_strided((2,), (2,), 1)))(x)
    assert torcia.equal(got, x[:, :, 1::2])
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        vmap(lambda a: torcia.as_strided(a, (2, 2), (1, 2), 15))(x)


def test_as_strided_of_samples_interleaved_in_memory_is_refused():
    # mapped over dim 1, a sample's strided memory holds the other samples' elements
    x = _rand(4, 3, 4, seed=5)
    with pytest.raises(RuntimeError, match="batch dims being vmapped over are at the front"):
        vmap(lambda a: torcia.as_strided(a, (2, 2), (1, 2), 3), in_dims=1)(x)


def test_as_strided_scatter_writes_each_sample():
    # torch 2.13 has no batching rule for it ("requires special handling"); torcia's
    # as_strided view of each sample gives the calls one by one
    x, src = _rand(3, 4, 4, seed=5), _rand(3, 2, 2, seed=6)
    f = lambda a, s: torcia.as_strided_scatter(a, s, (2, 2), (1, 5), 2)  # noqa: E731
    assert torcia.equal(vmap(f)(x, src), _loop(f, (x, src), (0, 0)))


def test_histogram_maps_with_each_samples_range():
    # its bins were counted by NumPy on the host, which vmap refuses; each sample's range
    # is its own extent
    x = _rand(3, 20, seed=8)
    for f in (lambda a: torcia.histogram(a, 4),
              lambda a: torcia.histogram(a, 3, range=(-1.0, 1.0), density=True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = vmap(f)(x)
        for part, want in zip(got, _loop(f, (x,), (0,))):
            assert torcia.allclose(part, want)
    with pytest.raises(RuntimeError, match="is not finite"):
        vmap(lambda a: torcia.histogram(a, 4))(x.index_fill(1, torcia.tensor([3]), math.nan))


def test_cholesky_ex_maps_with_each_samples_info():
    # its info was found by NumPy on the host, which vmap refuses
    a = _rand(3, 4, 4, seed=9)
    a = a @ a.mT + 0.1 * torcia.eye(4, dtype=a.dtype)
    a[1] -= 20 * torcia.eye(4, dtype=a.dtype)
    for upper in (False, True):
        f = lambda m: torcia.linalg.cholesky_ex(m, upper=upper)  # noqa: B023, E731
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = vmap(f)(a)
        want = _loop(f, (a,), (0,))
        assert got.info.tolist() == want[1].tolist() and got.info.tolist()[1] > 0
        assert torcia.allclose(got.L, want[0], equal_nan=True)


def test_ctc_loss_maps_over_its_targets_and_lengths():
    # the lengths and targets were read as plain arrays on the host
    lp = F.log_softmax(_rand(6, 2, 4, seed=10), -1)
    il = torcia.tensor([[6, 5], [6, 6], [4, 6]])
    padded = torcia.tensor([[[1, 2], [3, 1]], [[2, 2], [1, 3]], [[3, 3], [2, 1]]])
    concatenated = torcia.tensor([[1, 2, 3, 1], [2, 3, 1, 1], [3, 2, 1, 2]])
    for targets, tl, f in (
            (padded, torcia.tensor([[2, 1], [2, 2], [1, 2]]),
             lambda t, il, tl: F.ctc_loss(lp, t, il, tl)),
            (concatenated, torcia.tensor([[2, 2], [1, 3], [3, 1]]),
             lambda t, il, tl: F.ctc_loss(lp, t, il, tl, reduction="none"))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = vmap(f)(targets, il, tl)
        assert torcia.allclose(got, _loop(f, (targets, il, tl), (0, 0, 0)))


def test_multilabel_margin_loss_maps_over_its_targets():
    # the targets (ending at the first -1) were read as one plain array
    x = _rand(3, 2, 5, seed=6)
    rng = np.random.default_rng(7)
    t = torcia.tensor(np.where(rng.random((3, 2, 5)) < 0.3, -1, rng.integers(0, 5, (3, 2, 5))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = vmap(lambda a, b: F.multilabel_margin_loss(a, b, reduction="none"))(x, t)
    want = _loop(lambda a, b: F.multilabel_margin_loss(a, b, reduction="none"), (x, t), (0, 0))
    assert torcia.allclose(got, want)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_maps_over_its_indices_and_offsets(mode):
    # the bags (offsets) and padding were read as NumPy arrays
    w = _rand(6, 3, seed=8)
    idx = torcia.tensor([[0, 2, 5, 2, 1], [4, 4, 0, 3, 2]])
    offsets = torcia.tensor([[0, 2, 2], [0, 1, 4]])
    f = lambda i, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=2)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = vmap(f)(idx, offsets)
    assert torcia.allclose(got, _loop(f, (idx, offsets), (0, 0)))


_INTS = torcia.tensor([[5, -7, 100, -128], [3, 0, -1, 127], [64, 12, -18, 1]], dtype=torcia.int8)
_AMOUNTS = torcia.tensor([[1, 7, 8, -1], [0, 9, 100, 3], [6, 2, -100, 5]], dtype=torcia.int8)


@pytest.mark.parametrize("f", [torcia.bitwise_left_shift, torcia.bitwise_right_shift,
                               torcia.gcd, torcia.lcm, lambda a, b: a << b,
                               lambda a, b: a >> b, lambda a, b: (a + 0 * b).__irshift__(b)],
                         ids=["lshift", "rshift", "gcd", "lcm", "<<", ">>", ">>="])
@pytest.mark.parametrize("dims", [(0, 0), (1, 1), (0, None), (None, 0)])
def test_integer_kernels_map_as_tensor_ops(f, dims):
    check(f, _INTS, _AMOUNTS, in_dims=dims)


def test_every_rule_table_builds_against_the_installed_op_records():
    records = torcia.library.op_records()
    assert _vmap._build() == dict(_vmap.RULES.items())
    assert all(name in records for name in _vmap.RULES)
    assert all(name in records for name in (*_vmap._KEYED, *_vmap._INT_DIM))


@pytest.mark.parametrize("table", ["_ELEMENTWISE_OPS", "_DIM_OPS", "_VIEW_OPS",
                                   "_TRAILING_OPS", "_KEYED", "_INT_DIM"])
def test_a_stale_op_name_in_a_rule_table_is_refused_naming_the_table(monkeypatch, table):
    written = getattr(_vmap, table)
    stale = ({**written, "no_such_op": "key"} if isinstance(written, dict)
             else type(written)((*written, "no_such_op")))
    monkeypatch.setattr(_vmap, table, stale)
    name = table if table in ("_KEYED", "_INT_DIM") else "RULES"
    with pytest.raises(KeyError, match=f"torcia.nn._vmap.{name}: no op named 'no_such_op'"):
        _vmap._build()
