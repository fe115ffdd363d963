"""A training script for torcia-run's restart tests: DDP on a small model, a checkpoint
after every step (rank 0 writes it atomically), resumed from when the workers restart.

    torcia-run ... elastic_train.py CKPT_DIR STEPS KILL_RANK KILL_STEP

In the first attempt, rank KILL_RANK kills itself (SIGKILL) before step KILL_STEP (-1: no
rank does). Rank 0 writes the final parameters to CKPT_DIR/final.json. The data of a step
depends only on the step and the rank, so an interrupted and resumed job ends with the
parameters of an uninterrupted one."""

import json
import os
import signal
import sys

import torcia
import torcia.distributed as dist
from torcia.distributed import DistributedDataParallel as DDP

folder, steps, kill_rank, kill_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4])
dist.init_process_group("gloo")
rank = dist.get_rank()
model = torcia.nn.Sequential(torcia.nn.Linear(4, 8), torcia.nn.Tanh(), torcia.nn.Linear(8, 1))
with torcia.no_grad():
    for i, p in enumerate(model.parameters()):
        p.copy_(torcia.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1))
opt = torcia.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
path = os.path.join(folder, "checkpoint.pt")
start = 0
if os.path.exists(path):
    state = torcia.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    start = state["step"]
    print(f"rank {rank} resumes at step {start}", flush=True)
ddp = DDP(model)
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
for step in range(start, steps):
    if attempt == 0 and rank == kill_rank and step == kill_step:
        os.kill(os.getpid(), signal.SIGKILL)
    x = torcia.arange(16.0).reshape(4, 4).mul(0.1 * (step + 1)).sin() + rank
    y = x.sum(dim=1, keepdim=True).cos()
    opt.zero_grad()
    ((ddp(x) - y) ** 2).mean().backward()
    opt.step()
    if rank == 0:
        torcia.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step + 1},
                    path + ".tmp")
        os.replace(path + ".tmp", path)
    dist.barrier()
if rank == 0:
    flat = torcia.cat([p.detach().reshape(-1) for p in model.parameters()])
    with open(os.path.join(folder, "final.json"), "w") as f:
        json.dump(flat.tolist(), f)
dist.destroy_process_group()
