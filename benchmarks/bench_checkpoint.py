"""Peak memory of one training step of a deep MLP (or a transformer encoder, ``--model
transformer``) with and without activation checkpointing.

Run: ``python benchmarks/bench_checkpoint.py``. Peak is measured with tracemalloc (numpy
reports its buffers to it), from just before the forward pass to the end of backward.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import torcia
from torcia import nn
from torcia.utils.checkpoint import checkpoint_sequential


def step(model, x, segments):
    for p in model.parameters():
        p.grad = None
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    out = model(x) if segments == 0 else checkpoint_sequential(model, segments, x)
    out.pow(2).mean().backward()
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--depth", type=int, default=32)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--segments", type=int, default=6)
    parser.add_argument("--model", choices=["mlp", "transformer"], default="mlp")
    args = parser.parse_args()
    torcia.manual_seed(0)
    if args.model == "mlp":
        model = nn.Sequential(*[nn.Sequential(nn.Linear(args.width, args.width), nn.GELU(),
                                              nn.Dropout(0.1)) for _ in range(args.depth)])
        x = torcia.randn(args.batch, args.width, requires_grad=True)
    else:
        # batch sequences of 64 tokens of width 128
        model = nn.Sequential(*[nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
                                for _ in range(args.depth)])
        x = torcia.randn(args.batch, 64, 128, requires_grad=True)
    width = args.width if args.model == "mlp" else 128
    print(f"{args.model} depth={args.depth} width={width} batch={args.batch} float32")
    for segments in (0, args.segments):
        peak, seconds = step(model, x, segments)
        label = "no checkpointing" if segments == 0 else f"checkpoint_sequential({segments})"
        print(f"{label:28s} peak {peak / 2**20:8.1f} MiB   step {seconds * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
