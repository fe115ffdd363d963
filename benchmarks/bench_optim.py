"""Optimizer step time: torcia's multi-tensor kernel path and per-parameter path against
PyTorch's foreach and single-tensor implementations, in one run.

Two parameter sets: an MLP's (784-256-128-10, six tensors, ~235k floats) and many small
tensors (200 of 64 floats, where per-parameter overhead dominates). Gradients are set once;
each timing is ``optimizer.step()`` alone, best of several repeats.

    python benchmarks/bench_optim.py [--number 50] [--repeat 5] [--threads 1]

With torcia-cpu installed its native ``sgd_step`` and ``adam_step`` are timed; run with
``TORCIA_DISABLE_PLUGINS=cpu`` for torcia-optim's NumPy kernels.
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import torcia

try:
    import torch
except ImportError:
    torch = None

SHAPES = {
    "mlp": [(256, 784), (256,), (128, 256), (128,), (10, 128), (10,)],
    "200 small": [(64,)] * 200,
}
OPTIMIZERS = {
    "SGD momentum": ("SGD", {"lr": 0.01, "momentum": 0.9}),
    "Adam": ("Adam", {"lr": 1e-3}),
    "AdamW amsgrad": ("AdamW", {"lr": 1e-3, "amsgrad": True}),
    "RMSprop centered": ("RMSprop", {"lr": 1e-3, "centered": True}),
    "Adagrad": ("Adagrad", {"lr": 1e-2}),
}


def _optimizer(lib, name, options, shapes, foreach):
    rng = np.random.default_rng(0)
    params = []
    for shape in shapes:
        p = lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        p.grad = lib.tensor(rng.standard_normal(shape).astype(np.float32))
        params.append(p)
    return getattr(lib.optim, name)(params, foreach=foreach, **options)


def _time(opt, number, repeat):
    opt.step()  # state made outside the timing
    return min(timeit.repeat(opt.step, number=number, repeat=repeat)) / number


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="PyTorch's intra-op threads (NumPy's ufuncs use one)")
    args = parser.parse_args(argv)
    if torch is not None:
        torch.set_num_threads(args.threads)
    columns = ["torcia kernel", "torcia per-param"]
    if torch is not None:
        columns += ["torch foreach", "torch single", "ratio kernel/foreach"]
    backend = torcia.device("cpu").backend
    ops = ["sgd_step", "adam_step", "rmsprop_step", "adagrad_step"]
    print("kernel providers: " + ", ".join(f"{op} from {backend.kernel_providers[op]!r}"
                                          for op in ops))
    print(f"{'params':<10} {'optimizer':<18} " + " ".join(f"{c:>20}" for c in columns))
    for set_name, shapes in SHAPES.items():
        for label, (name, options) in OPTIMIZERS.items():
            row = [_time(_optimizer(torcia, name, options, shapes, f), args.number, args.repeat)
                   for f in (True, False)]
            if torch is not None:
                row += [_time(_optimizer(torch, name, options, shapes, f), args.number,
                              args.repeat) for f in (True, False)]
            cells = [f"{t * 1e6:17.1f} us" for t in row]
            if torch is not None:
                cells.append(f"{row[0] / row[2]:19.2f}x")
            print(f"{set_name:<10} {label:<18} " + " ".join(cells))


if __name__ == "__main__":
    main()
