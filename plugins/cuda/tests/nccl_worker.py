"""One rank of an "nccl" process group on the fake GPU (tests/fake_cupy.py), started by
test_nccl.py with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); argv[1]
names the scenarios to run, comma-separated, in one process group (starting processes is
what takes time). Every rank checks its own results; a failure exits non-zero.
"""

import datetime
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import fake_cupy  # noqa: E402

fake_cupy.install(count=1)

from torcia_cuda import nccl  # noqa: E402

import torcia  # noqa: E402
import torcia.distributed as dist  # noqa: E402

# the fake's device memory is NumPy's: an array's address is .ctypes.data, not .data.ptr
nccl._ptr = lambda arr: arr.ctypes.data
TIMEOUT = float(os.environ.get("NCCL_TEST_TIMEOUT", "30"))
Op = dist.ReduceOp


def cuda(values, dtype=None):
    return torcia.tensor(values, dtype=dtype, device="cuda")


def expect(t, want, what):
    assert t.device.type == "cuda", (what, t.device)
    got = t.cpu().tolist()
    assert got == want, f"{what}: got {got}, want {want}"


def collectives(rank, size):
    total = size * (size + 1) // 2
    for op, want in ((Op.SUM, total), (Op.AVG, total / size), (Op.MAX, size), (Op.MIN, 1),
                     (Op.PRODUCT, float(np.prod(np.arange(1, size + 1))))):
        t = cuda([rank + 1.0])
        dist.all_reduce(t, op=op)
        expect(t, [want], op)
    for dtype, op, values, want in (
        (torcia.float16, Op.SUM, [rank + 1.0], [total]),
        (torcia.bfloat16, Op.SUM, [rank + 1.0], [total]),
        (torcia.int64, Op.AVG, [rank + 1], [total // size]),
        (torcia.bool, Op.MAX, [rank == 0, False], [True, False]),
        (torcia.bool, Op.MIN, [True, rank == 0], [True, False]),
    ):
        t = cuda(values, dtype)
        dist.all_reduce(t, op=op)
        assert t.dtype is dtype
        expect(t, want, (dtype, op))
    b = torcia.arange(4.0, device="cuda") if rank == 0 else torcia.zeros(4, device="cuda")
    dist.broadcast(b, src=0)
    expect(b, [0.0, 1.0, 2.0, 3.0], "broadcast")
    r = cuda([rank + 1.0])
    dist.reduce(r, dst=size - 1)
    if rank == size - 1:
        expect(r, [total], "reduce")
    outs = [torcia.zeros(2, device="cuda") for _ in range(size)]
    dist.all_gather(outs, cuda([rank, -rank]).float())
    assert [o.tolist() for o in outs] == [[k, -k] for k in range(size)], "all_gather"
    cat = torcia.zeros(2 * size, device="cuda")
    dist.all_gather_into_tensor(cat, cuda([rank, rank]).float())
    expect(cat, [float(k) for k in range(size) for _ in range(2)], "all_gather_into_tensor")
    g = [torcia.zeros(1, device="cuda") for _ in range(size)] if rank == 0 else None
    dist.gather(cuda([rank * 5.0]), g, dst=0)
    if rank == 0:
        assert [x.item() for x in g] == [k * 5.0 for k in range(size)], "gather"
    s = torcia.zeros(2, device="cuda")
    src = size - 1
    dist.scatter(s, [cuda([2.0 * k, 2.0 * k + 1]) for k in range(size)] if rank == src else None,
                 src=src)
    expect(s, [2.0 * rank, 2.0 * rank + 1], "scatter")
    rs = torcia.zeros(1, device="cuda")
    dist.reduce_scatter(rs, [cuda([100.0 * k + rank]) for k in range(size)])
    expect(rs, [100.0 * rank * size + total - size], "reduce_scatter")
    outs = [torcia.zeros(1, device="cuda") for _ in range(size)]
    dist.all_to_all(outs, [cuda([rank * 10.0 + j]) for j in range(size)])
    assert [o.item() for o in outs] == [k * 10.0 + rank for k in range(size)], "all_to_all"
    nc = torcia.zeros(3, 2, device="cuda").t()  # not contiguous: written back in place
    if rank == 0:
        nc += torcia.arange(6.0, device="cuda").reshape(2, 3)
    dist.broadcast(nc, src=0)
    expect(nc, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], "non-contiguous broadcast")
    work = dist.all_reduce(torcia.ones(3, device="cuda"), async_op=True)
    assert work.wait() is True and work.is_completed()
    dist.barrier()


def point_to_point(rank, size):
    right, left = (rank + 1) % size, (rank - 1) % size
    got = torcia.zeros(2, device="cuda")
    if rank % 2 == 0:  # NCCL's send waits for its receive: pair them up around the ring
        dist.send(cuda([rank, 7.0]), dst=right)
        assert dist.recv(got, src=left) == left
    else:
        assert dist.recv(got, src=left) == left
        dist.send(cuda([rank, 7.0]), dst=right)
    expect(got, [float(left), 7.0], "send/recv")
    other = torcia.zeros(1, device="cuda")
    peer = rank ^ 1  # pairs (0, 1), (2, 3)
    if rank % 2 == 0:
        work = dist.isend(cuda([rank * 3.0]), dst=peer)
    else:
        work = dist.irecv(other, src=peer)
        assert not work.is_completed() or other.item() == peer * 3.0
    work.wait()
    if rank % 2:
        expect(other, [peer * 3.0], "isend/irecv")
    try:
        dist.recv(other)
    except ValueError as exc:
        assert "cannot receive from any rank" in str(exc), exc
    else:
        raise AssertionError("a receive from any rank went through")


def objects(rank, size):
    got = [None] * size
    dist.all_gather_object(got, {"rank": rank, "t": torcia.tensor([rank])})
    assert [g["rank"] for g in got] == list(range(size)) and got[1]["t"].tolist() == [1]
    objs = [{"lr": 0.1}, [1, 2]] if rank == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"lr": 0.1}, [1, 2]]


def groups(rank, size):
    odd = dist.new_group([r for r in range(size) if r % 2])
    if rank % 2:
        t = cuda([float(rank)])
        dist.all_reduce(t, group=odd)
        expect(t, [float(sum(range(1, size, 2)))], "sub-group all_reduce")
        assert dist.get_world_size(odd) == size // 2
    else:
        assert odd is dist.GroupMember.NON_GROUP_MEMBER
    t = cuda([1.0])
    dist.all_reduce(t)  # the world group still works beside it
    expect(t, [float(size)], "world all_reduce")


def ddp(rank, size):
    from torcia.distributed import DistributedDataParallel as DDP

    gen = torcia.Generator().manual_seed(1)
    x, y = torcia.randn(8, 4, generator=gen), torcia.randn(8, 1, generator=gen)

    def net(seed):
        torcia.manual_seed(seed)
        layers = [torcia.nn.Linear(4, 8), torcia.nn.Tanh(), torcia.nn.Linear(8, 1)]
        return torcia.nn.Sequential(*layers)

    reference = net(0)
    ref_opt = torcia.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    model = DDP(net(rank).to("cuda"), bucket_cap_mb=0.0001)  # rank 0's init wins
    opt = torcia.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    part = slice(8 // size * rank, 8 // size * (rank + 1))
    xs, ys = x[part].cuda(), y[part].cuda()
    for _ in range(3):
        ref_opt.zero_grad()
        ((reference(x) - y) ** 2).mean().backward()
        ref_opt.step()
        opt.zero_grad()
        ((model(xs) - ys) ** 2).mean().backward()
        opt.step()
    for p, q in zip(model.module.parameters(), reference.parameters()):
        assert p.device.type == "cuda" and p.grad.device.type == "cuda"
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def mismatch(rank, size):
    try:
        dist.all_reduce(torcia.ones(3 if rank == 0 else 4, device="cuda"))
    except RuntimeError as exc:
        assert "rank 0: [3] float32" in str(exc) and "rank 1: [4] float32" in str(exc), exc
    else:
        raise AssertionError("mismatched shapes went unnoticed")


def cpu_tensor(rank, size):
    try:
        dist.all_reduce(torcia.ones(2))
    except RuntimeError as exc:
        assert ("tensor is on cpu; the 'nccl' process group handles cuda:0 tensors (move it "
                "with .cuda(), or use the mpi backend)") in str(exc), exc
    else:
        raise AssertionError("a CPU tensor went to NCCL")


def _leave_after_the_others(rank, survivors):
    """Exit, rank 0 (whose process serves the store the others read) last."""
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          timeout=10)
    store.add("survivors", 1)
    deadline = time.monotonic() + 10
    while rank == 0 and store.add("survivors", 0) < survivors:
        assert time.monotonic() < deadline, "the other survivors did not report"
        time.sleep(0.05)
    os._exit(0)  # the group is aborted; skip the final barrier


def dies(rank, size):
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(torcia.ones(2, device="cuda"))
    except RuntimeError as exc:
        took = time.monotonic() - start
        assert "rank 1 stopped responding" in str(exc) and took < TIMEOUT + 5, (took, exc)
        print(f"PASS dies rank {rank}: {exc}", flush=True)
        _leave_after_the_others(rank, size - 1)
    raise AssertionError("an all_reduce with a dead peer returned")


def raises(rank, size):
    if rank == 1:
        raise ValueError("bad batch")  # uncaught: the process exits
    start = time.monotonic()
    try:
        dist.all_reduce(torcia.ones(2, device="cuda"))
    except RuntimeError as exc:
        took = time.monotonic() - start
        # within a beat or two, well before the timeout
        assert "rank 1 raised ValueError: bad batch" in str(exc) and took < 5, (took, exc)
        print(f"PASS raises rank {rank}: {exc}", flush=True)
        _leave_after_the_others(rank, size - 1)
    raise AssertionError("an all_reduce with a failed peer returned")


SCENARIOS = {f.__name__: f for f in (collectives, point_to_point, objects, groups, ddp,
                                     mismatch, cpu_tensor, dies, raises)}

if __name__ == "__main__":
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=TIMEOUT))
    assert dist.get_backend() == "nccl" and dist.is_nccl_available()
    rank, size = dist.get_rank(), dist.get_world_size()
    for name in sys.argv[1].split(","):
        SCENARIOS[name](rank, size)
        print(f"PASS {name} rank {rank}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
