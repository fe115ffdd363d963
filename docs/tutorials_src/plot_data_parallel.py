"""
Data-parallel training with torcia-run
======================================

``torcia-run --nproc-per-node N script.py`` starts N processes of a script, as ``torchrun``
does, with torchrun's options and environment (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``...). In the script, each process joins the process group, takes its share
of every epoch (:class:`torcia.data.DistributedSampler`), and
:class:`torcia.distributed.DistributedDataParallel` averages the gradients across
processes in ``backward``, so every rank keeps the same weights.

The script below is written to a file and run on 2 processes; each rank logs its losses,
which we plot.
"""

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt

SCRIPT = textwrap.dedent('''
    import json, sys
    import torcia
    import torcia.distributed as dist
    from torcia.data import DataLoader, DistributedSampler
    from torcia.distributed import DistributedDataParallel
    from torcia.vision import transforms
    from torcia.vision.datasets import Digits
    from torcia.vision.models import small_cnn

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    torcia.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts them too)
    norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    train = Digits(train=True, transform=norm)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    model = DistributedDataParallel(small_cnn())
    optimizer = torcia.optim.Adam(model.parameters(), lr=2e-3)
    log = {"rank": rank, "samples": 0, "losses": []}
    for epoch in range(3):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for x, y in loader:
            optimizer.zero_grad()
            loss = torcia.nn.functional.cross_entropy(model(x), y)
            loss.backward()  # gradients are all-reduced here
            optimizer.step()
            log["losses"].append(loss.item())
            log["samples"] += len(y)
    # the ranks' weights agree: compare a checksum across ranks
    checksum = torcia.tensor([sum(p.sum().item() for p in model.parameters())])
    gathered = [torcia.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    log["checksums"] = [g.item() for g in gathered]
    with open(sys.argv[1].format(rank=rank), "w") as f:
        json.dump(log, f)
    dist.destroy_process_group()
''')

workdir = Path(tempfile.mkdtemp())
(workdir / "train.py").write_text(SCRIPT)
launcher = shutil.which("torcia-run", path=str(Path(sys.executable).parent)) or "torcia-run"
command = [launcher, "--nproc-per-node", "2", str(workdir / "train.py"),
           str(workdir / "rank{rank}.json")]
result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=workdir)
if result.returncode:
    raise RuntimeError(f"torcia-run failed:\n{result.stdout}\n{result.stderr}")

logs = [json.loads((workdir / f"rank{r}.json").read_text()) for r in range(2)]
for log in logs:
    print(f"rank {log['rank']}: {log['samples']} samples, {len(log['losses'])} steps, "
          f"final loss {log['losses'][-1]:.3f}")
print("weight checksums on the ranks:", logs[0]["checksums"])

# %%
# Each rank saw half of the data, yet their losses fall together: they train one model.
fig, ax = plt.subplots(figsize=(7, 3))
for log in logs:
    ax.plot(log["losses"], label=f"rank {log['rank']}", alpha=0.8)
ax.set(xlabel="step", ylabel="loss on the rank's batch", yscale="log")
ax.legend()
fig.tight_layout()
