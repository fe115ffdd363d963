"""Run under ``mpiexec -n N``: one scenario per invocation (its name is argv[1]); each
asserts on every rank with values worked out by hand."""

import sys
import warnings

import torcia
import torcia.distributed as dist


def p2p(rank, size):
    # a ring: each rank sends its rank to the next and receives from the previous
    out, into = torcia.tensor([float(rank)]), torcia.zeros(1)
    ops = [dist.P2POp(dist.irecv, into, (rank - 1) % size),
           dist.P2POp(dist.isend, out, (rank + 1) % size)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert into.item() == (rank - 1) % size
    if rank == 0:
        dist.send_object_list([{"lr": 0.1}, "x", torcia.arange(3)], dst=1)
    elif rank == 1:
        got = [None, None, None]
        assert dist.recv_object_list(got, src=0) == 0
        assert got[0] == {"lr": 0.1} and got[1] == "x" and got[2].tolist() == [0, 1, 2]


def collectives(rank, size):
    out = torcia.zeros(size, 2, dtype=torcia.int64)
    dist.all_gather_single(out, torcia.arange(2) + 2 * rank)
    assert out.reshape(-1).tolist() == list(range(2 * size))
    red = torcia.zeros(2, dtype=torcia.int64)
    dist.reduce_scatter_single(red, torcia.arange(2 * size))
    assert red.tolist() == [size * 2 * rank, size * (2 * rank + 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        a, b = torcia.full((2,), float(rank)), torcia.ones(1, 1)
        dist.all_reduce_coalesced([a, b])
        total = sum(range(size))
        assert a.tolist() == [total, total] and b.tolist() == [[size]]
        outs = [[torcia.zeros(1), torcia.zeros(2)] for _ in range(size)]
        dist.all_gather_coalesced(outs, [torcia.tensor([float(rank)]), torcia.ones(2) * rank])
        assert [o[0].item() for o in outs] == list(range(size))
        assert outs[-1][1].tolist() == [size - 1] * 2


def subgroups(rank, size):
    mine, groups = dist.new_subgroups(group_size=2)
    assert len(groups) == size // 2 and mine.ranks == [rank - rank % 2, rank - rank % 2 + 1]
    t = torcia.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    assert t.item() == 2 * (rank - rank % 2) + 1
    assert dist.get_global_rank(mine, 1) == mine.ranks[1]
    assert dist.get_group_rank(mine, rank) == rank % 2
    evens, _ = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])
    t = torcia.tensor([float(rank)])
    dist.all_reduce(t, group=evens)
    assert t.item() == (2.0 if rank % 2 == 0 else 4.0)
    split = dist.split_group(split_ranks=[[0, 1, 2], [3]])
    assert split.ranks == ([0, 1, 2] if rank < 3 else [3])
    t = torcia.ones(1)
    dist.all_reduce(t, group=split)
    assert t.item() == len(split.ranks)


def mesh(rank, size):
    m = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    assert m.get_coordinate() == [rank // 2, rank % 2]
    t = torcia.tensor([float(rank)])
    dist.all_reduce(t, group=m.get_group("tp"))  # rows: {0, 1}, {2, 3}
    assert t.item() == (1.0 if rank < 2 else 5.0)
    t = torcia.tensor([float(rank)])
    dist.all_reduce(t, group=m["dp"].get_group())  # columns: {0, 2}, {1, 3}
    assert t.item() == (2.0 if rank % 2 == 0 else 4.0)
    assert m["dp"].mesh.tolist() == [rank % 2, rank % 2 + 2]
    assert m.get_local_rank("dp") == rank // 2


def sync_bn(rank, size):
    import numpy as np

    rng = np.random.default_rng(0)
    full = rng.standard_normal((4 * size, 3, 5))
    weights = rng.standard_normal(full.shape)
    # the reference: one process, the whole batch
    ref = torcia.nn.BatchNorm1d(3).double()
    x_full = torcia.from_numpy(full).requires_grad_()
    ref_out = ref(x_full)
    (ref_out * torcia.from_numpy(weights)).sum().backward()
    # this rank: its quarter of the batch, synchronised
    net = torcia.nn.SyncBatchNorm.convert_sync_batchnorm(
        torcia.nn.Sequential(torcia.nn.BatchNorm1d(3))).double()
    part = slice(4 * rank, 4 * rank + 4)
    x = torcia.from_numpy(full[part].copy()).requires_grad_()
    out = net(x)
    (out * torcia.from_numpy(weights[part].copy())).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ref_out.detach().numpy()[part],
                               atol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), x_full.grad.numpy()[part], atol=1e-10)
    grad = net[0].weight.grad.clone()
    dist.all_reduce(grad)
    np.testing.assert_allclose(grad.numpy(), ref.weight.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(net[0].running_var.numpy(), ref.running_var.numpy(), atol=1e-10)
    net.eval()
    np.testing.assert_allclose(net(x).detach().numpy(),
                               ref.eval()(x).detach().numpy(), atol=1e-12)


SCENARIOS = {f.__name__: f for f in (p2p, collectives, subgroups, mesh, sync_bn)}

if __name__ == "__main__":
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    SCENARIOS[sys.argv[1]](rank, size)
    print(f"PASS {sys.argv[1]} rank {rank}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
