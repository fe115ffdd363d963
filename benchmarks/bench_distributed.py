"""Data parallelism at scale: per-rank memory of DDP against FSDP, and DDP's step time
against PyTorch's gloo DDP, on a model of 21M parameters.

1. Memory, for DDP and FSDP FULL_SHARD (each residual block its own unit) on 1, 2 and 4
   ranks started by ``torcia-run``: each rank builds the model, takes two Adam steps and
   reports (a) the bytes of the parameters, gradients and Adam state it holds (exact: the
   sum over its tensors), and (b) the peak of the memory allocated during the two steps
   (``tracemalloc``, which NumPy reports its buffers to): the state held, activations and
   a unit's gathered parameters and gradients. The table gives the largest rank's
   figures.
2. Time: the mean step (forward, backward with the gradient all-reduce, Adam) of DDP on
   2 processes, torcia (MPI joined through the rendezvous) against PyTorch (gloo, the
   processes started by ``torch.multiprocessing.spawn``), both single-threaded per
   process, in this one run; the ratio is torcia's time over PyTorch's.

    python benchmarks/bench_distributed.py [--steps 10] [--width 2048] [--skip-memory]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def _model(nn, width, depth):
    """``depth`` residual blocks of width ``width``, a head: 21M parameters at 2048 x 5."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(width, width)

        def forward(self, x):
            return x + self.fc(x).relu()

    return nn.Sequential(*[Block() for _ in range(depth)], nn.Linear(width, 16)), Block


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----- workers ------------------------------------------------------------------------

def _report(result):
    # one write per line: the ranks share the launcher's output
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


def memory_worker(mode, width, depth, batch):
    import tracemalloc

    tracemalloc.start()
    import torcia
    import torcia.distributed as dist
    from torcia.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torcia.distributed.fsdp.wrap import ModuleWrapPolicy

    dist.init_process_group("gloo")
    torcia.manual_seed(0)
    net, block = _model(torcia.nn, width, depth)
    if mode == "ddp":
        model = dist.DistributedDataParallel(net)
    else:
        model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy({block}))
    opt = torcia.optim.Adam(model.parameters(), lr=1e-4)
    x = torcia.randn(batch, width)
    # training's peak, not construction's (every rank builds the whole model first)
    tracemalloc.reset_peak()
    for _ in range(2):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    held = sum(p._data.nbytes + (p.grad._data.nbytes if p.grad is not None else 0)
               for p in model.parameters())
    held += sum(v._data.nbytes for s in opt.state.values() for v in s.values()
                if isinstance(v, torcia.Tensor) and v.ndim)
    _, peak = tracemalloc.get_traced_memory()
    params = sum(p.numel() for p in net.parameters()) if mode == "ddp" else None
    _report({"rank": dist.get_rank(), "held": held, "peak": peak, "params": params})
    dist.destroy_process_group()


def torcia_time_worker(width, depth, batch, steps):
    import torcia
    import torcia.distributed as dist

    dist.init_process_group("gloo")
    torcia.manual_seed(0)
    net, _ = _model(torcia.nn, width, depth)
    model = dist.DistributedDataParallel(net)
    opt = torcia.optim.Adam(model.parameters(), lr=1e-4)
    x = torcia.randn(batch, width)
    _report({"rank": dist.get_rank(), "step": _time_steps(model, opt, x, steps, dist.barrier)})
    dist.destroy_process_group()


def _time_steps(model, opt, x, steps, barrier):
    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    for _ in range(2):  # warm-up: buffers, buckets, first-touch of the optimizer state
        step()
    barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    barrier()
    return (time.perf_counter() - start) / steps


def _torch_rank(rank, world, port, width, depth, batch, steps, out):
    import torch
    import torch.distributed as tdist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    tdist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    net, _ = _model(torch.nn, width, depth)
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width)
    seconds = _time_steps(model, opt, x, steps, tdist.barrier)
    if rank == 0:
        with open(out, "w") as f:
            f.write(str(seconds))
    tdist.destroy_process_group()


def torch_time(width, depth, batch, steps):
    import tempfile

    import torch.multiprocessing as tmp

    out = os.path.join(tempfile.mkdtemp(), "torch_step")
    tmp.spawn(_torch_rank, args=(2, _free_port(), width, depth, batch, steps, out), nprocs=2)
    with open(out) as f:
        return float(f.read())


# ----- the driver -----------------------------------------------------------------------

def _launch(n, args, *worker_args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torcia.distributed.run", "--standalone", "--nproc-per-node",
           str(n), HERE, "--width", str(args.width), "--depth", str(args.depth), "--batch",
           str(args.batch), "--steps", str(args.steps), "--worker", *map(str, worker_args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return [json.loads(line[7:]) for line in proc.stdout.splitlines()
            if line.startswith("RESULT ")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-time", action="store_true")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    shape = (args.width, args.depth, args.batch)
    if args.worker:
        kind, *rest = args.worker
        if kind == "memory":
            memory_worker(rest[0], *shape)
        else:
            torcia_time_worker(*shape, args.steps)
        return
    mb = 1 / 2 ** 20
    if not args.skip_memory:
        print("per-rank memory, the largest rank (MiB): parameters + gradients + Adam state "
              "held; peak of the allocations during two training steps")
        print(f"{'ranks':>5} {'DDP held':>9} {'FSDP held':>10} {'ratio':>6} "
              f"{'DDP peak':>9} {'FSDP peak':>10} {'ratio':>6}")
        params = None
        for n in (1, 2, 4):
            ddp = _launch(n, args, "memory", "ddp")
            fsdp = _launch(n, args, "memory", "fsdp")
            params = ddp[0]["params"]
            dh, fh = max(r["held"] for r in ddp), max(r["held"] for r in fsdp)
            dp, fp = max(r["peak"] for r in ddp), max(r["peak"] for r in fsdp)
            print(f"{n:>5} {dh * mb:>9.1f} {fh * mb:>10.1f} {fh / dh:>6.2f} "
                  f"{dp * mb:>9.1f} {fp * mb:>10.1f} {fp / dp:>6.2f}", flush=True)
        print(f"(model: {params / 1e6:.1f}M parameters, float32)\n")
    if not args.skip_time:
        mine = max(r["step"] for r in _launch(2, args, "time"))
        try:
            theirs = torch_time(*shape, args.steps)
        except ImportError:
            theirs = None
        print("DDP step on 2 processes (forward, backward + all-reduce, Adam), seconds:")
        line = f"torcia {mine:.3f}"
        if theirs is not None:
            line += f"  PyTorch gloo {theirs:.3f}  ratio torcia/PyTorch {mine / theirs:.2f}"
        else:
            line += "  (PyTorch not installed)"
        print(line)


if __name__ == "__main__":
    main()
