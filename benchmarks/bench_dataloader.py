"""Batches per second through torcia's DataLoader, beside PyTorch's where torch is installed.

Two workloads, each loaded in the main process, with 2 workers started each epoch, and with
2 persistent workers:

- ``transform``: every sample is a 3x136x136 uint8 image that ``__getitem__`` crops at random
  to 128x128, flips half the time, blurs (3x3 box) and normalises per channel: real work in
  the workers, batches of 32 x 192 KiB.
- ``large``: every sample is a 3x224x224 float32 array copied out of memory: little work,
  large batches (32 x 588 KiB), so the cost of moving batches between processes shows.
- ``tensors``: rows of in-memory tensors (10000 x 784 float32 and int64 labels), each library
  with its own ``TensorDataset``: the per-sample overhead of the framework itself.

Each row times ``--epochs`` whole epochs, worker start-up included, and the best of
``--repeat`` runs counts. Beside the wall-clock rate it reports the CPU time per batch of
all processes together (main and workers), which a busy machine disturbs far less. In the
first two workloads the same dataset object (which returns numpy arrays) feeds both
libraries, so the ratio compares the loaders, not the datasets. Run::

    python benchmarks/bench_dataloader.py [--epochs 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import torcia
import torcia.data

MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1) * 255
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1) * 255


class Transformed:
    """Random crop, random flip, a 3x3 box blur and normalisation of stored uint8 images."""

    def __init__(self, n=1024, size=136, crop=128):
        rng = np.random.default_rng(0)
        self.images = rng.integers(0, 256, (n, 3, size, size), dtype=np.uint8)
        self.labels = rng.integers(0, 10, n)
        self.crop = crop

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        # a per-sample stream: the same augmentation whichever worker loads sample i
        rng = np.random.default_rng(i)
        img = self.images[i]
        top, left = rng.integers(0, img.shape[1] - self.crop - 1, 2)
        # crop two pixels wider than the output, for the blur's border
        img = img[:, top:top + self.crop + 2, left:left + self.crop + 2].astype(np.float32)
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        rows = img[:, :-2] + img[:, 1:-1] + img[:, 2:]
        blurred = (rows[:, :, :-2] + rows[:, :, 1:-1] + rows[:, :, 2:]) / 9
        return (blurred - MEAN) / STD, int(self.labels[i])


class Large:
    """Large float32 samples, copied from memory."""

    def __init__(self, n=512):
        self.data = np.random.default_rng(0).standard_normal((8, 3, 224, 224), np.float32)
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.data[i % len(self.data)].copy(), i


def tensors(library):
    """Rows of in-memory tensors: ``library``'s own TensorDataset."""
    rng = np.random.default_rng(0)
    x, y = rng.random((10000, 784), dtype=np.float32), rng.integers(0, 10, 10000)
    return library.utils.data.TensorDataset(library.from_numpy(x), library.from_numpy(y))


# name: (dataset factory, batch size, whether the factory takes the library)
WORKLOADS = {"transform": (Transformed, 32, False), "large": (Large, 32, False),
             "tensors": (tensors, 64, True)}


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that have been waited for (workers,
    once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def cost_per_batch(loader_cls, dataset, options: dict, epochs: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of all processes) per batch."""
    loader = loader_cls(dataset, shuffle=True, **options)
    cpu = _cpu_seconds()
    start = time.perf_counter()
    count = 0
    for _ in range(epochs):
        for _batch in loader:
            count += 1
    elapsed = time.perf_counter() - start
    del loader  # persistent workers stop here: outside the wall time, inside the CPU time
    return elapsed / count, (_cpu_seconds() - cpu) / count


def measure(libraries: dict, datasets: dict, options: dict, epochs: int, repeat: int) -> dict:
    """Best (wall, CPU) seconds per batch of each library. Runs alternate between libraries,
    so that a change in the machine's load falls on both alike."""
    best = {lib: (float("inf"), float("inf")) for lib in libraries}
    for _ in range(repeat):
        for lib, loader_cls in libraries.items():
            wall, cpu = cost_per_batch(loader_cls, datasets[lib], options, epochs)
            best[lib] = (min(best[lib][0], wall), min(best[lib][1], cpu))
    return best


#: (label, DataLoader options): in the main process, workers started each epoch, and
#: workers kept between epochs (their start-up counts once per run of ``--epochs``).
CONFIGS = [
    ("0", {"num_workers": 0}),
    ("2", {"num_workers": 2}),
    ("2 persist", {"num_workers": 2, "persistent_workers": True}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    try:
        import torch
        import torch.utils.data
    except ImportError:
        torch = None

    libraries = {"torcia": torcia.data.DataLoader}
    modules = {"torcia": torcia}
    # One thread each, set after torcia's plugins load: a native plugin may set the thread
    # count of an OpenMP runtime that torch shares, which made torch's loading 10x slower.
    torcia.plugins.manager()
    torcia.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
        libraries["torch"] = torch.utils.data.DataLoader
        modules["torch"] = torch

    print(f"{'workload':<10} {'workers':>9} | {'torcia b/s':>10} {'torch b/s':>9} {'ratio':>5} |"
          f" {'torcia cpu':>10} {'torch cpu':>9} {'ratio':>5}")
    for name, (make_dataset, batch_size, per_library) in WORKLOADS.items():
        if per_library:
            datasets = {lib: make_dataset(modules[lib]) for lib in libraries}
        else:
            datasets = dict.fromkeys(libraries, make_dataset())
        for lib, loader_cls in libraries.items():  # first-use costs (imports, plugins)
            next(iter(loader_cls(datasets[lib], batch_size=batch_size)))
        for label, options in CONFIGS:
            options = {"batch_size": batch_size, **options}
            best = measure(libraries, datasets, options, args.epochs, args.repeat)
            (wall, cpu), theirs = best["torcia"], best.get("torch")
            row = f"{name:<10} {label:>9} | {1 / wall:10.1f} "
            if theirs:
                row += f"{1 / theirs[0]:9.1f} {theirs[0] / wall:5.2f} | "
                row += f"{1e3 * cpu:10.2f} {1e3 * theirs[1]:9.2f} {theirs[1] / cpu:5.2f}"
            else:
                row += f"{'-':>9} {'-':>5} | {1e3 * cpu:10.2f} {'-':>9} {'-':>5}"
            print(row)
    print("b/s: batches per second (wall clock); cpu: CPU milliseconds per batch, all "
          "processes together;\nratio: torcia's advantage (torch's time / torcia's time; "
          "above 1: torcia is faster or cheaper)")


if __name__ == "__main__":
    main()
