"""linear_cross_entropy and LinearCrossEntropyLoss: the reference form equals
cross_entropy(linear(...)), the chunked form equals the reference (values and
gradients, every reduction, ignored targets), PyTorch parity, fall-backs and checks."""

import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import nn

RNG = np.random.default_rng(0)
X, W, B = RNG.standard_normal((9, 5)), RNG.standard_normal((7, 5)), RNG.standard_normal(7)
T = np.array([0, 6, 3, -100, 2, 2, 5, 1, 4])


def _leaves():
    return [torcia.tensor(a, requires_grad=True) for a in (X, W, B)]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [None, nn.LinearCrossEntropyOptions(batch_chunk_size=4),
                                     nn.LinearCrossEntropyOptions(chunking_method="aspect_ratio:1")])
def test_chunked_equals_the_reference(reduction, options):
    x, w, b = _leaves()
    ref = F.cross_entropy(F.linear(x, w, b), torcia.tensor(T), reduction=reduction)
    x2, w2, b2 = _leaves()
    got = F.linear_cross_entropy(x2, w2, torcia.tensor(T), linear_bias=b2,
                                 reduction=reduction, options=options)
    np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    g = torcia.tensor(RNG.standard_normal(ref.shape))
    ref.backward(g)
    got.backward(g)
    for a, c in ((x, x2), (w, w2), (b, b2)):
        np.testing.assert_allclose(c.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_chunked_gradcheck_and_second_backward():
    x, w, b = _leaves()
    target = torcia.tensor(T)
    opts = nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    assert torcia.autograd.gradcheck(
        lambda x, w, b: F.linear_cross_entropy(x, w, target, linear_bias=b, options=opts),
        (x, w, b))
    loss = F.linear_cross_entropy(x, w, target, options=opts)
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy(), rtol=1e-12)


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    for options in (None, 3):
        xt, wt = torch.tensor(X, requires_grad=True), torch.tensor(W, requires_grad=True)
        xo, wo = torcia.tensor(X, requires_grad=True), torcia.tensor(W, requires_grad=True)
        lt = torch.nn.functional.linear_cross_entropy(
            xt, wt, torch.tensor(T), label_smoothing=0.0,
            options=options and torch.nn.LinearCrossEntropyOptions(batch_chunk_size=options))
        lo = F.linear_cross_entropy(
            xo, wo, torcia.tensor(T),
            options=options and nn.LinearCrossEntropyOptions(batch_chunk_size=options))
        lt.backward()
        lo.backward()
        np.testing.assert_allclose(lo.item(), lt.item(), rtol=1e-12)
        np.testing.assert_allclose(wo.grad.numpy(), wt.grad.numpy(), rtol=1e-10, atol=1e-14)
    head_t = torch.nn.LinearCrossEntropyLoss(5, 7, bias=True, label_smoothing=0.1).double()
    head_o = nn.LinearCrossEntropyLoss(5, 7, bias=True, label_smoothing=0.1).double()
    assert sorted(head_o.state_dict()) == sorted(head_t.state_dict())
    head_o.load_state_dict({k: torcia.from_numpy(v.numpy().copy())
                            for k, v in head_t.state_dict().items()})
    y = np.array([0, 6, 3, 1, 2, 2, 5, 1, 4])
    np.testing.assert_allclose(head_o(torcia.tensor(X), torcia.tensor(y)).item(),
                               head_t(torch.tensor(X), torch.tensor(y)).item(), rtol=1e-12)


def test_k_dimensional_and_fallbacks():
    head = nn.LinearCrossEntropyLoss(5, 3, out_features=(2,), reduction="none").double()
    x = torcia.tensor(X[:4])
    target = torcia.tensor([[0, 2], [1, 1], [2, 0], [0, 0]])
    logits = (x @ head.linear.weight.T).reshape(4, 3, 2)
    np.testing.assert_allclose(head(x, target).detach().numpy(),
                               F.cross_entropy(logits, target, reduction="none").detach()
                               .numpy(), rtol=1e-12)
    opts = nn.LinearCrossEntropyOptions()
    with pytest.warns(UserWarning, match="does not support label_smoothing"):
        F.linear_cross_entropy(torcia.tensor(X), torcia.tensor(W), torcia.tensor(T[T >= 0][:1]
                               .repeat(9)), label_smoothing=0.1, options=opts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.linear_cross_entropy(torcia.tensor(X), torcia.tensor(W), torcia.tensor(T),
                               options=opts)


def test_argument_checks():
    with pytest.raises(ValueError, match="invalid acc_policy"):
        nn.LinearCrossEntropyOptions(acc_policy="fast")
    with pytest.raises(ValueError, match="invalid chunking_method"):
        nn.LinearCrossEntropyOptions(chunking_method="rows:2")
    with pytest.raises(ValueError, match="batch_chunk_size must be positive"):
        nn.LinearCrossEntropyOptions(batch_chunk_size=0)
    with pytest.raises(RuntimeError, match="expected weight shape"):
        nn.LinearCrossEntropyLoss(5, 7, weight=torcia.ones(3))
    with pytest.raises(RuntimeError, match="label_smoothing to be in range"):
        nn.LinearCrossEntropyLoss(5, 7, label_smoothing=2.0)
    with pytest.raises(RuntimeError, match="input has 5 features"):
        F.linear_cross_entropy(torcia.tensor(X), torcia.ones(7, 4), torcia.tensor(T))
