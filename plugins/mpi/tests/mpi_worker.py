"""Run under ``mpiexec -n 2``: one scenario per invocation (its name is argv[1]).

Each scenario asserts on every rank with values computed by hand; any failure exits
non-zero, which the pytest side reports with the output.
"""

import os
import signal
import sys
import time

import numpy as np

import torcia
import torcia.distributed as dist


def collectives(rank, size):
    ranks = np.arange(size, dtype=np.float64)
    t = torcia.tensor([float(rank + 1), 10.0 * (rank + 1)])
    dist.all_reduce(t)
    total = (ranks + 1).sum()
    assert t.tolist() == [total, 10 * total], t
    for op, want in ((dist.ReduceOp.AVG, (ranks + 1).mean()), (dist.ReduceOp.MAX, size),
                     (dist.ReduceOp.MIN, 1.0), (dist.ReduceOp.PRODUCT, np.prod(ranks + 1))):
        t = torcia.tensor([float(rank + 1)])
        dist.all_reduce(t, op=op)
        assert t.item() == want, (op, t)
    h = torcia.tensor([rank + 1.0], dtype=torcia.float16)
    dist.all_reduce(h)
    assert h.dtype is torcia.float16 and h.item() == total
    i = torcia.tensor([rank + 1])
    dist.all_reduce(i, op=dist.ReduceOp.AVG)
    assert i.tolist() == [int(total) // size]
    b = torcia.arange(4.0) if rank == 0 else torcia.zeros(4)
    dist.broadcast(b, src=0)
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0]
    r = torcia.tensor([float(rank + 1)])
    dist.reduce(r, dst=1)
    if rank == 1:
        assert r.item() == total
    outs = [torcia.zeros(2) for _ in range(size)]
    dist.all_gather(outs, torcia.full((2,), float(rank)))
    assert [o.tolist() for o in outs] == [[float(k)] * 2 for k in range(size)]
    cat = torcia.zeros(2 * size)
    dist.all_gather_into_tensor(cat, torcia.full((2,), float(rank)))
    assert cat.tolist() == list(np.repeat(ranks, 2))
    g = [torcia.zeros(1) for _ in range(size)] if rank == 0 else None
    dist.gather(torcia.tensor([rank * 5.0]), g, dst=0)
    if rank == 0:
        assert [x.item() for x in g] == list(ranks * 5)
    s = torcia.zeros(2)
    dist.scatter(s, [torcia.tensor([2.0 * k, 2.0 * k + 1]) for k in range(size)]
                 if rank == 0 else None, src=0)
    assert s.tolist() == [2.0 * rank, 2.0 * rank + 1]
    rs = torcia.zeros(1)
    dist.reduce_scatter(rs, [torcia.tensor([100.0 * k + rank]) for k in range(size)])
    assert rs.item() == 100.0 * rank * size + ranks.sum()
    ins = [torcia.tensor([rank * 10.0 + j]) for j in range(size)]
    outs = [torcia.zeros(1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    assert [o.item() for o in outs] == list(ranks * 10 + rank)
    nc = torcia.zeros(3, 2).t()  # a non-contiguous tensor is written back correctly
    if rank == 0:
        nc += torcia.arange(6.0).reshape(2, 3)
    dist.broadcast(nc, src=0)
    assert nc.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    work = dist.all_reduce(torcia.ones(3), async_op=True)
    assert work.wait() is True and work.is_completed()
    dist.barrier()


def mismatch(rank, size):
    try:
        dist.all_reduce(torcia.ones(3 if rank == 0 else 4))
    except RuntimeError as exc:
        assert "rank 0: [3] float32" in str(exc) and "rank 1: [4] float32" in str(exc), exc
    else:
        raise AssertionError("mismatched shapes went unnoticed")


def mixed_dtypes(rank, size):
    # float32 on rank 0, float64 elsewhere: each rank must see the disagreement
    try:
        dist.all_reduce(torcia.ones(3, dtype=torcia.float32 if rank == 0 else torcia.float64))
    except RuntimeError as exc:
        assert "rank 0: [3] float32 sum" in str(exc) and "rank 1: [3] float64 sum" in str(exc), \
            exc
    else:
        raise AssertionError("float32 and float64 were reduced together")
    try:
        dist.all_reduce(torcia.ones(2), op=dist.ReduceOp.SUM if rank else dist.ReduceOp.MAX)
    except RuntimeError as exc:
        assert "rank 0: [2] float32 max" in str(exc) and "rank 1: [2] float32 sum" in str(exc), \
            exc
    else:
        raise AssertionError("different reductions went unnoticed")


def dies(rank, size):
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(torcia.ones(2))


def raises(rank, size):
    if rank == 1:
        raise ValueError("rank 1 fails on purpose")
    dist.all_reduce(torcia.ones(2))  # never completes: rank 1 is gone


def point_to_point(rank, size):
    if rank == 0:
        dist.send(torcia.tensor([7.0, 8.0]), dst=1, tag=3)
        req = dist.isend(torcia.tensor([9.0]), dst=1)
        req.wait()
    else:
        buf = torcia.zeros(2)
        src = dist.recv(buf, src=None, tag=3)
        assert src == 0 and buf.tolist() == [7.0, 8.0]
        other = torcia.zeros(1)
        dist.irecv(other, src=0).wait()
        assert other.item() == 9.0


def objects(rank, size):
    got = [None] * size
    dist.all_gather_object(got, {"rank": rank, "t": torcia.tensor([rank]), "x": (1, "a")})
    assert [g["rank"] for g in got] == [0, 1]
    assert got[1]["t"].tolist() == [1] and got[0]["x"] == (1, "a")
    objs = [{"lr": 0.1}, [1, 2]] if rank == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"lr": 0.1}, [1, 2]]


def groups(rank, size):
    g = dist.new_group([1])
    if rank == 1:
        t = torcia.tensor([5.0])
        dist.all_reduce(t, group=g)
        assert t.item() == 5.0 and dist.get_world_size(g) == 1 and dist.get_rank(g) == 0
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER


def timeout(rank, size):
    dist.destroy_process_group()
    dist.init_process_group("mpi", timeout=1.0)
    if rank == 0:
        start = time.monotonic()
        try:
            dist.barrier()
        except RuntimeError as exc:
            assert "timed out" in str(exc) and time.monotonic() - start < 10, exc
            print("PASS timeout raised", flush=True)
        else:
            raise AssertionError("a barrier that rank 1 never joined returned")
    else:
        time.sleep(3)
    sys.stdout.flush()


def _model(seed=0):
    torcia.manual_seed(seed)
    return torcia.nn.Sequential(torcia.nn.Linear(4, 8), torcia.nn.Tanh(), torcia.nn.Linear(8, 1))


def ddp(rank, size):
    from torcia.distributed import DistributedDataParallel as DDP

    x = torcia.randn(8, 4, generator=torcia.Generator().manual_seed(1))
    y = torcia.randn(8, 1, generator=torcia.Generator().manual_seed(2))
    reference = _model()
    ((reference(x) - y) ** 2).mean().backward()
    model = DDP(_model(seed=rank), bucket_cap_mb=0.0001)  # rank 1's init is overwritten
    half = slice(4 * rank, 4 * rank + 4)
    ((model(x[half]) - y[half]) ** 2).mean().backward()
    for p, q in zip(model.module.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert list(model.state_dict())[0].startswith("module.")
    # no_sync accumulates locally; the next synced backward averages the accumulated sum
    model.zero_grad()
    with model.no_sync():
        ((model(x[half]) - y[half]) ** 2).mean().backward()
    ((model(x[half]) - y[half]) ** 2).mean().backward()
    for p, q in zip(model.module.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), 2 * q.grad.numpy(), rtol=1e-5, atol=1e-6)


def ddp_steps(rank, size):
    from torcia.distributed import DistributedDataParallel as DDP

    x = torcia.randn(8, 4, generator=torcia.Generator().manual_seed(1))
    y = torcia.randn(8, 1, generator=torcia.Generator().manual_seed(2))
    for make in (lambda p: torcia.optim.SGD(p, lr=0.1, momentum=0.9),
                 lambda p: torcia.optim.Adam(p, lr=0.01)):
        reference = _model()
        ref_opt = make(reference.parameters())
        model = DDP(_model(seed=rank))
        opt = make(model.parameters())
        share = 8 // size
        part = slice(share * rank, share * (rank + 1))
        for _ in range(4):
            ref_opt.zero_grad()
            ((reference(x) - y) ** 2).mean().backward()
            ref_opt.step()
            opt.zero_grad()
            ((model(x[part]) - y[part]) ** 2).mean().backward()
            opt.step()
        for p, q in zip(model.module.parameters(), reference.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)


def unused(rank, size):
    from torcia.distributed import DistributedDataParallel as DDP

    class TwoHeads(torcia.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torcia.nn.Linear(3, 1)
            self.unused = torcia.nn.Linear(3, 1)

        def forward(self, x):
            return self.used(x)

    x = torcia.ones(2, 3)
    model = DDP(TwoHeads())
    try:
        model(x).sum().backward()
    except RuntimeError as exc:
        assert "unused.weight" in str(exc) and "find_unused_parameters" in str(exc), exc
    else:
        raise AssertionError("an unused parameter went unnoticed")
    model = DDP(TwoHeads(), find_unused_parameters=True)
    model(x).sum().backward()
    assert model.module.unused.weight.grad.abs().sum().item() == 0.0


SCENARIOS = {f.__name__: f for f in (collectives, point_to_point, objects, groups, timeout,
                                     ddp, ddp_steps, unused, mismatch, mixed_dtypes, raises,
                                     dies)}

if __name__ == "__main__":
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    SCENARIOS[sys.argv[1]](rank, size)
    print(f"PASS {sys.argv[1]} rank {rank}", flush=True)
    if sys.argv[1] != "timeout":
        dist.barrier()
    dist.destroy_process_group()
