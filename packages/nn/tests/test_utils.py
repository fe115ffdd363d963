"""torcia.nn.utils: gradient clipping and parameter vectors, against hand values and torch."""

import math

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    parameters_to_vector,
    vector_to_parameters,
)


def _params(*grads):
    ps = []
    for g in grads:
        p = nn.Parameter(torcia.zeros(len(g)))
        p.grad = torcia.tensor(g)
        ps.append(p)
    return ps


def test_clip_grad_norm_two_norm_over_all_gradients():
    ps = _params([3.0, 0.0], [0.0, 4.0])  # total 2-norm 5
    total = clip_grad_norm_(ps, max_norm=1.0)
    assert total.item() == pytest.approx(5.0)
    scale = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(ps[0].grad.numpy(), [3 * scale, 0], rtol=1e-6)
    np.testing.assert_allclose(ps[1].grad.numpy(), [0, 4 * scale], rtol=1e-6)


def test_clip_grad_norm_leaves_small_gradients_and_other_norms():
    ps = _params([0.3, -0.4])
    assert clip_grad_norm_(ps, 1.0).item() == pytest.approx(0.5)
    np.testing.assert_allclose(ps[0].grad.numpy(), [0.3, -0.4])
    ps = _params([1.0, -7.0], [2.0])
    assert clip_grad_norm_(ps, 3.5, norm_type=math.inf).item() == 7.0
    np.testing.assert_allclose(ps[0].grad.numpy(), np.array([1, -7]) * 3.5 / (7 + 1e-6),
                               rtol=1e-6)
    ps = _params([1.0, -2.0], [3.0])
    assert clip_grad_norm_(ps, 100.0, norm_type=1).item() == pytest.approx(6.0)
    assert clip_grad_norm_([nn.Parameter(torcia.zeros(1))], 1.0).item() == 0.0


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf * 0, as in torch
def test_clip_grad_norm_non_finite():
    ps = _params([math.inf, 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert math.isinf(clip_grad_norm_(ps, 1.0).item())


@pytest.mark.torch
def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=s).astype(np.float32) for s in ((3, 4), (5,), (2, 2, 2))]
    for norm_type in (2.0, 1.0, 3.0, math.inf):
        ours = [nn.Parameter(torcia.zeros(*g.shape)) for g in grads]
        theirs = [torch.nn.Parameter(torch.zeros(*g.shape)) for g in grads]
        for o, t, g in zip(ours, theirs, grads):
            o.grad, t.grad = torcia.tensor(g), torch.tensor(g)
        a = clip_grad_norm_(ours, 0.5, norm_type=norm_type)
        b = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type=norm_type)
        assert a.item() == pytest.approx(b.item(), rel=1e-5)
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5)


def test_clip_grad_value():
    ps = _params([-5.0, 0.5, 5.0])
    assert clip_grad_value_(ps, 1.0) is None
    np.testing.assert_array_equal(ps[0].grad.numpy(), [-1.0, 0.5, 1.0])
    single = _params([2.0, -3.0])[0]
    clip_grad_value_(single, 2.5)
    np.testing.assert_array_equal(single.grad.numpy(), [2.0, -2.5])


def test_parameters_to_vector_and_back():
    lin = nn.Linear(3, 2)
    vec = parameters_to_vector(lin.parameters())
    np.testing.assert_array_equal(
        vec.detach().numpy(),
        np.concatenate([lin.weight.detach().numpy().ravel(), lin.bias.detach().numpy()]))
    vec.sum().backward()
    np.testing.assert_array_equal(lin.weight.grad.numpy(), np.ones((2, 3)))
    vector_to_parameters(torcia.arange(8.0), lin.parameters())
    np.testing.assert_array_equal(lin.weight.detach().numpy(), [[0, 1, 2], [3, 4, 5]])
    np.testing.assert_array_equal(lin.bias.detach().numpy(), [6, 7])
    assert isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad
    with pytest.raises(ValueError, match="1-D tensor of 8 elements"):
        vector_to_parameters(torcia.zeros(9), lin.parameters())
    with pytest.raises(TypeError, match="expected torcia.Tensor"):
        vector_to_parameters([0.0] * 8, lin.parameters())


def test_invert_permutation():
    from torcia.nn.utils.rnn import invert_permutation

    gen = np.random.default_rng(5)
    for n in (0, 1, 7):
        perm = torcia.tensor(gen.permutation(n).astype(np.int64))
        inv = invert_permutation(perm)
        assert inv.dtype is torcia.int64
        assert torcia.equal(perm[inv], torcia.arange(n)) and torcia.equal(inv[perm],
                                                                          torcia.arange(n))
    assert invert_permutation(None) is None
