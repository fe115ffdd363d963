"""
Distributed training: spawn, sharded models and checkpoints
===========================================================

The way PyTorch users start data-parallel training on CPU runs on torcia as it is:
:func:`torcia.multiprocessing.spawn` starts the processes, each joins the process group
with ``init_process_group("gloo", rank=rank, world_size=world)`` through ``env://``
(``MASTER_ADDR``/``MASTER_PORT``), and the collectives run on MPI, which torcia-mpi joins
the independently started processes into.

Here the model is sharded with :func:`torcia.distributed.fsdp.fully_shard`: each of the 2
ranks keeps half of every parameter, of its gradient and of the Adam state, gathering a
block's parameters only while the block runs. The ranks then save a *distributed
checkpoint* (:mod:`torcia.distributed.checkpoint`): each writes its own shards, and the
metadata says where every piece of every tensor lies, so that a process with another
sharding (here: one process, no sharding at all) can load it.

The script is written to a file and run with ``python`` (``spawn`` starts each process
by importing the script, so its functions must live in a file).
"""

import json
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt

import torcia
import torcia.distributed.checkpoint as dcp

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import torcia
    import torcia.distributed as dist
    import torcia.distributed.checkpoint as dcp
    import torcia.multiprocessing as mp
    from torcia.distributed.checkpoint.state_dict import get_state_dict
    from torcia.distributed.fsdp import fully_shard


    def make_model():
        torcia.manual_seed(0)
        blocks = [torcia.nn.Sequential(torcia.nn.Linear(32, 32), torcia.nn.Tanh())
                  for _ in range(3)]
        return torcia.nn.Sequential(*blocks, torcia.nn.Linear(32, 1))


    def data(rank, step):
        g = torcia.Generator().manual_seed(1000 * rank + step)
        x = torcia.randn(64, 32, generator=g)
        return x, x[:, :4].sum(dim=1, keepdim=True).sin()


    def run(rank, world, port, folder):
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = make_model()
        whole = sum(p.numel() for p in model.parameters())
        for block in model[:-1]:
            fully_shard(block)      # each block a unit: gathered only while it runs
        fully_shard(model)          # the rest (the head)
        held = sum(p.to_local().numel() for p in model.parameters())
        opt = torcia.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for step in range(60):
            x, y = data(rank, step)
            loss = torcia.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()         # gradients reduce-scattered into the shards
            opt.step()              # each rank updates its half
            losses.append(loss.item())
        model_sd, optim_sd = get_state_dict(model, opt)
        dcp.save({"model": model_sd, "optim": optim_sd, "step": 60},
                 checkpoint_id=os.path.join(folder, "checkpoint"))
        with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
            json.dump({"losses": losses, "held": held, "whole": whole,
                       "placement": str(model[0][0].weight.placements)}, f)
        dist.destroy_process_group()


    if __name__ == "__main__":
        mp.spawn(run, args=(2, sys.argv[1], sys.argv[2]), nprocs=2)
''')

workdir = Path(tempfile.mkdtemp())
(workdir / "train.py").write_text(SCRIPT)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
result = subprocess.run([sys.executable, str(workdir / "train.py"), port, str(workdir)],
                        capture_output=True, text=True, timeout=300, cwd=workdir)
if result.returncode:
    raise RuntimeError(f"training failed:\n{result.stdout}\n{result.stderr}")

logs = [json.loads((workdir / f"rank{r}.json").read_text()) for r in range(2)]
for r, log in enumerate(logs):
    print(f"rank {r}: holds {log['held']} of the model's {log['whole']} parameters "
          f"({log['placement']}), final loss {log['losses'][-1]:.4f}")
print("checkpoint files:", sorted(p.name for p in (workdir / "checkpoint").iterdir()))

# %%
# Each rank trained on its own batches; the gradients were averaged, so both trained one
# model, of which each held half.
fig, ax = plt.subplots(figsize=(7, 3))
for r, log in enumerate(logs):
    ax.plot(log["losses"], label=f"rank {r}", alpha=0.8)
ax.set(xlabel="step", ylabel="loss on the rank's batch", yscale="log")
ax.legend()
fig.tight_layout()

# %%
# Resuming somewhere else
# -----------------------
# One process, no sharding: the plain model's state dict is the target, and
# :func:`torcia.distributed.checkpoint.load` fills each of its tensors with the pieces the
# two ranks wrote (the keys are the model's own names; the optimizer's state is keyed by
# them too).
namespace = {}
exec(compile(SCRIPT.split("def run(")[0], "train.py", "exec"), namespace)
model = namespace["make_model"]()
opt = torcia.optim.Adam(model.parameters(), lr=3e-3)
state = {"model": model.state_dict(), "step": 0}
dcp.load(state, checkpoint_id=workdir / "checkpoint")
model.load_state_dict(state["model"])
x, y = namespace["data"](0, 59)
with torcia.no_grad():
    resumed = torcia.nn.functional.mse_loss(model(x), y).item()
print(f"resumed at step {state['step']}; the loss of rank 0's last batch, before and after "
      f"its last update: {logs[0]['losses'][-1]:.4f}, now {resumed:.4f}")
