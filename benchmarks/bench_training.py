"""Training-step workloads: torcia with the C++ plugin, torcia on NumPy alone, and PyTorch.

The same code builds each workload for both frameworks (their APIs match), so what is
timed is the framework. torcia without its plugin runs in a child process started with
``TORCIA_DISABLE_PLUGINS=cpu``; everything is measured in this one run and printed as a
table with the ratio of torcia (with the plugin) to PyTorch.

    python benchmarks/bench_training.py [--repeat 5] [--only cnn,mlp] [--clock cpu]

``--clock cpu`` times the process's CPU time (all its threads) instead of the wall clock:
on a machine shared with other jobs the wall clock mostly measures the others, while CPU
time still compares the work each framework does (a framework that keeps two threads
busy pays for both).

Workloads (from the torcia-cpu issue): per-op overhead (forward+backward of
``(a*b + a).sum()`` on tiny tensors), an MLP 784-512-512-10 step (batch 128, SGD
momentum), a CNN step (conv 1->32, pool, conv 32->64, pool, linear 3136->128->10, batch
64, Adam), a 2-layer pre-norm transformer step (d=128, 4 heads, seq 64, batch 16, vocab
1000, AdamW), an LSTM step (input 64, hidden 128, seq 32, batch 32, SGD), and float32
GEMM at 1024 and 2048 in GFLOP/s beside NumPy's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def _lib(name):
    if name == "torch":
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        return torch
    import torcia

    return torcia


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = [time.perf_counter]


def _best(fn, repeat, number=1):
    clock = _clock[0]
    fn()
    times = []
    for _ in range(repeat):
        start = clock()
        for _ in range(number):
            fn()
        times.append((clock() - start) / number)
    return min(times)


def overhead(lib):
    a = lib.ones(4, requires_grad=True)
    b = lib.full((4,), 2.0, requires_grad=True)

    def step():
        (a * b + a).sum().backward()

    return step, 200


def _train_step(lib, model, opt, inputs, target, loss_fn):
    def step():
        opt.zero_grad()
        loss_fn(model(inputs), target).backward()
        opt.step()

    return step


def mlp(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = lib.randn(128, 784), lib.randint(0, 10, (128,))
    return _train_step(lib, model, opt, x, y, nn.functional.cross_entropy), 1


def cnn(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    x, y = lib.randn(64, 1, 28, 28), lib.randint(0, 10, (64,))
    return _train_step(lib, model, opt, x, y, nn.functional.cross_entropy), 1


def transformer(lib):
    nn = lib.nn
    lib.manual_seed(0)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(1000, 128)
            layer = nn.TransformerEncoderLayer(128, 4, dim_feedforward=512, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.body = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(128, 1000)

        def forward(self, tokens):
            return self.head(self.body(self.embed(tokens))).reshape(-1, 1000)

    model = LM()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = lib.randint(0, 1000, (16, 64))
    target = lib.randint(0, 1000, (16 * 64,))
    return _train_step(lib, model, opt, tokens, target, nn.functional.cross_entropy), 1


def lstm(lib):
    nn = lib.nn
    lib.manual_seed(0)
    rnn = nn.LSTM(64, 128, batch_first=True)
    head = nn.Linear(128, 10)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = rnn, head

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    model = Model()
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    x, y = lib.randn(32, 32, 64), lib.randint(0, 10, (32,))
    return _train_step(lib, model, opt, x, y, nn.functional.cross_entropy), 1


WORKLOADS = {"overhead": overhead, "mlp": mlp, "cnn": cnn, "transformer": transformer,
             "lstm": lstm}


def time_workloads(lib_name, names, repeat):
    """Seconds per step for each workload (None where the framework lacks a piece)."""
    lib = _lib(lib_name)
    out = {}
    for name in names:
        try:
            step, number = WORKLOADS[name](lib)
        except (AttributeError, ImportError, NotImplementedError) as exc:
            out[name] = f"n/a: {type(exc).__name__}: {exc}"[:70]
            continue
        out[name] = _best(step, repeat, number)
    return out


def gemm(lib_name, repeat):
    lib = np if lib_name == "numpy" else _lib(lib_name)
    out = {}
    for n in (1024, 2048):
        if lib is np:
            a = np.random.default_rng(0).random((n, n), dtype=np.float32)
            b = a.copy()
        else:
            a, b = lib.rand(n, n), lib.rand(n, n)
        seconds = _best(lambda a=a, b=b: a @ b, repeat)
        out[f"gemm{n}"] = 2 * n ** 3 / seconds / 1e9
    return out


def _child(lib_name, names, repeat, clock):
    env = dict(os.environ)
    if lib_name == "torcia-numpy":
        env["TORCIA_DISABLE_PLUGINS"] = ",".join(
            filter(None, [env.get("TORCIA_DISABLE_PLUGINS"), "cpu"]))
    cmd = [sys.executable, __file__, "--child", "torcia", "--only", ",".join(names),
           "--repeat", str(repeat), "--clock", clock]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"{lib_name} run failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cell(v, unit="ms"):
    if isinstance(v, str) or v is None:
        return "n/a"
    return f"{v * 1e3:9.2f} ms" if unit == "ms" else f"{v:9.1f} GF/s"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default=",".join([*WORKLOADS, "gemm"]),
                        help="comma-separated workloads (default: all, and gemm)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="time the wall clock (default) or the process's CPU time")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _clock[0] = CLOCKS[args.clock]
    names = [n for n in args.only.split(",") if n in WORKLOADS or n == "gemm"]
    workloads = [n for n in names if n in WORKLOADS]
    if args.child:
        result = time_workloads(args.child, workloads, args.repeat)
        if "gemm" in names:
            result.update(gemm(args.child, args.repeat))
        print(json.dumps(result))
        return 0
    columns = {"torcia+cpu": _child("torcia", names, args.repeat, args.clock),
               "torcia (numpy)": _child("torcia-numpy", names, args.repeat, args.clock)}
    try:
        columns["pytorch"] = time_workloads("torch", workloads, args.repeat)
        if "gemm" in names:
            columns["pytorch"].update(gemm("torch", args.repeat))
    except ImportError:
        columns["pytorch"] = {}
    if "gemm" in names:
        columns["numpy"] = gemm("numpy", args.repeat)
    print(f"{'workload':<12}" + "".join(f"{c:>16}" for c in columns) + f"{'ratio':>10}")
    rows = workloads + ([k for k in ("gemm1024", "gemm2048")] if "gemm" in names else [])
    for name in rows:
        unit = "gf" if name.startswith("gemm") else "ms"
        cells = [columns[c].get(name) for c in columns]
        ours, theirs = cells[0], columns["pytorch"].get(name)
        ratio = ""
        if isinstance(ours, float) and isinstance(theirs, float):
            ratio = f"{(ours / theirs if unit == 'ms' else theirs / ours):9.2f}x"
        print(f"{name:<12}" + "".join(f"{_cell(v, unit):>16}" for v in cells) + f"{ratio:>10}")
        for c, v in zip(columns, cells):
            if isinstance(v, str):
                print(f"{'':<12}  {c}: {v}")
    print("ratio: torcia+cpu time / PyTorch time (for GEMM: PyTorch GFLOP/s / torcia's); "
          "below 1 means torcia is faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
