"""SyncBatchNorm on one process (batch norm, as PyTorch's falls back to), its synchronised
path with a stand-in group sum, and convert_sync_batchnorm. Several processes:
packages/distributed/tests/test_c10d_processes.py."""

import numpy as np
import pytest

import torcia
from torcia import nn

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 4), (2, 3, 2, 2, 2)])
def test_one_process_is_batch_norm(shape):
    x = torcia.from_numpy(RNG.standard_normal(shape))
    sync, ref = nn.SyncBatchNorm(3).double(), nn.BatchNorm1d(3).double()
    np.testing.assert_allclose(sync(x).detach().numpy(),
                               nn.functional.batch_norm(x, ref.running_mean, ref.running_var,
                                                        ref.weight, ref.bias, True).detach()
                               .numpy(), atol=1e-12)
    np.testing.assert_allclose(sync.running_var.numpy(), ref.running_var.numpy(), atol=1e-12)


def test_matches_pytorch_on_one_process():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((6, 3, 4)).astype(np.float32)
    ours, theirs = nn.SyncBatchNorm(3, momentum=None), torch.nn.SyncBatchNorm(3, momentum=None)
    for _ in range(2):
        out_o, out_t = ours(torcia.from_numpy(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(out_o.detach().numpy(), out_t.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())


class _TwoCopies:
    """A stand-in group of two processes that hold the same batch: the sum doubles."""

    def __init__(self):
        self.calls = 0

    def __call__(self, group):
        def reduce(t):
            self.calls += 1
            return t * 2
        return reduce


def test_the_synchronised_statistics_and_their_gradient():
    # plugins load on first use, and torcia-distributed installs its reducer on import:
    # let that happen before the stand-in goes in
    nn.SyncBatchNorm(1)(torcia.ones(2, 1))
    before = nn.SyncBatchNorm._reducer
    fake = _TwoCopies()
    nn.SyncBatchNorm.register_reducer(fake)
    try:
        x = torcia.from_numpy(RNG.standard_normal((3, 2, 4))).requires_grad_()
        bn = nn.SyncBatchNorm(2).double()
        # two identical halves: the statistics are the batch's own, the count doubles
        out = bn(x)
        ref = nn.BatchNorm1d(2).double()
        np.testing.assert_allclose(out.detach().numpy(), ref(x).detach().numpy(), atol=1e-12)
        n = 2 * 3 * 4
        unbiased = x.detach().numpy().transpose(1, 0, 2).reshape(2, -1).var(1) * n / (n - 1)
        np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * unbiased, rtol=1e-12)
        assert fake.calls == 1
        assert torcia.autograd.gradcheck(lambda t: bn(t), (x,))
        calls = fake.calls
        bn.eval()
        bn(x)
        assert fake.calls == calls  # eval mode never synchronises
    finally:
        nn.SyncBatchNorm.register_reducer(before)


def test_convert_sync_batchnorm_shares_parameters_and_buffers():
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2),
                        nn.Sequential(nn.BatchNorm1d(4, affine=False), nn.InstanceNorm1d(2)))
    bn = net[1]
    net.eval()
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(net, process_group="pg")
    sync = converted[1]
    assert type(sync) is nn.SyncBatchNorm and sync.process_group == "pg"
    assert sync.weight is bn.weight and sync.running_mean is bn.running_mean
    assert not sync.training and type(converted[2][0]) is nn.SyncBatchNorm
    assert converted[2][0].weight is None and type(converted[2][1]) is nn.InstanceNorm1d


def test_bad_inputs():
    with pytest.raises(ValueError, match="expected at least 2D input"):
        nn.SyncBatchNorm(3)(torcia.ones(3))
    with pytest.raises(ValueError, match="expected input with 3 channels"):
        nn.SyncBatchNorm(3)(torcia.ones(2, 4))
