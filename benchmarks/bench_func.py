"""Per-sample gradients of a small CNN: ``vmap(grad(loss))`` against a loop of backward
passes. Run: ``python benchmarks/bench_func.py [--batch 64]``.

torcia's vmap has no batching rules yet (it runs the function per entry), so the ratio
shows the overhead of the transform over the plain loop rather than a speed-up.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torcia
import torcia.nn.functional as F
from torcia import nn
from torcia.func import functional_call, grad, vmap


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    torcia.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 26 * 26, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torcia.randn(args.batch, 1, 28, 28)
    y = torcia.randint(0, 10, (args.batch,))

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    vmap(grad(loss), in_dims=(None, 0, 0))(params, x[:2], y[:2])  # warm-up
    start = time.perf_counter()
    vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    t_vmap = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(args.batch):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
    t_loop = time.perf_counter() - start
    print(f"batch {args.batch}: vmap(grad) {t_vmap * 1e3:.1f} ms, loop {t_loop * 1e3:.1f} ms, "
          f"loop/vmap = {t_loop / t_vmap:.2f}")


if __name__ == "__main__":
    main()
