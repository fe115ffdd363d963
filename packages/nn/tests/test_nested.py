"""torcia.nested: jagged nested tensors built every way, padded, unbound, under elementwise
ops, nn.Linear, reductions, softmax and scaled_dot_product_attention over variable-length
batches, against per-sequence dense computations (independent truth), finite differences,
and torch's jagged tensors where installed."""

import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia.autograd import gradcheck

RNG = np.random.default_rng(21)
LENGTHS = [2, 5, 1, 3]


def _components(width=4, dtype="float64", lengths=LENGTHS, seed=0):
    gen = np.random.default_rng(seed)
    return [gen.standard_normal((n, width)).astype(dtype) for n in lengths]


def _nt(lib, comps, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.nested.nested_tensor([lib.from_numpy(c.copy()) for c in comps],
                                        layout=lib.jagged, **kw)


def test_structure_by_hand():
    comps = _components()
    nt = _nt(torcia, comps)
    assert nt.is_nested and nt.layout is torcia.jagged and nt.dim() == 3
    assert nt.offsets().tolist() == [0, 2, 7, 8, 11] and nt.values().shape == (11, 4)
    assert nt.shape[0] == 4 and nt.shape[2] == 4 and repr(nt.shape[1]).startswith("j")
    assert nt.shape[1] is (nt * 2).shape[1]
    for got, want in zip(nt.unbind(), comps):
        np.testing.assert_array_equal(got.numpy(), want)
    padded = torcia.nested.to_padded_tensor(nt, -1.0)
    assert padded.shape == (4, 5, 4) and padded[2, 1:].eq(-1).all()
    np.testing.assert_array_equal(padded[1].numpy(), comps[1])
    big = torcia.nested.to_padded_tensor(nt, 0.0, output_size=(4, 6, 4))
    assert big.shape == (4, 6, 4) and big[:, 5].eq(0).all()
    # every constructor gives the same tensor
    values = torcia.from_numpy(np.concatenate(comps))
    for other in (torcia.nested.nested_tensor_from_jagged(values, nt.offsets()),
                  torcia.nested.nested_tensor_from_jagged(values,
                                                          lengths=torcia.tensor(LENGTHS)),
                  torcia.nested.as_nested_tensor([torcia.from_numpy(c) for c in comps],
                                                 layout=torcia.jagged)):
        assert torcia.equal(other.values(), nt.values()) and torcia.equal(other.offsets(),
                                                                          nt.offsets())


@pytest.mark.parametrize("call,error,match", [
    (lambda: torcia.nested.nested_tensor([torcia.ones(2, 3), torcia.ones(2, 4)]),
     RuntimeError, "first dimension only"),
    (lambda: torcia.nested.nested_tensor([torcia.ones(2), torcia.ones(2, 4)]), RuntimeError,
     "same dim"),
    (lambda: torcia.nested.nested_tensor_from_jagged(torcia.ones(3)), RuntimeError,
     "offsets or lengths"),
    (lambda: torcia.nested.nested_tensor_from_jagged(torcia.ones(3), torcia.tensor([0, 5])),
     RuntimeError, "end within"),
    (lambda: torcia.nested.nested_tensor([torcia.ones(2, 2), torcia.ones(1, 2)],
                                         layout=torcia.jagged) + torcia.nested.nested_tensor(
        [torcia.ones(1, 2), torcia.ones(2, 2)], layout=torcia.jagged), RuntimeError,
     "binary pointwise"),
    (lambda: torcia.cumsum(torcia.nested.nested_tensor([torcia.ones(1)], layout=torcia.jagged),
                           0), NotImplementedError, "Could not run 'cumsum' with a nested tensor"),
])
def test_refusals(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_ops_agree_with_each_sequence():
    comps = _components()
    nt = _nt(torcia, comps)
    bias = torcia.from_numpy(RNG.standard_normal(4))
    lin = torcia.nn.Linear(4, 3).double()
    checks = [
        (lambda x: (x * 2 + 1).exp(), lambda c: np.exp(c * 2 + 1)),
        (lambda x: x.relu() - x, lambda c: np.maximum(c, 0) - c),
        (lambda x: x + bias, lambda c: c + bias.numpy()),
        (lambda x: x.softmax(-1), lambda c: np.exp(c) / np.exp(c).sum(-1, keepdims=True)),
        (lambda x: x.mean(-1), lambda c: c.mean(-1)),
        (lambda x: lin(x), lambda c: lin(torcia.from_numpy(c)).detach().numpy()),
        # function forms run the methods (the __torch_function__ protocol)
        (lambda x: torcia.exp(x), np.exp),
        (lambda x: torcia.nn.functional.silu(x), lambda c: c / (1 + np.exp(-c))),
    ]
    for op, ref in checks:
        out = op(nt)
        assert out.is_nested
        for got, c in zip(out.unbind(), comps):
            np.testing.assert_allclose(got.detach().numpy(), ref(c), rtol=1e-12, atol=1e-12)
    sums = nt.sum(1)
    np.testing.assert_allclose(sums.numpy(), np.stack([c.sum(0) for c in comps]), rtol=1e-12)
    np.testing.assert_allclose(nt.mean(1).numpy(), np.stack([c.mean(0) for c in comps]),
                               rtol=1e-12)


@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_is_per_sequence(is_causal):
    comps = _components(width=6, seed=3)
    q = _nt(torcia, comps).unflatten(-1, (2, 3)).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=is_causal)
    assert out.is_nested and out.shape[1] == 2
    for got, c in zip(out.transpose(1, 2).unbind(), comps):
        seq = torcia.from_numpy(c).reshape(c.shape[0], 2, 3).transpose(0, 1)
        want = F.scaled_dot_product_attention(seq, seq, seq, is_causal=is_causal)
        np.testing.assert_allclose(got.numpy(), want.transpose(0, 1).numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_gradients_by_finite_differences():
    comps = _components(width=4, seed=4, lengths=[2, 3])
    values = torcia.from_numpy(np.concatenate(comps)).requires_grad_()
    offsets = torcia.tensor([0, 2, 5])
    w = torcia.randn(4, 4, dtype=torcia.float64, requires_grad=True)

    def attention(v, w):
        nt = torcia.nested.nested_tensor_from_jagged(v, offsets)
        h = F.linear(nt, w).unflatten(-1, (2, 2)).transpose(1, 2)
        out = F.scaled_dot_product_attention(h, h, h, is_causal=True)
        return torcia.nested.to_padded_tensor(out.transpose(1, 2), 0.0)

    assert gradcheck(attention, (values, w))
    assert gradcheck(lambda v: torcia.nested.nested_tensor_from_jagged(v, offsets).sum(1),
                     (values,))


def test_narrow_and_masked_select():
    x = torcia.arange(24.0).reshape(3, 8)
    nt = torcia.nested.narrow(x, 1, torcia.tensor([0, 2, 5]), torcia.tensor([3, 1, 3]),
                              layout=torcia.jagged)
    assert [t.tolist() for t in nt.unbind()] == [[0.0, 1.0, 2.0], [10.0], [21.0, 22.0, 23.0]]
    sel = torcia.nested.masked_select(x, x.remainder(5) == 0)
    assert [t.tolist() for t in sel.unbind()] == [[0.0, 5.0], [10.0, 15.0], [20.0]]


@pytest.mark.torch
def test_matches_torch_jagged():
    torch = pytest.importorskip("torch")
    comps = _components(width=6, dtype="float32", seed=9)
    ours, theirs = _nt(torcia, comps), _nt(torch, comps)
    np.testing.assert_array_equal(ours.offsets().numpy(), theirs.offsets().numpy())
    np.testing.assert_array_equal(ours.values().numpy(), theirs.values().numpy())
    for o, t in ((torcia.nested.to_padded_tensor(ours, 0.5),
                  torch.nested.to_padded_tensor(theirs, 0.5)),
                 (ours.sum(1), theirs.sum(1)), ((ours * 3).relu().values(),
                                                (theirs * 3).relu().values())):
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-6)
    weight = RNG.standard_normal((6, 6)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = []
        for lib, nt in ((torcia, ours), (torch, theirs)):
            h = lib.nn.functional.linear(nt, lib.from_numpy(weight))
            h = h.unflatten(-1, (2, 3)).transpose(1, 2)
            out = lib.nn.functional.scaled_dot_product_attention(h, h, h)
            outs.append(lib.nested.to_padded_tensor(out.transpose(1, 2), 0.0).numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    values = torch.from_numpy(np.concatenate(comps))
    tn = torch.nested.nested_tensor_from_jagged(values, lengths=torch.tensor(LENGTHS))
    on = torcia.nested.nested_tensor_from_jagged(torcia.from_numpy(values.numpy()),
                                                 lengths=torcia.tensor(LENGTHS))
    np.testing.assert_array_equal(on.offsets().numpy(), tn.offsets().numpy())
    x = np.arange(24.0, dtype=np.float32).reshape(3, 8)
    mask = (x % 3) == 0
    sel = [lib.nested.masked_select(lib.from_numpy(x), lib.from_numpy(mask))
           for lib in (torcia, torch)]
    np.testing.assert_array_equal(sel[0].values().numpy(), sel[1].values().numpy())
    np.testing.assert_array_equal(sel[0].offsets().numpy(), sel[1].offsets().numpy())
