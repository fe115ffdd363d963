"""nn.utils parametrizations, pruning, weight/spectral-norm hooks, functional_call and
fusion: behaviour without torch, and parity with PyTorch where it is installed."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.autograd import gradcheck
from torcia.nn.utils import fusion, parametrizations, parametrize, prune, stateless


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)

    def right_inverse(self, a):
        return a.triu()


class Scale(nn.Module):
    def forward(self, x):
        return 3 * x

    def right_inverse(self, a):
        return a / 3


class SplitSum(nn.Module):
    """Two originals whose sum is the weight."""

    def forward(self, a, b):
        return a + b

    def right_inverse(self, w):
        return w / 2, w / 2


def _linear(out_f=4, in_f=4, seed=0, dtype=torcia.float64):
    torcia.manual_seed(seed)
    return nn.Linear(in_f, out_f).to(dtype)


# ---------------------------------------------------------------------------------------
# parametrize
# ---------------------------------------------------------------------------------------


def test_register_makes_a_property_and_keeps_the_original_parameter_object():
    m = _linear()
    w = m.weight
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear"
    assert type(nn.Linear(2, 2)).__name__ == "Linear"
    assert m.parametrizations.weight.original is w
    assert torcia.equal(m.weight, m.weight.T)
    names = sorted(n for n, _ in m.named_parameters())
    assert names == ["bias", "parametrizations.weight.original"]
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert parametrize.type_before_parametrizations(m) is nn.Linear


def test_gradient_flows_to_the_original_and_chains_compose():
    m = _linear()
    parametrize.register_parametrization(m, "weight", Symmetric())
    parametrize.register_parametrization(m, "weight", Scale())
    x = torcia.randn(3, 4, dtype=torcia.float64)
    m(x).sum().backward()
    orig = m.parametrizations.weight.original
    assert orig.grad is not None
    xs = x.sum(0)
    upper = 3 * (torcia.outer(torcia.ones(4, dtype=torcia.float64), xs)
                 + torcia.outer(xs, torcia.ones(4, dtype=torcia.float64))).triu()
    diag = 3 * torcia.diag_embed(torcia.ones(4, dtype=torcia.float64) * xs)
    np.testing.assert_allclose(orig.grad.numpy(), (upper - diag).numpy())


def test_assignment_goes_through_right_inverse():
    m = _linear()
    parametrize.register_parametrization(m, "weight", Scale())
    target = torcia.arange(16, dtype=torcia.float64).reshape(4, 4)
    m.weight = target
    np.testing.assert_allclose(m.weight.detach().numpy(), target.numpy())
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(),
                               target.numpy() / 3)


def test_several_originals_and_removal_rules():
    m = _linear()
    w = m.weight.detach().clone()
    parametrize.register_parametrization(m, "weight", SplitSum())
    p = m.parametrizations.weight
    assert not p.is_tensor and p.ntensors == 2
    np.testing.assert_allclose(m.weight.detach().numpy(), w.numpy())
    with pytest.raises(ValueError, match="sequence of tensors"):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), w.numpy())


def test_remove_without_leaving_parametrized_restores_the_original():
    m = _linear()
    parametrize.register_parametrization(m, "weight", Scale())
    orig = m.parametrizations.weight.original.detach().clone()
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_allclose(m.weight.detach().numpy(), orig.numpy())
    assert not hasattr(m, "parametrizations")


def test_cached_computes_once():
    calls = []

    class Counting(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1

    m = _linear()
    parametrize.register_parametrization(m, "weight", Counting())
    calls.clear()
    with parametrize.cached():
        a, b = m.weight, m.weight
    assert a is b and len(calls) == 1
    assert m.weight is not a and len(calls) == 2


def test_shape_changing_parametrization_needs_unsafe_and_bad_names_are_errors():
    class Rows(nn.Module):
        def forward(self, x):
            return x[:2]

    with pytest.raises(ValueError, match="may not change the shape"):
        parametrize.register_parametrization(_linear(), "weight", Rows())
    m = parametrize.register_parametrization(_linear(), "weight", Rows(), unsafe=True)
    assert m.weight.shape == (2, 4)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer"):
        parametrize.register_parametrization(_linear(), "nope", Scale())
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        parametrize.remove_parametrizations(_linear(), "bias")


def test_parametrized_module_deepcopies_and_refuses_pickling():
    import pickle

    m = parametrize.register_parametrization(_linear(), "weight", Symmetric())
    c = copy.deepcopy(m)
    assert torcia.equal(c.weight, m.weight)
    assert c.parametrizations.weight.original is not m.parametrizations.weight.original
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)


@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm", "orthogonal"])
def test_parametrizations_gradcheck(kind):
    torcia.manual_seed(0)
    # square: the householder map of a non-square weight casts its diagonal to signs,
    # which finite differences cannot cross
    m = nn.Linear(4, 4).double()
    getattr(parametrizations, kind)(m)
    m.eval()  # spectral norm: no power-iteration update between the evaluations
    names = [n for n, _ in m.named_parameters() if "original" in n]
    inputs = [m.get_parameter(n).detach().clone().requires_grad_(True) for n in names]
    x = torcia.randn(2, 4, dtype=torcia.float64)

    def through(*values):
        return stateless.functional_call(m, dict(zip(names, values)), (x,))

    assert gradcheck(through, inputs)


def test_orthogonal_is_orthogonal_for_every_map_and_shape():
    for orth_map in ("matrix_exp", "cayley", "householder"):
        for shape in ((5, 5), (3, 6), (6, 3)):
            m = nn.Linear(shape[1], shape[0]).double()
            parametrizations.orthogonal(m, orthogonal_map=orth_map)
            q = m.weight.detach()
            small = q @ q.T if shape[0] <= shape[1] else q.T @ q
            np.testing.assert_allclose(small.numpy(), np.eye(min(shape)), atol=1e-10)


def test_spectral_norm_parametrization_normalizes_to_one():
    torcia.manual_seed(3)
    m = parametrizations.spectral_norm(nn.Linear(6, 5).double(), n_power_iterations=30)
    _ = m.weight  # training mode: another 30 power-iteration steps
    sigma = np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0]
    assert abs(sigma - 1) < 1e-6


# ---------------------------------------------------------------------------------------
# prune
# ---------------------------------------------------------------------------------------


def test_l1_unstructured_then_structured_combines_and_remove_is_permanent():
    m = _linear(4, 6)
    w = m.weight.detach().clone()
    prune.l1_unstructured(m, "weight", amount=0.25)
    assert int((m.weight_mask == 0).sum()) == 6
    smallest = np.sort(np.abs(w.numpy()).ravel())[:6]
    np.testing.assert_allclose(np.sort(np.abs(w.numpy()[m.weight_mask.numpy() == 0])), smallest)
    prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
    hook = next(h for h in m._forward_pre_hooks.values())
    assert isinstance(hook, prune.PruningContainer) and len(hook) == 2
    assert int((m.weight_mask.sum(1) == 0).sum()) == 1
    out = m(torcia.ones(1, 6, dtype=torcia.float64))
    np.testing.assert_allclose(out.detach().numpy(),
                               (torcia.ones(1, 6, dtype=torcia.float64)
                                @ (w * m.weight_mask).T + m.bias).detach().numpy())
    mask = m.weight_mask.clone()
    prune.remove(m, "weight")
    assert not prune.is_pruned(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), (w * mask).numpy())


def test_random_pruning_counts_and_gradients_are_masked():
    m = _linear(5, 8)
    prune.random_unstructured(m, "weight", amount=0.5)
    assert int((m.weight_mask == 0).sum()) == 20
    prune.random_structured(m, "weight", amount=2, dim=1)
    assert int((m.weight_mask.sum(0) == 0).sum()) >= 2
    m(torcia.randn(3, 8, dtype=torcia.float64)).sum().backward()
    assert torcia.equal(m.weight_orig.grad * (1 - m.weight_mask),
                        torcia.zeros_like(m.weight_orig))


def test_global_and_custom_pruning_and_errors():
    a, b = _linear(3, 3, seed=1), _linear(3, 3, seed=2)
    prune.global_unstructured([(a, "weight"), (b, "weight")],
                              pruning_method=prune.L1Unstructured, amount=6)
    values = np.concatenate([a.weight_orig.detach().numpy().ravel(),
                             b.weight_orig.detach().numpy().ravel()])
    pruned = np.concatenate([a.weight_mask.numpy().ravel(), b.weight_mask.numpy().ravel()]) == 0
    assert pruned.sum() == 6
    assert np.abs(values[pruned]).max() <= np.abs(values[~pruned]).min()
    prune.custom_from_mask(a, "bias", torcia.tensor([1.0, 0.0, 1.0]))
    assert float(a.bias[1]) == 0.0
    with pytest.raises(ValueError, match="should either be a float in the range"):
        prune.l1_unstructured(_linear(), "weight", amount=1.5)
    with pytest.raises(ValueError, match="should be smaller than the number of parameters"):
        prune.l1_unstructured(_linear(), "weight", amount=100)
    with pytest.raises(ValueError, match="Structured pruning can only be applied"):
        prune.ln_structured(_linear(), "bias", amount=1, n=1, dim=0)
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(_linear(), "weight")
    with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE'):
        prune.global_unstructured([(a, "weight")], pruning_method=prune.LnStructured,
                                  amount=1, n=2, dim=0)


# ---------------------------------------------------------------------------------------
# hook-based weight_norm / spectral_norm
# ---------------------------------------------------------------------------------------


def test_weight_norm_hook_roundtrip():
    m = _linear(3, 5)
    w = m.weight.detach().clone()
    with pytest.warns(FutureWarning):
        nn.utils.weight_norm(m)
    assert m.weight_g.shape == (3, 1)
    np.testing.assert_allclose(m.weight.detach().numpy(), w.numpy())
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"), \
            pytest.warns(FutureWarning):
        nn.utils.weight_norm(m)
    m.weight_g.data = m.weight_g.data * 2
    m(torcia.ones(1, 5, dtype=torcia.float64))
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w.numpy())
    nn.utils.remove_weight_norm(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(m)


def test_spectral_norm_hook_roundtrip():
    torcia.manual_seed(0)
    m = nn.utils.spectral_norm(nn.Linear(6, 4).double(), n_power_iterations=50)
    m(torcia.ones(1, 6, dtype=torcia.float64))
    sigma = np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0]
    assert abs(sigma - 1) < 1e-6
    nn.utils.remove_spectral_norm(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]


# ---------------------------------------------------------------------------------------
# functional_call and fusion
# ---------------------------------------------------------------------------------------


def test_functional_call_swaps_and_restores_and_checks():
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    before = {k: v.clone() for k, v in m.state_dict().items()}
    new = {"0.weight": torcia.eye(2), "0.bias": torcia.zeros(2)}
    x = torcia.tensor([[1.0, 2.0], [3.0, 5.0]])
    m.eval()
    out = stateless.functional_call(m, new, x)
    np.testing.assert_allclose(out.detach().numpy(), x.numpy() / np.sqrt(1 + 1e-5), rtol=1e-6)
    for k, v in m.state_dict().items():
        assert torcia.equal(v, before[k])
    with pytest.raises(RuntimeError, match="Missing key"):
        stateless.functional_call(m, new, x, strict=True)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        stateless.functional_call(m, [new, {"0.bias": torcia.ones(2)}], x)


def test_functional_call_ties_shared_weights():
    a, b = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
    b.weight = a.weight
    m = nn.Sequential(a, b)
    new = {"0.weight": 2 * torcia.eye(2)}
    out = stateless.functional_call(m, new, torcia.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), [[4.0, 4.0]])
    untied = stateless.functional_call(m, new, torcia.ones(1, 2), tie_weights=False)
    expected = (2 * torcia.ones(1, 2)) @ a.weight.T
    np.testing.assert_allclose(untied.detach().numpy(), expected.detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="which are tied"):
        stateless.functional_call(m, {"0.weight": torcia.eye(2), "1.weight": torcia.ones(2, 2)},
                                  torcia.ones(1, 2))


def test_fusion_matches_conv_then_batchnorm():
    torcia.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3).double()
    bn = nn.BatchNorm2d(4).double()
    bn.train()
    bn(conv(torcia.randn(8, 3, 6, 6, dtype=torcia.float64)))  # non-trivial running stats
    conv.eval()
    bn.eval()
    x = torcia.randn(2, 3, 6, 6, dtype=torcia.float64)
    fused = fusion.fuse_conv_bn_eval(conv, bn)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(),
                               atol=1e-12)
    lin, bn1 = nn.Linear(3, 4).double().eval(), nn.BatchNorm1d(4).double()
    bn1(lin(torcia.randn(8, 3, dtype=torcia.float64)))
    bn1.eval()
    y = torcia.randn(5, 3, dtype=torcia.float64)
    np.testing.assert_allclose(fusion.fuse_linear_bn_eval(lin, bn1)(y).detach().numpy(),
                               bn1(lin(y)).detach().numpy(), atol=1e-12)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        fusion.fuse_conv_bn_eval(conv.train(), bn)


# ---------------------------------------------------------------------------------------
# parity with PyTorch
# ---------------------------------------------------------------------------------------


def _twin(torch, in_f=5, out_f=4, seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Linear(in_f, out_f).double()
    c = nn.Linear(in_f, out_f).double()
    c.weight.data = torcia.tensor(t.weight.detach().numpy())
    c.bias.data = torcia.tensor(t.bias.detach().numpy())
    return t, c


def _compare_training(torch, t, c, steps=3, in_f=5, sync=None):
    rng = np.random.default_rng(0)
    topt = torch.optim.SGD(t.parameters(), lr=0.1)
    copt = torcia.optim.SGD(c.parameters(), lr=0.1)
    for _ in range(steps):
        x = rng.standard_normal((3, in_f))
        topt.zero_grad()
        copt.zero_grad()
        t(torch.tensor(x)).pow(2).sum().backward()
        c(torcia.tensor(x)).pow(2).sum().backward()
        topt.step()
        copt.step()
    for (tn, tp), (cn, cp) in zip(t.named_parameters(), c.named_parameters()):
        assert tn == cn
        np.testing.assert_allclose(cp.detach().numpy(), tp.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(c.weight.detach().numpy(), t.weight.detach().numpy(), atol=1e-10)


@pytest.mark.torch
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_trains_like_torch(dim):
    torch = pytest.importorskip("torch")
    t, c = _twin(torch)
    torch.nn.utils.parametrizations.weight_norm(t, dim=dim)
    parametrizations.weight_norm(c, dim=dim)
    _compare_training(torch, t, c)


@pytest.mark.torch
@pytest.mark.parametrize("orth_map,shape,triv", [
    ("matrix_exp", (4, 4), True), ("cayley", (4, 4), True), ("householder", (4, 6), True),
    ("matrix_exp", (3, 5), True), ("householder", (6, 3), False), ("householder", (4, 4), False),
])
def test_orthogonal_trains_like_torch(orth_map, shape, triv):
    torch = pytest.importorskip("torch")
    t, c = _twin(torch, in_f=shape[1], out_f=shape[0])
    torch.nn.utils.parametrizations.orthogonal(t, orthogonal_map=orth_map,
                                               use_trivialization=triv)
    parametrizations.orthogonal(c, orthogonal_map=orth_map, use_trivialization=triv)
    if triv:
        # a non-square base is completed with random columns: share torch's
        c.parametrizations.weight[0].base = torcia.tensor(
            t.parametrizations.weight[0].base.numpy())
    np.testing.assert_allclose(c.weight.detach().numpy(), t.weight.detach().numpy(),
                               atol=1e-10)
    _compare_training(torch, t, c, in_f=shape[1])


@pytest.mark.torch
def test_spectral_norm_trains_like_torch():
    torch = pytest.importorskip("torch")
    for new_style in (True, False):
        t, c = _twin(torch)
        if new_style:
            torch.nn.utils.parametrizations.spectral_norm(t)
            parametrizations.spectral_norm(c)
            tsn, csn = t.parametrizations.weight[0], c.parametrizations.weight[0]
            csn._u.copy_(torcia.tensor(tsn._u.numpy()))
            csn._v.copy_(torcia.tensor(tsn._v.numpy()))
        else:
            torch.nn.utils.spectral_norm(t)
            nn.utils.spectral_norm(c)
            c.weight_u.copy_(torcia.tensor(t.weight_u.numpy()))
            c.weight_v.copy_(torcia.tensor(t.weight_v.numpy()))
        _compare_training(torch, t, c)


@pytest.mark.torch
def test_weight_norm_hook_trains_like_torch():
    torch = pytest.importorskip("torch")
    t, c = _twin(torch)
    with pytest.warns(FutureWarning):
        torch.nn.utils.weight_norm(t)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        nn.utils.weight_norm(c)
    _compare_training(torch, t, c)


@pytest.mark.torch
def test_pruning_masks_match_torch():
    pytest.importorskip("torch")
    import torch.nn.utils.prune  # not imported by torch.nn.utils itself

    t, c = _twin(torch, in_f=6, out_f=5)
    torch.nn.utils.prune.l1_unstructured(t, "weight", amount=0.3)
    prune.l1_unstructured(c, "weight", amount=0.3)
    torch.nn.utils.prune.ln_structured(t, "weight", amount=2, n=1, dim=1)
    prune.ln_structured(c, "weight", amount=2, n=1, dim=1)
    torch.nn.utils.prune.ln_structured(t, "weight", amount=1, n=float("inf"), dim=0)
    prune.ln_structured(c, "weight", amount=1, n=float("inf"), dim=0)
    np.testing.assert_array_equal(c.weight_mask.numpy(), t.weight_mask.numpy())
    t2, c2 = _twin(torch, seed=1)
    params_t = [(t, "bias"), (t2, "weight")]
    params_c = [(c, "bias"), (c2, "weight")]
    torch.nn.utils.prune.global_unstructured(params_t, torch.nn.utils.prune.L1Unstructured,
                                             amount=0.4)
    prune.global_unstructured(params_c, prune.L1Unstructured, amount=0.4)
    np.testing.assert_array_equal(c.bias_mask.numpy(), t.bias_mask.numpy())
    np.testing.assert_array_equal(c2.weight_mask.numpy(), t2.weight_mask.numpy())
    _compare_training(torch, t, c, in_f=6)
    torch.nn.utils.prune.remove(t, "weight")
    prune.remove(c, "weight")
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in t.named_parameters()]


@pytest.mark.torch
def test_functional_call_and_fusion_match_torch():
    torch = pytest.importorskip("torch")
    t, c = _twin(torch)
    rng = np.random.default_rng(1)
    w, b, x = rng.standard_normal((4, 5)), rng.standard_normal(4), rng.standard_normal((2, 5))
    tout = torch.func.functional_call(t, {"weight": torch.tensor(w), "bias": torch.tensor(b)},
                                      (torch.tensor(x),))
    cout = stateless.functional_call(c, {"weight": torcia.tensor(w), "bias": torcia.tensor(b)},
                                     (torcia.tensor(x),))
    np.testing.assert_allclose(cout.numpy(), tout.detach().numpy())
    bn_t = torch.nn.BatchNorm1d(4).double()
    bn_t.running_mean.copy_(torch.tensor(rng.standard_normal(4)))
    bn_t.running_var.copy_(torch.tensor(rng.random(4) + 0.5))
    bn_t.weight.data.copy_(torch.tensor(rng.standard_normal(4)))
    bn_c = nn.BatchNorm1d(4).double()
    bn_c.load_state_dict({k: torcia.tensor(v.numpy()) for k, v in bn_t.state_dict().items()})
    ft = torch.nn.utils.fusion.fuse_linear_bn_eval(t.eval(), bn_t.eval())
    fc = fusion.fuse_linear_bn_eval(c.eval(), bn_c.eval())
    np.testing.assert_allclose(fc.weight.detach().numpy(), ft.weight.detach().numpy())
    np.testing.assert_allclose(fc.bias.detach().numpy(), ft.bias.detach().numpy())
