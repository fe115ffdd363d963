"""Per-sample gradients of a small CNN: ``vmap(grad(loss))`` against a loop of backward
passes. Run: ``python benchmarks/bench_func.py [--batch 64] [--repeat 3]``.

vmap runs each op once for the whole batch through its batching rule (the convolution's
per-sample weight gradient as a grouped convolution), so the ratio loop/vmap is the
speed-up of the transform over the loop; the script checks both give the same gradients
and that no op fell back to the per-sample loop.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import torcia
import torcia.nn.functional as F
from torcia import nn
from torcia.func import functional_call, grad, vmap


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torcia.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(8 * 13 * 13, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torcia.randn(args.batch, 1, 28, 28)
    y = torcia.randint(0, 10, (args.batch,))

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a fallback to the loop would warn
        per_sample(params, x[:2], y[:2])

    def loop():
        grads = {k: [] for k in params}
        for i in range(args.batch):
            model.zero_grad()
            F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
            for k, p in model.named_parameters():
                grads[k].append(p.grad.clone())
        return grads

    t_vmap, batched = best_of(args.repeat, lambda: per_sample(params, x, y))
    t_loop, looped = best_of(args.repeat, loop)
    for k in params:
        np.testing.assert_allclose(batched[k].numpy(), torcia.stack(looped[k]).numpy(),
                                   rtol=1e-4, atol=1e-5)
    print(f"batch {args.batch}: vmap(grad) {t_vmap * 1e3:.1f} ms, loop {t_loop * 1e3:.1f} ms, "
          f"loop/vmap = {t_loop / t_vmap:.2f} (gradients equal)")


if __name__ == "__main__":
    main()
