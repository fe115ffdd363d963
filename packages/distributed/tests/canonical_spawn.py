"""PyTorch's canonical CPU data-parallel script, written against ``torch``: run it with
``python -m torcia.compat canonical_spawn.py WORLD PORT`` (or with PyTorch installed, as
``python canonical_spawn.py WORLD PORT``). Rank 0 prints the all-reduced sum of the ranks
and the trained weights."""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[2]
    dist.init_process_group("gloo", rank=rank, world_size=world)
    layer = nn.Linear(4, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.linspace(-1.0, 1.0, 4).reshape(1, 4))
        layer.bias.fill_(0.5)
    model = DDP(layer)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.arange(32.0).reshape(8, 4).sin() + rank
    y = torch.arange(8.0).reshape(8, 1).cos() * (rank + 1)
    for _ in range(5):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    if rank == 0:
        params = torch.cat([model.module.weight.detach().reshape(-1), model.module.bias.detach()])
        print("RESULT", world, t.item(), " ".join(f"{v:.7f}" for v in params.tolist()),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1])
    mp.spawn(run, args=(world,), nprocs=world)
