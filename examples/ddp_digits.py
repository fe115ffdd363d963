"""The demo's digits classifier trained data-parallel: one process per rank, each on its
share of every epoch, gradients averaged by DistributedDataParallel.

    torcia-run --nproc-per-node 2 examples/ddp_digits.py --epochs 8

Needs torcia-vision (the digits data and the model), torcia-distributed and torcia-mpi
(with an MPI, e.g. ``pip install mpich``). Rank 0 reports the held-out accuracy.
"""

from __future__ import annotations

import argparse

import torcia
import torcia.distributed as dist
from torcia.data import DataLoader, DistributedSampler
from torcia.distributed import DistributedDataParallel
from torcia.vision import transforms
from torcia.vision.datasets import Digits
from torcia.vision.models import small_cnn


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    torcia.manual_seed(args.seed)  # the same initial model everywhere (DDP broadcasts it too)
    to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    train, test = Digits(train=True, transform=to_tensor), Digits(train=False, transform=to_tensor)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    model = DistributedDataParallel(small_cnn())
    opt = torcia.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = torcia.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
            count += len(y)
        summary = torcia.tensor([total, float(count)])
        dist.all_reduce(summary)
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {summary[0].item() / summary[1].item():.4f}")
    if rank == 0:
        # the wrapped module: DDP's forward is collective and the other ranks are done
        net = model.module.eval()
        with torcia.no_grad():
            correct = sum((net(x).argmax(1) == y).sum().item()
                          for x, y in DataLoader(test, batch_size=256))
        print(f"test accuracy {correct / len(test):.4f} with {world} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
