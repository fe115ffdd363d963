"""Per-op overhead on tiny tensors: torcia against NumPy and, where installed, PyTorch.

Each op runs on shape-(4,) float32 operands (4x4 for matrix products), so the time is
almost all framework overhead: argument handling, dtype promotion, kernel lookup, result
wrapping. All libraries are timed in this one run, best of several repeats, and printed
as a table with torcia's ratio to each.

    python benchmarks/bench_overhead.py [--number 5000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import time
import timeit

import numpy as np

import torcia

try:
    import torch
except ImportError:
    torch = None


def _operands(lib):
    """Two vectors, two matrices and an index in ``lib``'s types."""
    if lib == "numpy":
        v, w = np.ones(4, np.float32), np.arange(4, dtype=np.float32)
        m = np.eye(4, dtype=np.float32)
        return v, w, m, np.array([0, 2])
    mod = torcia if lib == "torcia" else torch
    v, w = mod.ones(4), mod.arange(4, dtype=mod.float32)
    return v, w, mod.eye(4), mod.tensor([0, 2])


def _cases(lib):
    """op name -> zero-argument callable, for one library."""
    v, w, m, idx = _operands(lib)
    acc = v.copy() if lib == "numpy" else v.clone()  # the in-place op's own target
    if lib == "numpy":
        return {
            "a + b": lambda: v + w,
            "a * 2.0": lambda: v * 2.0,
            "a += b": lambda: acc.__iadd__(w),
            "exp(a)": lambda: np.exp(v),
            "a.sum()": lambda: v.sum(),
            "sum(dim=0)": lambda: m.sum(axis=0),
            "m @ m": lambda: m @ m,
            "a[1]": lambda: v[1],
            "a[idx]": lambda: v[idx],
            "view(2, 2)": lambda: v.reshape(2, 2),
            "cat([a, b])": lambda: np.concatenate([v, w]),
            "zeros(4)": lambda: np.zeros(4, np.float32),
        }
    mod = torcia if lib == "torcia" else torch
    return {
        "a + b": lambda: v + w,
        "a * 2.0": lambda: v * 2.0,
        "a += b": lambda: acc.__iadd__(w),
        "exp(a)": lambda: mod.exp(v),
        "a.sum()": lambda: v.sum(),
        "sum(dim=0)": lambda: m.sum(0),
        "m @ m": lambda: m @ m,
        "a[1]": lambda: v[1],
        "a[idx]": lambda: v[idx],
        "view(2, 2)": lambda: v.view(2, 2),
        "cat([a, b])": lambda: mod.cat([v, w]),
        "zeros(4)": lambda: mod.zeros(4),
    }


def measure(number=5000, repeat=20):
    """Best time per call in ns: ``{op: {library: ns}}``.

    Time is this thread's CPU time (PyTorch is held to one thread, so its work stays on
    it): other processes on a busy machine do not count, waiting for a core does not
    either. The libraries take turns within each repeat, so what load remains (caches,
    frequency) falls on all of them alike.
    """
    libs = ["torcia", "numpy"] + (["torch"] if torch is not None else [])
    if torch is not None:
        torch.set_num_threads(1)
    cases = {lib: _cases(lib) for lib in libs}
    table: dict = {}
    for op in cases["torcia"]:
        fns = {lib: cases[lib][op] for lib in libs}
        for fn in fns.values():
            fn()  # warm-up: the first call builds kernel tables
        best = dict.fromkeys(libs, float("inf"))
        for _ in range(repeat):
            for lib, fn in fns.items():
                t = timeit.Timer(fn, timer=time.thread_time).timeit(number)
                best[lib] = min(best[lib], t / number * 1e9)
        table[op] = best
    return table


def render(table) -> str:
    has_torch = any("torch" in row for row in table.values())
    head = f"{'op':<14}{'torcia ns':>11}{'numpy ns':>10}{'/numpy':>8}"
    if has_torch:
        head += f"{'torch ns':>10}{'/torch':>8}"
    lines = [head, "-" * len(head)]
    for op, row in table.items():
        line = f"{op:<14}{row['torcia']:>11.0f}{row['numpy']:>10.0f}"
        line += f"{row['torcia'] / row['numpy']:>7.2f}x"
        if has_torch:
            line += f"{row['torch']:>10.0f}{row['torcia'] / row['torch']:>7.2f}x"
        lines.append(line)
    if not has_torch:
        lines.append("(PyTorch not installed: no torch column)")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=5000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=20, help="repeats; the best is kept")
    args = parser.parse_args(argv)
    print(render(measure(args.number, args.repeat)))


if __name__ == "__main__":
    main()
