"""torcia.compile against eager torcia, eager PyTorch and torch.compile: training steps.

The workloads are those of ``bench_training.py`` (MLP 784-512-512-10 batch 128 SGD
momentum; CNN batch 64 Adam; 2-layer pre-norm transformer d=128 seq 64 batch 16 AdamW;
LSTM 64->128 seq 32 batch 32 SGD), built by the same code for both frameworks. A step is
``zero_grad``, forward, ``backward``, ``opt.step()``:

- torcia compiled: the whole step in one ``torcia.compile``'d function (inductor): the
  forward and backward captured and fused, ``zero_grad`` and ``opt.step()`` replayed as
  opaque calls (their multi-tensor kernels run outside dispatch);
- PyTorch compiled: ``torch.compile(model)`` (inductor; AOTAutograd compiles the backward).

Rounds alternate between the variants and the table shows each one's median step time
(the machine is shared: single runs are noisy, alternating rounds spread the noise). Compile
times (the first call, which also runs the step): torcia cold (an empty kernel cache) and
from the cache (a fresh process would see the same: the kernels are loaded from disk), and
torch.compile's first call with an empty inductor cache.

    python benchmarks/bench_compile.py [--rounds 7] [--only mlp,lstm] [--no-torch-compile]
                                       [--module] [--threads 1] [--clock cpu] [--breakdown]

``--threads`` sets both frameworks' thread count (default: the CPU count) and ``--clock cpu``
times the process's CPU time (all its threads) instead of the wall clock, as in
``bench_training.py``: on a machine shared with other jobs, one thread and the CPU clock
compare the work each variant does rather than how long it waited for a core.
``--breakdown`` then times, in a separate run of each workload, every kernel of torcia's
compiled step (``torcia.compiler.kernel_profile``): the ops by time and what the step spends
outside them (guards, the replay's Python, the gradients handed to the leaves).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _lib(name):
    if name == "torch":
        import torch

        return torch
    import torcia

    return torcia


def mlp(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt, lib.randn(128, 784), lib.randint(0, 10, (128,))


def cnn(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    return model, opt, lib.randn(64, 1, 28, 28), lib.randint(0, 10, (64,))


def transformer(lib):
    nn = lib.nn
    lib.manual_seed(0)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(1000, 128)
            layer = nn.TransformerEncoderLayer(128, 4, dim_feedforward=512, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(128, 1000)

        def forward(self, tokens):
            return self.head(self.body(self.embed(tokens))).reshape(-1, 1000)

    model = LM()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt, lib.randint(0, 1000, (16, 64)), lib.randint(0, 1000, (16 * 64,))


def lstm(lib):
    nn = lib.nn
    lib.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(64, 128, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    model = Model()
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    return model, opt, lib.randn(32, 32, 64), lib.randint(0, 10, (32,))


WORKLOADS = {"mlp": mlp, "cnn": cnn, "transformer": transformer, "lstm": lstm}


def _eager(lib, model, opt, x, y):
    loss_fn = lib.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _torcia_compiled(lib, model, opt, x, y):
    loss_fn = lib.nn.functional.cross_entropy

    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = lib.compile(train_step)

    def step():
        compiled(x, y)

    return step, compiled


def _torcia_compiled_module(lib, model, opt, x, y):
    """``torcia.compile(model)`` as torch.compile is used below: the loss eager, the
    module's forward and (through its compiled backward) backward captured."""
    loss_fn = lib.nn.functional.cross_entropy
    cmodel = lib.compile(model)

    def step():
        opt.zero_grad()
        loss_fn(cmodel(x), y).backward()
        opt.step()

    return step, cmodel._compiled_forward


def _torch_compiled(lib, model, opt, x, y):
    loss_fn = lib.nn.functional.cross_entropy
    cmodel = lib.compile(model)

    def step():
        opt.zero_grad()
        loss_fn(cmodel(x), y).backward()
        opt.step()

    return step


def _first_call(step):
    start = time.perf_counter()  # compile time is waited for: the wall clock
    step()
    return time.perf_counter() - start


def run(name, rounds, number, torch_compile, module=False, threads=None, clock="wall"):
    import torcia
    import torcia.compiler
    from torcia.compiler import inductor

    threads = threads or os.cpu_count() or 1
    timer = CLOCKS[clock]
    torcia.set_num_threads(threads)

    variants = {}
    compile_times = {}
    variants["torcia eager"] = _eager(torcia, *WORKLOADS[name](torcia))
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCIA_CACHE_DIR"] = cache
        make = _torcia_compiled_module if module else _torcia_compiled
        step, compiled = make(torcia, *WORKLOADS[name](torcia))
        compile_times["torcia cold"] = _first_call(step)
        torcia.compiler.reset()
        inductor._loaded.clear()
        compile_times["torcia cached"] = _first_call(step)
        entry = compiled._entries[0]
        if entry.eager_reason is not None:
            compile_times["note"] = f"eager fallback: {entry.eager_reason}"
        else:
            nodes = entry.graph.nodes
            if entry.joint is not None:  # the compiled module: a forward and a backward
                nodes = nodes + entry.joint.bwd_graph.nodes
            # fused loops and the specialised ones (pooling, cross-entropy): built code
            built = sum(hasattr(n.fn, "path") for n in nodes)
            compile_times["note"] = f"{len(nodes)} ops, {built} generated kernels"
        variants["torcia compiled"] = step
        try:
            torch = _lib("torch")
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(threads)
            variants["torch eager"] = _eager(torch, *WORKLOADS[name](torch))
            if torch_compile:
                try:
                    tstep = _torch_compiled(torch, *WORKLOADS[name](torch))
                    compile_times["torch.compile cold"] = _first_call(tstep)
                    variants["torch.compile"] = tstep
                except Exception as exc:  # no compiler, an unsupported op: say so
                    compile_times["torch.compile cold"] = f"n/a ({type(exc).__name__})"
        times = {k: [] for k in variants}
        for v in variants.values():
            v()  # warm up
        for _ in range(rounds):
            for k, v in variants.items():
                start = timer()
                for _ in range(number):
                    v()
                times[k].append((timer() - start) / number)
    return {k: statistics.median(t) for k, t in times.items()}, compile_times


def breakdown(name, module=False, threads=None, clock="wall", steps=20) -> str:
    """torcia's compiled step of ``name`` with each kernel timed: a table of the ops by
    time per step, and the step's time outside the kernels."""
    import torcia
    import torcia.compiler

    timer = CLOCKS[clock]
    torcia.set_num_threads(threads or os.cpu_count() or 1)
    make = _torcia_compiled_module if module else _torcia_compiled
    with torcia.compiler.kernel_profile(timer) as prof:
        step, _ = make(torcia, *WORKLOADS[name](torcia))
        for _ in range(3):  # traced, checked, replayed
            step()
        prof.clear()
        start = timer()
        for _ in range(steps):
            step()
        total = (timer() - start) / steps
    outside = total - sum(prof.times.values()) / steps
    return (f"{name}: torcia compiled step {total * 1e3:.2f} ms, of which "
            f"{outside * 1e3:.2f} ms outside the kernels\n{prof.table(steps)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=2)
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--module", action="store_true",
                        help="torcia compiled as torcia.compile(model), the loss eager")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads for every variant (default: the CPU count)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="time the wall clock (default) or the process's CPU time")
    parser.add_argument("--breakdown", action="store_true",
                        help="then time each kernel of torcia's compiled step")
    args = parser.parse_args(argv)
    # torch.compile's first call, cold too: an empty inductor cache (read at torch's import)
    torch_cache = tempfile.TemporaryDirectory()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", torch_cache.name)
    cols = ["torcia eager", "torcia compiled", "torch eager", "torch.compile"]
    print(f"median step time of {args.rounds} alternating rounds x {args.number} steps "
          f"({args.clock} clock, {args.threads} thread(s) for every column, "
          f"{os.cpu_count()} cores, shared)")
    print(f"{'workload':<12}" + "".join(f"{c:>17}" for c in cols)
          + f"{'compiled/torch':>16}")
    notes = []
    for name in args.only.split(","):
        med, ct = run(name, args.rounds, args.number, not args.no_torch_compile,
                      args.module, args.threads, args.clock)
        cells = "".join(f"{med[c] * 1e3:14.2f} ms" if c in med else f"{'n/a':>17}"
                        for c in cols)
        ratio = (f"{med['torcia compiled'] / med['torch eager']:15.2f}x"
                 if "torch eager" in med else f"{'n/a':>16}")
        print(f"{name:<12}{cells}{ratio}", flush=True)
        fmt = {k: (f"{v:.2f} s" if isinstance(v, float) else v) for k, v in ct.items()}
        notes.append(f"{name}: compile " + ", ".join(f"{k} {v}" for k, v in fmt.items()))
    print("\n".join(notes))
    if args.breakdown:
        for name in args.only.split(","):
            print("\n" + breakdown(name, args.module, args.threads, args.clock), flush=True)


if __name__ == "__main__":
    main()
