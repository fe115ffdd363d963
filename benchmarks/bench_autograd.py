"""Forward + backward overhead on tiny tensors: torcia against PyTorch (where installed).

Each workload builds a small graph on shape-(4,) float32 leaves that require grad and runs
``backward()``, so the time is almost all graph recording and engine overhead:

- ``(a*b + a).sum()``: three recorded ops, one backward;
- a 10-op chain: ``sin, *, +, exp, *, tanh, -, *, sigmoid, sum``;
- the same chain through ``torcia.autograd.grad`` (no ``.grad`` accumulation).

Both libraries are timed in this one run (process CPU time, best of many short repeats,
single-threaded torch)
and printed as a table with torcia's ratio.

    python benchmarks/bench_autograd.py [--number 500] [--repeat 30] [--profile]

``--profile`` prints the top of a cProfile of the tiny case instead.
"""

from __future__ import annotations

import argparse
import time
import timeit

import torcia

try:
    import torch
except ImportError:
    torch = None


def _workloads(mod):
    a = mod.ones(4).requires_grad_()
    b = mod.arange(4, dtype=mod.float32).requires_grad_()

    def tiny():
        (a * b + a).sum().backward()

    def chain():
        y = a.sin()
        y = y * b
        y = y + a
        y = y.exp()
        y = y * 0.5
        y = y.tanh()
        y = y - b
        y = y * y
        y = y.sigmoid()
        y.sum().backward()

    def chain_grad():
        y = ((((a.sin() * b + a).exp() * 0.5).tanh() - b) ** 2).sigmoid().sum()
        mod.autograd.grad(y, (a, b))

    def forward_only():
        (a * b + a).sum()

    return {"(a*b + a).sum() fwd": forward_only, "(a*b + a).sum() fwd+bwd": tiny,
            "10-op chain fwd+bwd": chain, "10-op chain autograd.grad": chain_grad}


def _best_us(fn, number, repeat):
    fn()
    # CPU time of this process, best of many short windows: robust on a shared machine
    times = timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)
    return min(times) / number * 1e6


def measure(number=500, repeat=30):
    """Best time per call in µs: ``{workload: {library: us}}``."""
    libs = {"torcia": torcia}
    if torch is not None:
        torch.set_num_threads(1)
        libs["torch"] = torch
    results = {}
    for lib, mod in libs.items():
        for name, fn in _workloads(mod).items():
            results.setdefault(name, {})[lib] = _best_us(fn, number, repeat)
    return results


def table(results):
    has_torch = any("torch" in r for r in results.values())
    head = f"{'workload':<28}{'torcia µs':>11}"
    if has_torch:
        head += f"{'torch µs':>11}{'ratio':>8}"
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        line = f"{name:<28}{r['torcia']:>11.1f}"
        if has_torch:
            line += f"{r['torch']:>11.1f}{r['torcia'] / r['torch']:>7.2f}x"
        lines.append(line)
    return "\n".join(lines)


def profile(number=3000):
    import cProfile
    import pstats

    fn = _workloads(torcia)["(a*b + a).sum() fwd+bwd"]
    fn()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(number):
        fn()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.profile:
        profile()
        return
    print(table(measure(args.number, args.repeat)))


if __name__ == "__main__":
    main()
