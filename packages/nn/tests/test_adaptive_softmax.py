"""AdaptiveLogSoftmaxWithLoss: the cluster arithmetic by hand, against PyTorch with the
same weights, gradients, and argument checks."""

import numpy as np
import pytest

import torcia
from torcia import nn

RNG = np.random.default_rng(0)


def _model():
    torcia.manual_seed(0)
    return nn.AdaptiveLogSoftmaxWithLoss(6, 10, cutoffs=[3, 7], div_value=2.0).double()


def test_layout_follows_the_cutoffs():
    asm = _model()
    assert asm.head.weight.shape == (3 + 2, 6) and asm.head.bias is None
    assert [tuple(p.shape) for p in asm.tail[0].parameters()] == [(3, 6), (4, 3)]
    assert [tuple(p.shape) for p in asm.tail[1].parameters()] == [(1, 6), (3, 1)]


def test_log_probabilities_by_hand_and_normalised():
    asm = _model()
    x = torcia.from_numpy(RNG.standard_normal((4, 6)))
    head = torcia.log_softmax(asm.head(x), 1).detach().numpy()
    tail = torcia.log_softmax(asm.tail[0](x), 1).detach().numpy()
    full = asm.log_prob(x).detach().numpy()
    # class 4 is the second class of cluster 0, whose head entry is index 3
    np.testing.assert_allclose(full[:, 4], head[:, 3] + tail[:, 1], rtol=1e-12)
    np.testing.assert_allclose(full[:, :3], head[:, :3], rtol=1e-12)
    np.testing.assert_allclose(np.exp(full).sum(1), 1.0, rtol=1e-12)
    out, loss = asm(x, torcia.tensor([0, 4, 9, 6]))
    np.testing.assert_allclose(out.detach().numpy(), full[np.arange(4), [0, 4, 9, 6]],
                               rtol=1e-12)
    np.testing.assert_allclose(loss.item(), -out.detach().numpy().mean(), rtol=1e-12)
    np.testing.assert_array_equal(asm.predict(x).numpy(), full.argmax(1))


def test_gradients():
    asm = _model()
    x = torcia.from_numpy(RNG.standard_normal((5, 6))).requires_grad_()
    target = torcia.tensor([0, 3, 5, 7, 9])
    assert torcia.autograd.gradcheck(lambda t: asm(t, target).loss, (x,))


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 12], div_value=2.0,
                                                 head_bias=True).double()
    ours = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 12], div_value=2.0,
                                         head_bias=True).double()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    ours.load_state_dict({k: torcia.from_numpy(v.numpy().copy())
                          for k, v in theirs.state_dict().items()})
    x, y = RNG.standard_normal((7, 16)), np.array([0, 4, 5, 11, 12, 19, 3])
    xt = torch.tensor(x, requires_grad=True)
    xo = torcia.tensor(x, requires_grad=True)
    rt, ro = theirs(xt, torch.tensor(y)), ours(xo, torcia.tensor(y))
    np.testing.assert_allclose(ro.output.detach().numpy(), rt.output.detach().numpy(),
                               rtol=1e-12)
    rt.loss.backward()
    ro.loss.backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert ours.predict(torcia.tensor(x)).tolist() == theirs.predict(torch.tensor(x)).tolist()
    single = ours(torcia.tensor(x[0]), torcia.tensor(y[0]))
    assert single.output.shape == () and abs(single.output.item() - rt.output[0].item()) < 1e-12


def test_argument_checks():
    with pytest.raises(ValueError, match="cutoffs should be a sequence of length larger"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 10, [])
    with pytest.raises(ValueError, match="unique, positive integers"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 3])
    asm = nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        asm(torcia.ones(2, 4), torcia.tensor([1, 10]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        asm(torcia.ones(2, 4), torcia.tensor([1]))
    with pytest.raises(RuntimeError, match="multi-target not supported"):
        asm(torcia.ones(2, 4), torcia.ones(2, 1, dtype=torcia.int64))
